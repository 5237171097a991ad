"""Danube's rankings and rebalancer applied to bundles, the unit the cycle moves.

Danube moves topics; a Pulsar-style cluster assigns bundles. The adaptation
(docs/developers/cycle.md, deviations): each bundle is one of Danube's topics — its short-term msg
rate and throughput as the topic's rates, its producers and consumers as its connections, no
backlog — so that Danube's load score (0.2 + 0.3·MB/s + 0.3·connections + 0.2·backlog/10k), its
rankings and its CV rule read bundles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from balancer.load import TopicStats
from balancer.snapshot import ClusterSnapshot


def bundle_view(snapshot: ClusterSnapshot, gone: Iterable[str] = ()) -> ClusterSnapshot:
    """The brokers as Danube sees them when bundles are its topics: every broker but ``gone``,
    with ``topic_stats`` = its owned bundles (msg/s, bytes/s, producers, consumers). The view
    carries no bundles: Danube reads brokers only."""
    gone_set = set(gone)
    brokers = {}
    for name, broker in snapshot.brokers.items():
        if name in gone_set:
            continue
        stats = []
        for bundle in snapshot.owned_by(name):
            load = snapshot.bundles[bundle]
            stats.append(
                TopicStats(
                    bundle,
                    message_rate=load.short_term.msg_rate,
                    byte_rate=load.short_term.throughput,
                    producers=load.producers,
                    consumers=load.consumers,
                )
            )
        brokers[name] = replace(broker, topic_stats=tuple(stats))
    return ClusterSnapshot(snapshot.now, brokers, {}, snapshot.namespaces)
