"""One whole cycle (``plan_cycle``: life cycle, shedder with guards, vetoes, placement, stats
before and after) for every strategy on synthetic heavy-tailed clusters.

    .venv/bin/python -m tests.benchmarks [--sizes 100x10000,1000x100000] [--repeat 3]

Prints a Markdown table: milliseconds per cycle (median of the repeats, garbage collection off
while timing; the snapshot is built once, outside the timing, and its build time is printed), the
same while the hot broker drains (every bundle it owns placed in one pass, on a snapshot that
remembers nothing), and the process's peak resident memory after each size.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time
from dataclasses import replace

import numpy as np

from balancer.config import PulsarConfig
from balancer.cycle import ActionKind, CycleConfig, Strategies, plan_cycle
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage, TopicStats
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot

MIB = 1024 * 1024


def synthetic(brokers: int, bundles: int, seed: int = 7) -> ClusterSnapshot:
    """Pareto-distributed bundle throughputs on randomly chosen owners; broker usage follows
    from what it owns (bandwidth against a 1 GB/s NIC), plus one hot broker."""
    rng = np.random.default_rng(seed)
    tput = (rng.pareto(1.5, bundles) + 0.1) * 0.2 * MIB
    owners = rng.integers(0, brokers, bundles)
    owners[: max(1, bundles // brokers) * 3] = 0  # broker 0 is hot
    names = [f"t{i % 97}/ns{i % 13}/0x{i:08x}_0x{i + 1:08x}" for i in range(bundles)]
    broker_names = [f"broker-{j:05d}" for j in range(brokers)]
    per_broker_tput = np.bincount(owners, tput, brokers)
    owned: list[list[str]] = [[] for _ in range(brokers)]
    for i, o in enumerate(owners):
        owned[o].append(names[i])
    limit = max(per_broker_tput.mean(), 1.0) * 3  # the hot broker, at 3× the mean, is full
    broker_loads = {
        broker_names[j]: BrokerLoad(
            broker_names[j],
            failure_domain=f"zone-{j % 3}",
            cpu=ResourceUsage(float(rng.uniform(5, 40)), 100),
            bandwidth_in=ResourceUsage(float(per_broker_tput[j] / 2), float(limit)),
            bandwidth_out=ResourceUsage(float(per_broker_tput[j] / 2), float(limit)),
            rates=MessageRates(0, 0, float(per_broker_tput[j] / 2), float(per_broker_tput[j] / 2)),
            bundles=tuple(owned[j]),
            topics=len(owned[j]),
            reported_at=1_000_000.0,
            topic_stats=tuple(
                TopicStats(f"/ns/{n}", byte_rate=float(per_broker_tput[j]) / max(len(owned[j]), 1))
                for n in owned[j][:20]
            ),
        )
        for j in range(brokers)
    }
    rates = [MessageRates(float(t / 4000), 0, float(t / 2), float(t / 2)) for t in tput.tolist()]
    bundle_loads = {
        names[i]: BundleLoad(names[i], broker_names[owners[i]], rates[i], rates[i], topics=3)
        for i in range(bundles)
    }
    return ClusterSnapshot(1_000_000.0, broker_loads, bundle_loads)


def draining(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The same cluster with its hot broker (broker 0, the one that owns the most) draining:
    the cycle places every bundle it owns in one pass."""
    name = next(iter(snapshot.brokers))
    brokers = {**snapshot.brokers, name: replace(snapshot.brokers[name], state="draining")}
    return ClusterSnapshot(snapshot.now, brokers, snapshot.bundles)


STRATEGIES = {
    "ThresholdShedder": {},
    "OverloadShedder": {},
    "UniformLoadShedder": {},
    "AvgShedder": {"hitCountHigh": None},
    "TransferShedder": {"unloadConditionHitCount": 3},
    "FulcrumShedder": {},
}


def cycle(snapshot: ClusterSnapshot, name: str) -> int:
    """One whole cycle with shedder ``name``; returns the planned unloads."""
    state = dict(STRATEGIES[name])
    if name == "AvgShedder":
        state = {"hitCountHigh": dict.fromkeys(snapshot.brokers, 10)}
    config = CycleConfig(
        strategies=Strategies(
            shedder=name,
            placement="FulcrumPlacement"
            if name == "FulcrumShedder"
            else "LeastLongTermMessageRate",
        ),
        pulsar=PulsarConfig.from_keys({"loadBalancerBundleUnloadMinThroughputThreshold": 0}),
        safety=SafetyConfig(bundle_cool_down_s=0.0),
    )
    plan = plan_cycle(snapshot, config, {name: state})
    return len(plan.planned(ActionKind.UNLOAD))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100x10000,1000x100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    print("| strategy | " + " | ".join(f"{b:,} × {n:,} (ms)" for b, n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    results: dict[str, list[str]] = {name: [] for name in STRATEGIES}
    memory = []
    for brokers, bundles in sizes:
        started = time.perf_counter()
        snapshot = synthetic(brokers, bundles)
        build = time.perf_counter() - started
        for name in STRATEGIES:
            times, unloads = [], 0
            gc.disable()
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                unloads = cycle(snapshot, name)
                times.append((time.perf_counter() - t0) * 1000)
            gc.enable()
            # The first cycle on a snapshot also builds its per-broker bundle order (cold).
            results[name].append(
                f"{statistics.median(times):.1f} (cold {times[0]:.0f}; {unloads} unloads)"
            )
        drained = draining(snapshot)
        moved = len(drained.brokers[next(iter(drained.brokers))].bundles)
        for name in ("ThresholdShedder", "FulcrumShedder"):
            times = []
            for _ in range(args.repeat):
                fresh = ClusterSnapshot(drained.now, drained.brokers, drained.bundles)
                t0 = time.perf_counter()
                cycle(fresh, name)
                times.append((time.perf_counter() - t0) * 1000)
            results.setdefault(f"{name}, its hot broker draining", []).append(
                f"{statistics.median(times):.1f} ({moved} bundles placed)"
            )
        del drained
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        memory.append(f"{peak_mb:,.0f} MB peak RSS, snapshot built in {build:.1f} s")
        del snapshot
    for name, cells in results.items():
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("| memory | " + " | ".join(memory) + " |")


if __name__ == "__main__":
    main()
