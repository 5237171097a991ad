"""Fulcrum's safety vetoes on every unload and split: ownership, cool-down, Pulsar's grace period,
the move rate limit, the blacklist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from balancer import explain
from balancer.cycle.model import CycleConfig, LoadStats, Metric, UnloadAction
from balancer.decisions import METRIC_UNITS, Reason, Unload
from balancer.safety import matching_pattern
from balancer.snapshot import ClusterSnapshot
from balancer.units import Seconds


def screen_unloads(
    unloads: Iterable[Unload],
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    now: Seconds,
    moving: set[str],
    lost: Sequence[str],
    strategy: str,
    before: LoadStats,
    shed_stats: Mapping[str, Any] | None = None,
) -> list[UnloadAction]:
    """A strategy's unloads as actions, in order, each planned or vetoed by Fulcrum's safety rules:
    UnknownBundle, NotOwner (never two owners), Blacklisted, CoolDown (Fulcrum's
    ``bundle_cool_down_s``), GracePeriod (Pulsar's ``loadBalancerSheddingGracePeriodMinutes``),
    RateLimited (moves in the last hour, this batch included), AlreadyMoving (the bundle moves
    already in this cycle), BrokerLost (its source is lost). ``moving`` is updated in place."""
    out = []
    recent = snapshot.moves_since(now - 3600)
    planned = 0
    mean = explain.percent(before.avg_usage)
    heads: dict[tuple[str, str], str] = {}  # (source, reason) -> the sentence's start
    for unload in unloads:
        veto, why = _veto(unload.bundle, unload.source, snapshot, config, now, recent + planned)
        if veto is None and unload.bundle in moving:
            veto, why = Reason.ALREADY_MOVING, f"{unload.bundle} already moves this cycle"
        if veto is None and unload.source in lost:
            veto, why = Reason.BROKER_LOST, f"{unload.source} is lost; its bundles are re-placed"
        key = (unload.source, str(unload.reason))
        if key not in heads:
            figures = explain.shedder_figures(strategy, unload.source, shed_stats or {})
            if not figures:
                usage = before.brokers.get(unload.source)
                figures = (f"at {explain.percent(usage)} " if usage is not None else "") + (
                    f"(mean {mean})"
                )
            heads[key] = f"{strategy} {unload.reason}: {unload.source} {figures}; "
        said = heads[key] + explain.metric(unload.metric, unload.load)
        if unload.destination:
            said += f", to {unload.destination}"
        if veto is not None:
            said = f"{why} ({said})"
        else:
            planned += 1
            moving.add(unload.bundle)
        out.append(
            UnloadAction(
                target=unload.bundle,
                source=unload.source,
                destination=unload.destination,
                reason=str(unload.reason),
                explanation=said,
                metric=Metric(unload.metric, unload.load, METRIC_UNITS[unload.metric]),
                veto=veto,
                strategy=strategy,
            )
        )
    return out


def _veto(
    bundle: str,
    source: str | None,
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    now: Seconds,
    moves_last_hour: int,
) -> tuple[Reason | None, str]:
    """Fulcrum's safety rules for moving ``bundle`` off ``source``: (veto or None, sentence)."""
    safety = config.safety
    load = snapshot.bundles.get(bundle)
    if load is None:
        return Reason.UNKNOWN_BUNDLE, f"{bundle} is not a bundle of the cluster"
    if load.owner is None or load.owner != source:
        owner = load.owner or "nobody"
        return Reason.NOT_OWNER, f"{source or 'nobody'} does not own {bundle} (owner: {owner})"
    pattern = matching_pattern(bundle, safety.blacklist)
    if pattern is not None:
        return Reason.BLACKLISTED, f"{bundle} matches the blacklist pattern {pattern!r}"
    moved = snapshot.recently_unloaded.get(bundle)
    if moved is not None and now - moved < safety.bundle_cool_down_s:
        return Reason.COOL_DOWN, (
            f"moved {explain.seconds(now - moved)} ago; cool-down "
            f"{explain.seconds(safety.bundle_cool_down_s)}"
        )
    if moved is not None and now - moved < config.pulsar.grace_period_s:
        return Reason.GRACE_PERIOD, (
            f"unloaded {explain.seconds(now - moved)} ago; Pulsar's grace period "
            f"{explain.seconds(config.pulsar.grace_period_s)}"
        )
    if safety.max_moves_per_hour and moves_last_hour >= safety.max_moves_per_hour:
        return Reason.RATE_LIMITED, (
            f"{moves_last_hour} moves in the last hour; limit {safety.max_moves_per_hour} per hour"
        )
    return None, ""
