"""Serving the simulated Pulsar cluster over HTTP, one port per broker, and its command line.
No Django."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

from balancer.simulator.layout import DEMO, Layout, generated_layout
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, build_workload
from console.connectors.pulsar_cluster.routes import PulsarCluster

log = logging.getLogger("fulcrum.pulsar_cluster")

# -- serving -------------------------------------------------------------------------------------


class _BrokerHandler(BaseHTTPRequestHandler):
    """One broker's web port: every request goes to ``cluster.handle`` as this broker (over
    https when the port is its TLS one)."""

    cluster: PulsarCluster
    broker_id: str
    is_secure: bool = False
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.broker_id, format % args)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        path, _, query = self.path.partition("?")
        status, headers, data = self.cluster.handle(
            self.broker_id,
            self.command,
            path,
            query,
            dict(self.headers.items()),
            body,
            is_secure=self.is_secure,
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


class _BrokerServer(ThreadingHTTPServer):
    """A broker's web port. A connection that fails below HTTP (a client's refused TLS
    handshake, a reset, a timeout) is one debug line in the log, as Jetty logs a failed
    handshake, not socketserver's traceback on stderr; any other error keeps the traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ssl.SSLError | ConnectionError | TimeoutError):
            log.debug("connection from %s ended below HTTP: %s", client_address, error)
            return
        super().handle_error(request, client_address)


def tls_material(directory: Path, hosts: Sequence[str]) -> tuple[ssl.SSLContext, Path]:
    """A CA made now and a certificate for ``hosts`` it signs (trustme): the brokers' server
    context, and the CA's PEM written to ``directory/pulsar-ca.pem`` for the client
    (``FULCRUM_PULSAR_TLS_CA``)."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(*hosts).configure_cert(context)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pulsar-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return context, path


def serve(
    cluster: PulsarCluster, host: str | None = None, *, tls: ssl.SSLContext | None = None
) -> list[ThreadingHTTPServer]:
    """Start one ``ThreadingHTTPServer`` per broker on its port (each in a daemon thread), and
    with ``tls`` (a server context) one more per broker on its TLS port, listening on ``host``
    (default the cluster's). Stop them with ``stop``.

    Raises:
        OSError: a port is taken (the servers already started are stopped).
    """
    servers: list[ThreadingHTTPServer] = []
    ports = [(b, cluster.port_of[b], False) for b in cluster.broker_ids]
    if tls is not None:
        ports += [(b, cluster.tls_port_of[b], True) for b in cluster.broker_ids]
    try:
        for broker, port, secure in ports:
            handler = type(
                "BrokerHandler",
                (_BrokerHandler,),
                {"cluster": cluster, "broker_id": broker, "is_secure": secure},
            )
            server = _BrokerServer((host or cluster.host, port), handler)
            if secure and tls is not None:
                # The handshake runs in the request's own thread, not in the accept loop: a
                # client that stalls it blocks no one else.
                server.socket = tls.wrap_socket(
                    server.socket, server_side=True, do_handshake_on_connect=False
                )
            server.daemon_threads = True
            servers.append(server)
            threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"pulsar-broker-{broker}{'-tls' if secure else ''}",
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
    """Serve a simulated cluster as a Pulsar cluster and play its traces: the demo layout, or
    one of the size the options give."""
    parser = argparse.ArgumentParser(
        prog="python -m console.connectors.pulsar_cluster",
        description="A simulated cluster served as an Apache Pulsar cluster (admin REST API).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--base-port", type=int, default=18080, help="broker i's http port - i")
    parser.add_argument("--token", default=os.environ.get("FULCRUM_PULSAR_TOKEN") or None)
    parser.add_argument("--load-manager", choices=("modular", "extensible"), default="modular")
    parser.add_argument(
        "--pulsar-version",
        default="3.3.2",
        help="the version the brokers report: below 3.0 no destinationBroker; before 4.0.10 "
        "(4.2.1) the destination hint is keyed by bundle range",
    )
    size = parser.add_argument_group(
        "size",
        "any of these makes a generated layout instead of the demo's (8 brokers, 3 "
        "failure domains, 6 namespaces x 16 bundles and 5 anti-affinity namespaces)",
    )
    size.add_argument("--brokers", type=int, help="default 8")
    size.add_argument("--namespaces", type=int, help="default 6")
    size.add_argument("--bundles-per-namespace", type=int, help="default 16")
    size.add_argument("--failure-domains", type=int, help="default 3")
    parser.add_argument(
        "--tls-base-port",
        type=int,
        default=None,
        help="also serve https, broker i on this port + i (its id keeps the http port); the "
        "CA is written to --tls-dir/pulsar-ca.pem",
    )
    parser.add_argument("--tls-dir", type=Path, default=Path("var"))
    parser.add_argument(
        "--remote-clusters",
        default=None,
        help="comma-separated other clusters /admin/v2/clusters lists before the local one "
        "(default <cluster>-dr; empty: none)",
    )
    parser.add_argument(
        "--expose-bundle-metrics",
        action="store_true",
        help="exposeBundlesMetricsInPrometheus=true (pulsar_bundle_* in /metrics)",
    )
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
    sizes = (args.brokers, args.namespaces, args.bundles_per_namespace, args.failure_domains)
    layout = DEMO
    if any(v is not None for v in sizes):
        try:
            brokers = 8 if args.brokers is None else args.brokers
            layout = generated_layout(
                brokers,
                6 if args.namespaces is None else args.namespaces,
                16 if args.bundles_per_namespace is None else args.bundles_per_namespace,
                min(3, brokers) if args.failure_domains is None else args.failure_domains,
            )
        except ValueError as exc:
            parser.error(str(exc))
    count = len(layout.brokers)
    remote = (
        None
        if args.remote_clusters is None
        else [c.strip() for c in args.remote_clusters.split(",") if c.strip()]
    )
    try:
        cluster = build(
            args.traces,
            layout=layout,
            host=args.host,
            base_port=args.base_port,
            token=args.token,
            load_manager=args.load_manager,
            pulsar_version=args.pulsar_version,
            start_minute=args.start_minute,
            unload_delay_s=args.unload_delay_seconds,
            remote_clusters=remote,
            tls_ports=(
                [args.tls_base_port + i for i in range(count)]
                if args.tls_base_port is not None
                else None
            ),
            expose_bundle_metrics=args.expose_bundle_metrics,
        )
    except ValueError as exc:
        parser.error(str(exc))
    tls = None
    if args.tls_base_port is not None:
        tls, ca = tls_material(args.tls_dir, ["localhost", args.host])
        log.info(
            "https on ports %d-%d; CA %s", args.tls_base_port, args.tls_base_port + count - 1, ca
        )
    servers = serve(cluster, tls=tls)
    log.info(
        "cluster %s (%s load manager, Pulsar %s): %d brokers, %d namespaces, %d bundles; "
        "brokers %s, leader %s",
        cluster.cluster,
        args.load_manager,
        args.pulsar_version,
        count,
        len(layout.namespaces) + len(layout.anti_affinity),
        sum(1 for b in cluster.owners if not cluster.is_system(b)),
        ", ".join(cluster.broker_ids[:8]) + (" …" if count > 8 else ""),
        cluster.leader,
    )
    try:
        run(cluster, args.step_seconds, args.steps)
    except KeyboardInterrupt:
        pass
    finally:
        stop(servers)
