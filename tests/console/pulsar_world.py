"""The simulated Pulsar cluster answering the console's connector through respx (no sockets):
what the Pulsar tests share. The ``pulsar_world`` fixture is in ``conftest.py``."""

from __future__ import annotations

import httpx
import numpy as np

from balancer.simulator.layout import DEMO
from console.connectors.pulsar_cluster import PulsarCluster

TOKEN = "reality-token"


def flat_cpu(percent: float = 40.0) -> dict[str, np.ndarray]:
    """Every broker's background CPU steady at ``percent``: load changes come from bundles."""
    return {b.name: np.full(288, percent) for b in DEMO.brokers}


def answer(cluster: PulsarCluster):
    """respx side effect: the request answered by the broker its URL names (over https: the
    broker whose TLS port it is)."""
    by_tls = {f"{cluster.host}:{port}": b for b, port in cluster.tls_port_of.items()}

    def respond(request: httpx.Request) -> httpx.Response:
        netloc = request.url.netloc.decode()
        secure = request.url.scheme == "https"
        status, headers, body = cluster.handle(
            by_tls.get(netloc, netloc) if secure else netloc,
            request.method,
            request.url.path,
            request.url.query.decode(),
            dict(request.headers),
            request.content,
            is_secure=secure,
        )
        return httpx.Response(status, headers=headers, content=body)

    return respond
