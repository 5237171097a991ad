"""Reads: ORM rows -> balancer types, and the rows the pages show."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies
from balancer.danube.config import DanubeConfig
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.registry import split_keys
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from balancer.stats import imbalance
from balancer.wire import RATE_KEYS
from console.models import (
    LONG_COLUMNS,
    SHORT_COLUMNS,
    AuditEvent,
    BalancerConfig,
    Broker,
    Bundle,
    Cluster,
    LoadReport,
    Namespace,
)


def rates_from_json(doc: dict[str, Any]) -> MessageRates:
    """Stored ``{"msgRateIn": ...}`` -> MessageRates (missing keys are 0)."""
    get = doc.get
    return MessageRates(
        float(get("msgRateIn", 0.0)),
        float(get("msgRateOut", 0.0)),
        float(get("msgThroughputIn", 0.0)),
        float(get("msgThroughputOut", 0.0)),
    )


def rates_to_json(rates: MessageRates) -> dict[str, float]:
    """MessageRates -> the stored ``{"msgRateIn": ...}`` form."""
    return {key: getattr(rates, attr) for key, attr in RATE_KEYS.items()}


def broker_load_from_report(
    broker: Broker, report: LoadReport | None, bundles: tuple[str, ...]
) -> BrokerLoad:
    """The balancer's view of a broker from its newest load report (zeros if it never reported)."""
    domain = broker.failure_domain.name if broker.failure_domain else ""
    if report is None:
        return BrokerLoad(
            name=broker.name, failure_domain=domain, state=broker.state, bundles=bundles
        )
    reported_at = report.reported_at.timestamp()
    return BrokerLoad(
        name=broker.name,
        failure_domain=domain,
        state=broker.state,
        cpu=ResourceUsage(report.cpu_usage, report.cpu_limit),
        memory=ResourceUsage(report.memory_usage_mib, report.memory_limit_mib),
        direct_memory=ResourceUsage(report.direct_memory_usage_mib, report.direct_memory_limit_mib),
        bandwidth_in=ResourceUsage(
            report.bandwidth_in_usage_bytes_per_s, report.bandwidth_in_limit_bytes_per_s
        ),
        bandwidth_out=ResourceUsage(
            report.bandwidth_out_usage_bytes_per_s, report.bandwidth_out_limit_bytes_per_s
        ),
        rates=MessageRates(
            report.msg_rate_in,
            report.msg_rate_out,
            report.msg_throughput_in_bytes_per_s,
            report.msg_throughput_out_bytes_per_s,
        ),
        bundles=bundles,
        topics=report.topic_count,
        reported_at=reported_at,
        # The report's time is also Pulsar's BrokerLoadData.updatedAt (TransferShedder's TTL).
        updated_at=reported_at,
    )


def cluster_snapshot_get(*, now: datetime) -> ClusterSnapshot:
    """Everything a decision may read: brokers' newest reports, bundle loads and owners, the
    namespaces' policies and the recently unloaded bundles (unload time, s since epoch)."""
    namespace_rows = list(Namespace.objects.values_list("id", "name", "anti_affinity_group"))
    namespace_names = {pk: name for pk, name, _ in namespace_rows}
    broker_rows = list(Broker.objects.select_related("latest_report", "failure_domain"))
    broker_names = {b.pk: b.name for b in broker_rows}
    owned: dict[str, list[str]] = {b.name: [] for b in broker_rows}
    bundle_loads: dict[str, BundleLoad] = {}
    recently_unloaded: dict[str, float] = {}
    # Plain rows, not model instances: a million bundles are a million tuples.
    rows = Bundle.objects.values_list(
        "namespace_id",
        "lower",
        "upper",
        "owner_id",
        *SHORT_COLUMNS,
        *LONG_COLUMNS,
        "topics",
        "producers",
        "consumers",
        "last_unloaded_at",
    ).order_by("namespace_id", "lower")
    for row in rows.iterator(chunk_size=20_000):
        ns, lower, upper, owner_id = row[:4]
        name = f"{namespace_names[ns]}/0x{lower:08x}_0x{upper:08x}"
        owner = broker_names.get(owner_id) if owner_id is not None else None
        if owner is not None:
            owned[owner].append(name)
        bundle_loads[name] = BundleLoad(
            name,
            owner,
            MessageRates(row[4], row[5], row[6], row[7]),
            MessageRates(row[8], row[9], row[10], row[11]),
            row[12],
            row[13],
            row[14],
        )
        moved = row[15]
        if moved is not None:
            recently_unloaded[name] = moved.timestamp()
    brokers = {
        b.name: broker_load_from_report(b, b.latest_report, tuple(owned[b.name]))
        for b in broker_rows
    }
    namespaces = {name: NamespacePolicy(name, group or None) for _, name, group in namespace_rows}
    # Every move of the last hour, one per move (a split's children are not moves).
    moves = AuditEvent.objects.filter(
        action=AuditEvent.Action.UNLOAD, at__gte=now - timedelta(hours=1)
    ).values_list("at", flat=True)
    return ClusterSnapshot(
        now=now.timestamp(),
        brokers=brokers,
        bundles=bundle_loads,
        namespaces=namespaces,
        recently_unloaded=recently_unloaded,
        recent_moves=tuple(at.timestamp() for at in moves),
    )


def balancer_config_get() -> BalancerConfig:
    """The cluster's balancer config row (created with defaults on first use)."""
    cluster, _ = Cluster.objects.get_or_create(name="default")
    config, _ = BalancerConfig.objects.get_or_create(cluster=cluster)
    return config


def pulsar_config_get(config: BalancerConfig | None = None) -> PulsarConfig:
    """The stored parameters as the balancer's frozen config."""
    config = config or balancer_config_get()
    pulsar, _ = split_keys(config.parameters)
    return PulsarConfig.from_keys(pulsar)


def cycle_config_get(config: BalancerConfig | None = None) -> CycleConfig:
    """The cycle's whole configuration: the stored strategies and Pulsar parameters, and
    Fulcrum's safety limits from the settings (FULCRUM_BUNDLE_COOL_DOWN_S, ...)."""
    config = config or balancer_config_get()
    _, danube = split_keys(config.parameters)
    return CycleConfig(
        strategies=Strategies(config.shedder, config.placement, config.split_algorithm),
        pulsar=pulsar_config_get(config),
        danube=DanubeConfig.from_keys(danube),
        safety=SafetyConfig(
            bundle_cool_down_s=settings.FULCRUM_BUNDLE_COOL_DOWN_S,
            max_moves_per_hour=settings.FULCRUM_MAX_MOVES_PER_HOUR,
            blacklist=tuple(settings.FULCRUM_BLACKLIST),
            broker_timeout_s=settings.FULCRUM_BROKER_TIMEOUT_S,
            is_auto_split_enabled=config.is_auto_split_enabled,
        ),
        is_shedding_enabled=config.is_shedding_enabled,
    )


def broker_rankings() -> list[dict[str, Any]]:
    """Dashboard rows, least loaded first: score (weighted max usage, %), cpu %, bandwidth in/out %,
    bundles, throughput (bytes/s), msg rate (msg/s), state, failure domain."""
    rows = []
    counts: dict[int, int] = {}
    for owner_id in Bundle.objects.filter(owner__isnull=False).values_list("owner_id", flat=True):
        counts[owner_id] = counts.get(owner_id, 0) + 1
    for broker in Broker.objects.select_related("latest_report", "failure_domain"):
        load = broker_load_from_report(broker, broker.latest_report, ())
        report = broker.latest_report
        rows.append(
            {
                "name": broker.name,
                "state": broker.state,
                "failureDomain": load.failure_domain,
                "score": round((report.weighted_usage_fraction if report else 0.0) * 100, 1),
                "cpu": round(load.cpu.percent(), 1),
                "bandwidthIn": round(load.bandwidth_in.percent(), 1),
                "bandwidthOut": round(load.bandwidth_out.percent(), 1),
                "bundles": counts.get(broker.pk, 0),
                "throughput": load.rates.throughput,
                "msgRate": load.rates.msg_rate,
                "reportedAt": report.reported_at.isoformat() if report else None,
            }
        )
    rows.sort(key=lambda r: (r["score"], r["name"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows


def current_imbalance(rows: list[dict[str, Any]] | None = None) -> dict[str, float]:
    """CV, mean and std of the active brokers' scores (fractions), from the newest reports."""
    rows = broker_rankings() if rows is None else rows
    spread = imbalance(r["score"] / 100 for r in rows if r["state"] == "active" and r["reportedAt"])
    return {"cv": spread.cv, "mean": spread.mean, "std": spread.std}
