import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import ResourceUsage
from balancer.shedding.overload import shed
from tests.balancer.builders import broker, bundle, snapshot

CONFIG = PulsarConfig()


def hot(cpu, sizes=(10, 8, 5), throughput=100):
    names = tuple(f"ns/{i}" for i in range(len(sizes)))
    return snapshot(
        [broker("a", cpu, names, throughput), broker("b", 10, ("ns/x",), 10)],
        [bundle(n, "a", s) for n, s in zip(names, sizes, strict=True)] + [bundle("ns/x", "b", 10)],
    )


def test_seed_example_95_percent_offloads_15_percent_of_throughput():
    # target = 100 MiB/s × (0.95 - 0.85 + 0.05) = 15 MiB/s: 10 then 8 (18 ≥ 15) -> two bundles.
    decision = shed(hot(95), CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/0", "ns/1"]
    assert decision.reason == Reason.OVERLOADED


def test_usage_equal_to_the_bar_counts_as_overloaded_and_below_does_not():
    # 85 %: target 5 MiB/s, the largest bundle (10) alone covers it.
    assert [u.bundle for u in shed(hot(85), CONFIG, {}).unloads] == ["ns/0"]
    assert shed(hot(84.9), CONFIG, {}).unloads == ()


def test_memory_does_not_count_towards_overload():
    snap = hot(10)
    a = snap.brokers["a"]
    from dataclasses import replace

    with_memory = snapshot(
        [replace(a, memory=ResourceUsage(99, 100)), snap.brokers["b"]], snap.bundles.values()
    )
    assert shed(with_memory, CONFIG, {}).unloads == ()


def test_overload_shedder_skips_a_sole_bundle_broker():
    decision = shed(hot(99, sizes=(50,)), CONFIG, {})
    assert decision.unloads == ()
    assert decision.skipped[0].reason == Reason.SOLE_BUNDLE


def test_overload_shedder_has_no_minimum_throughput():
    # 2 KiB/s in all: ThresholdShedder's 10 MiB/s floor would stop it, OverloadShedder does not.
    decision = shed(hot(95, sizes=(0.001, 0.001), throughput=0.002), CONFIG, {})
    assert len(decision.unloads) == 1


def test_overload_shedder_skips_bundles_in_the_grace_period():
    snap = hot(95)
    recent = snapshot(
        list(snap.brokers.values()),
        snap.bundles.values(),
        recently_unloaded={"ns/0": snap.now - 10},
    )
    decision = shed(recent, CONFIG, {})
    assert [u.bundle for u in decision.unloads] == ["ns/1", "ns/2"]
    assert decision.stats["brokers"]["a"]["usage"] == pytest.approx(0.95)
