"""Fulcrum at the size of a production Pulsar cluster, end to end (issue 26).

    .venv/bin/python -m tests.benchmarks.scale [--brokers 200] [--namespaces 250]
        [--bundles-per-namespace 200] [--failure-domains 5] [--minutes 15]
        [--audit-rows 1000000] [--database postgres|sqlite]

Starts, in a throwaway folder, a private PostgreSQL (``scripts/pg-private``) and Redis, and the
processes of ``make run`` from their Procfile lines: the simulated Pulsar cluster of the size
asked (one process serving every broker's port), uvicorn, one Celery worker for every queue,
beat. Fills the audit with ``--audit-rows`` rows (observed moves, as a long-lived cluster's).
Fulcrum takes control at its first observation, as ``make run`` does; then for ``--minutes``
it observes, balances and serves while this prints, per step:

- the observation pass: wall time (s), Pulsar calls and bytes read (the connection's summary);
- the tick: snapshot, plan and apply (s; the worker's ``shedding tick:`` lines);
- the executor: moves sent and verified per minute (PulsarMove rows);
- the history flush (s; Celery's ``succeeded in`` of ``history_flush``);
- each page in Chromium: time to first contentful paint and to network idle (s), bytes
  transferred with the browser's cache warm (the second visit) and cold, JavaScript errors;
- one dashboard's websocket: bytes per second received;
- each process's memory (PSS, MB: shared pages counted once) and the stack's total, and the CPU
  each used over the run (% of one core: how the machine's cores were shared).

Each figure is printed with its goal (``GOALS``) and whether it meets it; exits 1 if a process
died or a page failed. ``tests/test_scale_short.py`` runs a 500-bundle slice of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import (
    cpu_seconds,
    dashboard_messages,
    free_port,
    free_port_block,
    memory_mb,
    private_postgres,
    private_postgres_stop,
    process_tree,
    procfile_commands,
    redis_server,
    stack_env,
    wait_for_port,
)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ("web", "worker", "beat", "simulator")
# The goals of issue 26 at 200 brokers x 50,000 bundles on a 2-core machine.
GOALS = {
    "observation pass (s)": 5.0,
    "tick (s)": 2.0,
    "page first render (s)": 2.0,
    "page bytes, warm cache (MB)": 1.0,
    "websocket (KB/s per dashboard)": 20.0,
    "memory, whole stack (MB)": 1536.0,
}


@dataclass
class Stack:
    """The running stack: its folder, environment, processes and web port."""

    folder: Path
    env: dict[str, str]
    web_port: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra: list[Any] = field(default_factory=list)  # Redis

    def log(self, name: str) -> str:
        path = self.folder / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def dead(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is not None]


@dataclass
class Measured:
    """What one run measured (``measure``), printed by ``report``."""

    passes: list[dict[str, Any]] = field(default_factory=list)  # the connection's summaries
    ticks: list[tuple[float, float, float]] = field(default_factory=list)  # snapshot, plan, apply
    flushes: list[float] = field(default_factory=list)  # s
    executor: dict[str, float] = field(default_factory=dict)  # moves per minute
    pages: list[dict[str, Any]] = field(default_factory=list)
    websocket_bytes_per_s: float = float("nan")
    peak_mb: dict[str, float] = field(default_factory=dict)  # PSS per program
    total_peak_mb: float = 0.0
    dead: list[str] = field(default_factory=list)
    said: str = ""  # the dead programs' last words
    storage: dict[str, float] = field(default_factory=dict)  # MB: database, Redis, history
    cpu_share: dict[str, float] = field(default_factory=dict)  # % of one core, per program


def storage_mb(stack: Stack, minutes: float) -> dict[str, float]:
    """What the run stored (MB): the database's size, Redis' used memory, the Parquet
    history's bytes on disk and that per day at the run's rate."""
    import redis
    from django.db import connection

    found: dict[str, float] = {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("select pg_database_size(current_database())")
            found["database"] = cursor.fetchone()[0] / 1e6
            cursor.execute("select pg_total_relation_size('console_auditevent')")
            found["  of which the audit"] = cursor.fetchone()[0] / 1e6
    found["redis (used_memory)"] = (
        redis.Redis.from_url(stack.env["REDIS_URL"]).info("memory")["used_memory"] / 1e6
    )
    history = stack.folder / "history"
    size = sum(f.stat().st_size for f in history.rglob("*") if f.is_file()) / 1e6
    found["history on disk"] = size
    found["history per day (at this rate)"] = size * 1440 / max(minutes, 1e-9)
    return found


def _manage(env: dict[str, str], *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=timeout,
        capture_output=True,
        text=True,
    )
    return done.stdout


@contextlib.contextmanager
def stack_started(
    folder: Path, size: list[str], database: str, *, step_s: float, observe_s: float
) -> Iterator[Stack]:
    """The stack of ``make run`` on private ports and files under ``folder``, attached to a
    simulated cluster of ``size`` (the simulator's size options), on ``database``."""
    brokers = int(size[size.index("--brokers") + 1])
    redis_port = free_port()
    pulsar_port = free_port_block(brokers)
    web_port = free_port()
    (folder / "logs").mkdir()
    (folder / "prometheus").mkdir()
    redis = redis_server(redis_port, folder)
    pg_dir = folder / "pg"
    url = (
        private_postgres(pg_dir)
        if database == "postgres"
        else f"sqlite:///{folder / 'fulcrum.sqlite3'}"
    )
    env = stack_env(
        folder,
        database_url=url,
        redis_port=redis_port,
        pulsar_port=pulsar_port,
        token="scale-benchmark-token",
        FULCRUM_PULSAR_OBSERVE_S=str(observe_s),
        FULCRUM_SIM_STEP_S=str(step_s),
        FULCRUM_SIM_ARGS=" ".join(size),
        WEB_PORT=str(web_port),
    )
    stack = Stack(folder, env, web_port, extra=[redis])
    try:
        _manage(env, "migrate", "--noinput", "-v0")
        _manage(env, "seed_demo")
        commands = procfile_commands(PROGRAMS, env)
        for name in PROGRAMS:
            argv, own = commands[name]
            with (folder / "logs" / f"{name}.log").open("wb") as out:
                stack.processes[name] = subprocess.Popen(
                    argv,
                    cwd=ROOT,
                    env={**env, **own},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        if not wait_for_port(web_port, attempts=300):
            raise RuntimeError("the web process did not listen\n" + stack.log("web")[-2000:])
        yield stack
    finally:
        for process in stack.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in stack.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        redis.terminate()
        redis.wait(timeout=10)
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        if database == "postgres":
            private_postgres_stop(pg_dir)


def _django(env: dict[str, str]) -> None:
    """Set this process up as the stack's Django (its database and Redis)."""
    for key in (
        "DATABASE_URL",
        "REDIS_URL",
        "FULCRUM_DEMO",
        "FULCRUM_VAR_DIR",
        "FULCRUM_PULSAR_URL",
    ):
        os.environ[key] = env[key]
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    import django

    django.setup()


def audit_fill(rows: int) -> float:
    """``rows`` observed moves in the audit, over the last 30 days, in one statement per
    100,000 rows; seconds taken."""
    from django.db import connection, transaction
    from django.utils import timezone

    from console.models import AuditEvent, Broker, Bundle

    started = time.monotonic()
    brokers = list(Broker.objects.values_list("name", flat=True)) or ["b"]
    targets = [
        b.name
        for b in Bundle.objects.select_related("namespace").order_by("namespace__name", "lower")
    ] or ["t"]
    now = timezone.now()
    done = 0
    while done < rows:
        batch = min(100_000, rows - done)
        with transaction.atomic():
            AuditEvent.objects.bulk_create(
                [
                    AuditEvent(
                        at=now - timezone.timedelta(seconds=30 * 86400 * (done + i) / rows + 3600),
                        action=AuditEvent.Action.OBSERVED,
                        target=targets[(done + i) % len(targets)],
                        source=brokers[(done + i) % len(brokers)],
                        destination=brokers[(done + i + 7) % len(brokers)],
                        reason="Pulsar moved it (observed)",
                        load_after={},  # filled long ago, as every past row's
                    )
                    for i in range(batch)
                ],
                batch_size=10_000,
            )
        done += batch
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return time.monotonic() - started


def in_control(stack: Stack, bundles: int, timeout_s: float) -> float:
    """Wait until Fulcrum observed every bundle and holds control; seconds waited."""
    from console.models import Bundle, PulsarConnection

    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        connection = PulsarConnection.objects.first()
        if (
            connection is not None
            and connection.mode == PulsarConnection.Mode.CONTROL
            and Bundle.objects.filter(owner__isnull=False).count() >= bundles * 0.99
        ):
            return time.monotonic() - started
        if stack.dead():
            break
        time.sleep(2)
    raise RuntimeError(
        f"not in control of {bundles} bundles after {timeout_s:.0f} s; dead: {stack.dead()}\n"
        + stack.log("worker")[-3000:]
    )


def passes_seen(since: Any) -> list[dict[str, Any]]:
    """The observation passes the connection recorded (its summary is one pass, replaced by
    the next): sampled by the caller; here, the current one."""
    from console.models import PulsarConnection

    connection = PulsarConnection.objects.first()
    if connection is None or connection.observed_at is None or connection.observed_at <= since:
        return []
    return [{"at": connection.observed_at, **(connection.observation or {})}]


def ticks(worker_log: str) -> list[tuple[float, float, float]]:
    """(snapshot, plan, apply) seconds of every tick the worker logged."""
    return [
        (float(a), float(b), float(c))
        for a, b, c in re.findall(
            r"shedding tick: snapshot ([\d.]+) s, plan ([\d.]+) s, apply ([\d.]+) s", worker_log
        )
    ]


def flushes(worker_log: str) -> list[float]:
    """Seconds of every history flush the worker ran (Celery's own line)."""
    return [
        float(s) for s in re.findall(r"history_flush\[[^\]]+\] succeeded in ([\d.]+)s", worker_log)
    ]


def executor_rates(since: Any) -> dict[str, float]:
    """Moves sent and verified per minute since ``since``."""
    from django.utils import timezone

    from console.models import PulsarMove

    minutes = max((timezone.now() - since).total_seconds() / 60, 1e-9)
    sent = PulsarMove.objects.filter(sent_at__gte=since).count()
    verified = PulsarMove.objects.filter(
        finished_at__gte=since,
        outcome__in=[
            PulsarMove.Outcome.AS_PLANNED,
            PulsarMove.Outcome.ELSEWHERE,
            PulsarMove.Outcome.UNOWNED,
            PulsarMove.Outcome.NOOP,
        ],
    ).count()
    return {"sent/min": sent / minutes, "verified/min": verified / minutes}


def drain_busiest() -> tuple[Any, tuple[str, int]]:
    """Drain the broker owning the most bundles, as the demo admin (its unloads go through
    the executor at its cap); (when, (broker, bundles))."""
    from django.contrib.auth.models import User
    from django.db.models import Count
    from django.utils import timezone

    from console.models import Broker
    from console.services.brokers import broker_state_set

    busiest = (
        Broker.objects.annotate(n=Count("bundles")).order_by("-n").values_list("name", "n").first()
    )
    assert busiest is not None
    from console.errors import ConsoleError

    now = timezone.now()
    for attempt in range(10):
        try:
            broker_state_set(
                busiest[0],
                Broker.State.DRAINING,
                actor=User.objects.get(username="admin"),
                note="scale benchmark: the executor at its cap",
            )
            break
        except ConsoleError as exc:
            # The loop moved a bundle between the drain's plan and its apply (409, the plan
            # refused as stale): asked again, as an operator would.
            if exc.status != 409 or attempt == 9:
                raise
            time.sleep(1)
    return now, busiest


def websocket_rate(port: int, cookie: str, seconds: float) -> float:
    """Bytes per second one dashboard's websocket received over ``seconds``."""
    received = 0

    async def run() -> None:
        nonlocal received
        async for message in dashboard_messages(port, cookie, time.time() + seconds):
            received += len(message.encode() if isinstance(message, str) else message)

    asyncio.run(run())
    return received / seconds


def pages_list() -> list[tuple[str, str]]:
    """(name, path) of the pages measured, with real names from the database."""
    from console.models import Broker, Decision, Namespace

    broker = Broker.objects.order_by("name").values_list("name", flat=True).first() or "none"
    namespace = Namespace.objects.order_by("name").values_list("name", flat=True).first() or "x"
    decision = Decision.objects.order_by("-at").values_list("pk", flat=True).first() or 1
    return [
        ("dashboard", "/"),
        ("bundle map", "/bundles/"),
        ("failure domains", "/domains/"),
        ("a broker", f"/brokers/{broker}/"),
        ("a namespace", f"/namespaces/{namespace}/bundles/"),
        ("audit, newest", "/audit/"),
        ("audit, filtered", f"/audit/?action=observed&namespace={namespace}"),
        ("a decision", f"/decisions/{decision}/"),
        ("config", "/config/"),
        ("pulsar", "/pulsar/"),
    ]


def pages_measure(
    port: int, password: str, pages: list[tuple[str, str]], screenshots: Path | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Every page of ``pages`` (``pages_list``) in Chromium as the demo admin, cold then warm;
    and the session cookie (for the websocket)."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{port}"
    results = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        # Bytes over the network per request (CDP), and which request was the document.
        sizes: dict[str, int] = {}
        kinds: dict[str, str] = {}
        cdp.on(
            "Network.loadingFinished",
            lambda e: sizes.__setitem__(e["requestId"], int(e["encodedDataLength"])),
        )
        cdp.on(
            "Network.responseReceived",
            lambda e: kinds.__setitem__(e["requestId"], str(e.get("type", ""))),
        )
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", password)
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_load_state("networkidle")
        for name, path in pages:
            row: dict[str, Any] = {"page": name, "path": path}
            for visit in ("cold", "warm"):
                if visit == "cold":
                    cdp.send("Network.clearBrowserCache")
                sizes.clear()
                kinds.clear()
                errors.clear()
                started = time.monotonic()
                response = page.goto(base + path, wait_until="commit", timeout=120_000)
                page.wait_for_load_state("networkidle", timeout=120_000)
                idle = time.monotonic() - started
                total = sum(sizes.values())
                if response is not None and not any(kinds.get(r) == "Document" for r in sizes):
                    total += len(response.body())  # the document, when CDP missed it
                # Chromium records the first contentful paint once the page is painted, which
                # on a loaded machine can come after network idle: wait for it (at most 10 s),
                # and take the first paint when a page paints nothing contentful.
                with contextlib.suppress(PlaywrightError):
                    page.wait_for_function(
                        "() => performance.getEntriesByType('paint').length > 0", timeout=10_000
                    )
                paint = page.evaluate(
                    "() => (performance.getEntriesByName('first-contentful-paint')[0]"
                    " || performance.getEntriesByName('first-paint')[0] || {}).startTime || null"
                )
                row[f"{visit} status"] = response.status if response else 0
                row[f"{visit} first render (s)"] = (paint or 0) / 1000
                row[f"{visit} idle (s)"] = idle
                row[f"{visit} MB"] = total / 1e6
                row[f"{visit} errors"] = list(errors)
            if screenshots is not None:
                screenshots.mkdir(parents=True, exist_ok=True)
                slug = re.sub(r"[^a-z]+", "-", name).strip("-")
                page.screenshot(path=str(screenshots / f"scale-{slug}.png"), full_page=False)
            results.append(row)
        cookie = next(
            f"{c['name']}={c['value']}" for c in context.cookies() if c["name"] == "sessionid"
        )
        browser.close()
    return results, cookie


def stack_memory(stack: Stack) -> dict[str, float]:
    """PSS (MB) of each program's process tree, and of Redis and PostgreSQL."""
    found = {n: memory_mb(process_tree(p.pid))[1] for n, p in stack.processes.items()}
    found["redis"] = memory_mb([stack.extra[0].pid])[1]
    pg = subprocess.run(
        ["pgrep", "-f", str(stack.folder / "pg")], capture_output=True, text=True
    ).stdout.split()
    pids = [q for p in pg for q in process_tree(int(p))]
    if pids:
        found["postgres"] = memory_mb(sorted(set(pids)))[1]
    return found


def stack_cpu(stack: Stack) -> dict[str, float]:
    """CPU seconds (user + system) each program's process tree has used so far, and
    PostgreSQL's and Redis' (``/proc/<pid>/stat``; a process gone counts 0)."""
    found = {n: cpu_seconds(process_tree(p.pid)) for n, p in stack.processes.items()}
    found["redis"] = cpu_seconds([stack.extra[0].pid])
    pg = subprocess.run(
        ["pgrep", "-f", str(stack.folder / "pg")], capture_output=True, text=True
    ).stdout.split()
    found["postgres"] = cpu_seconds(sorted({q for p in pg for q in process_tree(int(p))}))
    return found


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.scale")
    parser.add_argument("--brokers", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=250)
    parser.add_argument("--bundles-per-namespace", type=int, default=200)
    parser.add_argument("--failure-domains", type=int, default=5)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--audit-rows", type=int, default=1_000_000)
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--step-seconds", type=float, default=6.0, help="wall s per trace minute")
    parser.add_argument("--observe-seconds", type=float, default=5.0)
    parser.add_argument("--websocket-seconds", type=float, default=60.0)
    parser.add_argument(
        "--drain-minutes",
        type=float,
        default=3.0,
        help="the run's last minutes: the broker owning most bundles is drained (the "
        "executor's throughput at its cap); 0: none",
    )
    parser.add_argument("--no-pages", action="store_true", help="skip Chromium")
    parser.add_argument("--keep", action="store_true", help="keep the folder (logs)")
    parser.add_argument(
        "--screenshots", type=Path, default=None, help="save each page's screenshot here"
    )
    return parser.parse_args(argv)


def measure(argv: list[str] | None = None) -> Measured:
    """Start the stack of the size ``argv`` asks (``python -m tests.benchmarks.scale -h``), let
    it run, measure every step; the folder is removed unless ``--keep``."""
    args = _arguments(argv)
    size = [
        "--brokers",
        str(args.brokers),
        "--namespaces",
        str(args.namespaces),
        "--bundles-per-namespace",
        str(args.bundles_per_namespace),
        "--failure-domains",
        str(args.failure_domains),
    ]
    bundles = args.namespaces * args.bundles_per_namespace
    folder = Path(tempfile.mkdtemp(prefix="fulcrum-scale-"))
    folder.chmod(0o755)  # PostgreSQL's own user keeps its data here
    load = os.getloadavg()
    print(
        f"scale: {args.brokers} brokers, {args.failure_domains} failure domains, "
        f"{args.namespaces} namespaces x {args.bundles_per_namespace} bundles = {bundles:,} "
        f"bundles; {args.database}; {args.minutes:g} min; {os.cpu_count()} cores; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; folder {folder}",
        flush=True,
    )
    measured = Measured()
    try:
        with stack_started(
            folder,
            size,
            args.database,
            step_s=args.step_seconds,
            observe_s=args.observe_seconds,
        ) as stack:
            _django(stack.env)
            from django.utils import timezone

            waited = in_control(stack, bundles, timeout_s=600)
            print(f"in control of {bundles:,} bundles after {waited:.0f} s", flush=True)
            if args.audit_rows:
                # After the first observation: the rows name the cluster's own bundles and
                # brokers, so that the audit's filters find some.
                took = audit_fill(args.audit_rows)
                print(f"audit: {args.audit_rows:,} rows written in {took:.1f} s", flush=True)
            since = timezone.now()
            cpu_from, cpu_started = stack_cpu(stack), time.monotonic()
            passes: dict[Any, dict[str, Any]] = {}
            deadline = time.monotonic() + args.minutes * 60
            drain_at = deadline - args.drain_minutes * 60 if args.drain_minutes > 0 else None
            drained_since = None
            next_line = time.monotonic() + 60
            while time.monotonic() < deadline and not stack.dead():
                for seen in passes_seen(since):
                    passes[seen["at"]] = seen
                memory = stack_memory(stack)
                for name, mb in memory.items():
                    measured.peak_mb[name] = max(measured.peak_mb.get(name, 0.0), mb)
                measured.total_peak_mb = max(measured.total_peak_mb, sum(memory.values()))
                if drain_at is not None and time.monotonic() >= drain_at:
                    drained_since, drained = drain_busiest()
                    print(f"  draining {drained[0]} ({drained[1]} bundles)", flush=True)
                    drain_at = None
                if time.monotonic() >= next_line:
                    durations = [p.get("durationS", 0.0) for p in passes.values()]
                    print(
                        f"  {len(passes)} passes (median {_median(durations):.2f} s), "
                        f"{len(ticks(stack.log('worker')))} ticks, memory "
                        f"{sum(memory.values()):.0f} MB",
                        flush=True,
                    )
                    next_line += 60
                time.sleep(1)
            measured.passes = list(passes.values())
            cpu_to, elapsed = stack_cpu(stack), time.monotonic() - cpu_started
            measured.cpu_share = {
                n: 100 * (cpu_to[n] - cpu_from.get(n, 0.0)) / elapsed for n in cpu_to
            }
            measured.executor = executor_rates(drained_since or since)
            measured.dead = stack.dead()
            if not args.no_pages and not measured.dead:
                password = (folder / "demo-admin-password").read_text().strip()
                measured.pages, cookie = pages_measure(
                    stack.web_port, password, pages_list(), args.screenshots
                )
                measured.websocket_bytes_per_s = websocket_rate(
                    stack.web_port, cookie, args.websocket_seconds
                )
            measured.storage = storage_mb(stack, (timezone.now() - since).total_seconds() / 60)
            log = stack.log("worker")
            measured.ticks = ticks(log)
            measured.flushes = flushes(log)
            measured.dead = stack.dead()
            measured.said = "\n".join(
                f"--- {name}\n{stack.log(name)[-3000:]}" for name in measured.dead
            )
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return measured


def main(argv: list[str] | None = None) -> int:
    return 1 if report(measure(argv)) else 0


def _goal(value: float, goal: float) -> str:
    if value != value:  # nan
        return "not measured"
    return "meets" if value <= goal else "MISSES"


def report(measured: Measured) -> bool:
    """Print the table; whether the run failed (a process died, a page failed)."""
    passes = measured.passes
    durations = [p.get("durationS", 0.0) for p in passes]
    calls = [float((p.get("calls") or {}).get("total", 0)) for p in passes]
    read = [float((p.get("calls") or {}).get("bytes", 0)) for p in passes]
    tick = measured.ticks
    print("\nstep                                   median      p95      max   goal")
    rows = [
        ("observation pass (s)", durations, GOALS["observation pass (s)"]),
        ("  reading Pulsar (s)", [float(p.get("readS", 0.0)) for p in passes], None),
        ("    Fulcrum's CPU in it (s)", [float(p.get("readCpuS", 0.0)) for p in passes], None),
        (
            "  writing the store and live load (s)",
            [float(p.get("applyS", 0.0)) for p in passes],
            None,
        ),
        ("    Fulcrum's CPU in it (s)", [float(p.get("applyCpuS", 0.0)) for p in passes], None),
        ("  Pulsar calls per pass", calls, None),
        ("  MB read per pass", [b / 1e6 for b in read], None),
        ("tick (s)", [sum(t) for t in tick], GOALS["tick (s)"]),
        ("  snapshot (s)", [t[0] for t in tick], None),
        ("  plan (s)", [t[1] for t in tick], None),
        ("  apply (s)", [t[2] for t in tick], None),
        ("history flush (s)", measured.flushes, None),
    ]
    for name, values, goal in rows:
        line = f"{name:36} {_median(values):8.3f} {_p95(values):8.3f} "
        line += f"{max(values) if values else float('nan'):8.3f}"
        if goal is not None:
            line += f"   <= {goal:g}: {_goal(_p95(values), goal)} (p95)"
        print(line + f"   [{len(values)} samples]")
    for name, value in measured.executor.items():
        print(f"executor, moves {name:20} {value:8.1f}   (while a broker drains)")
    failed = bool(measured.dead)
    if measured.pages:
        print(
            "\npage                 status  first render (s)  network idle (s)  MB warm  MB cold"
            "  JS errors"
        )
        for row in measured.pages:
            ok = row["warm status"] == 200 and not row["warm errors"] and not row["cold errors"]
            failed |= not ok
            print(
                f"{row['page']:20} {row['warm status']:6}  {row['warm first render (s)']:16.2f}"
                f"  {row['warm idle (s)']:16.2f}  {row['warm MB']:7.3f}  {row['cold MB']:7.3f}"
                f"  {len(row['warm errors']) + len(row['cold errors'])}"
                f"  {_goal(row['warm first render (s)'], GOALS['page first render (s)'])} render,"
                f" {_goal(row['warm MB'], GOALS['page bytes, warm cache (MB)'])} bytes"
            )
            for error in row["warm errors"] + row["cold errors"]:
                print(f"    {error[:300]}")
    rate = measured.websocket_bytes_per_s / 1000
    print(
        f"\nwebsocket, one dashboard: {rate:.1f} KB/s   <= 20: "
        f"{_goal(rate, GOALS['websocket (KB/s per dashboard)'])}"
    )
    print(
        "memory, peak PSS (MB): "
        + ", ".join(f"{n} {v:.0f}" for n, v in sorted(measured.peak_mb.items()))
    )
    if measured.cpu_share:
        print(
            f"CPU over the run, % of one core ({os.cpu_count()} cores in all): "
            + ", ".join(f"{n} {v:.0f}" for n, v in sorted(measured.cpu_share.items()))
        )
    print(
        f"memory, whole stack at its peak: {measured.total_peak_mb:.0f} MB   <= 1536: "
        f"{_goal(measured.total_peak_mb, GOALS['memory, whole stack (MB)'])}"
    )
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("stored (MB): " + ", ".join(f"{n} {v:.1f}" for n, v in measured.storage.items()))
    if measured.dead:
        print(f"DIED: {', '.join(measured.dead)}\n{measured.said}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
