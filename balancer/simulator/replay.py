"""Replay recorded load under a cycle configuration: the config page's "replay the last hour".

The console records a snapshot of the cluster every so often (the tick's own snapshot: every
broker's report, every bundle's time-averaged rates and owner). A replay keeps its own ownership
map, starting from the first sample's owners; at every tick of its loop interval it takes the
newest sample at or before that time, gives each bundle the replay's owner with the cycle's load
model (``balancer.cycle.reassign``: a moved bundle takes its throughput, message rates, topics
and its share of its recorded owner's CPU), runs ``plan_cycle`` on it and applies the planned
unloads and placements to its map. Splits are counted, not applied: the recorded load has no
figures for bundles that were never recorded.

Two configs replayed over the same samples are compared on the same footing: the CV and the
max/mean of the brokers' usage at each tick, and the moves they made.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from balancer.cycle import (
    CycleConfig,
    LoadStats,
    PlaceAction,
    SplitAction,
    UnloadAction,
    apply_to_owners,
    plan_cycle,
    reassign,
)
from balancer.load import ResourceWeights
from balancer.snapshot import ClusterSnapshot
from balancer.units import Seconds

# A replay runs at most this many cycles; a longer recording is replayed at a longer interval.
MAX_CYCLES: Final = 720


@dataclass(frozen=True, slots=True)
class ReplayPoint:
    """The brokers' usage at one tick (fractions): CV and max/mean over the serving brokers."""

    at: Seconds
    cv: float
    max_over_mean: float

    def as_dict(self) -> dict[str, float]:
        """``{"at", "cv", "maxOverMean"}`` (s since epoch, ratios)."""
        return {"at": self.at, "cv": self.cv, "maxOverMean": self.max_over_mean}


@dataclass(frozen=True)
class ReplayResult:
    """One replay: a point per tick and what the cycles did.

    Attributes:
        points: the usage at each tick, before that tick's plan applies.
        interval_s: the seconds between ticks (the loop interval, or longer: ``MAX_CYCLES``).
        moves: unloads applied (each followed by its placement).
        placements: bundles placed that had no owner (not moves).
        splits: splits the cycles planned (counted, not applied).
        vetoed: actions the cycles vetoed (cool-down, grace period, rate limit...).
        oscillations: moves that sent a bundle back to a broker it left within the hour.
    """

    points: tuple[ReplayPoint, ...]
    interval_s: float
    moves: int
    placements: int
    splits: int
    vetoed: int
    oscillations: int

    def as_dict(self) -> dict[str, Any]:
        """The summary (medians, p95, moves per hour over the replayed cycles × interval) and
        the points."""
        span_h = max(1, len(self.points)) * self.interval_s / 3600
        return {
            **summary(self.points),
            "intervalS": self.interval_s,
            "cycles": len(self.points),
            "moves": self.moves,
            "movesPerHour": self.moves / span_h,
            "placements": self.placements,
            "splitsPlanned": self.splits,
            "vetoed": self.vetoed,
            "oscillations": self.oscillations,
            "points": [p.as_dict() for p in self.points],
        }


def summary(points: Sequence[ReplayPoint]) -> dict[str, float | None]:
    """``cvMedian``, ``maxOverMeanMedian`` and ``maxOverMeanP95`` of ``points`` (None when
    there are none); p95 by the nearest-rank method. A point without load (max/mean 0: no
    broker reported any usage yet, as at a console's start) is left out."""
    points = [p for p in points if p.max_over_mean > 0]  # no load reported: says nothing
    if not points:
        return {"cvMedian": None, "maxOverMeanMedian": None, "maxOverMeanP95": None}
    ratios = sorted(p.max_over_mean for p in points)
    rank = max(1, math.ceil(0.95 * len(ratios)))
    return {
        "cvMedian": statistics.median(p.cv for p in points),
        "maxOverMeanMedian": statistics.median(ratios),
        "maxOverMeanP95": ratios[rank - 1],
    }


def point(snapshot: ClusterSnapshot, weights: ResourceWeights) -> ReplayPoint:
    """The CV and max/mean of the active brokers' weighted usage in ``snapshot``."""
    usage = snapshot.weighted_usage(weights)
    stats = LoadStats.of({n: usage[n] for n, b in snapshot.brokers.items() if b.is_active})
    return ReplayPoint(snapshot.now, stats.cv, stats.max_over_mean)


def recorded(
    samples: Sequence[ClusterSnapshot], weights: ResourceWeights
) -> tuple[ReplayPoint, ...]:
    """What the cluster really did: the usage of each sample as recorded (active brokers)."""
    return tuple(point(sample, weights) for sample in samples)


def owner_changes(known: dict[str, str], snapshot: ClusterSnapshot) -> int:
    """How many bundles ``snapshot`` shows owned by another broker than the one ``known`` last
    saw owning them (bundle -> broker; updated in place): a move, whoever made it — in
    observe-only, Pulsar's own shedder. A bundle in transit (no owner) is not a move yet; one
    ``known`` has never seen owned is not a move."""
    moves = 0
    for name, bundle in snapshot.bundles.items():
        if bundle.owner is None:
            continue
        before = known.get(name)
        if before is not None and before != bundle.owner:
            moves += 1
        known[name] = bundle.owner
    return moves


def observed_moves(samples: Sequence[ClusterSnapshot]) -> int:
    """How many times a bundle changed broker across ``samples`` (oldest first): a bundle seen
    owned by one broker and later by another (through unowned or not), by ``owner_changes``."""
    known: dict[str, str] = {}
    return sum(owner_changes(known, sample) for sample in samples)


def replay(
    samples: Sequence[ClusterSnapshot],
    config: CycleConfig,
    state: dict[str, Any],
    interval_s: float,
    *,
    weights: ResourceWeights | None = None,
    max_cycles: int = MAX_CYCLES,
) -> ReplayResult:
    """Replay ``samples`` (oldest first) under ``config``, one cycle every ``interval_s``
    seconds (longer when the span would need more than ``max_cycles``), from the strategies'
    ``state``. Each point is the usage of the active brokers by ``weights`` (default the
    config's), so that replays of configs with other weights are measured alike.

    Raises:
        ValueError: no sample, or an interval that is not a positive number of seconds.
        BalancerError: the config cannot run (as ``plan_cycle``).
    """
    if not samples:
        raise ValueError("nothing recorded to replay")
    if not interval_s > 0:
        raise ValueError(f"the loop interval must be positive, not {interval_s} s")
    start, end = samples[0].now, samples[-1].now
    interval = max(interval_s, (end - start) / max(1, max_cycles - 1))
    owners: dict[str, str | None] = {}
    left: dict[str, list[tuple[str | None, Seconds]]] = {}  # bundle -> (broker it left, when)
    unloaded: dict[str, Seconds] = {}
    moves_at: list[Seconds] = []
    points: list[ReplayPoint] = []
    moves = placements = splits = vetoed = oscillations = 0
    scale = config.pulsar.weights if weights is None else weights
    index = 0
    cycles = int((end - start) // interval) + 1
    for tick in range(cycles):
        now = start + tick * interval
        while index + 1 < len(samples) and samples[index + 1].now <= now:
            index += 1
        sample = samples[index]
        for load in sample.bundles.values():
            owners.setdefault(load.name, load.owner)  # a bundle first recorded now (a split's)
        for bundle, owner in owners.items():
            if owner is not None and owner not in sample.brokers:
                owners[bundle] = None  # its broker left the recording: placed again
        recent = [t for t in moves_at if t > now - 3600]
        snapshot = reassign(
            sample,
            owners,
            now=now,
            recently_unloaded={b: t for b, t in unloaded.items() if t > now - 3600},
            recent_moves=recent,
        )
        plan = plan_cycle(snapshot, config, state, now)
        state = plan.state
        points.append(point(snapshot, scale))
        vetoed += len(plan.vetoed)
        splits += len(plan.planned(SplitAction))
        sources = {a.target: a.source for a in plan.planned(UnloadAction)}
        for action in plan.planned(PlaceAction):
            if action.target in sources or action.target in left:  # a move, now or earlier
                if any(
                    broker == action.destination and now - at <= 3600
                    for broker, at in left.get(action.target, ())
                ):
                    oscillations += 1
            else:  # a bundle nobody owned
                placements += 1
        for bundle, source in sources.items():
            left.setdefault(bundle, []).append((source, now))
        applied = apply_to_owners(plan, owners, unloaded, now)
        moves += applied
        moves_at += [now] * applied
    return ReplayResult(tuple(points), interval, moves, placements, splits, vetoed, oscillations)
