"""The config page's replay of the last hour, timed, printed as a Markdown table.

    .venv/bin/python -m tests.benchmarks.replay [--samples 120] [--interval 10] [--runs 3]

An hour of recorded snapshots (``--samples``, one every 30 s, from the offline simulator playing
the demo cluster's traces: 8 brokers, 96 bundles) is written as the tick writes it (the
snapshot documents, compressed JSON), then read back and replayed as ``config_replay`` does:
parse every document, the recorded series, and one replay per shedder at ``--interval`` s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import zlib

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO
from balancer.simulator.offline import OfflineCluster
from balancer.simulator.replay import recorded, replay, summary
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from balancer.wire import parse_snapshot, snapshot_document

SHEDDERS = ("ThresholdShedder", "UniformLoadShedder", "TransferShedder", "AvgShedder", "danube")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=120)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    traces = default_traces_dir()
    workload = build_workload(DEMO, load_functions(traces))
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in DEMO.brokers}
    cluster = OfflineCluster(DEMO, workload, cpu, PulsarConfig(), None)
    blobs = []
    for minute in range(args.samples):
        cluster.step(minute)
        document = snapshot_document(cluster.snapshot(minute * 30.0))
        blobs.append(zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6))
    size = sum(len(b) for b in blobs) / 1024
    parse_s = []
    for _ in range(args.runs):
        started = time.perf_counter()
        samples = [parse_snapshot(json.loads(zlib.decompress(b))) for b in blobs]
        parse_s.append(time.perf_counter() - started)
    print(
        f"{args.samples} snapshots of {len(DEMO.brokers)} brokers and "
        f"{len(samples[0].bundles)} bundles, {size:,.0f} KiB compressed in Redis; read and "
        f"parsed in {statistics.median(parse_s):.2f} s; {os.cpu_count()} cores; median of "
        f"{args.runs} runs"
    )
    base = recorded(samples, CycleConfig().pulsar.weights)
    print()
    print("| shedder | cycles | replay (s) | median CV | median max/mean | moves/hour |")
    print("|---|---|---|---|---|---|")
    stats = summary(base)
    print(
        f"| recorded (no shedding) | {len(base)} | – | {stats['cvMedian']:.3f} "
        f"| {stats['maxOverMeanMedian']:.2f} | 0 |"
    )
    for shedder in SHEDDERS:
        config = CycleConfig(
            strategies=Strategies(shedder=shedder), safety=SafetyConfig(bundle_cool_down_s=60)
        )
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = replay(samples, config, {}, args.interval)
            times.append(time.perf_counter() - started)
        doc = result.as_dict()
        print(
            f"| {shedder} | {doc['cycles']} | {statistics.median(times):.2f} "
            f"| {doc['cvMedian']:.3f} | {doc['maxOverMeanMedian']:.2f} "
            f"| {doc['movesPerHour']:.1f} |"
        )


if __name__ == "__main__":
    main()
