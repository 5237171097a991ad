"""The Spark jobs at scale, printed as rows/s (never a timed test).

    .venv/bin/python -m tests.benchmarks.spark_history report [--days 30] [--brokers 1000]
    .venv/bin/python -m tests.benchmarks.spark_history advisor [--configs 20]

``report``: synthetic load reports in the production layout (``console.services.history``'s
``brokers`` table: one report per broker every 30 s, partitioned by date, files of 1,000,000
rows as compaction leaves them) — 30 days × 1,000 brokers is 86.4 M rows — then the report's
broker jobs (broker percentiles per hour, CV per minute) on ``local[*]``, each timed.

``advisor``: one day of the demo cluster (the quality benchmark's trace day: 8 brokers, 96
bundles, a snapshot per trace minute) written as the ``snapshots`` table, replayed by the
strategy advisor under the console's grid of configs (``console.services.advisor``) with a
5-minute loop, on ``local[*]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_FILE = 1_000_000
REPORT_EVERY_S = 30


def spark_session(app: str):  # type: ignore[no-untyped-def]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from console.reports.jobs import SESSION_CONF

    builder = (
        SparkSession.builder.master("local[*]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in SESSION_CONF.items():  # the jobs' own settings (spark-submit's runs)
        builder = builder.config(key, value)
    return builder.getOrCreate()


def load_average() -> str:
    """The machine's load (1, 5, 15 minutes), printed beside a measurement."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def synthetic_brokers(root: Path, days: int, brokers: int) -> int:
    """Write ``days`` × ``brokers`` × 2,880 reports; returns the rows (kept when present)."""
    from console.services.history import BROKER_SCHEMA

    table_dir = root / "brokers"
    marker = root / f".done-{days}x{brokers}"
    per_day = brokers * 86_400 // REPORT_EVERY_S
    if marker.exists():
        return days * per_day
    rng = np.random.default_rng(1)
    names = np.asarray([f"broker-{i:05d}" for i in range(brokers)], dtype=object)
    start = datetime(2026, 10, 1, tzinfo=UTC)
    for day in range(days):
        date = (start + timedelta(days=day)).date().isoformat()
        out = table_dir / f"date={date}"
        out.mkdir(parents=True, exist_ok=True)
        for first in range(0, per_day, ROWS_PER_FILE):
            n = min(ROWS_PER_FILE, per_day - first)
            index = np.arange(first, first + n)
            seconds = (index // brokers) * REPORT_EVERY_S
            at = np.datetime64(start + timedelta(days=day), "us") + seconds.astype("timedelta64[s]")
            cpu = rng.uniform(5, 95, n)
            columns = {
                "broker": names[index % brokers],
                "reported_at": at.astype("datetime64[us]"),
                "cpu_percent": cpu,
                "memory_percent": rng.uniform(20, 60, n),
                "bandwidth_in_percent": rng.uniform(0, 50, n),
                "bandwidth_out_percent": rng.uniform(0, 50, n),
                "msg_rate_in": rng.uniform(0, 5e4, n),
                "msg_rate_out": rng.uniform(0, 5e4, n),
                "msg_throughput_in_bytes_per_s": rng.uniform(0, 5e7, n),
                "msg_throughput_out_bytes_per_s": rng.uniform(0, 5e7, n),
                "weighted_usage_fraction": cpu / 100,
                "bundle_count": rng.integers(10, 200, n),
                "topic_count": rng.integers(100, 2000, n),
            }
            schema = pa.schema([f for f in BROKER_SCHEMA if f.name != "date"])
            table = pa.table(
                {k: pa.array(v, type=schema.field(k).type) for k, v in columns.items()},
                schema=schema,
            )
            pq.write_table(table, out / f"part-{first // ROWS_PER_FILE:04d}.parquet")
        print(f"  day {day + 1}/{days} written", flush=True)
    marker.touch()
    os.sync()  # written back now, not while the jobs are timed
    return days * per_day


def report(args: argparse.Namespace) -> None:
    from console.reports.jobs import broker_hours, cluster_minutes

    root = Path(args.dir)
    started = time.perf_counter()
    rows = synthetic_brokers(root, args.days, args.brokers)
    print(f"history: {rows:,} rows in {time.perf_counter() - started:.1f} s (generated or found)")
    print(f"load average: {load_average()}", flush=True)
    t0 = time.perf_counter()
    spark = spark_session("fulcrum-bench-report")
    print(f"Spark session: {time.perf_counter() - t0:.1f} s")
    try:
        brokers = spark.read.parquet(str(root / "brokers"))
        print("| job | rows | seconds | rows/s |\n|---|---|---|---|")
        total = 0.0
        for name, build in (("broker_hours", broker_hours), ("cluster_minutes", cluster_minutes)):
            t = time.perf_counter()
            build(brokers).write.mode("overwrite").format("noop").save()
            took = time.perf_counter() - t
            total += took
            print(f"| {name} | {rows:,} | {took:.1f} | {rows / took:,.0f} |", flush=True)
        print(f"| both | {rows:,} | {total:.1f} | {rows / total:,.0f} |")
        print(f"load average: {load_average()}")
    finally:
        spark.stop()


def demo_day_snapshots(root: Path) -> int:
    """The trace day as the ``snapshots`` table: a snapshot per trace minute, the bundles owned
    as the demo's first placement leaves them."""
    from balancer.wire import snapshot_document
    from console.services.history import snapshot_tables
    from tests.benchmarks import quality

    world = quality.trace_day(1440)
    owner = (np.arange(len(world.bundles)) % len(world.brokers)).astype(np.int64)
    averages: dict = {
        "short": np.zeros((len(world.bundles), 4)),
        "long": np.zeros((len(world.bundles), 4)),
        "samples": np.zeros(len(world.bundles), dtype=np.int64),
        "lastSeen": {},
    }
    documents = []
    base = datetime(2026, 10, 1, tzinfo=UTC).timestamp()
    for minute in range(world.minutes):
        sample = world.loads(minute)
        averages["short"] = quality.time_average_columns(
            averages["short"], sample, averages["samples"], quality.SHORT_TERM_SAMPLES
        )
        averages["long"] = quality.time_average_columns(
            averages["long"], sample, averages["samples"], quality.LONG_TERM_SAMPLES
        )
        averages["samples"] = averages["samples"] + 1
        snap = quality.snapshot_of(world, owner, minute, averages, {}, [])
        document = snapshot_document(snap, topics=False)
        document["now"] = base + minute * 60.0
        for broker in document["brokers"]:
            broker["reportedAt"] = document["now"]
        documents.append(document)
    snapshots, _ = snapshot_tables(documents)
    pq.write_to_dataset(snapshots, str(root / "snapshots"), partition_cols=["date"])
    return len(documents)


def advisor(args: argparse.Namespace) -> None:
    from console.models import BalancerConfig
    from console.reports.advisor import run
    from console.services.advisor import advisor_spec

    root = Path(tempfile.mkdtemp(prefix="fulcrum-advisor-"))
    t = time.perf_counter()
    count = demo_day_snapshots(root)
    print(f"history: {count} snapshots of the demo's trace day in {time.perf_counter() - t:.1f} s")
    spec = advisor_spec(BalancerConfig(loop_interval_s=300.0))
    spec["candidates"] = spec["candidates"][: args.configs]
    t = time.perf_counter()
    spark = spark_session("fulcrum-bench-advisor")
    print(f"Spark session: {time.perf_counter() - t:.1f} s")
    try:
        t = time.perf_counter()
        summary = run(spark, str(root), str(root / "out"), spec)
        took = time.perf_counter() - t
    finally:
        spark.stop()
    print(
        f"advisor: {summary['candidates']} configs × {summary['windows']} windows = "
        f"{summary['tasks']} tasks in {took:.1f} s ({summary['tasks'] / took:.1f} tasks/s)"
    )
    import json

    lines = (root / "out" / "ranking" / "part-00000.json").read_text().splitlines()
    print("| # | config | max/mean median | p95 | moves/h | bounced back | Pareto |")
    print("|---|---|---|---|---|---|---|")
    for line in lines:
        r = json.loads(line)
        mm, p95, moves = r["maxOverMeanMedian"], r["maxOverMeanP95"], r["movesPerHour"]
        cells = [
            str(r["rank"]),
            r["label"],
            "–" if mm is None else f"{mm:.3f}",
            "–" if p95 is None else f"{p95:.3f}",
            "–" if moves is None else f"{moves:.1f}",
            str(r["oscillations"]),
            "yes" if r["pareto"] else "",
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="job", required=True)
    r = sub.add_parser("report")
    r.add_argument("--days", type=int, default=30)
    r.add_argument("--brokers", type=int, default=1000)
    r.add_argument("--dir", default="var/bench-history")
    a = sub.add_parser("advisor")
    a.add_argument("--configs", type=int, default=20)
    args = parser.parse_args(argv)
    # The history's schemas and the advisor's grid live in the console (no database is used).
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("FULCRUM_DEMO", "1")
    import django

    django.setup()
    {"report": report, "advisor": advisor}[args.job](args)


if __name__ == "__main__":
    main()
