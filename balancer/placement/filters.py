"""Candidate filters applied before a placement strategy selects; each reports whom it rejected.

Source: Pulsar ModularLoadManagerImpl.selectBrokerForAssignment and LoadManagerShared
(PULSAR.md §1 steps 2-6, §8.4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.decisions import Reason, Rejection
from balancer.snapshot import ClusterSnapshot


def active_brokers(
    snapshot: ClusterSnapshot, candidates: list[str]
) -> tuple[list[str], list[Rejection]]:
    """Drop draining and drained brokers: they take no new bundles."""
    kept, rejected = [], []
    for name in candidates:
        broker = snapshot.brokers[name]
        if broker.is_active:
            kept.append(name)
        else:
            rejected.append(Rejection(name, "inactive", Reason.INACTIVE, f"state {broker.state}"))
    return kept, rejected


def max_topics(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
) -> tuple[list[str], list[Rejection]]:
    """Drop brokers whose topics (reported + preallocated bundles') exceed
    ``loadBalancerBrokerMaxTopics``, unless that would drop every broker (then keep all)."""
    extra: Counter[str] = Counter()
    for bundle, broker in preallocated.items():
        load = snapshot.bundles.get(bundle)
        extra[broker] += load.topics if load else 0
    kept, rejected = [], []
    for name in candidates:
        topics = snapshot.brokers[name].topics + extra[name]
        if topics > config.broker_max_topics:
            rejected.append(
                Rejection(
                    name,
                    "max_topics",
                    Reason.TOO_MANY_TOPICS,
                    f"{topics} topics > {config.broker_max_topics}",
                )
            )
        else:
            kept.append(name)
    if not kept:
        return candidates, []
    return kept, rejected


def even_distribution(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    bundle: str,
    preallocated: Mapping[str, str],
) -> tuple[list[str], list[Rejection]]:
    """Keep the brokers owning the fewest bundles of ``bundle``'s namespace (owned or preallocated).

    Source: Pulsar ``removeMostServicingBrokersForNamespace`` (PULSAR.md §8.4).
    """
    namespace = namespace_of_bundle(bundle)
    counts: Counter[str] = Counter()
    for load in snapshot.bundles.values():
        if (
            load.owner is not None
            and load.name != bundle
            and namespace_of_bundle(load.name) == namespace
        ):
            counts[load.owner] += 1
    for other, broker in preallocated.items():
        owner = snapshot.bundles[other].owner if other in snapshot.bundles else None
        if other != bundle and owner is None and namespace_of_bundle(other) == namespace:
            counts[broker] += 1
    if not candidates:
        return candidates, []
    least = min(counts[name] for name in candidates)
    kept = [name for name in candidates if counts[name] == least]
    rejected = [
        Rejection(
            name,
            "even_distribution",
            Reason.NOT_LEAST_BUNDLES,
            f"owns {counts[name]} bundles of {namespace}, the least is {least}",
        )
        for name in candidates
        if counts[name] != least
    ]
    return kept, rejected
