"""Applying a plan (balancer.cycle.apply_plan): one walk over the plan, whatever the sink."""

from dataclasses import replace

import pytest

from balancer.bundles import parse_bundle_name
from balancer.cycle import (
    LEFT,
    Action,
    ActionKind,
    BrokerStateAction,
    CycleConfig,
    LoadStats,
    Move,
    OwnersSink,
    PlaceAction,
    Refused,
    SplitAction,
    StalePlan,
    Strategies,
    UnloadAction,
    Verdict,
    apply_plan,
    apply_to_owners,
    plan_cycle,
    plan_drain,
    plan_split,
)
from balancer.cycle.model import CyclePlan
from tests.balancer import scenarios

NOW = scenarios.NOW
EMPTY = LoadStats.of({})


def _action(kind: ActionKind, target: str, source: str | None, destination: str | None) -> Action:
    said = {"reason": "Overloaded", "explanation": f"{kind} {target}"}
    if kind == ActionKind.UNLOAD:
        return UnloadAction(target=target, source=source, destination=destination, **said)
    if kind == ActionKind.PLACE:
        return PlaceAction(target=target, source=source, destination=destination, **said)
    if kind == ActionKind.SPLIT:
        return SplitAction(target=target, source=source, **said)
    assert source is not None
    assert destination is not None
    return BrokerStateAction(target=target, previous=source, state=destination, **said)


def _plan(*actions: Action) -> CyclePlan:
    return CyclePlan("Overloaded", "test", tuple(actions), EMPTY, EMPTY, {})


class Scripted:
    """A sink that answers each (method, target) as told (None by default) and records every
    call it was handed, in order."""

    def __init__(self, **answers: Verdict) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, str | None]] = []

    def _answer(self, method: str, action: Action, unload: Action | None = None) -> Verdict:
        self.calls.append((method, action.target, unload.target if unload else None))
        return self.answers.get(f"{method}_{action.target}")

    def unload(self, action: Action) -> Verdict:
        return self._answer("unload", action)

    def place(self, action: Action, unload: Action | None) -> Verdict:
        return self._answer("place", action, unload)

    def split(self, action: Action) -> Verdict:
        return self._answer("split", action)

    def broker_state(self, action: Action) -> Verdict:
        return self._answer("broker_state", action)


U, P, S, B = ActionKind.UNLOAD, ActionKind.PLACE, ActionKind.SPLIT, ActionKind.BROKER_STATE


def test_an_unload_and_its_placement_are_one_move_in_the_order_of_the_placements():
    plan = _plan(
        _action(U, "a", "x", "y"),
        _action(U, "b", "x", None),  # no broker takes it
        _action(P, "a", None, "y"),
        _action(P, "c", None, "z"),  # a bundle nobody owned
        _action(S, "d", "x", None),
        _action(B, "x", "draining", "drained"),
    )
    sink = Scripted()
    applied = apply_plan(plan, sink)
    assert sink.calls == [
        ("unload", "a", None),
        ("unload", "b", None),
        ("place", "a", "a"),  # handed with the unload that came before it
        ("place", "c", None),
        ("split", "d", None),
        ("broker_state", "x", None),
    ]
    a, b, a_placed, c, d, x = plan.actions
    assert applied.changes == [Move(a, a_placed), Move(None, c), d, x, Move(b, None)]
    assert [m.bundle for m in applied.changes if isinstance(m, Move)] == ["a", "c", "b"]
    assert applied.stale == []


def test_a_refused_action_skips_the_bundles_later_actions_and_is_listed():
    plan = _plan(
        _action(U, "a", "x", "y"),
        _action(U, "b", "x", "y"),
        _action(P, "a", None, "y"),
        _action(P, "b", None, "y"),
    )
    sink = Scripted(unload_a=Refused("a moved on"))
    applied = apply_plan(plan, sink)
    assert ("place", "a", "a") not in sink.calls
    assert ("place", "a", None) not in sink.calls
    assert applied.stale == [{"kind": "unload", "target": "a", "reason": "a moved on"}]
    assert applied.changes == [Move(plan.actions[1], plan.actions[3])]


def test_a_refusal_refuses_an_operators_plan_whole():
    plan = _plan(_action(U, "a", "x", "y"), _action(P, "a", None, "y"))
    sink = Scripted(place_a=Refused("a is in flight", code="InFlight"))
    with pytest.raises(StalePlan) as raised:
        apply_plan(plan, sink, refuse_stale=True)
    assert (raised.value.message, raised.value.field, raised.value.code) == (
        "a is in flight",
        "bundle",
        "InFlight",
    )


def test_an_action_left_to_someone_else_is_neither_a_change_nor_stale():
    plan = _plan(
        _action(U, "a", "lost", None),
        _action(P, "a", None, "y"),
        _action(B, "x", "draining", "drained"),
    )
    sink = Scripted(unload_a=LEFT, broker_state_x=LEFT)
    applied = apply_plan(plan, sink)
    assert sink.calls == [("unload", "a", None), ("broker_state", "x", None)]
    assert applied.changes == []
    assert applied.stale == []


def test_a_vetoed_action_is_never_handed_to_the_sink():
    vetoed = replace(_action(U, "a", "x", "y"), veto="CoolDown")
    forced = replace(_action(U, "b", "x", "y"), veto="CoolDown", forced=True)
    sink = Scripted()
    apply_plan(_plan(vetoed, forced), sink)
    assert sink.calls == [("unload", "b", None)]


def _reference(plan: CyclePlan, owners: dict, unloaded: dict) -> int:
    """The in-memory loop every simulator had before ``apply_plan``: kept as the test's
    reference."""
    moved = 0
    for action in plan.planned():
        if action.kind == ActionKind.UNLOAD:
            if owners.get(action.target) != action.source:
                continue
            owners[action.target] = None
            unloaded[action.target] = NOW
            moved += 1
        elif (
            action.kind == ActionKind.PLACE
            and action.destination is not None
            and owners.get(action.target) is None
        ):
            owners[action.target] = action.destination
    return moved


@pytest.mark.parametrize(
    "scenario", ["one_hot_broker", "broker_loss", "scale_out_5_to_10", "first_tick"]
)
@pytest.mark.parametrize("shedder", ["ThresholdShedder", "UniformLoadShedder", "FulcrumShedder"])
def test_the_owners_sink_applies_a_cycle_as_the_simulators_did(scenario, shedder):
    snap = getattr(scenarios, scenario)()
    config = CycleConfig(strategies=Strategies(shedder=shedder), pulsar=scenarios.EASY)
    plan = plan_cycle(snap, config, {})
    owners = {n: b.owner for n, b in snap.bundles.items()}
    expected, expected_unloaded = dict(owners), {}
    unloaded: dict[str, float] = {}
    moved = apply_to_owners(plan, owners, unloaded, NOW)
    assert moved == _reference(plan, expected, expected_unloaded)
    assert (owners, unloaded) == (expected, expected_unloaded)


def test_the_owners_sink_drains_a_broker_and_leaves_its_state_and_splits():
    snap = scenarios.one_hot_broker()
    config = CycleConfig(pulsar=scenarios.EASY)
    hot = max(snap.brokers, key=lambda b: sum(x.owner == b for x in snap.bundles.values()))
    drain = plan_drain(snap, config, {}, hot)
    owners = {n: b.owner for n, b in snap.bundles.items()}
    sink = OwnersSink(owners, {}, NOW)
    applied = apply_plan(drain, sink)
    assert hot not in owners.values()
    assert sink.unloads == len(drain.planned(ActionKind.UNLOAD)) > 0
    assert all(isinstance(c, Move) for c in applied.changes)  # its state change is left
    bundle = max(
        (n for n, b in snap.bundles.items() if b.owner),
        key=lambda n: parse_bundle_name(n).range.upper - parse_bundle_name(n).range.lower,
    )
    split = plan_split(snap, config, bundle)
    assert split.planned(ActionKind.SPLIT)
    before = dict(owners)
    assert apply_plan(split, OwnersSink(owners, {}, NOW)).changes == []
    assert owners == before
    # Applied again, the drain finds every bundle moved on: nothing twice.
    again = apply_plan(drain, OwnersSink(owners, {}, NOW))
    assert again.changes == []
    assert len(again.stale) == len(drain.planned(ActionKind.UNLOAD))
    assert owners == before


def test_the_owners_sink_never_places_a_bundle_someone_owns():
    owners: dict[str, str | None] = {"a": "x", "b": None}
    plan = _plan(_action(P, "a", None, "y"), _action(P, "b", None, "y"))
    applied = apply_plan(plan, OwnersSink(owners, {}, NOW))
    assert owners == {"a": "x", "b": "y"}
    assert applied.stale == [
        {
            "kind": "place",
            "target": "a",
            "reason": "a changed since the plan was made: expected owner nobody, "
            "its owner is now x",
        }
    ]
