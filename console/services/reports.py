"""Report runs: queue a Spark job on the report workers' own queue, audited; at most one run is
queued or running at a time, and runs a dead worker left behind are marked failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console import leases, realtime
from console.access import actor_check
from console.celery import app
from console.errors import ConsoleError
from console.leases import lease_held
from console.models import AuditEvent, ReportRun

REPORT_TASK = "console.tasks.report_run"
# A run may wait this long for a report worker before it is declared lost (no other run can be
# ahead of it: one at a time).
QUEUED_TIMEOUT_S = 300.0
# spark-submit's own timeout (console.reports.submit.TIMEOUT_S) plus a margin.
RUNNING_TIMEOUT_S = 1800.0 + 120.0
# A running run's sign of life: a lease its worker keeps while the job runs (renewed every
# third of it, ``console.reports.submit``). A run whose lease lapsed has lost its worker (killed
# or restarted mid-run: the task is not taken again once running) and is marked failed by the
# next reap (every 60 s), instead of blocking its kind and the compaction for RUNNING_TIMEOUT_S.
REPORT_RUN_LEASE_S: float = settings.FULCRUM_REPORT_RUN_LEASE_S  # 60 s by default


def report_runs_reap(*, now: Any = None) -> int:
    """Mark failed, with the reason, every run left queued or running past its time (a worker
    killed or never started); returns how many."""
    now = now or timezone.now()
    # A run waits behind the one running (the reports worker runs one task at a time): only
    # while none runs is a long wait a sign that no worker is there.
    running_now = ReportRun.objects.filter(
        status=ReportRun.Status.RUNNING, started_at__gte=now - timedelta(seconds=RUNNING_TIMEOUT_S)
    ).exists()
    waiting = ReportRun.objects.filter(
        status=ReportRun.Status.QUEUED, created_at__lt=now - timedelta(seconds=QUEUED_TIMEOUT_S)
    )
    stuck = ReportRun.objects.filter(
        status=ReportRun.Status.RUNNING, started_at__lt=now - timedelta(seconds=RUNNING_TIMEOUT_S)
    )
    # Read first: an UPDATE waits for SQLite's write lock (behind the fold) even when it
    # matches nothing, and this runs every minute.
    queued = running = 0
    if not running_now and waiting.exists():
        queued = waiting.update(
            status=ReportRun.Status.FAILED,
            finished_at=now,
            reason=f"no report worker took the run within {QUEUED_TIMEOUT_S:.0f} s "
            "(is the 'reports' worker running?)",
        )
    if stuck.exists():
        running = stuck.update(
            status=ReportRun.Status.FAILED,
            finished_at=now,
            reason=f"the run did not finish within {RUNNING_TIMEOUT_S:.0f} s: its worker died",
        )
    silent = [
        pk
        for pk in ReportRun.objects.filter(
            status=ReportRun.Status.RUNNING,
            started_at__lt=now - timedelta(seconds=REPORT_RUN_LEASE_S),
        ).values_list("pk", flat=True)
        if not lease_held(leases.report_run(pk), now)
    ]
    if silent:
        running += ReportRun.objects.filter(pk__in=silent, status=ReportRun.Status.RUNNING).update(
            status=ReportRun.Status.FAILED,
            finished_at=now,
            reason=f"its worker stopped mid-run (killed or restarted): no sign of life for "
            f"{REPORT_RUN_LEASE_S:.0f} s; request the run again",
        )
    leases.report_run_leases_forget()
    return queued + running


KIND_WORDS = {
    ReportRun.Kind.REPORT: "a historical load report",
    ReportRun.Kind.ADVISOR: "the strategy advisor",
}


def report_run_request(*, actor: Any, kind: str = ReportRun.Kind.REPORT) -> ReportRun:
    """Record a queued run of ``kind`` (report or advisor) and send the task to the ``reports``
    queue once the row is committed.

    Raises:
        ConsoleError: 400 for an unknown kind; 409 while a run of the same kind is queued or
            running (one run of a kind at a time).
    """
    actor_check(actor)
    if kind not in ReportRun.Kind.values:
        raise ConsoleError(
            f"unknown run kind {kind!r}; one of {', '.join(ReportRun.Kind.values)}", field="kind"
        )
    report_runs_reap()
    with transaction.atomic():
        busy = (
            ReportRun.objects.select_for_update()
            .filter(kind=kind, status__in=[ReportRun.Status.QUEUED, ReportRun.Status.RUNNING])
            .first()
        )
        if busy is not None:
            raise ConsoleError(
                f"{kind} run {busy.pk} is {busy.status}; one {kind} run at a time",
                status=409,
                field="kind",
            )
        run = ReportRun.objects.create(requested_by=actor, master=settings.SPARK_MASTER, kind=kind)
        _audit(run, actor, f"operator started {KIND_WORDS[ReportRun.Kind(kind)]}")
        # By name, on the route of settings.CELERY_TASK_ROUTES: services never import tasks.
        transaction.on_commit(lambda: app.send_task(REPORT_TASK, args=[run.pk]))
    return run


def report_run_cancel(run_id: int, *, actor: Any) -> ReportRun:
    """Cancel a run: a queued one at once, a running one as soon as its worker sees it (within
    a second: the job's processes are stopped). Audited.

    Raises:
        ConsoleError: 404 for an unknown run; 409 for a run that already ended.
    """
    actor_check(actor)
    with transaction.atomic():
        run = ReportRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            raise ConsoleError(f"no run {run_id}", status=404, field="run")
        if run.status not in (ReportRun.Status.QUEUED, ReportRun.Status.RUNNING):
            raise ConsoleError(f"run {run.pk} already {run.status}", status=409, field="run")
        if run.status == ReportRun.Status.QUEUED:
            run.status, run.finished_at = ReportRun.Status.CANCELLED, timezone.now()
            run.reason = "cancelled by an operator before it started"
        run.cancel_requested = True
        run.save()
        _audit(run, actor, f"operator cancelled the {run.kind} run")
    realtime.publish(
        realtime.REPORT_CHANGED, {"id": run.pk, "kind": run.kind, "status": run.status}
    )
    return run


def _audit(run: ReportRun, actor: Any, reason: str) -> None:
    AuditEvent.objects.create(
        at=timezone.now(),
        actor=actor,
        action=AuditEvent.Action.REPORT,
        target=f"{run.kind} run {run.pk}",
        reason=reason,
    )
