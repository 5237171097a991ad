"""Splits: the strategy's and the automatic ones (Pulsar's split conditions), their children's
boundaries and estimated loads.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from balancer import explain
from balancer.bundles import namespace_of_bundle, parse_bundle_name
from balancer.config import PulsarConfig
from balancer.cycle.model import TOPIC_SPLITS, Action, CycleConfig, Metric, SplitAction
from balancer.cycle.vetoes import _veto
from balancer.decisions import Reason, SheddingDecision
from balancer.errors import BalancerError, ImpossibleSplit
from balancer.hashing import format_hash
from balancer.load import TopicLoad
from balancer.names import ProposerName
from balancer.registry import (
    get_split_algorithm,
)
from balancer.snapshot import ClusterSnapshot
from balancer.splitting.conditions import split_check
from balancer.units import Seconds


def _strategy_splits(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    decision: SheddingDecision,
    moving: set[str],
    now: Seconds,
) -> list[Action]:
    """The splits a shedder asked for (a bundle too big to move), cut with the configured
    algorithm, when automatic splits are on; a bundle that moves this cycle, is idle (no
    message rate, no throughput), blacklisted, in its cool-down, or whose namespace has
    ``loadBalancerNamespaceMaximumBundles`` already is left alone."""
    out = []
    name = get_split_algorithm(config.strategies.split_algorithm)[0]
    for bundle in decision.splits:
        load = snapshot.bundles.get(bundle)
        if load is None or bundle in moving:
            continue
        if load.short_term.msg_rate <= 0 and load.short_term.throughput <= 0:
            continue  # idle: no load for a split to divide (Pulsar would find no boundary)
        namespace = namespace_of_bundle(bundle)
        if sum(snapshot.bundle_counts(namespace).values()) >= config.pulsar.namespace_max_bundles:
            continue
        veto, _ = _veto(bundle, load.owner, snapshot, config, now, 0)
        if veto is not None:
            continue
        said = (
            f"{decision.strategy}: {bundle} is too big to move (it alone outweighs the gap it "
            f"would close); {explain.metric('msgThroughput', load.short_term.throughput)}"
        )
        try:
            action = _split_action(snapshot, config, bundle, name, None, said, "TooBigToMove")
        except BalancerError as exc:  # e.g. specified_positions_divide without positions
            action = SplitAction(
                target=bundle,
                source=load.owner,
                reason="TooBigToMove",
                explanation=f"{said}; {name} cannot cut it: {exc.message}",
                veto=Reason.NO_CANDIDATES,
            )
        metric = Metric("msgThroughput", load.short_term.throughput, "bytes/s")
        out.append(replace(action, metric=metric, strategy=decision.strategy))
    return out


def _auto_splits(snapshot: ClusterSnapshot, config: CycleConfig, moving: set[str]) -> list[Action]:
    """Pulsar's BundleSplitterTask over the snapshot, cut with the configured algorithm."""
    out = []
    name = get_split_algorithm(config.strategies.split_algorithm)[0]
    for candidate in split_check(snapshot, config.pulsar):
        if candidate.bundle in moving:
            continue
        unit = "msg/s" if candidate.reason == "MsgRate" else "bytes/s"
        if candidate.reason in ("Topics", "Sessions"):
            unit = "count"
        said = (
            f"auto-split: {candidate.reason} {_count_or(candidate.value, unit)} above the limit "
            f"{_count_or(candidate.limit, unit)}"
        )
        metric = Metric(candidate.reason, candidate.value, unit)
        try:
            action = _split_action(
                snapshot, config, candidate.bundle, name, None, said, candidate.reason
            )
        except BalancerError as exc:  # e.g. specified_positions_divide without positions
            action = SplitAction(
                target=candidate.bundle,
                source=snapshot.bundles[candidate.bundle].owner,
                reason=candidate.reason,
                explanation=f"{said}; {name} cannot cut it: {exc.message}",
                veto=Reason.NO_CANDIDATES,
            )
        out.append(replace(action, metric=metric, strategy=ProposerName.AUTO_SPLIT))
    return out


def _count_or(value: float, unit: str) -> str:
    return f"{value:g}" if unit == "count" else explain.quantity(value, unit)


def _split_action(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    algorithm: str,
    positions: Sequence[int] | None,
    said: str,
    reason: str,
) -> Action:
    owner = snapshot.bundles[bundle].owner if bundle in snapshot.bundles else None
    if algorithm in TOPIC_SPLITS and bundle not in snapshot.bundle_topics:
        return SplitAction(
            target=bundle,
            source=owner,
            reason=reason,
            explanation=f"{said}; {algorithm} needs the bundle's per-topic hashes and rates, and "
            f"the load report of {owner or 'its owner'} carries none for it (its bundleStats "
            "have no topicStats; range_equally_divide or specified_positions_divide need none)",
            veto=Reason.NO_TOPIC_DATA,
        )
    cuts, children = split_children(snapshot, bundle, algorithm, positions, config.pulsar)
    if not cuts:
        return SplitAction(
            target=bundle,
            source=owner,
            reason=reason,
            explanation=f"{said}; {algorithm} finds no boundary inside it",
            veto=Reason.NO_CANDIDATES,
        )
    return SplitAction(
        target=bundle,
        source=owner,
        reason=reason,
        explanation=f"{said}; {algorithm} cuts at " + ", ".join(format_hash(c) for c in cuts),
        boundaries=tuple(cuts),
        children=tuple(children),
    )


def split_children(
    snapshot: ClusterSnapshot,
    bundle: str,
    algorithm: str,
    positions: Sequence[int] | None,
    pulsar: PulsarConfig,
) -> tuple[list[int], list[str]]:
    """(sorted cut points, children names) of cutting ``bundle`` with ``algorithm``: by its
    topics when its owner reported them (``snapshot.bundle_topics``), else by its range (the
    topic count alone: specified_positions_divide cuts only a bundle with two topics or more).

    Raises:
        BalancerError: a malformed bundle name, bad positions (``field`` names it).
    """
    parsed = parse_bundle_name(bundle)
    _, split_at = get_split_algorithm(algorithm)
    topics: Sequence[TopicLoad] | None = snapshot.bundle_topics.get(bundle)
    if topics is None:
        load = snapshot.bundles.get(bundle)
        # Stand-ins keep the reported topic count where the topics themselves are unknown.
        topics = [TopicLoad("", parsed.range.lower)] * (load.topics if load is not None else 0)
    cuts = sorted(set(split_at(parsed.range, topics, positions, pulsar) or []))
    for cut in cuts:
        if not parsed.range.lower < cut < parsed.range.upper:
            raise ImpossibleSplit(
                f"boundary {format_hash(cut)} is not strictly inside {parsed.range.label}",
                field="bundle" if positions is None else "positions",
            )
    points = [parsed.range.lower, *cuts, parsed.range.upper]
    children = [
        f"{parsed.namespace}/{format_hash(a)}_{format_hash(b)}"
        for a, b in itertools.pairwise(points)
    ]
    return cuts, children if cuts else []


def split_child_loads(
    snapshot: ClusterSnapshot, bundle: str, boundaries: Sequence[int]
) -> list[dict[str, Any]]:
    """Each child of cutting ``bundle`` at ``boundaries`` with its share of the bundle's
    short-term load: ``{"bundle", "fraction", "throughput" (bytes/s), "msgRate" (msg/s),
    "topics", "measured"}``. With its owner's per-topic stats (``snapshot.bundle_topics``) each
    child gets the share its own topics carry (``measured`` true); else topics are assumed
    spread evenly over the hash range (``fraction`` of the range; topics rounded so that they
    sum to the bundle's).

    Raises:
        BalancerError: an unknown bundle (``field`` "bundle"), or boundaries outside it.
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    parsed = parse_bundle_name(bundle)
    lower, upper = parsed.range.lower, parsed.range.upper
    points = [lower, *sorted(boundaries), upper]
    if any(b <= a for a, b in itertools.pairwise(points)):
        raise BalancerError(
            f"boundaries must lie strictly inside {parsed.range.label}", field="positions"
        )
    load = snapshot.bundles[bundle]
    width = upper - lower
    known = snapshot.bundle_topics.get(bundle)
    if known is not None:
        return _measured_children(parsed.namespace, points, known)
    out = []
    topics_given = 0
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        fraction = (b - a) / width
        topics = (
            load.topics - topics_given
            if i == len(points) - 2
            else round(load.topics * (b - lower) / width) - topics_given
        )
        topics_given += topics
        out.append(
            {
                "bundle": f"{parsed.namespace}/{format_hash(a)}_{format_hash(b)}",
                "fraction": fraction,
                "throughput": load.short_term.throughput * fraction,
                "msgRate": load.short_term.msg_rate * fraction,
                "topics": topics,
                "measured": False,
            }
        )
    return out


def _measured_children(
    namespace: str, points: Sequence[int], topics: Sequence[TopicLoad]
) -> list[dict[str, Any]]:
    """``split_child_loads`` from the bundle's topics: each child's topics and their rates; the
    fraction is the child's share of the bundle's throughput (of its topics when none flows)."""
    total = math.fsum(t.throughput for t in topics)
    out = []
    last = len(points) - 2
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        mine = [t for t in topics if a <= t.hash < b or (i == last and t.hash == b)]
        throughput = math.fsum(t.throughput for t in mine)
        share = throughput / total if total > 0 else len(mine) / max(1, len(topics))
        out.append(
            {
                "bundle": f"{namespace}/{format_hash(a)}_{format_hash(b)}",
                "fraction": share,
                "throughput": throughput,
                "msgRate": math.fsum(t.msg_rate for t in mine),
                "topics": len(mine),
                "measured": True,
            }
        )
    return out
