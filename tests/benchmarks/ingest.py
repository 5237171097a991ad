"""Load report ingest over HTTP against the real web tier, printed as a Markdown table.

    .venv/bin/python -m tests.benchmarks.ingest [--workers 1] [--brokers 64] [--seconds 10]
        [--concurrency 1 8 32]

Starts a Redis (``redis-server`` on a free port), a throwaway SQLite database with ``--brokers``
brokers owning 100 bundles each, and Uvicorn with ``--workers`` processes serving
``console.asgi:application`` (the production command of docs/deployers/at-scale.md). Every
broker then connects (one keep-alive connection each, one after the other, as brokers come up),
and for each concurrency that many simulator-shaped reports (100 bundle stats, about 21 KB, each
broker with its own token) are in flight for
``--seconds``, the brokers taking turns so that a broker's timestamps only grow. The load
generator runs in a process of its own; a shedding tick runs every second in this one and is
timed before the load and during it. Prints reports/s, p50 and p99 latency and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.support import free_port, redis_server, wait_for_port


def report(broker: str, bundles: list[str], at: float | str, rng_seed: int) -> bytes:
    stats = {
        name: {
            "msgRateIn": 100.0 + (i * 7 + rng_seed) % 50,
            "msgRateOut": 200.0,
            "msgThroughputIn": 102_400.0,
            "msgThroughputOut": 204_800.0,
            "topics": 3,
            "producers": 2,
            "consumers": 4,
        }
        for i, name in enumerate(bundles)
    }
    return json.dumps(
        {
            "name": broker,
            "timestamp": at,
            "cpu": {"usage": 40.0 + rng_seed % 30, "limit": 100.0},
            "memory": {"usage": 2048.0, "limit": 8192.0},
            "directMemory": {"usage": 0.0, "limit": 0.0},
            "bandwidthIn": {"usage": 10_240_000.0, "limit": 1_250_000_000.0},
            "bandwidthOut": {"usage": 20_480_000.0, "limit": 1_250_000_000.0},
            "msgRateIn": 10_000.0,
            "msgRateOut": 20_000.0,
            "msgThroughputIn": 10_240_000.0,
            "msgThroughputOut": 20_480_000.0,
            "bundles": bundles,
            "topics": 300,
            "bundleStats": stats,
        }
    ).encode()


_AT = b'"@timestamp"'


class _Broker:
    """One broker: its keep-alive HTTP/1.1 connection and its report bodies.

    A bare client on asyncio streams: the load generator shares the machine's cores with the
    web tier, and an HTTP library's own cost per request (httpx: about 1 ms of CPU) would be
    measured as capacity the server lost."""

    def __init__(self, port: int, token: str, name: str, bodies: list[bytes]) -> None:
        self.port, self.name, self.bodies, self.sent = port, name, bodies, 0
        self.head = (
            "POST /api/load-reports/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Broker {token}\r\nContent-Type: application/json\r\n"
        ).encode()

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def post(self) -> int:
        """Post the next report, dated now; its HTTP status."""
        body = self.bodies[self.sent % len(self.bodies)]
        body = body.replace(_AT, repr(time.time()).encode(), 1)
        self.sent += 1
        self.writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await self.reader.readexactly(length)
        return int(status_line.split()[1])


def drive(
    port: int,
    tokens: dict[str, str],
    owned: dict[str, list[str]],
    concurrency: int,
    seconds: float,
) -> tuple[list[float], dict[int, int], float]:
    """Every broker on a connection of its own, ``concurrency`` reports in flight for
    ``seconds``, the brokers taking turns (a broker's reports never overlap, so its timestamps
    only grow): latencies (s), errors by status, elapsed (s). Runs in a process of its own,
    beside the tick's."""
    latencies: list[float] = []
    errors: dict[int, int] = {}

    async def run() -> float:
        brokers = [
            _Broker(
                port,
                tokens[name],
                name,
                [report(name, owned[name], "@timestamp", s) for s in range(4)],
            )
            for name in sorted(owned)
        ]
        for broker in brokers:  # one after the other, as brokers come up
            await broker.connect()
            await asyncio.sleep(0.005)
        idle: asyncio.Queue[_Broker] = asyncio.Queue()
        for broker in brokers:
            idle.put_nowait(broker)
        stop = time.monotonic() + seconds

        async def sender() -> None:
            while time.monotonic() < stop:
                broker = await idle.get()
                started = time.perf_counter()
                status = await broker.post()
                latencies.append(time.perf_counter() - started)
                if status != 201:
                    errors[status] = errors.get(status, 0) + 1
                idle.put_nowait(broker)

        started = time.monotonic()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        elapsed = time.monotonic() - started
        for broker in brokers:
            broker.writer.close()
        return elapsed

    elapsed = asyncio.run(run())
    return latencies, errors, elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--workers", type=int, default=1, help="uvicorn worker processes (make run's WEB_WORKERS)"
    )
    parser.add_argument("--brokers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fulcrum-ingest-"))
    redis_port, web_port = free_port(), free_port()
    redis = redis_server(redis_port, workdir)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from console.models import Broker, Bundle, Cluster, Namespace, Tenant
    from console.services import shedding_tick_run

    call_command("migrate", verbosity=0)
    cluster = Cluster.objects.create(name="bench")
    tenant = Tenant.objects.create(cluster=cluster, name="t")
    brokers = Broker.objects.bulk_create(
        [Broker(cluster=cluster, name=f"broker-{j:03d}") for j in range(args.brokers)]
    )
    owned: dict[str, list[str]] = {}
    for j, broker in enumerate(brokers):
        namespace = Namespace.objects.create(tenant=tenant, name=f"t/ns{j}")
        width = (1 << 32) // 100
        rows = [
            Bundle(
                namespace=namespace,
                lower=k * width,
                upper=0xFFFFFFFF if k == 99 else (k + 1) * width,
                owner=broker,
            )
            for k in range(100)
        ]
        Bundle.objects.bulk_create(rows)
        owned[broker.name] = [
            r.name for r in Bundle.objects.filter(namespace=namespace).select_related("namespace")
        ]
    from console import selectors

    config = selectors.balancer_config_get()
    config.loop_interval_s = 1  # a tick is due every second of the run
    config.save()
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
    pool = None
    try:
        wait_for_port(web_port, attempts=100)
        # Each broker its own token, as in production (looked up, then cached for 2 s).
        from console.services.credentials import credential_rotate

        tokens = {name: credential_rotate(name, actor=None)[1] for name in owned}
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        pool.submit(drive, web_port, tokens, owned, 4, 2.0).result()  # warm up
        t0 = time.perf_counter()
        shedding_tick_run()
        idle_tick = time.perf_counter() - t0
        print(
            f"{args.brokers} brokers × 100 bundles; uvicorn --workers {args.workers}; "
            f"{os.cpu_count()} cores; {args.seconds:.0f} s per row"
        )
        print()
        print("| concurrency | reports/s | p50 (ms) | p99 (ms) | errors | tick during load (s) |")
        print("|---|---|---|---|---|---|")
        for concurrency in args.concurrency:
            ticks: list[float] = []

            def tick_loop(stop_at: float, ticks: list[float] = ticks) -> None:
                while time.monotonic() < stop_at:
                    t = time.perf_counter()
                    shedding_tick_run()
                    ticks.append(time.perf_counter() - t)
                    time.sleep(1.0)
                from django.db import connection

                connection.close()

            ticker = threading.Thread(target=tick_loop, args=(time.monotonic() + args.seconds,))
            ticker.start()
            latencies, errors, elapsed = pool.submit(
                drive, web_port, tokens, owned, concurrency, args.seconds
            ).result()
            ticker.join()
            latencies.sort()
            p50 = statistics.median(latencies) * 1000
            p99 = latencies[int(0.99 * (len(latencies) - 1))] * 1000
            print(
                f"| {concurrency} | {len(latencies) / elapsed:,.0f} | {p50:.1f} | {p99:.1f} | "
                f"{sum(errors.values())}{' ' + str(errors) if errors else ''} | "
                f"{max(ticks) if ticks else float('nan'):.2f} (idle {idle_tick:.2f}) |"
            )
    finally:
        if pool is not None:
            pool.shutdown()
        web.terminate()
        web.wait(timeout=20)
        redis.terminate()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
