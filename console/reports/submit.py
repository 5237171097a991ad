"""Build the spark-submit command, run it, record the run and ingest its results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
from django.conf import settings
from django.utils import timezone

from console import realtime
from console.models import ReportRun

JOB = Path(__file__).with_name("jobs.py")


def spark_submit_command(run: ReportRun, history_dir: Path, output_dir: Path) -> list[str]:
    """The spark-submit arguments for one run (master from settings, 2-core friendly)."""
    submit = settings.SPARK_SUBMIT
    if submit == "spark-submit":
        submit = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    return [
        submit,
        "--master",
        run.master,
        "--name",
        f"fulcrum-report-{run.pk}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.memory=512m",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        str(JOB),
        "--history",
        str(history_dir),
        "--output",
        str(output_dir),
    ]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def _read_json_lines(directory: Path) -> list[dict[str, object]]:
    rows = []
    for part in sorted(directory.glob("part-*.json")):
        rows += [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
    return rows


def report_run_execute(run_id: int) -> ReportRun:
    """Run the Spark job of a queued ReportRun and store its status, log tail and results."""
    run = ReportRun.objects.get(pk=run_id)
    history_dir = Path(settings.FULCRUM_HISTORY_DIR)
    output_dir = Path(settings.FULCRUM_REPORTS_DIR) / f"run-{run.pk}"
    run.status, run.started_at = ReportRun.Status.RUNNING, timezone.now()
    run.save(update_fields=["status", "started_at"])
    realtime.publish(realtime.REPORT_CHANGED, {"id": run.pk, "status": run.status})
    if not any(history_dir.glob("date=*/*.parquet")):
        return _finish(run, ReportRun.Status.FAILED, "no load history yet: nothing to report on")
    proc = subprocess.run(
        spark_submit_command(run, history_dir, output_dir),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=1800,
        check=False,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    if proc.returncode != 0:
        return _finish(run, ReportRun.Status.FAILED, tail)
    run.broker_hours = _read_json_lines(output_dir / "broker_hours")
    run.cluster_hours = _read_json_lines(output_dir / "cluster_hours")
    return _finish(run, ReportRun.Status.SUCCEEDED, tail)


def _finish(run: ReportRun, status: str, log_tail: str) -> ReportRun:
    run.status, run.finished_at, run.log_tail = status, timezone.now(), log_tail
    run.save()
    realtime.publish(realtime.REPORT_CHANGED, {"id": run.pk, "status": run.status})
    return run
