"""The Celery app; the beat schedule lives in settings (CELERY_BEAT_SCHEDULE)."""

import os
from typing import Any

from celery import Celery
from celery.signals import celeryd_init

from console.footprint import keep_out

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["console"])


@celeryd_init.connect
def _worker_footprint(**_: Any) -> None:
    """``celery worker`` keeps pandas out (``console.footprint``): about 40 MB it never uses.
    (``celeryd_init`` comes from the command alone, not from a worker started in a test.)"""
    keep_out("pandas", why="the worker writes Parquet with pyarrow alone; Spark runs apart")
