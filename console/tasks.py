"""Celery entry points: a few lines each; they call services."""

from __future__ import annotations

from celery import shared_task

from console.reports.submit import report_run_execute
from console.services import shedding_tick_run
from console.services.history import history_compact as history_compact_service
from console.services.history import history_flush as history_flush_service
from console.services.history import load_reports_prune
from console.services.ingest import load_reports_fold as load_reports_fold_service
from console.services.optimality import optimality_measure as optimality_measure_service
from console.services.pulsar import pulsar_sync_run
from console.services.reports import report_runs_reap as report_runs_reap_service


@shared_task(ignore_result=True)
def shedding_tick() -> int | None:
    """One shedding cycle (skipped when another worker holds the tick lock)."""
    decision = shedding_tick_run()
    return decision.pk if decision else None


@shared_task(ignore_result=True)
def load_reports_fold() -> int:
    """Fold the live store's new load reports into LoadReport rows (the time series)."""
    return load_reports_fold_service()


@shared_task(ignore_result=True)
def history_flush() -> int:
    """Copy new load reports, snapshots and actions to the Parquet history, then prune old
    exported load reports from the database."""
    written = history_flush_service()
    load_reports_prune()
    return written


@shared_task(ignore_result=True)
def history_compact() -> dict[str, int]:
    """Merge the history's small Parquet files, drop partitions past the retention (on the
    reports queue, between Spark runs)."""
    return history_compact_service()


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
