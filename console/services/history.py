"""The load history: Parquet tables under ``FULCRUM_HISTORY_DIR``, each partitioned by date
(``<table>/date=YYYY-MM-DD/``, Hive partitioning, read by Spark as a ``date`` column).

- ``brokers``: every load report (``BROKER_SCHEMA``), copied from the database;
- ``bundles``: every bundle's owner and short-term load at each recorded snapshot
  (``BUNDLE_SCHEMA``), and ``snapshots``: those snapshots whole (``SNAPSHOT_SCHEMA``, the
  strategy advisor's input); both copied from the tick's recording for the replay
  (``loadstore.replay_samples``, every ``FULCRUM_REPLAY_SAMPLE_S``);
- ``actions``: every audited action (``ACTION_SCHEMA``).

``history_flush`` appends what is new (once a minute: small files); ``history_compact`` merges a
partition's small files into files of at least ``COMPACT_ROWS`` rows and drops partitions older
than ``FULCRUM_HISTORY_RETENTION_DAYS``; it runs on the reports worker, one task at a time, so a
Spark job never reads a partition while it is compacted. Every file is written under a hidden
name and renamed into place. A flush that dies before its watermark is saved writes the same
batch again under the same name (named by its first row), replacing it; a compaction that dies
half way is finished or undone by the next one (its journal).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
import zlib
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from console import loadstore
from console.models import AuditEvent, LoadReport

log = logging.getLogger(__name__)

TABLES: Final = ("brokers", "bundles", "snapshots", "actions")
# A compacted file holds at least this many rows (Spark reads few large files much faster).
COMPACT_ROWS: Final = 50_000
WATERMARKS: Final = "_watermarks.json"  # Spark skips files starting with "_" or "."
COMPACT_JOURNAL: Final = "_compaction.json"

_AT = pa.timestamp("us", tz="UTC")
BROKER_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("reported_at", _AT),
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
BUNDLE_SCHEMA = pa.schema(
    [
        ("at", _AT),
        ("namespace", pa.string()),
        ("bundle", pa.string()),
        ("owner", pa.string()),
        ("msg_rate_in", pa.float64()),
        ("msg_rate_out", pa.float64()),
        ("msg_throughput_in_bytes_per_s", pa.float64()),
        ("msg_throughput_out_bytes_per_s", pa.float64()),
        ("topics", pa.int64()),
        ("date", pa.string()),
    ]
)
SNAPSHOT_SCHEMA = pa.schema(
    [
        ("at", _AT),
        ("brokers", pa.int64()),
        ("bundles", pa.int64()),
        ("document", pa.binary()),  # zlib(JSON of balancer.wire.snapshot_document)
        ("date", pa.string()),
    ]
)
ACTION_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("at", _AT),
        ("action", pa.string()),
        ("target", pa.string()),
        ("source", pa.string()),
        ("destination", pa.string()),
        ("actor", pa.string()),
        ("decision_id", pa.int64()),
        ("reason", pa.string()),
        ("date", pa.string()),
    ]
)


def _pct(usage: float, limit: float) -> float:
    return usage / limit * 100 if limit > 0 else 0.0


def _write(directory: Path, table_name: str, table: pa.Table, tag: str) -> None:
    """Write ``table``'s rows into ``<table_name>/date=<day>/part-<tag>.parquet``, one file per
    day, each written to a hidden name first and renamed into place (a reader never sees half a
    file). ``tag`` names the batch by its first row: a batch written again after a crash (its
    watermark not saved) replaces its file instead of adding its rows twice."""
    if not table.num_rows:
        return
    days = table.column("date").to_pylist()
    body = table.drop(["date"])
    for day in sorted(set(days)):
        rows = body.filter(pa.array([d == day for d in days]))
        folder = directory / table_name / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".part-{tag}-{uuid.uuid4().hex[:8]}.parquet"
        pq.write_table(rows, tmp)
        os.replace(tmp, folder / f"part-{tag}.parquet")


def _watermarks(directory: Path) -> dict[str, float]:
    try:
        marks = json.loads((directory / WATERMARKS).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in marks.items()} if isinstance(marks, dict) else {}


def _watermarks_put(directory: Path, marks: dict[str, float]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"{WATERMARKS}.{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps(marks))
    os.replace(tmp, directory / WATERMARKS)


def _day(at: datetime) -> str:
    return at.astimezone(UTC).date().isoformat()


def history_flush(*, directory: Path | None = None, batch: int = 50_000) -> int:
    """Append what is new to the history: load reports not yet exported (at most ``batch``,
    marked exported in the transaction that selected them), the snapshots recorded since the
    last flush with their bundles' rows, and the audited actions since the last one. Returns the
    rows written over every table."""
    directory = Path(directory or settings.FULCRUM_HISTORY_DIR)
    written = _brokers_flush(directory, batch)
    marks = _watermarks(directory)
    written += _snapshots_flush(directory, marks)
    written += _actions_flush(directory, marks, batch)
    return written


def _brokers_flush(directory: Path, batch: int) -> int:
    # Before the history had tables its load reports sat at the top: moved once.
    for old in directory.glob("date=*"):
        target = directory / "brokers" / old.name
        target.mkdir(parents=True, exist_ok=True)
        for part in old.glob("*.parquet"):
            os.replace(part, target / part.name)
        shutil.rmtree(old, ignore_errors=True)
    with transaction.atomic():
        # Tuples, not model instances: a minute of 500 reports/s is 30,000 rows.
        rows = list(
            LoadReport.objects.filter(exported=False)
            .order_by("id")
            .values_list(*_BROKER_FIELDS)[:batch]
        )
        if not rows:
            return 0
        c = dict(zip(_BROKER_FIELDS, zip(*rows, strict=True), strict=True))  # column -> values

        def pct(usage: str, limit: str) -> list[float]:
            return [_pct(u, lim) for u, lim in zip(c[usage], c[limit], strict=True)]

        columns = {
            "broker": c["broker__name"],
            "reported_at": c["reported_at"],
            "cpu_percent": pct("cpu_usage", "cpu_limit"),
            "memory_percent": pct("memory_usage_mib", "memory_limit_mib"),
            "bandwidth_in_percent": pct(
                "bandwidth_in_usage_bytes_per_s", "bandwidth_in_limit_bytes_per_s"
            ),
            "bandwidth_out_percent": pct(
                "bandwidth_out_usage_bytes_per_s", "bandwidth_out_limit_bytes_per_s"
            ),
            **{
                name: c[name]
                for name in (
                    "msg_rate_in",
                    "msg_rate_out",
                    "msg_throughput_in_bytes_per_s",
                    "msg_throughput_out_bytes_per_s",
                    "weighted_usage_fraction",
                )
            },
            "bundle_count": c["bundle_count"],
            "topic_count": c["topic_count"],
            "date": [_day(at) for at in c["reported_at"]],
        }
        table = pa.Table.from_pydict(columns, schema=BROKER_SCHEMA)
        _write(directory, "brokers", table, f"{rows[0][0]}")
        ids = [row[0] for row in rows]
        for start in range(0, len(ids), _UPDATE_CHUNK):  # SQLite takes 32,766 variables at most
            LoadReport.objects.filter(pk__in=ids[start : start + _UPDATE_CHUNK]).update(
                exported=True
            )
    return len(rows)


# The LoadReport columns a history row is made of (_brokers_flush reads them as columns).
_BROKER_FIELDS: Final = (
    "pk",
    "broker__name",
    "reported_at",
    "cpu_usage",
    "cpu_limit",
    "memory_usage_mib",
    "memory_limit_mib",
    "bandwidth_in_usage_bytes_per_s",
    "bandwidth_in_limit_bytes_per_s",
    "bandwidth_out_usage_bytes_per_s",
    "bandwidth_out_limit_bytes_per_s",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in_bytes_per_s",
    "msg_throughput_out_bytes_per_s",
    "weighted_usage_fraction",
    "bundle_count",
    "topic_count",
)
_UPDATE_CHUNK: Final = 5000


def snapshot_tables(documents: Sequence[dict[str, Any]]) -> tuple[pa.Table, pa.Table]:
    """The ``snapshots`` and ``bundles`` rows of recorded snapshot documents
    (``balancer.wire.snapshot_document``); a document without a number ``now`` is left out."""
    snapshots: dict[str, list[Any]] = {f.name: [] for f in SNAPSHOT_SCHEMA}
    bundles: dict[str, list[Any]] = {f.name: [] for f in BUNDLE_SCHEMA}
    for document in documents:
        now = document.get("now")
        if not isinstance(now, int | float):
            continue
        at = datetime.fromtimestamp(now, UTC)
        day = _day(at)
        rows = [b for b in document.get("bundles", ()) if isinstance(b, dict)]
        snapshots["at"].append(at)
        snapshots["brokers"].append(len(document.get("brokers", ())))
        snapshots["bundles"].append(len(rows))
        blob = json.dumps(document, separators=(",", ":")).encode()
        snapshots["document"].append(zlib.compress(blob, 6))
        snapshots["date"].append(day)
        for row in rows:
            name = str(row.get("name", ""))
            rates = row.get("shortTerm") or {}
            bundles["at"].append(at)
            bundles["namespace"].append(name.rsplit("/", 1)[0])
            bundles["bundle"].append(name)
            bundles["owner"].append(row.get("owner"))
            bundles["msg_rate_in"].append(float(rates.get("msgRateIn", 0.0)))
            bundles["msg_rate_out"].append(float(rates.get("msgRateOut", 0.0)))
            bundles["msg_throughput_in_bytes_per_s"].append(
                float(rates.get("msgThroughputIn", 0.0))
            )
            bundles["msg_throughput_out_bytes_per_s"].append(
                float(rates.get("msgThroughputOut", 0.0))
            )
            bundles["topics"].append(int(row.get("topics", 0)))
            bundles["date"].append(day)
    return (
        pa.Table.from_pydict(snapshots, schema=SNAPSHOT_SCHEMA),
        pa.Table.from_pydict(bundles, schema=BUNDLE_SCHEMA),
    )


def _snapshots_flush(directory: Path, marks: dict[str, float]) -> int:
    since = marks.get("snapshots")
    documents = [
        d
        for d in loadstore.replay_samples(since if since is not None else float("-inf"))
        if since is None or (isinstance(d.get("now"), int | float) and d["now"] > since)
    ]
    snapshots, bundles = snapshot_tables(documents)
    if not snapshots.num_rows:
        return 0
    tag = f"{int(min(d['now'] for d in documents))}"
    _write(directory, "bundles", bundles, tag)
    _write(directory, "snapshots", snapshots, tag)
    marks["snapshots"] = max(float(d["now"]) for d in documents if "now" in d)
    _watermarks_put(directory, marks)
    return int(snapshots.num_rows + bundles.num_rows)


# Audited actions are exported once this old: on PostgreSQL ids are handed out before commit, so
# a younger id may still commit below the watermark.
ACTIONS_LAG_S: Final = 60.0


def _actions_flush(directory: Path, marks: dict[str, float], batch: int) -> int:
    after = int(marks.get("actions", 0))
    settled = timezone.now() - timedelta(seconds=ACTIONS_LAG_S)
    events = list(
        AuditEvent.objects.filter(pk__gt=after, at__lt=settled)
        .select_related("actor")
        .order_by("id")[:batch]
    )
    if not events:
        return 0
    table = pa.Table.from_pylist(
        [
            {
                "id": e.pk,
                "at": e.at,
                "action": e.action,
                "target": e.target,
                "source": e.source,
                "destination": e.destination,
                "actor": e.actor_name,
                "decision_id": e.decision_id,
                "reason": e.reason,
                "date": _day(e.at),
            }
            for e in events
        ],
        schema=ACTION_SCHEMA,
    )
    _write(directory, "actions", table, f"{events[0].pk}")
    marks["actions"] = float(events[-1].pk)
    _watermarks_put(directory, marks)
    return len(events)


def history_compact(
    *,
    directory: Path | None = None,
    min_rows: int = COMPACT_ROWS,
    retention_days: float | None = None,
    today: date | None = None,
) -> dict[str, int]:
    """Merge each partition's files of fewer than ``min_rows`` rows into one, when together
    they reach ``min_rows`` or the day is over; drop partitions older than the retention
    (``FULCRUM_HISTORY_RETENTION_DAYS``; 0 keeps everything). Returns ``{"merged" (files),
    "written" (files), "dropped" (partitions)}``."""
    directory = Path(directory or settings.FULCRUM_HISTORY_DIR)
    retention = (
        settings.FULCRUM_HISTORY_RETENTION_DAYS if retention_days is None else retention_days
    )
    today = today or timezone.now().astimezone(UTC).date()
    oldest = today - timedelta(days=retention) if retention > 0 else None
    counts = {"merged": 0, "written": 0, "dropped": 0}
    for name in TABLES:
        for partition in sorted((directory / name).glob("date=*")):
            try:
                day = date.fromisoformat(partition.name.removeprefix("date="))
            except ValueError:
                continue
            if oldest is not None and day < oldest:
                shutil.rmtree(partition, ignore_errors=True)
                counts["dropped"] += 1
                continue
            _compaction_finish(partition)
            small = [
                (p, pq.ParquetFile(p).metadata.num_rows)
                for p in sorted(partition.glob("part-*.parquet"))
            ]
            small = [(p, n) for p, n in small if n < min_rows]
            total = sum(n for _, n in small)
            if len(small) < 2 or (total < min_rows and day >= today):
                continue
            table = pa.concat_tables([pq.read_table(p, partitioning=None) for p, _ in small])
            name = f"part-compact-{uuid.uuid4().hex[:8]}.parquet"
            tmp = partition / f".{name}"
            pq.write_table(table, tmp, row_group_size=1_000_000)
            # The journal lets a compaction that died half way finish: the merged file in place,
            # the files it replaces deleted (never both kept, never neither).
            journal = {"merged": name, "inputs": [p.name for p, _ in small]}
            (partition / COMPACT_JOURNAL).write_text(json.dumps(journal))
            os.replace(tmp, partition / name)
            _compaction_finish(partition)
            counts["merged"] += len(small)
            counts["written"] += 1
    return counts


def _compaction_finish(partition: Path) -> None:
    """Finish or undo a compaction of ``partition`` that a crash interrupted: with its merged
    file in place the replaced files go; without it, the half-written merge goes."""
    journal_path = partition / COMPACT_JOURNAL
    try:
        journal = json.loads(journal_path.read_text())
    except (OSError, ValueError):
        journal = None
    if isinstance(journal, dict) and (partition / str(journal.get("merged"))).exists():
        for name in journal.get("inputs", []):
            (partition / str(name)).unlink(missing_ok=True)
    for leftover in partition.glob(".part-compact-*"):
        leftover.unlink(missing_ok=True)
    journal_path.unlink(missing_ok=True)


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
