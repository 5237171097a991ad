"""Pulsar's TransferShedder (extensible load manager, PIP-220)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.load import BrokerLoad
from balancer.names import ShedderName
from balancer.shedding.common import in_grace_period
from balancer.snapshot import ClusterSnapshot

NAME = ShedderName.TRANSFER


@dataclass
class _Load:
    name: str
    load: float  # weightedMaxEMA, fraction
    throughput_ema: float  # bytes/s
    throughput: float  # current msgThroughputIn + Out, bytes/s


def _broker_data(
    broker: BrokerLoad, config: PulsarConfig, remembered: dict[str, dict[str, float]]
) -> tuple[float, float]:
    """weightedMaxEMA and msgThroughputEMA: as reported, else folded into ``remembered`` (first
    report -> the current value, then h × old + (1 - h) × current; memory weighted in)."""
    if broker.weighted_max_ema is not None:
        ema = broker.weighted_max_ema
        tput_ema = (
            broker.msg_throughput_ema
            if broker.msg_throughput_ema is not None
            else broker.rates.throughput
        )
        return ema, tput_ema
    h = config.history_resource_fraction
    current = broker.weighted_max_usage(config.weights)
    old = remembered.get(broker.name)
    if old is None:
        ema, tput_ema = current, broker.rates.throughput
    else:
        ema = h * old["weightedMaxEMA"] + (1 - h) * current
        tput_ema = h * old["msgThroughputEMA"] + (1 - h) * broker.rates.throughput
    remembered[broker.name] = {"weightedMaxEMA": ema, "msgThroughputEMA": tput_ema}
    return ema, tput_ema


def _top_bundles(snapshot: ClusterSnapshot, broker: BrokerLoad, k: int) -> list[tuple[str, float]]:
    """(bundle, throughput in+out) smallest first: the reported top-k, else the k largest owned
    bundles by short-term bandwidth in, then out, then msg rate (Pulsar's TopKBundles order)."""
    if broker.top_bundles is not None:
        return [(name, tin + tout) for name, tin, tout in broker.top_bundles]
    owned = [snapshot.bundles[b] for b in broker.bundles if b in snapshot.bundles]
    owned.sort(
        key=lambda b: (
            -b.short_term.msg_throughput_in,
            -b.short_term.msg_throughput_out,
            -b.short_term.msg_rate,
            b.name,
        )
    )
    return [(b.name, b.short_term.throughput) for b in reversed(owned[:k])]


def _is_transferable(snapshot: ClusterSnapshot, bundle: str, config: PulsarConfig) -> bool:
    """Bundles of namespaces with an anti-affinity group stay put unless
    ``loadBalancerSheddingBundlesWithPoliciesEnabled`` (PULSAR.md §6.5)."""
    if config.is_shedding_bundles_with_policies_enabled:
        return True
    policy = snapshot.namespaces.get(bundle.rsplit("/", 1)[0])
    return not (policy and policy.anti_affinity_group)


def shed(
    snapshot: ClusterSnapshot, config: PulsarConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Transfer bundles from the most to the least loaded brokers when the spread of load stays
    too wide for several consecutive cycles.

    Load is each broker's weightedMaxEMA (fraction). The condition is std > ``loadBalancer
    BrokerLoadTargetStd`` (0.25), or the least loaded broker underloaded (load < mean × 0.125 or
    throughput EMA < 0.125 × the max broker's), or the most loaded overloaded (> 85 % and
    > mean + target std). It must hold more than ``loadBalancerSheddingConditionHitCount
    Threshold`` (3) cycles in a row. Then up to ``loadBalancerMaxNumberOfBrokerSheddingPerCycle``
    (3) max brokers each send the min broker their top bundles (smallest first, never the last
    one) up to ``maxTput × (maxLoad − minLoad) / 2 / maxLoad`` bytes/s; a bundle that would
    overshoot is moved only with a swap of min-broker bundles back, else the broker stops. The
    std is re-estimated after each broker. Brokers with stale load data (TTL), or unloaded less
    than ``loadBalanceSheddingDelayInSeconds`` before their last report, hold everything back.

    Args:
        snapshot: brokers (optionally with reported weightedMaxEMA / msgThroughputEMA /
            updatedAt and topBundles), bundles with owners, recently unloaded bundles.
        state: ``{"unloadConditionHitCount": n, "recentlyUnloadedBrokers": {broker: s},
            "brokerLoadData": {broker: {weightedMaxEMA, msgThroughputEMA}}}``.

    Returns:
        Transfers (``destination`` set when ``loadBalancerTransferEnabled``), swaps first.

    Source: Pulsar TransferShedder (PULSAR.md §6), including the debug-mode ``gained`` quirk.
    """
    hit_count = int(state.get("unloadConditionHitCount", 0))
    recent_brokers: dict[str, float] = dict(state.get("recentlyUnloadedBrokers", {}))
    remembered: dict[str, dict[str, float]] = {
        k: dict(v) for k, v in state.get("brokerLoadData", {}).items()
    }
    now = snapshot.now
    target_std = config.broker_load_target_std
    skipped: list[Skip] = []
    loads: list[_Load] = []
    outdated = False
    for name, broker in snapshot.brokers.items():
        ema, tput_ema = _broker_data(broker, config, remembered)
        updated = broker.updated_at if broker.updated_at is not None else now
        if now - updated > config.broker_load_data_ttl_s:
            outdated = True
            skipped.append(
                Skip("broker", name, Reason.OUTDATED_DATA, "load data older than the TTL")
            )
            continue
        if name in recent_brokers:
            if updated - recent_brokers[name] < config.shedding_delay_s:
                return _quiet(Reason.COOL_DOWN, hit_count, recent_brokers, remembered, skipped, {})
            del recent_brokers[name]
        loads.append(_Load(name, ema, tput_ema, broker.rates.throughput))
    if not loads:
        reason = Reason.OUTDATED_DATA if outdated else Reason.NO_BROKERS
        return _quiet(reason, hit_count, recent_brokers, remembered, skipped, {})
    n = len(loads)
    avg = sum(b.load for b in loads) / n
    sum_sq = sum(b.load * b.load for b in loads)
    std = math.sqrt(max(sum_sq / n - avg * avg, 0.0))
    loads.sort(key=lambda b: (b.load, b.name))
    mult = min(0.5, max(0.0, target_std / 2))

    def underloaded(b: _Load, max_broker: _Load) -> bool:
        return b.load < avg * mult or b.throughput_ema < mult * max_broker.throughput_ema

    def overloaded(b: _Load) -> bool:
        return b.load > config.overloaded_threshold_fraction and b.load > avg + target_std

    stats: dict[str, Any] = {
        "avgUsage": avg,
        "std": std,
        "targetStd": target_std,
        "brokers": {b.name: b.load for b in loads},
    }
    condition = std > target_std or underloaded(loads[0], loads[-1]) or overloaded(loads[-1])
    hit_count = hit_count + 1 if condition else 0
    stats["hitCount"] = hit_count
    if hit_count <= config.shedding_condition_hit_count:
        return _quiet(Reason.HIT_COUNT, hit_count, recent_brokers, remembered, skipped, stats)

    unloads: list[Unload] = []
    min_index, max_index, shed_brokers = 0, n - 1, 0
    no_bundles = no_load_data = False
    k = config.max_bundles_in_load_report
    while shed_brokers < config.max_brokers_shed_per_cycle and min_index < max_index:
        max_b, min_b = loads[max_index], loads[min_index]
        if std > target_std:
            reason = Reason.OVERLOADED
        elif underloaded(min_b, max_b):
            reason = Reason.UNDERLOADED
        elif overloaded(max_b):
            reason = Reason.OVERLOADED
        else:
            break
        max_index -= 1
        offload = (max_b.load - min_b.load) / 2
        max_tput, min_tput = max_b.throughput, min_b.throughput
        target_tput = max_tput * offload / max_b.load if max_b.load > 0 else 0.0
        tops = _top_bundles(snapshot, snapshot.brokers[max_b.name], k)
        if not tops:
            no_load_data = True
            skipped.append(Skip("broker", max_b.name, Reason.NO_LOAD_DATA, "no top bundles"))
            continue
        if len(tops) == 1:
            no_bundles = True
            skipped.append(Skip("broker", max_b.name, Reason.SOLE_BUNDLE))
            continue
        min_tops = iter(_top_bundles(snapshot, snapshot.brokers[min_b.name], k))
        marked, gained, remaining = 0.0, 0.0, len(tops)
        destination = min_b.name if config.is_transfer_enabled else None
        for bundle, tput in tops:
            owner = snapshot.bundles[bundle].owner if bundle in snapshot.bundles else max_b.name
            if owner != max_b.name or in_grace_period(snapshot, bundle, config.grace_period_s):
                continue
            if not _is_transferable(snapshot, bundle, config):
                continue
            if remaining <= 1:
                break
            if tput == 0:
                continue
            swaps: list[tuple[str, float]] = []
            if marked - gained + tput > target_tput:
                found = False
                if config.is_transfer_enabled:
                    max_new = max_tput - marked + gained - tput
                    min_new = min_tput + marked - gained + tput
                    for back, back_tput in min_tops:
                        if not _is_transferable(snapshot, back, config) or back_tput == 0:
                            continue
                        if max_new + back_tput < max_tput and min_new - back_tput < max_tput:
                            max_new += back_tput
                            min_new -= back_tput
                            swaps.append((back, back_tput))
                            if min_new <= max_new and max_new < 0.75 * max_tput:
                                found = True
                                break
                if not found:
                    break
            for back, back_tput in swaps:
                unloads.append(Unload(back, min_b.name, max_b.name, reason, back_tput))
                if config.is_debug_mode_enabled:
                    gained += back_tput
            unloads.append(Unload(bundle, max_b.name, destination, reason, tput))
            marked += tput
            remaining -= 1
        if marked > 0:
            adj = (marked - gained) * max_b.load / max_tput if max_tput > 0 else 0.0
            sum_sq += (
                max(0.0, max_b.load - adj) ** 2
                + (min_b.load + adj) ** 2
                - max_b.load**2
                - min_b.load**2
            )
            std = math.sqrt(abs(sum_sq / n - avg * avg))
            shed_brokers += 1
            min_index += 1
        else:
            no_bundles = True
    stats["std"] = std
    if not unloads:
        # Pulsar: NoLoadData if a broker lacked top bundles, else NoBundles, else HitCount.
        reason = (
            Reason.NO_LOAD_DATA
            if no_load_data
            else (Reason.NO_BUNDLES if no_bundles else Reason.HIT_COUNT)
        )
        return _quiet(reason, hit_count, recent_brokers, remembered, skipped, stats)
    for unload in unloads:
        recent_brokers[unload.source] = now
    return SheddingDecision(
        unloads=tuple(unloads),
        reason=unloads[-1].reason,
        skipped=tuple(skipped),
        stats=stats,
        state={
            "unloadConditionHitCount": 0,
            "recentlyUnloadedBrokers": recent_brokers,
            "brokerLoadData": remembered,
        },
        strategy=NAME,
    )


def _quiet(
    reason: Reason,
    hit_count: int,
    recent_brokers: dict[str, float],
    remembered: dict[str, dict[str, float]],
    skipped: list[Skip],
    stats: dict[str, Any],
) -> SheddingDecision:
    return SheddingDecision(
        unloads=(),
        reason=reason,
        skipped=tuple(skipped),
        stats=stats,
        state={
            "unloadConditionHitCount": hit_count,
            "recentlyUnloadedBrokers": recent_brokers,
            "brokerLoadData": remembered,
        },
        strategy=NAME,
    )
