"""Operator actions as plans (``plan_unload``, ``plan_split``, ``plan_drain``, ``plan_activate``,
``plan_placement``), screened by the same vetoes; a veto is overridden only with ``force``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from balancer import explain
from balancer.cycle.life import _drained, _life_cycle_unloads, _serving, broker_life
from balancer.cycle.model import (
    Action,
    BrokerStateAction,
    CycleConfig,
    CyclePlan,
    LoadStats,
    Metric,
    PlaceAction,
    UnloadAction,
    _cycle_placement,
)
from balancer.cycle.placement import _danube_placements, _explains, _place, _place_action
from balancer.cycle.prediction import predict
from balancer.cycle.splits import _split_action
from balancer.cycle.vetoes import _veto
from balancer.decisions import Reason
from balancer.errors import BalancerError
from balancer.names import ProposerName
from balancer.placement.batch import place_many
from balancer.placement.place import filter_candidates
from balancer.registry import (
    DANUBE_PLACEMENT,
    get_split_algorithm,
)
from balancer.safety import matching_pattern
from balancer.snapshot import ClusterSnapshot
from balancer.units import Seconds


def _operator_plan(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    actions: list[Action],
    serving: list[str],
    serving_before: list[str] | None = None,
) -> CyclePlan:
    """An operator's plan; its statistics over ``serving`` after it, and before it over
    ``serving_before`` (the same brokers unless the plan takes one out, as a drain does)."""
    usage = snapshot.weighted_usage(config.pulsar.weights)
    before = LoadStats.of({n: usage[n] for n in (serving_before or serving)})
    return CyclePlan(
        reason=str(Reason.OPERATOR),
        strategy=ProposerName.OPERATOR,
        actions=tuple(actions),
        before=before,
        after=predict(snapshot, config.pulsar.weights, serving, actions),
        state=dict(state),
    )


def plan_unload(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    bundle: str,
    *,
    destination: str | None = None,
    force: bool = False,
    now: Seconds | None = None,
) -> CyclePlan:
    """An operator unloads ``bundle`` from its owner, to ``destination`` or wherever the
    configured placement chooses (never back to the owner), through the cycle's vetoes.

    ``force`` plans the move past a veto of cool-down, grace period, rate limit, blacklist or a
    destination refused by the placement filters, and the action records it; an unknown bundle,
    one without an owner, or a destination that is not a serving broker is refused whatever
    ``force`` says.
    """
    now = snapshot.now if now is None else now
    serving = _serving(snapshot, config, now)
    owner = snapshot.bundles[bundle].owner if bundle in snapshot.bundles else None
    recent = snapshot.moves_since(now - 3600)
    veto, why = _veto(bundle, owner, snapshot, config, now, recent)
    if owner is None and bundle in snapshot.bundles:
        veto, why = Reason.NOT_OWNER, f"{bundle} has no owner; nothing to unload"
    hard = veto in (Reason.UNKNOWN_BUNDLE, Reason.NOT_OWNER) or owner is None
    load = snapshot.bundles[bundle].short_term.throughput if bundle in snapshot.bundles else 0.0
    said = f"operator unload of {bundle} from {owner or 'nobody'}; " + explain.metric(
        "msgThroughput", load
    )
    if veto is not None:
        said = f"{why} ({said})"
    unload = UnloadAction(
        target=bundle,
        source=owner,
        destination=destination,
        reason=str(Reason.OPERATOR),
        explanation=said,
        metric=Metric("msgThroughput", load, "bytes/s"),
        veto=veto,
        forced=force and veto is not None and not hard,
        strategy=ProposerName.OPERATOR,
    )
    if not unload.is_planned and (hard or destination is None):
        return _operator_plan(snapshot, config, state, [unload], serving)
    if destination is not None:
        # A named destination is checked even when the unload is vetoed: the preview shows
        # every veto an override would take (cool-down and placement filter alike), and an
        # override takes nothing it did not show.
        if destination not in serving or destination == owner:
            why = (
                f"{destination} is the bundle's owner"
                if destination == owner
                else f"{destination} is not a serving broker"
            )
            vetoed = replace(
                unload, veto=Reason.NOT_SERVING, forced=False, explanation=f"{why} ({said})"
            )
            return _operator_plan(snapshot, config, state, [vetoed], serving)
        kept, _, rejections = filter_candidates(snapshot, bundle, config.pulsar, {}, serving)
        place = PlaceAction(
            target=bundle,
            source=owner,
            destination=destination,
            reason=str(Reason.OPERATOR),
            explanation=f"the operator chose {destination}",
            strategy=ProposerName.OPERATOR,
        )
        if destination not in kept:
            refused = next((r for r in rejections if r.broker == destination), None)
            detail = (
                f"{refused.filter} filter: {refused.reason}"
                + (f" ({refused.detail})" if refused.detail else "")
                if refused
                else "the placement filters"
            )
            place = replace(
                place,
                veto=Reason(refused.reason) if refused else Reason.NO_CANDIDATES,
                forced=force,
                explanation=f"{destination} is refused by {detail}",
            )
        if not unload.is_planned:
            # Vetoed itself: the filter's refusal is shown beside it, when there is one.
            shown: list[Action] = [unload, place] if place.veto is not None else [unload]
            return _operator_plan(snapshot, config, state, shown, serving)
        if not place.is_planned:
            vetoed = replace(unload, veto=place.veto, explanation=place.explanation)
            return _operator_plan(snapshot, config, state, [vetoed, place], serving)
        return _operator_plan(snapshot, config, state, [unload, place], serving)
    placement = _cycle_placement(config.strategies.placement)
    actions, remembered = _place(
        snapshot, config, dict(state.get(placement, {})), [unload], serving, placement
    )
    actions = [a for a in actions if a.target == bundle]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    return _operator_plan(snapshot, config, out_state, actions, serving)


def unload_destinations(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    *,
    now: Seconds | None = None,
) -> list[dict[str, Any]]:
    """Every broker as a destination for an operator's unload of ``bundle``, by name:
    ``{"broker", "eligible", "why", "warning"}``; ``why`` (None when eligible) says what
    refuses it: the bundle's owner, or a broker that is not serving (its state, or lost) —
    Pulsar refuses an inactive destination too. ``warning`` (None when none) names the placement
    filter that would not choose it and its numbers (Pulsar's filter chain: max topics,
    anti-affinity, even distribution; ``filter_candidates``): Pulsar takes ``unload
    --destinationBroker`` to any active broker, so it stays eligible, and the plan shows the
    filter's refusal as a veto an operator overrides knowingly.

    Raises:
        BalancerError: an unknown bundle (``field`` "bundle").
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    now = snapshot.now if now is None else now
    owner = snapshot.bundles[bundle].owner
    serving = _serving(snapshot, config, now)
    # The filters over every serving broker, the owner too, as ``plan_unload`` checks a
    # destination (Pulsar counts the owner's holdings in the anti-affinity spread).
    kept, _, rejections = filter_candidates(snapshot, bundle, config.pulsar, {}, serving)
    refused = {r.broker: r for r in rejections}
    out = []
    for name in sorted(snapshot.brokers):
        why: str | None = None
        warning: str | None = None
        if name == owner:
            why = "the bundle's owner"
        elif name not in serving:
            state = snapshot.brokers[name].state
            why = f"not serving ({state})" if state != "active" else "not serving (lost)"
        elif name not in kept:
            rejection = refused.get(name)
            warning = (
                f"{rejection.filter} filter: {rejection.detail or rejection.reason}"
                if rejection
                else "the placement filters"
            )
        out.append({"broker": name, "eligible": why is None, "why": why, "warning": warning})
    return out


def plan_split(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    algorithm: str | None = None,
    positions: Sequence[int] | None = None,
    *,
    force: bool = False,
) -> CyclePlan:
    """An operator splits ``bundle`` with ``algorithm`` (default: the configured one) at its
    boundaries; the children are unowned and are placed by the next lookup or cycle (Pulsar's
    ``loadBalancerAutoUnloadSplitBundlesEnabled``). A blacklisted bundle is vetoed unless
    ``force``.

    Raises:
        UnknownStrategy: an unknown algorithm.
        BalancerError: an unknown bundle (``field`` "bundle"), missing or bad positions.
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    name = get_split_algorithm(algorithm or config.strategies.split_algorithm)[0]
    action = _split_action(
        snapshot, config, bundle, name, positions, f"operator split of {bundle}", "Operator"
    )
    pattern = matching_pattern(bundle, config.safety.blacklist)
    if action.veto is None and pattern is not None:
        action = replace(
            action,
            veto=Reason.BLACKLISTED,
            forced=force,
            explanation=f"{bundle} matches the blacklist pattern {pattern!r}; "
            + action.explanation,
        )
    serving = _serving(snapshot, config, snapshot.now)
    return _operator_plan(
        snapshot, config, {}, [replace(action, strategy=ProposerName.OPERATOR)], serving
    )


def plan_drain(
    snapshot: ClusterSnapshot, config: CycleConfig, state: Mapping[str, Any], broker: str
) -> CyclePlan:
    """An operator drains ``broker``: it leaves the active set and every bundle it owns is
    re-placed in this plan; once all have a new owner it is drained. Vetoed (NotEnoughBrokers)
    when no other serving broker would be left.

    Raises:
        BalancerError: an unknown broker (``field`` "broker").
    """
    if broker not in snapshot.brokers:
        raise BalancerError(f"unknown broker {broker!r}", field="broker")
    now = snapshot.now
    current = snapshot.brokers[broker].state
    serving_before = _serving(snapshot, config, now)
    serving = [n for n in serving_before if n != broker]
    change = BrokerStateAction(
        target=broker,
        previous=current,
        state="draining",
        reason=str(Reason.DRAIN),
        explanation=f"operator drains {broker}: its {len(snapshot.owned_by(broker))} bundle(s) "
        "move away",
        strategy=ProposerName.OPERATOR,
    )
    if not serving:
        vetoed = replace(
            change,
            veto=Reason.NOT_ENOUGH_BROKERS,
            explanation=f"draining {broker} would leave no serving broker",
        )
        return _operator_plan(snapshot, config, state, [vetoed], serving_before)
    if current == "draining":
        change = replace(change, explanation=f"{broker} is draining already")
    brokers = {**snapshot.brokers, broker: replace(snapshot.brokers[broker], state="draining")}
    draining = ClusterSnapshot(
        snapshot.now, brokers, snapshot.bundles, snapshot.namespaces, snapshot.recently_unloaded
    )
    # Only this broker's bundles: other draining brokers move at the next cycle.
    unloads = [
        u
        for u in _life_cycle_unloads(draining, [], {broker}, now, config.safety)
        if u.source == broker
    ]
    placement = _cycle_placement(config.strategies.placement)
    actions, remembered = _place(
        draining, config, dict(state.get(placement, {})), unloads, serving, placement
    )
    actions = [
        a for a in actions if isinstance(a, UnloadAction | PlaceAction) and a.source == broker
    ]
    drained = [a for a in _drained(draining, actions, []) if a.target == broker]
    actions = [change, *actions, *drained]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    return _operator_plan(draining, config, out_state, actions, serving, serving_before)


def plan_activate(snapshot: ClusterSnapshot, config: CycleConfig, broker: str) -> CyclePlan:
    """An operator returns ``broker`` to the active set (it takes bundles again).

    Raises:
        BalancerError: an unknown broker (``field`` "broker").
    """
    if broker not in snapshot.brokers:
        raise BalancerError(f"unknown broker {broker!r}", field="broker")
    current = snapshot.brokers[broker].state
    change = BrokerStateAction(
        target=broker,
        previous=current,
        state="active",
        reason=str(Reason.OPERATOR),
        explanation=f"operator activates {broker} (was {current})",
        strategy=ProposerName.OPERATOR,
    )
    serving = _serving(snapshot, config, snapshot.now)
    lost, _ = broker_life(snapshot, config.safety, snapshot.now)
    # After it, the broker serves too (unless lost): the figures after are over it as well.
    after = serving if broker in serving or broker in lost else [*serving, broker]
    return _operator_plan(snapshot, config, {}, [change], after, serving)


def plan_placement(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    bundles: Sequence[str],
    now: Seconds | None = None,
) -> CyclePlan:
    """Place unowned ``bundles`` with the configured placement over the serving brokers (a
    client's lookup of a topic whose bundle nobody owns): the cycle's placement step alone."""
    now = snapshot.now if now is None else now
    serving = _serving(snapshot, config, now)
    placement = _cycle_placement(config.strategies.placement)
    wanted = [b for b in bundles if b in snapshot.bundles and snapshot.bundles[b].owner is None]
    explain = _explains(wanted, serving)
    actions: list[Action] = []
    remembered: dict[str, Any] = {}
    if wanted and placement in DANUBE_PLACEMENT:
        placements, remembered = _danube_placements(
            snapshot, config, dict(state.get(placement, {})), wanted, serving, {}, placement
        )
    elif wanted:
        placements, after = place_many(
            snapshot,
            wanted,
            config.pulsar,
            {**state.get(placement, {}), "preallocated": {}},
            strategy=placement,
            candidates=serving,
            explain=explain,
        )
        remembered = {k: v for k, v in after.items() if k != "preallocated"}
    if wanted:
        actions = [_place_action(p, placement, "", explained=explain) for p in placements]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    plan = _operator_plan(snapshot, config, out_state, actions, serving)
    return replace(plan, reason=str(Reason.LEAST_LOADED), strategy=placement)
