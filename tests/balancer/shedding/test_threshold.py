import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.shedding.threshold import shed
from tests.balancer.builders import broker, bundle, snapshot

CONFIG = PulsarConfig()


def three_brokers(cpu=(40, 10, 10), recently_unloaded=None):
    """Seed 000's example: broker1 at 40 %, broker2 and broker3 at 10 %; broker1 has 200 MiB/s."""
    return snapshot(
        [
            broker(
                "broker1", cpu[0], ("ns/0x00000000_0x40000000", "ns/0x40000000_0x80000000"), 200
            ),
            broker("broker2", cpu[1], ("ns/0x80000000_0xc0000000",), 50),
            broker("broker3", cpu[2], ("ns/0xc0000000_0xffffffff",), 50),
        ],
        [
            bundle("ns/0x00000000_0x40000000", "broker1", 120),
            bundle("ns/0x40000000_0x80000000", "broker1", 80),
            bundle("ns/0x80000000_0xc0000000", "broker2", 50),
            bundle("ns/0xc0000000_0xffffffff", "broker3", 50),
        ],
        recently_unloaded=recently_unloaded,
    )


def test_seed_000_example_only_broker1_above_mean_plus_threshold_sheds():
    # 40/10/10 % with threshold 10: mean 20 %, bar 30 %; only broker1 is above it.
    decision = shed(three_brokers(), CONFIG, {})
    assert decision.reason == Reason.OVERLOADED
    assert {u.source for u in decision.unloads} == {"broker1"}
    assert decision.stats["avgUsage"] == pytest.approx(0.2)


def test_threshold_shedder_offloads_the_margin_of_throughput_largest_bundle_first():
    # fraction = 0.40 - 0.20 - 0.10 + 0.05 = 0.15 of 200 MiB/s = 30 MiB/s: the 120 MiB/s bundle
    # alone covers it, so exactly one bundle goes.
    decision = shed(three_brokers(), CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/0x00000000_0x40000000"]
    assert decision.unloads[0].load == pytest.approx(120 * 1024 * 1024)
    assert decision.unloads[0].destination is None


def test_threshold_shedder_takes_bundles_until_the_target_is_reached():
    # broker1 at 90 %: mean 36.7 %, fraction 0.90 - 0.367 - 0.1 + 0.05 = 0.483 -> 96.7 MiB/s:
    # 120 MiB/s is taken first and already covers it.
    decision = shed(three_brokers((90, 10, 10)), CONFIG, {})
    assert len(decision.unloads) == 1
    config = PulsarConfig.from_keys({"loadBalancerBrokerThresholdShedderPercentage": 1})
    # threshold 1 %: fraction 0.90 - 0.367 - 0.01 + 0.05 = 0.573 -> 114.7 MiB/s, still one bundle.
    assert len(shed(three_brokers((90, 10, 10)), config, {}).unloads) == 1
    big = three_brokers((100, 0, 0))
    # mean 33.3 %, fraction 0.617 -> 123.3 MiB/s > 120: the second bundle is needed too.
    assert len(shed(big, CONFIG, {}).unloads) == 2


def test_threshold_shedder_is_quiet_when_balanced():
    decision = shed(three_brokers((20, 20, 20)), CONFIG, {})
    assert decision.unloads == ()
    assert decision.reason == Reason.BALANCED


def test_threshold_shedder_skips_sole_bundle_broker():
    snap = snapshot(
        [broker("a", 90, ("ns/x",), 500), broker("b", 10, ("ns/y", "ns/z"), 10)],
        [bundle("ns/x", "a", 500), bundle("ns/y", "b", 5), bundle("ns/z", "b", 5)],
    )
    decision = shed(snap, CONFIG, {})
    assert decision.unloads == ()
    assert [(s.name, s.reason) for s in decision.skipped] == [("a", Reason.SOLE_BUNDLE)]


def test_threshold_shedder_skips_broker_below_min_throughput():
    # fraction 0.15 of 50 MiB/s = 7.5 MiB/s < the 10 MiB/s default floor.
    snap = three_brokers()
    low = snapshot(
        [
            broker("broker1", 40, snap.brokers["broker1"].bundles, 50),
            *list(snap.brokers.values())[1:],
        ],
        snap.bundles.values(),
    )
    decision = shed(low, CONFIG, {})
    assert decision.unloads == ()
    assert decision.skipped[0].reason == Reason.BELOW_MIN_THROUGHPUT


def test_threshold_shedder_never_unloads_a_bundle_in_the_grace_period():
    now = 1_000_000.0
    recent = {"ns/0x00000000_0x40000000": now - 60}
    decision = shed(three_brokers(recently_unloaded=recent), CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/0x40000000_0x80000000"]
    assert ("ns/0x00000000_0x40000000", Reason.COOL_DOWN) in [
        (s.name, s.reason) for s in decision.skipped
    ]


def test_grace_period_expires_after_the_configured_minutes():
    now = 1_000_000.0
    recent = {"ns/0x00000000_0x40000000": now - 31 * 60}
    decision = shed(three_brokers(recently_unloaded=recent), CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/0x00000000_0x40000000"]


def test_usage_history_is_an_ema_carried_in_state():
    first = shed(three_brokers(), CONFIG, {})
    assert first.state["brokerAvgResourceUsage"]["broker1"] == pytest.approx(0.4)
    second = shed(three_brokers((10, 10, 10)), CONFIG, first.state)
    # 0.9 × 0.4 + 0.1 × 0.1 = 0.37
    assert second.state["brokerAvgResourceUsage"]["broker1"] == pytest.approx(0.37)
    assert second.stats["brokers"]["broker1"]["usage"] == pytest.approx(0.1)
    # history 0.37 against mean 0.19: still ≥ mean + 0.1, so broker1 keeps shedding.
    assert [u.source for u in second.unloads] == ["broker1"]


def test_no_load_data_means_no_action():
    decision = shed(three_brokers((0, 0, 0)), CONFIG, {})
    assert decision.reason == Reason.NO_LOAD_DATA
    assert decision.unloads == ()


def lower_boundary_cluster():
    """Spec §2.3 example: ten brokers at 80 % and one idle, 300 MiB/s each."""
    brokers = [broker(f"b{i:02d}", 80, (f"ns/{i}a", f"ns/{i}b"), 300) for i in range(10)]
    brokers.append(broker("idle", 0, (), 0))
    bundles = [bundle(f"ns/{i}{s}", f"b{i:02d}", 150) for i in range(10) for s in "ab"]
    return snapshot(brokers, bundles)


def test_lower_boundary_shedding_is_off_by_default():
    assert shed(lower_boundary_cluster(), CONFIG, {}).unloads == ()


def test_lower_boundary_shedding_sheds_from_the_first_most_used_broker():
    config = PulsarConfig.from_keys({"lowerBoundarySheddingEnabled": True})
    decision = shed(lower_boundary_cluster(), config, {})
    # mean 72.7 %: nobody is above 82.7 %, the idle broker is below 62.7 %; the first broker at
    # 80 % (ties keep the first seen) sheds ≥ 300 MiB/s × 0.1 × 0.5 = 15 MiB/s: one bundle.
    assert decision.reason == Reason.UNDERLOADED
    assert [(u.source, u.reason) for u in decision.unloads] == [("b00", Reason.UNDERLOADED)]


def test_lower_boundary_respects_the_min_throughput_floor():
    config = PulsarConfig.from_keys(
        {"lowerBoundarySheddingEnabled": True, "loadBalancerBundleUnloadMinThroughputThreshold": 16}
    )
    decision = shed(lower_boundary_cluster(), config, {})
    assert decision.unloads == ()
    assert decision.skipped[0].reason == Reason.BELOW_MIN_THROUGHPUT


def test_cpu_above_100_percent_is_not_clamped():
    decision = shed(three_brokers((140, 10, 10)), CONFIG, {})
    assert decision.stats["brokers"]["broker1"]["usage"] == pytest.approx(1.4)
    assert decision.unloads
