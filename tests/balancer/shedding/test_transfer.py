import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.shedding.transfer import shed
from balancer.snapshot import ClusterSnapshot

MIB = 1024 * 1024
NOW = 100_000.0
READY = {"unloadConditionHitCount": 3}  # the next qualifying cycle is the 4th


def broker(name, ema, tops, *, tput_ema=None, updated=NOW):
    throughput = sum(t for _, t in tops) * MIB
    return BrokerLoad(
        name,
        rates=MessageRates(0, 0, throughput, 0),
        bundles=tuple(n for n, _ in tops),
        top_bundles=tuple((n, t * MIB, 0.0) for n, t in tops),
        weighted_max_ema=ema,
        msg_throughput_ema=tput_ema if tput_ema is not None else throughput,
        updated_at=updated,
    )


def two_brokers(**kw):
    a = broker("a", 0.9, [("ns/1", 10), ("ns/2", 20), ("ns/3", 30)], **kw)
    b = broker("b", 0.1, [("ns/b1", 5)])
    bundles = {n: BundleLoad(n, "a") for n in a.bundles} | {"ns/b1": BundleLoad("ns/b1", "b")}
    return ClusterSnapshot(NOW, {"a": a, "b": b}, bundles)


def test_unloading_starts_on_the_fourth_consecutive_qualifying_cycle():
    state = {}
    for cycle in range(4):
        decision = shed(two_brokers(), PulsarConfig(), state)
        state = decision.state
        assert bool(decision.unloads) == (cycle == 3)
    assert state["unloadConditionHitCount"] == 0  # reset after a cycle with decisions


def test_transfer_with_a_swap_when_the_next_bundle_would_overshoot():
    # std 0.4 > 0.25; target = 60 MiB/s × (0.9 - 0.1) / 2 / 0.9 = 26.7 MiB/s. ns/1 (10) fits; ns/2
    # (20) would overshoot: swapping ns/b1 (5) back leaves a at 35 and b at 30 MiB/s (b ≤ a and
    # a < 0.75 × 60), so the swap goes first, then ns/2; ns/3 is the last one and stays.
    decision = shed(two_brokers(), PulsarConfig(), READY)
    moves = [(u.bundle, u.source, u.destination) for u in decision.unloads]
    assert moves == [("ns/1", "a", "b"), ("ns/b1", "b", "a"), ("ns/2", "a", "b")]
    assert decision.reason == Reason.OVERLOADED
    assert decision.state["recentlyUnloadedBrokers"] == {"a": NOW, "b": NOW}


def test_without_transfer_there_is_no_swap_and_no_destination():
    config = PulsarConfig.from_keys({"loadBalancerTransferEnabled": False})
    decision = shed(two_brokers(), config, READY)
    assert [(u.bundle, u.destination) for u in decision.unloads] == [("ns/1", None)]


def test_a_broker_with_one_top_bundle_has_nothing_to_give():
    a = broker("a", 0.9, [("ns/1", 10)])
    b = broker("b", 0.1, [("ns/b1", 5)])
    snap = ClusterSnapshot(NOW, {"a": a, "b": b}, {})
    decision = shed(snap, PulsarConfig(), READY)
    assert decision.unloads == ()
    assert decision.reason == Reason.NO_BUNDLES


def test_recently_unloaded_broker_holds_the_cycle_back():
    state = {**READY, "recentlyUnloadedBrokers": {"a": NOW - 60}}
    assert shed(two_brokers(), PulsarConfig(), state).reason == Reason.COOL_DOWN
    later = {**READY, "recentlyUnloadedBrokers": {"a": NOW - 181}}
    decision = shed(two_brokers(), PulsarConfig(), later)
    assert decision.unloads


def test_stale_load_data_is_left_out():
    snap = two_brokers(updated=NOW - 1801)
    decision = shed(snap, PulsarConfig(), READY)
    assert decision.unloads == ()
    assert ("a", Reason.OUTDATED_DATA) in {(s.name, s.reason) for s in decision.skipped}


def test_balanced_cluster_resets_the_hit_count():
    a = broker("a", 0.5, [("ns/1", 10), ("ns/2", 10)])
    b = broker("b", 0.45, [("ns/3", 10), ("ns/4", 10)])
    decision = shed(ClusterSnapshot(NOW, {"a": a, "b": b}, {}), PulsarConfig(), READY)
    assert decision.state["unloadConditionHitCount"] == 0
    # Pulsar's word for a cycle below the hit-count gate (CLI.md, PULSAR.md §6.3).
    assert decision.reason == Reason.HIT_COUNT
    assert decision.stats["avgUsage"] == pytest.approx(0.475)


def test_load_ema_is_computed_from_resources_when_not_reported():
    brokers = {
        n: BrokerLoad(n, cpu=ResourceUsage(c, 100), rates=MessageRates(0, 0, 1e6, 0))
        for n, c in (("a", 80), ("b", 20))
    }
    snap = ClusterSnapshot(NOW, brokers, {})
    first = shed(snap, PulsarConfig(), {})
    assert first.state["brokerLoadData"]["a"]["weightedMaxEMA"] == pytest.approx(0.8)
    later = ClusterSnapshot(
        NOW,
        {
            **brokers,
            "a": BrokerLoad("a", cpu=ResourceUsage(0, 100), rates=MessageRates(0, 0, 1e6, 0)),
        },
        {},
    )
    second = shed(later, PulsarConfig(), first.state)
    assert second.state["brokerLoadData"]["a"]["weightedMaxEMA"] == pytest.approx(0.72)


def test_anti_affinity_bundles_stay_unless_policies_shedding_is_enabled():
    from balancer.snapshot import NamespacePolicy

    snap = two_brokers()
    grouped = ClusterSnapshot(NOW, snap.brokers, snap.bundles, {"ns": NamespacePolicy("ns", "g")})
    assert shed(grouped, PulsarConfig(), READY).unloads == ()
    config = PulsarConfig.from_keys({"loadBalancerSheddingBundlesWithPoliciesEnabled": True})
    assert shed(grouped, config, READY).unloads


def many(loads, tops=None):
    brokers = {
        name: broker(name, load, (tops or {}).get(name, [(f"{name}/1", 10), (f"{name}/2", 10)]))
        for name, load in loads.items()
    }
    bundles = {n: BundleLoad(n, name) for name, b in brokers.items() for n in b.bundles}
    return ClusterSnapshot(NOW, brokers, bundles)


def test_reported_ema_without_throughput_ema_uses_the_current_throughput():
    a = BrokerLoad("a", rates=MessageRates(0, 0, 5.0, 0), weighted_max_ema=0.5)
    snap = ClusterSnapshot(NOW, {"a": a, "b": BrokerLoad("b", weighted_max_ema=0.5)}, {})
    decision = shed(snap, PulsarConfig(), {})
    assert decision.stats["brokers"] == {"a": 0.5, "b": 0.5}


def test_no_fresh_broker_means_outdated_data_and_no_broker_means_no_brokers():
    stale = {n: broker(n, 0.5, [(f"{n}/1", 1)], updated=0.0) for n in ("a", "b")}
    assert (
        shed(ClusterSnapshot(NOW, stale, {}), PulsarConfig(), READY).reason == Reason.OUTDATED_DATA
    )
    assert shed(ClusterSnapshot(NOW, {}, {}), PulsarConfig(), READY).reason == Reason.NO_BROKERS


def test_underloaded_min_broker_triggers_with_a_small_std():
    # avg 0.34, std 0.22 < 0.25, but 0.02 < 0.34 × 0.125.
    tops = {n: [(f"{n}/1", 3), (f"{n}/2", 3), (f"{n}/3", 4)] for n in ("a", "b")}
    tops["c"] = [("c/1", 1)]
    decision = shed(many({"a": 0.5, "b": 0.5, "c": 0.02}, tops), PulsarConfig(), READY)
    assert decision.unloads
    assert decision.unloads[0].reason == Reason.UNDERLOADED
    assert decision.unloads[0].destination == "c"


def test_overloaded_max_broker_triggers_with_a_small_std():
    loads = {f"n{i:02d}": 0.6 for i in range(20)} | {"hot": 0.9}
    tops = {"hot": [("h/1", 1), ("h/2", 2), ("h/3", 17)]}
    decision = shed(many(loads, tops), PulsarConfig(), READY)
    assert decision.unloads[0].source == "hot"
    assert decision.unloads[0].reason == Reason.OVERLOADED


def test_missing_top_bundles_owner_changes_and_zero_throughput_are_skipped():
    tops = {
        "a": [("a/zero", 0), ("elsewhere", 5), ("a/1", 10), ("a/2", 10), ("a/3", 10)],
        "b": [],
    }
    snap = many({"a": 0.9, "b": 0.1, "c": 0.1}, tops)
    bundles = {**snap.bundles, "elsewhere": BundleLoad("elsewhere", "c")}
    snap = ClusterSnapshot(NOW, snap.brokers, bundles)
    decision = shed(snap, PulsarConfig(), READY)
    moved = [u.bundle for u in decision.unloads if u.source == "a"]
    assert "a/zero" not in moved
    assert "elsewhere" not in moved
    assert moved


def test_a_broker_that_reports_no_top_bundles_is_skipped():
    snap = many({"a": 0.9, "b": 0.1}, {"a": []})
    decision = shed(snap, PulsarConfig(), READY)
    assert decision.unloads == ()
    assert ("a", Reason.NO_LOAD_DATA) in {(s.name, s.reason) for s in decision.skipped}


def test_swap_search_skips_unfit_bundles_and_debug_mode_counts_what_comes_back():
    from balancer.snapshot import NamespacePolicy

    a = broker("a", 0.9, [("a/1", 10), ("a/2", 20), ("a/3", 30)])
    b_tops = (
        ("g/zero", 0.0, 0.0),
        ("g/big", 40 * MIB, 0.0),
        ("p/x", MIB, 0.0),
        ("b/1", 2 * MIB, 0.0),
        ("b/2", 3 * MIB, 0.0),
    )
    b = BrokerLoad(
        "b",
        rates=MessageRates(0, 0, 6 * MIB, 0),
        top_bundles=b_tops,
        weighted_max_ema=0.1,
        msg_throughput_ema=6 * MIB,
        updated_at=NOW,
    )
    bundles = {n: BundleLoad(n, "a") for n in a.bundles}
    policies = {"p": NamespacePolicy("p", "group")}
    snap = ClusterSnapshot(NOW, {"a": a, "b": b}, bundles, policies)
    config = PulsarConfig.from_keys({"loadBalancerDebugModeEnabled": True})
    decision = shed(snap, config, READY)
    swapped = [u.bundle for u in decision.unloads if u.source == "b"]
    # a/1 fits; a/2 would overshoot, so b sends bundles back: zero-throughput, too large (40)
    # and anti-affinity ones are passed over; 2 alone leaves b above a, 2 + 3 balances.
    assert swapped == ["b/1", "b/2"]


def test_top_bundles_are_derived_from_owned_bundles_when_not_reported():
    rates = {"x/1": 5, "x/2": 20, "x/3": 10}
    a = BrokerLoad(
        "a",
        rates=MessageRates(0, 0, 35 * MIB, 0),
        bundles=tuple(rates),
        weighted_max_ema=0.9,
        updated_at=NOW,
    )
    b = BrokerLoad("b", rates=MessageRates(0, 0, MIB, 0), weighted_max_ema=0.1, updated_at=NOW)
    bundles = {
        n: BundleLoad(n, "a", short_term=MessageRates(0, 0, r * MIB, 0)) for n, r in rates.items()
    }
    config = PulsarConfig.from_keys({"loadBalancerMaxNumberOfBundlesInBundleLoadReport": 2})
    decision = shed(ClusterSnapshot(NOW, {"a": a, "b": b}, bundles), config, READY)
    # top-2 by bandwidth in: x/2 and x/3, walked smallest first; x/2 is the last, so it stays.
    assert [u.bundle for u in decision.unloads] == ["x/3"]


def test_broker_load_data_ema_matches_pulsars_broker_load_data_test():
    # PULSAR.md §0.4 (BrokerLoadDataTest): weights 0.5, history 0.75. Report 1: cpu 1 %, memory
    # 400 %, direct 2 %, in 3 %, out 4 %, throughput 1 + 2 -> maxResourceUsage 0.04,
    # weightedMaxEMA 2.0, msgThroughputEMA 3. Report 2: cpu 300 %, memory 100 %, throughput
    # 5 + 6 -> 3.0, 1.875, 5.
    weights = {
        f"loadBalancer{r}ResourceWeight": 0.5
        for r in ("CPU", "Memory", "DirectMemory", "BandwidthIn", "BandwidthOut")
    }
    config = PulsarConfig.from_keys({**weights, "loadBalancerHistoryResourcePercentage": 0.75})

    def report(cpu, mem, tin, tout):
        return BrokerLoad(
            "a",
            cpu=ResourceUsage(cpu, 100),
            memory=ResourceUsage(mem, 100),
            direct_memory=ResourceUsage(2, 100),
            bandwidth_in=ResourceUsage(3, 100),
            bandwidth_out=ResourceUsage(4, 100),
            rates=MessageRates(0, 0, tin, tout),
        )

    first_load = report(1, 400, 1, 2)
    first = shed(ClusterSnapshot(NOW, {"a": first_load}, {}), config, {})
    assert first_load.max_resource_usage() == pytest.approx(0.04)
    assert first.state["brokerLoadData"]["a"] == {"weightedMaxEMA": 2.0, "msgThroughputEMA": 3.0}
    second_load = report(300, 100, 5, 6)
    second = shed(ClusterSnapshot(NOW, {"a": second_load}, {}), config, first.state)
    assert second_load.max_resource_usage() == pytest.approx(3.0)
    assert second.state["brokerLoadData"]["a"]["weightedMaxEMA"] == pytest.approx(1.875)
    assert second.state["brokerLoadData"]["a"]["msgThroughputEMA"] == pytest.approx(5.0)
