"""More than one machine's worth of processes on one PostgreSQL and one Redis (issue 26, item 3):
two web processes, and two Celery workers that share the ``celery`` queue (ticks, folds,
flushes) while the ``pulsar`` queue (the observation pass and the executor) is only worker A's
and the ``reports`` queue (Spark runs) only worker B's; one beat; the simulated Pulsar cluster.
Every program under ``keep-running``, as ``make run`` starts it, under honcho.

While the pages are polled on both web processes: web 1 is killed (SIGKILL) and web 2 answers
throughout; the worker holding the tick's lease is killed mid-tick; worker A mid-pass (the
executor's sends happen in the pass); worker B mid-report-run. Then: one tick per interval (no
two ticks closer than the interval's 0.9, whichever worker ran them), the ticks and passes go on
after each kill, no move reached Pulsar more often than Fulcrum made it, none was lost, and the
report run killed is not lost: it ends (failed, saying why), and the next one succeeds."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support import (
    free_port,
    free_port_block,
    private_postgres,
    private_postgres_stop,
    process_tree,
    procfile_commands,
    redis_server,
    stack_env,
    wait_for_port,
)
from tests.test_faults_stack import _sends

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "multi-process-token"
INTERVAL_S = 3.0  # beat's; the balancer config's loop interval (10 s) decides when one is due


def _programs(root: int) -> dict[str, int]:
    """The programs under honcho, by their Procfile name's marker in argv: name -> pid."""
    markers = {
        "web1": rb"uvicorn.*--port %d",
        "web2": rb"uvicorn.*--port %d",
        "worker_a": rb"celery.*worker.*-n a@",
        "worker_b": rb"celery.*worker.*-n b@",
        "beat": rb"celery.*beat",
        "simulator": rb"pulsar_cluster",
    }
    found = {}
    for pid in process_tree(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"keep-running" in argv or argv.startswith(b"/bin/sh") or b"honcho" in argv:
            continue
        for name, pattern in markers.items():
            if name.startswith("web"):
                pattern = pattern % _programs.ports[name]  # type: ignore[attr-defined]
            if re.search(pattern, argv) and name not in found:
                found[name] = pid
    return found


class Database:
    """The stack's PostgreSQL, read by the test."""

    def __init__(self, url: str) -> None:
        self.url = url

    def rows(self, query: str, *args: object) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as db:
            return db.execute(query, args).fetchall()

    def lease(self, name: str) -> str | None:
        """The holder of lease ``name`` while it is held (``host:pid:token``), else None."""
        found = self.rows(
            "select holder from console_lease where name = %s and locked_until > now()", name
        )
        return found[0][0] if found and found[0][0] else None

    def newest(self, query: str) -> datetime | None:
        found = self.rows(query)
        return found[0][0] if found else None


class Poller(threading.Thread):
    """GETs a page of each web process in turn: (time, web, status)."""

    def __init__(self, clients: dict[str, httpx.Client]) -> None:
        super().__init__(daemon=True)
        self.clients, self.seen, self.stopping = clients, [], threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for name, client in self.clients.items():
                try:
                    status = client.get("/api/rankings/").status_code
                except Exception as exc:
                    status = type(exc).__name__
                self.seen.append((time.monotonic(), name, status))
            time.sleep(0.1)


def _login(base: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10)
    client.get("/login/")
    client.post(
        "/login/",
        data={
            "username": "operator",
            "password": password,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/login/"},
    )
    assert "sessionid" in client.cookies
    return client


@pytest.fixture
def stack(tmp_path):
    """PostgreSQL, Redis, the database migrated and seeded, and the environment; the test
    starts the programs."""
    pg = tmp_path / "pg"
    url = private_postgres(pg)
    redis_port = free_port()
    redis = redis_server(redis_port, tmp_path)
    pulsar_port = free_port_block(8)
    (tmp_path / "prometheus").mkdir()
    env = stack_env(
        tmp_path,
        database_url=url,
        redis_port=redis_port,
        pulsar_port=pulsar_port,
        token=TOKEN,
        FULCRUM_PULSAR_OBSERVE_S="2",
        FULCRUM_TICK_INTERVAL_S=str(INTERVAL_S),
        FULCRUM_SIM_STEP_S="1",
        FULCRUM_REPORT_RUN_LEASE_S="6",
        FULCRUM_HISTORY_FLUSH_S="3",  # history for the report run to read
    )
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=180,
            capture_output=True,
        )
    try:
        yield env, Database(url.replace("postgres://", "postgresql://")), tmp_path
    finally:
        redis.terminate()
        redis.wait(timeout=10)
        private_postgres_stop(pg)


def _procfile(env: dict[str, str], web_ports: tuple[int, int]) -> str:
    """``make run``'s Procfile lines for two web processes and two workers on their queues."""
    commands = procfile_commands(
        ["web", "worker", "beat", "simulator"], {**env, "WEB_PORT": str(web_ports[0])}
    )

    def line(name: str, argv: list[str], own: dict[str, str]) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in own.items())
        return f"{name}: {prefix} exec {shlex.join(argv)}".replace(":  exec", ": exec")

    web, web_env = commands["web"]
    worker, worker_env = commands["worker"]
    lines = []
    for i, port in enumerate(web_ports, 1):
        argv = [*web]
        argv[argv.index("--port") + 1] = str(port)
        lines.append(line(f"web{i}", argv, web_env))
    for name, queues in (("worker_a", "celery,pulsar"), ("worker_b", "celery,reports")):
        argv = [*worker]
        argv[argv.index("-Q") + 1] = queues
        argv[argv.index("-n") + 1] = f"{name[-1]}@%h"
        lines.append(line(name, argv, worker_env))
    for name in ("beat", "simulator"):
        lines.append(line(name, *commands[name]))
    return "\n".join(lines) + "\n"


def _wait(what: str, check, seconds: float, said) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if check():
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {seconds:.0f} s\n{said()}")


def test_two_web_processes_and_two_workers_survive_kills_mid_tick_mid_pass_mid_report(stack):
    env, db, folder = stack
    web_ports = (free_port(), free_port())
    _programs.ports = {"web1": web_ports[0], "web2": web_ports[1]}  # type: ignore[attr-defined]
    procfile = folder / "Procfile.multi"
    procfile.write_text(_procfile(env, web_ports))
    log = folder / "honcho.log"
    honcho = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "honcho"),
            "-f",
            str(procfile),
            "-d",
            str(ROOT),
            "start",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def said() -> str:
        return log.read_text()[-6000:]

    poller = None
    try:
        for port in web_ports:
            assert wait_for_port(port, attempts=300), said()
        _wait(
            "in control, ticking",
            lambda: (
                db.rows("select mode from console_pulsarconnection") == [("control",)]
                and len(db.rows("select id from console_clustersample")) >= 2
            ),
            120,
            said,
        )
        password = (folder / "demo-operator-password").read_text().strip()
        poller = Poller(
            {
                f"web{i}": _login(f"http://127.0.0.1:{p}", password)
                for i, p in enumerate(web_ports, 1)
            }
        )
        poller.start()
        started = _programs(honcho.pid)
        assert set(started) == {"web1", "web2", "worker_a", "worker_b", "beat", "simulator"}

        # 1. Web 1 killed: web 2 answers throughout, web 1 is back.
        killed = time.monotonic()
        os.kill(started["web1"], signal.SIGKILL)
        _wait(
            "web 1 back",
            lambda: any(
                s[1] == "web1" and s[2] == 200 and s[0] > killed + 0.5 for s in poller.seen
            ),
            60,
            said,
        )

        # 2. The worker holding the tick's lease, killed mid-tick.
        # The holder as read when the lease was seen held: a second read can find the tick over.
        holder = ""

        def tick_held() -> bool:
            nonlocal holder
            holder = db.lease("shedding-tick") or ""
            return bool(holder)

        _wait("a tick under way", tick_held, 60, said)
        pid = int(holder.split(":")[1])
        tick_worker = next(n for n, p in _programs(honcho.pid).items() if p == pid)
        os.kill(pid, signal.SIGKILL)
        at = datetime.now(UTC)
        ticked = _wait(
            "a tick after the kill mid-tick",
            lambda: (db.newest("select max(at) from console_clustersample") or at) > at,
            30,
            said,
        )

        # 3. Worker A killed mid-pass (the pulsar queue is its alone).
        _wait("a pass under way", lambda: db.lease("pulsar-sync") is not None, 60, said)
        os.kill(_programs(honcho.pid)["worker_a"], signal.SIGKILL)
        at = datetime.now(UTC)
        observed = _wait(
            "a pass after the kill mid-pass",
            lambda: (db.newest("select max(observed_at) from console_pulsarconnection") or at) > at,
            40,
            said,
        )

        # 4. Worker B killed mid-report-run (the reports queue is its alone).
        def request_run() -> int:
            done = subprocess.run(
                [
                    sys.executable,
                    "manage.py",
                    "shell",
                    "-c",
                    "from django.contrib.auth.models import User;"
                    "from console.services.reports import report_run_request;"
                    "print(report_run_request(actor=User.objects.get(username='operator')).pk)",
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            return int(done.stdout.strip().splitlines()[-1])

        def status(run: int) -> str:
            return db.rows("select status from console_reportrun where id = %s", run)[0][0]

        _wait(
            "history flushed",
            lambda: any((folder / "history").rglob("*.parquet")),
            60,
            said,
        )
        first = request_run()
        _wait("the report run running", lambda: status(first) == "running", 120, said)
        os.kill(_programs(honcho.pid)["worker_b"], signal.SIGKILL)
        _wait("the killed run ended", lambda: status(first) not in ("queued", "running"), 120, said)
        ended = db.rows("select status, reason from console_reportrun where id = %s", first)[0]
        # Not lost: run again to the end (the task is acknowledged late), or failed saying why.
        assert ended[0] == "succeeded" or (ended[0] == "failed" and ended[1]), ended
        second = request_run()
        _wait("the next run done", lambda: status(second) not in ("queued", "running"), 300, said)
        assert status(second) == "succeeded", db.rows(
            "select status, reason from console_reportrun where id = %s", second
        )

        poller.stopping.set()
        poller.join(timeout=15)
        # Web 2 answered throughout; web 1 failed only while it was down.
        assert [s for s in poller.seen if s[1] == "web2" and s[2] != 200] == []
        # One tick per interval, whichever worker ran it.
        samples = [r[0] for r in db.rows("select at from console_clustersample order by at")]
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(samples)]
        interval = db.rows("select loop_interval_s from console_balancerconfig")[0][0]
        assert min(gaps) >= 0.9 * interval - 0.05, (interval, gaps)
        # No move reached Pulsar more often than Fulcrum made it; none was lost.
        moves = db.rows("select bundle, kind, state, outcome, attempts from console_pulsarmove")
        made = collections.Counter(m[0] for m in moves if m[1] == "unload" and m[4] > 0)
        twice = {b: n for b, n in _sends(log.read_text()).items() if n > made[b]}
        assert twice == {}, (twice, made)
        assert [m for m in moves if m[3] == "failed"] == []
        assert honcho.poll() is None, said()
        assert set(_programs(honcho.pid)) == set(started)
        print(
            f"\nweb 2: {sum(1 for s in poller.seen if s[1] == 'web2')} answers, all 200; "
            f"killed mid-tick: {tick_worker}, next tick after {ticked:.1f} s; worker A mid-pass: "
            f"next pass after {observed:.1f} s; report run killed: {ended[0]} ({ended[1][:80]}), "
            f"the next: succeeded; {len(samples)} ticks, shortest gap {min(gaps):.2f} s; "
            f"{len(moves)} moves, none sent twice"
        )
    finally:
        if poller is not None:
            poller.stopping.set()
        trees = process_tree(honcho.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(honcho.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            honcho.wait(timeout=20)
        for pid in trees:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
