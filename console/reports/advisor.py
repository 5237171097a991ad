"""The strategy advisor, a PySpark job: replay the recorded history under a grid of strategy
configs and rank them. No Django.

``spark-submit console/reports/advisor.py --history DIR --output DIR --candidates FILE``

- The input is the history's ``snapshots`` table (``console.services.history``: the tick's
  recorded snapshots, every bundle's load and owner and every broker's report) cut into time
  windows (``windowS``, one hour by default).
- One Spark task per candidate config and window (``mapInPandas``) reads that window's snapshots
  and runs the real cycle over them (``balancer.simulator.replay.replay``: ``plan_cycle`` every
  loop interval, its plan applied to the replay's own ownership, from the recorded owners at the
  window's start).
- The driver scores each candidate over all its windows: the median and p95 of max/mean and the
  median CV of the brokers' usage (by the current config's resource weights, so that every
  candidate is measured alike), moves per hour, oscillations (a bundle back on a broker it left
  within the hour), and marks the Pareto front of max/mean against moves per hour.

The candidates file (written by ``console.services.advisor``): ``{"intervalS", "windowS",
"since" (s since epoch or null), "measure": a cycle config document (CLI.md) whose weights
measure, "candidates": [{"id", "label", "cycle": a cycle config document, "changes": the config
editor's draft}]}``. Output: ``ranking/`` (JSON lines, best first) and ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

try:  # spark-submit runs this file: its folder is on the path, the console package is not
    from jobs import progress, session
except ImportError:  # imported as part of the console (tests)
    from console.reports.jobs import progress, session

TASK_SCHEMA = "candidate long, start double, end double"
RESULT_SCHEMA = (
    "candidate long, start double, cycles long, moves long, placements long, splits long, "
    "vetoed long, oscillations long, hours double, cv array<double>, mm array<double>, "
    "error string"
)


def windows(ats: list[float], window_s: float) -> list[tuple[float, float]]:
    """``[start, end)`` windows of ``window_s`` seconds from the first snapshot, each holding at
    least two snapshots (a replay needs two)."""
    if not ats:
        return []
    first = min(ats)
    counts: dict[int, int] = {}
    for at in ats:
        k = int((at - first) // window_s)
        counts[k] = counts.get(k, 0) + 1
    return [
        (first + k * window_s, first + (k + 1) * window_s) for k in sorted(counts) if counts[k] >= 2
    ]


def replay_window(
    history: str, spec: dict[str, Any], candidate: int, start: float, end: float
) -> dict[str, Any]:
    """One task: the window's snapshots replayed under one candidate."""
    import pyarrow.dataset as ds

    from balancer.errors import BalancerError
    from balancer.simulator.replay import replay
    from balancer.wire import parse_cycle_config, parse_snapshot

    row: dict[str, Any] = {
        "candidate": candidate,
        "start": start,
        "cycles": 0,
        "moves": 0,
        "placements": 0,
        "splits": 0,
        "vetoed": 0,
        "oscillations": 0,
        "hours": 0.0,
        "cv": [],
        "mm": [],
        "error": None,
    }
    table = (
        ds.dataset(f"{history}/snapshots", format="parquet", partitioning="hive")
        .to_table(
            columns=["at", "document"],
            filter=(ds.field("at") >= pd.Timestamp(start, unit="s", tz="UTC"))
            & (ds.field("at") < pd.Timestamp(end, unit="s", tz="UTC")),
        )
        .sort_by("at")
    )
    samples = []
    seen = set()
    for blob in table.column("document").to_pylist():
        try:
            snapshot = parse_snapshot(json.loads(zlib.decompress(blob)))
        except (BalancerError, ValueError, zlib.error):
            continue  # a snapshot of another shape: left out
        if snapshot.now not in seen:  # a flush written twice
            seen.add(snapshot.now)
            samples.append(snapshot)
    if len(samples) < 2:
        return row
    chosen = next(c for c in spec["candidates"] if c["id"] == candidate)
    try:
        config = parse_cycle_config(chosen["cycle"])
        weights = parse_cycle_config(spec["measure"]).pulsar.weights
        result = replay(samples, config, {}, float(spec["intervalS"]), weights=weights)
    except (BalancerError, ValueError) as exc:
        row["error"] = str(exc)
        return row
    row.update(
        cycles=len(result.points),
        moves=result.moves,
        placements=result.placements,
        splits=result.splits,
        vetoed=result.vetoed,
        oscillations=result.oscillations,
        hours=len(result.points) * result.interval_s / 3600,
        cv=[p.cv for p in result.points],
        mm=[p.max_over_mean for p in result.points],
    )
    return row


def score(spec: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each candidate over its windows, best first (median max/mean, then moves per hour), with
    ``pareto``: no other candidate is at least as good on both and better on one."""
    out = []
    for candidate in spec["candidates"]:
        mine = [r for r in rows if r["candidate"] == candidate["id"]]
        errors = sorted({r["error"] for r in mine if r["error"]})
        mm = sorted(x for r in mine for x in r["mm"])
        cv = [x for r in mine for x in r["cv"]]
        hours = sum(r["hours"] for r in mine)
        moves = sum(r["moves"] for r in mine)
        entry: dict[str, Any] = {
            "id": candidate["id"],
            "label": candidate["label"],
            "changes": candidate["changes"],
            "windows": len(mine),
            "cycles": sum(r["cycles"] for r in mine),
            "hours": hours,
            "moves": moves,
            "movesPerHour": moves / hours if hours else None,
            "oscillations": sum(r["oscillations"] for r in mine),
            "vetoed": sum(r["vetoed"] for r in mine),
            "splitsPlanned": sum(r["splits"] for r in mine),
            "maxOverMeanMedian": statistics.median(mm) if mm else None,
            "maxOverMeanP95": mm[max(1, math.ceil(0.95 * len(mm))) - 1] if mm else None,
            "cvMedian": statistics.median(cv) if cv else None,
            "error": errors[0] if errors else None,
        }
        out.append(entry)
    scored = [e for e in out if e["maxOverMeanMedian"] is not None]
    for e in out:
        e["pareto"] = e in scored and not any(
            o is not e
            and o["maxOverMeanMedian"] <= e["maxOverMeanMedian"]
            and o["movesPerHour"] <= e["movesPerHour"]
            and (
                o["maxOverMeanMedian"] < e["maxOverMeanMedian"]
                or o["movesPerHour"] < e["movesPerHour"]
            )
            for o in scored
        )
    out.sort(
        key=lambda e: (
            e["maxOverMeanMedian"] is None,
            e["maxOverMeanMedian"] or 0.0,
            e["movesPerHour"] or 0.0,
        )
    )
    for rank, e in enumerate(out, 1):
        e["rank"] = rank
    return out


def _watch(spark: SparkSession, total: int, stop: threading.Event) -> None:
    """Print the replay stage's progress (tasks done of ``total``) every 2 s."""
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(2.0):
        done = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                done = max(done, info.numCompletedTasks)
        progress(1 + done, 2 + total, f"replaying ({done} of {total} tasks)")


def run(spark: SparkSession, history: str, output: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Replay every candidate over every window; write ``ranking/`` and ``summary.json``."""
    started = time.monotonic()
    progress(0, 3, "listing the recorded snapshots")
    path = Path(history) / "snapshots"
    if not any(path.glob("date=*/*.parquet")):
        raise SystemExit("Error: no recorded snapshots in the history yet: nothing to replay")
    frame = spark.read.parquet(str(path)).select("at")
    if spec.get("since") is not None:
        frame = frame.filter(frame.at.cast("double") >= float(spec["since"]))
    ats = [r[0] for r in frame.selectExpr("cast(at as double)").collect()]
    cut = windows(ats, float(spec.get("windowS", 3600)))
    if not cut:
        raise SystemExit("Error: fewer than two recorded snapshots: nothing to replay")
    tasks = [(c["id"], start, end) for c in spec["candidates"] for start, end in cut]
    total = len(tasks)
    progress(1, 2 + total, f"replaying {len(spec['candidates'])} configs × {len(cut)} windows")
    spec_json = json.dumps(spec)

    def replay_tasks(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        config = json.loads(spec_json)
        for batch in batches:
            rows = [
                replay_window(history, config, int(c), float(s), float(e))
                for c, s, e in zip(batch["candidate"], batch["start"], batch["end"], strict=True)
            ]
            yield pd.DataFrame(rows, columns=[f.split()[0] for f in RESULT_SCHEMA.split(", ")])

    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(spark, total, stop), daemon=True)
    watcher.start()
    try:
        df = spark.createDataFrame(tasks, TASK_SCHEMA).repartition(total)
        rows = [
            r.asDict(recursive=True) for r in df.mapInPandas(replay_tasks, RESULT_SCHEMA).collect()
        ]
    finally:
        stop.set()
        watcher.join()
    ranking = score(spec, rows)
    out = Path(output)
    (out / "ranking").mkdir(parents=True, exist_ok=True)
    with (out / "ranking" / "part-00000.json").open("w") as f:
        for entry in ranking:
            f.write(json.dumps(entry) + "\n")
    summary = {
        "written": ["ranking"],
        "windows": len(cut),
        "candidates": len(spec["candidates"]),
        "tasks": total,
        "from": min(ats),
        "to": max(ats),
        "seconds": time.monotonic() - started,
    }
    (out / "summary.json").write_text(json.dumps(summary))
    progress(2 + total, 2 + total, "ranked")
    return summary


def main() -> None:
    """Entry point for spark-submit."""
    parser = argparse.ArgumentParser(description="Fulcrum strategy advisor")
    parser.add_argument("--history", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--candidates", required=True, help="the candidates file (JSON)")
    args = parser.parse_args()
    spec = json.loads(Path(args.candidates).read_text())
    spark = session("fulcrum-strategy-advisor")
    try:
        run(spark, args.history, args.output, spec)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
