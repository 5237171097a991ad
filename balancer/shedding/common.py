"""Pieces shared by Pulsar's modular shedders."""

from __future__ import annotations

import numpy as np

from balancer.decisions import Reason, Skip, Unload
from balancer.load import BrokerLoad
from balancer.snapshot import ClusterSnapshot


def in_grace_period(snapshot: ClusterSnapshot, bundle: str, grace_period_s: float) -> bool:
    """Whether ``bundle`` was unloaded within the grace period before ``snapshot.now``.

    Source: Pulsar ModularLoadManagerImpl drops ``recentlyUnloadedBundles`` entries older than
    ``loadBalancerSheddingGracePeriodMinutes`` before shedding (PULSAR.md §1 step 2).
    """
    unloaded_at = snapshot.recently_unloaded.get(bundle)
    return unloaded_at is not None and unloaded_at >= snapshot.now - grace_period_s


def select_bundles_by_throughput(
    snapshot: ClusterSnapshot,
    broker: BrokerLoad,
    minimum_to_offload: float,
    grace_period_s: float,
    reason: Reason,
) -> tuple[list[Unload], list[Skip]]:
    """Greedy pick of a broker's bundles, largest short-term throughput first.

    Takes a bundle while the taken sum (bytes/s) is below ``minimum_to_offload`` or nothing has been
    taken yet: at least one bundle, overshoot allowed. Bundles in the grace period are skipped and
    reported. Ties on throughput go to the bundle name, ascending. Since throughputs are not
    negative the taken bundles are a prefix of the eligible ones, found on the running sum (the
    same sequential additions as a loop).

    Source: Pulsar ThresholdShedder ``filterAndSelectBundle`` (PULSAR.md §2.4).
    """
    names, throughputs, unloaded_at = snapshot.bundles_by_throughput(broker.name)
    with np.errstate(invalid="ignore"):
        in_grace = unloaded_at >= snapshot.now - grace_period_s
    skipped = [
        Skip("bundle", names[i], Reason.COOL_DOWN, "unloaded within the grace period")
        for i in np.flatnonzero(in_grace).tolist()
    ]
    eligible = np.flatnonzero(~in_grace)
    if eligible.size == 0:
        return [], skipped
    running = np.cumsum(throughputs[eligible])
    count = 1 + min(
        int(np.searchsorted(running, minimum_to_offload, side="left")), eligible.size - 1
    )
    unloads = [
        Unload(names[i], broker.name, None, reason, float(throughputs[i]))
        for i in eligible[:count].tolist()
    ]
    return unloads, skipped
