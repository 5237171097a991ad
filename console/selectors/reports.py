"""The Spark runs' results as the reports page shows them."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Final

from django.conf import settings

from console.errors import ConsoleError
from console.models import (
    ReportRun,
)

REPORT_RESULTS: Final = (
    "broker_hours",
    "cluster_minutes",
    "hot_bundles",
    "move_effects",
    "namespace_hours",
    "ranking",
)


def report_results(
    run: ReportRun, name: str, *, limit: int = 1000, newest: bool = False
) -> dict[str, Any]:
    """The rows of one result a run wrote (JSON lines under ``FULCRUM_REPORTS_DIR/run-<id>/
    <name>/``), in the job's order (oldest first for time series): the first ``limit``, or with
    ``newest`` the last ``limit``; ``{"rows", "truncated" (more rows were written)}``; none when
    the run wrote none.

    Raises:
        ConsoleError: 404 for a name that is not a result (``REPORT_RESULTS``); 400 for a limit
            outside 1–5,000.
    """
    if name not in REPORT_RESULTS:
        raise ConsoleError(
            f"no result {name!r}; results: {', '.join(REPORT_RESULTS)}", status=404, field="name"
        )
    if not 1 <= limit <= 5000:
        raise ConsoleError("the limit is 1 to 5,000 rows", field="limit")
    rows: collections.deque[dict[str, Any]] = collections.deque(maxlen=limit if newest else None)
    seen = 0
    directory = Path(settings.FULCRUM_REPORTS_DIR) / f"run-{run.pk}" / name
    for part in sorted(directory.glob("part-*.json")):
        with part.open() as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn line: left out
                seen += 1
                if not newest and len(rows) == limit:
                    return {"rows": list(rows), "truncated": True}
                rows.append(row)
    return {"rows": list(rows), "truncated": seen > len(rows)}


def report_runs_running() -> bool:
    """A Spark run over the history is running now."""
    return ReportRun.objects.filter(status=ReportRun.Status.RUNNING).exists()
