"""Selection strategies: pick one broker among the filtered candidates."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

import numpy as np

from balancer.bundle_table import RATE_FIELDS
from balancer.config import PulsarConfig
from balancer.load_model import LoadModel, bundle_loads
from balancer.names import PlacementName
from balancer.placement.preallocated import running_total
from balancer.snapshot import ClusterSnapshot


def least_long_term_message_rate(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
    state: dict[str, Any] | None = None,
    bundle: str = "",
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
    usage = snapshot.weighted_usage(config.weights)
    extra: dict[str, float] = {}
    for bundle_name, owner in preallocated.items():
        if bundle_name in snapshot.bundles:
            load = snapshot.bundles[bundle_name].long_term.msg_rate
            extra[owner] = extra.get(owner, 0.0) + load
    scores: dict[str, float] = {}
    for name in candidates:
        if usage[name] > config.overloaded_threshold_fraction:
            scores[name] = math.inf
        else:
            scores[name] = snapshot.long_term_msg_rate(name) + extra.get(name, 0.0)
    best = min(scores.values())
    pool = (
        sorted(candidates) if best == math.inf else sorted(n for n in scores if scores[n] == best)
    )
    return random.Random(config.seed).choice(pool), scores


def least_resource_usage_with_weight(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
    state: dict[str, Any] | None = None,
    bundle: str = "",
) -> tuple[str | None, dict[str, float]]:
    """Pick among the candidates whose smoothed usage is at least a margin below their mean.

    Each candidate's usage is the weighted max of cpu, direct memory and bandwidth in/out
    (fraction, memory left out), smoothed by an EMA kept in
    ``state["brokerAvgResourceUsageWithWeight"]`` (``loadBalancerHistoryResourcePercentage`` on
    the old value); a broker with no bundles or no traffic starts its history afresh. Best =
    candidates with history + ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``
    ≤ the mean history of the candidates; if none, every candidate. Seeded random choice among
    them (ascending names). ``state`` is updated in place.

    | usage | mean | best (diff 10 %) |
    |---|---|---|
    | 10 %, 30 %, 80 % | 40 % | 10 %, 30 % |
    | 40, 40, 40, 40, 69, 70 % | 49.8 % | none -> all six |

    When the candidates report weightedMaxEMA (the extensible load manager's BrokerLoadData),
    the extensible variant decides instead (PULSAR.md §7.5).

    Source: Pulsar modular LeastResourceUsageWithWeight (PULSAR.md §7.2).
    """
    if not candidates:
        return None, {}
    if any(snapshot.brokers[n].weighted_max_ema is not None for n in candidates):
        return _extensible_least_resource_usage(snapshot, candidates, config)
    state = state if state is not None else {}
    history: dict[str, float] = dict(state.get("brokerAvgResourceUsageWithWeight", {}))
    state["brokerAvgResourceUsageWithWeight"] = history
    h = config.history_resource_fraction
    usage = snapshot.weighted_usage(replace(config.weights, memory=0.0))
    for name in candidates:
        broker = snapshot.brokers[name]
        if not broker.bundles or (broker.rates.msg_rate_in == 0 and broker.rates.msg_rate_out == 0):
            history.pop(name, None)
        current = usage[name]
        old = history.get(name)
        history[name] = current if old is None else h * old + (1 - h) * current
    scores = {name: history[name] for name in candidates}
    mean = sum(scores.values()) / len(scores)
    diff = config.average_resource_usage_difference_fraction
    best = sorted(n for n in candidates if scores[n] + diff <= mean) or sorted(candidates)
    return random.Random(config.seed).choice(best), scores


def _extensible_least_resource_usage(
    snapshot: ClusterSnapshot, candidates: list[str], config: PulsarConfig
) -> tuple[str | None, dict[str, float]]:
    """The extensible load manager's variant, chosen when brokers report weightedMaxEMA: usage
    is that figure (no local history); brokers without it are left out of the mean and of the
    best set, but stay in the all-candidates fallback (PULSAR.md §7.5)."""
    scores: dict[str, float] = {}
    for n in candidates:
        ema = snapshot.brokers[n].weighted_max_ema
        if ema is not None:
            scores[n] = ema
    mean = sum(scores.values()) / len(scores)
    diff = config.average_resource_usage_difference_fraction
    best = sorted(n for n, s in scores.items() if s + diff <= mean) or sorted(candidates)
    return random.Random(config.seed).choice(best), {n: float(s) for n, s in scores.items()}


def avg_shedder_select(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
    state: dict[str, Any] | None = None,
    bundle: str = "",
) -> tuple[str | None, dict[str, float]]:
    """AvgShedder's placement: the destination its shedding recorded for ``bundle``
    (``state["bundleBrokerMap"]``) when that broker is a candidate; otherwise a seeded random
    candidate, which is then remembered for the bundle.

    Source: Pulsar AvgShedder.selectBroker (PULSAR.md §5); Pulsar's pick is truly random.
    """
    if not candidates:
        return None, {}
    state = state if state is not None else {}
    intended: dict[str, str] = dict(state.get("bundleBrokerMap", {}))
    state["bundleBrokerMap"] = intended
    broker = intended.get(bundle)
    if broker not in candidates:
        broker = random.Random(config.seed).choice(sorted(candidates))
        intended[bundle] = broker
    return broker, {name: (1.0 if name == broker else 0.0) for name in candidates}


Selector = Callable[
    [ClusterSnapshot, list[str], PulsarConfig, Mapping[str, str], dict[str, Any] | None, str],
    tuple[str | None, dict[str, float]],
]


def fulcrum_least_predicted_usage(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
    state: dict[str, Any] | None = None,
    bundle: str = "",
) -> tuple[str | None, dict[str, float]]:
    """Pick the candidate whose predicted usage with the bundle is the least (ties by name).

    score(b) = b's usage (fraction, Pulsar's weighted max) by Fulcrum's load model
    (``balancer.load_model``: its background plus the load of the bundles it owns) with the
    load of the bundles preallocated to it and of this bundle added (CPU at the cost of one
    msg/s, its short-term throughput in and out). A new or idle broker scores its background
    only, so it fills first.

    Returns:
        (chosen broker or None when there are no candidates, score per candidate as a fraction).

    Source: Fulcrum (docs/developers/cycle.md § "Fulcrum's own strategy").
    """
    if not candidates:
        return None, {}
    model = snapshot.cached(
        ("fulcrum_model", config.weights),
        lambda: LoadModel.of(snapshot, list(snapshot.brokers), config.weights),
    )

    def load_of(name: str) -> np.ndarray:
        rates = snapshot.bundles[name].short_term
        fields = [getattr(rates, f) for f in RATE_FIELDS]
        return np.asarray(
            bundle_loads(np.asarray(fields), model.cost, model.cost_per_byte)[0], dtype=np.float64
        )

    def add(extra: np.ndarray, other: str, owner: str) -> None:
        if other in snapshot.bundles and owner in model.index and other != bundle:
            extra[model.index[owner]] += load_of(other)

    if bundle in preallocated:  # placed again in the same pass: itself left out of the sum
        extra = np.zeros_like(model.load)
        for other, owner in preallocated.items():
            add(extra, other, owner)
    else:
        extra = running_total(
            snapshot,
            preallocated,
            ("fulcrum_model", config.weights),
            lambda: np.zeros_like(model.load),
            add,
        )
    mine = load_of(bundle) if bundle in snapshot.bundles else np.zeros(5)
    names = sorted(candidates)
    rows = np.asarray([model.index[name] for name in names], dtype=np.int64)
    usage = model.usage_of(
        model.background[rows] + (model.load[rows] + extra[rows] + mine), model.limits[rows]
    )
    scores = dict(zip(names, usage.tolist(), strict=True))
    return min(scores, key=lambda n: (scores[n], n)), scores


SELECTORS: Final[Mapping[str, Selector]] = {
    PlacementName.LEAST_LONG_TERM_MESSAGE_RATE: least_long_term_message_rate,
    PlacementName.LEAST_RESOURCE_USAGE_WITH_WEIGHT: least_resource_usage_with_weight,
    PlacementName.AVG: avg_shedder_select,
    PlacementName.FULCRUM: fulcrum_least_predicted_usage,
}
