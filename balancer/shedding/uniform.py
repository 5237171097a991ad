"""Pulsar's UniformLoadShedder (modular load manager)."""

from __future__ import annotations

import math
from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.load import BrokerLoad, BundleLoad
from balancer.names import ShedderName
from balancer.shedding.common import in_grace_period
from balancer.snapshot import ClusterSnapshot

NAME = ShedderName.UNIFORM_LOAD
EPS = 1e-6
SLACK = 1000  # Pulsar's hard-coded slack, in msg/s or bytes/s alike (apache/pulsar#21905)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


def java_int(value: float) -> int:
    """Java's ``(int)`` cast of a double: truncate toward zero, saturate, NaN -> 0."""
    if math.isnan(value):
        return 0
    if value >= INT_MAX:
        return INT_MAX
    if value <= INT_MIN:
        return INT_MIN
    return int(value)


def _select(
    snapshot: ClusterSnapshot,
    broker: BrokerLoad,
    required: int,
    key: Any,
    config: PulsarConfig,
    metric: str,
) -> tuple[list[Unload], list[Skip]]:
    """Take bundles by descending ``key`` while each fits in ``required + 1000``."""
    skipped: list[Skip] = []
    candidates: list[tuple[float, str]] = []
    for name in broker.bundles:
        bundle = snapshot.bundles.get(name)
        if bundle is None:
            continue
        if in_grace_period(snapshot, name, config.grace_period_s):
            skipped.append(
                Skip("bundle", name, Reason.COOL_DOWN, "unloaded within the grace period")
            )
            continue
        if key(bundle) > 0:
            candidates.append((key(bundle), name))
    candidates.sort(key=lambda item: (-item[0], item[1]))
    unloads: list[Unload] = []
    limit = config.max_unload_bundles_per_shedding
    for value, name in candidates:
        if limit != -1 and len(unloads) >= limit:
            break
        if value <= required + SLACK:
            unloads.append(Unload(name, broker.name, None, Reason.LOAD_IMBALANCE, value, metric))
            required += java_int(-value)
    return unloads, skipped


def shed(
    snapshot: ClusterSnapshot, config: PulsarConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Move load from the busiest to the idlest broker when their message rates or throughputs
    differ too much.

    rate = msgRateIn + msgRateOut (msg/s), tput = msgThroughputIn + Out (bytes/s) of each broker;
    max and min by iteration order (ascending names; the first of equals wins); a min of ~0 counts
    as 1. The rate branch fires when (max − min) × 100 / min > ``loadBalancerMsgRateDifference
    ShedderThreshold`` and takes precedence over the throughput branch (max / min >
    ``loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold``). The amount is
    ``int((max − min) × maxUnloadPercentage)``; it must reach ``minUnloadMessage`` (msg/s) or
    ``minUnloadMessageThroughput`` (bytes/s) and the source must own more than one bundle. Bundles
    are taken by descending short-term rate (or throughput) when each is at most the remaining
    amount + 1000, scanning on after a rejection; ``maxUnloadBundleNumPerShedding`` caps the count.

    Returns:
        Unloads from one broker at most, reason LoadImbalance; stats with the extremes and figures.

    Source: Pulsar UniformLoadShedder (PULSAR.md §4), including its integer truncation.
    """
    max_rate, max_rate_broker = -1.0, None
    max_tput, max_tput_broker = -1.0, None
    min_rate, min_tput = float(INT_MAX), float(INT_MAX)
    for broker in snapshot.brokers.values():
        rate, tput = broker.rates.msg_rate, broker.rates.throughput
        if rate > max_rate:
            max_rate, max_rate_broker = rate, broker
        if tput > max_tput:
            max_tput, max_tput_broker = tput, broker
        min_rate = min(min_rate, rate)
        min_tput = min(min_tput, tput)
    if abs(min_rate) <= EPS:
        min_rate = 1.0
    if abs(min_tput) <= EPS:
        min_tput = 1.0
    rate_diff_percent = (max_rate - min_rate) * 100 / min_rate
    tput_ratio = max_tput / min_tput
    rate_threshold = config.msg_rate_difference_percent
    tput_threshold = config.msg_throughput_multiplier_difference
    is_rate_hit = rate_threshold > 0 and rate_diff_percent > rate_threshold
    is_tput_hit = tput_threshold > 0 and tput_ratio > tput_threshold
    stats = {
        "maxMsgRate": max_rate,
        "minMsgRate": min_rate,
        "msgRateDifferencePercent": rate_diff_percent,
        "maxThroughput": max_tput,
        "minThroughput": min_tput,
        "throughputRatio": tput_ratio,
        "maxMsgRateBroker": max_rate_broker.name if max_rate_broker else None,
        "maxThroughputBroker": max_tput_broker.name if max_tput_broker else None,
    }
    unloads: list[Unload] = []
    skipped: list[Skip] = []
    if is_rate_hit and max_rate_broker is not None:
        required = java_int((max_rate - min_rate) * config.max_unload_fraction)
        stats["required"] = required
        if len(max_rate_broker.bundles) > 1 and required >= config.min_unload_msg_per_s:
            unloads, skipped = _select(
                snapshot, max_rate_broker, required, _short_term_rate, config, "msgRate"
            )
    elif is_tput_hit and max_tput_broker is not None:
        required = java_int((max_tput - min_tput) * config.max_unload_fraction)
        stats["required"] = required
        if (
            len(max_tput_broker.bundles) > 1
            and required >= config.min_unload_throughput_bytes_per_s
        ):
            unloads, skipped = _select(
                snapshot, max_tput_broker, required, _short_term_throughput, config, "msgThroughput"
            )
    return SheddingDecision(
        unloads=tuple(unloads),
        reason=Reason.LOAD_IMBALANCE if unloads else Reason.BALANCED,
        skipped=tuple(skipped),
        stats=stats,
        state={},
        strategy=NAME,
    )


def _short_term_rate(bundle: BundleLoad) -> float:
    return bundle.short_term.msg_rate


def _short_term_throughput(bundle: BundleLoad) -> float:
    return bundle.short_term.throughput
