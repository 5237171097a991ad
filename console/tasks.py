"""Celery entry points: a few lines each; they call services."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from celery import shared_task
from django.conf import settings

from console import leases
from console.footprint import heap_trim
from console.leases import lease_kept
from console.reports.submit import report_run_execute
from console.selectors import report_runs_running
from console.services import shedding_tick_run
from console.services.history import history_compact as history_compact_service
from console.services.history import history_flush as history_flush_service
from console.services.history import load_reports_prune
from console.services.ingest import load_reports_fold as load_reports_fold_service
from console.services.optimality import optimality_measure as optimality_measure_service
from console.services.pulsar import pulsar_sync_run
from console.services.reports import report_runs_reap as report_runs_reap_service

T = TypeVar("T")


@shared_task(ignore_result=True)
def shedding_tick() -> int | None:
    """One shedding cycle (skipped when another worker holds the tick lock)."""
    decision = shedding_tick_run()
    return decision.pk if decision else None


# The periodic jobs' leases (s), by the task they guard: each at most two of its beat
# intervals (fold every 5 s; flush every FULCRUM_HISTORY_FLUSH_S, 60 s by default; compaction
# every FULCRUM_HISTORY_COMPACT_S, 3,600 s), so that a worker killed mid-job costs at most one
# interval of it (tests/console/test_leases.py holds them to it, tests/test_job_kills.py kills
# a worker mid-job). Renewed while the job runs, so a long flush keeps its lease.
JOB_LEASES_S: dict[str, float] = {
    "console.tasks.load_reports_fold": 9.0,
    "console.tasks.history_flush": min(60.0, 2 * settings.FULCRUM_HISTORY_FLUSH_S),
    "console.tasks.history_compact": min(120.0, 2 * settings.FULCRUM_HISTORY_COMPACT_S),
}


def _alone(name: str, ttl_s: float, call: Callable[[], T]) -> T | None:
    """``call`` under the lease ``name``, kept while it runs (``ttl_s``: how long a worker killed
    mid-call keeps the others out), so that one runs at a time whatever the worker's pool and
    count; None (skipped) when another holds it."""
    with lease_kept(name, ttl_s) as lease:
        return call() if lease.held else None


@shared_task(ignore_result=True)
def load_reports_fold() -> int | None:
    """Fold the live store's new load reports into LoadReport rows (the time series); one fold
    at a time (a stream read twice would be folded twice)."""
    lease = JOB_LEASES_S["console.tasks.load_reports_fold"]
    return _alone(leases.FOLD, lease, load_reports_fold_service)


@shared_task(ignore_result=True)
def history_flush() -> int | None:
    """Copy new load reports, snapshots and actions to the Parquet history, then prune old
    exported load reports from the database; one flush at a time (rows never written twice)."""

    def flush() -> int:
        try:
            written = history_flush_service()
            load_reports_prune()
        finally:
            heap_trim()
        return written

    return _alone(leases.FLUSH, JOB_LEASES_S["console.tasks.history_flush"], flush)


@shared_task(ignore_result=True)
def history_compact() -> dict[str, int] | None:
    """Merge the history's small Parquet files, drop partitions past the retention; never while
    a Spark run reads the history (``leases.COMPACT``: a run waits for it, it skips a run)."""

    def compact() -> dict[str, int] | None:
        if report_runs_running():
            return None
        try:
            return history_compact_service()
        finally:
            heap_trim()

    return _alone(leases.COMPACT, JOB_LEASES_S["console.tasks.history_compact"], compact)


@shared_task(ignore_result=True)
def report_run(run_id: int) -> str:
    """Run one Spark job (a report or the strategy advisor) over the history as flushed (at
    most a flush interval old: the shedding worker alone flushes, so rows are never written
    twice)."""
    return report_run_execute(run_id).status


@shared_task(ignore_result=True)
def pulsar_sync() -> dict | None:
    """One pass of the attached Pulsar cluster (``services.pulsar.pulsar_sync_run``): send the
    queued moves, observe, verify. Returns its counts (None when no cluster is attached)."""
    summary = pulsar_sync_run()
    if summary is None:
        return None
    keys = ("brokers", "bundles", "owned", "unowned", "reports", "sent", "verified")
    return {k: summary.get(k) for k in keys} | {
        "refused": len(summary.get("refused", [])),
        "errors": len(summary.get("errors", [])),
    }


@shared_task(ignore_result=True)
def report_runs_reap() -> int:
    """Mark failed the report runs a dead worker left queued or running."""
    return report_runs_reap_service()


@shared_task(ignore_result=True)
def optimality_measure() -> float | None:
    """The optimality gauge: max/mean now against the best assignment of the same bundles."""
    measured = optimality_measure_service()
    return measured["ratio"] if measured else None
