"""Rarely taken branches of the strategies, each named for the behaviour it pins down."""

import pytest

from balancer.config import PulsarConfig
from balancer.danube.config import DanubeConfig
from balancer.danube.placement import place as danube_place
from balancer.danube.rankings import weighted_load
from balancer.decisions import Reason, Skip
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage, TopicStats
from balancer.placement.selection import (
    avg_shedder_select,
    least_long_term_message_rate,
    least_resource_usage_with_weight,
)
from balancer.shedding import avg, threshold, uniform
from balancer.snapshot import ClusterSnapshot
from tests.balancer.builders import broker, bundle, snapshot


def test_skip_detail_is_part_of_the_output():
    assert Skip("bundle", "x", Reason.COOL_DOWN, "why").as_dict()["detail"] == "why"


def test_bundles_a_broker_reports_but_the_leader_does_not_know_are_ignored():
    snap = snapshot(
        [broker("a", 90, ("ns/ghost", "ns/1", "ns/2"), 300), broker("b", 10, ("ns/3",), 10)],
        [bundle("ns/1", "a", 150), bundle("ns/2", "a", 150), bundle("ns/3", "b", 10)],
    )
    decision = threshold.shed(snap, PulsarConfig(), {})
    assert "ns/ghost" not in {u.bundle for u in decision.unloads}
    assert decision.unloads


def test_lower_boundary_without_an_underloaded_broker_stays_quiet():
    config = PulsarConfig.from_keys({"lowerBoundarySheddingEnabled": True})
    snap = snapshot([broker(n, 50, (f"ns/{n}1", f"ns/{n}2"), 300) for n in "abc"])
    assert threshold.shed(snap, config, {}).reason == Reason.BALANCED


def test_uniform_balanced_cluster_and_small_throughput_gap():
    even = ClusterSnapshot(
        0, {n: BrokerLoad(n, rates=MessageRates(100, 0, 100, 0)) for n in "ab"}, {}
    )
    assert uniform.shed(even, PulsarConfig(), {}).reason == Reason.BALANCED
    # ratio 5 > 4 but required int(4 × 0.2) = 0 bytes/s < 1 MiB: nothing moves.
    small = ClusterSnapshot(
        0,
        {
            "a": BrokerLoad("a", rates=MessageRates(100, 0, 5, 0), bundles=("x/1", "x/2")),
            "b": BrokerLoad("b", rates=MessageRates(100, 0, 1, 0)),
        },
        {},
    )
    assert uniform.shed(small, PulsarConfig(), {}).unloads == ()


def test_uniform_ignores_unknown_bundles():
    snap = ClusterSnapshot(
        0,
        {
            "a": BrokerLoad("a", rates=MessageRates(10000, 0, 0, 0), bundles=("x/ghost", "x/1")),
            "b": BrokerLoad("b", rates=MessageRates(2000, 0, 0, 0)),
        },
        {"x/1": BundleLoad("x/1", "a", short_term=MessageRates(2000, 0, 0, 0))},
    )
    assert [u.bundle for u in uniform.shed(snap, PulsarConfig(), {}).unloads] == ["x/1"]


def test_avg_shedder_skips_pairs_with_too_little_to_move_and_respects_the_grace_period():
    def pair(rates, recent=None):
        brokers = {
            "lo": BrokerLoad(
                "lo", cpu=ResourceUsage(10, 100), rates=MessageRates(rates[0], 0, 0, 0)
            ),
            "hi": BrokerLoad(
                "hi",
                cpu=ResourceUsage(90, 100),
                rates=MessageRates(rates[1], 0, 0, 0),
                bundles=("x/1", "x/2", "x/ghost"),
            ),
        }
        bundles = {
            n: BundleLoad(n, "hi", short_term=MessageRates(r, 0, 0, 0))
            for n, r in (("x/1", 1500), ("x/2", 1500))
        }
        return ClusterSnapshot(1000.0, brokers, bundles, recently_unloaded=recent or {})

    ready = {"hitCountHigh": {"lo": 1, "hi": 1}}
    quiet = avg.shed(pair((0, 100)), PulsarConfig(), ready)
    assert quiet.unloads == ()
    assert quiet.skipped[0].reason == Reason.BELOW_MIN_THROUGHPUT
    moved = avg.shed(pair((0, 10000), {"x/1": 990.0}), PulsarConfig(), ready)
    assert [u.bundle for u in moved.unloads] == ["x/2"]
    assert ("x/1", Reason.COOL_DOWN) in {(s.name, s.reason) for s in moved.skipped}


def test_selectors_with_no_candidates_choose_nobody():
    snap = snapshot([broker("a", 10)])
    config = PulsarConfig()
    assert least_resource_usage_with_weight(snap, [], config, {}, {}) == (None, {})
    assert avg_shedder_select(snap, [], config, {}, {}, "x") == (None, {})
    # A preallocated bundle the snapshot no longer has adds nothing.
    assert least_long_term_message_rate(snap, ["a"], config, {"gone": "a"}) == ("a", {"a": 0.0})


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        # memory is A's bottleneck (cpu 5 of the cluster's 10 = 0.5): 0.5 × 1 + 0.2 × 0.5 = 0.6
        ({"memory": ResourceUsage(90, 100)}, 60),
        # throughput (and the topic load it drives) at 1.0, thr comes first: 0.5 + 0.15 × 0.5
        ({"topic_stats": (TopicStats("/t/a", byte_rate=100e6),)}, 57),
        # network: 0.5 × 1 + 0.15 × cpu 0.5
        ({"bandwidth_in": ResourceUsage(100e6, 1e12)}, 57),
        # topic load only (50 idle topics): 0.5 × 1 + 0.2 × cpu 0.5
        ({"topic_stats": tuple(TopicStats(f"/t/{i}") for i in range(50))}, 60),
    ],
)
def test_weighted_load_scores_the_bottleneck(resources, expected):
    a = BrokerLoad("a", cpu=ResourceUsage(5, 100), **resources)
    b = BrokerLoad("b", cpu=ResourceUsage(10, 100))
    assert weighted_load(ClusterSnapshot(0, {"a": a, "b": b}, {}))["a"] == expected


def test_danube_placement_with_no_brokers_chooses_nobody():
    placement = danube_place(ClusterSnapshot(0, {}, {}), "/t", DanubeConfig(), {})
    assert placement.broker is None
    assert placement.reason == Reason.NO_CANDIDATES


def test_simulator_needs_bundles_for_every_namespace(tmp_path):
    from balancer.simulator.model import BundleMap
    from tests.balancer.simulator.test_simulator import small_workload

    workload, _ = small_workload(tmp_path)
    with pytest.raises(ValueError, match="has no bundles"):
        BundleMap.build(workload, ["t/a/0x00000000_0xffffffff"])


def test_trace_with_non_integer_counts_is_refused(tmp_path):
    from balancer.simulator.traces import load_functions
    from tests.balancer.simulator.test_simulator import write_traces

    root = write_traces(tmp_path, [[1, 2]])
    path = root / "azure-functions-2019/1350/1350_inv.csv"
    path.write_text(path.read_text().replace(",1,2", ",1,x"))
    with pytest.raises(ValueError, match="must be integers"):
        load_functions(root)


def test_uniform_passes_over_bundles_without_traffic():
    snap = ClusterSnapshot(
        0,
        {
            "a": BrokerLoad("a", rates=MessageRates(10000, 0, 0, 0), bundles=("x/0", "x/1")),
            "b": BrokerLoad("b", rates=MessageRates(2000, 0, 0, 0)),
        },
        {
            "x/0": BundleLoad("x/0", "a"),
            "x/1": BundleLoad("x/1", "a", short_term=MessageRates(2000, 0, 0, 0)),
        },
    )
    assert [u.bundle for u in uniform.shed(snap, PulsarConfig(), {}).unloads] == ["x/1"]
