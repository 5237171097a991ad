"""Placement of every bundle left without an owner: a strategy's chosen destination when it passes
Pulsar's placement filters, else the configured placement (``place_many``); Danube's placement.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from balancer import explain
from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.cycle.model import (
    EXPLAINED_BROKERS,
    EXPLAINED_BROKERS_TOTAL,
    EXPLAINED_PLACEMENTS,
    FULCRUM_SHEDDERS,
    PLACEMENT_METRICS,
    Action,
    Candidate,
    CycleConfig,
    Metric,
    PlaceAction,
    UnloadAction,
)
from balancer.danube.bundles import bundle_view
from balancer.danube.placement import place as danube_place
from balancer.decisions import METRIC_UNITS, Placement, Reason
from balancer.placement.batch import place_many
from balancer.placement.place import filter_candidates
from balancer.registry import (
    DANUBE_PLACEMENT,
)
from balancer.snapshot import ClusterSnapshot


def _place(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    placement_state: dict[str, Any],
    unloads: list[UnloadAction],
    serving: list[str],
    strategy: str,
) -> tuple[list[Action], dict[str, Any]]:
    """Interleave each unload with the place action of its bundle, then place the bundles that
    had no owner already. A strategy's destination is honoured when it is serving, not the
    source, and kept by the placement filters; everything else goes through ``place_many``."""
    pulsar = config.pulsar
    preallocated: dict[str, str] = {}
    chosen: dict[str, PlaceAction] = {}
    refused: dict[str, str] = {}  # bundle -> why the strategy's destination was not honoured
    to_place: list[str] = []
    sources: dict[str, str] = {}
    serving_set = set(serving)
    fulcrum = any(u.strategy in FULCRUM_SHEDDERS for u in unloads)
    check = _DestinationCheck(
        snapshot,
        replace(pulsar, is_distribute_bundles_evenly_enabled=False) if fulcrum else pulsar,
        serving,
        [u.target for u in unloads],
    )
    for unload in unloads:
        if not unload.is_planned:
            continue
        sources[unload.target] = unload.source or ""
        dest = unload.destination if config.is_destination_honoured else None
        if dest and dest in serving_set and dest != unload.source:
            refusal = check.refusal(unload.target, dest, unload.source or "", preallocated)
            if refusal is None:
                preallocated[unload.target] = dest
                chosen[unload.target] = PlaceAction(
                    target=unload.target,
                    source=unload.source,
                    destination=dest,
                    reason=str(Reason.DESTINATION),
                    explanation=f"{unload.strategy} chose {dest} as the destination; it passes "
                    "the placement filters",
                    strategy=unload.strategy,
                )
                continue
            refused[unload.target] = (
                f"{unload.strategy}'s destination {dest} was refused by {refusal}"
            )
        to_place.append(unload.target)
    unowned = [b for b in snapshot.unowned if b not in sources]
    batch = to_place + unowned
    explain = _explains(batch, serving)
    remembered = {k: v for k, v in placement_state.items() if k != "preallocated"}
    if batch and strategy in DANUBE_PLACEMENT:
        placements, after = _danube_placements(
            snapshot, config, remembered, batch, serving, sources, strategy
        )
    elif batch:
        placements, after = place_many(
            snapshot,
            batch,
            pulsar,
            {**remembered, "preallocated": preallocated},
            strategy=strategy,
            candidates=serving,
            sources=sources,
            explain=explain,
        )
    if batch:
        remembered = {k: v for k, v in after.items() if k != "preallocated"}
        for placement in placements:
            chosen[placement.bundle] = _place_action(
                placement,
                strategy,
                refused.get(placement.bundle, ""),
                sources.get(placement.bundle),
                explained=explain,
            )
    out: list[Action] = []
    for unload in unloads:
        place = chosen.get(unload.target) if unload.is_planned else None
        if place is not None and place.is_planned:
            moved = place.destination != unload.destination
            out.append(unload.to(place.destination) if moved else unload)
        else:  # not placed this cycle: no destination to show
            keep = not unload.is_planned or unload.destination is None
            out.append(unload if keep else unload.to(None))
        if place is not None:
            out.append(place)
    out += [chosen[b] for b in unowned]
    return out, remembered


class _DestinationCheck:
    """Whether a strategy's destination survives Pulsar's placement filters over the serving
    brokers other than the bundle's source — the decision of ``filter_candidates``, computed per
    namespace once (thousands of destinations on thousands of brokers take milliseconds).

    The shortcut holds while no namespace has an anti-affinity group and no broker can reach
    ``loadBalancerBrokerMaxTopics`` this cycle; otherwise every check runs the filters."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pulsar: PulsarConfig,
        serving: list[str],
        moving: list[str],
    ) -> None:
        self.snapshot, self.pulsar, self.serving = snapshot, pulsar, serving
        self.serving_set = set(serving)
        extra = sum(snapshot.bundles[b].topics for b in moving if b in snapshot.bundles)
        room = all(snapshot.brokers[n].topics + extra <= pulsar.broker_max_topics for n in serving)
        groups = any(p.anti_affinity_group for p in snapshot.namespaces.values())
        self.exact = groups or not room
        self.namespaces: dict[str, tuple[Mapping[str, int], bool, list[tuple[int, str]]]] = {}

    def refusal(
        self, bundle: str, dest: str, source: str, preallocated: dict[str, str]
    ) -> str | None:
        """None when ``dest`` passes; else which filter refused it, in words."""
        if self.exact:
            others = [n for n in self.serving if n != source]
            kept, _, rejections = filter_candidates(
                self.snapshot, bundle, self.pulsar, preallocated, others
            )
            if dest in kept:
                return None
            refused = next((r for r in rejections if r.broker == dest), None)
            return f"the {refused.filter} filter ({refused.reason})" if refused else "the filters"
        if not self.pulsar.is_distribute_bundles_evenly_enabled:
            return None
        namespace = namespace_of_bundle(bundle)
        if namespace not in self.namespaces:
            counts: Mapping[str, int] = self.snapshot.bundle_counts(namespace)
            # Fewer owners than serving brokers: some serving broker owns none of it.
            has_zero = len(counts) < len(self.serving) or (
                sum(1 for n, c in counts.items() if c > 0 and n in self.serving_set)
                < len(self.serving)
            )
            smallest = (
                []
                if has_zero
                else heapq.nsmallest(2, ((counts.get(n, 0), n) for n in self.serving))
            )
            self.namespaces[namespace] = (counts, has_zero, smallest)
        counts, has_zero, smallest = self.namespaces[namespace]
        # The source owns this bundle (count ≥ 1), so it is never one of the zeros.
        least = 0 if has_zero else next(c for c, n in smallest if n != source)
        mine = counts.get(dest, 0)
        if mine == least:
            return None
        return (
            f"the even_distribution filter ({Reason.NOT_LEAST_BUNDLES}: {dest} owns {mine} "
            f"bundles of {namespace}, the least is {least})"
        )


def _danube_placements(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: dict[str, Any],
    bundles: list[str],
    serving: list[str],
    sources: Mapping[str, str],
    strategy: str,
) -> tuple[list[Placement], dict[str, Any]]:
    """Danube's assignment for bundles, one after the other: round-robin among the brokers
    within 10 % of the least ranking score; an unloaded bundle goes, as Danube sends an unloaded
    topic, to the first active broker of the rankings other than the one it left."""
    serving_set = set(serving)
    view = bundle_view(snapshot, [n for n in snapshot.brokers if n not in serving_set])
    danube = replace(config.danube, assignment_strategy=strategy)
    out = []
    for bundle in bundles:
        source = sources.get(bundle)
        hint = {"reason": "unload", "fromBroker": source} if source else None
        placement = danube_place(view, bundle, danube, state, hint)
        state = placement.state
        out.append(replace(placement, strategy=strategy))
    return out, state


def _explains(bundles: Sequence[str], serving: Sequence[str]) -> bool:
    """Whether the place actions of placing ``bundles`` list their candidates: at most
    ``EXPLAINED_PLACEMENTS`` bundles over at most ``EXPLAINED_BROKERS_TOTAL`` brokers × bundles."""
    return (
        len(bundles) <= EXPLAINED_PLACEMENTS
        and len(bundles) * len(serving) <= EXPLAINED_BROKERS_TOTAL
    )


def _place_action(
    placement: Placement,
    strategy: str,
    prefix: str,
    source: str | None = None,
    *,
    explained: bool = False,
) -> PlaceAction:
    """The place action of one placement; ``prefix`` says why a strategy's own destination was
    not honoured, ``source`` is the broker the bundle left (None for an unowned bundle);
    ``explained`` lists the placement's candidates and filtered brokers."""
    if placement.broker is None:
        return PlaceAction(
            target=placement.bundle,
            source=source,
            destination=None,
            reason=str(placement.reason),
            explanation=f"{prefix}; no serving broker can take it"
            if prefix
            else "no serving broker can take it",
            veto=Reason.NO_CANDIDATES,
            strategy=strategy,
        )
    metric = None
    said = f"{strategy} chose {placement.broker} ({placement.reason})"
    score = placement.scores.get(placement.broker)
    name = PLACEMENT_METRICS.get(strategy)
    if score is not None and name is not None and math.isfinite(score):
        metric = Metric(name, score, METRIC_UNITS[name])
        said += f": {explain.metric(name, score)}"
    if prefix:
        said = f"{prefix}; {said}"
    return PlaceAction(
        target=placement.bundle,
        source=source,
        destination=placement.broker,
        reason=str(placement.reason),
        explanation=said,
        metric=metric,
        strategy=strategy,
        candidates=_candidates(placement) if explained else (),
    )


def _candidates(placement: Placement) -> tuple[Candidate, ...]:
    """Every broker a placement scored, best first (ties by name), then every broker its filters
    removed, at most ``EXPLAINED_BROKERS`` of each."""
    scored = sorted(placement.scores.items(), key=lambda item: (item[1], item[0]))
    out = [Candidate(broker, score) for broker, score in scored[:EXPLAINED_BROKERS]]
    out += [
        Candidate(r.broker, None, r.filter, str(r.reason), r.detail)
        for r in placement.filtered[:EXPLAINED_BROKERS]
    ]
    return tuple(out)
