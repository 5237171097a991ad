"""The cycle (balancer.cycle): every step, the plan's numbers and words, operator plans."""

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancer.config import PulsarConfig
from balancer.cycle import (
    ActionKind,
    BrokerStateAction,
    CycleConfig,
    LoadStats,
    PlaceAction,
    Strategies,
    UnloadAction,
    apply_to_owners,
    plan_activate,
    plan_cycle,
    plan_drain,
    plan_placement,
    plan_split,
    plan_unload,
    predict,
)
from balancer.cycle.placement import _place
from balancer.decisions import METRIC_UNITS, Reason
from balancer.errors import BalancerError, UnknownStrategy
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.load_model import LoadModel
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from tests.balancer import scenarios

MIB = 1024 * 1024
NOW = scenarios.NOW
EASY = scenarios.EASY


def config(shedder="ThresholdShedder", **kw):
    return CycleConfig(
        strategies=Strategies(
            shedder=shedder, placement=kw.pop("placement", "LeastLongTermMessageRate")
        ),
        pulsar=kw.pop("pulsar", EASY),
        safety=kw.pop("safety", SafetyConfig(bundle_cool_down_s=0)),
        **kw,
    )


def test_one_hot_broker_unloads_each_followed_by_its_placement():
    snap = scenarios.one_hot_broker()
    plan = plan_cycle(snap, config(), {})
    assert plan.reason == "Overloaded"
    kinds = [a.kind for a in plan.actions]
    unloads = plan.planned(ActionKind.UNLOAD)
    assert unloads
    assert {a.source for a in unloads} == {"b1"}
    for unload in unloads:
        place = plan.actions[plan.actions.index(unload) + 1]
        assert (place.kind, place.target, place.source) == ("place", unload.target, "b1")
        assert unload.destination == place.destination != "b1"
    assert kinds.count("unload") == kinds.count("place")
    assert plan.after.cv < plan.before.cv
    assert plan.after.brokers["b1"] < plan.before.brokers["b1"]
    assert "CV 0." in plan.summary()
    assert "unload(s)" in plan.summary()
    doc = plan.as_dict()
    assert doc["stats"]["before"]["maxOverMean"] == pytest.approx(plan.before.max_over_mean)
    assert doc["shedding"]["reason"] == "Overloaded"
    assert plan.state["ThresholdShedder"]["brokerAvgResourceUsage"]["b1"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    "shedder",
    ["ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder", "TransferShedder"],
)
def test_every_strategy_explains_its_unloads_with_units(shedder):
    snap = scenarios.scale_out_5_to_10()
    state: dict = {}
    for _ in range(6):  # hit counters (AvgShedder, TransferShedder) need a few cycles
        plan = plan_cycle(
            snap, config(shedder, pulsar=replace(EASY, overloaded_threshold_fraction=0.6)), state
        )
        state = plan.state
        if plan.planned(ActionKind.UNLOAD):
            break
    unloads = plan.planned(ActionKind.UNLOAD)
    assert unloads, plan.reason
    words = {"bytes/s": "iB/s", "msg/s": "msg/s"}
    for action in unloads:
        assert action.metric.unit == METRIC_UNITS[action.metric.name]
        assert words[action.metric.unit] in action.explanation
        assert action.explanation.startswith(f"{shedder} ")
        assert " %" in action.explanation  # the source's usage, in percent
    for place in plan.planned(ActionKind.PLACE):
        assert place.explanation


def test_avg_shedder_destination_is_honoured_unless_switched_off():
    snap = scenarios.scale_out_5_to_10()
    state: dict = {}
    for _ in range(3):
        plan = plan_cycle(snap, config("AvgShedder"), state)
        state = plan.state
        if plan.planned(ActionKind.UNLOAD):
            break
    chosen = {u.bundle: u for u in plan.shedding.unloads}
    places = plan.planned(ActionKind.PLACE)
    assert places
    for place in places:
        assert place.reason == "StrategyDestination"
        assert place.destination == chosen[place.target].destination
    again = plan_cycle(snap, config("AvgShedder", is_destination_honoured=False), state | {})
    assert all(p.reason != "StrategyDestination" for p in again.planned(ActionKind.PLACE))


def d_owns_two() -> ClusterSnapshot:
    """c, d and e; d owns two of t/ns's bundles, c one, e none: even distribution refuses d."""
    brokers = {n: BrokerLoad(n, reported_at=NOW) for n in ("c", "d", "e")}
    bundles = {
        "t/ns/0x00000000_0x10000000": BundleLoad("t/ns/0x00000000_0x10000000", "c"),
        "t/ns/0x10000000_0x20000000": BundleLoad("t/ns/0x10000000_0x20000000", "d"),
        "t/ns/0x20000000_0x30000000": BundleLoad("t/ns/0x20000000_0x30000000", "d"),
    }
    return ClusterSnapshot(NOW, brokers, bundles)


def test_a_destination_refused_by_the_filters_is_placed_by_the_placement():
    snap = d_owns_two()
    unload = UnloadAction(
        target="t/ns/0x00000000_0x10000000",
        source="c",
        destination="d",
        reason="Overloaded",
        explanation="x",
        strategy="AvgShedder",
    )
    actions, _ = _place(snap, config(), {}, [unload], ["c", "d", "e"], "LeastLongTermMessageRate")
    place = actions[1]
    assert place.destination == "e"
    assert place.explanation.startswith("AvgShedder's destination d was refused by")
    # A destination that is not serving goes to the placement without a word about it.
    gone = replace(unload, destination="zz")
    actions, _ = _place(snap, config(), {}, [gone], ["c", "d", "e"], "LeastLongTermMessageRate")
    assert actions[1].destination == "e"
    # A vetoed unload keeps its veto and gets no placement.
    vetoed = replace(unload, veto=Reason.COOL_DOWN)
    actions, _ = _place(snap, config(), {}, [vetoed], ["c", "d", "e"], "LeastLongTermMessageRate")
    assert actions == [vetoed]


def test_transfer_shedder_destination_is_honoured():
    snap = scenarios.one_hot_broker()
    plan = plan_cycle(
        snap, config("TransferShedder"), {"TransferShedder": {"unloadConditionHitCount": 3}}
    )
    assert plan.shedding.unloads
    for unload in plan.shedding.unloads:
        place = next(a for a in plan.planned(ActionKind.PLACE) if a.target == unload.bundle)
        assert place.destination == unload.destination
        assert place.reason == "StrategyDestination"


def test_quiet_cycles_say_why():
    snap = scenarios.one_hot_broker()
    assert plan_cycle(snap, config(is_shedding_enabled=False), {}).reason == "Disabled"
    lonely = ClusterSnapshot(NOW, {"b1": snap.brokers["b1"]}, {})
    assert plan_cycle(lonely, config(), {}).reason == "NotEnoughBrokers"
    plan = plan_cycle(scenarios.broker_loss(), config(), {})
    assert plan.reason == "BrokerLost"  # the shedder found nothing to do; the life cycle did
    assert plan.summary().startswith("2 unload(s)")


def test_a_draining_broker_gives_up_every_bundle_then_is_drained():
    snap = scenarios.one_hot_broker()
    brokers = {**snap.brokers, "b2": replace(snap.brokers["b2"], state="draining")}
    snap = ClusterSnapshot(NOW, brokers, snap.bundles)
    plan = plan_cycle(snap, config(is_shedding_enabled=False), {})
    drains = [a for a in plan.planned(ActionKind.UNLOAD) if a.reason == "Drain"]
    assert [a.target for a in drains] == snap.owned_by("b2")
    state = plan.planned(ActionKind.BROKER_STATE)
    assert [(a.target, a.previous, a.state) for a in state] == [("b2", "draining", "drained")]
    assert plan.as_dict()["actions"][-1] == {
        "kind": "brokerState",
        "broker": "b2",
        "from": "draining",
        "to": "drained",
        "outcome": "planned",
        "reason": "Drain",
        "strategy": "lifecycle",
        "explanation": "drain complete: 1 bundle(s) leave b2 this cycle",
    }
    assert "b2 draining -> drained" in plan.summary()


def hot_bundle_snapshot(width=0x40000000, topics=5):
    name = f"t/ns/0x00000000_0x{width:08x}"
    hot = BundleLoad(name, "b1", long_term=MessageRates(40_000, 0, 0, 0), topics=topics)
    brokers = {
        n: BrokerLoad(n, bundles=(name,) if n == "b1" else (), reported_at=NOW)
        for n in ("b1", "b2")
    }
    return ClusterSnapshot(NOW, brokers, {name: hot}), name


def test_auto_split_cuts_hot_bundles_with_the_configured_algorithm():
    snap, _name = hot_bundle_snapshot()
    safety = SafetyConfig(is_auto_split_enabled=True)
    plan = plan_cycle(snap, config(safety=safety), {})
    (split,) = plan.planned(ActionKind.SPLIT)
    assert split.boundaries == (0x20000000,)
    assert split.children == ("t/ns/0x00000000_0x20000000", "t/ns/0x20000000_0x40000000")
    assert split.metric.as_dict() == {"name": "MsgRate", "value": 40000.0, "unit": "msg/s"}
    assert split.as_dict()["boundaries"] == ["0x20000000"]
    assert "1 split(s)" in plan.summary()
    topics = plan_cycle(
        snap,
        replace(
            config(safety=safety),
            strategies=Strategies(split_algorithm="topic_count_equally_divide"),
        ),
        {},
    )
    assert topics.actions[-1].veto == Reason.NO_TOPIC_DATA
    positions = plan_cycle(
        snap,
        replace(
            config(safety=safety),
            strategies=Strategies(split_algorithm="specified_positions_divide"),
        ),
        {},
    )
    assert positions.actions[-1].veto == Reason.NO_CANDIDATES
    assert "needs positions" in positions.actions[-1].explanation
    narrow, _ = hot_bundle_snapshot(width=1)
    assert plan_cycle(narrow, config(safety=safety), {}).actions[-1].veto == Reason.NO_CANDIDATES


def test_auto_split_leaves_a_bundle_that_moves_this_cycle_and_counts_topics():
    snap, _name = hot_bundle_snapshot(topics=5000)
    brokers = {**snap.brokers, "b1": replace(snap.brokers["b1"], state="draining")}
    draining = ClusterSnapshot(NOW, brokers, snap.bundles)
    plan = plan_cycle(draining, config(safety=SafetyConfig(is_auto_split_enabled=True)), {})
    assert not [a for a in plan.actions if a.kind == ActionKind.SPLIT]
    plan = plan_cycle(snap, config(safety=SafetyConfig(is_auto_split_enabled=True)), {})
    assert plan.actions[-1].explanation.startswith("auto-split: Topics 5000 above the limit 1000")


def test_the_cycle_refuses_what_it_cannot_run_and_says_why():
    snap = scenarios.one_hot_broker()
    with pytest.raises(BalancerError) as err:
        plan_cycle(snap, config(placement="AvgShedder"), {})
    assert err.value.field == "strategies.placement"
    assert "honours AvgShedder's destination itself" in err.value.message
    with pytest.raises(UnknownStrategy):
        plan_cycle(snap, config("Nope"), {})


def test_placement_state_is_kept_between_cycles():
    snap = scenarios.anti_affinity_unsatisfiable()
    plan = plan_cycle(snap, config(placement="LeastResourceUsageWithWeight"), {})
    (place,) = plan.planned(ActionKind.PLACE)
    assert place.metric.unit == "fraction"
    assert "weighted usage" in place.explanation
    assert "brokerAvgResourceUsageWithWeight" in plan.state["LeastResourceUsageWithWeight"]


def test_nobody_to_place_on_is_a_vetoed_placement():
    snap = scenarios.anti_affinity_unsatisfiable()
    brokers = {n: replace(b, state="drained") for n, b in snap.brokers.items()}
    plan = plan_cycle(ClusterSnapshot(NOW, brokers, snap.bundles, snap.namespaces), config(), {})
    (place,) = plan.vetoed
    assert (place.kind, place.veto) == (ActionKind.PLACE, Reason.NO_CANDIDATES)
    assert place.as_dict()["veto"] == "NoCandidates"
    assert plan.summary() == "no action; 1 vetoed"


def test_operator_unload_plans_and_vetoes():
    snap = scenarios.one_hot_broker()
    bundle = snap.owned_by("b1")[0]
    plan = plan_unload(snap, config(), {}, bundle)
    assert [a.kind for a in plan.actions] == ["unload", "place"]
    assert plan.reason == "Operator"
    assert plan.actions[1].destination in {"b2", "b3"}
    chosen = plan_unload(snap, config(), {}, bundle, destination="b3")
    assert chosen.actions[1].explanation == "the operator chose b3"
    for bad in ("b1", "zz"):
        refused = plan_unload(snap, config(), {}, bundle, destination=bad)
        assert refused.actions[0].veto == Reason.NOT_SERVING
    cooling = ClusterSnapshot(NOW, snap.brokers, snap.bundles, recently_unloaded={bundle: NOW - 5})
    vetoed = plan_unload(cooling, config(safety=SafetyConfig(bundle_cool_down_s=60)), {}, bundle)
    assert vetoed.actions[0].veto == Reason.COOL_DOWN
    assert not vetoed.planned()
    forced = plan_unload(
        cooling, config(safety=SafetyConfig(bundle_cool_down_s=60)), {}, bundle, force=True
    )
    assert forced.actions[0].forced
    assert forced.actions[0].as_dict()["forced"] is True
    assert len(forced.planned()) == 2
    unknown = plan_unload(snap, config(), {}, "t/ns/0xf0000000_0xffffffff")
    assert unknown.actions[0].veto == Reason.UNKNOWN_BUNDLE
    orphan = ClusterSnapshot(
        NOW, snap.brokers, {**snap.bundles, "t/x/0x0_0x1": BundleLoad("t/x/0x0_0x1")}
    )
    refused = plan_unload(orphan, config(), {}, "t/x/0x0_0x1", force=True)
    assert refused.actions[0].veto == Reason.NOT_OWNER
    assert not refused.planned()
    assert "has no owner; nothing to unload" in refused.actions[0].explanation


def test_operator_destination_refused_by_a_filter_unless_forced():
    brokers = {n: BrokerLoad(n, reported_at=NOW) for n in ("c", "d", "e")}
    names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(3)]
    bundles = {
        names[0]: BundleLoad(names[0], "c"),
        names[1]: BundleLoad(names[1], "d"),
        names[2]: BundleLoad(names[2], "d"),
    }
    snap = ClusterSnapshot(NOW, brokers, bundles)
    refused = plan_unload(snap, config(), {}, names[0], destination="d")
    assert refused.actions[1].veto == Reason.NOT_LEAST_BUNDLES
    assert "refused by" in refused.actions[1].explanation
    assert not refused.planned()
    forced = plan_unload(snap, config(), {}, names[0], destination="d", force=True)
    assert [a.destination for a in forced.planned()] == ["d", "d"]


def test_operator_split_drain_and_activate():
    snap, name = hot_bundle_snapshot()
    plan = plan_split(snap, config(), name)
    assert plan.planned(ActionKind.SPLIT)[0].children[0] == "t/ns/0x00000000_0x20000000"
    blacklisted = config(safety=SafetyConfig(blacklist=("t/*",)))
    assert plan_split(snap, blacklisted, name).actions[0].veto == Reason.BLACKLISTED
    assert plan_split(snap, blacklisted, name, force=True).planned()
    assert plan_split(snap, config(), name, "flow_or_qps_equally_divide").vetoed
    none = plan_split(snap, config(), name, "specified_positions_divide", [0x50000000])
    assert none.actions[0].veto == Reason.NO_CANDIDATES
    with pytest.raises(BalancerError):
        plan_split(snap, config(), "t/ns/0x40000000_0x80000000")
    with pytest.raises(BalancerError):
        plan_split(snap, config(), name, "specified_positions_divide", [])

    drain = plan_drain(snap, config(), {}, "b1")
    kinds = [
        (a.kind, a.state if isinstance(a, BrokerStateAction) else a.destination)
        for a in drain.planned()
    ]
    assert kinds == [
        ("brokerState", "draining"),
        ("unload", "b2"),
        ("place", "b2"),
        ("brokerState", "drained"),
    ]
    # Before: every serving broker, the drained one too; after: without it.
    assert set(drain.before.brokers) == {"b1", "b2"}
    assert set(drain.after.brokers) == {"b2"}
    # One broker serves everything after it: its CV (0) says nothing of balance, said so.
    assert (drain.before.serving, drain.after.serving) == (2, 1)
    assert drain.after.cv == 0.0
    assert "no CV: 1 serving broker predicted" in drain.summary()
    assert drain.as_dict()["stats"]["after"]["serving"] == 1
    draining = ClusterSnapshot(
        NOW, {**snap.brokers, "b1": replace(snap.brokers["b1"], state="draining")}, snap.bundles
    )
    assert "draining already" in plan_drain(draining, config(), {}, "b1").actions[0].explanation
    last = ClusterSnapshot(NOW, {"b1": snap.brokers["b1"]}, snap.bundles)
    refused = plan_drain(last, config(), {}, "b1")
    assert refused.actions[0].veto == Reason.NOT_ENOUGH_BROKERS
    assert set(refused.before.brokers) == set(refused.after.brokers) == {"b1"}
    with pytest.raises(BalancerError):
        plan_drain(snap, config(), {}, "zz")
    activate = plan_activate(draining, config(), "b1")
    (change,) = activate.planned()
    assert isinstance(change, BrokerStateAction)
    assert (change.previous, change.state) == ("draining", "active")
    # Before: b2 alone serves (no CV to speak of); after: b1 serves again, counted.
    assert (activate.before.serving, activate.after.serving) == (1, 2)
    assert set(activate.after.brokers) == {"b1", "b2"}
    assert "no CV: 1 serving broker -> CV" in activate.summary()
    # A broker that stopped reporting is not counted as serving after it is activated.
    lost_snap = replace(
        draining,
        brokers={**draining.brokers, "b1": replace(draining.brokers["b1"], reported_at=0.0)},
    )
    assert plan_activate(lost_snap, config(), "b1").after.serving == 1
    with pytest.raises(BalancerError):
        plan_activate(snap, config(), "zz")


def test_lookup_placement_places_only_unowned_bundles():
    snap = scenarios.anti_affinity_unsatisfiable()
    plan = plan_placement(
        snap, config(), {}, ["t/g2/0x00000000_0xffffffff", "t/g0/0x00000000_0xffffffff"]
    )
    assert [a.target for a in plan.planned()] == ["t/g2/0x00000000_0xffffffff"]
    assert plan.reason == "LeastLoaded"
    assert plan_placement(snap, config(), {}, []).actions == ()
    lru = plan_placement(
        snap, config(placement="LeastResourceUsageWithWeight"), {}, ["t/g2/0x00000000_0xffffffff"]
    )
    assert "LeastResourceUsageWithWeight" in lru.state


def test_a_plan_is_applied_exactly_once():
    snap = scenarios.one_hot_broker()
    plan = plan_cycle(snap, config(), {})
    owners = {n: b.owner for n, b in snap.bundles.items()}
    unloaded: dict[str, float] = {}
    moved = apply_to_owners(plan, owners, unloaded, NOW)
    assert moved == len(plan.planned(ActionKind.UNLOAD)) > 0
    assert set(unloaded) == {a.target for a in plan.planned(ActionKind.UNLOAD)}
    again = dict(owners)
    assert apply_to_owners(plan, again, unloaded, NOW) == 0  # stale: the owners moved on
    assert again == owners


def test_prediction_moves_bandwidth_and_the_models_cpu():
    """The plan's prediction is the load model's (issue 24, item 4): a bundle takes its
    throughput and its message rate × the CPU one message costs; the rest of its source's CPU is
    background and stays. ``a``: 80 % CPU for 1,000 msg/s; ``b``: 10 % for 1,000 msg/s, so one
    msg/s costs 0.01 % and ``a`` has 70 % of background."""
    rates = MessageRates(250, 250, 50 * MIB, 50 * MIB)
    a = BrokerLoad(
        "a",
        cpu=ResourceUsage(80, 100),
        bandwidth_in=ResourceUsage(100 * MIB, 1000 * MIB),
        rates=MessageRates(500, 500, 100 * MIB, 100 * MIB),
        reported_at=NOW,
    )
    b = BrokerLoad(
        "b", cpu=ResourceUsage(10, 100), rates=MessageRates(500, 500, 0, 0), reported_at=NOW
    )
    c = BrokerLoad("c", reported_at=NOW)  # no rates at all
    bundles = {"t/n/1": BundleLoad("t/n/1", "a", rates), "t/n/2": BundleLoad("t/n/2", "c", rates)}
    snap = ClusterSnapshot(NOW, {"a": a, "b": b, "c": c}, bundles)
    moves = [
        UnloadAction(target="t/n/1", source="a", destination="b", reason="x", explanation=""),
        PlaceAction(target="t/n/1", source="a", destination="b", reason="x", explanation=""),
        UnloadAction(target="t/n/2", source="c", destination=None, reason="x", explanation=""),
        UnloadAction(target="ghost", source="c", destination=None, reason="x", explanation=""),
        UnloadAction(
            target="t/n/2",
            source="c",
            destination=None,
            reason="x",
            explanation="",
            veto=Reason.COOL_DOWN,
        ),
    ]
    after = predict(snap, PulsarConfig().weights, ["a", "b"], moves)
    assert after.brokers["a"] == pytest.approx(0.75)  # 80 % less 500 msg/s × 0.01 %
    assert after.brokers["b"] == pytest.approx(0.15)
    # FulcrumShedder's own model predicts the same figures for the same move.
    model = LoadModel.of(snap, ["a", "b"], PulsarConfig().weights)
    load = model.load.copy()
    load[0] -= model.bundle_load[0]
    load[1] += model.bundle_load[0]
    assert model.usage(load).tolist() == pytest.approx([0.75, 0.15])
    assert LoadStats.of({}).as_dict() == {
        "avgUsage": 0.0,
        "std": 0.0,
        "cv": 0.0,
        "maxOverMean": 0.0,
        "serving": 0,
        "brokers": {},
    }


def test_a_lost_draining_broker_is_not_drained_and_placements_are_counted():
    snap = scenarios.broker_loss()
    brokers = {**snap.brokers, "b2": replace(snap.brokers["b2"], state="draining")}
    unowned = {**snap.bundles, "t/u/0x00000000_0xffffffff": BundleLoad("t/u/0x00000000_0xffffffff")}
    plan = plan_cycle(ClusterSnapshot(NOW, brokers, unowned), config(), {})
    assert plan.lost == ("b2",)
    assert not plan.planned(ActionKind.BROKER_STATE)
    assert "1 placement(s)" in plan.summary()


def test_numbers_in_words():
    from balancer import explain

    assert explain.quantity(0.25, "fraction") == "25.0 %"
    assert explain.quantity(1.23456, "score") == "1.23"
    assert explain.bytes_per_s(512) == "512 B/s"
    assert explain.metric("custom", 2.0) == "custom 2"


def test_the_guard_keeps_unloads_that_can_spread_their_group():
    from balancer.cycle.guard import shed_guarded

    snap = scenarios.scale_out_5_to_10()
    grouped = ClusterSnapshot(
        NOW, snap.brokers, snap.bundles, {"t/ns0": NamespacePolicy("t/ns0", "g")}
    )
    decision = shed_guarded("ThresholdShedder", grouped, EASY, {})
    assert decision.unloads  # new brokers hold nothing of g: moving spreads it
    assert all(s.reason != Reason.ANTI_AFFINITY for s in decision.skipped)


def test_a_draining_broker_whose_bundles_find_no_home_stays_draining():
    snap, _ = hot_bundle_snapshot()
    brokers = {
        "b1": replace(snap.brokers["b1"], state="draining"),
        "b2": replace(snap.brokers["b2"], state="drained"),
    }
    plan = plan_cycle(ClusterSnapshot(NOW, brokers, snap.bundles), config(), {})
    assert [a.veto for a in plan.vetoed] == [Reason.NO_CANDIDATES]
    assert not plan.planned(ActionKind.BROKER_STATE)


def test_a_snapshot_document_parses_back_to_the_same_snapshot():
    from balancer.wire import parse_cycle_config, parse_snapshot, safety_document, snapshot_document

    snap = scenarios.broker_loss()
    ema = replace(snap.brokers["b1"], weighted_max_ema=0.3, msg_throughput_ema=5.0, updated_at=NOW)
    snap = ClusterSnapshot(
        NOW,
        {**snap.brokers, "b1": ema},
        snap.bundles,
        {"t/ns": NamespacePolicy("t/ns", "g")},
        {"t/ns/0x00000000_0x40000000": NOW - 9},
        (NOW - 9, NOW - 30),
    )
    again = parse_snapshot(snapshot_document(snap))
    assert again.brokers == snap.brokers
    assert again.bundles == snap.bundles
    assert again.namespaces == snap.namespaces
    assert again.recently_unloaded == snap.recently_unloaded
    assert again.recent_moves == snap.recent_moves
    safety = SafetyConfig(12.0, 3, ("a/*",), 30.0, True)
    assert parse_cycle_config({"safety": safety_document(safety)}).safety == safety


@given(
    owners=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=12),
    dest=st.sampled_from(["a", "b", "c", "d"]),
    evenly=st.booleans(),
    topics=st.sampled_from([10, 50_000]),
)
def test_the_destination_shortcut_decides_as_the_filters(owners, dest, evenly, topics):
    from balancer.cycle.placement import _DestinationCheck
    from balancer.placement.place import filter_candidates

    names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(len(owners))]
    bundles = {n: BundleLoad(n, o, topics=5) for n, o in zip(names, owners, strict=True)}
    brokers = {b: BrokerLoad(b, topics=topics, reported_at=NOW) for b in "abcd"}
    snap = ClusterSnapshot(NOW, brokers, bundles)
    pulsar = replace(PulsarConfig(), is_distribute_bundles_evenly_enabled=evenly)
    source = owners[0]
    if dest == source:
        return
    serving = list("abcd")
    check = _DestinationCheck(snap, pulsar, serving, names[:1])
    kept, _, _ = filter_candidates(snap, names[0], pulsar, {}, [n for n in serving if n != source])
    assert (check.refusal(names[0], dest, source, {}) is None) == (dest in kept)


def test_danube_rebalances_bundles_as_its_topics_and_places_them_round_robin():
    from balancer.danube.config import DanubeConfig

    snap = scenarios.one_hot_broker()
    danube = DanubeConfig.from_keys({"aggressiveness": "aggressive", "min_topic_age_seconds": 0})
    cycle_config = replace(
        config("danube", placement="fair"),
        danube=danube,
        strategies=Strategies("danube", "fair"),
    )
    plan = plan_cycle(snap, cycle_config, {})
    (unload,) = plan.planned(ActionKind.UNLOAD)
    assert unload.source == "b1"
    assert unload.metric.unit == "score"
    assert "topic load score" in unload.explanation
    place = plan.actions[plan.actions.index(unload) + 1]
    assert place.reason == "StrategyDestination"  # Danube's target passes Pulsar's filters
    assert place.destination == unload.destination
    assert place.destination in {"b2", "b3"}
    assert plan.state["danube"]["moves"][0]["topic"] == unload.target
    # The next cycle is within Danube's cooldown: nothing moves.
    again = plan_cycle(snap, cycle_config, plan.state)
    assert again.reason == "CoolDown"
    # Placement of a lost broker's bundles: Danube's rankings, never the broker they left.
    lost = scenarios.broker_loss()
    fair = replace(config(placement="fair"), strategies=Strategies(placement="fair"))
    placed = plan_cycle(lost, fair, {})
    moves = placed.planned(ActionKind.PLACE)
    assert moves
    assert all(a.destination in {"b1", "b3"} for a in moves)
    assert all(a.metric.unit == "score" for a in moves)


def test_draining_one_broker_plans_only_its_own_bundles():
    snap = scenarios.broker_loss()  # b1, b2 (two bundles), b3
    brokers = {
        **snap.brokers,
        "b3": replace(snap.brokers["b3"], state="draining"),
        "b2": replace(snap.brokers["b2"], reported_at=NOW),
    }
    unowned = {**snap.bundles, "t/u/0x00000000_0xffffffff": BundleLoad("t/u/0x00000000_0xffffffff")}
    snap = ClusterSnapshot(NOW, brokers, unowned)
    plan = plan_drain(snap, config(), {}, "b2")
    moved = [a for a in plan.actions if a.kind in (ActionKind.UNLOAD, ActionKind.PLACE)]
    assert {a.target for a in moved} == set(snap.owned_by("b2"))  # not b3's, not the unowned one
    assert all(a.source == "b2" for a in moved)
    assert [a.target for a in plan.planned(ActionKind.BROKER_STATE)] == ["b2", "b2"]


def test_a_quiet_cycle_says_which_broker_was_skipped_and_why():
    snap = scenarios.sole_bundle_overload()
    plan = plan_cycle(snap, config(), {})
    assert plan.summary().startswith("no action; b1 skipped: SoleBundle")
    # A bundle-level skip (here: within the grace period) is not a broker's reason.
    unloaded = ClusterSnapshot(
        NOW, snap.brokers, snap.bundles, recently_unloaded={"t/hot/0x00000000_0xffffffff": NOW}
    )
    quiet = plan_cycle(unloaded, config(pulsar=PulsarConfig()), {})
    assert quiet.summary().startswith("no action")


def test_lookups_place_with_danubes_rankings_too():
    snap = scenarios.anti_affinity_unsatisfiable()
    plan = plan_placement(
        snap,
        replace(config(), strategies=Strategies(placement="fair")),
        {},
        ["t/g2/0x00000000_0xffffffff"],
    )
    (place,) = plan.planned()
    assert place.destination in {"b1", "b2"}
    assert plan.state["fair"]["lastSelected"] == place.destination


def test_explanations_give_the_figures_the_shedder_decided_on():
    from balancer import explain

    plan = plan_cycle(scenarios.one_hot_broker(), config(), {})
    unload = plan.planned(ActionKind.UNLOAD)[0]
    assert unload.explanation.startswith(
        "ThresholdShedder Overloaded: b1 usage history 90.0 % (now 90.0 %) against the mean "
        "43.3 % ± threshold 10.0 %; throughput 50.0 MiB/s"
    )
    assert explain.shedder_figures("SomeoneElse", "b1", {"brokers": {}}) == ""
    assert explain.shedder_figures("OverloadShedder", "b1", {}) == ""  # figures missing


def test_with_anti_affinity_groups_the_destination_runs_the_whole_filter_chain():
    from balancer.cycle.placement import _DestinationCheck

    names = {g: f"t/{g}/0x00000000_0xffffffff" for g in ("g0", "g1")}
    bundles = {names["g0"]: BundleLoad(names["g0"], "a"), names["g1"]: BundleLoad(names["g1"], "b")}
    brokers = {n: BrokerLoad(n, reported_at=NOW) for n in "abc"}
    policies = {f"t/{g}": NamespacePolicy(f"t/{g}", "pay") for g in ("g0", "g1")}
    snap = ClusterSnapshot(NOW, brokers, bundles, policies)
    check = _DestinationCheck(snap, PulsarConfig(), ["a", "b", "c"], [names["g0"]])
    # b already holds a namespace of the group; c holds none: the anti-affinity filter keeps c.
    assert check.refusal(names["g0"], "b", "a", {}) == "the anti_affinity filter (AntiAffinity)"
    assert check.refusal(names["g0"], "c", "a", {}) is None


def test_without_even_distribution_any_serving_destination_passes():
    from balancer.cycle.placement import _DestinationCheck

    snap = scenarios.one_hot_broker()
    pulsar = replace(PulsarConfig(), is_distribute_bundles_evenly_enabled=False)
    check = _DestinationCheck(snap, pulsar, ["b1", "b2", "b3"], [])
    assert check.refusal(snap.owned_by("b1")[0], "b2", "b1", {}) is None


def _three_domains(groups=None, **pulsar):
    """b1, b2 in d1; b3 in d2; b4 draining in d3. t/a and t/b (one bundle each) on b1, t/c on
    b3; ``groups``: namespace -> anti-affinity group."""
    full = "0x00000000_0xffffffff"
    brokers = {
        "b1": BrokerLoad("b1", failure_domain="d1", cpu=ResourceUsage(10, 100), reported_at=NOW),
        "b2": BrokerLoad("b2", failure_domain="d1", cpu=ResourceUsage(20, 100), reported_at=NOW),
        "b3": BrokerLoad("b3", failure_domain="d2", cpu=ResourceUsage(30, 100)),
        "b4": BrokerLoad("b4", failure_domain="d3", state="draining", cpu=ResourceUsage(5, 100)),
    }
    owners = {"t/a": "b1", "t/b": "b1", "t/c": "b3"}
    bundles = {
        f"{ns}/{full}": BundleLoad(f"{ns}/{full}", owner=owner) for ns, owner in owners.items()
    }
    namespaces = {ns: NamespacePolicy(ns, (groups or {}).get(ns)) for ns in ("t/a", "t/b", "t/c")}
    return ClusterSnapshot(NOW, brokers, bundles, namespaces)


def test_unload_destinations_say_why_each_other_broker_is_refused():
    from balancer.cycle import unload_destinations

    snap = _three_domains({"t/a": "ha", "t/c": "ha"})
    choices = {
        c["broker"]: c for c in unload_destinations(snap, config(), "t/a/0x00000000_0xffffffff")
    }
    assert choices["b1"] == {
        "broker": "b1",
        "eligible": False,
        "why": "the bundle's owner",
        "warning": None,
    }
    assert choices["b2"]["eligible"] is True
    assert choices["b2"]["why"] is choices["b2"]["warning"] is None
    # b3 owns t/c of the same group: the anti-affinity filter would keep b2 (none of the
    # group). Pulsar takes a destination to any active broker: b3 stays a choice, warned.
    assert choices["b3"]["eligible"] is True
    assert choices["b3"]["warning"].startswith(
        "anti_affinity filter: owns 1 namespaces of group 'ha'"
    )
    assert choices["b4"]["why"] == "not serving (draining)"
    # The list says what plan_unload does with each destination: refused (whatever force
    # says), vetoed by a filter an override takes, or planned.
    for name, choice in choices.items():
        plan = plan_unload(snap, config(), {}, "t/a/0x00000000_0xffffffff", destination=name)
        forced = plan_unload(
            snap, config(), {}, "t/a/0x00000000_0xffffffff", destination=name, force=True
        )
        assert bool(plan.vetoed) is (not choice["eligible"] or choice["warning"] is not None)
        assert bool(forced.vetoed) is not choice["eligible"], name
    lost = unload_destinations(snap, config(), "t/c/0x00000000_0xffffffff", now=NOW + 10_000)
    assert all(c["why"] == "not serving (lost)" for c in lost if c["broker"] in ("b1", "b2"))
    with pytest.raises(BalancerError):
        unload_destinations(snap, config(), "t/zz/0x00000000_0xffffffff")


def test_split_child_loads_share_the_load_by_hash_range_and_keep_the_topic_count():
    from balancer.cycle import split_child_loads

    name = "t/a/0x00000000_0x80000000"
    snap = ClusterSnapshot(
        NOW,
        {"b1": BrokerLoad("b1")},
        {name: BundleLoad(name, "b1", short_term=MessageRates(30, 10, 4000, 2000), topics=5)},
    )
    quarter, half = 0x20000000, 0x40000000
    left, right = split_child_loads(snap, name, [quarter])
    assert left["bundle"] == "t/a/0x00000000_0x20000000"
    assert right["bundle"] == "t/a/0x20000000_0x80000000"
    assert (left["fraction"], right["fraction"]) == (0.25, 0.75)
    assert (left["throughput"], right["throughput"]) == (1500.0, 4500.0)
    assert (left["msgRate"], right["msgRate"]) == (10.0, 30.0)
    assert left["topics"] + right["topics"] == 5
    assert [c["topics"] for c in split_child_loads(snap, name, [half])] == [2, 3]
    for bad in ([0x90000000], [half, half]):
        with pytest.raises(BalancerError):
            split_child_loads(snap, name, bad)
    with pytest.raises(BalancerError):
        split_child_loads(snap, "t/a/0x80000000_0xffffffff", [0x90000000])


def test_a_cycles_moves_list_every_candidate_score_and_every_filtered_broker():
    snap = scenarios.one_hot_broker()
    plan = plan_cycle(snap, config(), {})
    places = plan.planned(ActionKind.PLACE)
    assert places
    for place in places:
        scored = [c for c in place.candidates if not c.filter]
        filtered = [c for c in place.candidates if c.filter]
        # The chosen broker has the best score (LeastLongTermMessageRate: least msg/s; ties go
        # to Pulsar's seeded random choice) ...
        assert [c.score for c in scored] == sorted(c.score for c in scored)
        chosen = next(c for c in scored if c.broker == place.destination)
        assert place.metric.value == chosen.score == scored[0].score
        # ... and the bundle's source is never a candidate.
        assert "b1" not in {c.broker for c in scored}
        # even distribution removed the brokers that own more of the namespace than the least
        for c in filtered:
            assert (c.filter, c.reason) == ("even_distribution", "NotLeastBundlesOfNamespace")
        doc = place.as_dict()["candidates"]
        assert {"broker": place.destination, "score": chosen.score} in doc
        assert all(set(d) == {"broker", "filter", "reason", "detail"} for d in doc[len(scored) :])


def test_a_placement_with_every_broker_overloaded_shows_no_finite_score():
    from balancer.cycle import Candidate

    assert Candidate("b1", float("inf")).as_dict() == {"broker": "b1", "score": None}
    assert Candidate("b2", 3.0).as_dict() == {"broker": "b2", "score": 3.0}


@pytest.mark.parametrize("placement", ["LeastLongTermMessageRate", "LeastResourceUsageWithWeight"])
def test_many_placements_at_once_are_not_explained_one_by_one(placement):
    from balancer.cycle import EXPLAINED_PLACEMENTS

    brokers = {n: BrokerLoad(n, reported_at=NOW) for n in ("a", "b")}
    count = EXPLAINED_PLACEMENTS + 1
    step = (1 << 32) // count
    names = [f"t/ns/0x{i * step:08x}_0x{(i + 1) * step:08x}" for i in range(count)]
    bundles = {n: BundleLoad(n, None) for n in names}
    plan = plan_cycle(ClusterSnapshot(NOW, brokers, bundles), config(placement=placement), {})
    assert len(plan.planned(ActionKind.PLACE)) == count
    assert all(not p.candidates for p in plan.planned(ActionKind.PLACE))
    few = {n: bundles[n] for n in names[:2]}
    plan = plan_cycle(ClusterSnapshot(NOW, brokers, few), config(placement=placement), {})
    assert all(len(p.candidates) == 2 for p in plan.planned(ActionKind.PLACE))
    # A client's lookup places one bundle: explained too.
    looked_up = plan_placement(
        ClusterSnapshot(NOW, brokers, bundles), config(placement=placement), {}, names[:1]
    )
    assert len(looked_up.actions[0].candidates) == 2


def test_an_operators_automatic_unload_lists_the_brokers_the_filters_removed():
    snap = d_owns_two()
    plan = plan_unload(snap, config(), {}, "t/ns/0x00000000_0x10000000")
    place = plan.planned(ActionKind.PLACE)[0]
    assert place.destination == "e"
    assert [(c.broker, c.filter, c.reason) for c in place.candidates] == [
        ("e", "", ""),
        ("d", "even_distribution", "NotLeastBundlesOfNamespace"),
    ]
    assert "d" in place.candidates[1].detail


def topic_snapshot():
    """One bundle with five topics whose owner reported their stats (hashes × 0x1000000:
    10, 20, 35, 65, 70 — the PULSAR.md §10.2 example less one)."""
    from balancer.load import TopicLoad

    name = "t/ns/0x00000000_0x80000000"
    hashes = [0x10, 0x20, 0x35, 0x65, 0x70]
    topics = tuple(
        TopicLoad(f"persistent://t/ns/t{i}", h << 24, 1000.0 * (i + 1), MIB * (i + 1))
        for i, h in enumerate(hashes)
    )
    load = BundleLoad(name, "b1", short_term=MessageRates(15000, 0, 15 * MIB, 0), topics=5)
    brokers = {n: BrokerLoad(n, reported_at=NOW) for n in ("b1", "b2")}
    return ClusterSnapshot(NOW, brokers, {name: load}, bundle_topics={name: topics}), name


def test_with_per_topic_stats_the_topic_algorithms_cut_by_the_topics():
    from balancer.cycle import split_child_loads

    snap, name = topic_snapshot()
    plan = plan_split(snap, config(), name, "topic_count_equally_divide")
    (split,) = plan.planned(ActionKind.SPLIT)
    # Between the two middle topics, 0x20000000 and 0x35000000.
    assert split.boundaries == (0x2A800000,)
    assert "cuts at 0x2a800000" in split.explanation
    # Limits of 4,000 msg/s per bundle: flow_or_qps cuts wherever the next topic would pass it.
    limits = replace(
        EASY,
        bundle_max_msg_rate=4000.0,
        bundle_max_bandwidth_bytes_per_s=1000 * MIB,
        flow_or_qps_difference_fraction=0.0,
    )
    flow = plan_split(snap, config(pulsar=limits), name, "flow_or_qps_equally_divide")
    assert flow.planned(ActionKind.SPLIT)[0].boundaries == (0x2A800001, 0x4D000001, 0x6A800001)
    # Each child's load is its own topics', not a share of the range.
    left, right = split_child_loads(snap, name, [0x2A800000])
    assert (left["topics"], right["topics"]) == (2, 3)
    assert (left["msgRate"], right["msgRate"]) == (3000.0, 12000.0)
    assert (left["throughput"], right["throughput"]) == (3 * MIB, 12 * MIB)
    assert left["fraction"] == pytest.approx(0.2)
    assert left["measured"] is True
    # Topics that carry nothing share the bundle by count.
    idle = {name: tuple(replace(t, throughput=0.0) for t in snap.bundle_topics[name])}
    quiet = ClusterSnapshot(NOW, snap.brokers, snap.bundles, bundle_topics=idle)
    assert [c["fraction"] for c in split_child_loads(quiet, name, [0x2A800000])] == [0.4, 0.6]
    # The last child keeps a topic hashed at the bundle's upper end.
    end = ClusterSnapshot(
        NOW,
        snap.brokers,
        snap.bundles,
        bundle_topics={name: (*snap.bundle_topics[name], replace(idle[name][0], hash=0x80000000))},
    )
    assert split_child_loads(end, name, [0x2A800000])[1]["topics"] == 4


def test_without_per_topic_stats_a_topic_algorithm_is_vetoed_and_says_why():
    snap, name = topic_snapshot()
    bare = ClusterSnapshot(NOW, snap.brokers, snap.bundles)
    (split,) = plan_split(bare, config(), name, "topic_count_equally_divide").actions
    assert split.veto == Reason.NO_TOPIC_DATA
    assert "load report of b1 carries none" in split.explanation


def test_per_topic_stats_survive_a_snapshot_document_round_trip():
    from balancer.wire import parse_snapshot, snapshot_document

    snap, name = topic_snapshot()
    doc = snapshot_document(snap)
    (bundle,) = doc["bundles"]
    assert bundle["topicStats"][0] == {
        "topic": "persistent://t/ns/t0",
        "hash": "0x10000000",
        "msgRateIn": 1000.0,
        "msgThroughputIn": float(MIB),
    }
    back = parse_snapshot(doc)
    assert back.bundle_topics == snap.bundle_topics
    # A topic without rates has no stats; one without a hash is hashed by its name.
    bundle["topicStats"] = [{"topic": "persistent://t/ns/t9"}]
    (topic,) = parse_snapshot(doc).bundle_topics[name]
    assert not topic.has_stats
    from balancer.hashing import topic_hash

    assert topic.hash == topic_hash("persistent://t/ns/t9")
    bundle["topicStats"] = [{"topic": "x", "hash": True}]
    with pytest.raises(BalancerError) as err:
        parse_snapshot(doc)
    assert err.value.field == "bundles[0].topicStats[0].hash"


def test_a_placement_on_an_overloaded_broker_carries_no_infinite_metric():
    brokers = {n: BrokerLoad(n, cpu=ResourceUsage(95, 100), reported_at=NOW) for n in ("a", "b")}
    bundles = {"t/ns/0x00000000_0x10000000": BundleLoad("t/ns/0x00000000_0x10000000", None)}
    plan = plan_placement(ClusterSnapshot(NOW, brokers, bundles), config(), {}, list(bundles))
    (place,) = plan.planned(ActionKind.PLACE)
    assert place.metric is None  # LeastLongTermMessageRate scores both +inf (overloaded)
    assert place.reason == "ReselectedOverloaded"


def test_a_cv_is_said_only_over_two_serving_brokers_or_more():
    assert LoadStats.of({}).cv_said() == "no CV: 0 serving brokers"
    assert LoadStats.of({"b1": 0.9}).cv_said() == "no CV: 1 serving broker"
    assert LoadStats.of({"b1": 0.9, "b2": 0.3}).cv_said() == "CV 0.50"
    assert LoadStats.of({"b1": 0.9}).measured_cv is None  # its CV of 0 is no balance
    assert LoadStats.of({"b1": 0.9, "b2": 0.3}).measured_cv == pytest.approx(0.5)


def test_an_override_takes_every_veto_the_preview_showed_and_no_other():
    """Issue 25, item 3: an unload in its cool-down to a destination the anti-affinity filter
    refuses shows both vetoes unforced, and forced overrides exactly those two."""
    snap = _three_domains({"t/a": "ha", "t/c": "ha"})
    bundle = "t/a/0x00000000_0xffffffff"
    cooling = replace(snap, recently_unloaded={bundle: NOW - 10})
    cfg = config(safety=SafetyConfig(bundle_cool_down_s=600))
    shown = plan_unload(cooling, cfg, {}, bundle, destination="b3")
    assert [(a.kind, a.veto) for a in shown.vetoed] == [
        ("unload", Reason.COOL_DOWN),
        ("place", Reason.ANTI_AFFINITY),
    ]
    forced = plan_unload(cooling, cfg, {}, bundle, destination="b3", force=True)
    assert not forced.vetoed
    assert {a.veto for a in forced.actions if a.forced} == {Reason.COOL_DOWN, Reason.ANTI_AFFINITY}
    # A destination the filters keep: the cool-down alone is shown, and alone overridden.
    alone = plan_unload(cooling, cfg, {}, bundle, destination="b2")
    assert [a.veto for a in alone.vetoed] == [Reason.COOL_DOWN]
    assert [a.veto for a in alone.actions if a.forced] == []
