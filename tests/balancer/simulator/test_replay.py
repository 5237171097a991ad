"""The replay of recorded load (balancer.simulator.replay) and the reassignment it rests on."""

from dataclasses import replace

import pytest

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies, reassign
from balancer.load import BundleLoad
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO
from balancer.simulator.offline import OfflineCluster
from balancer.simulator.replay import (
    ReplayPoint,
    ReplayResult,
    observed_moves,
    recorded,
    replay,
    summary,
)
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from balancer.snapshot import ClusterSnapshot
from tests.balancer import scenarios

MIB = 1024 * 1024
NOW = scenarios.NOW
EASY = scenarios.EASY


def config(shedder="ThresholdShedder", **kw):
    return CycleConfig(
        strategies=Strategies(shedder=shedder),
        pulsar=EASY,
        safety=SafetyConfig(bundle_cool_down_s=kw.pop("cool_down", 0)),
        **kw,
    )


def test_a_moved_bundle_takes_its_load_with_it():
    snap = scenarios.one_hot_broker()
    bundle = "t/ns/0x00000000_0x00000001"  # 50 MiB/s, a quarter of b1's msg rate
    b1, b2 = snap.brokers["b1"], snap.brokers["b2"]
    moved = reassign(snap, {bundle: "b2"}, now=NOW + 30)
    assert moved.bundles[bundle].owner == "b2"
    assert bundle in moved.brokers["b2"].bundles
    assert bundle not in moved.brokers["b1"].bundles
    # Its CPU is the load model's: its msg rate × the CPU one message costs (b2's and b3's:
    # 20 % for one such bundle), not a quarter of b1's 90 %: b1's 10 % of background stays.
    assert moved.brokers["b1"].cpu.usage == pytest.approx(b1.cpu.usage - 20)
    assert moved.brokers["b2"].cpu.usage == pytest.approx(b2.cpu.usage + 20)
    assert moved.brokers["b2"].rates.throughput == pytest.approx(b2.rates.throughput + 50 * MIB)
    assert moved.brokers["b1"].rates.msg_rate == pytest.approx(b1.rates.msg_rate * 3 / 4)
    assert moved.brokers["b2"].topics == b2.topics + 10
    # Moved in time with its reports' age kept; the third broker untouched but for the time.
    assert moved.now == NOW + 30
    assert moved.brokers["b3"].reported_at == NOW + 30
    assert moved.brokers["b3"].cpu == snap.brokers["b3"].cpu


def test_a_bundle_given_to_nobody_or_an_unknown_broker_leaves_its_owner_only():
    snap = scenarios.one_hot_broker()
    bundle = "t/ns/0x10000000_0x20000000"  # b2's only bundle
    gone = reassign(snap, {bundle: "no-such-broker"})
    assert gone.bundles[bundle].owner is None
    assert gone.brokers["b2"].rates.throughput == 0
    assert gone.brokers["b2"].cpu.usage == 0  # its whole msg rate left
    back = reassign(gone, {bundle: "b3"})  # an unowned bundle placed: its load comes with it
    assert back.brokers["b3"].rates.throughput == pytest.approx(100 * MIB)
    assert back.brokers["b3"].cpu.usage == pytest.approx(snap.brokers["b3"].cpu.usage + 20)


def test_nothing_reassigned_is_the_same_snapshot():
    snap = scenarios.one_hot_broker()
    same = reassign(snap, {"t/ns/0x10000000_0x20000000": "b2"}, recent_moves=[NOW - 5])
    assert same.bundles is snap.bundles
    assert same.brokers == snap.brokers
    assert same.recent_moves == (NOW - 5,)
    pending = ClusterSnapshot(NOW, {"b9": replace(snap.brokers["b1"], reported_at=None)}, {})
    assert reassign(pending, {}, now=NOW + 9).brokers["b9"].reported_at is None


def hot_samples(count=6, every=30.0):
    snap = scenarios.one_hot_broker()
    return [reassign(snap, {}, now=NOW + i * every) for i in range(count)]


def test_a_replay_moves_load_off_the_hot_broker_and_counts_its_moves():
    samples = hot_samples()
    result = replay(samples, config(), {}, 30.0)
    assert len(result.points) == len(samples)
    assert result.moves > 0
    assert result.points[-1].cv < result.points[0].cv
    doc = result.as_dict()
    assert doc["movesPerHour"] == pytest.approx(result.moves / (6 * 30 / 3600))
    assert doc["cycles"] == 6
    assert doc["cvMedian"] == summary(result.points)["cvMedian"]


def test_without_shedding_a_replay_is_what_was_recorded():
    samples = hot_samples()
    result = replay(samples, config(is_shedding_enabled=False), {}, 30.0)
    assert result.moves == 0
    assert result.points == recorded(samples, config().pulsar.weights)


def test_an_unowned_bundle_is_placed_not_moved():
    snap = scenarios.one_hot_broker()
    bundles = {b.name: b for b in snap.bundles.values()}
    bundles["t/ns/0x40000000_0x50000000"] = BundleLoad("t/ns/0x40000000_0x50000000")
    sample = ClusterSnapshot(NOW, snap.brokers, bundles)
    result = replay([sample], config(is_shedding_enabled=False), {}, 10.0)
    assert (result.placements, result.moves, result.interval_s) == (1, 0, 10.0)
    assert result.as_dict()["movesPerHour"] == 0.0
    assert ReplayResult((), 10.0, 0, 0, 0, 0, 0).as_dict()["movesPerHour"] == 0.0


def test_a_long_recording_is_replayed_at_a_longer_interval():
    result = replay(hot_samples(count=5, every=60.0), config(), {}, 10.0, max_cycles=3)
    assert result.interval_s == 120.0
    assert [p.at for p in result.points] == [NOW, NOW + 120, NOW + 240]


def test_nothing_to_replay_and_a_bad_interval_are_refused():
    with pytest.raises(ValueError, match="nothing recorded"):
        replay([], config(), {}, 10.0)
    with pytest.raises(ValueError, match="must be positive"):
        replay(hot_samples(), config(), {}, 0.0)
    assert summary([]) == {"cvMedian": None, "maxOverMeanMedian": None, "maxOverMeanP95": None}


def test_a_traced_hour_replayed_under_two_configs():
    traces = default_traces_dir()
    workload = build_workload(DEMO, load_functions(traces))
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in DEMO.brokers}
    cluster = OfflineCluster(DEMO, workload, cpu, PulsarConfig(), None)
    samples = []
    for minute in range(120):
        cluster.step(minute)
        samples.append(cluster.snapshot(minute * 30.0))
    as_recorded = recorded(samples, config().pulsar.weights)
    quiet = replay(samples, config(is_shedding_enabled=False), {}, 30.0)
    assert quiet.points == as_recorded  # nothing moved: exactly the recorded load
    shed = replay(samples, config(cool_down=60), {}, 10.0)
    assert shed.moves > 0
    assert shed.oscillations <= shed.moves
    assert summary(shed.points)["maxOverMeanMedian"] < summary(as_recorded)["maxOverMeanMedian"]
    assert shed.oscillations > 0  # bursty load sends some bundles back within the hour


def test_a_broker_gone_from_the_recording_leaves_its_bundles_to_be_placed_again():
    snap = scenarios.one_hot_broker()
    first = reassign(snap, {})
    gone = {n: b for n, b in snap.brokers.items() if n != "b3"}
    bundles = {
        b.name: replace(b, owner=None) if b.owner == "b3" else b for b in snap.bundles.values()
    }
    later = ClusterSnapshot(NOW + 30, gone, bundles)
    result = replay([first, later], config(is_shedding_enabled=False), {}, 30.0)
    assert (result.placements, result.moves) == (1, 0)  # b3's bundle found a new owner


def test_a_point_without_load_says_nothing_of_balance():
    """The first snapshot a console records may come before any broker reported (every usage
    0, max/mean 0): left out of the medians, which would otherwise read better than the
    cluster ever was."""
    points = [ReplayPoint(0.0, 0.0, 0.0), ReplayPoint(30.0, 0.2, 1.3), ReplayPoint(60.0, 0.1, 1.1)]
    figures = summary(points)
    assert figures["maxOverMeanMedian"] == pytest.approx(1.2)
    assert figures["maxOverMeanP95"] == pytest.approx(1.3)
    assert figures["cvMedian"] == pytest.approx(0.15)
    assert summary(points[:1])["maxOverMeanMedian"] is None


def test_observed_moves_count_changes_of_broker_only():
    from balancer.load import BrokerLoad, BundleLoad
    from balancer.snapshot import ClusterSnapshot

    brokers = {n: BrokerLoad(n, reported_at=0.0) for n in ("b1", "b2")}

    def sample(now, owners):
        return ClusterSnapshot(now, brokers, {n: BundleLoad(n, o) for n, o in owners.items()})

    samples = [
        sample(0.0, {"t/n/a": "b1", "t/n/b": "b1"}),
        sample(30.0, {"t/n/a": None, "t/n/b": "b1"}),  # in transit: not a move yet
        sample(60.0, {"t/n/a": "b2", "t/n/b": "b1"}),  # a: b1 -> b2
        sample(90.0, {"t/n/a": "b1", "t/n/b": "b1"}),  # a: back, a move again
    ]
    assert observed_moves(samples) == 2
    assert observed_moves(samples[:1]) == 0
