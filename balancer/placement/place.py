"""place(): filters, then selection, then the overloaded-broker re-selection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from balancer.config import PulsarConfig
from balancer.decisions import Placement, Reason, Rejection
from balancer.errors import InvalidSnapshot
from balancer.names import PlacementName
from balancer.placement import filters
from balancer.placement.selection import SELECTORS
from balancer.snapshot import ClusterSnapshot


def place(
    snapshot: ClusterSnapshot,
    bundle: str,
    config: PulsarConfig,
    state: dict[str, Any],
    candidates: Sequence[str] | None = None,
    strategy: str = PlacementName.LEAST_LONG_TERM_MESSAGE_RATE,
) -> Placement:
    """Choose the broker for one unassigned bundle.

    Steps: candidates (given, or every broker) -> drop inactive brokers -> drop brokers over
    ``loadBalancerBrokerMaxTopics`` (unless all would go) -> anti-affinity group spread
    (failure domains, then brokers) -> keep the brokers with the fewest
    bundles of the namespace (``loadBalancerDistributeBundlesEvenlyEnabled``) -> if none is left,
    reset to the active set -> the selection strategy (``strategy``: LeastLongTermMessageRate or
    LeastResourceUsageWithWeight) -> if the chosen broker's unweighted max
    usage exceeds ``loadBalancerBrokerOverloadedThresholdPercentage``, select once more over the
    whole active set. The choice is recorded as preallocated in ``state["preallocated"]``
    (bundle -> broker) so the next placement sees it before the broker's next load report.

    Raises:
        InvalidSnapshot: a candidate is not a broker of the snapshot.

    Source: Pulsar ModularLoadManagerImpl.selectBrokerForAssignment (PULSAR.md §1).
    """
    preallocated: dict[str, str] = dict(state.get("preallocated", {}))
    names = list(snapshot.brokers) if candidates is None else sorted(candidates)
    kept, allowed, rejections = filter_candidates(snapshot, bundle, config, preallocated, names)
    if not kept:
        kept = allowed
    select = SELECTORS[strategy]
    state = {**state}
    broker, scores = select(snapshot, kept, config, preallocated, state, bundle)
    reason = Reason.LEAST_LOADED
    if broker is None:
        return Placement(
            bundle, None, Reason.NO_CANDIDATES, (), tuple(rejections), {}, state, strategy
        )
    if all(score == float("inf") for score in scores.values()):
        reason = Reason.ALL_OVERLOADED
    if snapshot.max_usage()[broker] > config.overloaded_threshold_fraction:
        broker, scores = select(snapshot, allowed, config, preallocated, state, bundle)
        reason = Reason.RESELECTED_OVERLOADED
    assert broker is not None  # allowed ⊇ kept, which was not empty
    preallocated[bundle] = broker
    return Placement(
        bundle=bundle,
        broker=broker,
        reason=reason,
        candidates=tuple(kept),
        filtered=tuple(rejections),
        scores=scores,
        state={**state, "preallocated": preallocated},
        strategy=strategy,
    )


def filter_candidates(
    snapshot: ClusterSnapshot,
    bundle: str,
    config: PulsarConfig,
    preallocated: dict[str, str],
    names: Sequence[str],
) -> tuple[list[str], list[str], list[Rejection]]:
    """Pulsar's filter chain before a selection: (brokers kept, active brokers, rejections).

    inactive brokers -> ``loadBalancerBrokerMaxTopics`` (unless all would go) -> anti-affinity
    group spread -> even distribution of the namespace's bundles (when enabled). ``kept`` may be
    empty; callers then fall back to the active brokers, as Pulsar does.

    Raises:
        InvalidSnapshot: a name is not a broker of the snapshot.

    Source: Pulsar ModularLoadManagerImpl.selectBrokerForAssignment (PULSAR.md §1).
    """
    for name in names:
        if name not in snapshot.brokers:
            raise InvalidSnapshot(f"candidate {name!r} is not a broker", field="candidates")
    allowed, rejected = filters.active_brokers(snapshot, list(names))
    rejections: list[Rejection] = list(rejected)
    kept, rejected = filters.max_topics(snapshot, allowed, config, preallocated)
    rejections += rejected
    kept, rejected = filters.anti_affinity(snapshot, kept, bundle, config, preallocated)
    rejections += rejected
    if config.is_distribute_bundles_evenly_enabled:
        kept, rejected = filters.even_distribution(snapshot, kept, bundle, preallocated)
        rejections += rejected
    return kept, allowed, rejections
