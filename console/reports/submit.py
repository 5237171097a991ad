"""Run a ReportRun's Spark job with spark-submit: its progress read live from the job's output,
cancel on the operator's word, the reason of a failure, the results left as files of the run."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections import deque
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.utils import timezone

from console import leases, metrics, realtime
from console.leases import lease_held, lease_kept
from console.models import ReportRun
from console.selectors import pulsar_config_get
from console.services.advisor import advisor_spec
from console.services.reports import REPORT_RUN_LEASE_S

JOBS: Final = {
    ReportRun.Kind.REPORT: Path(__file__).with_name("jobs.py"),
    ReportRun.Kind.ADVISOR: Path(__file__).with_name("advisor.py"),
}
# spark-submit may run this long (s) before it is stopped and the run failed.
# How long a run waits for a compaction of the history under way to finish (seconds).
COMPACT_WAIT_S = 600
TIMEOUT_S: Final = 1800.0
PROGRESS: Final = re.compile(r"^FULCRUM-PROGRESS (\d+)/(\d+) (.*)$")
# The lines that say why a job failed, last one wins: ours ("Error: ..."), a Python or a JVM
# exception ("...Error: ...", "org.apache.spark.SparkException: ...").
FAILURE: Final = re.compile(
    r"^Error: (?P<plain>.*)$|(?P<exception>\b[A-Za-z_][\w.]*(?:Error|Exception): .*)$"
)


def run_dir(run: ReportRun) -> Path:
    """Where a run's results are written: ``FULCRUM_REPORTS_DIR/run-<id>``."""
    return Path(settings.FULCRUM_REPORTS_DIR) / f"run-{run.pk}"


def _balancer_zip(directory: Path) -> Path:
    """The balancer package zipped for the executors (``--py-files``): a cluster's workers
    replay the cycle without Fulcrum installed."""
    root = Path(__file__).resolve().parents[2]
    target = directory / "balancer.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((root / "balancer").rglob("*.py")):
            archive.write(path, path.relative_to(root))
    return target


def spark_submit_command(
    run: ReportRun, history_dir: Path, output_dir: Path, arguments: list[str] | None = None
) -> list[str]:
    """The spark-submit arguments for one run: the configured master, 2-core friendly, the
    balancer package for the executors, then the job's own arguments."""
    submit = settings.SPARK_SUBMIT
    if submit == "spark-submit":
        submit = str(_pyspark_home() / "bin" / "spark-submit")
    return [
        submit,
        "--master",
        run.master,
        "--name",
        f"fulcrum-{run.kind}-{run.pk}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.driver.memory={settings.SPARK_DRIVER_MEMORY}",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.sql.execution.arrow.pyspark.enabled=true",
        "--py-files",
        str(output_dir / "balancer.zip"),
        str(JOBS[ReportRun.Kind(run.kind)]),
        "--history",
        str(history_dir),
        "--output",
        str(output_dir),
        *(arguments or []),
    ]


def _pyspark_home() -> Path:
    """The installed PySpark's folder (its spark-submit and jars), found without importing it:
    the console's processes never load PySpark (its import costs about 20 MB each)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("PySpark is not installed")
    return Path(spec.origin).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_HOME", str(_pyspark_home()))
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def failure_reason(lines: list[str], code: int | None) -> str:
    """Why a job failed, in one line: its last error line, else its exit code."""
    for line in reversed(lines):
        found = FAILURE.search(line.strip())
        if found:
            return found["plain"] or found["exception"]
    return f"spark-submit exited with code {code}"


def _arguments(run: ReportRun, output_dir: Path) -> list[str]:
    """The job's own arguments: the report's thresholds, the advisor's candidates file."""
    if run.kind == ReportRun.Kind.ADVISOR:
        path = output_dir / "candidates.json"
        path.write_text(json.dumps(advisor_spec()))
        return ["--candidates", str(path)]
    pulsar = pulsar_config_get()
    options = {
        "maxMsgRate": pulsar.bundle_max_msg_rate,
        "maxBandwidthBytes": pulsar.bundle_max_bandwidth_bytes_per_s,
        "maxTopics": pulsar.bundle_max_topics,
    }
    return ["--options", json.dumps(options)]


def _missing_history(run: ReportRun, history_dir: Path) -> str | None:
    tables = ["snapshots"] if run.kind == ReportRun.Kind.ADVISOR else ["brokers", "bundles"]
    if any(any((history_dir / t).glob("date=*/*.parquet")) for t in tables):
        return None
    if run.kind == ReportRun.Kind.ADVISOR:
        return "no recorded snapshots in the history yet: nothing to replay"
    return "no load history yet: nothing to report on"


def report_run_execute(run_id: int) -> ReportRun:
    """Run the Spark job of a queued ReportRun: progress saved and published as the job prints
    it, stopped when an operator cancels or after ``TIMEOUT_S``; the run ends succeeded (with the
    job's summary), failed (with the reason) or cancelled."""
    started = timezone.now()
    # Taken only if still queued: a cancel that came first stands.
    if not ReportRun.objects.filter(pk=run_id, status=ReportRun.Status.QUEUED).update(
        status=ReportRun.Status.RUNNING, started_at=started, stage="starting"
    ):
        return ReportRun.objects.get(pk=run_id)
    run = ReportRun.objects.get(pk=run_id)
    # Kept while the job runs: a run whose worker dies is marked failed within a minute or
    # two (services.reports.report_runs_reap), not left "running" for half an hour.
    with lease_kept(leases.report_run(run_id), REPORT_RUN_LEASE_S):
        return _run(run)


def _run(run: ReportRun) -> ReportRun:
    history_dir = Path(settings.FULCRUM_HISTORY_DIR)
    output_dir = run_dir(run)
    _publish(run)
    missing = _missing_history(run, history_dir)
    if missing:
        return _finish(run, ReportRun.Status.FAILED, missing, "")
    # Marked running above, so that compaction will not start; one under way is waited for.
    waited = 0
    while lease_held(leases.COMPACT, timezone.now()) and waited < COMPACT_WAIT_S:
        time.sleep(1)
        waited += 1
    try:
        shutil.rmtree(output_dir, ignore_errors=True)
        output_dir.mkdir(parents=True)
        _balancer_zip(output_dir)
        arguments = _arguments(run, output_dir)
        proc = subprocess.Popen(
            spark_submit_command(run, history_dir, output_dir, arguments),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(),
            start_new_session=True,  # its own process group: a cancel stops JVM and workers
        )
    except Exception as exc:  # a job that cannot start fails its run, never the worker
        return _finish(run, ReportRun.Status.FAILED, f"the job could not start: {exc}", "")
    lines: deque[str] = deque(maxlen=400)
    outcome = _follow(run, proc, lines)
    tail = "\n".join(list(lines)[-60:])
    if outcome is not None:
        return _finish(run, ReportRun.Status.CANCELLED, outcome, tail)
    if proc.returncode != 0:
        return _finish(
            run, ReportRun.Status.FAILED, failure_reason(list(lines), proc.returncode), tail
        )
    try:
        run.summary = json.loads((output_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return _finish(run, ReportRun.Status.FAILED, "the job wrote no summary", tail)
    run.done = run.total
    return _finish(run, ReportRun.Status.SUCCEEDED, "", tail)


def _follow(run: ReportRun, proc: subprocess.Popen[str], lines: deque[str]) -> str | None:
    """Read the job's output until it exits; None, or why it was stopped (a cancel, the
    timeout)."""
    assert proc.stdout is not None
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    started = time.monotonic()
    checked = 0.0
    while True:
        try:
            line = out.get(timeout=1.0)
        except queue.Empty:
            line = ""
        if line is None:
            proc.wait()
            return None
        if line:
            lines.append(line)
            match = PROGRESS.match(line)
            if match:
                run.done, run.total, run.stage = int(match[1]), int(match[2]), match[3][:200]
                run.save(update_fields=["done", "total", "stage"])
                _publish(run)
        now = time.monotonic()
        if now - checked >= 1.0:
            checked = now
            if ReportRun.objects.filter(pk=run.pk, cancel_requested=True).exists():
                _stop(proc)
                return "cancelled by an operator"
            if now - started > TIMEOUT_S:
                _stop(proc)
                return f"stopped after {TIMEOUT_S:.0f} s: the job took too long"


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _publish(run: ReportRun) -> None:
    payload: dict[str, Any] = {
        "id": run.pk,
        "kind": run.kind,
        "status": run.status,
        "done": run.done,
        "total": run.total,
        "stage": run.stage,
        "reason": run.reason,
    }
    realtime.publish(realtime.REPORT_CHANGED, payload)


def _finish(run: ReportRun, status: str, reason: str, log_tail: str) -> ReportRun:
    run.status, run.finished_at, run.reason, run.log_tail = status, timezone.now(), reason, log_tail
    run.save(
        update_fields=[
            "status",
            "finished_at",
            "reason",
            "log_tail",
            "summary",
            "done",
            "total",
            "stage",
        ]
    )
    _publish(run)
    if status == ReportRun.Status.SUCCEEDED and run.started_at is not None:
        elapsed = (run.finished_at - run.started_at).total_seconds()
        metrics.HISTORY_REPORT_DURATION.labels(kind=run.kind).observe(elapsed)
    return run
