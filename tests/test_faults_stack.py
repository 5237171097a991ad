"""The whole ``make run`` stack under honcho (every Procfile line: Redis, web, worker, beat, the
dead-man, the simulated Pulsar), each program under ``keep-running``, in control of the
simulated Pulsar with FULCRUM_PULSAR_REASSERT on, while pages are polled without pause: Redis
killed with SIGKILL five times in a row, then the worker mid-pass, mid-tick and mid-fold, then
the simulator (issue 23, items 1 and 3 and its "done when"). Every page must answer 200
throughout (from the last figures, with a banner, while Redis is away) and be back without the
banner within 5 s of each kill; no process is lost; after each fault Fulcrum observes, ticks and
holds control again (the next pass after a kill mid-pass, the next tick after a kill mid-tick,
the next fold after a kill mid-fold, each within its lease and a beat); no move is lost or sent
twice. Prints the fault table."""

from __future__ import annotations

import collections
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tests import test_deadman_stack as deadman_tests
from tests.support import free_port, process_tree, wait_for_port
from tests.test_deadman_stack import ROOT, Stack, _config, _lease_held, _newest, _stop

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
        self.quiet = threading.Event()  # set: polls nothing (the GIL left to a tight wait)

    def run(self) -> None:
        while not self.stopping.is_set():
            if self.quiet.is_set():
                time.sleep(0.05)
                continue
            for page in PAGES:
                try:
                    answer = self.client.get(page)
                    stale = "X-Fulcrum-Stale" in answer.headers
                    self.seen.append((time.monotonic(), page, answer.status_code, stale))
                except Exception as exc:
                    # Recorded as a failed answer: the poller must outlive whatever it sees.
                    self.seen.append((time.monotonic(), page, type(exc).__name__, True))
            time.sleep(0.05)


def _observed_after(database: Path, at: datetime) -> bool:
    """A Pulsar pass that started after ``at`` completed."""
    found = _newest(database, "select max(observed_at) from console_pulsarconnection")
    return found is not None and found > at


def _ticked_after(database: Path, at: datetime) -> bool:
    found = _newest(database, "select max(at) from console_clustersample")
    return found is not None and found > at


def _in_control(base: str) -> bool:
    try:
        values, effective = _config(base)
    except (httpx.HTTPError, ValueError):
        return False
    return values.get("loadBalancerSheddingEnabled") == "false" and effective == "false"


def _pages_clean_since(poller: Poller, at: float) -> float | None:
    """When every page last became clean (200, not stale) after ``at`` and has answered so
    since, each at least once (monotonic s); None while not."""
    after = [s for s in poller.seen if s[0] > at]
    dirty = [s[0] for s in after if s[2] != 200 or s[3]]
    clean_since = max(dirty, default=at)
    fresh = {s[1] for s in after if s[0] > clean_since}
    return clean_since if fresh == set(PAGES) else None


def _fault(
    stack: Stack,
    honcho: subprocess.Popen[bytes],
    poller: Poller,
    program: str,
    *,
    during: str | None = None,
    whole: bool = True,
    folds: bool = False,
) -> tuple[float, ...]:
    """SIGKILL ``program`` (its pid, not keep-running's), while the lease ``during`` is held
    (its work under way) if given. Returns, in s from the kill: pages back (every page
    answering 200 without the stale header since); then, with ``whole``, once Fulcrum has
    recovered: time blind (to the first Pulsar observation started after the kill), the next
    tick, and time to recover (all of: the program started again, a tick after the kill,
    Fulcrum in control of Pulsar, pages back); with ``folds``, last, the next fold (new load
    report rows in the database)."""
    before = _programs(honcho.pid)[program]
    if during is not None:
        # A tick holds its lease for 10-100 ms: watched in a tight loop, the poller paused.
        poller.quiet.set()
        deadline = time.monotonic() + 60
        while not _lease_held(stack.database, during):
            assert time.monotonic() < deadline, f"{during} never held\n" + stack.said()
            time.sleep(0.005)
    os.kill(before, signal.SIGKILL)
    poller.quiet.clear()
    killed, killed_at = time.monotonic(), datetime.now(UTC)
    blind = ticked = folded = None
    newest = _load_reports(stack.database)  # after the kill: the killed fold commits nothing
    while True:
        if time.monotonic() > killed + 90:
            raise AssertionError(
                f"{program}: not back 90 s after the kill; blind {blind}, ticked {ticked}, "
                f"folded {folded}, programs {_programs(honcho.pid)} (killed {before}), in control "
                f"{_in_control(stack.base)}, pages clean since {_pages_clean_since(poller, killed)}"
                f" (last answers {poller.seen[-5:]}, now {time.monotonic()})\n"
                + _database_said(stack.database)
                + "\n"
                + _worker_said(stack)
                + "\n"
                + stack.said()
            )
        time.sleep(0.1)
        now = time.monotonic() - killed
        clean = _pages_clean_since(poller, killed)
        if not whole:
            # Back once a stale answer was seen and every page is clean since (or, never seen
            # stale, after 3 s of clean answers).
            stale_seen = any(s[3] for s in poller.seen if s[0] > killed)
            if clean is not None and (stale_seen or now > 3):
                return (clean - killed,)
            continue
        if blind is None and _observed_after(stack.database, killed_at):
            blind = now
        if ticked is None and _ticked_after(stack.database, killed_at):
            ticked = now
        if folds and folded is None and _load_reports(stack.database) > newest:
            folded = now
        if (
            blind is not None
            and ticked is not None
            and _programs(honcho.pid).get(program, before) != before
            and _in_control(stack.base)
            and clean is not None
            and (folded is not None or not folds)
        ):
            return clean - killed, blind, ticked, now, *([folded] if folded is not None else [])


def _database_said(database: Path) -> str:
    """The leases and the newest cluster samples, for a failure's message."""
    with sqlite3.connect(database) as db:
        leases = db.execute("select name, holder, locked_until from console_lease").fetchall()
        samples = db.execute(
            "select at from console_clustersample order by at desc limit 3"
        ).fetchall()
    return f"now {datetime.now(UTC)}; leases {leases}; newest samples {samples}"


def _worker_said(running: Stack) -> str:
    """The worker's and beat's warnings, errors and tracebacks, for a failure's message."""
    said = (running.logs / "honcho.log").read_text().splitlines()
    lines = [
        line
        for line in said
        if re.search(r"WARNING|ERROR|CRITICAL|Traceback|Error|exited|skipped|lease", line)
    ]
    return "--- the worker's warnings\n" + "\n".join(lines[-60:])


def _load_reports(database: Path) -> int:
    """The newest load report row's id (not a count: the flush prunes exported rows)."""
    with sqlite3.connect(database) as db:
        return int(db.execute("select coalesce(max(id), 0) from console_loadreport").fetchone()[0])


def _sends(said: str) -> collections.Counter[str]:
    """How many unloads reached the simulated Pulsar, by bundle (its log: routes._unload)."""
    found = re.findall(
        r"(?:unloaded (\S+) from|namespace bundle (\S+) is not owned by any broker)", said
    )
    return collections.Counter(a or b for a, b in found)


def test_make_run_survives_kill_9_of_redis_the_worker_and_the_simulator(stack, tmp_path):
    """The whole make run stack under honcho, as make run starts it (FULCRUM_PULSAR_REASSERT
    on), in control of the simulated Pulsar, pages polled without pause: Redis killed five times
    in a row, then the worker mid-pass, mid-tick and mid-fold, then the simulator. Every page
    answers 200 throughout and is clean within 5 s of each Redis kill; no process is lost; after
    each fault Fulcrum observes, ticks and holds control again; no move is lost (failed, or left
    in flight) or sent twice."""
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
        "FULCRUM_PULSAR_REASSERT": "1",
        # The dead-man is not under test here (test_deadman_stack.py is): at its fixture's 20 s,
        # the last tick up to one 10 s loop interval before a worker's kill plus the worker's
        # restart on a loaded machine could reach it, and control, handed back, is not taken
        # again by design. 60 s keeps it out of every fault this test makes.
        "FULCRUM_DEADMAN_S": "60",
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
        # Redis killed five times in a row: the first four as soon as the pages are back, the
        # fifth measured whole; then the worker mid-pass, mid-tick, mid-fold; then the simulator.
        backs = [_fault(stack, honcho, poller, "redis", whole=False)[0] for _ in range(KILLS - 1)]
        table = [
            ("redis (5th kill in a row)", *_fault(stack, honcho, poller, "redis")),
            ("worker, mid-pass", *_fault(stack, honcho, poller, "worker", during="pulsar-sync")),
            ("worker, mid-tick", *_fault(stack, honcho, poller, "worker", during="shedding-tick")),
            (
                "worker, mid-fold",
                *_fault(stack, honcho, poller, "worker", during="load-reports-fold", folds=True),
            ),
            ("simulator", *_fault(stack, honcho, poller, "simulator")),
        ]
        backs.append(table[0][1])
        poller.stopping.set()
        poller.join(timeout=15)
        failures = [s for s in poller.seen if s[2] != 200]
        assert failures == [], failures[:10]
        assert any(s[3] for s in poller.seen)  # some answered from the last figures
        assert honcho.poll() is None, stack.said()
        assert set(_programs(honcho.pid)) == set(started)
        # Moves: none failed, none left sending once its pass ends (a verifying move waits for
        # Pulsar to place the bundle, up to UNOWNED_AFTER_S: a restarted cluster may take its
        # time; it is still tracked, not lost), and none reached Pulsar more often than Fulcrum
        # made moves of its bundle.
        deadline = time.monotonic() + 20
        while True:
            with sqlite3.connect(stack.database) as db:
                moves = db.execute(
                    "select bundle, kind, state, outcome, attempts from console_pulsarmove"
                ).fetchall()
            if all(m[2] != "sending" for m in moves) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        lost = [m for m in moves if m[3] == "failed" or m[2] == "sending"]
        made = collections.Counter(m[0] for m in moves if m[1] == "unload" and m[4] > 0)
        sends = _sends((stack.logs / "honcho.log").read_text())
        twice = {b: n for b, n in sends.items() if n > made[b]}
        print(
            f"\n{len(poller.seen)} page answers, none failed; the worker started again "
            f"{_restarts(stack)} time(s) by keep-running; moves: "
            f"{dict(collections.Counter(m[3] or m[2] for m in moves))}"
        )
        print(f"pages back after each Redis kill: {', '.join(f'{b:.1f}' for b in backs)} s")
        print(
            "fault (SIGKILL) | pages back (s) | time blind (s) | next tick (s) | recovered (s)"
            " | next fold (s)"
        )
        for row in table:
            print(" | ".join([row[0], *(f"{x:.1f}" for x in row[1:])]))
        print(f"moves lost: {len(lost)}; sent twice: {len(twice)}")
        assert max(backs) <= BACK_WITHIN_S, backs
        # A kill mid-pass holds the next pass back at most its lease (one 5 s observation
        # period) plus the worker's restart; mid-tick, the next tick within 15 s.
        assert table[1][2] <= 2 * 5 + 6, table[1]
        assert table[2][3] <= 15, table[2]
        # Mid-fold: the next fold within its 9 s lease and a 5 s beat, plus the restart.
        assert table[3][5] <= 9 + 5 + 6, table[3]
        assert lost == [], lost
        assert twice == {}, (twice, made)
    finally:
        if poller is not None:
            poller.stopping.set()
        _stop([honcho])


def _restarts(running: Stack) -> int:
    """How often keep-running started the Celery worker again."""
    said = (running.logs / "honcho.log").read_text()
    return len(re.findall(r"keep-running: 'celery' exited", said))
