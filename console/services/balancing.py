"""Balancing writes: placement on lookup, the shedding tick, operator unloads.

Each applies a balancer decision atomically and records it (Decision) with an AuditEvent per
action, then publishes the change after commit.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from balancer import bundles as bundle_ops
from balancer.bundles import split_boundaries
from balancer.decisions import Placement, Reason, SheddingDecision, Skip, Unload
from balancer.errors import BalancerError, ImpossibleSplit
from balancer.hashing import format_hash, topic_hash
from balancer.placement.filters import should_anti_affinity_unload
from balancer.placement.place import place
from balancer.registry import get_placement_strategy, get_shedder, get_split_algorithm
from balancer.safety import SafetyConfig, drain_unloads, lost_brokers, screen_unloads
from balancer.snapshot import ClusterSnapshot
from balancer.splitting.algorithms import TopicLoad
from balancer.splitting.conditions import split_check
from balancer.stats import imbalance
from console import realtime, selectors
from console.models import AuditEvent, Broker, Bundle, ClusterSample, Decision, Namespace, TickLock
from console.services.errors import ConsoleError

log = logging.getLogger(__name__)
TICK_LOCK = "shedding-tick"


def _usage(snapshot: ClusterSnapshot) -> dict[str, float]:
    weights = selectors.pulsar_config_get().weights
    return {name: b.weighted_max_usage(weights) for name, b in snapshot.brokers.items()}


def _load_figures(usage: dict[str, float], *brokers: str | None) -> dict[str, Any]:
    """Usage fractions of the brokers an action touched, and the CV of all active ones."""
    figures: dict[str, Any] = {b: round(usage[b], 4) for b in brokers if b and b in usage}
    figures["cv"] = round(imbalance(usage.values()).cv, 4)
    return figures


def _place_all(
    snapshot: ClusterSnapshot,
    names: list[str],
    *,
    now: datetime,
    actor: AbstractBaseUser | None,
    why: str,
    sources: dict[str, str] | None = None,
    exclude: set[str] | None = None,
) -> list[Placement]:
    """Place unowned bundles one after the other; each sees the ones placed before it.

    ``sources`` maps an unloaded bundle to the broker it left: that broker is not a candidate
    (unless it is the only active one), so an unload always moves the bundle.
    """
    config = selectors.balancer_config_get()
    strategy = get_placement_strategy(config.placement)
    pulsar = selectors.pulsar_config_get(config)
    # What the strategy remembers (e.g. LeastResourceUsageWithWeight's usage history) persists;
    # preallocation lives only for this batch, since ownership is written at once.
    state: dict[str, Any] = {**config.state.get(strategy, {}), "preallocated": {}}
    usage = _usage(snapshot)
    placements = []
    brokers = {b.name: b for b in Broker.objects.all()}
    active = [n for n, b in snapshot.brokers.items() if b.is_active and n not in (exclude or ())]
    for name in names:
        source = (sources or {}).get(name)
        others = [n for n in active if n != source]
        candidates = others if others else active
        placement = place(snapshot, name, pulsar, state, candidates, strategy=strategy)
        state = placement.state
        placements.append(placement)
        decision = Decision.objects.create(
            at=now,
            kind=Decision.Kind.PLACE,
            strategy=strategy,
            reason=str(placement.reason),
            summary=f"{name} -> {placement.broker or 'nobody'}",
            details=placement.as_dict() | {"why": why},
        )
        if placement.broker is None:
            continue
        bundle = _bundle_by_name(name)
        bundle.owner = brokers[placement.broker]
        bundle.save(update_fields=["owner"])
        event = AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.PLACE,
            target=name,
            destination=placement.broker,
            reason=f"{why}; {placement.reason}: least long-term msg rate "
            f"({placement.scores.get(placement.broker, 0):.1f} msg/s)",
            decision=decision,
            load_before=_load_figures(usage, placement.broker),
        )
        realtime.publish(realtime.BUNDLE_MOVED, event.summary())
    remembered = {k: v for k, v in state.items() if k != "preallocated"}
    if remembered:
        config.state = {**config.state, strategy: remembered}
        config.save(update_fields=["state"])
    return placements


def _bundle_by_name(name: str, *, for_update: bool = False) -> Bundle:
    """The bundle row named ``tenant/ns/0xLOWER_0xUPPER``, locked when ``for_update``.

    Raises:
        ConsoleError: 400 for a malformed name, 404 for an unknown bundle.
    """
    try:
        parsed = bundle_ops.parse_bundle_name(name)
    except BalancerError as exc:
        raise ConsoleError(exc.message, field="bundle") from None
    rows = Bundle.objects.select_related("namespace", "owner")
    if for_update:
        rows = rows.select_for_update()
    try:
        return rows.get(
            namespace__name=parsed.namespace, lower=parsed.range.lower, upper=parsed.range.upper
        )
    except Bundle.DoesNotExist:
        raise ConsoleError(f"unknown bundle {name!r}", status=404, field="bundle") from None


def bundle_lookup(topic: str, *, now: datetime | None = None) -> dict[str, Any]:
    """Topic -> bundle -> owner; an unowned bundle is placed first with the configured strategy.

    Raises:
        ConsoleError: 400 for a malformed topic name, 404 for an unknown namespace, 409 when no
            broker can take the bundle.
    """
    now = now or timezone.now()
    try:
        namespace_name = bundle_ops.namespace_of_topic(topic)
    except BalancerError as exc:
        raise ConsoleError(exc.message, field="topic") from None
    with transaction.atomic():
        try:
            namespace = Namespace.objects.get(name=namespace_name)
        except Namespace.DoesNotExist:
            raise ConsoleError(
                f"unknown namespace {namespace_name!r}", status=404, field="topic"
            ) from None
        rows = list(namespace.bundles.order_by("lower").select_related("owner"))
        boundaries = [r.lower for r in rows] + [rows[-1].upper]
        point = topic_hash(topic)
        row = rows[bundle_ops.bundle_index_for(boundaries, point)]
        if row.owner is None:
            snapshot = selectors.cluster_snapshot_get(now=now)
            placement = _place_all(snapshot, [row.name], now=now, actor=None, why="lookup")[0]
            if placement.broker is None:
                raise ConsoleError(
                    f"no broker can take bundle {row.name}", status=409, field="topic"
                )
            row.refresh_from_db()
        return {
            "topic": topic,
            "hash": format_hash(point),
            "bundle": row.name,
            "owner": row.owner.name if row.owner else None,
        }


def _unload(
    bundle: Bundle,
    *,
    now: datetime,
    actor: AbstractBaseUser | None,
    reason: str,
    usage: dict[str, float],
    decision: Decision | None,
) -> AuditEvent:
    source = bundle.owner.name if bundle.owner else ""
    bundle.owner = None
    bundle.last_unloaded_at = now
    bundle.save(update_fields=["owner", "last_unloaded_at"])
    event = AuditEvent.objects.create(
        at=now,
        actor=actor,
        action=AuditEvent.Action.UNLOAD,
        target=bundle.name,
        source=source,
        reason=reason,
        decision=decision,
        load_before=_load_figures(usage, source),
    )
    realtime.publish(realtime.BUNDLE_MOVED, event.summary())
    return event


def bundle_unload(
    bundle_name: str, *, actor: AbstractBaseUser, now: datetime | None = None
) -> dict[str, Any]:
    """An operator unloads a bundle: it leaves its owner and is placed again at once.

    Raises:
        ConsoleError: 404 unknown bundle; 409 when the bundle has no owner (nothing to unload) or
            no other broker could take it.
    """
    now = now or timezone.now()
    with transaction.atomic():
        bundle = _bundle_by_name(bundle_name, for_update=True)
        if bundle.owner is None:
            raise ConsoleError(
                f"bundle {bundle_name} has no owner; nothing to unload", status=409, field="bundle"
            )
        snapshot = selectors.cluster_snapshot_get(now=now)
        event = _unload(
            bundle,
            now=now,
            actor=actor,
            reason="operator unload",
            usage=_usage(snapshot),
            decision=None,
        )
        snapshot = selectors.cluster_snapshot_get(now=now)
        placement = _place_all(
            snapshot,
            [bundle.name],
            now=now,
            actor=actor,
            why="after operator unload",
            sources={bundle.name: event.source},
        )[0]
        event.destination = placement.broker or ""
        event.save(update_fields=["destination"])
    return {
        "bundle": bundle.name,
        "source": event.source,
        "destination": placement.broker,
        "audit": event.pk,
    }


def _claim_tick(now: datetime, ttl_s: float) -> bool:
    TickLock.objects.get_or_create(
        name=TICK_LOCK, defaults={"locked_until": now - timedelta(seconds=1)}
    )
    holder = f"{socket.gethostname()}:{os.getpid()}"
    return bool(
        TickLock.objects.filter(name=TICK_LOCK, locked_until__lt=now).update(
            locked_until=now + timedelta(seconds=ttl_s), holder=holder
        )
    )


def _release_tick(now: datetime) -> None:
    TickLock.objects.filter(name=TICK_LOCK).update(locked_until=now - timedelta(seconds=1))


def _fill_load_after(snapshot: ClusterSnapshot, now: datetime) -> None:
    usage = _usage(snapshot)
    for event in AuditEvent.objects.filter(load_after__isnull=True, at__lt=now):
        brokers = [k for k in event.load_before if k != "cv"]
        event.load_after = _load_figures(usage, *brokers)
        event.save(update_fields=["load_after"])


def _safety() -> SafetyConfig:
    return SafetyConfig(
        bundle_cool_down_s=settings.FULCRUM_BUNDLE_COOL_DOWN_S,
        max_moves_per_hour=settings.FULCRUM_MAX_MOVES_PER_HOUR,
        blacklist=tuple(settings.FULCRUM_BLACKLIST),
        broker_timeout_s=settings.FULCRUM_BROKER_TIMEOUT_S,
    )


def _last_reports() -> dict[str, float | None]:
    return {
        b.name: b.latest_report.reported_at.timestamp() if b.latest_report else None
        for b in Broker.objects.select_related("latest_report")
    }


def _apply_unloads(
    unloads: list[Unload],
    *,
    decision: Decision,
    now: datetime,
    usage: dict[str, float],
    why: Callable[[Unload], str],
    exclude: set[str],
) -> None:
    """Unload, then place each bundle elsewhere (never on its source or an excluded broker)."""
    unloaded = []
    for unload in unloads:
        bundle = _bundle_by_name(unload.bundle)
        if bundle.owner is None or bundle.owner.name != unload.source:
            continue  # ownership changed since the snapshot; never unload from a non-owner
        _unload(bundle, now=now, actor=None, reason=why(unload), usage=usage, decision=decision)
        unloaded.append(unload.bundle)
    if not unloaded:
        return
    placements = _place_all(
        selectors.cluster_snapshot_get(now=now),
        unloaded,
        now=now,
        actor=None,
        why=f"{decision.strategy} unload",
        sources={u.bundle: u.source for u in unloads},
        exclude=exclude,
    )
    destinations = {p.bundle: p.broker for p in placements}
    for event in AuditEvent.objects.filter(decision=decision, action=AuditEvent.Action.UNLOAD):
        event.destination = destinations.get(event.target) or ""
        event.save(update_fields=["destination"])


def _broker_lifecycle(
    snapshot: ClusterSnapshot, now: datetime, usage: dict[str, float], safety: SafetyConfig
) -> set[str]:
    """Re-place the bundles of lost brokers and drain draining ones; returns the lost brokers."""
    lost = set(lost_brokers(snapshot, _last_reports(), safety))
    unloads = [
        Unload(b.name, b.owner, None, Reason.BROKER_LOST, b.short_term.throughput)
        for b in snapshot.bundles.values()
        if b.owner in lost
    ] + [u for u in drain_unloads(snapshot) if u.source not in lost]
    if unloads:
        decision = Decision.objects.create(
            at=now,
            kind=Decision.Kind.SHED,
            strategy="lifecycle",
            reason=str(unloads[0].reason),
            summary=f"re-place {len(unloads)} bundle(s) of "
            + ", ".join(sorted({u.source for u in unloads})),
            details={"lost": sorted(lost), "unloads": [u.as_dict() for u in unloads]},
        )
        _apply_unloads(
            unloads,
            decision=decision,
            now=now,
            usage=usage,
            why=lambda u: (
                f"broker {u.source} sent no load report for {safety.broker_timeout_s:g} s"
                if u.reason == Reason.BROKER_LOST
                else f"broker {u.source} is draining"
            ),
            exclude=lost,
        )
    for broker in Broker.objects.filter(state=Broker.State.DRAINING):
        if not broker.bundles.exists():
            broker.state = Broker.State.DRAINED
            broker.save(update_fields=["state"])
            AuditEvent.objects.create(
                at=now,
                action=AuditEvent.Action.DRAIN,
                target=broker.name,
                source=broker.name,
                reason="drain complete: no bundles left",
            )
    return lost


def shedding_tick_run(*, now: datetime | None = None, lock_ttl_s: float = 60) -> Decision | None:
    """One shedding cycle, cluster-wide: re-place the bundles of lost and draining brokers, run
    the configured shedder on a fresh snapshot, screen its unloads through the safety rules,
    apply them, place the unloaded bundles, and record everything.

    Returns the shedding decision; None, doing nothing more, when another tick holds the lock
    or shedding is disabled.
    """
    now = now or timezone.now()
    if not _claim_tick(now, lock_ttl_s):
        log.info("another shedding tick is running; skipped")
        return None
    try:
        with transaction.atomic():
            config = selectors.balancer_config_get()
            last = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
            if last is not None and now - last < timedelta(seconds=config.loop_interval_s * 0.9):
                return None  # not due yet: the configured loop interval is longer than beat's
            safety = _safety()
            snapshot = selectors.cluster_snapshot_get(now=now)
            _fill_load_after(snapshot, now)
            usage = _usage(snapshot)
            active = {n: u for n, u in usage.items() if snapshot.brokers[n].is_active}
            spread = imbalance(active.values())
            sample = ClusterSample.objects.create(
                at=now, mean_usage_fraction=spread.mean, std_usage_fraction=spread.std, cv=spread.cv
            )
            realtime.publish(
                realtime.CV_SAMPLED, {"at": now.isoformat(), "cv": sample.cv, "mean": spread.mean}
            )
            lost = _broker_lifecycle(snapshot, now, usage, safety)
            if config.is_auto_split_enabled:
                auto_split_run(selectors.cluster_snapshot_get(now=now), now=now)
            if not config.is_shedding_enabled or len(snapshot.brokers) - len(lost) < 2:
                return None
            snapshot = selectors.cluster_snapshot_get(now=now)
            name, shedder = get_shedder(config.shedder)
            result: SheddingDecision = shedder(
                snapshot, selectors.pulsar_config_get(config), dict(config.state.get(name, {}))
            )
            config.state = {**config.state, name: result.state}
            config.save(update_fields=["state"])
            moves = dict(snapshot.recently_unloaded)
            candidates = [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
            proposed, guarded = [], []
            for unload in result.unloads:
                if unload.source in lost:
                    continue
                # Pulsar skips an unload that cannot improve its anti-affinity group's spread.
                if should_anti_affinity_unload(snapshot, unload.bundle, unload.source, candidates):
                    proposed.append(unload)
                else:
                    guarded.append(Skip("bundle", unload.bundle, Reason.ANTI_AFFINITY))
            kept, refused = screen_unloads(proposed, snapshot, moves, safety)
            refused = guarded + refused
            decision = Decision.objects.create(
                at=now,
                kind=Decision.Kind.SHED,
                strategy=name,
                reason=str(result.reason),
                summary=_summary(result, kept),
                details=result.as_dict()
                | {"cv": spread.cv, "refused": [r.as_dict() for r in refused]},
            )
            _apply_unloads(
                kept,
                decision=decision,
                now=now,
                usage=usage,
                why=lambda u: (
                    f"{result.strategy} {u.reason}: {u.load / 1048576:.1f} MiB/s "
                    f"from {u.source} at {usage[u.source]:.1%} "
                    f"(mean {result.stats.get('avgUsage', spread.mean):.1%})"
                ),
                exclude=lost,
            )
            realtime.publish(
                realtime.DECISION_MADE,
                {
                    "id": decision.pk,
                    "at": now.isoformat(),
                    "strategy": name,
                    "reason": decision.reason,
                    "summary": decision.summary,
                },
            )
            return decision
    finally:
        _release_tick(now)


def _summary(result: SheddingDecision, kept: list[Unload]) -> str:
    if kept:
        refused = len(result.unloads) - len(kept)
        return (
            f"unload {len(kept)} bundle(s): "
            + ", ".join(f"{u.bundle} from {u.source}" for u in kept)
            + (f" ({refused} refused by the safety rules)" if refused else "")
        )
    if result.unloads:
        return f"{len(result.unloads)} unload(s) proposed, all refused by the safety rules"
    if result.reason == Reason.BALANCED:
        return "balanced: no broker above mean + threshold"
    return str(result.reason)


def broker_state_set(
    broker_name: str, state: str, *, actor: AbstractBaseUser, now: datetime | None = None
) -> Broker:
    """An operator drains a broker (its bundles move away at the next tick, then it is drained)
    or activates it again. Idempotent; audited.

    Raises:
        ConsoleError: 404 unknown broker; 400 for a state other than draining or active; 409 when
            draining would leave no active broker.
    """
    now = now or timezone.now()
    if state not in (Broker.State.DRAINING, Broker.State.ACTIVE):
        raise ConsoleError("state must be draining or active", field="state")
    with transaction.atomic():
        try:
            broker = Broker.objects.select_for_update().get(name=broker_name)
        except Broker.DoesNotExist:
            raise ConsoleError(
                f"unknown broker {broker_name!r}", status=404, field="broker"
            ) from None
        if broker.state == state:
            return broker
        others = Broker.objects.filter(state=Broker.State.ACTIVE).exclude(pk=broker.pk)
        if state == Broker.State.DRAINING and not others.exists():
            raise ConsoleError(
                f"draining {broker_name} would leave no active broker", status=409, field="broker"
            )
        previous = broker.state
        broker.state = state
        broker.save(update_fields=["state"])
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.DRAIN,
            target=broker.name,
            source=broker.name,
            reason=f"operator set {previous} -> {state}",
        )
    return broker


SPLIT_ALGORITHMS_WITHOUT_TOPICS = ("range_equally_divide", "specified_positions_divide")


def bundle_split(
    bundle_name: str,
    *,
    actor: AbstractBaseUser | None,
    algorithm: str | None = None,
    positions: list[int] | None = None,
    reason: str = "operator split",
    now: datetime | None = None,
) -> dict[str, Any]:
    """Cut a bundle at the algorithm's boundaries; the children are unowned (Pulsar's
    ``loadBalancerAutoUnloadSplitBundlesEnabled``) and placed at once. Audited.

    Raises:
        ConsoleError: 404 unknown bundle; 400 for an algorithm that needs per-topic stats (load
            reports carry bundle totals only) or missing positions; 409 when the algorithm finds
            no boundary or the bundle cannot be cut there.
    """
    now = now or timezone.now()
    config = selectors.balancer_config_get()
    name = get_split_algorithm(algorithm or config.split_algorithm)[0]
    if name not in SPLIT_ALGORITHMS_WITHOUT_TOPICS:
        raise ConsoleError(
            f"{name} needs per-topic hashes and rates, which load reports do not carry; "
            f"use one of {', '.join(SPLIT_ALGORITHMS_WITHOUT_TOPICS)}",
            field="algorithm",
        )
    _, split_at = get_split_algorithm(name)
    with transaction.atomic():
        bundle = _bundle_by_name(bundle_name, for_update=True)
        value = bundle.value
        try:
            # Reports carry the bundle's topic count, not its topics: stand-ins keep the count
            # (specified_positions_divide cuts only a bundle with two topics or more).
            stand_in = [TopicLoad("", value.range.lower)] * bundle.topics
            cuts = split_at(value.range, stand_in, positions, selectors.pulsar_config_get(config))
        except BalancerError as exc:
            raise ConsoleError(exc.message, field=exc.field or "positions") from None
        if not cuts:
            raise ConsoleError(
                f"{name} finds no boundary inside {bundle_name}", status=409, field="bundle"
            )
        namespace = bundle.namespace
        rows = list(namespace.bundles.order_by("lower"))
        boundaries = [r.lower for r in rows] + [rows[-1].upper]
        try:
            new = split_boundaries(boundaries, value.range, cuts)
        except ImpossibleSplit as exc:
            raise ConsoleError(exc.message, status=409, field="bundle") from None
        source = bundle.owner.name if bundle.owner else ""
        points = [p for p in new if value.range.lower <= p <= value.range.upper]
        bundle.delete()
        children = [
            Bundle.objects.create(namespace=namespace, lower=a, upper=b, last_unloaded_at=now)
            for a, b in itertools.pairwise(points)
        ]
        snapshot = selectors.cluster_snapshot_get(now=now)
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.SPLIT,
            target=bundle_name,
            source=source,
            reason=f"{reason}; {name} at " + ", ".join(format_hash(c) for c in sorted(cuts)),
            load_before=_load_figures(_usage(snapshot), source),
        )
        placements = _place_all(
            snapshot,
            [c.name for c in children],
            now=now,
            actor=actor,
            why=f"child of split {bundle_name}",
        )
    return {
        "bundle": bundle_name,
        "boundaries": [format_hash(c) for c in sorted(cuts)],
        "children": {p.bundle: p.broker for p in placements},
    }


def auto_split_run(snapshot: ClusterSnapshot, *, now: datetime) -> list[dict[str, Any]]:
    """Split every bundle over the auto-split limits (Pulsar's BundleSplitterTask), with the
    configured algorithm; a split that cannot be made is logged and skipped."""
    results = []
    for candidate in split_check(snapshot, selectors.pulsar_config_get()):
        try:
            results.append(
                bundle_split(
                    candidate.bundle,
                    actor=None,
                    reason=f"auto-split: {candidate.reason} "
                    f"{candidate.value:g} > {candidate.limit:g}",
                    now=now,
                )
            )
        except ConsoleError as exc:
            log.warning("auto-split of %s skipped: %s", candidate.bundle, exc.message)
    return results
