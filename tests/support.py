"""Helpers shared by tests and benchmarks: a free local port and a private Redis."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# The ports free_port, free_ports and free_port_block choose come from below the kernel's
# ephemeral range, which every bind to port 0 and every outgoing connection on the machine draw
# from (a port chosen there can be taken between its choice and its server's bind), and under
# pytest-xdist from a slice of their own for each worker (gw0 the first; a run without xdist
# takes gw0's): two workers never choose the same port. TEST_PORT_BASE moves the slices
# (make check's start above make test's, so that the two can run at once).
PORT_SLICE = 750
PORT_SLICES = 8
_cursor: dict[int, int] = {}


def port_slice() -> range:
    """The ports this process chooses from (see above); empty where the kernel's ephemeral range
    leaves no room below it, and then the kernel chooses (a bind to port 0)."""
    base = int(os.environ.get("TEST_PORT_BASE", "20000"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")) % PORT_SLICES
    ports = range(base + index * PORT_SLICE, base + (index + 1) * PORT_SLICE)
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    return ports if ports.stop <= ephemeral else range(0)


def _slice_order(ports: range) -> list[int]:
    """``ports`` from where this process's last choice ended (a random place at first): ports
    just handed out come last."""
    import random

    at = _cursor.setdefault(ports.start, random.randrange(len(ports)))
    return [*ports[at:], *ports[:at]]


def _bound(port: int) -> socket.socket | None:
    """A socket bound to 127.0.0.1:``port``, or None where something holds it."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports on 127.0.0.1 that nothing listens on right now, ascending
    (all held at once while chosen, so none repeats)."""
    sockets = []
    ports = port_slice()
    try:
        if not ports:
            for _ in range(count):
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                sockets.append(s)
        else:
            for port in _slice_order(ports):
                if (s := _bound(port)) is not None:
                    sockets.append(s)
                    if len(sockets) == count:
                        _cursor[ports.start] = (port + 1 - ports.start) % len(ports)
                        break
            else:
                raise RuntimeError(f"no {count} free ports in {ports}")
        return sorted(s.getsockname()[1] for s in sockets)
    finally:
        for s in sockets:
            s.close()


def free_port_block(count: int, start: int | None = None, stop: int | None = None) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1 that nothing listens on now
    (a simulated cluster binds broker i to base + i): from this process's slice (``port_slice``)
    where it has room, else between ``start`` and ``stop`` (20000 and 60000) from a random
    offset."""
    import random

    ports = port_slice()
    if start is None and stop is None and len(ports) >= count:
        order = [p for p in _slice_order(ports) if p + count <= ports.stop]
    else:
        start, stop = start or 20000, stop or 60000
        offset = random.randrange(start, stop - count)
        order = [*range(offset, stop - count, 101), *range(start, offset, 101)]
    for base in order:
        sockets = []
        try:
            for port in range(base, base + count):
                if (s := _bound(port)) is None:
                    break
                sockets.append(s)
            else:
                if ports and base in ports:
                    _cursor[ports.start] = (base + count - ports.start) % len(ports)
                return base
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def wait_for_port(port: int, attempts: int = 150, pause_s: float = 0.2) -> bool:
    """Wait until something accepts connections on 127.0.0.1:``port``; whether it did."""
    for _ in range(attempts):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(pause_s)
    return False


def redis_server(port: int, directory: Path) -> subprocess.Popen[bytes]:
    """A private, non-persistent Redis on ``port``, started and answering."""
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.terminate()
    raise RuntimeError(f"redis-server did not start on port {port}")


def demo_database_with_viewer() -> tuple[list[str], str]:
    """In a process whose environment names a throwaway database (Django set up here): migrate,
    seed the demo's layout with every bundle owned round-robin, and log a viewer in. Returns
    (broker names, the viewer's session cookie ``name=value``) for benchmarks' dashboards."""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils.module_loading import import_string

    from balancer.simulator.layout import DEMO
    from console.models import Broker, Bundle
    from console.services.seed import cluster_seed

    call_command("migrate", verbosity=0)
    cluster_seed(DEMO)
    brokers = list(Broker.objects.order_by("name"))
    for i, bundle in enumerate(Bundle.objects.order_by("pk")):
        bundle.owner = brokers[i % len(brokers)]
        bundle.save(update_fields=["owner"])
    user = User.objects.create_user("viewer", password="unused-pass-1")
    store = import_string(f"{settings.SESSION_ENGINE}.SessionStore")()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return [b.name for b in brokers], f"{settings.SESSION_COOKIE_NAME}={store.session_key}"


def procfile_commands(
    names: Sequence[str], variables: Mapping[str, str], procfile: Path | None = None
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The commands ``make run`` starts for ``names``, read from the Procfile (their one home):
    name -> (argv, the environment its line sets, e.g. ``MALLOC_ARENA_MAX``), with ``${VAR}``
    replaced from ``variables`` (``${VAR:-default}``: the default where ``variables`` has no
    VAR, as the shell does) and ``exec`` dropped."""
    import re
    import shlex

    procfile = procfile or Path(__file__).resolve().parent.parent / "Procfile"
    lines = dict(line.split(":", 1) for line in procfile.read_text().splitlines() if ":" in line)
    commands = {}
    for name in names:
        text = re.sub(
            r"\$\{(\w+)(?::-([^}]*))?\}",
            lambda m: (
                variables[m.group(1)]
                if m.group(2) is None
                else variables.get(m.group(1)) or m.group(2)
            ),
            lines[name].strip(),
        )
        words = shlex.split(text)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        argv = words[1:] if words[:1] == ["exec"] else words
        if argv and argv[0].startswith("scripts/"):
            # The project's own wrappers (keep-running): found from any working directory.
            argv[0] = str(procfile.parent / argv[0])
        commands[name] = (argv, env)
    return commands


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (uvicorn's workers, honcho's children, ...)."""
    found = [pid]
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [
                int(c)
                for task in Path(f"/proc/{parent}/task").iterdir()
                for c in (task / "children").read_text().split()
            ]
        except OSError:
            continue
        found += children
        todo += children
    return found


def memory_mb(pids: Sequence[int]) -> tuple[float, float]:
    """(RSS, PSS) summed over ``pids``, MB; a process gone counts 0. PSS counts each shared
    page once over the processes sharing it, so the PSS of a whole stack adds up."""
    rss = pss = 0.0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss += int(line.split()[1]) / 1024
    return rss, pss


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) used so far by ``pids`` and by their children that ended
    and were waited for (``/proc/<pid>/stat`` fields 14-17: utime, stime, cutime, cstime, in
    clock ticks): over a process tree, a worker or backend that exits between two readings is
    still counted, in its parent's. A process gone counts 0."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += sum(int(f) for f in fields[11:15]) / ticks  # fields 14-17, after "state" (3)
    return total


def private_postgres(folder: Path) -> str:
    """A private PostgreSQL (``scripts/pg-private``) in ``folder`` on a free port, started;
    its ``DATABASE_URL``. Stop it with ``private_postgres_stop(folder)``."""
    port = free_port()
    subprocess.run(
        [str(ROOT / "scripts/pg-private"), "start", str(folder), str(port)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return f"postgres://fulcrum@127.0.0.1:{port}/fulcrum"


def private_postgres_stop(folder: Path) -> None:
    """Stop ``private_postgres(folder)``'s server (nothing if it is not running)."""
    subprocess.run(
        [str(ROOT / "scripts/pg-private"), "stop", str(folder)], capture_output=True, timeout=90
    )


def stack_env(
    folder: Path,
    *,
    database_url: str,
    redis_port: int,
    pulsar_port: int,
    token: str,
    **settings: str,
) -> dict[str, str]:
    """``make run``'s environment for processes whose files live in ``folder`` (the var
    folder, Prometheus' multiprocess folder under it), attached to the simulated Pulsar
    cluster on ``pulsar_port`` with ``token``, taking control at start; ``settings`` over it."""
    import os
    import sys

    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_VAR_DIR": str(folder),
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "prometheus"),
        "FULCRUM_PULSAR_URL": f"http://127.0.0.1:{pulsar_port}",
        "FULCRUM_PULSAR_TOKEN": token,
        "FULCRUM_PULSAR_TAKE_CONTROL_AT_START": "1",
        "FULCRUM_RESTART_PAUSE_S": "1",
        "FULCRUM_LOG_LEVEL": "INFO",
        "PULSAR_PORT": str(pulsar_port),
        "WEB_WORKERS": "1",
        **settings,
    }


async def dashboard_messages(
    port: int, cookie: str, deadline: float, wait_s: float = 1.0
) -> AsyncIterator[str | bytes]:
    """The messages a logged-in dashboard's websocket (``/ws/cluster/`` on ``port``, with the
    session ``cookie``) receives until ``deadline`` (``time.time()``), each as it comes;
    ``wait_s``: how long one wait for a message lasts before the deadline is looked at again."""
    import asyncio

    import websockets

    async with websockets.connect(
        f"ws://127.0.0.1:{port}/ws/cluster/",
        additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
        max_size=None,
        open_timeout=60,
    ) as ws:
        while time.time() < deadline:
            try:
                yield await asyncio.wait_for(ws.recv(), timeout=wait_s)
            except TimeoutError:
                continue
