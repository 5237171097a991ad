"""The scale benchmark (``tests/benchmarks/scale.py``) on a 500-bundle slice: the whole stack of
``make run`` on a private PostgreSQL, attached to a simulated cluster of 5 brokers in 2 failure
domains with 5 namespaces x 100 bundles, an audit of 20,000 rows, for half a minute (the broker
owning most bundles drained in its last quarter minute, through the executor); then every
page in Chromium and one dashboard's websocket. Checks that every step was measured and
worked — passes observed every bundle, ticks planned, moves sent and verified, every page 200
with no JavaScript error, memory read — not how fast (the figures are the benchmark's)."""

from __future__ import annotations

import os
import subprocess
import sys

ARGS = [
    "--brokers", "5", "--namespaces", "5", "--bundles-per-namespace", "100",
    "--failure-domains", "2", "--minutes", "0.5", "--audit-rows", "20000",
    "--step-seconds", "2", "--observe-seconds", "2", "--websocket-seconds", "10",
    "--drain-minutes", "0.25",
]  # fmt: skip

CHECK = f"""
import json, sys
from tests.benchmarks import scale
m = scale.measure({ARGS!r})
failed = scale.report(m)
print("RESULT " + json.dumps({{
    "failed": failed, "dead": m.dead, "passes": m.passes, "ticks": m.ticks,
    "executor": m.executor, "pages": m.pages, "websocket": m.websocket_bytes_per_s,
    "memory": m.peak_mb, "flushes": m.flushes}}, default=str))
"""


def test_the_scale_benchmark_runs_on_a_500_bundle_slice():
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=600,
        # A flush within the half minute; the worker's own settings otherwise.
        env={**os.environ, "FULCRUM_HISTORY_FLUSH_S": "10"},
    )
    said = done.stdout[-6000:] + done.stderr[-4000:]
    assert done.returncode == 0, said
    import json

    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert not result["dead"], said
    assert not result["failed"], said
    # Every pass saw the whole cluster, with its calls and bytes counted.
    assert result["passes"], said
    for summary in result["passes"]:
        assert (summary["bundles"], summary["brokers"]) == (500, 5), summary
        assert min(summary["calls"]["total"], summary["calls"]["bytes"]) > 0, summary
    assert result["ticks"], said
    assert min(result["executor"]["sent/min"], result["executor"]["verified/min"]) > 0
    assert result["flushes"], said
    pages = {row["page"]: row for row in result["pages"]}
    assert set(pages) >= {
        "dashboard",
        "bundle map",
        "failure domains",
        "a broker",
        "audit, filtered",
    }
    for row in pages.values():
        assert (row["warm status"], row["cold status"]) == (200, 200), row
        assert row["warm errors"] + row["cold errors"] == [], row
        assert 0 < row["warm MB"] <= row["cold MB"], row
        assert row["warm first render (s)"] > 0, row
    assert result["websocket"] > 0
    assert set(result["memory"]) >= {"web", "worker", "beat", "simulator", "redis", "postgres"}
