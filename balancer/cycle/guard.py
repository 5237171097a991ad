"""A shedder's decision as Pulsar's leader acts on it: the strategy, then the anti-affinity
unload guard that the modular load manager applies to every modular shedder's output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from balancer.decisions import Reason, SheddingDecision, Skip
from balancer.names import ShedderName
from balancer.placement.filters import should_anti_affinity_unload
from balancer.registry import get_shedder
from balancer.snapshot import ClusterSnapshot

# The modular load manager's shedders; TransferShedder (extensible) keeps anti-affinity bundles
# out by itself (PULSAR.md §6.5) and Danube has no such guard.
MODULAR_SHEDDERS: Final = frozenset(
    {ShedderName.THRESHOLD, ShedderName.OVERLOAD, ShedderName.UNIFORM_LOAD, ShedderName.AVG}
)


def shed_guarded(
    name: str,
    snapshot: ClusterSnapshot,
    config: Any,
    state: dict[str, Any],
    candidates: Sequence[str] | None = None,
) -> SheddingDecision:
    """Run shedder ``name``, then drop the unloads that cannot improve their namespace's
    anti-affinity spread over ``candidates`` (default: the active brokers); each dropped unload
    becomes a ``skipped`` bundle with reason AntiAffinity. The reason of a cycle whose every unload
    was guarded is AntiAffinity.

    Raises:
        UnknownStrategy: no shedder of that name.

    Source: Pulsar ModularLoadManagerImpl.doLoadShedding step 4 and
    LoadManagerShared.shouldAntiAffinityNamespaceUnload (PULSAR.md §1, §8.3).
    """
    canonical, shedder = get_shedder(name)
    decision = shedder(snapshot, config, state)
    if canonical not in MODULAR_SHEDDERS or not decision.unloads:
        return decision
    if not any(p.anti_affinity_group for p in snapshot.namespaces.values()):
        return decision
    pool = (
        [n for n, b in snapshot.brokers.items() if b.is_active]
        if candidates is None
        else list(candidates)
    )
    kept, guarded = [], []
    for unload in decision.unloads:
        if should_anti_affinity_unload(snapshot, unload.bundle, unload.source, pool):
            kept.append(unload)
        else:
            guarded.append(
                Skip(
                    "bundle",
                    unload.bundle,
                    Reason.ANTI_AFFINITY,
                    f"moving it from {unload.source} cannot improve its anti-affinity group's "
                    "spread",
                )
            )
    if not guarded:
        return decision
    return replace(
        decision,
        unloads=tuple(kept),
        skipped=(*decision.skipped, *guarded),
        reason=decision.reason if kept else Reason.ANTI_AFFINITY,
    )
