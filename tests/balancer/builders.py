"""Small builders for balancer tests: brokers and bundles from a few numbers."""

from __future__ import annotations

from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.snapshot import ClusterSnapshot
from balancer.units import MIB


def broker(
    name: str,
    cpu_percent: float,
    bundles: tuple[str, ...] = (),
    throughput_mib: float = 0.0,
    *,
    state: str = "active",
    domain: str = "",
    topics: int = 0,
) -> BrokerLoad:
    """A broker whose only loaded resource is CPU at ``cpu_percent`` of 100."""
    return BrokerLoad(
        name=name,
        failure_domain=domain,
        state=state,
        cpu=ResourceUsage(cpu_percent, 100),
        rates=MessageRates(0, 0, throughput_mib * MIB / 2, throughput_mib * MIB / 2),
        bundles=bundles,
        topics=topics,
    )


def bundle(
    name: str, owner: str | None, throughput_mib: float = 0.0, long_term_rate: float = 0.0
) -> BundleLoad:
    """A bundle with short-term throughput (MiB/s, split in/out) and long-term msg rate (msg/s)."""
    half = throughput_mib * MIB / 2
    return BundleLoad(
        name=name,
        owner=owner,
        short_term=MessageRates(0, 0, half, half),
        long_term=MessageRates(long_term_rate / 2, long_term_rate / 2, 0, 0),
    )


def snapshot(brokers, bundles=(), now=1_000_000.0, recently_unloaded=None) -> ClusterSnapshot:
    """A snapshot from lists of brokers and bundles."""
    return ClusterSnapshot(
        now=now,
        brokers={b.name: b for b in brokers},
        bundles={b.name: b for b in bundles},
        recently_unloaded=recently_unloaded or {},
    )
