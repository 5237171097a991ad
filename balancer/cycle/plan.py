"""The whole cycle, ``plan_cycle``: life cycle, shedding with Pulsar's guard, vetoes, placement,
splits, prediction, in the order of CLI.md § ``cycle``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.cycle.guard import shed_guarded
from balancer.cycle.life import _drained, _life_cycle_unloads, broker_life
from balancer.cycle.model import (
    FULCRUM_SHEDDERS,
    ActionKind,
    CycleConfig,
    CyclePlan,
    LoadStats,
    _cycle_placement,
    _cycle_shedder,
)
from balancer.cycle.placement import _place
from balancer.cycle.prediction import predict
from balancer.cycle.splits import _auto_splits, _strategy_splits
from balancer.cycle.vetoes import screen_unloads
from balancer.danube.bundles import bundle_view
from balancer.decisions import Reason, SheddingDecision
from balancer.names import ProposerName, ShedderName
from balancer.snapshot import ClusterSnapshot
from balancer.units import Seconds


def plan_cycle(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    now: Seconds | None = None,
) -> CyclePlan:
    """One whole shedding cycle: life cycle, shedder with guards, safety vetoes, placement,
    auto-split (module docstring). Pure: the same inputs give the same plan.

    Args:
        snapshot: the cluster as reported; brokers' ``reported_at`` drives the life cycle.
        config: strategies, Pulsar tunables, safety limits.
        state: strategy name -> what it remembered; ``{}`` for a fresh start.
        now: seconds since the epoch (default ``snapshot.now``).

    Raises:
        UnknownStrategy: a strategy name the registry does not know.
        BalancerError: a strategy the cycle cannot run on bundles (``field`` names it).
    """
    now = snapshot.now if now is None else now
    shedder_name = _cycle_shedder(config.strategies.shedder)
    placement_name = _cycle_placement(config.strategies.placement)
    weights = config.pulsar.weights
    lost, pending = broker_life(snapshot, config.safety, now)
    serving = [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
    usage = snapshot.weighted_usage(weights)
    before = LoadStats.of({n: usage[n] for n in serving})

    unloads = _life_cycle_unloads(snapshot, lost, set(), now, config.safety)
    state_out = dict(state)
    decision: SheddingDecision | None = None
    if not config.is_shedding_enabled:
        shed_reason = str(Reason.DISABLED)
    elif len(serving) < 2:
        shed_reason = str(Reason.NOT_ENOUGH_BROKERS)
    else:
        # Lost brokers have left, as in Pulsar where their registration is gone. Danube reads
        # its topics: the bundles, in the adaptation of balancer.danube.bundles.
        danube = shedder_name == ShedderName.DANUBE
        decision = shed_guarded(
            shedder_name,
            bundle_view(snapshot, lost) if danube else snapshot.without_brokers(lost),
            config.danube
            if danube
            else (config if shedder_name in FULCRUM_SHEDDERS else config.pulsar),
            dict(state.get(shedder_name, {})),
            serving,
        )
        state_out[shedder_name] = decision.state
        shed_reason = str(decision.reason)
        moving = {a.target for a in unloads}
        unloads += screen_unloads(
            decision.unloads,
            snapshot,
            config,
            now,
            moving,
            lost,
            shedder_name,
            before,
            decision.stats,
        )
    actions, placement_state = _place(
        snapshot, config, dict(state.get(placement_name, {})), unloads, serving, placement_name
    )
    if placement_state:
        state_out[placement_name] = placement_state
    actions += _drained(snapshot, actions, lost)
    moving = {a.target for a in actions if a.kind == ActionKind.UNLOAD and a.is_planned}
    if decision is not None and decision.splits and config.safety.is_auto_split_enabled:
        # A shedder's "too big to move" is a split only where automatic splits are on; else
        # the shedder's skip (SoleBundle) says it, for an operator to split.
        splits = _strategy_splits(snapshot, config, decision, moving, now)
        actions += splits
        moving |= {a.target for a in splits}
    if config.safety.is_auto_split_enabled:
        actions += _auto_splits(snapshot, config, moving)
    shed_acted = any(
        a.kind == ActionKind.UNLOAD and a.strategy == shedder_name and a.is_planned for a in actions
    )
    life = [
        a for a in actions if a.strategy == ProposerName.LIFECYCLE and a.kind == ActionKind.UNLOAD
    ]
    reason = shed_reason if shed_acted or not life else life[0].reason
    return CyclePlan(
        reason=reason,
        strategy=shedder_name,
        actions=tuple(actions),
        before=before,
        after=predict(snapshot, weights, serving, actions),
        state=state_out,
        shedding=decision,
        lost=tuple(lost),
        pending=tuple(pending),
    )
