"""The broker life cycle: lost brokers (silent past ``broker_timeout_s``) give their bundles
back, pending ones are left alone, draining ones give up every bundle and become drained.
"""

from __future__ import annotations

from collections.abc import Sequence

from balancer import explain
from balancer.cycle.model import (
    Action,
    ActionKind,
    BrokerStateAction,
    CycleConfig,
    Metric,
    UnloadAction,
)
from balancer.decisions import Reason
from balancer.names import ProposerName
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot
from balancer.units import Seconds


def broker_life(
    snapshot: ClusterSnapshot, safety: SafetyConfig, now: Seconds
) -> tuple[list[str], list[str]]:
    """(lost, pending) broker names: lost = reported at least once, then silent for longer than
    ``broker_timeout_s``; pending = never reported (never declared lost)."""
    lost, pending = [], []
    for name, broker in snapshot.brokers.items():
        if broker.reported_at is None:
            pending.append(name)
        elif now - broker.reported_at > safety.broker_timeout_s:
            lost.append(name)
    return lost, pending


def _life_cycle_unloads(
    snapshot: ClusterSnapshot,
    lost: Sequence[str],
    draining: set[str],
    now: Seconds,
    safety: SafetyConfig,
) -> list[UnloadAction]:
    """Unload every bundle of a lost or draining broker (mandatory: no veto applies)."""
    out = []
    lost_set = set(lost)
    for name, broker in snapshot.brokers.items():
        if name in lost_set:
            silent = now - (broker.reported_at or now)
            reason = Reason.BROKER_LOST
            why = (
                f"{name} sent no load report for {explain.seconds(silent)} "
                f"(timeout {explain.seconds(safety.broker_timeout_s)})"
            )
        elif broker.state == "draining" or name in draining:
            reason, why = Reason.DRAIN, f"{name} is draining"
        else:
            continue
        for bundle in snapshot.owned_by(name):
            load = snapshot.bundles[bundle].short_term.throughput
            out.append(
                UnloadAction(
                    target=bundle,
                    source=name,
                    destination=None,
                    reason=str(reason),
                    explanation=f"{why}; {explain.metric('msgThroughput', load)} to re-place",
                    metric=Metric("msgThroughput", load, "bytes/s"),
                    strategy=ProposerName.LIFECYCLE,
                )
            )
    return out


def _drained(
    snapshot: ClusterSnapshot, actions: list[Action], lost: Sequence[str]
) -> list[BrokerStateAction]:
    """A draining broker whose every bundle leaves this cycle (or that has none) is drained."""
    out = []
    placed = {a.target for a in actions if a.kind == ActionKind.PLACE and a.is_planned}
    for name, broker in snapshot.brokers.items():
        if broker.state != "draining" or name in lost:
            continue
        owned = snapshot.owned_by(name)
        if all(b in placed for b in owned):
            out.append(
                BrokerStateAction(
                    target=name,
                    previous="draining",
                    state="drained",
                    reason=str(Reason.DRAIN),
                    explanation=f"drain complete: {len(owned)} bundle(s) leave {name} this cycle",
                    strategy=ProposerName.LIFECYCLE,
                )
            )
    return out


def _serving(snapshot: ClusterSnapshot, config: CycleConfig, now: Seconds) -> list[str]:
    lost, _ = broker_life(snapshot, config.safety, now)
    return [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
