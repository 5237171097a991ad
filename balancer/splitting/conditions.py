"""Which bundles must be split: Pulsar's modular auto-split detection."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class SplitCandidate:
    """A bundle to split and the first limit it exceeds (Topics, Sessions, MsgRate, Bandwidth)."""

    bundle: str
    reason: str
    value: float
    limit: float


def split_check(snapshot: ClusterSnapshot, config: PulsarConfig) -> list[SplitCandidate]:
    """Bundles whose long-term load exceeds a per-bundle limit, within the namespace's budget.

    For every owned bundle with at least two topics (brokers by name, then bundles by name): the
    first exceeded (strictly) of topics > ``loadBalancerNamespaceBundleMaxTopics``, producers +
    consumers > ``...MaxSessions`` (off when ≤ 0), long-term msg rate in+out > ``...MaxMsgRate``
    (msg/s), long-term throughput in+out > ``...MaxBandwidthMbytes`` MiB/s. A candidate is kept
    while the namespace's bundle count plus the candidates already kept for it stays below
    ``loadBalancerNamespaceMaximumBundles``.

    Source: Pulsar BundleSplitterTask (PULSAR.md §9.1).
    """
    counts = Counter(namespace_of_bundle(name) for name in snapshot.bundles)
    accepted: Counter[str] = Counter()
    out: list[SplitCandidate] = []
    for broker in snapshot.brokers.values():
        for name in sorted(broker.bundles):
            bundle = snapshot.bundles.get(name)
            if bundle is None or bundle.topics < 2:
                continue
            sessions = bundle.producers + bundle.consumers
            checks = (
                ("Topics", bundle.topics, config.bundle_max_topics, True),
                ("Sessions", sessions, config.bundle_max_sessions, config.bundle_max_sessions > 0),
                ("MsgRate", bundle.long_term.msg_rate, config.bundle_max_msg_rate, True),
                (
                    "Bandwidth",
                    bundle.long_term.throughput,
                    config.bundle_max_bandwidth_bytes_per_s,
                    True,
                ),
            )
            hit = next((c for c in checks if c[3] and c[1] > c[2]), None)
            if hit is None:
                continue
            namespace = namespace_of_bundle(name)
            if counts[namespace] + accepted[namespace] >= config.namespace_max_bundles:
                continue
            accepted[namespace] += 1
            out.append(SplitCandidate(name, hit[0], float(hit[1]), float(hit[2])))
    return out
