"""The simulated Pulsar cluster's state and behaviour between requests: ownership, the load of
each trace minute, client lookups, Pulsar's own shedder, and the load reports and metrics its
brokers serve. No Django."""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from balancer.bundles import initial_boundaries
from balancer.config import PulsarConfig
from balancer.cycle import (
    CycleConfig,
    Strategies,
    apply_plan,
    plan_cycle,
    plan_placement,
)
from balancer.hashing import format_hash
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    BundleLoad,
    MessageRates,
    ResourceUsage,
    time_average,
)
from balancer.names import PlacementName, ShedderName
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO, BrokerSpec, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.workload import Workload
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from console.connectors.pulsar_cluster.common import (
    AFFINITY_BY_NAME,
    ALL_SPLITS,
    CONFIG,
    CORES,
    DIRECT_MEMORY_MIB,
    EXTENSIBLE,
    KBIT_PER_BYTE,
    ML_SHEDDERS,
    MODULAR,
    SERVICE_PORT,
    Assignment,
    LoadManagerSink,
    RequestRecord,
    Response,
    ShedRecord,
    StepResult,
    _core_keys,
    _escape,
    _text,
    _version,
)

log = logging.getLogger("fulcrum.pulsar_cluster")


class Owners(dict[str, "str | None"]):
    """bundle -> broker id (None: unowned), with each broker's bundles kept beside it, so that
    a broker's list costs its own bundles, not the cluster's (200 brokers x 50,000 bundles:
    the scan per broker made one trace minute take 7 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_owner: dict[str | None, set[str]] = {}

    def __setitem__(self, bundle: str, owner: str | None) -> None:
        if bundle in self:
            self.by_owner[self[bundle]].discard(bundle)
        super().__setitem__(bundle, owner)
        self.by_owner.setdefault(owner, set()).add(bundle)

    def __delitem__(self, bundle: str) -> None:
        self.by_owner[self[bundle]].discard(bundle)
        super().__delitem__(bundle)

    def pop(self, bundle: str, *default: str | None) -> str | None:  # type: ignore[override]
        if bundle not in self:
            if default:
                return default[0]
            raise KeyError(bundle)
        owner = self[bundle]
        del self[bundle]
        return owner

    def update(self, *args: object, **kwargs: object) -> None:
        raise TypeError("Owners: assign bundles one by one (the index follows each)")

    def of(self, owner: str | None) -> set[str]:
        """The bundles ``owner`` owns (None: the unowned ones); the caller must not change it."""
        return self.by_owner.get(owner, set())


class ClusterState:
    """The simulated cluster's state, shared by every broker's web server under one lock.

    Args:
        workload: topics and their per-minute rates (``build_workload``).
        cpu: layout broker name -> its NAB background CPU series (percent, per 5 minutes).
        layout: brokers (with failure domains), namespaces, bundle counts, anti-affinity groups.
        host: the brokers' advertised address; ``ports``: broker i's web port (default
            ``base_port + i``); broker i's id is ``{host}:{port}``.
        token: the superuser's token every request must carry as ``Bearer``; None: no auth.
        load_manager: ``modular`` or ``extensible`` (needs ``pulsar_version`` ≥ 3.0).
        pulsar_version: the version brokers report; below 3.0 the leader has no ``brokerId``
            and ``destinationBroker`` is ignored.
        start_minute: the first trace minute played.
        unload_delay_s: wall seconds an unload blocks before answering (Pulsar waits for the
            bundle's topics to close); the lock is not held meanwhile.
        clock: wall time in seconds (``lastUpdate`` of load reports).
        log_size: entries kept in each of ``requests``, ``assignments`` and ``shed_log``.
        remote_clusters: other clusters of the configuration store (a geo-replicated
            deployment): listed by E1 before the local one, their calls redirected to
            ``remote_url`` (default one, ``<cluster>-dr``).
        tls_ports: broker i's https port (None: http only). Broker ids keep the http port, as
            Pulsar's do whenever both are enabled (``advertisedAddress:webServicePort``).
        expose_bundle_metrics: ``exposeBundlesMetricsInPrometheus`` (default false, as Pulsar).

    Attributes (read them, or change them in a test, holding ``lock`` while servers run):
        broker_ids: in layout order; ``spec_of`` / ``id_of`` map them to the layout's brokers
            and back; ``active``: the live ones (all: failures are not modelled).
        boundaries: namespace -> its bundle boundaries (hash points), heartbeats included.
        owners: bundle -> broker id, or None while nobody owns it.
        affinity: the modular leader's one-shot bundle -> destination of unloads.
        effective / overrides: the configuration in force (typed) / E18's overrides (strings).
        minute: the next trace minute ``step`` plays.
        requests, assignments, shed_log: the bounded logs (``RequestRecord``, ``Assignment``,
            ``ShedRecord``), oldest first.

    Raises:
        ValueError: an unknown load manager, the extensible one before 3.0, or not one port
            per broker.
    """

    def __init__(
        self,
        workload: Workload,
        cpu: Mapping[str, np.ndarray],
        *,
        layout: Layout = DEMO,
        host: str = "127.0.0.1",
        base_port: int = 18080,
        ports: Sequence[int] | None = None,
        token: str | None = None,
        load_manager: str = "modular",
        pulsar_version: str = "3.3.2",
        start_minute: int = 0,
        unload_delay_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        log_size: int = 10_000,
        remote_clusters: Sequence[str] | None = None,
        remote_url: str = "http://remote-cluster.invalid:8080",
        tls_ports: Sequence[int] | None = None,
        expose_bundle_metrics: bool = False,
    ) -> None:
        if load_manager not in ("modular", "extensible"):
            raise ValueError(f"load manager must be modular or extensible, not {load_manager!r}")
        self.version = _version(pulsar_version)
        if load_manager == "extensible" and self.version < (3,):
            raise ValueError("the extensible load manager needs Pulsar 3.0 or later")
        ports = (
            list(ports)
            if ports is not None
            else [base_port + i for i in range(len(layout.brokers))]
        )
        if len(ports) < len(layout.brokers):
            raise ValueError(f"{len(layout.brokers)} brokers need as many ports, got {ports}")
        self.workload, self.cpu, self.layout, self.host = workload, cpu, layout, host
        self.token, self.pulsar_version = token, pulsar_version
        self.extensible = load_manager == "extensible"
        self.unload_delay_s, self.clock = unload_delay_s, clock
        self.cluster = layout.cluster
        self.remote_clusters = (
            list(remote_clusters) if remote_clusters is not None else [f"{layout.cluster}-dr"]
        )
        self.remote_url = remote_url.rstrip("/")
        self.broker_ids = [f"{host}:{ports[i]}" for i in range(len(layout.brokers))]
        self.port_of = {b: ports[i] for i, b in enumerate(self.broker_ids)}
        if tls_ports is not None and len(tls_ports) < len(layout.brokers):
            raise ValueError(f"{len(layout.brokers)} brokers need as many TLS ports")
        self.tls_port_of = (
            {b: tls_ports[i] for i, b in enumerate(self.broker_ids)} if tls_ports else {}
        )
        self.spec_of: dict[str, BrokerSpec] = dict(
            zip(self.broker_ids, layout.brokers, strict=True)
        )
        self.id_of = {spec.name: b for b, spec in self.spec_of.items()}
        self.active = set(self.broker_ids)
        self.boundaries: dict[str, list[int]] = {}
        self.groups: dict[str, str] = {}
        for namespace in layout.namespaces:
            self.boundaries[namespace] = initial_boundaries(layout.bundles_per_namespace)
        for namespace, group, count in layout.anti_affinity:
            self.boundaries[namespace] = initial_boundaries(count)
            self.groups[namespace] = group
        self.system: dict[str, str] = {}  # heartbeat namespace -> its broker
        for broker in self.broker_ids:
            for namespace in (f"pulsar/{self.cluster}/{broker}", f"pulsar/{broker}"):
                self.system[namespace] = broker
                self.boundaries[namespace] = initial_boundaries(1)
        self.heartbeats = set(self.system)
        # pulsar/system: the system topics' namespace (the extensible load manager's channel);
        # its one bundle with the leader.
        self.system["pulsar/system"] = min(self.broker_ids, key=lambda b: self.port_of[b])
        self.boundaries["pulsar/system"] = initial_boundaries(1)
        self.owners = Owners()
        for namespace, bounds in self.boundaries.items():
            for lower, upper in itertools.pairwise(bounds):
                name = f"{namespace}/{format_hash(lower)}_{format_hash(upper)}"
                self.owners[name] = self.system.get(namespace)
        self.affinity: dict[str, str] = {}  # the modular leader's one-shot bundle -> broker
        self.effective: dict[str, bool | int | float | str] = {k: v for k, (v, _) in CONFIG.items()}
        self.effective["loadManagerClassName"] = EXTENSIBLE if self.extensible else MODULAR
        if self.version < (3, 1):
            self.effective["supportedNamespaceBundleSplitAlgorithms"] = ALL_SPLITS.rsplit(",", 1)[0]
        self.effective["exposeBundlesMetricsInPrometheus"] = expose_bundle_metrics
        self.overrides: dict[str, str] = {}
        self.minute = start_minute
        self.short_term: dict[str, MessageRates] = {}
        self.long_term: dict[str, MessageRates] = {}
        self.samples: dict[str, int] = {}
        self.recently_unloaded: dict[str, float] = {}  # by Pulsar's shedder, simulated seconds
        self.ema: dict[str, float] = {}  # extensible: weighted max usage EMA, fraction
        self.shed_state: dict[str, Any] = {}
        self.placement_state: dict[str, Any] = {}
        self.last_shed_minute = start_minute
        self.started_ms = int(clock() * 1000)
        self.requests: deque[RequestRecord] = deque(maxlen=log_size)
        self.assignments: deque[Assignment] = deque(maxlen=log_size)
        self.shed_log: deque[ShedRecord] = deque(maxlen=log_size)
        self.lock = threading.Lock()
        self._unloaded = False  # set by an unload that happened (handle's delay)
        self._warned: set[str] = set()  # unknown shedding strategies already logged
        self._bundle_map: BundleMap | None = None
        self._stats: dict[str, dict[str, Any]] = {}
        self._stats_minute = start_minute
        self._refresh_stats(start_minute)
        # broker -> (lastUpdate ms, the figures written then): LocalBrokerData's last write to
        # the metadata store (ModularLoadManagerImpl.writeBrokerDataOnZooKeeper).
        self.written: dict[str, tuple[int, tuple[float, float, int, float]]] = {}
        self._write_reports()

    # -- the cluster's own life ------------------------------------------------------------------

    @property
    def leader(self) -> str:
        """The leader: the active broker with the lowest port."""
        return min(self.active, key=lambda b: self.port_of[b])

    @property
    def sim_now(self) -> float:
        """Simulated seconds: one trace minute is 60 s (what the grace period counts)."""
        return self.minute * 60.0

    def is_system(self, bundle: str) -> bool:
        """A heartbeat bundle (``pulsar/[<cluster>/]<broker id>/…``): never moved."""
        return bundle.rsplit("/", 1)[0] in self.system

    def step(self, now_s: float) -> StepResult:
        """Play one trace minute: clients' lookups place unowned bundles, the load is computed,
        and every ``loadBalancerSheddingIntervalMinutes`` Pulsar's own shedder runs on the
        leader (module docstring). ``now_s``: wall seconds (log only)."""
        # The minute's bundle load is computed outside the lock (a third of a step at 50,000
        # bundles): brokers answer meanwhile. A split in between makes it computed again.
        with self.lock:
            minute = self.minute
            names = self._bundle_names()
        computed = self._stats_for(names, minute)
        with self.lock:
            unowned = [b for b, owner in self.owners.items() if owner is None]
            placed = self._assign(unowned, "client")
            if self.minute == minute and self._bundle_names() == names:
                self._bundle_map, self._stats = computed
                self._stats_minute = minute
            else:
                self._refresh_stats(self.minute)
            self._fold()
            self._write_reports()
            shed = None
            interval = int(self.effective["loadBalancerSheddingIntervalMinutes"])
            if (
                self.effective["loadBalancerSheddingEnabled"]
                and self.effective["loadBalancerEnabled"]
                and minute - self.last_shed_minute >= max(interval, 1)
            ):
                shed = self._shed()
                self.last_shed_minute = minute
            self.minute += 1
            left = sum(1 for owner in self.owners.values() if owner is None)
            result = StepResult(minute, len(self.owners) - left, left, len(placed), shed)
        moves = (
            ", ".join(f"{b} {s} -> {d or 'unowned'}" for b, s, d in shed.unloads) if shed else ""
        )
        log.info(
            "trace minute %d at %.0f: %d owned, %d unowned, %d placed by lookups; Pulsar's "
            "shedder %s",
            minute,
            now_s,
            result.owned,
            result.unowned,
            result.placed,
            f"{shed.strategy} ({shed.reason}): {moves or 'no unload'}" if shed else "did not run",
        )
        return result

    def _bundle_names(self) -> tuple[str, ...]:
        return tuple(sorted(b for b in self.owners if not self.is_system(b)))

    def _stats_for(
        self, names: tuple[str, ...], minute: int
    ) -> tuple[BundleMap, dict[str, dict[str, Any]]]:
        """The load of ``names`` in trace minute ``minute`` (reads only the workload and the
        bundle map kept for the same names)."""
        kept = self._bundle_map
        bundle_map = (
            kept
            if kept is not None and kept.bundle_names == names
            else BundleMap.build(self.workload, names)
        )
        return bundle_map, bundle_stats(self.workload, bundle_map, minute, with_topics=True)

    def _refresh_stats(self, minute: int) -> None:
        """The bundles' load in trace minute ``minute`` for the current bundles."""
        self._bundle_map, self._stats = self._stats_for(self._bundle_names(), minute)
        self._stats_minute = minute

    def _fold(self) -> None:
        """Fold the minute's load of every owned bundle into the leader's time averages (Pulsar
        TimeAverageMessageData), and each broker's usage into its EMA (extensible metrics)."""
        for bundle, owner in self.owners.items():
            stats = self._stats.get(bundle)
            if owner is None or stats is None:
                continue
            rates = MessageRates(
                stats["msgRateIn"],
                stats["msgRateOut"],
                stats["msgThroughputIn"],
                stats["msgThroughputOut"],
            )
            n = self.samples.get(bundle, 0)
            old_short = self.short_term.get(bundle, MessageRates())
            old_long = self.long_term.get(bundle, MessageRates())
            self.short_term[bundle] = time_average(old_short, rates, n, SHORT_TERM_SAMPLES)
            self.long_term[bundle] = time_average(old_long, rates, n, LONG_TERM_SAMPLES)
            self.samples[bundle] = n + 1
        if not self.extensible:
            return  # the EMA is the extensible load manager's alone (its metrics)
        h = float(self.effective["loadBalancerHistoryResourcePercentage"])
        weights = self._pulsar_config().weights
        for broker in self.active:
            usage = self._broker_load(broker).weighted_max_usage(weights)
            old = self.ema.get(broker)
            self.ema[broker] = usage if old is None else h * old + (1 - h) * usage

    def _owned(self, broker: str, *, system: bool = False) -> list[str]:
        return sorted(b for b in self.owners.of(broker) if system or not self.is_system(b))

    def _report(self, broker: str) -> dict[str, Any]:
        """The simulator's report (``broker_report``: cpu percent of the machine, memory MiB,
        bandwidth bytes/s) of ``broker`` for the bundles it owns now."""
        spec = self.spec_of[broker]
        series = self.cpu[spec.name]
        cpu = background_cpu(series, self._stats_minute)
        return broker_report(spec, self._owned(broker), self._stats, cpu, self.clock())

    def _broker_load(self, broker: str) -> BrokerLoad:
        doc = self._report(broker)
        stats = doc["bundleStats"].values()
        return BrokerLoad(
            name=broker,
            failure_domain=self.spec_of[broker].failure_domain,
            cpu=ResourceUsage(doc["cpu"]["usage"], doc["cpu"]["limit"]),
            memory=ResourceUsage(doc["memory"]["usage"], doc["memory"]["limit"]),
            direct_memory=ResourceUsage(*DIRECT_MEMORY_MIB),
            bandwidth_in=ResourceUsage(doc["bandwidthIn"]["usage"], doc["bandwidthIn"]["limit"]),
            bandwidth_out=ResourceUsage(doc["bandwidthOut"]["usage"], doc["bandwidthOut"]["limit"]),
            rates=MessageRates(
                doc["msgRateIn"], doc["msgRateOut"], doc["msgThroughputIn"], doc["msgThroughputOut"]
            ),
            bundles=tuple(doc["bundles"]),
            topics=sum(int(s["topics"]) for s in stats),
            reported_at=self.sim_now,
        )

    def snapshot(self) -> ClusterSnapshot:
        """The cluster as Pulsar's leader sees it (non-system bundles, broker ids as names, time
        in simulated seconds): what its placement and shedder decide on."""
        brokers = {b: self._broker_load(b) for b in sorted(self.active)}
        bundles = {}
        for name, owner in self.owners.items():
            if self.is_system(name):
                continue
            stats = self._stats.get(name, {})
            bundles[name] = BundleLoad(
                name,
                owner if owner in self.active else None,
                self.short_term.get(name, MessageRates()),
                self.long_term.get(name, MessageRates()),
                int(stats.get("topics", 0)),
                int(stats.get("producers", 0)),
                int(stats.get("consumers", 0)),
            )
        namespaces = {ns: NamespacePolicy(ns, group) for ns, group in self.groups.items()}
        return ClusterSnapshot(
            self.sim_now,
            brokers,
            bundles,
            namespaces,
            recently_unloaded=dict(self.recently_unloaded),
        )

    def _pulsar_config(self) -> PulsarConfig:
        return PulsarConfig.from_keys(_core_keys(self.effective))

    def _shedder(self) -> str:
        """The extensible load manager's TransferShedder, else the simple name of
        ``loadBalancerLoadSheddingStrategy``; an unknown class falls back to ThresholdShedder,
        logged (Pulsar's ModularLoadManagerImpl keeps its default when the class cannot load)."""
        if self.extensible:
            return ShedderName.TRANSFER
        name = str(self.effective["loadBalancerLoadSheddingStrategy"]).rsplit(".", 1)[-1]
        if name in ML_SHEDDERS:
            return name
        if name not in self._warned:
            self._warned.add(name)
            log.warning("unknown load shedding strategy %r: using ThresholdShedder", name)
        return ShedderName.THRESHOLD

    def _cycle_config(self) -> CycleConfig:
        placement = (
            PlacementName.LEAST_RESOURCE_USAGE_WITH_WEIGHT
            if self.extensible
            else PlacementName.LEAST_LONG_TERM_MESSAGE_RATE
        )
        return CycleConfig(
            strategies=Strategies(shedder=self._shedder(), placement=placement),
            pulsar=self._pulsar_config(),
            # Pulsar has no cool-down of its own beyond its grace period.
            safety=SafetyConfig(bundle_cool_down_s=0.0),
            is_destination_honoured=self.extensible,
        )

    def _assign(self, bundles: Sequence[str], cause: str) -> dict[str, str]:
        """Give every unowned bundle of ``bundles`` an owner, as a lookup does: the one-shot
        destination of an unload when it is active (ModularLoadManagerImpl's bundle affinity),
        else Pulsar's placement over a snapshot. Returns bundle -> broker."""
        placed: dict[str, str] = {}
        rest = []
        for bundle in bundles:
            if self.owners.get(bundle) is not None:
                continue
            destination = self.affinity.pop(self.affinity_key(bundle), None)
            if destination is not None and destination in self.active:
                self._own(bundle, destination, cause, affinity=True)
                placed[bundle] = destination
            else:
                rest.append(bundle)
        if rest:
            plan = plan_placement(
                self.snapshot(), self._cycle_config(), self.placement_state, rest, self.sim_now
            )
            self.placement_state = dict(plan.state)
            sink = self._sink(cause)
            apply_plan(plan, sink)
            placed |= sink.placed
        return placed

    def _sink(self, cause: str, shedder: str | None = None) -> LoadManagerSink:
        """This cluster's ownership map as the sink of its load manager's plan, now; a bundle
        given an owner is recorded with ``cause``."""
        return LoadManagerSink(
            self.owners,
            self.recently_unloaded,
            self.sim_now,
            # The sink sets the owner; the cluster records the assignment.
            lambda bundle, broker: self.assignments.append(
                Assignment(self.minute, bundle, broker, cause)
            ),
            shedder=shedder,
            transfer=self.extensible,
        )

    def _own(self, bundle: str, broker: str, cause: str, *, affinity: bool = False) -> None:
        self.owners[bundle] = broker
        self.assignments.append(Assignment(self.minute, bundle, broker, cause, affinity))

    def _shed(self) -> ShedRecord:
        """Pulsar's own shedder on the leader (``plan_cycle``), its unloads applied as its load
        manager does: unowned until a lookup (modular), or transferred (extensible)."""
        plan = plan_cycle(self.snapshot(), self._cycle_config(), self.shed_state, self.sim_now)
        self.shed_state = dict(plan.state)
        sink = self._sink("shedder", shedder=plan.strategy)
        apply_plan(plan, sink)
        moves = tuple((bundle, *move) for bundle, move in sink.moves.items())
        record = ShedRecord(self.minute, plan.strategy, plan.reason, moves)
        self.shed_log.append(record)
        return record

    # -- HTTP --------------------------------------------------------------------------------------

    def affinity_key(self, bundle: str) -> str:
        """The key of the modular leader's bundle affinity (an unload's destination): the
        bundle's range in the releases without apache/pulsar#25518, so same-range bundles of two
        namespaces share one (``NamespacesBase.setNamespaceBundleAffinityAsync(bundleRange,
        …)``); the full name in those with it (``AFFINITY_BY_NAME``)."""
        by_name = any(lo <= self.version < hi for lo, hi in AFFINITY_BY_NAME)
        return bundle if by_name else bundle.rsplit("/", 1)[-1]

    def _local_data(self, broker: str) -> dict[str, Any]:
        """``LocalBrokerData`` as ``ModularLoadManagerImpl.updateLocalBrokerData`` makes it now
        (without ``lastUpdate``): ``lastStats`` = every bundle with loaded topics
        (``PulsarStats.getBundleStats``), and ``bundles``/``numBundles`` counted from them
        (``LocalBrokerData.updateBundleData``)."""
        doc = self._report(broker)
        spec = self.spec_of[broker]
        per_bundle: dict[str, dict[str, Any]] = {}
        for bundle in self._owned(broker, system=True):
            stats = self._stats.get(bundle, {})
            if int(stats.get("topics", 0)) <= 0:
                continue  # no loaded topic: not in PulsarStats' bundle stats
            per_bundle[bundle] = {
                "msgRateIn": float(stats.get("msgRateIn", 0.0)),
                "msgThroughputIn": float(stats.get("msgThroughputIn", 0.0)),
                "msgRateOut": float(stats.get("msgRateOut", 0.0)),
                "msgThroughputOut": float(stats.get("msgThroughputOut", 0.0)),
                "consumerCount": int(stats.get("consumers", 0)),
                "producerCount": int(stats.get("producers", 0)),
                "topics": int(stats.get("topics", 0)),
                "cacheSize": 0,
            }
        cpu = {"usage": doc["cpu"]["usage"] * CORES, "limit": 100.0 * CORES}
        bandwidth_limit = spec.bandwidth_bytes_per_s * KBIT_PER_BYTE
        bw_in = {"usage": doc["msgThroughputIn"] * KBIT_PER_BYTE, "limit": bandwidth_limit}
        bw_out = {"usage": doc["msgThroughputOut"] * KBIT_PER_BYTE, "limit": bandwidth_limit}
        direct = {"usage": DIRECT_MEMORY_MIB[0], "limit": DIRECT_MEMORY_MIB[1]}
        memory = dict(doc["memory"])
        max_usage = max(r["usage"] / r["limit"] for r in (cpu, memory, direct, bw_in, bw_out))
        return {
            "cpu": cpu,
            "memory": memory,
            "directMemory": direct,
            "bandwidthIn": bw_in,
            "bandwidthOut": bw_out,
            "msgThroughputIn": doc["msgThroughputIn"],
            "msgThroughputOut": doc["msgThroughputOut"],
            "msgRateIn": doc["msgRateIn"],
            "msgRateOut": doc["msgRateOut"],
            "lastStats": per_bundle,
            "numTopics": sum(s["topics"] for s in per_bundle.values()),
            "numBundles": len(per_bundle),
            "numConsumers": sum(s["consumerCount"] for s in per_bundle.values()),
            "numProducers": sum(s["producerCount"] for s in per_bundle.values()),
            "bundles": sorted(per_bundle),
            "maxResourceUsage": max_usage,
        }

    def _write_reports(self) -> None:
        """Each broker's periodic check (``LoadReportUpdaterTask``, every 5 s in Pulsar; every
        step here): ``ModularLoadManagerImpl.writeBrokerDataOnZooKeeper`` writes its report,
        and so moves ``lastUpdate``, only when ``needBrokerDataUpdate``: more than
        ``loadBalancerReportUpdateMaxIntervalMinutes`` since the last write, or a change over
        ``loadBalancerReportUpdateThresholdPercentage`` in msgRate in+out, throughput in+out or
        the bundle count (relative, from the last write; from 0 to anything is infinite), or in
        the maximum resource usage (absolute, percentage points; 3.x's unweighted maximum)."""
        now_ms = int(self.clock() * 1000)
        threshold = float(self.effective["loadBalancerReportUpdateThresholdPercentage"])
        max_ms = float(self.effective["loadBalancerReportUpdateMaxIntervalMinutes"]) * 60_000

        def change(old: float, new: float) -> float:
            if old == 0:
                return 0.0 if new == 0 else math.inf
            return 100.0 * abs((old - new) / old)

        for broker in sorted(self.active):
            data = self._local_data(broker)
            figures = (
                data["msgRateIn"] + data["msgRateOut"],
                data["msgThroughputIn"] + data["msgThroughputOut"],
                int(data["numBundles"]),
                float(data["maxResourceUsage"]),
            )
            last = self.written.get(broker)
            if last is not None and now_ms - last[0] <= max_ms:
                old = last[1]
                moved = max(
                    change(old[0], figures[0]),
                    change(old[1], figures[1]),
                    change(old[2], figures[2]),
                    100.0 * abs(old[3] - figures[3]),
                )
                if moved <= threshold:
                    continue
            self.written[broker] = (now_ms, figures)

    def load_report(self, broker: str) -> dict[str, Any]:
        """E11: the modular load manager's ``LocalBrokerData`` of ``broker`` (§3.3): its figures
        fresh now (``ModularLoadManagerWrapper.generateLoadReport`` =
        ``updateLocalBrokerData``), ``lastUpdate`` the time of its last metadata-store write
        (``_write_reports``), not now. Units: cpu percent × cores, memory MiB, bandwidth
        kbit/s, throughput bytes/s, rates msg/s."""
        data = self._local_data(broker)
        index = self.broker_ids.index(broker)
        tls = self.tls_port_of.get(broker)
        report: dict[str, Any] = {
            "webServiceUrl": f"http://{broker}",
            "webServiceUrlTls": f"https://{self.host}:{tls}" if tls else None,
            "pulsarServiceUrl": f"pulsar://{self.host}:{SERVICE_PORT + index}",
            "pulsarServiceUrlTls": None,
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            **data,
            "lastUpdate": self.written[broker][0] if broker in self.written else 0,
            "lastBundleGains": [],
            "lastBundleLosses": [],
            "brokerVersionString": self.pulsar_version,
            "protocols": {},
            "advertisedListeners": {},
            "loadReportType": "LocalBrokerData",
            "bundleStats": data["lastStats"],  # LocalBrokerData.getBundleStats() = lastStats
        }
        if self.version >= (3,):
            report["loadManagerClassName"] = MODULAR
            report["startTimestamp"] = self.started_ms
        return report

    def _topic_stats(self, me: str) -> dict[str, Any]:
        """E12: namespace -> bundle range -> "persistent" -> topic -> stats, as
        ``PulsarStats.updateStats`` writes them by hand (``PersistentTopic.updateRates``): the
        producers (``StreamingStats.writePublisherStats``, one per topic here), replication
        (none here), one Shared subscription per reader (``writeConsumerStats``, one consumer
        each), then the topic's counters. From 3.0 the subscriptions and consumers carry
        ``messageAckRate`` and the subscriptions the filter counters, the topic
        ``filteredEntriesCount``. Rates msg/s, throughput bytes/s, sizes bytes."""
        out: dict[str, Any] = {}
        since = "2026-11-24T09:00:00.000Z"
        modern = self.version >= (3,)
        for bundle in self._owned(me):
            topics = self._stats.get(bundle, {}).get("topicStats", [])
            if not topics:
                continue
            namespace, label = bundle.rsplit("/", 1)
            persistent = {}
            for index, t in enumerate(topics):
                rate, size = t["msgRateIn"], 0.0
                if rate:
                    size = t["msgThroughputIn"] / rate
                readers = max(1, round(t["msgRateOut"] / rate)) if rate else 1
                publisher = {
                    "msgRateIn": rate,
                    "msgThroughputIn": t["msgThroughputIn"],
                    "averageMsgSize": size,
                    "address": f"/10.0.0.{index % 250 + 1}:5{index % 10000:04d}",
                    "producerId": 0,
                    "producerName": f"{self.cluster}-{index}-0",
                    "connectedSince": since,
                    "clientVersion": "Pulsar-Java-v3.3.2",
                    "metadata": {},
                }
                subscriptions = {}
                for reader in range(readers):
                    share = t["msgRateOut"] / readers
                    consumer: dict[str, Any] = {
                        "address": f"/10.0.1.{reader % 250 + 1}:4{index % 10000:04d}",
                        "consumerName": f"reader-{reader}-c0",
                        "availablePermits": 1000,
                        "connectedSince": since,
                        "msgRateOut": share,
                        "msgThroughputOut": t["msgThroughputOut"] / readers,
                        "msgRateRedeliver": 0.0,
                        "avgMessagesPerEntry": 1,
                        "unackedMessages": 0,
                        "blockedConsumerOnUnackedMsgs": False,
                        "clientVersion": "Pulsar-Java-v3.3.2",
                        "metadata": {},
                    }
                    subscription: dict[str, Any] = {
                        "consumers": [consumer],
                        "msgBacklog": 0,
                        "msgRateExpired": 0.0,
                        "msgRateOut": share,
                        "msgThroughputOut": t["msgThroughputOut"] / readers,
                        "msgRateRedeliver": 0.0,
                        "numberOfEntriesSinceFirstNotAckedMessage": 1,
                        "totalNonContiguousDeletedMessagesRange": 0,
                        "type": "Shared",
                        "blockedSubscriptionOnUnackedMsgs": False,
                        "unackedMessages": 0,
                    }
                    if modern:
                        consumer["messageAckRate"] = share
                        subscription["messageAckRate"] = share
                        subscription |= dict.fromkeys(
                            (
                                "filterProcessedMsgCount",
                                "filterAcceptedMsgCount",
                                "filterRejectedMsgCount",
                                "filterRescheduledMsgCount",
                            ),
                            0,
                        )
                    subscriptions[f"reader-{reader}"] = subscription
                counted = int(rate * 3600)
                stats: dict[str, Any] = {
                    "publishers": [publisher],
                    "replication": {},
                    "subscriptions": subscriptions,
                    "producerCount": 1,
                    "averageMsgSize": size,
                    "msgRateIn": rate,
                    "msgRateOut": t["msgRateOut"],
                    "msgInCount": counted,
                    "bytesInCount": int(counted * size),
                    "msgOutCount": counted * readers,
                    "bytesOutCount": int(counted * size * readers),
                    "msgThroughputIn": t["msgThroughputIn"],
                    "msgThroughputOut": t["msgThroughputOut"],
                    "storageSize": int(counted * size),
                    "backlogSize": 0,
                    "pendingAddEntriesCount": 0,
                }
                if modern:
                    stats["filteredEntriesCount"] = 0
                persistent[t["topic"]] = stats
            out.setdefault(namespace, {})[label] = {"persistent": persistent}
        return out

    # E14
    def _metrics(self, me: str) -> Response:
        """Prometheus text (§3.6): ``pulsar_lb_*_usage`` percent; the modular load manager's
        ``pulsar_bundle_*`` per owned bundle, the extensible one's ``pulsar_lb_resource_usage``
        (max_ema in percent, max a fraction, as ExtensibleLoadManagerImplTest expects)."""
        load = self._broker_load(me)
        base = {"cluster": self.cluster, "broker": self.host, "metric": "loadBalancing"}
        families: dict[str, list[tuple[dict[str, str], float]]] = {
            "pulsar_lb_cpu_usage": [(base, load.cpu.percent())],
            "pulsar_lb_memory_usage": [(base, load.memory.percent())],
            "pulsar_lb_directMemory_usage": [(base, load.direct_memory.percent())],
            "pulsar_lb_bandwidth_in_usage": [(base, load.bandwidth_in.percent())],
            "pulsar_lb_bandwidth_out_usage": [(base, load.bandwidth_out.percent())],
        }
        if self.extensible:
            weights = self._pulsar_config().weights
            ema = self.ema.get(me, load.weighted_max_usage(weights))
            families["pulsar_lb_resource_usage"] = [
                ({**base, "feature": "max_ema"}, ema * 100.0),
                ({**base, "feature": "max"}, load.max_resource_usage()),
            ]
        elif self.effective["exposeBundlesMetricsInPrometheus"]:
            bundle_metrics = {
                "pulsar_bundle_msg_rate_in": "msgRateIn",
                "pulsar_bundle_msg_rate_out": "msgRateOut",
                "pulsar_bundle_msg_throughput_in": "msgThroughputIn",
                "pulsar_bundle_msg_throughput_out": "msgThroughputOut",
                "pulsar_bundle_topics_count": "topics",
                "pulsar_bundle_consumer_count": "consumers",
                "pulsar_bundle_producer_count": "producers",
            }
            # updateLoadBalancingBundlesMetrics(getBundleStats()): the bundles of lastStats.
            owned = sorted(self._local_data(me)["lastStats"])
            for family, key in bundle_metrics.items():
                families[family] = [
                    (
                        {"cluster": self.cluster, "broker": self.host, "bundle": b}
                        | {"metric": "loadBalancing"},
                        float(self._stats.get(b, {}).get(key, 0.0)),
                    )
                    for b in owned
                ]
        lines = []
        for family, samples in families.items():
            lines.append(f"# TYPE {family} gauge")
            for labels, value in samples:
                text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                lines.append(f"{family}{{{text}}} {float(value)!r}")
        return _text(200, "\n".join(lines) + "\n", "text/plain; version=0.0.4")

    # E10, E10b
