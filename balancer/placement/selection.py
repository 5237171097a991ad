"""Selection strategies: pick one broker among the filtered candidates."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping

from balancer.config import PulsarConfig
from balancer.load import ResourceWeights
from balancer.snapshot import ClusterSnapshot


def least_long_term_message_rate(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
) -> tuple[str | None, dict[str, float]]:
    """Pick the candidate with the least long-term message rate.

    score(b) = +inf when b's weighted max usage (the five weights, memory included) exceeds
    ``loadBalancerBrokerOverloadedThresholdPercentage``; else the long-term msgRateIn + msgRateOut
    (msg/s) of the bundles b owns plus those preallocated to it. Uniform random choice, seeded by
    ``config.seed``, among the brokers with the exact minimal score (in ascending name order); when
    every score is +inf, among all candidates.

    Returns:
        (chosen broker or None when there are no candidates, score per candidate in msg/s).

    Source: Pulsar LeastLongTermMessageRate (PULSAR.md §7.1).
    """
    if not candidates:
        return None, {}
    weights: ResourceWeights = config.weights
    scores: dict[str, float] = {}
    for name in candidates:
        broker = snapshot.brokers[name]
        if broker.weighted_max_usage(weights) > config.overloaded_threshold_fraction:
            scores[name] = math.inf
            continue
        rate = sum(
            snapshot.bundles[b].long_term.msg_rate for b in broker.bundles if b in snapshot.bundles
        )
        rate += sum(
            snapshot.bundles[b].long_term.msg_rate
            for b, owner in preallocated.items()
            if owner == name and b in snapshot.bundles
        )
        scores[name] = rate
    best = min(scores.values())
    pool = (
        sorted(candidates) if best == math.inf else sorted(n for n in scores if scores[n] == best)
    )
    return random.Random(config.seed).choice(pool), scores
