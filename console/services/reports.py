"""Report runs: queue a Spark job on the report workers' own queue, audited; at most one run is
queued or running at a time, and runs a dead worker left behind are marked failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.access import actor_check
from console.models import AuditEvent, ReportRun
from console.services.errors import ConsoleError

REPORT_TASK = "console.tasks.report_run"
# A run may wait this long for a report worker before it is declared lost (no other run can be
# ahead of it: one at a time).
QUEUED_TIMEOUT_S = 300.0
# spark-submit's own timeout (console.reports.submit) plus a margin.
RUNNING_TIMEOUT_S = 1800.0 + 120.0


def report_runs_reap(*, now: Any = None) -> int:
    """Mark failed, with the reason, every run left queued or running past its time (a worker
    killed or never started); returns how many."""
    now = now or timezone.now()
    queued = ReportRun.objects.filter(
        status=ReportRun.Status.QUEUED, created_at__lt=now - timedelta(seconds=QUEUED_TIMEOUT_S)
    ).update(
        status=ReportRun.Status.FAILED,
        finished_at=now,
        log_tail=f"no report worker took the run within {QUEUED_TIMEOUT_S:.0f} s "
        "(is the 'reports' worker running?)",
    )
    running = ReportRun.objects.filter(
        status=ReportRun.Status.RUNNING, started_at__lt=now - timedelta(seconds=RUNNING_TIMEOUT_S)
    ).update(
        status=ReportRun.Status.FAILED,
        finished_at=now,
        log_tail=f"the run did not finish within {RUNNING_TIMEOUT_S:.0f} s: its worker died",
    )
    return queued + running


def report_run_request(*, actor: Any) -> ReportRun:
    """Record a queued run and send the task to the ``reports`` queue once the row is committed.

    Raises:
        ConsoleError: 409 while another run is queued or running.
    """
    actor_check(actor)
    from console.celery import app

    report_runs_reap()
    with transaction.atomic():
        busy = (
            ReportRun.objects.select_for_update()
            .filter(status__in=[ReportRun.Status.QUEUED, ReportRun.Status.RUNNING])
            .first()
        )
        if busy is not None:
            raise ConsoleError(
                f"report run {busy.pk} is {busy.status}; one run at a time",
                status=409,
                field="run",
            )
        run = ReportRun.objects.create(requested_by=actor, master=settings.SPARK_MASTER)
        AuditEvent.objects.create(
            at=timezone.now(),
            actor=actor,
            action=AuditEvent.Action.REPORT,
            target=f"report run {run.pk}",
            reason="operator started a historical load report",
        )
        # By name, on the route of settings.CELERY_TASK_ROUTES: services never import tasks.
        transaction.on_commit(lambda: app.send_task(REPORT_TASK, args=[run.pk]))
    return run
