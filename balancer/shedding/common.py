"""Pieces shared by Pulsar's modular shedders."""

from __future__ import annotations

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
    reported. Ties on throughput go to the bundle name, ascending.

    Source: Pulsar ThresholdShedder ``filterAndSelectBundle`` (PULSAR.md §2.4).
    """
    skipped: list[Skip] = []
    candidates = []
    for name in broker.bundles:
        bundle = snapshot.bundles.get(name)
        if bundle is None:
            continue
        if in_grace_period(snapshot, name, grace_period_s):
            skipped.append(
                Skip("bundle", name, Reason.COOL_DOWN, "unloaded within the grace period")
            )
            continue
        candidates.append((bundle.short_term.throughput, name))
    candidates.sort(key=lambda item: (-item[0], item[1]))
    unloads: list[Unload] = []
    taken = 0.0
    for throughput, name in candidates:
        if taken < minimum_to_offload or not unloads:
            unloads.append(Unload(name, broker.name, None, reason, throughput))
            taken += throughput
    return unloads, skipped
