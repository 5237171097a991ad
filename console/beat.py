"""Celery beat without Django (``celery -A console.beat beat``): it only sends tasks by name on
schedule, so it reads the schedule, the routes and the broker from ``console.settings`` as a
plain module and never sets Django up or imports the tasks (about 50 MB instead of the
worker's 150-250 MB). The worker runs them (``console.celery``)."""

from __future__ import annotations

from celery import Celery

from console import settings  # plain Python: no Django app is loaded

# No Django fix-up: it would set Django up (and load every app) in this process.
app = Celery("console", set_as_current=True, fixups=[])
app.conf.update(
    broker_url=settings.CELERY_BROKER_URL,
    broker_connection_retry_on_startup=True,
    broker_transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
    beat_schedule=settings.CELERY_BEAT_SCHEDULE,
    task_routes=settings.CELERY_TASK_ROUTES,
    timezone="UTC",
)
