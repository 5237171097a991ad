"""Pulsar's ThresholdShedder (the modular load manager's default since 2.10)."""

from __future__ import annotations

from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.names import ShedderName
from balancer.shedding.common import select_bundles_by_throughput
from balancer.snapshot import ClusterSnapshot
from balancer.stats import imbalance
from balancer.units import MIB

NAME = ShedderName.THRESHOLD
ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5


def _update_history(
    snapshot: ClusterSnapshot, config: PulsarConfig, history: dict[str, float]
) -> tuple[float, dict[str, float]]:
    """One EMA step for every broker; returns the mean history and each broker's current usage."""
    h = config.history_resource_fraction
    usages = snapshot.weighted_usage(config.weights)
    current: dict[str, float] = {}
    total = 0.0
    for name in snapshot.brokers:
        usage = usages[name]
        current[name] = usage
        old = history.get(name)
        history[name] = usage if old is None else old * h + (1 - h) * usage
        total += history[name]
    count = len(snapshot.brokers)
    return (total / count if count else 0.0), current


def shed(
    snapshot: ClusterSnapshot, config: PulsarConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Unload bundles from brokers whose smoothed usage is at or above the mean plus a threshold.

    Each broker's usage is its weighted max resource usage (fraction), smoothed by an EMA kept in
    ``state["brokerAvgResourceUsage"]`` (weight ``loadBalancerHistoryResourcePercentage`` on the
    old value). A broker with history ≥ mean + threshold offloads
    ``(history - mean - threshold + 0.05) × its throughput`` bytes/s, largest bundles first, unless
    that is below ``loadBalancerBundleUnloadMinThroughputThreshold`` MiB/s or it owns one bundle.
    If nothing was selected and lower-boundary shedding is on, the EMA is stepped a second time
    and the most used multi-bundle broker above mean − threshold sheds threshold × 0.5 of its
    throughput when some broker is below mean − threshold.

    Args:
        snapshot: broker loads (usage as (usage, limit) pairs, throughput bytes/s) and bundle
            short-term throughputs (bytes/s); recently unloaded bundles with unload times (s).
        config: threshold, history weight, minimum throughput, grace period, weights.
        state: ``{"brokerAvgResourceUsage": {broker: fraction}}`` from the previous cycle, or {}.

    Returns:
        Unloads in selection order (brokers by ascending name, bundles by descending throughput),
        each with ``load`` the bundle's short-term throughput in bytes/s; stats ``avgUsage``,
        ``threshold`` and per-broker ``usage``/``history`` fractions; the next state.

    Source: Pulsar ThresholdShedder (PULSAR.md §2), parity with its code where its docs differ
    (§14.4: the 5 % margin is applied to the broker's throughput, not its usage).
    """
    history: dict[str, float] = {
        str(k): float(v) for k, v in state.get("brokerAvgResourceUsage", {}).items()
    }
    threshold = config.threshold_shedder_fraction
    min_throughput = config.bundle_unload_min_throughput_bytes_per_s
    avg_usage, current = _update_history(snapshot, config, history)

    def decision(
        unloads: list[Unload], reason: Reason, skipped: list[Skip], avg: float
    ) -> SheddingDecision:
        spread = imbalance(history[name] for name in snapshot.brokers)
        stats = {
            "avgUsage": avg,
            "threshold": threshold,
            "cv": spread.cv,
            "std": spread.std,
            "brokers": {
                name: {"usage": current[name], "history": history[name]}
                for name in snapshot.brokers
            },
        }
        return SheddingDecision(
            unloads=tuple(unloads),
            reason=reason,
            skipped=tuple(skipped),
            stats=stats,
            state={"brokerAvgResourceUsage": history},
            strategy=NAME,
        )

    if avg_usage == 0:
        return decision([], Reason.NO_LOAD_DATA, [], avg_usage)

    unloads: list[Unload] = []
    skipped: list[Skip] = []
    for name, broker in snapshot.brokers.items():
        usage = history[name]
        if usage < avg_usage + threshold:
            continue
        fraction = usage - avg_usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
        minimum_to_offload = broker.rates.throughput * fraction
        if minimum_to_offload < min_throughput:
            skipped.append(
                Skip(
                    "broker",
                    name,
                    Reason.BELOW_MIN_THROUGHPUT,
                    f"would offload {minimum_to_offload / MIB:.3f} MiB/s, "
                    f"below the {min_throughput / MIB:g} MiB/s minimum",
                )
            )
            continue
        if len(broker.bundles) <= 1:
            reason = Reason.SOLE_BUNDLE if broker.bundles else Reason.NO_BUNDLES
            skipped.append(Skip("broker", name, reason, "nothing to move"))
            continue
        chosen, left = select_bundles_by_throughput(
            snapshot, broker, minimum_to_offload, config.grace_period_s, Reason.OVERLOADED
        )
        unloads += chosen
        skipped += left

    if unloads or not config.is_lower_boundary_shedding_enabled:
        return decision(
            unloads, Reason.OVERLOADED if unloads else Reason.BALANCED, skipped, avg_usage
        )

    # Pulsar recomputes the average here, stepping the EMA a second time in the same cycle.
    avg_usage, current = _update_history(snapshot, config, history)
    lower_bar = avg_usage - threshold
    max_usage, max_broker, has_low = lower_bar, None, False
    for name, broker in snapshot.brokers.items():
        usage = history[name]
        if usage < lower_bar:
            has_low = True
        if usage > max_usage and len(broker.bundles) > 1:
            max_usage, max_broker = usage, broker
    if max_broker is None or not has_low:
        return decision([], Reason.BALANCED, skipped, avg_usage)
    minimum_to_offload = max_broker.rates.throughput * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
    if min_throughput > minimum_to_offload:
        skipped.append(Skip("broker", max_broker.name, Reason.BELOW_MIN_THROUGHPUT))
        return decision([], Reason.BALANCED, skipped, avg_usage)
    chosen, left = select_bundles_by_throughput(
        snapshot, max_broker, minimum_to_offload, config.grace_period_s, Reason.UNDERLOADED
    )
    return decision(chosen, Reason.UNDERLOADED, skipped + left, avg_usage)
