import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.errors import InvalidSnapshot
from balancer.placement.batch import place_many
from balancer.placement.place import place
from tests.balancer.builders import broker, bundle, snapshot


def one_by_one(snap, bundles, config, state):
    out = []
    for name in bundles:
        placement = place(snap, name, config, state)
        state = placement.state
        out.append((placement.broker, placement.reason))
    return out, state


def test_unknown_candidates_are_refused():
    with pytest.raises(InvalidSnapshot):
        place_many(snapshot([broker("a", 10)]), ["x/1"], PulsarConfig(), {}, candidates=["zz"])


def test_state_preallocations_and_unknown_or_repeated_bundles_decide_as_one_by_one():
    snap = snapshot(
        [broker("a", 10, topics=5), broker("b", 10, topics=1), broker("c", 10)],
        [bundle("ns/1", None, 0, 50), bundle("ns/2", "a", 0, 10)],
    )
    config = PulsarConfig.from_keys({"loadBalancerBrokerMaxTopics": 4})
    state = {"preallocated": {"ns/1": "b", "ns/gone": "c"}}
    names = ["ns/1", "ns/new", "ns/1", "other/1", "ns/2"]
    batch, batch_state = place_many(snap, names, config, dict(state))
    expected, expected_state = one_by_one(snap, names, config, dict(state))
    assert [(p.broker, p.reason) for p in batch] == expected
    assert batch_state["preallocated"] == expected_state["preallocated"]


def test_when_every_broker_is_over_the_topic_limit_all_stay_candidates():
    snap = snapshot([broker("a", 10, topics=9), broker("b", 10, topics=9)], [bundle("ns/1", None)])
    config = PulsarConfig.from_keys({"loadBalancerBrokerMaxTopics": 1})
    [placed], _ = place_many(snap, ["ns/1"], config, {})
    assert placed.broker == place(snap, "ns/1", config, {}).broker


def test_no_active_broker_places_nothing():
    snap = snapshot([broker("a", 10, state="drained")], [bundle("ns/1", None)])
    [placed], state = place_many(snap, ["ns/1"], PulsarConfig(), {})
    assert (placed.broker, placed.reason) == (None, Reason.NO_CANDIDATES)
    assert state["preallocated"] == {}


def test_even_distribution_off_and_reselection_match_one_by_one():
    snap = snapshot(
        [broker("a", 95), broker("b", 10), broker("c", 20)],
        [bundle("ns/1", "b"), bundle("ns/2", "c"), bundle("ns/3", None)],
    )
    for even in (True, False):
        config = PulsarConfig.from_keys({"loadBalancerDistributeBundlesEvenlyEnabled": even})
        batch, _ = place_many(snap, ["ns/3", "ns/4"], config, {})
        expected, _ = one_by_one(snap, ["ns/3", "ns/4"], config, {})
        assert [(p.broker, p.reason) for p in batch] == expected


def test_other_strategies_and_anti_affinity_groups_place_one_by_one():
    from balancer.snapshot import ClusterSnapshot, NamespacePolicy

    snap = snapshot([broker("a", 10), broker("b", 30)], [bundle("ns/1", None)])
    [placed], state = place_many(
        snap,
        ["ns/1"],
        PulsarConfig(),
        {},
        strategy="LeastResourceUsageWithWeight",
        sources={"ns/1": "a"},
    )
    assert placed.broker == "b"  # the source is not a candidate
    assert "brokerAvgResourceUsageWithWeight" in state
    grouped = ClusterSnapshot(
        snap.now, snap.brokers, snap.bundles, {"ns": NamespacePolicy("ns", "g")}
    )
    [placed], _ = place_many(grouped, ["ns/1"], PulsarConfig(), {})
    assert placed.broker == place(grouped, "ns/1", PulsarConfig(), {}).broker


def test_a_drained_source_or_the_only_active_broker_stays_a_candidate():
    snap = snapshot([broker("a", 10), broker("b", 10, state="drained")], [bundle("ns/1", "b")])
    [placed], _ = place_many(snap, ["ns/1"], PulsarConfig(), {}, sources={"ns/1": "a"})
    assert placed.broker == "a"  # excluding a would leave nobody


def test_replacing_a_bundle_whose_owner_holds_more_of_the_namespace():
    # a owns two bundles of ns: the one being placed does not count, the other still does.
    snap = snapshot(
        [broker("a", 10), broker("b", 10), broker("c", 10)],
        [bundle("ns/1", "a"), bundle("ns/2", "a"), bundle("ns/3", "b")],
    )
    batch, _ = place_many(snap, ["ns/1"], PulsarConfig(), {})
    expected, _ = one_by_one(snap, ["ns/1"], PulsarConfig(), {})
    assert [(p.broker, p.reason) for p in batch] == expected == [("c", Reason.LEAST_LOADED)]


def test_every_bundle_in_the_grace_period_selects_nothing():
    from balancer.shedding.common import select_bundles_by_throughput

    snap = snapshot(
        [broker("a", 90, ("ns/1",), 100)],
        [bundle("ns/1", "a", 100)],
        recently_unloaded={"ns/1": 999_990.0},
    )
    unloads, skipped = select_bundles_by_throughput(
        snap, snap.brokers["a"], 10.0, 60.0, Reason.OVERLOADED
    )
    assert unloads == []
    assert skipped[0].reason == Reason.COOL_DOWN


@pytest.mark.parametrize(
    "loads",
    [
        {"a": 10, "b": 10, "c": 95},  # every candidate holds the namespace: the least count
        {"a": 95, "b": 96, "c": 97},  # every broker overloaded
    ],
)
def test_unloaded_bundles_leave_their_source_as_explained_one_by_one(loads):
    snap = snapshot(
        [broker(name, cpu) for name, cpu in loads.items()],
        [bundle("ns/1", "a"), bundle("ns/2", "b"), bundle("ns/3", "c"), bundle("ns/4", "a")],
    )
    sources = {"ns/1": "a", "ns/4": "a"}
    fast, fast_state = place_many(snap, ["ns/1", "ns/4"], PulsarConfig(), {}, sources=sources)
    slow, slow_state = place_many(
        snap, ["ns/1", "ns/4"], PulsarConfig(), {}, sources=sources, explain=True
    )
    assert [(p.broker, p.reason) for p in fast] == [(p.broker, p.reason) for p in slow]
    assert "a" not in {p.broker for p in fast}
    assert fast_state["preallocated"] == slow_state["preallocated"]
    assert all(len(p.scores) == 2 for p in slow)  # the explained ones score every candidate
    assert all(len(p.scores) == 1 for p in fast)  # the batch keeps the chosen broker's only
