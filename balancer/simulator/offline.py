"""The simulator without a console: the same trace played in one process, the same cycle
(``plan_cycle``) the console's tick runs, its plan applied to an in-memory ownership map.

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
from balancer.cycle import (
    CycleConfig,
    CyclePlan,
    LoadStats,
    Strategies,
    apply_to_owners,
    plan_cycle,
    plan_placement,
)
from balancer.danube.config import DanubeConfig
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    BundleLoad,
    MessageRates,
    time_average,
)
from balancer.names import PlacementName, ShedderName
from balancer.registry import split_keys
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, Workload, build_workload
from balancer.snapshot import ClusterSnapshot
from balancer.wire import RATE_KEYS, parse_broker


@dataclass
class OfflineCluster:
    """Ownership, bundle time averages and strategy state of one in-process run."""

    layout: Layout
    workload: Workload
    cpu: dict[str, np.ndarray]
    config: PulsarConfig
    shedder: str | None
    cycle_config: CycleConfig | None = None
    seconds_per_minute: float = 2.0
    tick_every_minutes: int = 5
    owners: dict[str, str | None] = field(default_factory=dict)
    short_term: dict[str, MessageRates] = field(default_factory=dict)
    long_term: dict[str, MessageRates] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    recently_unloaded: dict[str, float] = field(default_factory=dict)
    shed_state: dict[str, Any] = field(default_factory=dict)
    unloads: int = 0
    max_over_mean: list[float] = field(default_factory=list)

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
            name: BrokerLoad(**{**_fields(b), "bundles": tuple(owned[name]), "reported_at": now})
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

    def place_unowned(self, now: float) -> None:
        """Place every unowned bundle, as clients' lookups would: the console's lookup,
        ``plan_placement`` with the configured placement."""
        names = [b for b, owner in self.owners.items() if owner is None]
        if not names:
            return
        plan = plan_placement(self.snapshot(now), self.cycle_settings(), self.shed_state, names)
        self.shed_state = plan.state
        apply_to_owners(plan, self.owners, self.recently_unloaded, now)

    def cycle_settings(self) -> CycleConfig:
        """The cycle's configuration: as given, else the shedder with Pulsar's tunables and no
        cool-down (trace minutes are seconds apart)."""
        return self.cycle_config or CycleConfig(
            strategies=Strategies(shedder=self.shedder or ShedderName.THRESHOLD),
            pulsar=self.config,
            safety=SafetyConfig(bundle_cool_down_s=0.0),
        )

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
        spread = LoadStats.of({n: b.weighted_max_usage(weights) for n, b in self.brokers.items()})
        self.max_over_mean.append(spread.max_over_mean)
        if self.shedder and minute % self.tick_every_minutes == self.tick_every_minutes - 1:
            self.cycle(now)
        return spread.cv

    def cycle(self, now: float) -> CyclePlan:
        """One shedding tick: the console's cycle on this cluster's snapshot, its plan applied."""
        plan = plan_cycle(self.snapshot(now), self.cycle_settings(), self.shed_state, now)
        self.shed_state = plan.state
        self.unloads += apply_to_owners(plan, self.owners, self.recently_unloaded, now)
        return plan


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
    cycle_config: CycleConfig | None = None,
) -> dict[str, Any]:
    """Play ``minutes`` trace minutes; returns the CV per minute, its mean and median, the median
    max/mean of broker usage, the unloads and unloads per trace hour."""
    workload = build_workload(layout, load_functions(traces), scale=scale)
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in layout.brokers}
    cluster = OfflineCluster(layout, workload, cpu, config, shedder, cycle_config)
    series = [cluster.step(start_minute + m) for m in range(minutes)]
    return {
        "shedder": shedder or "none",
        "minutes": minutes,
        "cv": series,
        "cvMean": statistics.fmean(series),
        "cvMedian": statistics.median(series),
        "maxOverMeanMedian": statistics.median(cluster.max_over_mean),
        "unloads": cluster.unloads,
        "unloadsPerHour": cluster.unloads * 60 / minutes,
    }


def main(argv: list[str] | None = None) -> None:
    """Print a JSON summary (or a comparison with no shedding) of an offline run."""
    parser = argparse.ArgumentParser(
        prog="python -m balancer.simulator.offline", description=__doc__
    )
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--shedder", default=ShedderName.THRESHOLD)
    parser.add_argument("--compare", action="store_true", help="also run without shedding")
    parser.add_argument("--traces", type=Path, default=default_traces_dir())
    parser.add_argument("--start-minute", type=int, default=0)
    parser.add_argument("--config", default="{}", help="Pulsar (and Danube) keys as JSON")
    parser.add_argument("--placement", default=PlacementName.LEAST_LONG_TERM_MESSAGE_RATE)
    parser.add_argument(
        "--ignore-destinations",
        action="store_true",
        help="re-place unloaded bundles with the placement even when the shedder chose a broker",
    )
    args = parser.parse_args(argv)
    pulsar_keys, danube_keys = split_keys(json.loads(args.config))
    config = PulsarConfig.from_keys(pulsar_keys)
    runs = [args.shedder] + ([None] if args.compare else [])
    for shedder in runs:
        cycle_config = CycleConfig(
            strategies=Strategies(
                shedder=shedder or ShedderName.THRESHOLD, placement=args.placement
            ),
            pulsar=config,
            safety=SafetyConfig(bundle_cool_down_s=0.0),
            is_destination_honoured=not args.ignore_destinations,
            danube=DanubeConfig.from_keys(danube_keys),
        )
        result = run(
            shedder,
            args.minutes,
            traces=args.traces,
            config=config,
            start_minute=args.start_minute,
            cycle_config=cycle_config,
        )
        cv = result.pop("cv")
        result["cvAtMinute0"] = cv[0]
        result["cvAtMinute10"] = cv[min(10, len(cv) - 1)]
        print(json.dumps(result))


if __name__ == "__main__":
    main()
