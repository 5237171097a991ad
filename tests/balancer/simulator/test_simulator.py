from pathlib import Path

import numpy as np
import pytest

from balancer.bundles import bundles_from_boundaries, initial_boundaries
from balancer.hashing import topic_hash
from balancer.simulator.layout import DEMO, BrokerSpec, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.traces import load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from balancer.wire import parse_broker
from console.connectors.simulator_agent import Simulator

TRACES = Path(__file__).resolve().parents[3] / "data" / "traces"
SMALL = Layout(
    "t", (BrokerSpec("b1", "z1", "cpu1"), BrokerSpec("b2", "z2", "cpu2")), ("t/a", "t/b"), 2
)


def write_traces(root: Path, counts: list[list[int]]) -> Path:
    inv = root / "azure-functions-2019" / "1350"
    inv.mkdir(parents=True)
    header = "HashFunction,HashOwner,HashApp," + ",".join(
        f"minute_{m + 1}" for m in range(len(counts[0]))
    )
    rows = [f"f{i:012d},o,a," + ",".join(map(str, row)) for i, row in enumerate(counts)]
    (inv / "1350_inv.csv").write_text("\n".join([header, *rows]) + "\n")
    nab = root / "nab" / "realAWSCloudwatch"
    nab.mkdir(parents=True)
    for name, value in (("cpu1", 10.0), ("cpu2", 50.0)):
        (nab / f"{name}.csv").write_text(f"timestamp,value\n2014-01-01 00:00:00,{value}\n")
    return root


def small_workload(tmp_path):
    root = write_traces(tmp_path, [[60, 120], [0, 60], [600, 0], [6, 6]])
    return build_workload(SMALL, load_functions(root), scale=10), root


def names_for(layout):
    return [
        b.name
        for ns in layout.namespaces
        for b in bundles_from_boundaries(ns, initial_boundaries(layout.bundles_per_namespace))
    ]


def test_real_demo_trace_has_1350_topics_over_a_day():
    workload = build_workload(DEMO, load_functions(TRACES))
    assert len(workload.names) == 1350
    assert workload.minutes == 1440
    assert len(set(workload.namespaces)) == 6
    assert load_cpu_series(TRACES, DEMO.brokers[0].cpu_series).shape == (4032,)


def test_function_invocations_per_minute_become_msg_rates(tmp_path):
    workload, _ = small_workload(tmp_path)
    # 60 invocations in a minute = 1/s, × scale 10
    assert workload.msg_rate_in(0)[0] == pytest.approx(10.0)
    assert workload.msg_rate_in(1)[0] == pytest.approx(20.0)
    assert workload.msg_rate_in(2)[0] == pytest.approx(10.0)  # wraps around
    assert workload.names[0] == "persistent://t/a/fn-f00000000000"
    assert workload.hashes[0] == topic_hash(workload.names[0])


def test_sizes_and_fanout_are_stable_per_topic(tmp_path):
    first, root = small_workload(tmp_path)
    second = build_workload(SMALL, load_functions(root), scale=10)
    assert np.array_equal(first.sizes_bytes, second.sizes_bytes)
    assert set(first.fanout) <= {1, 2, 3}


def test_every_topic_maps_to_the_bundle_its_hash_falls_in(tmp_path):
    workload, _ = small_workload(tmp_path)
    bundles = BundleMap.build(workload, names_for(SMALL))
    for topic, index in enumerate(bundles.topic_bundle):
        name = bundles.bundle_names[index]
        assert name.startswith(workload.namespaces[topic] + "/")
        lower, upper = (int(x, 16) for x in name.rsplit("/", 1)[1].split("_"))
        assert lower <= workload.hashes[topic] <= upper


def test_bundle_stats_add_up_to_the_workload(tmp_path):
    workload, _ = small_workload(tmp_path)
    stats = bundle_stats(workload, BundleMap.build(workload, names_for(SMALL)), 0)
    assert sum(s["msgRateIn"] for s in stats.values()) == pytest.approx(
        workload.msg_rate_in(0).sum()
    )
    assert sum(s["topics"] for s in stats.values()) == 4
    expected_out = (workload.msg_rate_in(0) * workload.sizes_bytes * workload.fanout).sum()
    assert sum(s["msgThroughputOut"] for s in stats.values()) == pytest.approx(expected_out)


def test_a_broker_reports_only_what_it_owns_so_an_unload_changes_its_load(tmp_path):
    workload, _ = small_workload(tmp_path)
    names = names_for(SMALL)
    stats = bundle_stats(workload, BundleMap.build(workload, names), 0)
    spec = SMALL.brokers[0]
    busy = max(names, key=lambda n: stats[n]["msgThroughputIn"])
    before = broker_report(spec, names, stats, 10.0, 0.0)
    after = broker_report(spec, [n for n in names if n != busy], stats, 10.0, 0.0)
    assert after["msgThroughputIn"] == pytest.approx(
        before["msgThroughputIn"] - stats[busy]["msgThroughputIn"]
    )
    assert after["cpu"]["usage"] < before["cpu"]["usage"]
    assert busy not in after["bundleStats"]
    # The report is a valid broker document.
    parse_broker({k: v for k, v in before.items() if k not in ("timestamp", "bundleStats")}, "")


def test_background_cpu_steps_every_five_minutes():
    series = np.asarray([1.0, 2.0])
    assert [background_cpu(series, m) for m in (0, 4, 5, 10)] == [1.0, 1.0, 2.0, 1.0]


class FakeConsole:
    """Stands in for the console's HTTP API: placement by round robin, reports kept."""

    def __init__(self, names):
        self.owners = dict.fromkeys(names)
        self.reports = []
        self.lookups = 0

    def ownership(self):
        return dict(self.owners)

    def lookup(self, topic):
        self.lookups += 1
        namespace = "/".join(topic.split("://")[1].split("/")[:2])
        for name, owner in self.owners.items():
            if owner is None and name.startswith(namespace):
                self.owners[name] = "b1" if self.lookups % 2 else "b2"
                return {"owner": self.owners[name]}
        return {"owner": None}

    def report(self, doc):
        self.reports.append(doc)


def test_simulator_step_looks_up_unowned_bundles_and_reports_every_broker(tmp_path):
    workload, root = small_workload(tmp_path)
    console = FakeConsole(names_for(SMALL))
    cpu = {b.name: load_cpu_series(root, b.cpu_series) for b in SMALL.brokers}
    sim = Simulator(SMALL, workload, cpu, console)
    sim.step(1000.0)
    assert [r["name"] for r in console.reports] == ["b1", "b2"]
    assert console.lookups >= 1
    served = sum(r["msgRateIn"] for r in console.reports)
    owned = {n for n, o in console.owners.items() if o}
    stats = bundle_stats(workload, sim.bundle_map, 0)
    assert served == pytest.approx(sum(stats[n]["msgRateIn"] for n in owned))
    assert sim.minute == 1


def test_offline_run_sheds_and_every_bundle_keeps_one_owner(tmp_path):
    from balancer.config import PulsarConfig
    from balancer.simulator.offline import OfflineCluster

    counts = [[600 * (i + 1)] * 12 for i in range(40)]
    root = write_traces(tmp_path, counts)
    workload = build_workload(SMALL, load_functions(root), scale=50)
    cpu = {b.name: load_cpu_series(root, b.cpu_series) for b in SMALL.brokers}
    config = PulsarConfig.from_keys({"loadBalancerBundleUnloadMinThroughputThreshold": 0})
    cluster = OfflineCluster(SMALL, workload, cpu, config, "ThresholdShedder", tick_every_minutes=2)
    cvs = [cluster.step(m) for m in range(12)]
    assert all(owner in {"b1", "b2"} for owner in cluster.owners.values())
    assert cluster.unloads > 0
    assert all(cv >= 0 for cv in cvs)
    assert set(cluster.recently_unloaded) <= set(cluster.owners)


def test_offline_run_without_a_shedder_never_unloads():
    from balancer.config import PulsarConfig
    from balancer.simulator.offline import run

    result = run(None, 3, traces=TRACES, config=PulsarConfig())
    assert result["unloads"] == 0
    assert len(result["cv"]) == 3


def test_bundle_stats_can_list_each_bundles_topics_with_their_own_rates(tmp_path):
    from balancer.bundles import parse_bundle_name

    workload, _root = small_workload(tmp_path)
    names = [
        b.name
        for ns in SMALL.namespaces
        for b in bundles_from_boundaries(ns, initial_boundaries(SMALL.bundles_per_namespace))
    ]
    bundle_map = BundleMap.build(workload, names)
    plain = bundle_stats(workload, bundle_map, 0)
    listed = bundle_stats(workload, bundle_map, 0, with_topics=True)
    assert all("topicStats" not in s for s in plain.values())
    for name, stats in listed.items():
        topics = stats["topicStats"]
        assert len(topics) == stats["topics"]
        for key in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
            assert sum(t[key] for t in topics) == pytest.approx(stats[key])
        bundle = parse_bundle_name(name)
        for t in topics:  # every topic hashes into its bundle, as the console checks
            assert t["topic"].startswith(f"persistent://{bundle.namespace}/")
            assert bundle.range.contains(topic_hash(t["topic"]))
