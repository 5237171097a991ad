"""The whole ``make run`` stack under honcho (every Procfile line: Redis, web, worker, beat, the
dead-man, the simulated Pulsar), each program under ``keep-running``: Redis is killed with
SIGKILL five times in a row while pages are polled (issue 23, item 3). Every page must answer
200 throughout (from the last figures, with a banner, while Redis is away) and be back without
the banner within 5 s of each kill; no process is lost; the loop ticks again afterwards."""

from __future__ import annotations

import itertools
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx

from tests import test_deadman_stack as deadman_tests
from tests.support import free_port, process_tree, wait_for_port
from tests.test_deadman_stack import ROOT, Stack, _stop, _ticks

stack = deadman_tests.stack  # the fixture: make run's environment on private ports and files

PAGES = ("/", "/pulsar/", "/bundles/", "/api/rankings/", "/api/pulsar/")
KILLS = 5
BACK_WITHIN_S = 5.0


def _programs(root: int) -> dict[str, int]:
    """The programs under honcho (not their keep-running wrappers): name -> pid."""
    found = {}
    patterns = {
        "redis": rb"redis-server",
        "web": rb"uvicorn",
        "worker": rb"celery.*worker",
        "beat": rb"celery.*beat",
        "deadman": rb"manage\.py.*deadman",
        "simulator": rb"pulsar_cluster",
    }
    for pid in process_tree(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"keep-running" in argv or argv.startswith(b"/bin/sh") or b"honcho" in argv:
            continue
        for name, pattern in patterns.items():
            if re.search(pattern, argv.replace(b"\0", b" ")) and name not in found:
                found[name] = pid
    return found


def _login(base: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10)
    client.get("/login/")
    answer = client.post(
        "/login/",
        data={
            "username": "operator",
            "password": password,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/login/"},
    )
    assert answer.status_code in (200, 302), answer.text[:300]
    assert "sessionid" in client.cookies
    return client


class Poller(threading.Thread):
    """Polls every page in turn, recording (time, page, status, stale)."""

    def __init__(self, client: httpx.Client) -> None:
        super().__init__(daemon=True)
        self.client, self.seen, self.stopping = client, [], threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for page in PAGES:
                try:
                    answer = self.client.get(page)
                    stale = "X-Fulcrum-Stale" in answer.headers
                    self.seen.append((time.monotonic(), page, answer.status_code, stale))
                except httpx.HTTPError as exc:
                    self.seen.append((time.monotonic(), page, type(exc).__name__, True))
            time.sleep(0.05)


def test_redis_killed_five_times_under_load_loses_no_process_and_no_page(stack, tmp_path):
    stack.redis.terminate()  # the stack runs its own, under keep-running, as make run does
    stack.redis.wait(timeout=10)
    redis_port = int(stack.env["REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
    web_port = free_port()
    env = stack.env | {
        "REDIS_PORT": str(redis_port),
        "REDIS_DIR": str(tmp_path / "redis"),
        "WEB_PORT": str(web_port),
        "WEB_WORKERS": "1",
        "FULCRUM_PULSAR_OBSERVE_S": "5",
        "FULCRUM_TICK_INTERVAL_S": "5",
    }
    honcho = subprocess.Popen(
        [str(Path(sys.executable).parent / "honcho"), "start"],
        cwd=ROOT,
        env=env,
        stdout=(stack.logs / "honcho.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    poller = None
    try:
        assert wait_for_port(web_port), stack.said()
        stack.in_control()
        password = (tmp_path / "demo-operator-password").read_text().strip()
        poller = Poller(_login(f"http://127.0.0.1:{web_port}", password))
        poller.start()
        time.sleep(2)
        started = _programs(honcho.pid)
        assert set(started) == {"redis", "web", "worker", "beat", "deadman", "simulator"}, started
        backs = []
        first_kill = time.time()
        for _ in range(KILLS):
            os.kill(_programs(honcho.pid)["redis"], signal.SIGKILL)
            killed = time.monotonic()
            # Back: every page answered 200 without the stale header after some moment, and
            # has kept doing so for a full round.
            while True:
                time.sleep(0.2)
                assert time.monotonic() < killed + 30, "pages not back\n" + stack.said()
                after = [s for s in poller.seen if s[0] > killed]
                dirty = [s[0] for s in after if s[2] != 200 or s[3]]
                clean_since = max(dirty, default=killed)
                fresh = {s[1] for s in after if s[0] > clean_since}
                if fresh == set(PAGES) and any(s[3] for s in after):
                    backs.append(clean_since - killed)
                    break
                if fresh == set(PAGES) and time.monotonic() > killed + 3:
                    backs.append(0.0)  # never seen stale: back before any page noticed
                    break
            time.sleep(3)
        ticks = _ticks(stack.database)
        deadline = time.monotonic() + 30
        while _ticks(stack.database) <= ticks:
            assert time.monotonic() < deadline, "the loop did not tick again\n" + stack.said()
            time.sleep(0.5)
        poller.stopping.set()
        poller.join(timeout=15)
        failures = [s for s in poller.seen if s[2] != 200]
        assert failures == [], failures[:10]
        assert honcho.poll() is None, stack.said()
        assert set(_programs(honcho.pid)) == set(started)
        print(
            f"{len(poller.seen)} page answers, none failed; back after each of {KILLS} Redis "
            f"kills in {', '.join(f'{b:.1f}' for b in backs)} s; the worker started again "
            f"{_restarts(stack)} time(s)"
        )
        assert max(backs) <= BACK_WITHIN_S, backs
        with sqlite3.connect(stack.database) as db:
            stuck = db.execute(
                "select count(*) from console_pulsarmove where state = 'sending'"
            ).fetchone()[0]
            outcomes = dict(
                db.execute("select outcome, count(*) from console_pulsarmove group by outcome")
            )
            ticks_at = [
                datetime.fromisoformat(at).timestamp()
                for (at,) in db.execute("select at from console_clustersample order by at")
            ]
        gaps = [b - a for a, b in itertools.pairwise(t for t in ticks_at if t >= first_kill)]
        print(f"moves by outcome: {outcomes}; longest gap between ticks: {max(gaps):.1f} s")
        # A pass may be sending right now; none is left sending once it ends.
        deadline = time.monotonic() + 20
        while stuck:
            assert time.monotonic() < deadline, "a move stuck in sending\n" + stack.said()
            time.sleep(0.5)
            with sqlite3.connect(stack.database) as db:
                stuck = db.execute(
                    "select count(*) from console_pulsarmove where state = 'sending'"
                ).fetchone()[0]
    finally:
        if poller is not None:
            poller.stopping.set()
        _stop([honcho])


def _restarts(running: Stack) -> int:
    """How often keep-running started the Celery worker again."""
    said = (running.logs / "honcho.log").read_text()
    return len(re.findall(r"keep-running: 'celery' exited", said))
