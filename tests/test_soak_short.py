"""The soak script (tests/benchmarks/soak.py) in its short mode: the stack of ``make run`` for
half a minute under load reports and dashboards, then its invariants. Fails on any error, dropped
dashboard or violated invariant (the script's exit code)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_soak_runs_half_a_minute_clean():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.benchmarks.soak",
            "--minutes",
            "0.5",
            "--rate",
            "100",
            "--dashboards",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=420,
        env={**os.environ, "FULCRUM_HISTORY_FLUSH_S": "10"},  # a few flushes in the run
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "minute 1: MB web" in out
    assert "| **total** |" in out
    assert "growth since minute 1" in out
    assert "errors: 0" in out
    assert "invariants: 0 violation(s)" in out
    assert "worker: pandas kept out; history: " in out
    assert int(out.split("history: ")[1].split(" Parquet")[0]) >= 1
    accepted = int(out.split("reports: ")[1].split(" accepted")[0])
    assert accepted > 1500  # about 100 per second for half a minute
