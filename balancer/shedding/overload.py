"""Pulsar's OverloadShedder (modular load manager)."""

from __future__ import annotations

from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.names import ShedderName
from balancer.shedding.common import select_bundles_by_throughput
from balancer.snapshot import ClusterSnapshot

NAME = ShedderName.OVERLOAD
ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05


def shed(
    snapshot: ClusterSnapshot, config: PulsarConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Unload bundles from every broker whose max resource usage is at or above the overload bar.

    usage = unweighted max of cpu, direct memory and bandwidth in/out (fraction); a broker with
    usage ≥ ``loadBalancerBrokerOverloadedThresholdPercentage`` offloads
    ``(usage - bar + 0.05) × its throughput`` bytes/s, largest short-term throughput first, at least
    one bundle. Brokers with one bundle are skipped; bundles in the grace period are skipped. No
    history, no mean, no minimum throughput.

    Args:
        snapshot: broker loads and bundle short-term throughputs (bytes/s).
        config: the overload bar and grace period.
        state: unused (the strategy remembers nothing); returned as ``{}``.

    Returns:
        Unloads by ascending broker name, then descending throughput; stats ``overloadThreshold``
        and per-broker ``usage``.

    Source: Pulsar OverloadShedder (PULSAR.md §3). Seed example: 95 % with bar 85 % -> 15 % of
    the broker's throughput.
    """
    bar = config.overloaded_threshold_fraction
    unloads: list[Unload] = []
    skipped: list[Skip] = []
    usage = snapshot.max_usage()
    for name, broker in snapshot.brokers.items():
        if usage[name] < bar:
            continue
        if len(broker.bundles) <= 1:
            reason = Reason.SOLE_BUNDLE if broker.bundles else Reason.NO_BUNDLES
            skipped.append(Skip("broker", name, reason, "nothing to move"))
            continue
        target = broker.rates.throughput * (usage[name] - bar + ADDITIONAL_THRESHOLD_PERCENT_MARGIN)
        chosen, left = select_bundles_by_throughput(
            snapshot, broker, target, config.grace_period_s, Reason.OVERLOADED
        )
        unloads += chosen
        skipped += left
    return SheddingDecision(
        unloads=tuple(unloads),
        reason=Reason.OVERLOADED if unloads else Reason.BALANCED,
        skipped=tuple(skipped),
        stats={"overloadThreshold": bar, "brokers": {n: {"usage": u} for n, u in usage.items()}},
        state={},
        strategy=NAME,
    )
