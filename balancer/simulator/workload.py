"""Topics and their message rates from the Azure Functions trace.

Mapping (data/traces/README.md): one function -> one topic; its invocations in a trace minute / 60 ×
``scale`` -> the topic's msgRateIn (msg/s). The trace has no sizes, so each topic gets a message
size drawn once from a log-normal distribution (median ``size_median_bytes``, sigma 0.5, clipped to
128 B..64 KiB) and a fan-out of 1-3 subscriptions, both seeded by the topic's hash: the same topic
always has the same size and fan-out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from balancer.hashing import topic_hash
from balancer.simulator.layout import Layout
from balancer.simulator.traces import FunctionTrace

DEFAULT_SCALE = 1200.0  # messages per invocation
DEFAULT_SIZE_MEDIAN_BYTES = 4096.0


@dataclass(frozen=True)
class Workload:
    """Topics (names, namespaces, hashes, sizes in bytes, fan-out) and their per-minute counts."""

    names: tuple[str, ...]
    namespaces: tuple[str, ...]
    hashes: np.ndarray  # uint32 per topic
    sizes_bytes: np.ndarray  # float per topic
    fanout: np.ndarray  # int per topic (subscriptions, each reading every message)
    counts: np.ndarray  # [topic, minute] invocations
    scale: float

    @property
    def minutes(self) -> int:
        """Length of the trace in minutes (it replays from the start when it ends)."""
        return int(self.counts.shape[1])

    def msg_rate_in(self, minute: int) -> np.ndarray:
        """msgRateIn (msg/s) of every topic in trace minute ``minute`` (wraps around)."""
        return self.counts[:, minute % self.minutes] / 60.0 * self.scale


def build_workload(
    layout: Layout,
    trace: FunctionTrace,
    *,
    scale: float = DEFAULT_SCALE,
    size_median_bytes: float = DEFAULT_SIZE_MEDIAN_BYTES,
) -> Workload:
    """One topic per function, spread over the layout's namespaces round-robin in file order.

    Topic names are ``persistent://<tenant>/<ns>/fn-<first 12 hex of the function hash>``.
    """
    names, namespaces, hashes, sizes, fanout = [], [], [], [], []
    for index, function in enumerate(trace.functions):
        namespace = layout.namespaces[index % len(layout.namespaces)]
        name = f"persistent://{namespace}/fn-{function[:12]}"
        point = topic_hash(name)
        rng = np.random.default_rng(point)
        names.append(name)
        namespaces.append(namespace)
        hashes.append(point)
        sizes.append(float(np.clip(rng.lognormal(np.log(size_median_bytes), 0.5), 128, 1 << 16)))
        fanout.append(int(rng.integers(1, 4)))
    return Workload(
        names=tuple(names),
        namespaces=tuple(namespaces),
        hashes=np.asarray(hashes, dtype=np.int64),
        sizes_bytes=np.asarray(sizes),
        fanout=np.asarray(fanout, dtype=np.int64),
        counts=trace.counts,
        scale=scale,
    )
