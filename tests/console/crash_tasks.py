"""A task that kills its worker the first time it runs (tests/console/test_live_path.py)."""

import os
from pathlib import Path

from console.celery import app


@app.task
def crash_once(marker: str) -> str:
    path = Path(marker)
    if not path.exists():
        path.write_text("crashed")
        os._exit(1)  # the worker dies mid-task: no acknowledgement is sent
    path.write_text("ran again")
    return "ran again"
