"""The live path with many dashboards open, printed as a Markdown table.

    .venv/bin/python -m tests.benchmarks.live_path [--dashboards 1 50 200] [--rounds 20]

Starts a Redis (the channel layer), a throwaway SQLite database with the demo's layout (8
brokers, 11 namespaces, 101 bundles, owned), and Uvicorn with 3 workers serving
``console.asgi:application`` (the production command). For each dashboard count, that many
websockets (each with a logged-in operator's session cookie, spread over the workers as the
kernel accepts them) connect to ``/ws/cluster/`` from a process of their own; then, ``--rounds``
times, one broker posts a load report over HTTP and the fold that publishes the rankings runs at
once (``load_reports_fold``, as beat runs it every 5 s). Latency: from the report's 201 to each
dashboard's receipt of the new rankings (the same machine's clock). Bytes: what each dashboard
received per rankings message, and per second at the demo's cadence (rankings every 5 s, a CV
sample and a decision every 10 s).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.support import (
    dashboard_messages,
    demo_database_with_viewer,
    free_port,
    redis_server,
    wait_for_port,
)


def listen(port: int, cookie: str, count: int, expect: int) -> list:
    """``count`` websockets; each records (receive time, bytes) of its first ``expect``
    rankings messages. Returns [[(t, bytes), ...] per socket]."""

    async def one() -> list[tuple[float, int]]:
        got: list[tuple[float, int]] = []
        # Up to 120 s for each message, as long as they keep coming.
        messages = dashboard_messages(port, cookie, time.time() + 120 * expect, wait_s=120)
        async for message in messages:
            text = message if isinstance(message, str) else message.decode()
            if '"balancer.load_reported"' in text[:60]:
                got.append((time.time(), len(text.encode())))
            if len(got) >= expect:
                await messages.aclose()
                break
        return got

    async def run() -> list:
        tasks = []
        for _ in range(count):
            tasks.append(asyncio.create_task(one()))
            await asyncio.sleep(0.01)
        return await asyncio.gather(*tasks)

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dashboards", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fulcrum-live-"))
    redis_port, web_port = free_port(), free_port()
    redis = redis_server(redis_port, workdir)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir}/live.sqlite3",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    names, cookie = demo_database_with_viewer()
    from django.conf import settings

    from console.models import Broker, Bundle
    from console.services.ingest import load_reports_fold

    brokers = list(Broker.objects.filter(name__in=names).order_by("name"))
    web = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "uvicorn"),
            "console.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(web_port),
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env=env,
    )
    import requests

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    try:
        wait_for_port(web_port, attempts=100)
        session = requests.Session()
        session.headers["Authorization"] = f"Broker {settings.FULCRUM_BROKER_TOKEN}"
        print(
            f"{len(brokers)} brokers, {Bundle.objects.count()} bundles; uvicorn --workers "
            f"{args.workers}; {os.cpu_count()} cores; {args.rounds} rankings per dashboard count"
        )
        print()
        print(
            "| dashboards | report → dashboard p50 (ms) | p95 (ms) | max (ms) | bytes per rankings "
            "message | bytes/s per dashboard at the demo's cadence |"
        )
        print("|---|---|---|---|---|---|")
        for count in args.dashboards:
            future = pool.submit(listen, web_port, cookie, count, args.rounds)
            time.sleep(2 + count * 0.02)  # every socket connected and in the group
            sent: list[float] = []
            for r in range(args.rounds):
                name = brokers[r % len(brokers)].name
                body = {
                    "name": name,
                    "cpu": {"usage": 20.0 + r, "limit": 100.0},
                    "bandwidthIn": {"usage": 1e6, "limit": 1.25e8},
                    "bandwidthOut": {"usage": 2e6, "limit": 1.25e8},
                }
                response = session.post(
                    f"http://127.0.0.1:{web_port}/api/load-reports/", json=body, timeout=10
                )
                assert response.status_code == 201, response.text
                sent.append(time.time())
                load_reports_fold()
                time.sleep(0.5)
            received = future.result(timeout=300)
            latencies = sorted(
                (got[i][0] - sent[i]) * 1000 for got in received for i in range(len(got))
            )
            sizes = [b for got in received for _, b in got]
            size = statistics.mean(sizes)
            # Demo cadence: rankings every 5 s; a CV sample (~80 B) and a decision (~300 B)
            # every 10 s.
            per_second = size / 5 + (80 + 300) / 10
            print(
                f"| {count} | {statistics.median(latencies):.0f} "
                f"| {latencies[int(0.95 * (len(latencies) - 1))]:.0f} | {latencies[-1]:.0f} "
                f"| {size:,.0f} | {per_second:,.0f} |"
            )
    finally:
        pool.shutdown()
        web.terminate()
        try:
            web.wait(timeout=20)
        except subprocess.TimeoutExpired:  # workers still closing their websockets
            web.kill()
            web.wait()
        redis.terminate()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
