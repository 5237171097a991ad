"""Pulsar's AvgShedder (PIP-364): pairs the most and least loaded brokers and evens them out."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.load import BundleLoad
from balancer.names import ShedderName
from balancer.shedding.common import in_grace_period
from balancer.shedding.uniform import java_int
from balancer.snapshot import ClusterSnapshot

NAME = ShedderName.AVG


def shed(
    snapshot: ClusterSnapshot, config: PulsarConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Pair brokers from both ends of the load order and move load within pairs that stayed far
    apart for enough consecutive cycles.

    score = 100 × weighted max of cpu, direct memory, bandwidth in/out (no memory, no history).
    Brokers are sorted by score with Pulsar's comparator that truncates the difference to an
    integer (scores less than a point apart compare equal; the stable sort keeps name order).
    Pairs (lowest, highest), (2nd, 2nd highest), ...: a difference below
    ``loadBalancerAvgShedderLowThreshold`` (15) clears both brokers' hit counts; otherwise both
    low counts grow, and the high counts grow when it reaches ``...HighThreshold`` (40) or are
    cleared when not. A pair fires when either broker's high count reaches
    ``loadBalancerAvgShedderHitCountHighThreshold`` (2) or its low count
    ``...HitCountLowThreshold`` (8); firing clears both. It moves
    ``(max − min) × maxUnloadPercentage`` of msg rate when above ``minUnloadMessage`` (msg/s),
    else of throughput when above ``minUnloadMessageThroughput`` (bytes/s): the max broker's
    bundles by descending short-term rate, each taken when it fits in what remains (no
    at-least-one guard). The destination (the pair's min broker) is recorded for placement.

    Args:
        state: ``{"hitCountHigh": {broker: n}, "hitCountLow": {...}, "bundleBrokerMap": {...}}``.

    Returns:
        Unloads with ``destination`` the pair's min broker; stats with scores and pairs.

    Source: Pulsar AvgShedder (PULSAR.md §5). Its docs' example needs minUnloadMessage < 250.
    """
    high: dict[str, int] = dict(state.get("hitCountHigh", {}))
    low: dict[str, int] = dict(state.get("hitCountLow", {}))
    intended: dict[str, str] = dict(state.get("bundleBrokerMap", {}))
    usage = snapshot.weighted_usage(replace(config.weights, memory=0.0))
    scores = {n: 100 * usage[n] for n in snapshot.brokers}
    order = sorted(
        snapshot.brokers,
        key=functools.cmp_to_key(lambda a, b: java_int(scores[str(a)] - scores[str(b)])),
    )
    pairs: list[tuple[str, str]] = []
    i, j = 0, len(order) - 1
    while i <= j:
        lo, hi = order[i], order[j]
        diff = scores[hi] - scores[lo]
        if diff < config.avg_shedder_low_threshold:
            for name in (lo, hi):
                high.pop(name, None)
                low.pop(name, None)
        else:
            pairs.append((lo, hi))
            for name in (lo, hi):
                low[name] = low.get(name, 0) + 1
            if diff < config.avg_shedder_high_threshold:
                for name in (lo, hi):
                    high.pop(name, None)
            else:
                for name in (lo, hi):
                    high[name] = high.get(name, 0) + 1
        i, j = i + 1, j - 1
    if not pairs:
        high, low = {}, {}
    unloads: list[Unload] = []
    skipped: list[Skip] = []
    for lo, hi in pairs:
        fires = any(
            high.get(n, 0) >= config.avg_shedder_hit_count_high
            or low.get(n, 0) >= config.avg_shedder_hit_count_low
            for n in (lo, hi)
        )
        if not fires:
            continue
        for name in (lo, hi):
            high.pop(name, None)
            low.pop(name, None)
        source, target = snapshot.brokers[hi], snapshot.brokers[lo]
        msg_need = (source.rates.msg_rate - target.rates.msg_rate) * config.max_unload_fraction
        tput_need = (source.rates.throughput - target.rates.throughput) * config.max_unload_fraction
        if msg_need > config.min_unload_msg_per_s:
            need, key, metric = msg_need, _rate, "msgRate"
        elif tput_need > config.min_unload_throughput_bytes_per_s:
            need, key, metric = tput_need, _throughput, "msgThroughput"
        else:
            skipped.append(Skip("broker", hi, Reason.BELOW_MIN_THROUGHPUT, f"pair with {lo}"))
            continue
        candidates = []
        for name in source.bundles:
            bundle = snapshot.bundles.get(name)
            if bundle is None:
                continue
            if in_grace_period(snapshot, name, config.grace_period_s):
                skipped.append(Skip("bundle", name, Reason.COOL_DOWN))
                continue
            candidates.append((key(bundle), name))
        candidates.sort(key=lambda item: (-item[0], item[1]))
        for value, name in candidates:
            if 0 < value <= need:
                unloads.append(Unload(name, hi, lo, Reason.OVERLOADED, value, metric))
                intended[name] = lo
                need -= value
    return SheddingDecision(
        unloads=tuple(unloads),
        reason=Reason.OVERLOADED if unloads else Reason.BALANCED,
        skipped=tuple(skipped),
        stats={"scores": scores, "order": order, "pairs": [list(p) for p in pairs]},
        state={"hitCountHigh": high, "hitCountLow": low, "bundleBrokerMap": intended},
        strategy=NAME,
    )


def _rate(bundle: BundleLoad) -> float:
    return bundle.short_term.msg_rate


def _throughput(bundle: BundleLoad) -> float:
    return bundle.short_term.throughput
