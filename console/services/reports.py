"""Report runs: queue a Spark job, audited."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.models import AuditEvent, ReportRun


def report_run_request(*, actor: Any) -> ReportRun:
    """Record a queued run and enqueue the Celery task once the row is committed."""
    from console.tasks import report_run  # tasks import services; import late to avoid a cycle

    with transaction.atomic():
        run = ReportRun.objects.create(requested_by=actor, master=settings.SPARK_MASTER)
        AuditEvent.objects.create(
            at=timezone.now(),
            actor=actor,
            action=AuditEvent.Action.REPORT,
            target=f"report run {run.pk}",
            reason="operator started a historical load report",
        )
        report_run.delay_on_commit(run.pk)
    return run
