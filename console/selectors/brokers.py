"""Brokers as the pages show them: the rankings and the CV, a drain's progress, the failure-domain
layout, a broker's load over time and its readings not trusted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q

from balancer.cycle import broker_life
from balancer.placement.filters import anti_affinity_spread
from balancer.stats import imbalance
from console import loadstore
from console.errors import ConsoleError
from console.models import (
    AuditEvent,
    Broker,
    Bundle,
    Decision,
    LoadReport,
    Namespace,
    PulsarMove,
)
from console.selectors.config import balancer_config_get, cycle_config_get, pulsar_config_get
from console.selectors.snapshot import broker_load_get, cluster_snapshot_get


def broker_rankings() -> list[dict[str, Any]]:
    """Dashboard rows, least loaded first: score (weighted max usage, %), cpu %, bandwidth in/out %,
    bundles, throughput (bytes/s), msg rate (msg/s), state, failure domain."""
    rows = []
    counts: dict[int, int] = {}
    for owner_id in Bundle.objects.filter(owner__isnull=False).values_list("owner_id", flat=True):
        counts[owner_id] = counts.get(owner_id, 0) + 1
    brokers = list(Broker.objects.select_related("failure_domain"))
    entries = loadstore.entries_get([b.name for b in brokers])
    weights = pulsar_config_get().weights
    for broker in brokers:
        entry = entries.get(broker.name)
        load = broker_load_get(broker, entry, ())
        score = load.weighted_max_usage(weights) if entry is not None else 0.0
        rows.append(
            {
                "name": broker.name,
                "state": broker.state,
                "failureDomain": load.failure_domain,
                "score": round(score * 100, 1),
                "cpu": round(load.cpu.percent(), 1),
                "bandwidthIn": round(load.bandwidth_in.percent(), 1),
                "bandwidthOut": round(load.bandwidth_out.percent(), 1),
                "bundles": counts.get(broker.pk, 0),
                "throughput": load.rates.throughput,
                "msgRate": load.rates.msg_rate,
                "reportedAt": (
                    datetime.fromtimestamp(entry.reported_at, UTC).isoformat() if entry else None
                ),
            }
        )
    rows.sort(key=lambda r: (r["score"], r["name"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows


def current_imbalance(rows: list[dict[str, Any]] | None = None) -> dict[str, float]:
    """CV, mean and std of the serving brokers' scores (fractions: active, and reporting within
    ``FULCRUM_BROKER_TIMEOUT_S`` — a lost broker serves nothing), from the newest reports, and
    ``serving``, how many they are (below 2 the CV says nothing)."""
    rows = broker_rankings() if rows is None else rows
    # Serving: active, and reporting within the broker timeout (a lost broker serves nothing).
    fresh = datetime.now(UTC).timestamp() - settings.FULCRUM_BROKER_TIMEOUT_S
    scores = [
        r["score"] / 100
        for r in rows
        if r["state"] == "active"
        and r["reportedAt"]
        and datetime.fromisoformat(r["reportedAt"]).timestamp() >= fresh
    ]
    spread = imbalance(scores)
    return {"cv": spread.cv, "mean": spread.mean, "std": spread.std, "serving": len(scores)}


def broker_owned_bundles(broker: str) -> list[tuple[int, str, int, int]] | None:
    """The bundles ``broker`` owns as (namespace id, namespace name, lower, upper); None when no
    broker has that name. One indexed query in SQL (the ORM's compilation costs more than the
    query, and every load report asks)."""
    # Table names come from the models, the broker name is a parameter.
    bundle, namespace, owner = (m._meta.db_table for m in (Bundle, Namespace, Broker))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT b.namespace_id, n.name, b.lower, b.upper FROM {bundle} b "
            f"JOIN {namespace} n ON n.id = b.namespace_id "
            f"WHERE b.owner_id = (SELECT id FROM {owner} WHERE name = %s)",
            [broker],
        )
        rows: list[tuple[int, str, int, int]] = cursor.fetchall()
    if not rows and not Broker.objects.filter(name=broker).exists():
        return None
    return rows


def drain_progress() -> dict[str, dict[str, Any]]:
    """Each broker that is draining or drained, by name: ``{"state", "since" (ISO 8601 UTC or
    None), "bundles" (still owned), "queued", "inFlight" (sent, being verified), "failed"
    (moves from or to it that ended failed or skipped since its drain began)}`` — moves on an
    attached Pulsar cluster (``PulsarMove``); 0 on the simulator, whose moves apply at once."""
    rows = list(Broker.objects.exclude(state=Broker.State.ACTIVE))
    if not rows:
        return {}
    names = [b.name for b in rows]
    owned = dict(
        Bundle.objects.filter(owner__name__in=names)
        .values("owner__name")
        .annotate(n=Count("id"))
        .values_list("owner__name", "n")
    )
    moves = PulsarMove.objects.filter(Q(source__in=names) | Q(destination__in=names))
    out: dict[str, dict[str, Any]] = {}
    for broker in rows:
        mine = moves.filter(Q(source=broker.name) | Q(destination=broker.name))
        failed = mine.filter(outcome__in=[PulsarMove.Outcome.FAILED, PulsarMove.Outcome.SKIPPED])
        if broker.state_since is not None:
            failed = failed.filter(finished_at__gte=broker.state_since)
        out[broker.name] = {
            "state": broker.state,
            "since": broker.state_since.astimezone(UTC).isoformat() if broker.state_since else None,
            "bundles": owned.get(broker.name, 0),
            "queued": mine.filter(state=PulsarMove.State.QUEUED).count(),
            "inFlight": mine.filter(
                state__in=[PulsarMove.State.SENDING, PulsarMove.State.VERIFYING]
            ).count(),
            "failed": failed.count(),
        }
    return out


def domain_layout(*, now: datetime | None = None) -> dict[str, Any]:
    """Failure domains as columns of broker cards (the dashboard's ranking rows) and the
    anti-affinity groups' spread with its violations (``anti_affinity_spread``): ``{"at",
    "failureDomainsEnabled", "domains": [{"name", "brokers": [ranking rows, with "drain":
    ``drain_progress``'s figures or None]}], "groups"}``."""
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    rows = broker_rankings()
    drains = drain_progress()
    domains: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["name"]):
        row = {**row, "drain": drains.get(row["name"])}
        domains.setdefault(row["failureDomain"] or "default", []).append(row)
    snapshot = cluster_snapshot_get(now=now)
    lost, _ = broker_life(snapshot, cycle.safety, now.timestamp())
    serving = [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
    return {
        "at": now.astimezone(UTC).isoformat(),
        "failureDomainsEnabled": cycle.pulsar.is_failure_domains_enabled,
        "domains": [{"name": name, "brokers": domains[name]} for name in sorted(domains)],
        "groups": anti_affinity_spread(snapshot, cycle.pulsar, serving),
    }


# The broker page's time ranges (s; the folded reports are kept FULCRUM_REPORT_RETENTION_S, 6 h
# by default: older load is in the Parquet history) and the most points a series is drawn with.
BROKER_RANGES_S = (900, 3600, 6 * 3600)


HISTORY_POINTS = 720


def _percent(usage: float, limit: float) -> float:
    return 100.0 * usage / limit if limit > 0 else 0.0


def broker_history(name: str, *, range_s: int, now: datetime | None = None) -> dict[str, Any]:
    """One broker's load over the last ``range_s`` seconds from the folded load reports, each
    series averaged into at most ``HISTORY_POINTS`` buckets: ``{"at" (ISO, UTC), "cpu",
    "bandwidthIn", "bandwidthOut" (percent of capacity), "msgRate" (msg/s), "throughput"
    (bytes/s)}``, and ``moves``: the audit rows that touched it in that time (``at``, ``action``,
    ``target``, ``source``, ``destination``, ``decision``, ``actor``).

    Raises:
        ConsoleError: 404 unknown broker; 400 a range not in ``BROKER_RANGES_S``.
    """
    if range_s not in BROKER_RANGES_S:
        raise ConsoleError(
            f"range must be one of {', '.join(str(r) for r in BROKER_RANGES_S)} seconds",
            field="range",
        )
    broker = Broker.objects.filter(name=name).first()
    if broker is None:
        raise ConsoleError(f"unknown broker {name!r}", status=404, field="broker")
    now = now or datetime.now(UTC)
    since = now - timedelta(seconds=range_s)
    rows = (
        LoadReport.objects.filter(broker=broker, reported_at__gte=since)
        .order_by("reported_at")
        .values_list(
            "reported_at",
            "cpu_usage",
            "cpu_limit",
            "bandwidth_in_usage_bytes_per_s",
            "bandwidth_in_limit_bytes_per_s",
            "bandwidth_out_usage_bytes_per_s",
            "bandwidth_out_limit_bytes_per_s",
            "msg_rate_in",
            "msg_rate_out",
            "msg_throughput_in_bytes_per_s",
            "msg_throughput_out_bytes_per_s",
        )
    )
    width = range_s / HISTORY_POINTS
    buckets: dict[int, list[tuple[float, ...]]] = {}
    for at, cpu, cpu_max, bw_in, bw_in_max, bw_out, bw_out_max, m_in, m_out, t_in, t_out in rows:
        key = int((at - since).total_seconds() // width)
        buckets.setdefault(key, []).append(
            (
                _percent(cpu, cpu_max),
                _percent(bw_in, bw_in_max),
                _percent(bw_out, bw_out_max),
                m_in + m_out,
                t_in + t_out,
            )
        )
    series: dict[str, list[Any]] = {
        k: [] for k in ("at", "cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput")
    }
    # Where reports stopped for longer than this (the console or the broker was down), a null
    # goes between the points, so the lines break instead of drawing load nobody measured.
    gap = max(3 * width, 30.0)
    previous = None
    for key in sorted(buckets):
        values = buckets[key]
        if previous is not None and (key - previous) * width > gap:
            series["at"].append(
                (since + timedelta(seconds=(previous + key + 1) * width / 2)).isoformat()
            )
            for name_ in ("cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput"):
                series[name_].append(None)
        previous = key
        series["at"].append((since + timedelta(seconds=(key + 0.5) * width)).isoformat())
        for i, name_ in enumerate(("cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput")):
            series[name_].append(round(sum(v[i] for v in values) / len(values), 3))
    moves = (
        AuditEvent.objects.filter(at__gte=since)
        .filter(Q(source=name) | Q(destination=name) | Q(target=name))
        .select_related("actor")
        .order_by("at")[:2000]
    )
    return {
        **series,
        "rangeS": range_s,
        "moves": [
            {
                "at": e.at.astimezone(UTC).isoformat(),
                "action": e.action,
                "target": e.target,
                "source": e.source,
                "destination": e.destination,
                "decision": e.decision_id,
                "actor": e.actor_name,
            }
            for e in moves
        ],
    }


def broker_quarantined(name: str) -> dict[str, Any] | None:
    """The readings of broker ``name`` that the latest shedding decision did not trust
    (``balancer.load_model.implausible``: over its limit, without a limit, not a number).

    Returns:
        ``{"decision": pk, "at": ISO (UTC), "readings": [{"resource", "usage", "limit",
        "reason"}]}``, or None when the latest decision trusted all of them (or there is none).
    """
    latest = Decision.objects.filter(kind=Decision.Kind.SHED).order_by("-at").first()
    if latest is None:
        return None
    shedding = (latest.details or {}).get("shedding") or {}
    stats = shedding.get("stats") if isinstance(shedding, dict) else None
    entries = stats.get("quarantined") if isinstance(stats, dict) else None
    readings = [e for e in entries or [] if isinstance(e, dict) and e.get("broker") == name]
    if not readings:
        return None
    return {
        "decision": latest.pk,
        "at": latest.at.astimezone(UTC).isoformat(),
        "readings": readings,
    }
