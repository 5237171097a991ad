"""The demo's cluster simulator served as an Apache Pulsar cluster: every simulated broker answers,
on its own port, the part of Pulsar's admin REST API that Fulcrum's connector uses
(``console.pulsar.admin``, ``console.pulsar.observe``), with Pulsar's paths, response shapes,
status codes and quirks (``PULSAR_ADMIN.md`` E1–E19, A1–A3, §3, §4). No Django.

    python -m console.connectors.pulsar_cluster [--load-manager modular|extensible] ...

The cluster is ``balancer.simulator.layout.DEMO`` with broker i at ``{host}:{base_port + i}``; the
load is the simulator agent's workload (``balancer.simulator.model``): every ``step`` plays one
trace minute. Between steps the cluster behaves as Pulsar does on its own:

1. clients look up every bundle nobody owns, so it gets an owner: the one-shot destination an
   unload left (modular load manager), else Pulsar's placement (``LeastLongTermMessageRate``
   under the modular load manager, ``LeastResourceUsageWithWeight`` under the extensible one,
   both from ``balancer.placement``);
2. the bundles' load for the minute is computed and folded into the leader's time averages;
3. every ``loadBalancerSheddingIntervalMinutes`` trace minutes, when
   ``loadBalancerSheddingEnabled`` is true, the leader runs Pulsar's own shedder through
   ``balancer.cycle.plan_cycle``: the strategy of ``loadBalancerLoadSheddingStrategy`` whose
   unloads leave bundles unowned (modular), or TransferShedder whose transfers set the new owner
   directly (extensible). Pulsar's grace period counts trace minutes.

Modelled: the modular load manager (default) and the extensible one (``load_manager=
"extensible"``, Pulsar ≥ 3.0); releases before 3.0 (``pulsar_version="2.10.6"``: no ``brokerId``
from the leader, ``destinationBroker`` ignored, no flow_or_qps split); bearer-token auth; 307
hops to the owner, the leader or the named broker; dynamic configuration (E15–E19) with overrides
that stay effective after a delete until a restart; heartbeat bundles (never unloaded or split).
Not modelled: auto-split, broker failures and restarts, namespace isolation policies, TLS,
non-persistent topics' own load, the Pulsar proxy, and the binary protocol.

Tests drive ``PulsarCluster.handle`` and ``PulsarCluster.step`` directly or serve it over HTTP
with ``serve``; ``requests``, ``assignments`` and ``shed_log`` record what happened.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import logging
import math
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlencode

import numpy as np

from balancer.bundles import BundleRange, bundle_index_for, initial_boundaries, split_boundaries
from balancer.config import PULSAR_KEYS, PulsarConfig
from balancer.cycle import ActionKind, CycleConfig, Strategies, plan_cycle, plan_placement
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    BundleLoad,
    MessageRates,
    ResourceUsage,
    time_average,
)
from balancer.registry import get_split_algorithm
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO, BrokerSpec, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, Workload, build_workload
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from balancer.splitting.algorithms import TopicLoad
from console.pulsar.observe import EXTENSIBLE_CLASS, KBIT_TO_BYTES, MODULAR_CLASS, version_key

log = logging.getLogger("fulcrum.pulsar_cluster")

MODULAR: Final = MODULAR_CLASS
EXTENSIBLE: Final = EXTENSIBLE_CLASS
UNEXPECTED: Final = "--- An unexpected error occurred in the server ---"
CORES: Final = 8  # LocalBrokerData's cpu: percent of one core summed over the cores
DIRECT_MEMORY_MIB: Final = (64.0, 1024.0)  # (usage, limit): a constant; its weight is 0
KBIT_PER_BYTE: Final = 1 / KBIT_TO_BYTES  # Pulsar reports bandwidth in kbit/s
SERVICE_PORT: Final = 6650  # broker i's binary-protocol port is 6650 + i
ML_SHEDDERS: Final = ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder")
ALL_SPLITS: Final = (
    "range_equally_divide,topic_count_equally_divide,specified_positions_divide,"
    "flow_or_qps_equally_divide"
)
# broker.conf values (Pulsar ServiceConfiguration defaults) and whether E18 may change them.
# loadManagerClassName is dynamic in Pulsar's code, but switching it at runtime is not supported
# (the extensible load manager cannot be enabled that way): refused here.
CONFIG: Final[Mapping[str, tuple[bool | int | float | str, bool]]] = {
    "loadBalancerEnabled": (True, False),
    # Pulsar's default is false; a cluster that defines failure domains turns it on, as this one
    # does, so that its placement spreads anti-affinity groups across them.
    "failureDomainsEnabled": (True, False),
    "loadManagerClassName": (MODULAR, False),
    "loadBalancerLoadPlacementStrategy": (
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        False,
    ),
    "lowerBoundarySheddingEnabled": (False, False),
    "loadBalancerSplitIntervalMinutes": (1, False),
    "loadBalancerSheddingEnabled": (True, True),
    "loadBalancerAutoBundleSplitEnabled": (True, True),
    "loadBalancerAutoUnloadSplitBundlesEnabled": (True, True),
    "loadBalancerSheddingIntervalMinutes": (1, True),
    "loadBalancerSheddingGracePeriodMinutes": (30, True),
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": (10, True),
    "loadBalancerLoadSheddingStrategy": (
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        True,
    ),
    "loadBalancerBrokerThresholdShedderPercentage": (10, True),
    "loadBalancerBrokerOverloadedThresholdPercentage": (85, True),
    "loadBalancerHistoryResourcePercentage": (0.9, True),
    "loadBalancerBundleUnloadMinThroughputThreshold": (10.0, True),
    "loadBalancerCPUResourceWeight": (1.0, True),
    "loadBalancerMemoryResourceWeight": (0.0, True),
    "loadBalancerDirectMemoryResourceWeight": (0.0, True),
    "loadBalancerBandwidthInResourceWeight": (1.0, True),
    "loadBalancerBandwidthOutResourceWeight": (1.0, True),
    "loadBalancerDistributeBundlesEvenlyEnabled": (True, True),
    "loadBalancerBrokerMaxTopics": (50_000, True),
    "loadBalancerMsgRateDifferenceShedderThreshold": (50.0, True),
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": (4.0, True),
    "maxUnloadPercentage": (0.2, True),
    "minUnloadMessage": (1000.0, True),
    "minUnloadMessageThroughput": (1048576.0, True),
    "maxUnloadBundleNumPerShedding": (-1, True),
    "loadBalancerAvgShedderLowThreshold": (15.0, True),
    "loadBalancerAvgShedderHighThreshold": (40.0, True),
    "loadBalancerAvgShedderHitCountLowThreshold": (8, True),
    "loadBalancerAvgShedderHitCountHighThreshold": (2, True),
    "loadBalancerBrokerLoadTargetStd": (0.25, True),
    "loadBalancerSheddingConditionHitCountThreshold": (3, True),
    "loadBalancerTransferEnabled": (True, True),
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": (3, True),
    "loadBalanceSheddingDelayInSeconds": (180, True),
    "loadBalancerBrokerLoadDataTTLInSeconds": (1800, True),
    "loadBalancerSheddingBundlesWithPoliciesEnabled": (False, True),
    "loadBalancerNamespaceBundleMaxTopics": (1000, True),
    "loadBalancerNamespaceBundleMaxSessions": (1000, True),
    "loadBalancerNamespaceBundleMaxMsgRate": (30_000, True),
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": (100, True),
    "loadBalancerNamespaceMaximumBundles": (128, True),
    "flowOrQpsDifferenceThresholdPercentage": (10, True),
    "namespaceBundleUnloadingTimeoutMs": (60_000, True),
    "supportedNamespaceBundleSplitAlgorithms": (ALL_SPLITS, True),
    "defaultNamespaceBundleSplitAlgorithm": ("range_equally_divide", True),
}
ALL_BUNDLES_KEY: Final = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"  # -1: all
_RANGE = re.compile(r"^0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})$")

Response = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request a broker answered: its id, the method, the raw path and query, the status."""

    broker: str
    method: str
    path: str
    query: str
    status: int


@dataclass(frozen=True, slots=True)
class Assignment:
    """A bundle given an owner: trace minute, bundle, broker, and why — ``client`` (a simulated
    client's lookup), ``lookup`` (E10), ``split`` (A2 on an unowned bundle), ``transfer`` (an
    extensible unload with a destination), ``shedder`` (TransferShedder); ``affinity`` when the
    one-shot destination of an unload chose the broker."""

    minute: int
    bundle: str
    broker: str
    cause: str
    affinity: bool = False


@dataclass(frozen=True, slots=True)
class ShedRecord:
    """What Pulsar's own shedder did at one trace minute: strategy, the plan's reason, and each
    move as (bundle, source, destination or None: left unowned)."""

    minute: int
    strategy: str
    reason: str
    unloads: tuple[tuple[str, str, str | None], ...]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step: the trace minute played, bundles owned and unowned after it, bundles the
    clients' lookups placed, and the shedder's record when it ran."""

    minute: int
    owned: int
    unowned: int
    placed: int
    shed: ShedRecord | None


def _version(text: str) -> tuple[int, ...]:
    """``3.3.2`` (or ``3.1.0-SNAPSHOT``) -> (3, 3, 2); no number -> (0,)."""
    return version_key(text) or (0,)


def _string(value: bool | int | float | str) -> str:
    """A configuration value as Pulsar's REST answers it: booleans lower-case."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _core_keys(values: Mapping[str, bool | int | float | str]) -> dict[str, Any]:
    """The values the balancer's ``PulsarConfig`` reads. A negative bundle count in the load
    report means "all" in Pulsar (ServiceConfiguration): the core takes it as a large count."""
    keys = {k: v for k, v in values.items() if k in PULSAR_KEYS}
    top = keys.get(ALL_BUNDLES_KEY)
    if isinstance(top, int) and top < 0:
        keys[ALL_BUNDLES_KEY] = 1 << 30
    return keys


def _json(status: int, body: Any) -> Response:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _reason(status: int, reason: str) -> Response:
    """A RestException: ``{"reason": ...}`` (Pulsar RestException)."""
    return _json(status, {"reason": reason})


def _text(status: int, text: str, kind: str = "text/plain") -> Response:
    return status, {"Content-Type": f"{kind}; charset=utf-8"}, text.encode()


def _unexpected(exception: str, message: str) -> Response:
    """An unmapped server exception: 500 ``text/plain`` with Pulsar's banner and a trace."""
    body = (
        f"{UNEXPECTED}\n\nMessage: {message}\n\nStacktrace:\n\n{exception}: {message}\n"
        "\tat org.apache.pulsar.broker.admin.impl.NamespacesBase (simulated)\n"
    )
    return _text(500, body)


NO_CONTENT: Final[Response] = (204, {}, b"")


class PulsarCluster:
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
        self.broker_ids = [f"{host}:{ports[i]}" for i in range(len(layout.brokers))]
        self.port_of = {b: ports[i] for i, b in enumerate(self.broker_ids)}
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
        self.owners: dict[str, str | None] = {}
        for namespace, bounds in self.boundaries.items():
            for lower, upper in itertools.pairwise(bounds):
                name = f"{namespace}/{format_hash(lower)}_{format_hash(upper)}"
                self.owners[name] = self.system.get(namespace)
        self.affinity: dict[str, str] = {}  # the modular leader's one-shot bundle -> broker
        self.effective: dict[str, bool | int | float | str] = {k: v for k, (v, _) in CONFIG.items()}
        self.effective["loadManagerClassName"] = EXTENSIBLE if self.extensible else MODULAR
        if self.version < (3, 1):
            self.effective["supportedNamespaceBundleSplitAlgorithms"] = ALL_SPLITS.rsplit(",", 1)[0]
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
        with self.lock:
            minute = self.minute
            unowned = [b for b, owner in self.owners.items() if owner is None]
            placed = self._assign(unowned, "client")
            self._refresh_stats(minute)
            self._fold()
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

    def _refresh_stats(self, minute: int) -> None:
        """The bundles' load in trace minute ``minute`` for the current bundles."""
        names = tuple(sorted(b for b in self.owners if not self.is_system(b)))
        if self._bundle_map is None or self._bundle_map.bundle_names != names:
            self._bundle_map = BundleMap.build(self.workload, names)
        self._stats = bundle_stats(self.workload, self._bundle_map, minute, with_topics=True)
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
        h = float(self.effective["loadBalancerHistoryResourcePercentage"])
        weights = self._pulsar_config().weights
        for broker in self.active:
            usage = self._broker_load(broker).weighted_max_usage(weights)
            old = self.ema.get(broker)
            self.ema[broker] = usage if old is None else h * old + (1 - h) * usage

    def _owned(self, broker: str, *, system: bool = False) -> list[str]:
        return sorted(
            b
            for b, owner in self.owners.items()
            if owner == broker and (system or not self.is_system(b))
        )

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
            return "TransferShedder"
        name = str(self.effective["loadBalancerLoadSheddingStrategy"]).rsplit(".", 1)[-1]
        if name in ML_SHEDDERS:
            return name
        if name not in self._warned:
            self._warned.add(name)
            log.warning("unknown load shedding strategy %r: using ThresholdShedder", name)
        return "ThresholdShedder"

    def _cycle_config(self) -> CycleConfig:
        placement = (
            "LeastResourceUsageWithWeight" if self.extensible else "LeastLongTermMessageRate"
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
            destination = self.affinity.pop(bundle, None)
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
            for action in plan.planned(ActionKind.PLACE):
                if action.destination is not None and self.owners.get(action.target) is None:
                    self._own(action.target, action.destination, cause)
                    placed[action.target] = action.destination
        return placed

    def _own(self, bundle: str, broker: str, cause: str, *, affinity: bool = False) -> None:
        self.owners[bundle] = broker
        self.assignments.append(Assignment(self.minute, bundle, broker, cause, affinity))

    def _shed(self) -> ShedRecord:
        """Pulsar's own shedder on the leader (``plan_cycle``), its unloads applied as its load
        manager does: unowned until a lookup (modular), or transferred (extensible)."""
        config = self._cycle_config()
        now = self.sim_now
        plan = plan_cycle(self.snapshot(), config, self.shed_state, now)
        self.shed_state = dict(plan.state)
        places = {a.target: a.destination for a in plan.planned(ActionKind.PLACE)}
        moves: list[tuple[str, str, str | None]] = []
        for action in plan.planned(ActionKind.UNLOAD):
            source = action.source
            if action.strategy != plan.strategy or source is None:
                continue
            if self.owners.get(action.target) != source:
                continue
            destination = places.get(action.target) if self.extensible else None
            self.owners[action.target] = None
            if destination is not None:
                self._own(action.target, destination, "shedder")
            self.recently_unloaded[action.target] = now
            moves.append((action.target, source, destination))
        record = ShedRecord(self.minute, plan.strategy, plan.reason, tuple(moves))
        self.shed_log.append(record)
        return record

    # -- HTTP --------------------------------------------------------------------------------------

    def handle(
        self,
        broker_id: str,
        method: str,
        path: str,
        query: str = "",
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> Response:
        """Answer one request sent to broker ``broker_id``: ``path`` still percent-encoded,
        ``query`` without ``?``. Returns (status, headers, body); every request is recorded in
        ``requests``. Errors are Pulsar's: ``{"reason"}`` JSON, or 500 ``text/plain`` for an
        unmapped exception (Pulsar RestException, PulsarWebResource)."""
        with self.lock:
            self._unloaded = False
            response = self._route(broker_id, method.upper(), path, query, headers or {}, body)
            delay = self.unload_delay_s if self._unloaded else 0.0
            self.requests.append(RequestRecord(broker_id, method.upper(), path, query, response[0]))
        if delay > 0:
            time.sleep(delay)  # the lock is free: other requests go on meanwhile
        return response

    def _route(
        self,
        me: str,
        method: str,
        path: str,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
    ) -> Response:
        if me not in self.port_of:
            return _reason(404, f"broker {me} is not part of this cluster")
        if self.token is not None:
            auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
            if not auth.startswith("Bearer "):
                return _reason(401, "Authentication required")
            if auth[len("Bearer ") :] != self.token:
                return _reason(401, "Failed to authenticate: invalid token")
        segs = [unquote(s) for s in path.split("/")[1:]]
        while segs and not segs[-1]:
            segs.pop()
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        request = _Request(me, method, path, query, params, body)
        if segs == ["metrics"] and method == "GET":
            return self._metrics(me)
        if segs[:3] == ["lookup", "v2", "topic"] and method == "GET":
            return self._lookup(segs[3:])
        if segs[:2] != ["admin", "v2"] or len(segs) < 3:
            return _reason(404, "Not Found")
        head, rest = segs[2], segs[3:]
        if head == "clusters" and method == "GET":
            return self._clusters(rest)
        if head == "brokers":
            return self._brokers(request, rest)
        if head == "broker-stats" and method == "GET":
            return self._broker_stats(me, rest)
        if head == "tenants" and not rest and method == "GET":
            return _json(200, [*self.layout.tenants, "pulsar"])
        if head == "namespaces":
            return self._namespaces(request, rest)
        return _reason(404, "Not Found")

    # E1, E5
    def _clusters(self, rest: list[str]) -> Response:
        if not rest:
            return _json(200, [self.cluster])
        if rest[0] != self.cluster:
            return _reason(404, f"Cluster {rest[0]} does not exist")
        domains: dict[str, list[str]] = {}
        for broker in self.broker_ids:
            domains.setdefault(self.spec_of[broker].failure_domain, []).append(broker)
        if rest[1:] == ["failureDomains"]:
            return _json(200, {d: {"brokers": b} for d, b in domains.items()})
        if len(rest) == 3 and rest[1] == "failureDomains":
            if rest[2] not in domains:
                return _reason(404, f"Domain {rest[2]} for cluster {self.cluster} does not exist")
            return _json(200, {"brokers": domains[rest[2]]})
        return _reason(404, "Not Found")

    # E2, E3, E4, E15–E19, X1
    def _brokers(self, r: _Request, rest: list[str]) -> Response:
        if rest and rest[0] == "configuration":
            return self._configuration(r, rest[1:])
        if r.method != "GET":
            return _reason(404, "Not Found")
        active = sorted(self.active, key=lambda b: self.port_of[b])
        if not rest:
            return _json(200, active)
        if rest == ["leaderBroker"]:
            leader = self.leader
            info = {"serviceUrl": f"http://{leader}"}
            if self.version >= (3,):
                info["brokerId"] = leader
            return _json(200, info)
        if rest in (["health"], ["ready"]):
            return _text(200, "ok")
        if rest[0] != self.cluster:
            return _reason(404, f"Cluster {rest[0]} does not exist")
        if len(rest) == 1:
            return _json(200, active)
        if len(rest) == 3 and rest[2] == "ownedNamespaces":
            named = rest[1]
            if named not in self.active:
                return _reason(404, f"Broker {named} is not active")
            if named != r.me:
                return self._redirect(named, r.path, r.query)
            status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
            return _json(200, {b: dict(status) for b in self._owned(r.me, system=True)})
        return _reason(404, "Not Found")

    def _configuration(self, r: _Request, rest: list[str]) -> Response:
        dynamic = sorted(k for k, (_, is_dynamic) in CONFIG.items() if is_dynamic)
        if r.method == "GET" and not rest:
            return _json(200, dynamic)
        if r.method == "GET" and rest == ["values"]:
            return _json(200, dict(sorted(self.overrides.items())))
        if r.method == "GET" and rest == ["runtime"]:
            runtime = {k: _string(v) for k, v in sorted(self.effective.items())}
            index = self.broker_ids.index(r.me)
            runtime |= {
                "clusterName": self.cluster,
                "advertisedAddress": self.host,
                "webServicePort": str(self.port_of[r.me]),
                "brokerServicePort": str(SERVICE_PORT + index),
            }
            return _json(200, runtime)
        if r.method == "POST" and len(rest) == 2:
            return self._set_config(rest[0], rest[1])
        if r.method == "DELETE" and len(rest) == 1:
            if rest[0] not in dynamic:
                return _reason(412, "Cannot update non-dynamic configuration")
            # The override goes; the value stays effective until the broker restarts.
            self.overrides.pop(rest[0], None)
            return NO_CONTENT
        return _reason(404, "Not Found")

    def _set_config(self, name: str, text: str) -> Response:
        """E18: parse ``text`` as the key's type (booleans true/false, numbers) and apply it at
        once, cluster-wide (Pulsar BrokersBase.updateDynamicConfiguration)."""
        entry = CONFIG.get(name)
        if entry is None or not entry[1]:
            return _reason(412, "Cannot update non-dynamic configuration")
        default = entry[0]
        value: bool | int | float | str
        try:
            if isinstance(default, bool):
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                value = text.lower() == "true"
            elif isinstance(default, int):
                value = int(text)
            elif isinstance(default, float):
                value = float(text)
                if not math.isfinite(value):
                    raise ValueError(text)
            else:
                if not text.strip():
                    raise ValueError(text)
                value = text.strip()
            PulsarConfig.from_keys(_core_keys({name: value}))
        except (ValueError, BalancerError):
            return _reason(412, "Invalid dynamic-config value")
        self.effective[name] = value
        self.overrides[name] = _string(value)
        log.info("dynamic configuration %s = %s", name, _string(value))
        return NO_CONTENT

    # E11, E12
    def _broker_stats(self, me: str, rest: list[str]) -> Response:
        if rest == ["load-report"]:
            if self.extensible:
                # ExtensibleLoadManagerWrapper.generateLoadReport() throws: unmapped -> 500.
                return _unexpected("java.lang.UnsupportedOperationException", "null")
            return _json(200, self.load_report(me))
        if rest == ["topics"]:
            return _json(200, self._topic_stats(me))
        return _reason(404, "Not Found")

    def load_report(self, broker: str) -> dict[str, Any]:
        """E11: the modular load manager's ``LocalBrokerData`` of ``broker`` now (§3.3): cpu
        percent × cores, memory MiB, bandwidth kbit/s, throughput bytes/s, rates msg/s,
        ``lastStats`` the top ``loadBalancerMaxNumberOfBundlesInBundleLoadReport`` bundles by
        throughput (-1: all), ``bundles`` every owned bundle (heartbeats included)."""
        doc = self._report(broker)
        spec = self.spec_of[broker]
        owned = self._owned(broker, system=True)
        per_bundle: dict[str, dict[str, Any]] = {}
        for bundle in owned:
            stats = self._stats.get(bundle, {})
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
        ranked = sorted(
            per_bundle,
            key=lambda b: (
                -(per_bundle[b]["msgThroughputIn"] + per_bundle[b]["msgThroughputOut"]),
                b,
            ),
        )
        top = int(self.effective["loadBalancerMaxNumberOfBundlesInBundleLoadReport"])
        if top >= 0:
            ranked = ranked[:top]
        cpu = {"usage": doc["cpu"]["usage"] * CORES, "limit": 100.0 * CORES}
        bandwidth_limit = spec.bandwidth_bytes_per_s * KBIT_PER_BYTE
        bw_in = {"usage": doc["msgThroughputIn"] * KBIT_PER_BYTE, "limit": bandwidth_limit}
        bw_out = {"usage": doc["msgThroughputOut"] * KBIT_PER_BYTE, "limit": bandwidth_limit}
        direct = {"usage": DIRECT_MEMORY_MIB[0], "limit": DIRECT_MEMORY_MIB[1]}
        max_usage = max(r["usage"] / r["limit"] for r in (cpu, direct, bw_in, bw_out))
        index = self.broker_ids.index(broker)
        report: dict[str, Any] = {
            "webServiceUrl": f"http://{broker}",
            "pulsarServiceUrl": f"pulsar://{self.host}:{SERVICE_PORT + index}",
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            "cpu": cpu,
            "memory": dict(doc["memory"]),
            "directMemory": direct,
            "bandwidthIn": bw_in,
            "bandwidthOut": bw_out,
            "msgThroughputIn": doc["msgThroughputIn"],
            "msgThroughputOut": doc["msgThroughputOut"],
            "msgRateIn": doc["msgRateIn"],
            "msgRateOut": doc["msgRateOut"],
            "lastUpdate": int(doc["timestamp"] * 1000),
            "lastStats": {b: per_bundle[b] for b in ranked},
            "numTopics": sum(s["topics"] for s in per_bundle.values()),
            "numBundles": len(owned),
            "numConsumers": sum(s["consumerCount"] for s in per_bundle.values()),
            "numProducers": sum(s["producerCount"] for s in per_bundle.values()),
            "bundles": owned,
            "lastBundleGains": [],
            "lastBundleLosses": [],
            "brokerVersionString": self.pulsar_version,
            "protocols": {},
            "advertisedListeners": {},
            "maxResourceUsage": max_usage,
            "loadReportType": "LocalBrokerData",
        }
        if self.version >= (3,):
            report["loadManagerClassName"] = MODULAR
            report["startTimestamp"] = self.started_ms
        else:
            report["bundleStats"] = {}  # deprecated, still sent by 2.10
        return report

    def _topic_stats(self, me: str) -> dict[str, Any]:
        """E12: namespace -> bundle range -> "persistent" -> topic -> stats (§3.5)."""
        out: dict[str, Any] = {}
        for bundle in self._owned(me):
            topics = self._stats.get(bundle, {}).get("topicStats", [])
            if not topics:
                continue
            namespace, label = bundle.rsplit("/", 1)
            persistent = {}
            for t in topics:
                rate = t["msgRateIn"]
                persistent[t["topic"]] = {
                    "msgRateIn": rate,
                    "msgThroughputIn": t["msgThroughputIn"],
                    "msgRateOut": t["msgRateOut"],
                    "msgThroughputOut": t["msgThroughputOut"],
                    "averageMsgSize": t["msgThroughputIn"] / rate if rate else 0.0,
                    "storageSize": 0,
                    "publishers": [],
                    "subscriptions": {},
                }
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
        else:
            bundle_metrics = {
                "pulsar_bundle_msg_rate_in": "msgRateIn",
                "pulsar_bundle_msg_rate_out": "msgRateOut",
                "pulsar_bundle_msg_throughput_in": "msgThroughputIn",
                "pulsar_bundle_msg_throughput_out": "msgThroughputOut",
                "pulsar_bundle_topics_count": "topics",
                "pulsar_bundle_consumer_count": "consumers",
                "pulsar_bundle_producer_count": "producers",
            }
            owned = self._owned(me)
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
    def _lookup(self, rest: list[str]) -> Response:
        if len(rest) not in (4, 5) or rest[0] not in ("persistent", "non-persistent"):
            return _reason(404, "Not Found")
        if len(rest) == 5 and rest[4] != "bundle":
            return _reason(404, "Not Found")
        namespace = f"{rest[1]}/{rest[2]}"
        bounds = self.boundaries.get(namespace)
        if bounds is None:
            return _reason(404, f"Namespace {namespace} does not exist")
        topic = f"{rest[0]}://{namespace}/{rest[3]}"
        index = bundle_index_for(bounds, topic_hash(topic))
        label = f"{format_hash(bounds[index])}_{format_hash(bounds[index + 1])}"
        if len(rest) == 5:
            return _text(200, label)
        bundle = f"{namespace}/{label}"
        owner = self.owners.get(bundle) or self._assign([bundle], "lookup").get(bundle)
        if owner is None:
            return _reason(503, f"No broker available to own {bundle}")
        port = SERVICE_PORT + self.broker_ids.index(owner)
        return _json(
            200,
            {
                "brokerUrl": f"pulsar://{self.host}:{port}",
                "httpUrl": f"http://{owner}",
                "nativeUrl": f"pulsar://{self.host}:{port}",
            },
        )

    # E7, E8, E9, E9b, A1, A2, A3
    def _namespaces(self, r: _Request, rest: list[str]) -> Response:
        tenants = [*self.layout.tenants, "pulsar"]
        is_group_query = len(rest) == 3 and rest[1] == "antiAffinity"
        if not rest or (rest[0] not in tenants and not is_group_query):
            return _reason(404, f"Tenant {rest[0] if rest else ''} does not exist")
        if len(rest) == 1 and r.method == "GET":
            prefix = rest[0] + "/"
            return _json(200, [ns for ns in self.boundaries if ns.startswith(prefix)])
        if len(rest) == 3 and rest[1] == "antiAffinity" and r.method == "GET":
            if rest[0] != self.cluster:
                return _reason(412, f"Cluster {rest[0]} does not exist")
            tenant = r.params.get("tenant") or r.params.get("property")
            return _json(
                200,
                [
                    ns
                    for ns, group in self.groups.items()
                    if group == rest[2] and (not tenant or ns.startswith(tenant + "/"))
                ],
            )
        if len(rest) < 3:
            return _reason(404, "Not Found")
        namespace = f"{rest[0]}/{rest[1]}"
        bounds = self.boundaries.get(namespace)
        if bounds is None:
            return _reason(404, f"Namespace {namespace} does not exist")
        tail = rest[2:]
        if tail == ["bundles"] and r.method == "GET":
            return _json(
                200, {"boundaries": [format_hash(b) for b in bounds], "numBundles": len(bounds) - 1}
            )
        if tail == ["antiAffinity"] and r.method == "GET":
            group = self.groups.get(namespace)
            return _text(200, group) if group else NO_CONTENT
        if tail == ["unload"] and r.method == "PUT":
            return self._unload_namespace(namespace)
        if len(tail) == 2 and tail[1] == "unload" and r.method == "PUT":
            return self._unload(r, namespace, tail[0])
        if len(tail) == 2 and tail[1] == "split" and r.method == "PUT":
            return self._split(r, namespace, tail[0])
        return _reason(404, "Not Found")

    def _bundle(self, namespace: str, label: str) -> str | Response:
        """``tenant/ns/0x…_0x…`` when ``label`` is one of the namespace's bundles now, else 412
        (Pulsar PulsarWebResource.validateNamespaceBundleRange)."""
        match = _RANGE.match(label)
        if match is None:
            return _reason(412, f"Invalid bundle range {label}")
        lower, upper = int(match[1], 16), int(match[2], 16)
        bounds = self.boundaries[namespace]
        i = bisect.bisect_left(bounds, lower)
        if i + 1 >= len(bounds) or bounds[i] != lower or bounds[i + 1] != upper:
            return _reason(412, f"Invalid bundle range {namespace}/{label}")
        return f"{namespace}/{format_hash(lower)}_{format_hash(upper)}"

    def _redirect(self, broker: str, path: str, query: str, **changes: str | None) -> Response:
        """307 to ``broker`` with the same path and the query changed by ``changes`` (None
        removes a parameter): Pulsar's redirect to the owner, the leader or the named broker."""
        params = parse_qs(query, keep_blank_values=True)
        for key, value in changes.items():
            params.pop(key, None)
            if value is not None:
                params[key] = [value]
        rest = urlencode(params, doseq=True)
        location = f"http://{broker}{path}" + (f"?{rest}" if rest else "")
        return 307, {"Location": location, "Content-Type": "application/json"}, b""

    def _unload(self, r: _Request, namespace: str, label: str) -> Response:
        """A1 (§4.1, §4.2): 412 not a bundle; 204 and nothing done when nobody owns it; 409 an
        inactive destination; modular with a destination: 307 to the leader, which keeps a
        one-shot affinity and sends the owner the plain unload; extensible: a transfer (500
        to the same broker). Heartbeat bundles are skipped (204)."""
        bundle = self._bundle(namespace, label)
        if not isinstance(bundle, str):
            return bundle
        if namespace in self.system:
            log.info("skip unloading heartbeat bundle %s", bundle)
            return NO_CONTENT
        owner = self.owners.get(bundle)
        if owner is None:
            log.info("namespace bundle %s is not owned by any broker: nothing to unload", bundle)
            return NO_CONTENT
        destination = r.params.get("destinationBroker") if self.version >= (3,) else None
        if destination:
            destination = re.sub(r"^https?://", "", destination).rstrip("/")
            if destination not in self.active:
                return _reason(
                    409, "Not allowed unload namespace bundle to inactive destination broker"
                )
        if self.extensible:
            if r.me != owner:
                return self._redirect(owner, r.path, r.query, authoritative="true")
            if destination == owner:
                return _unexpected(
                    "java.lang.IllegalArgumentException",
                    f"The bundle {bundle} cannot be transfer to same broker",
                )
            self.owners[bundle] = None
            self._unloaded = True
            if destination:
                self._own(bundle, destination, "transfer")
            log.info(
                "%s %s from %s to %s",
                "transfer" if destination else "unload",
                bundle,
                owner,
                destination,
            )
            return NO_CONTENT
        if destination:
            if r.me != self.leader:
                return self._redirect(self.leader, r.path, r.query)
            self.affinity[bundle] = destination
            if r.me != owner:
                return self._redirect(
                    owner, r.path, r.query, destinationBroker=None, authoritative="true"
                )
        elif r.me != owner:
            return self._redirect(owner, r.path, r.query, authoritative="true")
        self.owners[bundle] = None
        self._unloaded = True
        log.info("unloaded %s from %s (next owner on lookup: %s)", bundle, owner, destination)
        return NO_CONTENT

    def _unload_namespace(self, namespace: str) -> Response:
        """A3: every owned bundle of the namespace unloaded; 412 when none is owned."""
        if namespace in self.system:
            return NO_CONTENT
        owned = [
            b for b, o in self.owners.items() if o is not None and b.rsplit("/", 1)[0] == namespace
        ]
        if not owned:
            return _reason(412, "Namespace is already unloaded or Namespace has bundles activated")
        for bundle in owned:
            self.owners[bundle] = None
            self._unloaded = True
        return NO_CONTENT

    def _split(self, r: _Request, namespace: str, label: str) -> Response:
        """A2 (§4.3): 412 an unsupported algorithm, specified_positions_divide without
        positions or with one outside the bundle, not a bundle, a split that cannot be made;
        an unowned bundle is assigned first (Pulsar's quirk), a non-owner answers 307. Modular:
        both children stay with the owner, and with ``unload=true`` are unloaded; extensible:
        ``unload`` is ignored. An algorithm that finds no boundary splits nothing (204), as
        NamespaceService.splitAndOwnBundle does."""
        config = self.effective
        algorithm = r.params.get("splitAlgorithmName") or str(
            config["defaultNamespaceBundleSplitAlgorithm"]
        )
        supported = [
            s.strip()
            for s in str(config["supportedNamespaceBundleSplitAlgorithms"]).split(",")
            if s.strip()
        ]
        if algorithm not in supported:
            return _reason(
                412,
                "Unsupported namespace bundle split algorithm, supported algorithms are "
                + str(supported),
            )
        try:
            positions = json.loads(r.body) if r.body.strip() else []
        except ValueError:
            return _reason(400, "The request body is not JSON")
        if not isinstance(positions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in positions
        ):
            return _reason(400, "The split boundaries must be a JSON array of integers")
        if algorithm == "specified_positions_divide" and not positions:
            return _reason(
                412,
                "With specified_positions_divide split algorithm, splitBoundaries must not be "
                "empty",
            )
        bundle = self._bundle(namespace, label)
        if not isinstance(bundle, str):
            return bundle
        if namespace in self.system:
            log.info("skip splitting heartbeat bundle %s", bundle)
            return NO_CONTENT
        owner = self.owners.get(bundle) or self._assign([bundle], "split").get(bundle)
        if owner is None:
            return _reason(503, f"No broker available to own {bundle}")
        if r.me != owner:
            return self._redirect(owner, r.path, r.query, authoritative="true")
        bounds = self.boundaries[namespace]
        index = bounds.index(int(label[2:10], 16))
        lower, upper = bounds[index], bounds[index + 1]
        outside = [p for p in positions if not lower < p < upper]
        if algorithm == "specified_positions_divide" and outside:
            return _reason(
                412,
                f"Split bundle failed due to invalid request: position {outside[0]} is not "
                f"inside {bundle}",
            )
        try:
            _, cut = get_split_algorithm(algorithm)
            topics = [
                TopicLoad(
                    t["topic"],
                    topic_hash(t["topic"]),
                    t["msgRateIn"] + t["msgRateOut"],
                    t["msgThroughputIn"] + t["msgThroughputOut"],
                )
                for t in self._stats.get(bundle, {}).get("topicStats", [])
            ]
            cuts = cut(BundleRange(lower, upper), topics, positions, self._pulsar_config())
            if not cuts:
                log.info("no valid boundary found in %s to split it with %s", bundle, algorithm)
                return NO_CONTENT
            new_bounds = split_boundaries(bounds, BundleRange(lower, upper), cuts)
        except BalancerError as exc:
            return _reason(412, f"Split bundle failed due to invalid request: {exc.message}")
        self.boundaries[namespace] = new_bounds
        del self.owners[bundle]
        self.short_term.pop(bundle, None)
        self.long_term.pop(bundle, None)
        self.samples.pop(bundle, None)
        self.recently_unloaded.pop(bundle, None)
        self.affinity.pop(bundle, None)
        unload = r.params.get("unload", "false").lower() == "true" and not self.extensible
        children = []
        for a, b in itertools.pairwise(new_bounds[index : index + len(set(cuts)) + 2]):
            child = f"{namespace}/{format_hash(a)}_{format_hash(b)}"
            children.append(child)
            self.owners[child] = None if unload else owner
        self._refresh_stats(self._stats_minute)
        log.info(
            "split %s on %s into %s%s", bundle, owner, children, " (unloaded)" if unload else ""
        )
        return NO_CONTENT


@dataclass(frozen=True, slots=True)
class _Request:
    me: str
    method: str
    path: str
    query: str
    params: dict[str, str]
    body: bytes


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# -- serving -------------------------------------------------------------------------------------


class _BrokerHandler(BaseHTTPRequestHandler):
    """One broker's web port: every request goes to ``cluster.handle`` as this broker."""

    cluster: PulsarCluster
    broker_id: str
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.broker_id, format % args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        path, _, query = self.path.partition("?")
        status, headers, data = self.cluster.handle(
            self.broker_id, self.command, path, query, dict(self.headers.items()), body
        )
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204 and data:
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()


def serve(cluster: PulsarCluster, host: str | None = None) -> list[ThreadingHTTPServer]:
    """Start one ``ThreadingHTTPServer`` per broker on its port (each in a daemon thread),
    listening on ``host`` (default the cluster's). Stop them with ``stop``.

    Raises:
        OSError: a port is taken (the servers already started are stopped).
    """
    servers: list[ThreadingHTTPServer] = []
    try:
        for broker in cluster.broker_ids:
            handler = type(
                "BrokerHandler", (_BrokerHandler,), {"cluster": cluster, "broker_id": broker}
            )
            server = ThreadingHTTPServer((host or cluster.host, cluster.port_of[broker]), handler)
            server.daemon_threads = True
            servers.append(server)
            threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"pulsar-broker-{broker}",
                daemon=True,
            ).start()
    except OSError:
        stop(servers)
        raise
    return servers


def stop(servers: Sequence[ThreadingHTTPServer]) -> None:
    """Stop the brokers' servers (all at once) and close their ports."""
    stopping = [threading.Thread(target=server.shutdown) for server in servers]
    for thread in stopping:
        thread.start()
    for thread, server in zip(stopping, servers, strict=True):
        thread.join()
        server.server_close()


def build(
    traces_dir: Path, *, layout: Layout = DEMO, scale: float = DEFAULT_SCALE, **options: Any
) -> PulsarCluster:
    """Load the traces and set up a cluster (``options``: ``PulsarCluster``'s keywords)."""
    workload = build_workload(layout, load_functions(traces_dir), scale=scale)
    cpu = {b.name: load_cpu_series(traces_dir, b.cpu_series) for b in layout.brokers}
    return PulsarCluster(workload, cpu, layout=layout, **options)


def run(
    cluster: PulsarCluster,
    step_s: float,
    steps: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Step every ``step_s`` wall seconds (a trace minute each) until ``steps`` are done or
    forever."""
    done = 0
    while steps is None or done < steps:
        started = time.monotonic()
        cluster.step(time.time())
        done += 1
        sleep(max(0.0, step_s - (time.monotonic() - started)))


def main(argv: list[str] | None = None) -> None:
    """Serve the demo cluster as a Pulsar cluster and play its traces."""
    parser = argparse.ArgumentParser(
        prog="python -m console.connectors.pulsar_cluster",
        description="The demo cluster served as an Apache Pulsar cluster (admin REST API).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--base-port", type=int, default=18080)
    parser.add_argument("--token", default=os.environ.get("FULCRUM_PULSAR_TOKEN") or None)
    parser.add_argument("--load-manager", choices=("modular", "extensible"), default="modular")
    parser.add_argument("--pulsar-version", default="3.3.2")
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=float(os.environ.get("FULCRUM_SIM_STEP_S", "2")),
        help="wall seconds per trace minute (default 2)",
    )
    parser.add_argument("--traces", type=Path, default=default_traces_dir())
    parser.add_argument("--start-minute", type=int, default=0)
    parser.add_argument("--unload-delay-seconds", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many minutes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cluster = build(
        args.traces,
        host=args.host,
        base_port=args.base_port,
        token=args.token,
        load_manager=args.load_manager,
        pulsar_version=args.pulsar_version,
        start_minute=args.start_minute,
        unload_delay_s=args.unload_delay_seconds,
    )
    servers = serve(cluster)
    log.info(
        "cluster %s (%s load manager, Pulsar %s): brokers %s, leader %s",
        cluster.cluster,
        args.load_manager,
        args.pulsar_version,
        ", ".join(cluster.broker_ids),
        cluster.leader,
    )
    try:
        run(cluster, args.step_seconds, args.steps)
    except KeyboardInterrupt:
        pass
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
