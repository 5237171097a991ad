"""Fulcrum's balance in its own live loop, measured like the offline one (issue 24, item 5).

    .venv/bin/python -m tests.benchmarks.live_quality [--minutes 10] [--warm-up 5]

Runs ``make run``'s stack — honcho over the Procfile: Redis, uvicorn, the Celery worker and beat,
the dead-man, the simulated Pulsar cluster playing the trace day at 30× (a trace minute every
2 s) — in a throwaway folder, in control of the simulated cluster through the connector, for
``--minutes`` of wall time. Every 5 s it reads the optimality gauge (the worker measures it every
10 s here, ``FULCRUM_OPTIMALITY_S``: max/mean of the serving brokers' usage ÷ the best
assignment of the same bundles, both by the load model) and the trace minute the simulator
plays. After ``--warm-up`` wall minutes it prints the live figures: optimality median and p95,
the CV of the ticks (median), moves per trace hour, and the moves that failed or that Pulsar
put elsewhere. Then it replays the same trace minutes offline (``tests.benchmarks.quality``:
the demo cluster's trace day, FulcrumShedder and FulcrumPlacement every 5 trace minutes, its
plan applied to an ownership map) and prints the same figures beside them.

Goal (issue 24): live median ≤ 1.05× the optimum after warm-up, within 0.02 of the offline one.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from tests.benchmarks import quality
from tests.support import free_port, wait_for_port
from tests.test_deadman_stack import ROOT, _stop, stack_environment

SAMPLE_S = 5.0


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(0.95 * len(ordered) + 0.5) - 1)] if ordered else float("nan")


def _trace_minute(log: Path) -> int | None:
    """The last trace minute the simulated cluster played (its log line)."""
    found = re.findall(r"trace minute (\d+) at", log.read_text(errors="replace"))
    return int(found[-1]) if found else None


def live(minutes: float, warm_up: float) -> dict[str, object]:
    """The stack for ``minutes``; the figures after ``warm_up`` (wall minutes)."""
    with tempfile.TemporaryDirectory(prefix="fulcrum-live-") as folder:
        path = Path(folder)
        settings = {
            "FULCRUM_PULSAR_OBSERVE_S": "5",
            "FULCRUM_PULSAR_REASSERT": "1",
            "FULCRUM_OPTIMALITY_S": "10",
            "FULCRUM_SIM_STEP_S": "2",
        }
        with stack_environment(path, settings) as stack:
            assert stack.redis is not None
            stack.redis.terminate()  # honcho runs its own Redis, as make run does
            stack.redis.wait(timeout=10)
            redis_url = stack.env["REDIS_URL"]
            redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
            web_port = free_port()
            env = stack.env | {
                "REDIS_PORT": str(redis_port),
                "REDIS_DIR": str(path / "redis"),
                "WEB_PORT": str(web_port),
                "WEB_WORKERS": "1",
            }
            log = stack.logs / "honcho.log"
            honcho = subprocess.Popen(
                [str(Path(sys.executable).parent / "honcho"), "start"],
                cwd=ROOT,
                env=env,
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                assert wait_for_port(web_port, attempts=600), stack.said()
                store = redis.Redis.from_url(redis_url)
                started = time.monotonic()
                samples: list[tuple[float, float, int | None]] = []
                first_minute = None
                while time.monotonic() - started < minutes * 60:
                    time.sleep(SAMPLE_S)
                    elapsed = time.monotonic() - started
                    try:
                        raw = store.get("fulcrum:load:gauge:optimality")
                    except redis.RedisError:
                        continue
                    gauge = json.loads(raw) if raw else None
                    minute = _trace_minute(log)
                    if elapsed >= warm_up * 60:
                        if first_minute is None:
                            first_minute = minute
                        if gauge is not None:
                            samples.append((elapsed, float(gauge["ratio"]), minute))
                    ratio = "—" if gauge is None else f"{gauge['ratio']:.3f}"
                    print(
                        f"{elapsed:6.0f} s  trace minute {minute}  optimality {ratio}", flush=True
                    )
                last_minute = _trace_minute(log)
                with sqlite3.connect(stack.database) as db:
                    cvs = [  # none while fewer than two brokers serve (the stack's start)
                        float(cv)
                        for (cv,) in db.execute(
                            "select cv from console_clustersample where cv is not null order by at"
                        ).fetchall()
                    ]
                    moves = db.execute(
                        "select kind, state, outcome from console_pulsarmove"
                    ).fetchall()
            finally:
                _stop([honcho])
    unloads = [m for m in moves if m[0] == "unload"]
    span = max(1, (last_minute or 0) - (first_minute or 0))
    ratios = [r for _, r, _ in samples]
    return {
        "ratios": ratios,
        "median": statistics.median(ratios) if ratios else float("nan"),
        "p95": _p95(ratios),
        "cv": statistics.median(cvs[len(cvs) // 2 :]) if cvs else float("nan"),
        "moves": len(unloads),
        "movesPerTraceHour": len(unloads) / ((last_minute or span) / 60),
        "failed": sum(1 for m in unloads if m[2] == "failed"),
        "elsewhere": sum(1 for m in unloads if m[2] == "elsewhere"),
        "window": (first_minute, last_minute),
    }


def offline(first: int, last: int) -> dict[str, float]:
    """The offline replay of trace minutes 0 to ``last``; figures over ``first``..``last``."""
    world = quality.trace_day(last + 1)
    optima = [quality.optimum_of(world, m, exact=False) for m in range(world.minutes)]
    result = quality.run(world, "FulcrumShedder")
    quality.reference(optima, [result])
    window = result.ratios[first : last + 1]
    return {
        "median": statistics.median(window),
        "p95": _p95(window),
        "cv": statistics.median(result.cvs[first : last + 1]),
        "movesPerTraceHour": result.moves / (world.minutes / 60),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="wall minutes to run")
    parser.add_argument("--warm-up", type=float, default=5.0, help="wall minutes not counted")
    args = parser.parse_args(argv)
    measured = live(args.minutes, args.warm_up)
    first, last = measured["window"]  # type: ignore[misc]
    replay = offline(int(first or 0), int(last or 0))
    print(f"\ntrace minutes {first}–{last} (after {args.warm_up:g} wall minutes of warm-up)\n")
    print("| | optimality median | p95 | CV (median) | moves per trace hour | failed | elsewhere |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| live (make run's stack) | {measured['median']:.3f} | {measured['p95']:.3f} "
        f"| {measured['cv']:.3f} | {measured['movesPerTraceHour']:.1f} | {measured['failed']} "
        f"| {measured['elsewhere']} |"
    )
    print(
        f"| offline replay | {replay['median']:.3f} | {replay['p95']:.3f} | {replay['cv']:.3f} "
        f"| {replay['movesPerTraceHour']:.1f} | – | – |"
    )
    gap = abs(float(measured["median"]) - replay["median"])  # type: ignore[arg-type]
    print(f"\nlive − offline median: {gap:.3f} (goal ≤ 0.02); live median goal ≤ 1.05")


if __name__ == "__main__":
    main()
