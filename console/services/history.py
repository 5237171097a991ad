"""The load history: load reports copied from the database to Parquet, partitioned by date."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from console.models import LoadReport

HISTORY_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("reported_at", pa.timestamp("us", tz="UTC")),
        ("cpu_percent", pa.float64()),
        ("memory_percent", pa.float64()),
        ("bandwidth_in_percent", pa.float64()),
        ("bandwidth_out_percent", pa.float64()),
        ("msg_rate_in", pa.float64()),
        ("msg_rate_out", pa.float64()),
        ("msg_throughput_in_bytes_per_s", pa.float64()),
        ("msg_throughput_out_bytes_per_s", pa.float64()),
        ("weighted_usage_fraction", pa.float64()),
        ("bundle_count", pa.int64()),
        ("topic_count", pa.int64()),
        ("date", pa.string()),
    ]
)


def _pct(usage: float, limit: float) -> float:
    return usage / limit * 100 if limit > 0 else 0.0


def history_flush(*, directory: Path | None = None, batch: int = 50_000) -> int:
    """Append the load reports not yet exported to the Parquet history; returns rows written.

    Files land in ``<dir>/date=YYYY-MM-DD/`` (Hive partitioning, read by Spark as a ``date``
    column). Rows are marked exported in the same transaction that selected them.
    """
    directory = Path(directory or settings.FULCRUM_HISTORY_DIR)
    with transaction.atomic():
        rows = list(
            LoadReport.objects.filter(exported=False)
            .select_related("broker")
            .order_by("id")[:batch]
        )
        if not rows:
            return 0
        table = pa.Table.from_pylist(
            [
                {
                    "broker": r.broker.name,
                    "reported_at": r.reported_at,
                    "cpu_percent": _pct(r.cpu_usage, r.cpu_limit),
                    "memory_percent": _pct(r.memory_usage_mib, r.memory_limit_mib),
                    "bandwidth_in_percent": _pct(
                        r.bandwidth_in_usage_bytes_per_s, r.bandwidth_in_limit_bytes_per_s
                    ),
                    "bandwidth_out_percent": _pct(
                        r.bandwidth_out_usage_bytes_per_s, r.bandwidth_out_limit_bytes_per_s
                    ),
                    "msg_rate_in": r.msg_rate_in,
                    "msg_rate_out": r.msg_rate_out,
                    "msg_throughput_in_bytes_per_s": r.msg_throughput_in_bytes_per_s,
                    "msg_throughput_out_bytes_per_s": r.msg_throughput_out_bytes_per_s,
                    "weighted_usage_fraction": r.weighted_usage_fraction,
                    "bundle_count": r.bundle_count,
                    "topic_count": r.topic_count,
                    "date": r.reported_at.date().isoformat(),
                }
                for r in rows
            ],
            schema=HISTORY_SCHEMA,
        )
        pq.write_to_dataset(
            table,
            root_path=str(directory),
            partition_cols=["date"],
            basename_template=f"part-{rows[0].pk}-{rows[-1].pk}-{uuid.uuid4().hex[:8]}-{{i}}.parquet",
        )
        LoadReport.objects.filter(pk__in=[r.pk for r in rows]).update(exported=True)
    return len(rows)


def load_reports_prune(*, retention_s: float | None = None) -> int:
    """Delete exported load reports older than the retention (the Parquet history keeps them);
    a broker's newest report is always kept. Returns the number deleted."""
    retention_s = settings.FULCRUM_REPORT_RETENTION_S if retention_s is None else retention_s
    cutoff = timezone.now() - timedelta(seconds=retention_s)
    latest = LoadReport.objects.values("broker").annotate(newest=Max("pk")).values("newest")
    deleted, _ = (
        LoadReport.objects.filter(Q(exported=True) & Q(reported_at__lt=cutoff))
        .exclude(pk__in=latest)
        .delete()
    )
    return deleted
