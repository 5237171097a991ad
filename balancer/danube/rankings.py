"""Danube's broker rankings: an integer score per broker, least loaded first."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Final

from balancer.load import BrokerLoad
from balancer.names import PlacementName
from balancer.snapshot import ClusterSnapshot

MB = 1_000_000  # Danube's "mbps" fields are megabytes (10^6 bytes) per second


def weighted_topic_load(broker: BrokerLoad) -> float:
    """0.2 × topics + 0.3 × Σ MB/s + 0.3 × Σ (producers + consumers) + 0.2 × Σ backlog / 10,000;
    0 for a broker without topics (DANUBE.md §2.2)."""
    if not broker.topic_stats and not broker.topics:
        return 0.0
    stats = broker.topic_stats
    return (
        0.2 * (len(stats) or broker.topics)
        + 0.3 * sum(t.byte_rate / MB for t in stats)
        + 0.3 * sum(t.producers + t.consumers for t in stats)
        + 0.2 * (sum(t.backlog for t in stats) / 10_000)
    )


def _topic_count(broker: BrokerLoad) -> int:
    return len(broker.topic_stats) or broker.topics


def fair(snapshot: ClusterSnapshot) -> dict[str, int]:
    """score = the broker's topic count (DANUBE.md §2.1)."""
    return {name: _topic_count(b) for name, b in snapshot.brokers.items()}


def balanced(snapshot: ClusterSnapshot) -> dict[str, int]:
    """floor(0.3 × weighted topic load + 0.35 × CPU % + 0.35 × memory %); the topic count for
    every broker when no broker reports any CPU or memory use (DANUBE.md §2.2)."""
    cpu, memory = snapshot.percents("cpu"), snapshot.percents("memory")
    if not any(v > 0 for v in cpu.values()) and not any(v > 0 for v in memory.values()):
        return fair(snapshot)
    return {
        name: math.floor(0.3 * weighted_topic_load(b) + 0.35 * cpu[name] + 0.35 * memory[name])
        for name, b in snapshot.brokers.items()
    }


def weighted_load(snapshot: ClusterSnapshot) -> dict[str, int]:
    """Adaptive bottleneck score, floor(100 × s) (DANUBE.md §2.3).

    Utilisations against cluster maxima (each floored at 1.0): cpu %, memory %, disk (0 here: the
    load model has no disk I/O), network (bandwidth in + out, MB/s), throughput (Σ topic MB/s)
    and weighted topic load. With m the largest utilisation: above 0.7 the bottleneck's formula
    (cpu, memory, throughput, network, else topic-first) applies, in that order of ties; otherwise
    0.25 topic + 0.25 cpu + 0.25 mem + 0.15 thr + 0.1 net.
    """
    cpu, memory = snapshot.percents("cpu"), snapshot.percents("memory")
    values = {
        name: {
            "cpu": cpu[name],
            "mem": memory[name],
            "disk": 0.0,
            "net": (b.bandwidth_in.usage + b.bandwidth_out.usage) / MB,
            "thr": sum(t.byte_rate for t in b.topic_stats) / MB,
            "topic": weighted_topic_load(b),
        }
        for name, b in snapshot.brokers.items()
    }
    keys = ("cpu", "mem", "disk", "net", "thr", "topic")
    maxima = {k: max([1.0, *(v[k] for v in values.values())]) for k in keys}
    scores = {}
    for name, v in values.items():
        u = {k: v[k] / maxima[k] for k in keys}
        m = max(u.values())
        if m > 0.7:
            if m == u["cpu"]:
                s = 0.5 * u["cpu"] + 0.2 * u["mem"] + 0.15 * u["thr"] + 0.15 * u["topic"]
            elif m == u["mem"]:
                s = 0.5 * u["mem"] + 0.2 * u["cpu"] + 0.15 * u["thr"] + 0.15 * u["topic"]
            elif m == u["thr"]:
                s = 0.5 * u["thr"] + 0.2 * u["net"] + 0.15 * u["cpu"] + 0.15 * u["mem"]
            elif m == u["net"]:
                s = 0.5 * u["net"] + 0.2 * u["thr"] + 0.15 * u["cpu"] + 0.15 * u["mem"]
            else:
                s = 0.5 * u["topic"] + 0.2 * u["cpu"] + 0.2 * u["mem"] + 0.1 * u["thr"]
        else:
            s = (
                0.25 * u["topic"]
                + 0.25 * u["cpu"]
                + 0.25 * u["mem"]
                + 0.15 * u["thr"]
                + 0.1 * u["net"]
            )
        scores[name] = math.floor(100 * s)
    return scores


RANKINGS: Final[Mapping[str, Callable[[ClusterSnapshot], dict[str, int]]]] = {
    PlacementName.DANUBE_FAIR: fair,
    PlacementName.DANUBE_BALANCED: balanced,
    PlacementName.DANUBE_WEIGHTED_LOAD: weighted_load,
}


def ranked(snapshot: ClusterSnapshot, strategy: str) -> list[tuple[str, int]]:
    """(broker, score) least loaded first; ties by ascending broker name (spec README §5)."""
    scores = RANKINGS[strategy](snapshot)
    return sorted(scores.items(), key=lambda item: (item[1], item[0]))
