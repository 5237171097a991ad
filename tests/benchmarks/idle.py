"""The demo stack left idle: ``make run`` for ``--minutes``, each process's memory every minute.

    .venv/bin/python -m tests.benchmarks.idle [--minutes 60] [--web-port 8000]

Runs ``make run`` in this checkout (its var/ folder: the demo database, the simulated Pulsar
cluster taken under control at start) and, every minute, prints the resident memory (RSS) of
each of its processes — web (uvicorn), worker, beat, simulator, Redis — and of honcho, the
launcher, with the stack's total RSS and total PSS (shared pages counted once over the
processes sharing them: what the stack costs the machine). The clock starts when the
console answers (a fresh clone installs first). At the end, the table of minute 2 (after
start-up) against the last minute, then ``make run`` is stopped with Ctrl-C's signal. Nothing
drives it: the simulator's traffic and Fulcrum's own loops only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import memory_mb, process_tree, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("web", "worker", "beat", "simulator", "redis", "honcho")


def kind_of(cmdline: str) -> str | None:
    """Which part of the stack a process is, from its command line; None: not the stack's."""
    if "honcho" in cmdline:
        return "honcho"
    if "uvicorn" in cmdline or "multiprocessing" in cmdline:
        return "web"
    for needle, kind in (
        ("console.beat", "beat"),
        ("-A console worker", "worker"),
        ("pulsar_cluster", "simulator"),
        ("redis-server", "redis"),
    ):
        if needle in cmdline:
            return kind
    return None


def sample(root: int) -> dict[str, tuple[float, float]]:
    """kind -> (RSS, PSS) summed over the stack's processes of that kind, MB."""
    out = dict.fromkeys(KINDS, (0.0, 0.0))
    for pid in process_tree(root)[1:]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        kind = kind_of(cmdline)
        if kind is None:
            continue
        rss, pss = memory_mb([pid])
        out[kind] = (out[kind][0] + rss, out[kind][1] + pss)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--web-port", type=int, default=8000)
    args = parser.parse_args(argv)
    (ROOT / "var").mkdir(exist_ok=True)
    make = subprocess.Popen(
        ["make", "run", f"WEB_PORT={args.web_port}"],
        cwd=ROOT,
        stdout=open(ROOT / "var" / "idle-run.log", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    samples: list[dict[str, tuple[float, float]]] = []
    try:
        # The clock starts when the console answers (a fresh clone installs first).
        if not wait_for_port(args.web_port, attempts=4500):
            print("the console never answered; see var/idle-run.log")
            return 1
        began = time.time()
        for minute in range(1, args.minutes + 1):
            time.sleep(max(0.0, began + 60 * minute - time.time()))
            if make.poll() is not None:
                print(f"make run ended with {make.returncode}; see var/idle-run.log")
                return 1
            now = sample(make.pid)
            samples.append(now)
            rss = sum(r for r, _ in now.values())
            pss = sum(p for _, p in now.values())
            print(
                f"minute {minute}: RSS MB "
                + ", ".join(f"{k} {now[k][0]:.0f}" for k in KINDS)
                + f"; total RSS {rss:.0f}, PSS {pss:.0f}",
                flush=True,
            )
        first, last = samples[min(1, len(samples) - 1)], samples[-1]
        start = min(2, len(samples))
        print()
        print(f"| process | RSS minute {start} (MB) | minute {len(samples)} (MB) | growth |")
        print("|---|---|---|---|")
        for kind in KINDS:
            a, b = first[kind][0], last[kind][0]
            print(f"| {kind} | {a:.0f} | {b:.0f} | {(b - a) / a if a else 0:+.1%} |")
        for label, index in (("total RSS", 0), ("total PSS", 1)):
            a = sum(v[index] for v in first.values())
            b = sum(v[index] for v in last.values())
            print(f"| **{label}** | **{a:.0f}** | **{b:.0f}** | {(b - a) / a:+.1%} |")
        return 0
    finally:
        try:
            os.killpg(make.pid, signal.SIGINT)  # what Ctrl-C sends: honcho stops everything
            make.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(make.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
