"""The simulator without a console: the same trace, placement and shedder run in one process.

It answers what-if questions ("how does the CV move with ThresholdShedder versus no shedding on
this day of traffic?") quickly and reproducibly. Time is simulated: a trace minute lasts
``seconds_per_minute`` seconds, as in the live demo, so grace periods in seconds mean the same.

    python -m balancer.simulator.offline --minutes 120 --compare
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from balancer.bundles import bundles_from_boundaries, initial_boundaries
from balancer.config import PulsarConfig
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    BundleLoad,
    MessageRates,
    time_average,
)
from balancer.placement.batch import place_many
from balancer.registry import get_shedder
from balancer.simulator.layout import DEMO, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.traces import load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, Workload, build_workload
from balancer.snapshot import ClusterSnapshot
from balancer.stats import imbalance
from balancer.wire import RATE_KEYS, parse_broker


@dataclass
class OfflineCluster:
    """Ownership, bundle time averages and strategy state of one in-process run."""

    layout: Layout
    workload: Workload
    cpu: dict[str, np.ndarray]
    config: PulsarConfig
    shedder: str | None
    seconds_per_minute: float = 2.0
    tick_every_minutes: int = 5
    owners: dict[str, str | None] = field(default_factory=dict)
    short_term: dict[str, MessageRates] = field(default_factory=dict)
    long_term: dict[str, MessageRates] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    recently_unloaded: dict[str, float] = field(default_factory=dict)
    shed_state: dict[str, Any] = field(default_factory=dict)
    unloads: int = 0

    def __post_init__(self) -> None:
        for namespace in self.layout.namespaces:
            boundaries = initial_boundaries(self.layout.bundles_per_namespace)
            for bundle in bundles_from_boundaries(namespace, boundaries):
                self.owners[bundle.name] = None
        self.bundle_map = BundleMap.build(self.workload, list(self.owners))
        self.brokers: dict[str, BrokerLoad] = {
            b.name: BrokerLoad(b.name) for b in self.layout.brokers
        }

    def snapshot(self, now: float) -> ClusterSnapshot:
        """The cluster as a decision sees it: newest reports, ownership, averages."""
        owned: dict[str, list[str]] = {name: [] for name in self.brokers}
        for bundle, owner in self.owners.items():
            if owner is not None:
                owned[owner].append(bundle)
        brokers = {
            name: BrokerLoad(**{**_fields(b), "bundles": tuple(owned[name])})
            for name, b in self.brokers.items()
        }
        bundles = {
            name: BundleLoad(
                name,
                owner,
                self.short_term.get(name, MessageRates()),
                self.long_term.get(name, MessageRates()),
            )
            for name, owner in self.owners.items()
        }
        return ClusterSnapshot(
            now, brokers, bundles, recently_unloaded=dict(self.recently_unloaded)
        )

    def place_unowned(self, now: float, sources: dict[str, str] | None = None) -> None:
        """Place every unowned bundle, as clients' lookups would (never back on its source)."""
        names = [b for b, owner in self.owners.items() if owner is None]
        if not names:
            return
        placements, _ = place_many(self.snapshot(now), names, self.config, {}, sources=sources)
        for placement in placements:
            self.owners[placement.bundle] = placement.broker

    def step(self, minute: int) -> float:
        """Play one trace minute; returns the CV of the brokers' weighted usage."""
        now = minute * self.seconds_per_minute
        self.place_unowned(now)
        stats = bundle_stats(self.workload, self.bundle_map, minute)
        owned: dict[str | None, list[str]] = {name: [] for name in self.brokers}
        for bundle, owner in self.owners.items():
            owned.setdefault(owner, []).append(bundle)  # None: no broker could take it
        for spec in self.layout.brokers:
            doc = broker_report(
                spec, owned[spec.name], stats, background_cpu(self.cpu[spec.name], minute), now
            )
            self.brokers[spec.name] = parse_broker(
                {k: v for k, v in doc.items() if k not in ("timestamp", "bundleStats")}, ""
            )
            for name, values in doc["bundleStats"].items():
                rates = MessageRates(**{attr: values[key] for key, attr in RATE_KEYS.items()})
                n = self.samples.get(name, 0)
                self.short_term[name] = time_average(
                    self.short_term.get(name, MessageRates()), rates, n, SHORT_TERM_SAMPLES
                )
                self.long_term[name] = time_average(
                    self.long_term.get(name, MessageRates()), rates, n, LONG_TERM_SAMPLES
                )
                self.samples[name] = n + 1
        weights = self.config.weights
        cv = imbalance(b.weighted_max_usage(weights) for b in self.brokers.values()).cv
        if self.shedder and minute % self.tick_every_minutes == self.tick_every_minutes - 1:
            self.shed(now)
        return cv

    def shed(self, now: float) -> None:
        """One shedding tick: unload what the shedder says, then place the unloaded bundles."""
        _, shedder = get_shedder(self.shedder or "")
        decision = shedder(self.snapshot(now), self.config, self.shed_state)
        self.shed_state = decision.state
        sources = {}
        for unload in decision.unloads:  # the snapshot is this cluster's: sources are owners
            self.owners[unload.bundle] = None
            self.recently_unloaded[unload.bundle] = now
            sources[unload.bundle] = unload.source
            self.unloads += 1
        self.place_unowned(now, sources)


def _fields(broker: BrokerLoad) -> dict[str, Any]:
    return {name: getattr(broker, name) for name in BrokerLoad.__dataclass_fields__}


def run(
    shedder: str | None,
    minutes: int,
    *,
    traces: Path,
    config: PulsarConfig,
    scale: float = DEFAULT_SCALE,
    start_minute: int = 0,
    layout: Layout = DEMO,
) -> dict[str, Any]:
    """Play ``minutes`` trace minutes; returns the CV per minute, its mean and the unload count."""
    workload = build_workload(layout, load_functions(traces), scale=scale)
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in layout.brokers}
    cluster = OfflineCluster(layout, workload, cpu, config, shedder)
    series = [cluster.step(start_minute + m) for m in range(minutes)]
    return {
        "shedder": shedder or "none",
        "minutes": minutes,
        "cv": series,
        "cvMean": statistics.fmean(series),
        "cvMedian": statistics.median(series),
        "unloads": cluster.unloads,
    }


def main(argv: list[str] | None = None) -> None:
    """Print a JSON summary (or a comparison with no shedding) of an offline run."""
    from balancer.simulator.run import default_traces_dir

    parser = argparse.ArgumentParser(
        prog="python -m balancer.simulator.offline", description=__doc__
    )
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--shedder", default="ThresholdShedder")
    parser.add_argument("--compare", action="store_true", help="also run without shedding")
    parser.add_argument("--traces", type=Path, default=default_traces_dir())
    parser.add_argument("--start-minute", type=int, default=0)
    parser.add_argument("--config", default="{}", help="Pulsar keys as JSON")
    args = parser.parse_args(argv)
    config = PulsarConfig.from_keys(json.loads(args.config))
    runs = [args.shedder] + ([None] if args.compare else [])
    for shedder in runs:
        result = run(
            shedder, args.minutes, traces=args.traces, config=config, start_minute=args.start_minute
        )
        cv = result.pop("cv")
        result["cvAtMinute0"] = cv[0]
        result["cvAtMinute10"] = cv[min(10, len(cv) - 1)]
        print(json.dumps(result))


if __name__ == "__main__":
    main()
