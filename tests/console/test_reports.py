"""The Parquet history and the Spark job on a tiny data set (spark-submit, local master)."""

from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.test import override_settings

from console.models import LoadReport, ReportRun
from console.reports.submit import report_run_execute, spark_submit_command
from console.services.history import history_compact, history_flush
from console.services.ingest import load_reports_fold
from tests.conftest import ingest, report

T0 = datetime(2026, 11, 20, 10, 5, tzinfo=UTC)


def seed_history():
    for i, cpu in enumerate((10, 20, 30)):
        ingest(
            report(
                "broker-1",
                cpu,
                throughput_mib=i + 1,
                timestamp=(T0 + timedelta(minutes=i)).timestamp(),
            )
        )
        ingest(report("broker-2", 50, timestamp=(T0 + timedelta(minutes=i)).timestamp()))
    ingest(report("broker-1", 70, timestamp=(T0 + timedelta(hours=1)).timestamp()))
    ingest(report("broker-2", 70, timestamp=(T0 + timedelta(hours=1)).timestamp()))
    # The live store's reports become LoadReport rows in one batch.
    assert load_reports_fold() == 8
    assert load_reports_fold() == 0


def test_history_flush_writes_parquet_partitioned_by_date_once(cluster, tmp_path):
    seed_history()
    assert history_flush(directory=tmp_path) == 8
    assert history_flush(directory=tmp_path) == 0
    files = list(tmp_path.glob("brokers/date=2026-11-20/*.parquet"))
    assert len(files) == 1
    table = pq.read_table(files[0])
    assert table.num_rows == 8
    assert sorted(set(table.column("broker").to_pylist())) == ["broker-1", "broker-2"]
    assert LoadReport.objects.filter(exported=False).count() == 0


def test_spark_submit_command_uses_the_configured_master(cluster, tmp_path):
    run = ReportRun.objects.create(master="spark://spark.example:7077")
    command = spark_submit_command(run, tmp_path / "h", tmp_path / "o")
    assert command[command.index("--master") + 1] == "spark://spark.example:7077"
    assert command[-4:] == ["--history", str(tmp_path / "h"), "--output", str(tmp_path / "o")]


def test_report_without_history_fails_with_a_reason(cluster, tmp_path):
    with override_settings(FULCRUM_HISTORY_DIR=tmp_path / "empty", FULCRUM_REPORTS_DIR=tmp_path):
        run = report_run_execute(ReportRun.objects.create(master="local[2]").pk)
    assert run.status == ReportRun.Status.FAILED
    assert "no load history" in run.reason


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_report_run_through_spark_submit_writes_its_results_with_progress(cluster, tmp_path):
    from console.selectors import report_results

    seed_history()
    with override_settings(
        FULCRUM_HISTORY_DIR=tmp_path / "history", FULCRUM_REPORTS_DIR=tmp_path / "out"
    ):
        history_flush()
        run = report_run_execute(ReportRun.objects.create(master="local[2]").pk)
        assert run.status == ReportRun.Status.SUCCEEDED, run.log_tail
        assert (run.done, run.total) == (5, 5)
        assert run.summary["written"] == ["broker_hours", "cluster_minutes"]
        rows = {(r["broker"], r["hour"]): r for r in report_results(run, "broker_hours")["rows"]}
        minutes = report_results(run, "cluster_minutes")["rows"]
    first = rows[("broker-1", "2026-11-20T10:00:00Z")]
    assert (first["cpu_p50"], first["cpu_max"], first["reports"]) == (20.0, 30.0, 3)
    assert first["throughput_max"] == 3 * 1024 * 1024
    assert rows[("broker-1", "2026-11-20T11:00:00Z")]["cpu_p95"] == 70.0
    # 10:05: broker-1 at 10 %, broker-2 at 50 %: mean 0.3, std 0.2, CV 2/3.
    assert minutes[0]["minute"] == "2026-11-20T10:05:00Z"
    assert minutes[0]["cv"] == pytest.approx(0.2 / 0.3)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_failing_job_says_why_and_a_cancelled_one_stops(cluster, tmp_path, settings):
    import threading
    import time

    seed_history()
    settings.FULCRUM_HISTORY_DIR = tmp_path / "history"
    settings.FULCRUM_REPORTS_DIR = tmp_path / "out"
    history_flush()
    # A master that does not exist: Spark's own error is the reason.
    failed = report_run_execute(ReportRun.objects.create(master="nonsense://x").pk)
    assert failed.status == ReportRun.Status.FAILED
    assert failed.reason.startswith("org.apache.spark.SparkException: Master must")
    # A cancel while it runs: the worker stops spark-submit within a few seconds.
    run = ReportRun.objects.create(master="local[1]")
    started = time.monotonic()

    def cancel() -> None:
        try:
            ReportRun.objects.filter(pk=run.pk).update(cancel_requested=True)
        finally:
            connection.close()  # this thread's own

    threading.Timer(3.0, cancel).start()
    cancelled = report_run_execute(run.pk)
    assert cancelled.status == ReportRun.Status.CANCELLED
    assert cancelled.reason == "cancelled by an operator"
    assert time.monotonic() - started < 20


def test_runs_of_one_kind_one_at_a_time_and_a_queued_one_cancels_at_once(cluster, operator):
    from console.errors import ConsoleError
    from console.services.reports import report_run_cancel, report_run_request

    report = report_run_request(actor=operator)
    advisor = report_run_request(actor=operator, kind="advisor")  # another kind may queue
    with pytest.raises(ConsoleError) as busy:
        report_run_request(actor=operator, kind="advisor")
    assert busy.value.status == 409
    with pytest.raises(ConsoleError) as unknown:
        report_run_request(actor=operator, kind="nonsense")
    assert unknown.value.field == "kind"
    cancelled = report_run_cancel(advisor.pk, actor=operator)
    assert cancelled.status == ReportRun.Status.CANCELLED
    with pytest.raises(ConsoleError) as ended:
        report_run_cancel(advisor.pk, actor=operator)
    assert ended.value.status == 409
    # The worker takes a cancelled run and leaves it be.
    assert report_run_execute(advisor.pk).status == ReportRun.Status.CANCELLED
    assert report.status == ReportRun.Status.QUEUED


def test_prune_keeps_unexported_and_latest_reports(cluster, tmp_path):
    from console.services.history import load_reports_prune

    seed_history()  # 2026-11-20, long before now
    assert load_reports_prune(retention_s=3600) == 0  # nothing exported yet
    history_flush(directory=tmp_path)
    assert load_reports_prune(retention_s=3600) == 6
    kept = LoadReport.objects.values_list("broker__name", "reported_at")
    newest = T0 + timedelta(hours=1)
    assert sorted(kept) == [("broker-1", newest), ("broker-2", newest)]


def test_snapshots_their_bundles_and_actions_are_flushed_once(cluster, tmp_path, settings):
    from console import selectors
    from console.models import AuditEvent
    from console.services.shedding import replay_record

    settings.FULCRUM_REPLAY_WINDOW_S = 10 * 365 * 86400  # NOW-relative samples stay
    first = selectors.cluster_snapshot_get(now=T0)
    assert replay_record(first, T0)
    AuditEvent.objects.create(
        at=T0, action="unload", target="acme/orders/0x00000000_0x40000000", reason="x"
    )
    bundles = len(first.bundles)
    # One snapshot, its bundles, one action.
    assert history_flush(directory=tmp_path) == 1 + bundles + 1
    assert history_flush(directory=tmp_path) == 0
    later = T0 + timedelta(minutes=1)
    assert replay_record(selectors.cluster_snapshot_get(now=later), later)
    assert history_flush(directory=tmp_path) == 1 + bundles
    rows = pq.read_table(tmp_path / "bundles").to_pylist()
    assert len(rows) == 2 * bundles
    assert {r["namespace"] for r in rows} == {"acme/orders", "acme/payments"}
    assert {r["date"] for r in rows} == {"2026-11-20"}
    snapshots = pq.read_table(tmp_path / "snapshots")
    assert snapshots.column("bundles").to_pylist() == [bundles, bundles]
    import json
    import zlib

    document = json.loads(zlib.decompress(snapshots.column("document")[0].as_py()))
    assert document["now"] in (T0.timestamp(), later.timestamp())
    (action,) = pq.read_table(tmp_path / "actions").to_pylist()
    assert (action["action"], action["actor"]) == ("unload", "balancer")


def test_compaction_merges_small_files_and_retention_drops_old_days(cluster, tmp_path):
    seed_history()
    for _ in range(3):  # three small files of the 20th: rows 1-3, 4-6, 7-8
        history_flush(directory=tmp_path, batch=3)
    day = tmp_path / "brokers" / "date=2026-11-20"
    before = len(list(day.glob("*.parquet")))
    assert before >= 3
    rows = pq.read_table(tmp_path / "brokers").num_rows
    # Today: too few rows to merge; the day is over: merged into one file, no row lost.
    today = T0.date()
    assert history_compact(directory=tmp_path, today=today, retention_days=0)["written"] == 0
    counts = history_compact(directory=tmp_path, today=today + timedelta(days=1), retention_days=0)
    assert counts == {"merged": before, "written": 1, "dropped": 0}
    assert len(list(day.glob("*.parquet"))) == 1
    assert pq.read_table(tmp_path / "brokers").num_rows == rows
    # 31 days later a 30-day retention drops the partition.
    counts = history_compact(
        directory=tmp_path, today=today + timedelta(days=31), retention_days=30
    )
    assert counts["dropped"] == 1
    assert not day.exists()


def test_the_history_of_before_tables_moves_under_brokers(cluster, tmp_path):
    old = tmp_path / "date=2026-11-19"
    old.mkdir()
    seed_history()
    history_flush(directory=tmp_path / "scratch")
    (part,) = (tmp_path / "scratch" / "brokers" / "date=2026-11-20").glob("*.parquet")
    part.rename(old / "part-0.parquet")
    history_flush(directory=tmp_path)
    assert (tmp_path / "brokers" / "date=2026-11-19" / "part-0.parquet").exists()
    assert not old.exists()


def test_the_reason_of_a_failure_is_its_last_error_line():
    from console.reports.submit import failure_reason

    assert failure_reason(["INFO x", "Error: no recorded snapshots", "bye"], 1) == (
        "no recorded snapshots"
    )
    log = ["Traceback (most recent call last):", '  File "x.py"', "ValueError: bad input", "  at y"]
    assert failure_reason(log, 1) == "ValueError: bad input"
    assert failure_reason(["nothing useful"], 137) == "spark-submit exited with code 137"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def standalone_spark(tmp_path):
    """A Spark standalone master and one worker started from the installed PySpark
    (``spark-class``), on loopback ports; their ``spark://`` URL."""
    import json
    import os
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    import pyspark

    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    env |= {"PYSPARK_PYTHON": sys.executable, "SPARK_WORKER_DIR": str(tmp_path / "work")}
    port, ui = _free_port(), _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    logs = [open(tmp_path / f"{n}.log", "w") for n in ("master", "worker")]  # noqa: SIM115
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(_free_port()),
                "--cores",
                "2",
                "--memory",
                "1g",
                master_url,
            ],
            env=env,
            stdout=logs[1],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
    ]
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
                    if json.load(answer).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-2000:]
            time.sleep(1)
        yield master_url
    finally:
        import os as _os
        import signal

        for proc in procs:
            _os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        for log in logs:
            log.close()


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_report_runs_unchanged_on_a_standalone_spark_cluster(cluster, tmp_path, standalone_spark):
    from console.selectors import report_results

    seed_history()
    with override_settings(
        FULCRUM_HISTORY_DIR=tmp_path / "history", FULCRUM_REPORTS_DIR=tmp_path / "out"
    ):
        history_flush()
        run = report_run_execute(ReportRun.objects.create(master=standalone_spark).pk)
        assert run.status == ReportRun.Status.SUCCEEDED, run.log_tail
        rows = report_results(run, "broker_hours")["rows"]
    assert {r["broker"] for r in rows} == {"broker-1", "broker-2"}
    assert (
        "spark://127.0.0.1" in " ".join(run.log_tail.splitlines()) or run.master == standalone_spark
    )


def test_a_batch_written_again_replaces_its_file_and_a_broken_compaction_is_finished(
    cluster, tmp_path
):
    import json

    seed_history()
    history_flush(directory=tmp_path)
    # The flush died before it marked its rows exported: the same batch, the same file.
    LoadReport.objects.update(exported=False)
    history_flush(directory=tmp_path)
    assert pq.read_table(tmp_path / "brokers").num_rows == 8
    # A compaction that died after putting its merged file in place, before deleting the files
    # it replaces: the next one deletes them (no row twice).
    day = tmp_path / "brokers" / "date=2026-11-20"
    (original,) = day.glob("part-*.parquet")
    merged = day / "part-compact-x.parquet"
    merged.write_bytes(original.read_bytes())
    (day / "_compaction.json").write_text(
        json.dumps({"merged": merged.name, "inputs": [original.name]})
    )
    (day / ".part-compact-y.parquet").write_bytes(b"half written")
    history_compact(directory=tmp_path, today=T0.date(), retention_days=0)
    assert sorted(p.name for p in day.iterdir()) == [merged.name]
    assert pq.read_table(tmp_path / "brokers").num_rows == 8


def test_a_job_that_cannot_start_fails_its_run_with_the_reason(cluster, tmp_path, settings):
    seed_history()
    settings.FULCRUM_HISTORY_DIR = tmp_path / "history"
    settings.FULCRUM_REPORTS_DIR = tmp_path / "out"
    settings.SPARK_SUBMIT = str(tmp_path / "no-such-spark-submit")
    history_flush()
    run = report_run_execute(ReportRun.objects.create(master="local[1]").pk)
    assert run.status == ReportRun.Status.FAILED
    assert run.reason.startswith("the job could not start:")


@pytest.mark.django_db(transaction=True)
def test_a_running_job_keeps_its_lease_and_gives_it_back(cluster, tmp_path, settings):
    """Its worker keeps the run's lease while spark-submit runs (a stand-in that sleeps 2 s and
    writes nothing), so the reap leaves it running; the lease is given back when it ends."""
    import threading
    import time

    from django.utils import timezone

    from console.leases import lease_held
    from console.leases import report_run as report_run_lease
    from console.models import Lease
    from console.services.reports import report_runs_reap

    seed_history()
    settings.FULCRUM_HISTORY_DIR = tmp_path / "history"
    settings.FULCRUM_REPORTS_DIR = tmp_path / "out"
    fake = tmp_path / "spark-submit"
    fake.write_text("#!/bin/sh\nsleep 2\n")
    fake.chmod(0o755)
    settings.SPARK_SUBMIT = str(fake)
    history_flush()
    run = ReportRun.objects.create(master="local[1]")
    ended = []

    def execute() -> None:
        try:
            ended.append(report_run_execute(run.pk))
        finally:
            connection.close()  # this thread's own: left open, PostgreSQL cannot drop the test db

    worker = threading.Thread(target=execute)
    worker.start()
    deadline = time.monotonic() + 10
    while not lease_held(report_run_lease(run.pk), timezone.now()):
        assert time.monotonic() < deadline, "the run's lease was never taken"
        time.sleep(0.05)
    # Its start set in the past: the lease alone keeps the reap away.
    ReportRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    assert report_runs_reap() == 0
    assert ReportRun.objects.get(pk=run.pk).status == ReportRun.Status.RUNNING
    worker.join(timeout=30)
    assert ended[0].status == ReportRun.Status.FAILED
    assert ended[0].reason == "the job wrote no summary"
    assert not lease_held(report_run_lease(run.pk), timezone.now())
    report_runs_reap()
    assert not Lease.objects.filter(name=report_run_lease(run.pk)).exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_worker_died_is_failed_at_the_next_reap_and_frees_its_kind(cluster, operator):
    """A run left running with no lease (its worker killed: the lease lapsed) is failed by the
    next reap, saying why, and a new run of its kind can be requested at once; a run whose
    lease is still held, or that started within a lease's time, is left running."""
    from django.utils import timezone

    from console.leases import lease_claim
    from console.leases import report_run as report_run_lease
    from console.services.reports import (
        REPORT_RUN_LEASE_S,
        report_run_request,
        report_runs_reap,
    )

    now = timezone.now()
    old = now - timedelta(seconds=2 * REPORT_RUN_LEASE_S)
    dead, alive = (
        ReportRun.objects.create(kind=kind, status=ReportRun.Status.RUNNING, started_at=old)
        for kind in (ReportRun.Kind.REPORT, ReportRun.Kind.ADVISOR)
    )
    assert lease_claim(report_run_lease(alive.pk), "another-worker", now, REPORT_RUN_LEASE_S)
    young = ReportRun.objects.create(
        kind=ReportRun.Kind.REPORT, status=ReportRun.Status.RUNNING, started_at=now
    )
    assert report_runs_reap() == 1
    dead.refresh_from_db()
    assert dead.status == ReportRun.Status.FAILED
    assert dead.reason == (
        f"its worker stopped mid-run (killed or restarted): no sign of life for "
        f"{REPORT_RUN_LEASE_S:.0f} s; request the run again"
    )
    assert ReportRun.objects.get(pk=alive.pk).status == ReportRun.Status.RUNNING
    assert ReportRun.objects.get(pk=young.pk).status == ReportRun.Status.RUNNING
    ReportRun.objects.filter(pk=young.pk).update(status=ReportRun.Status.SUCCEEDED)
    assert report_run_request(actor=operator).status == ReportRun.Status.QUEUED
