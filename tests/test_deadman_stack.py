"""Never a cluster without a balancer, with real processes: the simulated Pulsar cluster, the
Celery worker and beat and the dead-man as ``make run`` starts them (their Procfile lines), on a
private Redis and a SQLite file. Fulcrum takes control at its first observation (Pulsar's
shedding off).

- The worker and beat are killed for good (SIGKILL to them and to ``keep-running`` above them):
  Pulsar's own shedding must be back — the override Fulcrum set removed, the effective value
  true again — within ``FULCRUM_DEADMAN_S`` of the last tick, with the dead-man's audit and
  metric.

Under honcho, as ``make run`` runs them, a worker killed with SIGKILL mid-pass or mid-tick is
started again by ``keep-running`` and the stack stays up: ``tests/test_faults_stack.py``, which
uses this module's fixture."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tests.support import (
    free_port,
    free_port_block,
    process_tree,
    procfile_commands,
    redis_server,
    wait_for_port,
)

ROOT = Path(__file__).resolve().parent.parent
DEADMAN_S = 20.0
TOKEN = "deadman-stack-token"


def _config(base: str) -> tuple[dict[str, str], str]:
    """(Pulsar's dynamic-config overrides, the effective loadBalancerSheddingEnabled)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    values = httpx.get(f"{base}/admin/v2/brokers/configuration/values", headers=headers).json()
    runtime = httpx.get(f"{base}/admin/v2/brokers/configuration/runtime", headers=headers).json()
    return values, runtime["loadBalancerSheddingEnabled"]


def _ticks(database: Path) -> int:
    with sqlite3.connect(database) as db:
        try:
            return int(db.execute("select count(*) from console_clustersample").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


@dataclass
class Stack:
    """The environment of ``make run``'s processes, on private ports and files."""

    env: dict[str, str]
    database: Path
    pulsar_port: int
    base: str
    logs: Path
    redis: subprocess.Popen[bytes] | None = None  # the fixture's private Redis

    def said(self) -> str:
        """The end of every process log, for a failure's message."""
        return "\n".join(
            f"--- {log.name}\n" + log.read_text()[-3000:] for log in sorted(self.logs.glob("*.log"))
        )

    def in_control(self, seconds: float = 120.0) -> None:
        """Wait until Fulcrum took control (Pulsar's override set) and the loop ticked."""
        assert wait_for_port(self.pulsar_port), self.said()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            values, effective = _config(self.base)
            if values.get("loadBalancerSheddingEnabled") == "false" and _ticks(self.database) >= 2:
                assert effective == "false"
                return
            time.sleep(0.5)
        raise AssertionError("control was not taken, or the loop did not tick\n" + self.said())


# The stack's settings for these tests: fast observation, ticks and trace minutes.
FAST = {
    "FULCRUM_PULSAR_OBSERVE_S": "2",
    "FULCRUM_TICK_INTERVAL_S": "2",
    "FULCRUM_DEADMAN_S": str(DEADMAN_S),
    "FULCRUM_DEADMAN_CHECK_S": "1",
    "FULCRUM_SIM_STEP_S": "1",
}


@contextlib.contextmanager
def stack_environment(folder: Path, settings: dict[str, str]) -> Iterator[Stack]:
    """``make run``'s environment on private ports and files under ``folder`` (a private Redis
    started, the database migrated and seeded with the demo), with ``settings`` over it; the
    processes are the caller's to start (honcho, or Procfile lines)."""
    redis_port = free_port()
    pulsar_port = free_port_block(8)  # the simulator's 8 brokers take the ports from here up
    redis = redis_server(redis_port, folder)
    (folder / "prometheus").mkdir()
    (folder / "logs").mkdir()
    database = folder / "stack.sqlite3"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": f"sqlite:///{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_VAR_DIR": str(folder),
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "prometheus"),
        "FULCRUM_PULSAR_URL": f"http://127.0.0.1:{pulsar_port}",
        "FULCRUM_PULSAR_TOKEN": TOKEN,
        "FULCRUM_PULSAR_TAKE_CONTROL_AT_START": "1",
        "FULCRUM_RESTART_PAUSE_S": "1",
        "FULCRUM_LOG_LEVEL": "INFO",
        "PULSAR_PORT": str(pulsar_port),
        **settings,
    }
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=120,
            capture_output=True,
        )
    try:
        yield Stack(
            env,
            database,
            pulsar_port,
            f"http://127.0.0.1:{pulsar_port}",
            folder / "logs",
            redis,
        )
    finally:
        if redis.poll() is None:
            redis.terminate()
            redis.wait(timeout=10)


@pytest.fixture
def stack(tmp_path):
    with stack_environment(tmp_path, FAST) as running:
        yield running


def _celery_worker(root: int) -> int:
    """The Celery worker's own process under ``root`` (not honcho's forks, not keep-running)."""
    for pid in process_tree(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        wrapped = any(a.endswith(b"keep-running") for a in argv)
        if {b"-A", b"console", b"worker"} <= set(argv) and not wrapped and b"start" not in argv:
            return pid
    raise AssertionError(f"no Celery worker under {root}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Stop the processes and everything they started, whatever happened before."""
    trees = [process_tree(p.pid) for p in processes]
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    for pid in [pid for tree in trees for pid in tree]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_killing_the_worker_and_beat_in_control_gives_pulsar_its_shedding_back(stack):
    commands = procfile_commands(
        ("worker", "beat", "deadman", "simulator"),
        {"PULSAR_PORT": str(stack.pulsar_port), "FULCRUM_VAR_DIR": stack.env["FULCRUM_VAR_DIR"]},
    )
    processes = {
        name: subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=stack.env | own,
            stdout=(stack.logs / f"{name}.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        for name, (cmd, own) in commands.items()
    }
    try:
        stack.in_control()
        for name in ("worker", "beat"):  # keep-running first: nothing starts them again
            for pid in process_tree(processes[name].pid):
                os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        ticks = _ticks(stack.database)
        while time.monotonic() < killed + DEADMAN_S + 15:
            values, effective = _config(stack.base)
            if "loadBalancerSheddingEnabled" not in values and effective == "true":
                break
            time.sleep(0.25)
        else:
            raise AssertionError("Pulsar's shedding did not come back\n" + stack.said())
        back_after = time.monotonic() - killed
        # The limit counts from the last tick, which came at most a loop interval before the
        # kill; the check runs every second.
        assert back_after <= DEADMAN_S + 2, back_after
        assert _ticks(stack.database) == ticks  # nothing ticked meanwhile: the dead-man did it
        with sqlite3.connect(stack.database) as db:
            mode, handed_back = db.execute(
                "select mode, handed_back from console_pulsarconnection"
            ).fetchone()
            reasons = [r for (r,) in db.execute("select reason from console_auditevent")]
        assert mode == "observe"
        assert json.loads(handed_back)["by"] == "the dead-man"
        assert any(r.startswith("control handed back to Pulsar by the dead-man") for r in reasons)
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=stack.env["PROMETHEUS_MULTIPROC_DIR"])
        released = registry.get_sample_value(
            "fulcrum_deadman_releases_total", {"result": "released"}
        )
        assert released == 1
        print(f"Pulsar's shedding back {back_after:.1f} s after the kill (limit {DEADMAN_S:g} s)")
    finally:
        _stop(list(processes.values()))


def _lease_held(database: Path, name: str) -> bool:
    """Someone holds the lease ``name`` now (its work is under way)."""
    with sqlite3.connect(database) as db:
        try:
            row = db.execute(
                "select holder, locked_until from console_lease where name = ?", (name,)
            ).fetchone()
        except sqlite3.OperationalError:
            return False
    if row is None or not row[0]:
        return False
    until = datetime.fromisoformat(row[1]).replace(tzinfo=UTC)
    return until > datetime.now(UTC)


def _newest(database: Path, query: str) -> datetime | None:
    with sqlite3.connect(database) as db:
        value = db.execute(query).fetchone()[0]
    return datetime.fromisoformat(value).replace(tzinfo=UTC) if value else None
