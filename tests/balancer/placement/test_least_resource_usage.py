import pytest

from balancer.config import PulsarConfig
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.placement.place import place
from balancer.placement.selection import least_resource_usage_with_weight
from balancer.snapshot import ClusterSnapshot

CONFIG = PulsarConfig()


def cluster(*cpus, memory=0):
    brokers = {
        f"b{i}": BrokerLoad(
            f"b{i}",
            cpu=ResourceUsage(c, 100),
            memory=ResourceUsage(memory, 100),
            rates=MessageRates(10, 10, 0, 0),
            bundles=(f"x/{i}",),
        )
        for i, c in enumerate(cpus)
    }
    return ClusterSnapshot(
        0, brokers, {"ns/0x00000000_0xffffffff": BundleLoad("ns/0x00000000_0xffffffff")}
    )


def chosen_over_seeds(snap, names, runs=30):
    return {
        least_resource_usage_with_weight(snap, names, PulsarConfig.from_keys({"seed": s}), {}, {})[
            0
        ]
        for s in range(runs)
    }


def test_doc_example_keeps_brokers_ten_points_below_the_mean():
    # Docs: 10, 30, 80 -> mean 40 -> best {10, 30}. In doubles 0.3 + 0.1 = 0.4 exceeds
    # (0.1 + 0.3 + 0.8) / 3 = 0.39999999999999997, so the broker exactly on the edge falls out,
    # as it does in Pulsar's own double arithmetic; one point lower it is in.
    assert chosen_over_seeds(cluster(10, 30, 80), ["b0", "b1", "b2"]) == {"b0"}
    assert chosen_over_seeds(cluster(10, 29, 80), ["b0", "b1", "b2"]) == {"b0", "b1"}


def test_pip_364_counter_example_falls_back_to_every_candidate():
    snap = cluster(40, 40, 40, 40, 69, 70)
    names = [f"b{i}" for i in range(6)]
    chosen = {
        least_resource_usage_with_weight(snap, names, PulsarConfig.from_keys({"seed": s}), {}, {})[
            0
        ]
        for s in range(60)
    }
    assert chosen == set(names)


def test_history_is_an_ema_kept_in_state_and_reset_for_idle_brokers():
    state = {}
    least_resource_usage_with_weight(cluster(10, 80), ["b0", "b1"], CONFIG, {}, state)
    least_resource_usage_with_weight(cluster(50, 80), ["b0", "b1"], CONFIG, {}, state)
    assert state["brokerAvgResourceUsageWithWeight"]["b0"] == pytest.approx(0.9 * 0.1 + 0.1 * 0.5)
    idle = cluster(50, 80)
    b0 = idle.brokers["b0"]
    idle_b0 = BrokerLoad("b0", cpu=b0.cpu, bundles=b0.bundles)  # no traffic
    snap = ClusterSnapshot(0, {"b0": idle_b0, "b1": idle.brokers["b1"]}, idle.bundles)
    least_resource_usage_with_weight(snap, ["b0", "b1"], CONFIG, {}, state)
    assert state["brokerAvgResourceUsageWithWeight"]["b0"] == pytest.approx(0.5)


def test_memory_is_left_out_whatever_its_weight():
    config = PulsarConfig.from_keys({"loadBalancerMemoryResourceWeight": 1.0})
    _, scores = least_resource_usage_with_weight(
        cluster(10, 20, memory=99), ["b0", "b1"], config, {}, {}
    )
    assert scores == {"b0": pytest.approx(0.1), "b1": pytest.approx(0.2)}


def test_place_uses_it_by_name_and_returns_its_state():
    placement = place(
        cluster(10, 30, 80),
        "ns/0x00000000_0xffffffff",
        CONFIG,
        {},
        strategy="LeastResourceUsageWithWeight",
    )
    assert placement.broker in {"b0", "b1"}
    assert set(placement.state["brokerAvgResourceUsageWithWeight"]) == {"b0", "b1", "b2"}


def ema_cluster(emas):
    brokers = {n: BrokerLoad(n, weighted_max_ema=e) for n, e in emas.items()}
    return ClusterSnapshot(0, brokers, {})


def test_extensible_variant_uses_reported_ema_without_history():
    # Pulsar's extensible test: 10 %, 30 %, 60 % with a 5 % margin (mean 33.3 %) -> broker 1 only.
    config = PulsarConfig.from_keys(
        {"loadBalancerAverageResourceUsageDifferenceThresholdPercentage": 5}
    )
    snap = ema_cluster({"1": 0.1, "2": 0.3, "3": 0.6})
    state = {}
    assert least_resource_usage_with_weight(snap, ["1", "2", "3"], config, {}, state)[0] == "1"
    assert state == {}  # nothing remembered


def test_extensible_variant_leaves_brokers_without_load_data_out_of_the_mean():
    # Pulsar's testNoLoadDataBrokers: 50 % and 100 % with broker 5 unknown -> broker 1.
    config = PulsarConfig.from_keys(
        {"loadBalancerAverageResourceUsageDifferenceThresholdPercentage": 5}
    )
    snap = ClusterSnapshot(
        0,
        {
            "1": BrokerLoad("1", weighted_max_ema=0.5),
            "2": BrokerLoad("2", weighted_max_ema=1.0),
            "5": BrokerLoad("5"),
        },
        {},
    )
    assert least_resource_usage_with_weight(snap, ["1", "2", "5"], config, {}, {})[0] == "1"
    both_full = ClusterSnapshot(
        0,
        {
            "1": BrokerLoad("1", weighted_max_ema=1.0),
            "2": BrokerLoad("2", weighted_max_ema=1.0),
            "5": BrokerLoad("5"),
        },
        {},
    )
    chosen = {
        least_resource_usage_with_weight(
            both_full, ["1", "2", "5"], PulsarConfig.from_keys({"seed": s}), {}, {}
        )[0]
        for s in range(30)
    }
    assert chosen == {"1", "2", "5"}  # no best: every candidate, the unknown one included
