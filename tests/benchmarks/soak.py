"""Soak: the demo stack under load for a long time, printed as it goes and checked at the end.

    .venv/bin/python -m tests.benchmarks.soak [--minutes 30] [--rate 500] [--dashboards 50]

Starts, in a throwaway folder, a private Redis and the processes of ``make run`` (uvicorn,
one Celery worker for every queue, the Django-free beat) on a SQLite database with the demo's
layout (8 brokers, 101 bundles, owned round-robin). Then, for ``--minutes``: load reports are
posted at ``--rate`` per second over HTTP (the brokers' push path, each report for exactly the
bundles its broker owns, as the console says), ``--dashboards`` websockets stay connected, and
every minute a line gives each process's resident memory (MB), the ticks' mean duration, the
reports accepted, the dashboards' report → screen latency (p50/p95, including the fold's 5 s
cadence) and the errors so far. At the end: the memory table (first minute, last, growth), the
latency percentiles, and the invariants — every namespace's hash space partitioned by its
bundles, the ownership the API serves equal to the database's, and the audit replayed from the
start giving the same owners. Exits 1 on any error or violated invariant.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tests.support import (
    dashboard_messages,
    demo_database_with_viewer,
    free_port,
    memory_mb,
    process_tree,
    procfile_commands,
    redis_server,
    wait_for_port,
)

MB = 1024 * 1024


def loaded(pid: int, package: str) -> bool:
    """Whether ``package``'s compiled modules are mapped in ``pid`` (it was imported there)."""
    try:
        return f"site-packages/{package}/" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _seconds(value: Any) -> float:
    """A report time as the rankings carry it (ISO 8601 or seconds) -> seconds; 0 if none."""
    from datetime import datetime

    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def dashboards(port: int, cookie: str, count: int, seconds: float) -> dict[str, Any]:
    """``count`` websockets for ``seconds``: each rankings message's latency (receive time
    minus the newest report it shows), messages received and sockets that dropped."""
    latencies: list[float] = []
    dropped = 0
    received = 0

    async def one(deadline: float) -> None:
        nonlocal dropped, received
        import json

        try:
            async for message in dashboard_messages(port, cookie, deadline, wait_s=5):
                received += 1
                text = message if isinstance(message, str) else message.decode()
                if '"balancer.load_reported"' not in text[:60]:
                    continue
                rows = json.loads(text)["payload"].get("changed", [])
                times = [_seconds(r.get("reportedAt")) for r in rows]
                newest = max((t for t in times if t), default=0.0)
                if newest > 0:
                    latencies.append(time.time() - newest)
        except Exception:
            dropped += 1

    async def run() -> None:
        deadline = time.time() + seconds
        tasks = []
        for _ in range(count):
            tasks.append(asyncio.create_task(one(deadline)))
            await asyncio.sleep(0.02)
        await asyncio.gather(*tasks)

    asyncio.run(run())
    return {"latencies": latencies, "dropped": dropped, "received": received}


class Generator:
    """Load reports at ``rate`` per second, spread over the brokers, each for the bundles its
    broker owns (refreshed from ``/api/ownership/`` every 2 s and after a drift)."""

    def __init__(self, base: str, token: str, rate: float) -> None:
        self.base, self.token, self.rate = base, token, rate
        self.accepted = self.drift = 0
        self.errors: list[str] = []
        self.owners: dict[str, str | None] = {}

    async def run(self, seconds: float, brokers: list[str]) -> None:
        """Each broker reports on its own, one report in flight at a time (as a broker does),
        at ``rate / len(brokers)`` per second."""
        import httpx

        headers = {"Authorization": f"Broker {self.token}"}
        # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them: with
        # httpx's default of 5 s too, a report sent on a connection the server is closing meets
        # a ReadError (seen once in 900,000).
        limits = httpx.Limits(max_connections=len(brokers) + 2, keepalive_expiry=2.0)
        async with httpx.AsyncClient(base_url=self.base, headers=headers, limits=limits) as http:
            await self._ownership(http)
            deadline = time.time() + seconds
            period = len(brokers) / self.rate

            async def refresh() -> None:
                while time.time() < deadline:
                    await asyncio.sleep(2)
                    await self._ownership(http)

            async def broker_loop(broker: str, offset: float) -> None:
                await asyncio.sleep(offset)
                next_at = time.time()
                while time.time() < deadline:
                    await self._post(http, broker)
                    next_at += period
                    await asyncio.sleep(max(0.0, next_at - time.time()))

            await asyncio.gather(
                refresh(),
                *(broker_loop(b, i * period / len(brokers)) for i, b in enumerate(brokers)),
            )

    async def _ownership(self, http: Any) -> None:
        try:
            response = await http.get("/api/ownership/", timeout=30)
            response.raise_for_status()
            self.owners = {b["name"]: b["owner"] for b in response.json()["bundles"]}
        except Exception as exc:
            self.errors.append(f"ownership: {type(exc).__name__}: {exc}")

    async def _post(self, http: Any, broker: str) -> None:
        owned = [b for b, o in self.owners.items() if o == broker]
        index = int(broker.rsplit("-", 1)[-1]) if broker[-1].isdigit() else 1
        cpu = 15 + 6 * index + random.uniform(-3, 3)
        stats = {
            b: {
                "msgRateIn": 200.0 + (hash(b) % 300),
                "msgRateOut": 200.0,
                "msgThroughputIn": 0.2 * MB + (hash(b) % 100) * 1024,
                "msgThroughputOut": 0.2 * MB,
                "topics": 4,
            }
            for b in owned
        }
        body = {
            "name": broker,
            "timestamp": time.time(),
            "cpu": {"usage": cpu, "limit": 100.0},
            "memory": {"usage": 2048.0, "limit": 8192.0},
            "bandwidthIn": {"usage": 0.2 * MB * len(owned), "limit": 125_000_000.0},
            "bandwidthOut": {"usage": 0.2 * MB * len(owned), "limit": 125_000_000.0},
            "msgRateIn": 300.0 * len(owned),
            "msgRateOut": 200.0 * len(owned),
            "msgThroughputIn": 0.2 * MB * len(owned),
            "msgThroughputOut": 0.2 * MB * len(owned),
            "bundles": owned,
            "topics": 4 * len(owned),
            "bundleStats": stats,
        }
        try:
            response = await http.post("/api/load-reports/", json=body, timeout=30)
        except Exception as exc:
            self.errors.append(f"report: {type(exc).__name__}: {exc}")
            return
        if response.status_code == 201:
            self.accepted += 1
            return
        text = response.text
        if response.status_code == 400 and (
            "ownership_drift" in text or "bundle stats for the" in text
        ):
            self.drift += 1  # a bundle moved since the ownership was read: the next one fits
            return
        self.errors.append(f"report: {response.status_code} {text[:200]}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))] if ordered else 0.0


def cycle_seconds(port: int) -> tuple[float, float]:
    """(count, sum) of fulcrum_cycle_duration_seconds from /metrics."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    count = total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "fulcrum_cycle_duration_seconds":
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    count += sample.value
                elif sample.name.endswith("_sum"):
                    total += sample.value
    return count, total


def invariants(initial: dict[str, str | None], base: str, token: str) -> list[str]:
    """What must hold at the end: partitioned hash spaces, the API's ownership equal to the
    database's, and the audit replayed from ``initial`` giving the database's owners."""
    import httpx

    from balancer.bundles import parse_bundle_name
    from console.models import AuditEvent, Bundle, Namespace

    violations: list[str] = []
    for namespace in Namespace.objects.all():
        bounds = sorted(namespace.bundles.values_list("lower", "upper"))
        edges = [lo for lo, _ in bounds] + [bounds[-1][1]] if bounds else []
        if (
            not bounds
            or edges[0] != 0
            or edges[-1] != 0xFFFFFFFF
            or any(a[1] != b[0] for a, b in itertools.pairwise(bounds))
        ):
            violations.append(f"{namespace.name}: bundles do not partition the hash space")
    owners = {b.name: b.owner.name if b.owner else None for b in Bundle.objects.all()}
    served = httpx.get(
        f"{base}/api/ownership/", headers={"Authorization": f"Broker {token}"}, timeout=30
    ).json()
    api = {b["name"]: b["owner"] for b in served["bundles"]}
    if api != owners:
        wrong = sorted(k for k in set(api) | set(owners) if api.get(k) != owners.get(k))[:5]
        violations.append(f"the API's ownership differs from the database's: {wrong}")
    replay = dict(initial)
    for event in AuditEvent.objects.order_by("at", "id"):
        if event.action == AuditEvent.Action.UNLOAD or event.action == AuditEvent.Action.PLACE:
            replay[event.target] = event.destination or None
        elif event.action == AuditEvent.Action.SPLIT:
            parent = parse_bundle_name(event.target)
            replay.pop(event.target, None)
            for name in owners:
                child = parse_bundle_name(name)
                if (
                    child.namespace == parent.namespace
                    and parent.range.lower <= child.range.lower < parent.range.upper
                    and name not in replay
                ):
                    replay[name] = None
    if replay != owners:
        wrong = sorted(k for k in set(replay) | set(owners) if replay.get(k) != owners.get(k))
        violations.append(f"the audit replayed gives other owners for {len(wrong)}: {wrong[:5]}")
    return violations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=500.0, help="load reports per second")
    parser.add_argument("--dashboards", type=int, default=50)
    parser.add_argument("--web-workers", type=int, default=1, help="uvicorn processes")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="fulcrum-soak-"))
    redis_port, web_port = free_port(), free_port()
    redis = redis_server(redis_port, workdir)
    (workdir / "prometheus").mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir}/soak.sqlite3",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "FULCRUM_VAR_DIR": str(workdir),
        "FULCRUM_PULSAR_URL": "",
        "PROMETHEUS_MULTIPROC_DIR": str(workdir / "prometheus"),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_LOG_LEVEL": "WARNING",
        "FULCRUM_METRICS_PUBLIC": "1",  # its scrape of /metrics, on the loopback
    }
    os.environ.update(env)
    broker_names, cookie = demo_database_with_viewer()
    from django.conf import settings

    from console.models import Bundle

    initial = {b.name: b.owner.name if b.owner else None for b in Bundle.objects.all()}
    token = settings.FULCRUM_BROKER_TOKEN
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    logs = {name: open(workdir / f"{name}.log", "w") for name in ("web", "worker", "beat")}  # noqa: SIM115
    # The processes of make run, from the Procfile itself (Redis is the private one above; no
    # simulator: the reports come from this script).
    commands = procfile_commands(
        ("web", "worker", "beat"),
        {"WEB_PORT": str(web_port), "WEB_WORKERS": str(args.web_workers)},
    )
    (workdir / "var").mkdir()
    processes = {
        name: subprocess.Popen(
            cmd, env=env | own, cwd=workdir, stdout=logs[name], stderr=subprocess.STDOUT
        )
        for name, (cmd, own) in commands.items()
    }
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    base = f"http://127.0.0.1:{web_port}"
    failures: list[str] = []
    try:
        wait_for_port(web_port, attempts=150)
        seconds = args.minutes * 60
        print(
            f"soak: {args.minutes:g} min, {args.rate:g} reports/s over {len(broker_names)} "
            "brokers, "
            f"{args.dashboards} dashboards; uvicorn --workers {args.web_workers}; "
            f"{os.cpu_count()} cores; in {workdir}",
            flush=True,
        )
        watching = pool.submit(dashboards, web_port, cookie, args.dashboards, seconds + 10)
        generator = Generator(base, token, args.rate)
        memory: dict[str, list[float]] = {name: [] for name in (*processes, "redis")}
        pss: list[float] = []
        peak: dict[str, float] = {}

        async def sample() -> None:
            # Memory is read every 10 s and each minute gives the median of its readings (a
            # reading during a flush of 30,000 rows is that second's, not the minute's) and
            # the peak so far.
            began = time.time()
            minute = 0
            last_count = last_sum = 0.0
            last_accepted = 0
            while time.time() - began < seconds:
                readings: dict[str, list[float]] = {name: [] for name in memory}
                stack: list[float] = []
                end = min(began + 60 * (minute + 1), began + seconds)
                while time.time() < end - 0.05:
                    await asyncio.sleep(min(10.0, end - time.time()))
                    proportional = 0.0
                    for name, proc in [*processes.items(), ("redis", redis)]:
                        rss, share = memory_mb(process_tree(proc.pid))
                        readings[name].append(rss)
                        peak[name] = max(peak.get(name, 0.0), rss)
                        proportional += share
                    stack.append(proportional)
                minute += 1
                if not stack:  # a last part-minute too short for a reading
                    break
                for name, values in readings.items():
                    memory[name].append(statistics.median(values))
                pss.append(statistics.median(stack))
                count, total = await asyncio.to_thread(cycle_seconds, web_port)
                ticks = count - last_count
                mean_ms = (total - last_sum) / ticks * 1000 if ticks else 0.0
                last_count, last_sum = count, total
                rate = (generator.accepted - last_accepted) / 60
                last_accepted = generator.accepted
                mem = ", ".join(f"{n} {v[-1]:.0f}" for n, v in memory.items())
                print(
                    f"minute {minute}: MB {mem} (medians of {len(stack)} readings); ticks "
                    f"{ticks:.0f} (mean {mean_ms:.0f} ms); reports {rate:.0f}/s accepted (drift "
                    f"{generator.drift}); errors {len(generator.errors)}",
                    flush=True,
                )

        async def both() -> None:
            await asyncio.gather(generator.run(seconds, broker_names), sample())

        asyncio.run(both())
        seen = watching.result(timeout=300)
        latencies = [v * 1000 for v in seen["latencies"]]
        for name, proc in processes.items():
            if proc.poll() is not None:
                failures.append(f"{name} exited with {proc.returncode}")
        time.sleep(3)  # what the dashboards' last disconnects made the server log, logged
        for name in processes:
            logs[name].flush()
            text = (workdir / f"{name}.log").read_text(errors="replace")
            crashes = text.count("Traceback")
            if crashes:
                first = text[text.index("Traceback") :].splitlines()
                last_line = next((x for x in first[1:] if x and not x.startswith(" ")), "")
                failures.append(f"{name}: {crashes} traceback(s) in its log, e.g. {last_line}")
        failures += generator.errors[:20]
        if seen["dropped"]:
            failures.append(f"{seen['dropped']} dashboard(s) lost their websocket")
        violations = invariants(initial, base, token)
        print()
        # Growth is measured from minute 5 (or the first, in a shorter run): the first minutes
        # load what each process needs once (pyarrow at the first flush, the caches).
        warm = min(4, len(next(iter(memory.values()))) - 1)
        print(
            f"| process (RSS, MB; a minute's median) | minute 1 | minute {warm + 1} | last | "
            f"growth since minute {warm + 1} | peak reading |"
        )
        print("|---|---|---|---|---|---|")
        for name, values in memory.items():
            if values:
                first, settled, last = values[0], values[warm], values[-1]
                print(
                    f"| {name} | {first:.0f} | {settled:.0f} | {last:.0f} | "
                    f"{(last - settled) / settled:+.1%} | {peak[name]:.0f} |"
                )
        total = [sum(v[i] for v in memory.values() if v) for i in (0, warm, -1)]
        print(
            f"| **total** | **{total[0]:.0f}** | **{total[1]:.0f}** | **{total[2]:.0f}** | "
            f"{(total[2] - total[1]) / total[1]:+.1%} | |"
        )
        print(
            f"| total PSS (shared pages once) | {pss[0]:.0f} | {pss[warm]:.0f} | {pss[-1]:.0f} | "
            f"{(pss[-1] - pss[warm]) / pss[warm]:+.1%} | |"
        )
        parts = list(Path(settings.FULCRUM_HISTORY_DIR).glob("brokers/date=*/*.parquet"))
        worker = process_tree(processes["worker"].pid)  # keep-running and the worker below it
        print(
            f"worker: pandas "
            f"{'loaded' if any(loaded(p, 'pandas') for p in worker) else 'kept out'}; "
            f"history: {len(parts)} Parquet file(s) of load reports"
        )
        print()
        print(
            f"reports: {generator.accepted} accepted ({generator.accepted / seconds:.0f}/s), "
            f"{generator.drift} refused for ownership drift (resent later)"
        )
        print(
            f"dashboards: {args.dashboards}, {seen['received']} messages; report → dashboard "
            f"p50 {percentile(latencies, 0.5):.0f} ms, p95 {percentile(latencies, 0.95):.0f} ms, "
            f"p99 {percentile(latencies, 0.99):.0f} ms (the fold publishes every 5 s)"
        )
        count, total = cycle_seconds(web_port)
        print(f"ticks: {count:.0f}, mean {total / count * 1000 if count else 0:.0f} ms")
        print(f"errors: {len(failures)}")
        for failure in failures[:20]:
            print(f"  {failure}")
        print(f"invariants: {len(violations)} violation(s)")
        for violation in violations:
            print(f"  {violation}")
        return 1 if failures or violations else 0
    finally:
        pool.shutdown(cancel_futures=True)
        tree = [pid for proc in processes.values() for pid in process_tree(proc.pid)]
        for proc in processes.values():
            proc.terminate()
        for proc in processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        # uvicorn's workers may outlive their parent while their websockets close: Redis stops
        # after them, or their last reads meet a refused connection.
        deadline = time.time() + 30
        while time.time() < deadline and any(Path(f"/proc/{pid}").exists() for pid in tree):
            time.sleep(0.2)
        for handle in logs.values():
            handle.close()
        redis.terminate()
        if os.environ.get("FULCRUM_SOAK_KEEP") != "1":
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
