"""The heaviest queries the pages and the tick run at the size of a production cluster use an
index on PostgreSQL (issue 26, item 4): the plan ``EXPLAIN`` gives for each, on tables filled
and analysed as a long-lived cluster's (the audit much larger than the rest), has no
sequential scan of the big tables. PostgreSQL only: SQLite's planner is another one
(skipped there, saying so)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from console import selectors
from console.models import (
    AuditEvent,
    Broker,
    Bundle,
    Cluster,
    Decision,
    LoadReport,
    Namespace,
    PulsarConnection,
    PulsarMove,
    Tenant,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
BROKERS = 50
NAMESPACES = 50
BUNDLES = 40  # per namespace
AUDIT_ROWS = 60_000
BIG = ("console_auditevent", "console_bundle", "console_loadreport", "console_pulsarmove")


@pytest.fixture
def cluster_at_size():
    if connection.vendor != "postgresql":
        pytest.skip("query plans are PostgreSQL's: this runs in make test's PostgreSQL pass")
    cluster = Cluster.objects.create(name="c")
    brokers = Broker.objects.bulk_create(
        [Broker(cluster=cluster, name=f"10.0.0.{i}:8080") for i in range(BROKERS)]
    )
    tenant = Tenant.objects.create(cluster=cluster, name="t")
    namespaces = Namespace.objects.bulk_create(
        [Namespace(tenant=tenant, name=f"t/ns-{i:03d}") for i in range(NAMESPACES)]
    )
    step = 2**32 // BUNDLES
    Bundle.objects.bulk_create(
        [
            Bundle(
                namespace=ns,
                lower=j * step,
                upper=(j + 1) * step if j < BUNDLES - 1 else 2**32 - 1,
                owner=brokers[(i * BUNDLES + j) % BROKERS],
            )
            for i, ns in enumerate(namespaces)
            for j in range(BUNDLES)
        ]
    )
    actions = [AuditEvent.Action.OBSERVED] * 18 + [AuditEvent.Action.UNLOAD] + ["split"]
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                at=NOW - timedelta(seconds=40 * i),
                action=actions[i % len(actions)],
                target=f"t/ns-{i % NAMESPACES:03d}/0x00000000_0x40000000",
                source=brokers[i % BROKERS].name,
                destination=brokers[(i + 7) % BROKERS].name,
                reason="moved (observed)",
                load_after={} if i > 10 else None,
            )
            for i in range(AUDIT_ROWS)
        ],
        batch_size=10_000,
    )
    LoadReport.objects.bulk_create(
        [
            LoadReport(
                broker=brokers[i % BROKERS],
                reported_at=NOW - timedelta(seconds=10 * i),
                cpu_usage=50.0,
                cpu_limit=100.0,
                memory_usage_mib=1.0,
                memory_limit_mib=2.0,
                bandwidth_in_usage_bytes_per_s=1.0,
                bandwidth_in_limit_bytes_per_s=2.0,
                bandwidth_out_usage_bytes_per_s=1.0,
                bandwidth_out_limit_bytes_per_s=2.0,
                msg_rate_in=1.0,
                msg_rate_out=1.0,
                msg_throughput_in_bytes_per_s=1.0,
                msg_throughput_out_bytes_per_s=1.0,
                bundle_count=1,
                topic_count=1,
                weighted_usage_fraction=0.5,
                exported=i > 100,
            )
            for i in range(20_000)
        ],
        batch_size=10_000,
    )
    pulsar = PulsarConnection.objects.create(name="p", admin_url="http://x")
    PulsarMove.objects.bulk_create(
        [
            PulsarMove(
                connection=pulsar,
                kind=PulsarMove.Kind.UNLOAD,
                bundle=f"t/ns-{i % NAMESPACES:03d}/{i}",
                source=brokers[0].name,
                created_at=NOW - timedelta(seconds=i),
                finished_at=NOW - timedelta(seconds=i - 5) if i > 20 else None,
                state=PulsarMove.State.DONE if i > 20 else PulsarMove.State.QUEUED,
                outcome=PulsarMove.Outcome.AS_PLANNED if i > 20 else "",
            )
            for i in range(20_000)
        ],
        batch_size=10_000,
    )
    Decision.objects.bulk_create(
        [
            Decision(
                at=NOW - timedelta(seconds=30 * i),
                kind="shed",
                strategy="s",
                reason="r",
                summary="",
            )
            for i in range(5_000)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return brokers, namespaces


def _plan(queryset) -> str:
    return queryset.explain()


def _seq_scans(plan: str) -> list[str]:
    return [t for t in BIG if f"Seq Scan on {t}" in plan]


def test_the_heaviest_queries_at_size_use_an_index(cluster_at_size):
    brokers, namespaces = cluster_at_size
    broker, namespace = brokers[3], namespaces[7]
    queries = {
        "audit, newest page": selectors.audit_events({})[:100],
        "audit by action": selectors.audit_events({"action": "unload"})[:100],
        "audit by broker": selectors.audit_events({"broker": broker.name})[:100],
        "audit by namespace": selectors.audit_events({"namespace": namespace.name})[:100],
        "audit, count by action": selectors.audit_events({"action": "split"}).values("pk")[:1],
        "tick: rows without after figures": AuditEvent.objects.filter(
            load_after__isnull=True, at__lt=NOW
        ).values_list("pk", "load_before"),
        "broker page: its bundles": Bundle.objects.filter(owner=broker),
        "namespace page: its bundles": Bundle.objects.filter(namespace=namespace).order_by("lower"),
        "broker history": LoadReport.objects.filter(
            broker=broker, reported_at__gte=NOW - timedelta(hours=1)
        ).order_by("-reported_at"),
        "history flush: not exported": LoadReport.objects.filter(exported=False),
        "moves in flight": PulsarMove.objects.filter(state__in=PulsarMove.IN_FLIGHT),
        "moves finished lately": PulsarMove.objects.filter(
            finished_at__gte=NOW - timedelta(minutes=5)
        ),
        "decisions, newest": Decision.objects.order_by("-at")[:20],
    }
    scanned = {}
    for name, queryset in queries.items():
        plan = _plan(queryset)
        if _seq_scans(plan):
            scanned[name] = plan
    assert not scanned, "\n\n".join(f"{name}:\n{plan}" for name, plan in scanned.items())
