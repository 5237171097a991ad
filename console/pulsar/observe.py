"""Observe a Pulsar cluster through its admin API (``console.pulsar.admin.PulsarAdmin``) and map
what it says onto Fulcrum's model (``PULSAR_REALITY.md`` §2–§3, ``PULSAR_ADMIN.md`` §4.4, §7).
No Django.

- the cluster: the name the brokers give themselves (E17 ``clusterName``) or the one configured;
  never guessed from E1 ``/admin/v2/clusters``, an unordered set of every cluster of the
  configuration store (a geo-replicated deployment lists the remote ones too), unless it names
  exactly one;
- brokers: E2 (active), the leader from E3, each one's failure domain from E5;
- namespaces: E6 → E7 → E8 boundaries and E9's anti-affinity group;
- owners: E4 ``ownedNamespaces`` of every broker — never a lookup, which would assign; a bundle of
  E8 that no broker lists is unowned (normal after an unload until a client looks it up). E4's
  redirect also tells each broker's own URL (over https, its ``webServiceUrlTls``);
- load: E11 (the modular load manager's ``LocalBrokerData``) of every broker, on its own URL;
  its ``lastStats`` holds every bundle with loaded topics, an owned bundle absent from it is
  idle, and ``/metrics`` is never read for it: ``ModularLoadManagerImpl.updateLocalBrokerData``
  fills ``lastStats`` and the optional ``pulsar_bundle_*`` metrics from the same
  ``getBundleStats()``, so a scrape could add nothing. Under the extensible load manager, which
  serves no E11, the report is made from the ``pulsar_lb_*`` metrics (resource usage, percent)
  and E12's topic stats summed per bundle (rates, throughput), E12 read at most once a minute
  (Pulsar rebuilds it every ``statsUpdateFrequencyInSecs``, 60 s) — ``extensible_report``; a
  failed scrape keeps the last usage for a while, marked missing, never silently;
- the report's time is when Fulcrum read it: ``LocalBrokerData.lastUpdate`` only moves when the
  broker writes its report to the metadata store (a 10 % change, or every 15 min), while the
  figures are fresh on every call; ``lastUpdate`` is kept as information;
- the active load manager from E17 (``loadManagerClassName``), each broker's version from its
  report's ``brokerVersionString``.

Heartbeat and SLA-monitor bundles (namespaces ``pulsar/<broker id>`` and
``pulsar/<cluster>/<broker id>``) and ``pulsar/system`` (the extensible load manager's channel,
owned by the leader) are left out: Fulcrum never moves them.

``report_document`` turns one broker's ``LocalBrokerData`` into the load report Fulcrum ingests
(bandwidth from kbit/s to bytes/s), refusing a malformed one with the broker and the field named.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

from console.pulsar.admin import PulsarAdmin, PulsarAdminError, broker_host

# Heartbeat (pulsar/<cluster>/<host:port>, pulsar/<host:port>) and SLA-monitor
# (sla-monitor/<cluster>/<host:port>) namespaces: Pulsar's NamespaceService patterns.
SYSTEM_NAMESPACE: Final = re.compile(
    r"^(?:(?:pulsar/(?:[^/]+/)?|sla-monitor/[^/]+/)[^/:]+:\d+|pulsar/system)(?:/|$)"
)
# The load managers' classes (loadManagerClassName, E17).
MODULAR_CLASS: Final = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE_CLASS: Final = (
    "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
)
EXTENSIBLE: Final = EXTENSIBLE_CLASS.rsplit(".", 1)[1]
KBIT_TO_BYTES: Final = 1000 / 8  # Pulsar reports bandwidth in kbit/s
RESOURCES: Final = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
RATES: Final = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
# Broker resource usage, percent of its limit (Pulsar ModularLoadManagerImpl
# updateLoadBalancingMetrics, BrokerLoadData.toMetrics): metric -> LocalBrokerData key.
LB_USAGE_METRICS: Final = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "directMemory",
    "pulsar_lb_bandwidth_in_usage": "bandwidthIn",
    "pulsar_lb_bandwidth_out_usage": "bandwidthOut",
}
COUNTS: Final = ("topics", "consumerCount", "producerCount")
# Pulsar rebuilds broker-stats/topics every statsUpdateFrequencyInSecs (60 s by default): read
# more often, it says the same.
TOPIC_STATS_TTL_S: Final = 60.0
# The effective load-balancer settings an operator compares Fulcrum's decisions with (E17).
LB_KEYS: Final = (
    "loadBalancerEnabled",
    "loadBalancerSheddingEnabled",
    "loadBalancerAutoBundleSplitEnabled",
    "loadBalancerLoadSheddingStrategy",
    "loadBalancerLoadPlacementStrategy",
    "loadBalancerSheddingIntervalMinutes",
    "loadBalancerSheddingGracePeriodMinutes",
    "loadBalancerBrokerThresholdShedderPercentage",
    "defaultNamespaceBundleSplitAlgorithm",
    "exposeBundlesMetricsInPrometheus",
    "loadBalancerReportUpdateThresholdPercentage",
    "loadBalancerReportUpdateMaxIntervalMinutes",
)


class ObservationError(ValueError):
    """A broker's answer that cannot be Fulcrum's load: ``broker`` and ``field`` name it."""

    def __init__(self, broker: str, field: str, message: str) -> None:
        super().__init__(f"{broker}: {field}: {message}")
        self.broker, self.field = broker, field


def is_system_bundle(bundle: str) -> bool:
    """A heartbeat or SLA-monitor bundle (``pulsar/[<cluster>/]<broker id>/…``,
    ``sla-monitor/<cluster>/<broker id>/…``): never moved."""
    return bool(SYSTEM_NAMESPACE.match(bundle))


@dataclass
class BrokerRead:
    """How one broker's load was read: ``read_at`` (s since epoch: the report's time),
    ``last_update`` (``LocalBrokerData.lastUpdate`` in s, its last metadata-store write; None
    under the extensible load manager), ``url`` (its own web URL), ``missing`` (figures that
    could not be read, each with why: the report stands without them), ``calls`` (admin calls
    made for it this pass)."""

    read_at: float
    last_update: float | None = None
    url: str = ""
    missing: list[str] = field(default_factory=list)
    calls: int = 0


@dataclass
class Observation:
    """One look at a cluster.

    Attributes:
        cluster: its name; brokers: the active brokers' ids; leader: the leader's id or None.
        domains: broker id -> failure domain ("" when none).
        namespaces: ``tenant/namespace`` -> (boundaries ["0x…"], anti-affinity group or None).
        owners: bundle -> the broker id that owns it (system bundles left out).
        reports: broker id -> its ``LocalBrokerData``; errors: what could not be read, each
            "<broker or namespace>: <reason>" (the rest of the observation stands).
        unknown_owners: brokers whose owned bundles could not be read (their bundles keep the
            owner known before).
        load_manager: the effective ``loadManagerClassName`` ("" when unknown); lb_config: the
            effective values of ``LB_KEYS`` (strings); versions: broker -> its version.
        namespaces_complete: every tenant's namespaces and every namespace's bundles were read
            (a namespace absent from ``namespaces`` is then gone from the cluster).
        reads: broker id -> how its report was read (``BrokerRead``).
        broker_urls: broker id -> its own web URL, as Pulsar named it.
        cluster_source: where the name came from ("configured", "clusterName", "the only
            cluster listed").
    """

    cluster: str
    brokers: list[str]
    leader: str | None
    domains: dict[str, str]
    namespaces: dict[str, tuple[list[str], str | None]]
    owners: dict[str, str]
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    load_manager: str = ""
    unknown_owners: set[str] = field(default_factory=set)
    versions: dict[str, str] = field(default_factory=dict)
    lb_config: dict[str, str] = field(default_factory=dict)
    namespaces_complete: bool = True
    reads: dict[str, BrokerRead] = field(default_factory=dict)
    broker_urls: dict[str, str] = field(default_factory=dict)
    cluster_source: str = ""

    @property
    def version(self) -> str:
        """The oldest version a broker reports ("" when none does): what the cluster supports."""
        known = [v for v in self.versions.values() if v]
        return min(known, key=version_key) if known else ""

    @property
    def extensible(self) -> bool:
        """The extensible load manager (PIP-192) is active: no load report over REST."""
        return self.load_manager.endswith(EXTENSIBLE)

    def bundles(self) -> list[str]:
        """Every bundle of the observed namespaces, from their boundaries."""
        out = []
        for namespace, (boundaries, _) in self.namespaces.items():
            out += [f"{namespace}/{lo}_{hi}" for lo, hi in itertools.pairwise(boundaries)]
        return out

    def unowned(self) -> list[str]:
        """Bundles no broker lists as its own."""
        return [b for b in self.bundles() if b not in self.owners]


# Namespaces whose bundle boundaries (E8) and anti-affinity group (E9) a pass re-reads besides
# those it must (new, split, or with a bundle nobody owns): the oldest first. A cluster of at
# most this many namespaces is read whole every pass; 250 namespaces are read over 4 passes
# (500 calls a pass were half of a 200-broker cluster's, issue 26).
NAMESPACE_READS_PER_PASS: Final = 64


class ObserveCache:
    """What one connection's passes keep between them (in the observing process): under the
    extensible load manager, each broker's last E12 topic stats (re-read once they are older
    than ``TOPIC_STATS_TTL_S``) and last resource usage from ``/metrics`` (used, marked
    missing, when a scrape fails, for at most ``usage_max_age_s``); every namespace's last
    boundaries and anti-affinity group, with the pass that read them (``namespace_reads``)."""

    def __init__(self, usage_max_age_s: float = 60.0) -> None:
        self.usage_max_age_s = usage_max_age_s
        self.namespaces: dict[str, tuple[int, tuple[list[str], str | None]]] = {}
        self.passes = 0
        self.topic_stats: dict[str, tuple[float, dict[str, Any]]] = {}
        self.usage: dict[str, tuple[float, dict[str, float]]] = {}
        self.lock = threading.Lock()


def cluster_name_get(
    admin: PulsarAdmin, configured: str | None, runtime: dict[str, str] | None
) -> tuple[str, str]:
    """The local cluster's name and where it came from: ``configured`` (checked against the
    brokers' own ``clusterName``), else E17's ``clusterName``, else E1 when it lists exactly one
    cluster (``global`` aside).

    Raises:
        PulsarAdminError: 409 when the configured name is not the brokers' own, or when E1
            lists several clusters and nothing says which is local (never guessed: in a
            geo-replicated deployment a remote cluster's calls are redirected there).
    """
    local = (runtime or {}).get("clusterName", "")
    if configured:
        if local and local != configured:
            raise PulsarAdminError(
                409,
                f"the brokers at {admin.service_url} belong to cluster {local}, not "
                f"{configured} as configured: refused (Fulcrum never observes a remote "
                "cluster through another's brokers)",
                "GET",
                admin.service_url,
            )
        return configured, "configured"
    if local:
        return local, "clusterName"
    names = sorted({c for c in admin.clusters() if c != "global"})
    if len(names) == 1:
        return names[0], "the only cluster listed"
    raise PulsarAdminError(
        409,
        f"the brokers did not say which cluster they are (E17 clusterName unread) and "
        f"/admin/v2/clusters lists {', '.join(names) or 'none'}: not guessed; set the "
        "cluster's name (FULCRUM_PULSAR_CLUSTER, or the connection's cluster name)",
        "GET",
        admin.service_url,
    )


def namespace_ranges(namespace: str, boundaries: list[str]) -> list[tuple[int, int]]:
    """A namespace's bundle boundaries (Pulsar's ``getBundles``: ``["0x00000000", …,
    "0xffffffff"]``) -> its bundles' [(lower, upper)], checked.

    Raises:
        ObservationError: boundaries that are not increasing 32-bit hex numbers from 0 to
            0xffffffff.
    """
    try:
        points = [int(b, 16) for b in boundaries]
    except (TypeError, ValueError):
        raise ObservationError(
            namespace, "boundaries", f"not hex numbers: {boundaries!r}"
        ) from None
    if (
        len(points) < 2
        or points[0] != 0
        or points[-1] != 0xFFFFFFFF
        or points != sorted(set(points))
    ):
        raise ObservationError(
            namespace, "boundaries", f"must rise from 0x00000000 to 0xffffffff: {boundaries!r}"
        )
    return list(itertools.pairwise(points))


def _ranges(boundaries: list[str]) -> set[tuple[int, int]]:
    """A namespace's boundaries as (lower, upper) pairs; empty if they are not well formed."""
    try:
        return set(namespace_ranges("", boundaries))
    except ObservationError:
        return set()


def namespaces_to_read(
    namespaces: list[str], owners: dict[str, str], cache: ObserveCache
) -> list[str]:
    """The namespaces whose boundaries and anti-affinity group a pass reads: every one the
    cache does not hold, whose owned bundles are not the cached ranges (a split), or with a
    cached range no broker lists (unowned, or split away); then the others, the longest
    unread first, up to ``NAMESPACE_READS_PER_PASS`` in all. ``owners``: bundle -> broker."""
    listed: dict[str, set[tuple[int, int]]] = {}
    for bundle in owners:
        namespace, _, span = bundle.rpartition("/")
        lower, _, upper = span.partition("_")
        try:
            listed.setdefault(namespace, set()).add((int(lower, 16), int(upper, 16)))
        except ValueError:
            listed.setdefault(namespace, set()).add((-1, -1))
    must: list[str] = []
    rest: list[tuple[int, str]] = []
    for namespace in namespaces:
        kept = cache.namespaces.get(namespace)
        if kept is None or _ranges(kept[1][0]) != listed.get(namespace, set()):
            must.append(namespace)
        else:
            rest.append((kept[0], namespace))
    rest.sort()
    room = max(0, NAMESPACE_READS_PER_PASS - len(must))
    return sorted(must + [namespace for _, namespace in rest[:room]])


def observe(
    admin: PulsarAdmin,
    cluster: str | None = None,
    *,
    cache: ObserveCache | None = None,
    clock: Callable[[], float] = time.time,
) -> Observation:
    """Read the cluster's state (read-only: no call here assigns a bundle).

    Raises:
        PulsarAdminError: a cluster-wide read failed (the cluster's name, brokers, tenants);
            per-broker and per-namespace failures are collected in ``errors`` instead.
    """
    cache = cache or ObserveCache()
    errors: list[str] = []
    runtime: dict[str, str] | None
    try:
        runtime = admin.runtime_config()
    except PulsarAdminError as exc:
        runtime = None
        errors.append(f"configuration: {exc.reason}")
    name, source = cluster_name_get(admin, cluster, runtime)
    brokers = admin.brokers(name)
    try:
        info = admin.leader()
        leader = info.get("brokerId") or broker_host(str(info.get("serviceUrl", ""))) or None
    except PulsarAdminError as exc:
        leader = None
        errors.append(f"leader: {exc.reason}")
    domains = dict.fromkeys(brokers, "")
    try:
        for domain, members in admin.failure_domains(name).items():
            for broker in members:
                if broker in domains:
                    domains[broker] = domain
    except PulsarAdminError as exc:
        errors.append(f"failure domains: {exc.reason}")
    namespaces: list[str] = []
    complete = True
    for tenant, listed in admin.each(admin.tenants(), admin.namespaces):
        if isinstance(listed, PulsarAdminError):
            errors.append(f"{tenant}: {listed.reason}")
            complete = False
        else:
            namespaces += [n for n in listed if not SYSTEM_NAMESPACE.match(n + "/")]

    def namespace_state(namespace: str) -> tuple[list[str], str | None]:
        return admin.bundle_boundaries(namespace), admin.anti_affinity_group(namespace)

    owners: dict[str, str] = {}
    unknown: set[str] = set()
    owned_by = dict(admin.each(brokers, lambda b: admin.owned_bundles(name, b)))
    if admin.is_secure:
        # Over https a broker's URL is learned only from a redirect to it. One that answered
        # for itself (the service URL is it, or a load balancer in front of it) is asked again
        # through a broker whose URL Pulsar named: that one redirects to it.
        known = admin.learned()
        unnamed = [b for b in brokers if b not in known]
        via = next((b for b in brokers if b in known), None)
        if unnamed and via is not None:

            def through(broker: str, via: str = via) -> dict[str, dict[str, Any]]:
                return admin.owned_bundles(name, broker, via=via)

            owned_by.update(dict(admin.each(unnamed, through)))
        elif len(brokers) == 1 and brokers[0] not in known:
            # One broker: the service URL can only be it (or a proxy in front of it alone).
            admin.learn(brokers[0], admin.service_url)
    for broker in brokers:
        owned = owned_by[broker]
        if isinstance(owned, PulsarAdminError):
            errors.append(f"{broker}: owned bundles: {owned.reason}")
            unknown.add(broker)
            continue
        for bundle in owned:
            if not is_system_bundle(bundle):
                owners[bundle] = broker
    found: dict[str, tuple[list[str], str | None]] = {}
    cache.passes += 1
    for namespace, state in admin.each(
        namespaces_to_read(sorted(namespaces), owners, cache), namespace_state
    ):
        if isinstance(state, PulsarAdminError):
            errors.append(f"{namespace}: {state.reason}")
            complete = False
            cache.namespaces.pop(namespace, None)
        else:
            found[namespace] = state
            cache.namespaces[namespace] = (cache.passes, state)
    for namespace in namespaces:
        if namespace not in found and namespace in cache.namespaces:
            found[namespace] = cache.namespaces[namespace][1]
    for namespace in set(cache.namespaces) - set(namespaces):
        del cache.namespaces[namespace]  # Pulsar no longer lists it
    load_manager = ""
    lb_config: dict[str, str] = {}
    if runtime is not None:
        load_manager = runtime.get("loadManagerClassName", "")
        lb_config = {k: runtime[k] for k in LB_KEYS if k in runtime}

    def modular(broker: str) -> tuple[dict[str, Any], BrokerRead]:
        report = admin.load_report(broker)
        read = BrokerRead(clock(), url=admin.broker_url(broker), calls=1)
        stamp = report.get("lastUpdate")
        if isinstance(stamp, int | float) and not isinstance(stamp, bool) and stamp > 0:
            read.last_update = float(stamp) / 1000
        return report, read

    def extensible(broker: str) -> tuple[dict[str, Any], BrokerRead]:
        read = BrokerRead(clock(), url=admin.broker_url(broker))
        now = clock()
        read.calls += 1
        try:
            usage = parse_metrics(broker, admin.metrics(broker)).usage
            for metric, key in LB_USAGE_METRICS.items():
                if key not in usage:
                    raise ObservationError(broker, f"metrics.{metric}", "missing")
            with cache.lock:
                cache.usage[broker] = (now, usage)
        except (PulsarAdminError, ObservationError) as exc:
            with cache.lock:
                kept = cache.usage.get(broker)
            if kept is None or now - kept[0] > cache.usage_max_age_s:
                raise
            usage = kept[1]
            read.missing.append(
                f"resource usage: /metrics unreadable ({_why(exc)}); the figures read "
                f"{now - kept[0]:.0f} s ago are used"
            )
        with cache.lock:
            topics_kept = cache.topic_stats.get(broker)
        if topics_kept is None or now - topics_kept[0] >= TOPIC_STATS_TTL_S:
            read.calls += 1
            try:
                topics = admin.topic_stats(broker)
                with cache.lock:
                    cache.topic_stats[broker] = (now, topics)
            except PulsarAdminError as exc:
                if topics_kept is None:
                    raise
                topics = topics_kept[1]
                read.missing.append(
                    f"rates: broker-stats/topics unreadable ({exc.reason}); those read "
                    f"{now - topics_kept[0]:.0f} s ago are used"
                )
        else:
            topics = topics_kept[1]
        read.read_at = clock()
        return extensible_report(broker, usage, topics), read

    def reader(broker: str) -> tuple[dict[str, Any], BrokerRead] | ObservationError:
        try:
            return extensible(broker) if load_manager.endswith(EXTENSIBLE) else modular(broker)
        except ObservationError as exc:
            return exc

    # Each broker's report and how it was read come back together: a call that missed the
    # deadline writes nothing into this observation afterwards.
    reports: dict[str, dict[str, Any]] = {}
    reads: dict[str, BrokerRead] = {}
    for broker, result in admin.each(brokers, reader):
        if isinstance(result, PulsarAdminError):
            errors.append(f"{broker}: load report: {result.reason}")
        elif isinstance(result, ObservationError):
            errors.append(str(result))
        elif broker not in unknown:  # its bundles are unknown: its report cannot be checked
            reports[broker], reads[broker] = result
    versions = {
        b: str(r.get("brokerVersionString", "")) for b, r in reports.items() if isinstance(r, dict)
    }
    learned = admin.learned()
    return Observation(
        name,
        brokers,
        leader,
        domains,
        found,
        owners,
        reports,
        errors,
        load_manager,
        unknown,
        versions,
        lb_config,
        complete,
        reads,
        {b: u for b, u in learned.items() if b in set(brokers)},
        source,
    )


def _why(exc: Exception) -> str:
    return exc.reason if isinstance(exc, PulsarAdminError) else str(exc)


def _number(broker: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ObservationError(broker, where, f"must be a finite number, not {value!r}")
    return float(value)


def report_document(
    broker: str, data: dict[str, Any], owned: list[str], *, read_at: float | None = None
) -> dict[str, Any]:
    """The load report Fulcrum ingests (``console.services.ingest``) for ``broker`` from its
    ``LocalBrokerData``: its resources (bandwidth kbit/s → bytes/s; a limit of -1, a NIC of
    unknown speed, makes a resource that does not count, as in Pulsar's percentUsage), rates,
    the bundles it owns (``owned``, from E4) and those of them ``lastStats`` covers (every
    bundle with loaded topics), ``timestamp`` = ``read_at`` (s), when Fulcrum read it — not
    ``lastUpdate``, the broker's last metadata-store write (ModularLoadManagerImpl
    writeBrokerDataOnZooKeeper: a 10 % change or every 15 min), which is information only and
    not read here.

    Raises:
        ObservationError: a missing or malformed field, named.
    """
    if not isinstance(data, dict):
        raise ObservationError(broker, "body", "the load report is not a JSON object")
    doc: dict[str, Any] = {"name": broker}
    for key in RESOURCES:
        value = data.get(key, {"usage": 0.0, "limit": 0.0})
        if not isinstance(value, dict):
            raise ObservationError(broker, key, "must be an object with usage and limit")
        scale = KBIT_TO_BYTES if key.startswith("bandwidth") else 1.0
        usage = _number(broker, f"{key}.usage", value.get("usage", 0.0))
        limit = _number(broker, f"{key}.limit", value.get("limit", 0.0))
        if limit <= 0:  # an unknown limit (a NIC of unknown speed): Pulsar counts it as 0 %
            usage = limit = 0.0
        doc[key] = {"usage": max(usage, 0.0) * scale, "limit": limit * scale}
    for key in RATES:
        doc[key] = _number(broker, key, data.get(key, 0.0))
    if read_at is not None:
        doc["timestamp"] = read_at
    topics = data.get("numTopics", 0)
    if isinstance(topics, bool) or not isinstance(topics, int) or topics < 0:
        raise ObservationError(broker, "numTopics", f"must be a count, not {topics!r}")
    doc["topics"] = topics
    owned = [b for b in owned if not is_system_bundle(b)]
    doc["bundles"] = owned
    stats = data.get("lastStats") or {}
    if not isinstance(stats, dict):
        raise ObservationError(broker, "lastStats", "must be an object of bundle -> stats")
    mine = set(owned)
    bundle_stats: dict[str, dict[str, Any]] = {}
    for bundle, figures in stats.items():
        if bundle not in mine:
            continue  # a bundle it gave away since: its load is no longer this broker's
        if not isinstance(figures, dict):
            raise ObservationError(broker, f"lastStats.{bundle}", "must be an object")
        entry = {k: _number(broker, f"lastStats.{bundle}.{k}", figures.get(k, 0.0)) for k in RATES}
        for ours, theirs in (
            ("topics", "topics"),
            ("producers", "producerCount"),
            ("consumers", "consumerCount"),
        ):
            count = figures.get(theirs, 0)
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ObservationError(
                    broker, f"lastStats.{bundle}.{theirs}", f"must be a count, not {count!r}"
                )
            entry[ours] = count
        bundle_stats[bundle] = entry
    doc["bundleStats"] = bundle_stats
    return doc


def version_key(version: str) -> tuple[int, ...]:
    """``"3.3.2-SNAPSHOT"`` -> (3, 3, 2): comparable; no number -> ()."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("-", 1)[0])[:3])


def supports_destination(version: str) -> bool:
    """Unload with ``destinationBroker`` exists from Pulsar 3.0 (apache/pulsar#18663); an older
    broker ignores the parameter and does a plain unload. An unknown version is taken as new."""
    key = version_key(version)
    return not key or key >= (3, 0)


def affinity_by_range(version: str, *, extensible: bool) -> bool:
    """The modular load manager keeps an unload's ``destinationBroker`` on the leader keyed by
    the bundle's range only (``NamespacesBase.setNamespaceBundleAffinityAsync(bundleRange,
    …)``), so two same-range bundles of different namespaces overwrite each other's hint —
    until apache/pulsar#25518 (full bundle name), released in 4.0.10 and 4.2.1 (not in
    3.0.17; 4.1.x unknown: taken as not fixed). The extensible load manager carries the
    destination in its unload event instead. An unknown version is taken as not fixed."""
    if extensible:
        return False
    key = version_key(version)
    return not ((4, 0, 10) <= key < (4, 1) or key >= (4, 2, 1))


@dataclass
class BrokerMetrics:
    """What one broker's ``/metrics`` says of load: ``usage`` resource -> percent of its limit
    (``cpu``, ``memory``, ``directMemory``, ``bandwidthIn``, ``bandwidthOut``)."""

    usage: dict[str, float]


def parse_metrics(broker: str, text: str) -> BrokerMetrics:
    """Parse a broker's Prometheus text (E14) with prometheus-client's parser; metrics other
    than ``LB_USAGE_METRICS`` are ignored, so new ones cost nothing.

    Raises:
        ObservationError: text that is not the exposition format, or a value that is not a
            finite non-negative number.
    """
    usage: dict[str, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise ObservationError(broker, "metrics", f"not Prometheus text: {exc}") from None
    for family in families:
        for sample in family.samples:
            if sample.name not in LB_USAGE_METRICS:
                continue
            value = sample.value
            if not math.isfinite(value) or value < 0:
                raise ObservationError(
                    broker, f"metrics.{sample.name}", f"must be ≥ 0, not {value!r}"
                )
            usage[LB_USAGE_METRICS[sample.name]] = float(value)
    return BrokerMetrics(usage)


def extensible_report(
    broker: str, usage: dict[str, float], topics: dict[str, Any]
) -> dict[str, Any]:
    """A ``LocalBrokerData``-shaped report for a broker of the extensible load manager, which
    serves none over REST (PULSAR_ADMIN.md §3.4; §8, item 2): resources from ``pulsar_lb_*``
    (percent: CPU, memory and direct memory as usage of a limit of 100; bandwidth as the
    broker's summed throughput in kbit/s against the limit that percentage implies, unknown at
    0 %), rates and ``lastStats`` summed per bundle from E12 ``topics``.

    Raises:
        ObservationError: E12 of the wrong shape, or a missing resource metric, named.
    """
    for metric, key in LB_USAGE_METRICS.items():
        if key not in usage:
            raise ObservationError(broker, f"metrics.{metric}", "missing")
    if not isinstance(topics, dict):
        raise ObservationError(broker, "topics", "must be an object")
    stats: dict[str, dict[str, Any]] = {}
    for namespace, ranges in topics.items():
        if not isinstance(ranges, dict):
            raise ObservationError(broker, f"topics.{namespace}", "must be an object")
        for bundle_range, domains in ranges.items():
            bundle = f"{namespace}/{bundle_range}"
            if is_system_bundle(bundle) or not isinstance(domains, dict):
                continue
            entry = stats.setdefault(bundle, dict.fromkeys(RATES, 0.0) | dict.fromkeys(COUNTS, 0))
            for each in domains.values():
                if not isinstance(each, dict):
                    raise ObservationError(broker, f"topics.{bundle}", "must be an object")
                for topic, figures in each.items():
                    if not isinstance(figures, dict):
                        raise ObservationError(broker, f"topics.{topic}", "must be an object")
                    for key in RATES:
                        figure = figures.get(key, 0.0)
                        entry[key] += _number(broker, f"topics.{topic}.{key}", figure)
                    entry["topics"] += 1
    totals = {key: sum(e[key] for e in stats.values()) for key in RATES}
    report: dict[str, Any] = {
        key: {"usage": usage[key], "limit": 100.0} for key in ("cpu", "memory", "directMemory")
    }
    for key, flow in (("bandwidthIn", "msgThroughputIn"), ("bandwidthOut", "msgThroughputOut")):
        kbit = totals[flow] / KBIT_TO_BYTES
        percent = usage[key]
        report[key] = {"usage": kbit, "limit": kbit * 100 / percent if percent > 0 else -1.0}
    return (
        report
        | totals
        | {
            "lastStats": stats,
            "numTopics": sum(e["topics"] for e in stats.values()),
            "loadReportType": "ExtensibleLoadManager metrics",
        }
    )
