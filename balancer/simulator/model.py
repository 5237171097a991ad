"""Brokers as the simulator plays them: load follows from the bundles a broker owns, plus its
background CPU, against its capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from balancer.bundles import parse_bundle_name
from balancer.simulator.layout import BrokerSpec
from balancer.simulator.workload import Workload
from balancer.units import MIB

BACKGROUND_CPU_SHARE = 0.3  # how much of the NAB instance's CPU shows up on the broker


@dataclass(frozen=True)
class BundleMap:
    """Which bundle each topic hashes into, for the current bundle boundaries.

    Attributes:
        bundle_names: every bundle, sorted.
        topic_bundle: index into ``bundle_names`` per topic.
    """

    bundle_names: tuple[str, ...]
    topic_bundle: np.ndarray

    @classmethod
    def build(cls, workload: Workload, bundle_names: Sequence[str]) -> BundleMap:
        """Map every topic to its bundle (boundary search per namespace, as the broker does).

        Raises:
            InvalidBundleRange: a bundle name without a range.
            ValueError: a topic's namespace has no bundles.
        """
        names = tuple(sorted(bundle_names))
        index_of = {name: i for i, name in enumerate(names)}
        by_namespace: dict[str, list[tuple[int, int, str]]] = {}
        for name in names:
            bundle = parse_bundle_name(name)
            by_namespace.setdefault(bundle.namespace, []).append(
                (bundle.range.lower, bundle.range.upper, name)
            )
        topic_bundle = np.empty(len(workload.names), dtype=np.int64)
        ns_array = np.asarray(workload.namespaces)
        for namespace in set(workload.namespaces):
            ranges = sorted(by_namespace.get(namespace, []))
            if not ranges:
                raise ValueError(f"namespace {namespace} has no bundles")
            lowers = np.asarray([r[0] for r in ranges], dtype=np.int64)
            members = np.flatnonzero(ns_array == namespace)
            slot = np.searchsorted(lowers, workload.hashes[members], side="right") - 1
            targets = np.asarray([index_of[r[2]] for r in ranges], dtype=np.int64)
            topic_bundle[members] = targets[slot]
        return cls(names, topic_bundle)

    def first_topic(self, workload: Workload) -> dict[str, str]:
        """One topic name per bundle that has topics (what a client would look up)."""
        out: dict[str, str] = {}
        for topic, bundle in enumerate(self.topic_bundle):
            out.setdefault(self.bundle_names[bundle], workload.names[topic])
        return out


def bundle_stats(
    workload: Workload, bundles: BundleMap, minute: int, *, with_topics: bool = False
) -> dict[str, dict[str, Any]]:
    """Per-bundle rates in trace minute ``minute``: msgRateIn/Out (msg/s), msgThroughputIn/Out
    (bytes/s), topics, producers (one per topic) and consumers (the fan-out); with
    ``with_topics`` also ``topicStats``, each of the bundle's topics with its own rates (what a
    broker's ``broker-stats/topics`` gives, and the topic split algorithms cut by)."""
    rate_in = workload.msg_rate_in(minute)
    n = len(bundles.bundle_names)
    idx = bundles.topic_bundle
    sums = {
        "msgRateIn": np.bincount(idx, rate_in, n),
        "msgRateOut": np.bincount(idx, rate_in * workload.fanout, n),
        "msgThroughputIn": np.bincount(idx, rate_in * workload.sizes_bytes, n),
        "msgThroughputOut": np.bincount(idx, rate_in * workload.sizes_bytes * workload.fanout, n),
        "topics": np.bincount(idx, None, n),
        "consumers": np.bincount(idx, workload.fanout, n),
    }
    out: dict[str, dict[str, Any]] = {
        name: {
            "msgRateIn": float(sums["msgRateIn"][i]),
            "msgRateOut": float(sums["msgRateOut"][i]),
            "msgThroughputIn": float(sums["msgThroughputIn"][i]),
            "msgThroughputOut": float(sums["msgThroughputOut"][i]),
            "topics": int(sums["topics"][i]),
            "producers": int(sums["topics"][i]),
            "consumers": int(sums["consumers"][i]),
        }
        for i, name in enumerate(bundles.bundle_names)
    }
    if with_topics:
        for stats in out.values():
            stats["topicStats"] = []
        out_rate = rate_in * workload.fanout
        bytes_in = rate_in * workload.sizes_bytes
        for topic, bundle in enumerate(idx.tolist()):
            out[bundles.bundle_names[bundle]]["topicStats"].append(
                {
                    "topic": workload.names[topic],
                    "msgRateIn": float(rate_in[topic]),
                    "msgRateOut": float(out_rate[topic]),
                    "msgThroughputIn": float(bytes_in[topic]),
                    "msgThroughputOut": float(bytes_in[topic] * workload.fanout[topic]),
                }
            )
    return out


def broker_report(
    spec: BrokerSpec,
    owned: Sequence[str],
    stats: Mapping[str, Mapping[str, float]],
    background_cpu_percent: float,
    timestamp: float,
) -> dict[str, Any]:
    """The load report (CLI.md broker document + ``timestamp`` + ``bundleStats``) of a broker
    serving exactly the bundles in ``owned``.

    CPU % = background × 0.3 + (msgRateIn + msgRateOut) / ``cpu_msgs_per_s`` × 100; bandwidth
    in/out = throughput in/out against the NIC capacity; heap = 1 GiB + 2 MiB per topic +
    10 × the inbound MiB/s (for the memory column only: its weight is 0).
    """
    mine = {name: dict(stats[name]) for name in owned if name in stats}
    total = {
        key: sum(s[key] for s in mine.values())
        for key in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut", "topics")
    }
    cpu = background_cpu_percent * BACKGROUND_CPU_SHARE + (
        (total["msgRateIn"] + total["msgRateOut"]) / spec.cpu_msgs_per_s * 100.0
    )
    memory = 1024.0 + 2.0 * total["topics"] + 10.0 * total["msgThroughputIn"] / MIB
    return {
        "name": spec.name,
        "timestamp": timestamp,
        "cpu": {"usage": round(cpu, 3), "limit": 100.0},
        "memory": {"usage": round(min(memory, spec.memory_mib), 1), "limit": spec.memory_mib},
        "directMemory": {"usage": 0.0, "limit": 0.0},
        "bandwidthIn": {"usage": total["msgThroughputIn"], "limit": spec.bandwidth_bytes_per_s},
        "bandwidthOut": {"usage": total["msgThroughputOut"], "limit": spec.bandwidth_bytes_per_s},
        "msgRateIn": total["msgRateIn"],
        "msgRateOut": total["msgRateOut"],
        "msgThroughputIn": total["msgThroughputIn"],
        "msgThroughputOut": total["msgThroughputOut"],
        "bundles": sorted(owned),
        "topics": int(total["topics"]),
        "bundleStats": mine,
    }


def background_cpu(series: np.ndarray, minute: int) -> float:
    """The NAB series value (percent) for trace minute ``minute``: one sample per 5 minutes."""
    return float(series[(minute // 5) % len(series)])
