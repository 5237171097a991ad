"""Never a cluster without a balancer, with real processes: the simulated Pulsar cluster, the
Celery worker and beat and the dead-man as ``make run`` starts them (their Procfile lines), on a
private Redis and a SQLite file. Fulcrum takes control at its first observation (Pulsar's
shedding off); the worker and beat are then killed (SIGKILL), and Pulsar's own shedding must be
back — the override Fulcrum set removed, the effective value true again — within
``FULCRUM_DEADMAN_S`` of the last tick, with the dead-man's audit and metric."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support import free_port, free_ports, procfile_commands, redis_server, wait_for_port

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


def test_killing_the_worker_and_beat_in_control_gives_pulsar_its_shedding_back(tmp_path):
    redis_port = free_port()
    pulsar_port = free_ports(9)[0]  # the simulator's 8 brokers take the ports from here up
    redis = redis_server(redis_port, tmp_path)
    (tmp_path / "prometheus").mkdir()
    database = tmp_path / "stack.sqlite3"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": f"sqlite:///{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_VAR_DIR": str(tmp_path),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "FULCRUM_PULSAR_URL": f"http://127.0.0.1:{pulsar_port}",
        "FULCRUM_PULSAR_TOKEN": TOKEN,
        "FULCRUM_PULSAR_OBSERVE_S": "2",
        "FULCRUM_PULSAR_TAKE_CONTROL_AT_START": "1",
        "FULCRUM_TICK_INTERVAL_S": "2",
        "FULCRUM_DEADMAN_S": str(DEADMAN_S),
        "FULCRUM_DEADMAN_CHECK_S": "1",
        "FULCRUM_SIM_STEP_S": "1",
        "FULCRUM_LOG_LEVEL": "INFO",
    }
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True, timeout=120
        )
    commands = procfile_commands(
        ("worker", "beat", "deadman", "simulator"), {"PULSAR_PORT": str(pulsar_port)}
    )
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in commands}  # noqa: SIM115
    processes = {
        name: subprocess.Popen(
            cmd, cwd=ROOT, env=env | own, stdout=logs[name], stderr=subprocess.STDOUT
        )
        for name, (cmd, own) in commands.items()
    }
    base = f"http://127.0.0.1:{pulsar_port}"

    def said() -> str:
        return "\n".join(
            f"--- {name}\n" + (tmp_path / f"{name}.log").read_text()[-3000:] for name in logs
        )

    try:
        assert wait_for_port(pulsar_port), said()
        # Control taken at the first observation, and the loop ticking.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            values, effective = _config(base)
            if values.get("loadBalancerSheddingEnabled") == "false" and _ticks(database) >= 2:
                break
            time.sleep(0.5)
        else:
            raise AssertionError("control was not taken, or the loop did not tick\n" + said())
        assert effective == "false"
        for name in ("worker", "beat"):
            processes[name].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        ticks = _ticks(database)
        while time.monotonic() < killed + DEADMAN_S + 15:
            values, effective = _config(base)
            if "loadBalancerSheddingEnabled" not in values and effective == "true":
                break
            time.sleep(0.25)
        else:
            raise AssertionError("Pulsar's shedding did not come back\n" + said())
        back_after = time.monotonic() - killed
        # The limit counts from the last tick, which came at most a loop interval before the
        # kill; the check runs every second.
        assert back_after <= DEADMAN_S + 2, back_after
        assert _ticks(database) == ticks  # nothing ticked meanwhile: the dead-man did it
        with sqlite3.connect(database) as db:
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
        MultiProcessCollector(registry, path=str(tmp_path / "prometheus"))
        released = registry.get_sample_value(
            "fulcrum_deadman_releases_total", {"result": "released"}
        )
        assert released == 1
        print(f"Pulsar's shedding back {back_after:.1f} s after the kill (limit {DEADMAN_S:g} s)")
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        redis.terminate()
        redis.wait(timeout=10)
