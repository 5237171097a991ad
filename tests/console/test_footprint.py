"""The worker keeps pandas out (console.footprint): its Parquet history is written and merged by
pyarrow alone, and an import of pandas says why it is refused. In a fresh interpreter, as the
worker would be, since pandas may already be imported in the test process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

WORKER_LIKE = textwrap.dedent(
    """
    import json, os, sys
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    from console.celery import _worker_footprint
    _worker_footprint()  # what `celery worker` does at start (celeryd_init)
    import pyarrow.parquet as pq
    from console.services.history import history_compact, history_flush
    from console.services.seed import cluster_seed
    from tests.conftest import SMALL, ingest, report
    cluster_seed(SMALL)
    for round_ in range(3):
        for name, cpu in (("broker-1", 60), ("broker-2", 30), ("broker-3", 10)):
            ingest(report(name, cpu + round_))
        from console.services.ingest import load_reports_fold
        load_reports_fold()
        history_flush(directory=sys.argv[1])
    import datetime
    merged = history_compact(  # as if the day were over: its small files are merged
        directory=sys.argv[1], retention_days=0, today=datetime.date(2100, 1, 1)
    )
    rows = pq.read_table(os.path.join(sys.argv[1], "brokers")).num_rows
    import glob
    files = len(glob.glob(os.path.join(sys.argv[1], "brokers", "date=*", "*.parquet")))
    try:
        import pandas  # noqa: F401
        refused = ""
    except ModuleNotFoundError as exc:
        refused = str(exc)
    loaded = "pandas" in sys.modules
    print(json.dumps(
        {"rows": rows, "files": files, "merged": merged, "pandas": loaded, "refused": refused}
    ))
    """
)


@pytest.mark.django_db
def test_the_worker_writes_and_merges_the_history_without_pandas(tmp_path):
    env = {
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/worker.sqlite3",
        "FULCRUM_DEMO": "1",
        "FULCRUM_VAR_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    import os

    env["REDIS_URL"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6391/0")
    done = subprocess.run(
        [sys.executable, "-c", WORKER_LIKE, str(tmp_path / "history")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=os.getcwd(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["rows"] == 9  # three flushes of three brokers' reports
    assert answer["files"] == 1  # the three flushes' files of the day merged into one
    assert answer["merged"]["merged"] >= 3
    assert answer["pandas"] is False
    assert answer["refused"] == (
        "pandas is kept out of this process: the worker writes Parquet with pyarrow alone; "
        "Spark runs apart"
    )


def test_keep_out_does_nothing_once_the_module_is_imported():
    from console.footprint import KeptOut, keep_out

    assert keep_out("json", why="already here") is False
    assert not any(isinstance(f, KeptOut) and "json" in f.names for f in sys.meta_path)


HEAP = textwrap.dedent(
    """
    import ctypes, json
    from console.footprint import heap_trim
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    blocks = [libc.malloc(64 * 1024) for _ in range(1600)]  # 100 MB below the mmap threshold
    for block in blocks:
        ctypes.memset(block, 1, 64 * 1024)
    pinned = libc.malloc(64)  # above them: the heap's top stays, so free() gives nothing back
    for block in blocks:
        libc.free(block)
    freed = rss_mb()
    trimmed = heap_trim()
    print(json.dumps({"freed": freed, "trimmed": trimmed, "after": rss_mb()}))
    """
)


def test_heap_trim_gives_freed_pages_back():
    done = subprocess.run(
        [sys.executable, "-c", HEAP], capture_output=True, text=True, timeout=60, check=True
    )
    answer = json.loads(done.stdout)
    assert answer["trimmed"] is True
    assert answer["freed"] - answer["after"] > 80  # MB: the 100 MB freed are resident no more
