"""Serving the simulated Pulsar cluster over HTTP, one port per broker, and its command line.
No Django."""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from balancer.simulator.layout import DEMO, Layout
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, build_workload
from console.connectors.pulsar_cluster.routes import PulsarCluster

log = logging.getLogger("fulcrum.pulsar_cluster")

# -- serving -------------------------------------------------------------------------------------


class _BrokerHandler(BaseHTTPRequestHandler):
    """One broker's web port: every request goes to ``cluster.handle`` as this broker."""

    cluster: PulsarCluster
    broker_id: str
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.broker_id, format % args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        path, _, query = self.path.partition("?")
        status, headers, data = self.cluster.handle(
            self.broker_id, self.command, path, query, dict(self.headers.items()), body
        )
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status != 204 and data:
            self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()


def serve(cluster: PulsarCluster, host: str | None = None) -> list[ThreadingHTTPServer]:
    """Start one ``ThreadingHTTPServer`` per broker on its port (each in a daemon thread),
    listening on ``host`` (default the cluster's). Stop them with ``stop``.

    Raises:
        OSError: a port is taken (the servers already started are stopped).
    """
    servers: list[ThreadingHTTPServer] = []
    try:
        for broker in cluster.broker_ids:
            handler = type(
                "BrokerHandler", (_BrokerHandler,), {"cluster": cluster, "broker_id": broker}
            )
            server = ThreadingHTTPServer((host or cluster.host, cluster.port_of[broker]), handler)
            server.daemon_threads = True
            servers.append(server)
            threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"pulsar-broker-{broker}",
                daemon=True,
            ).start()
    except OSError:
        stop(servers)
        raise
    return servers


def stop(servers: Sequence[ThreadingHTTPServer]) -> None:
    """Stop the brokers' servers (all at once) and close their ports."""
    stopping = [threading.Thread(target=server.shutdown) for server in servers]
    for thread in stopping:
        thread.start()
    for thread, server in zip(stopping, servers, strict=True):
        thread.join()
        server.server_close()


def build(
    traces_dir: Path, *, layout: Layout = DEMO, scale: float = DEFAULT_SCALE, **options: Any
) -> PulsarCluster:
    """Load the traces and set up a cluster (``options``: ``PulsarCluster``'s keywords)."""
    workload = build_workload(layout, load_functions(traces_dir), scale=scale)
    cpu = {b.name: load_cpu_series(traces_dir, b.cpu_series) for b in layout.brokers}
    return PulsarCluster(workload, cpu, layout=layout, **options)


def run(
    cluster: PulsarCluster,
    step_s: float,
    steps: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Step every ``step_s`` wall seconds (a trace minute each) until ``steps`` are done or
    forever."""
    done = 0
    while steps is None or done < steps:
        started = time.monotonic()
        cluster.step(time.time())
        done += 1
        sleep(max(0.0, step_s - (time.monotonic() - started)))


def main(argv: list[str] | None = None) -> None:
    """Serve the demo cluster as a Pulsar cluster and play its traces."""
    parser = argparse.ArgumentParser(
        prog="python -m console.connectors.pulsar_cluster",
        description="The demo cluster served as an Apache Pulsar cluster (admin REST API).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--base-port", type=int, default=18080)
    parser.add_argument("--token", default=os.environ.get("FULCRUM_PULSAR_TOKEN") or None)
    parser.add_argument("--load-manager", choices=("modular", "extensible"), default="modular")
    parser.add_argument("--pulsar-version", default="3.3.2")
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=float(os.environ.get("FULCRUM_SIM_STEP_S", "2")),
        help="wall seconds per trace minute (default 2)",
    )
    parser.add_argument("--traces", type=Path, default=default_traces_dir())
    parser.add_argument("--start-minute", type=int, default=0)
    parser.add_argument("--unload-delay-seconds", type=float, default=0.0)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many minutes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cluster = build(
        args.traces,
        host=args.host,
        base_port=args.base_port,
        token=args.token,
        load_manager=args.load_manager,
        pulsar_version=args.pulsar_version,
        start_minute=args.start_minute,
        unload_delay_s=args.unload_delay_seconds,
    )
    servers = serve(cluster)
    log.info(
        "cluster %s (%s load manager, Pulsar %s): brokers %s, leader %s",
        cluster.cluster,
        args.load_manager,
        args.pulsar_version,
        ", ".join(cluster.broker_ids),
        cluster.leader,
    )
    try:
        run(cluster, args.step_seconds, args.steps)
    except KeyboardInterrupt:
        pass
    finally:
        stop(servers)
