"""FulcrumShedder: Fulcrum's own shedding strategy.

Each cycle it predicts every broker's usage with the load model (``balancer.load_model``: an
unmovable background plus the load of its bundles) and moves, one at a time, the bundle whose
move lowers the peak usage of its two brokers the most — from one of the hottest brokers
(above the mean) to one of the coolest — as long as that predicted gain is at least the
minimum gain; below it, a broker more than ``SETTLE_BAND`` (2 %) above the level the cluster
could reach still sheds, hottest first, in steps of any gain above ``MIN_STEP`` (1 % of the
level: how many small bundles spread over brokers that joined; the steps that follow from the
same broker while it stays the hottest are found in one pass). When no move qualifies it
tries a swap (a bundle each way between the hottest and the coolest broker). A bundle that
alone weighs more than the gap it would close is too big to move: it is named for a split
instead of being bounced between brokers.

Why this shape (measured on the offline simulator's trace day, see docs/developers/quality.md):

- Background load is unmovable: scoring brokers by their total usage makes a shedder empty a
  broker pinned by its own background, and fill it again a cycle later.
- The largest resource decides: a broker is as full as its fullest resource (Pulsar's
  weighted max), so a move is judged by what it does to that maximum on both brokers.
- A minimum gain per move, and the settle band (hysteresis), keep bursty load from moving
  bundles back and forth; moving more does not balance bursty load better.
- Moves come from any broker above the mean, not only the hottest: when the hottest is pinned by
  its background, balancing the others still lowers the spread.
- The settle band and the move budget are relative (to the level, to the cluster's bundles):
  fixed numbers (0.75 % of usage, 10 moves a cycle, 30 an hour) held a 400-bundle ×4 scale-out
  at 1.6× the optimum for the hour ("30 moves in the last hour").
- The background is this report's (usage less the bundles' load), not an average over cycles:
  an average made the model disagree with the broker it models after every move (a ×4
  scale-out took an hour to settle); readings that cannot be true are quarantined instead
  (``balancer.load_model``).
- Each move names its destination (the cycle honours it when Pulsar's hard placement filters —
  inactive, topic limit, anti-affinity — pass; the even-distribution heuristic is not applied
  to Fulcrum's destinations), and a bundle never goes back to a broker it left within the hour.

Parameters (``PulsarConfig``; reference keys in parentheses): ``fulcrum_min_gain_fraction``
(``fulcrumMinGainPercentage``, 3 %), ``fulcrum_max_moves_per_cycle``
(``fulcrumMaxMovesPerCycle``, 0: half the cluster's bundles, at least 10),
``fulcrum_max_moves_per_hour`` (``fulcrumMaxMovesPerHour``, 0: no limit), ``fulcrum_cool_down_s``
(``fulcrumBundleCoolDownMinutes``, 10 min); it also waits out Pulsar's grace period and, in the
cycle, Fulcrum's cool-down, blacklist and hourly limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import numpy as np

from balancer import explain
from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.load_model import LoadModel
from balancer.names import ShedderName
from balancer.placement.place import filter_candidates
from balancer.safety import cool_down_s, matching_pattern
from balancer.snapshot import ClusterSnapshot

NAME: Final = ShedderName.FULCRUM
# The hottest brokers a move may leave, and the coolest it may reach, per step.
SOURCES: Final = 4
DESTINATIONS: Final = 4
# The biggest bundles of a source weighed per step (and, for a swap, of the destination).
CANDIDATES: Final = 64
HOUR: Final = 3600.0
# A broker within this fraction of the level the cluster could reach is settled: above it, it
# sheds in steps of any gain (at least MIN_STEP). Relative to the level, so that the band
# means the same balance on a cluster at 15 % and at 60 % (an absolute band of 0.75 % held a
# ×4 scale-out at 1.07× the optimum at 15 %); 2 %: 1 % made the trace day's noise move a
# quarter more bundles for 0.008× (tests.benchmarks.scenarios and quality,
# docs/developers/quality.md).
SETTLE_BAND: Final = 0.02
# The least gain of a step towards the level, a fraction of the level: below it a move is
# noise (1 %: the trace day's brokers, noisy, moved half as many bundles again at 0.1 % of usage
# for the same balance). Not for a broker whose biggest bundle weighs less (200 brokers ×
# 20,000 bundles: a bundle is about 0.1 % of a broker): it may only move small ones.
MIN_STEP: Final = 0.01
# Bundles too big to move that a cycle asks to split, at most.
MAX_SPLITS: Final = 1
# The least per-cycle move budget when it is derived from the cluster's size.
MIN_CYCLE_MOVES: Final = 10


def move_budget(pulsar: PulsarConfig, safety: Any, recent: int, bundles: int) -> int:
    """How many unloads this cycle may plan: ``fulcrum_max_moves_per_cycle`` when set (> 0),
    else half of the modelled ``bundles`` (at least ``MIN_CYCLE_MOVES``): a plan never moves
    most of the cluster at once, and a ×4 scale-out (three quarters of the bundles to move)
    is served in 2 cycles; then what is left of ``fulcrum_max_moves_per_hour`` and of the
    cycle's hourly limit after the ``recent`` moves of the last hour, when set (> 0: no
    hourly limit by default — the executor's concurrency paces the moves)."""
    per_cycle = pulsar.fulcrum_max_moves_per_cycle
    budget = per_cycle if per_cycle > 0 else max(MIN_CYCLE_MOVES, math.ceil(bundles / 2))
    if pulsar.fulcrum_max_moves_per_hour > 0:
        budget = min(budget, pulsar.fulcrum_max_moves_per_hour - recent)
    if safety is not None and safety.max_moves_per_hour:
        budget = min(budget, safety.max_moves_per_hour - recent)
    return budget


def _lowest(values: np.ndarray, count: int) -> list[int]:
    """The indexes of the ``count`` lowest ``values``, lowest first, ties in index order: what
    ``np.argsort(values, kind="stable")[:count]`` gives, without sorting every broker."""
    if count >= len(values):
        return [int(i) for i in np.argsort(values, kind="stable")]
    bound = np.partition(values, count - 1)[count - 1]
    near = np.flatnonzero(values <= bound)  # every tie at the bound, in index order
    return [int(i) for i in near[np.argsort(values[near], kind="stable")][:count]]


@dataclass(frozen=True, slots=True)
class _Move:
    row: int  # the bundle's row in the model
    source: int
    destination: int
    gain: float
    before: tuple[float, float]
    after: tuple[float, float]


def reports_remembered(kept: Mapping[str, Any], planned: Mapping[str, Any]) -> dict[str, Any]:
    """The cycle's memory ``kept`` (strategy name -> state) with this shedder's memory of the
    brokers' reports taken from ``planned`` (a plan's ``state``), the rest as kept: for a plan
    recorded but not carried out (observe-only), whose moves never happened but whose reports
    did. Without it, each report would be compared with the last one remembered when a plan was
    last carried out, and a broker whose load moved since held back every cycle."""
    mine = planned.get(NAME)
    if not isinstance(mine, Mapping) or "seen" not in mine:
        return dict(kept)
    before = kept.get(NAME)
    return {**kept, NAME: {**(before if isinstance(before, Mapping) else {}), "seen": mine["seen"]}}


def shed(snapshot: ClusterSnapshot, config: Any, state: dict[str, Any]) -> SheddingDecision:
    """Fulcrum's unloads for this cycle, each with its destination and predicted gain (the
    ``predictedGain`` metric: the fraction by which the move lowers the higher usage of its two
    brokers).

    ``config`` is a ``PulsarConfig`` (the command line) or the cycle's configuration, whose
    ``pulsar`` and ``safety`` it reads (cool-down, blacklist, hourly limit). ``state`` keeps
    ``left``: bundle -> [[broker it left, when (s)], ...] over the last hour.

    Source: Fulcrum (docs/developers/cycle.md § "Fulcrum's own strategy").
    """
    pulsar: PulsarConfig = getattr(config, "pulsar", config)
    safety = getattr(config, "safety", None)
    now = snapshot.now
    left = {
        bundle: [[b, t] for b, t in moves if now - t < HOUR]
        for bundle, moves in state.get("left", {}).items()
    }
    left = {bundle: moves for bundle, moves in left.items() if moves}
    serving = [n for n, b in snapshot.brokers.items() if b.is_active]
    if len(serving) < 2:
        return SheddingDecision((), Reason.NOT_ENOUGH_BROKERS, state={"left": left}, strategy=NAME)
    # Readings this report's own brokers contradicted a report ago are held back for one, and
    # no bundle moves to or from their brokers meanwhile: the figures that stand in are a
    # report old, and the report that settles which is true comes next cycle.
    last = state.get("seen")
    reported = LoadModel.of(snapshot, serving, pulsar.weights)
    model, seen = reported.against_last(last if isinstance(last, dict) else {})
    held_back = model.quarantined[len(reported.quarantined) :]
    held = {q.broker for q in held_back}
    usage = model.usage()
    background = model.background_usage()
    stats: dict[str, Any] = {
        "avgUsage": float(usage.mean()),
        "minGain": pulsar.fulcrum_min_gain_fraction,
        "cpuPerMsg": model.cost,
        "brokers": {
            name: {"usage": u, "background": b}
            for name, u, b in zip(model.names, usage.tolist(), background.tolist(), strict=True)
        },
    }
    recent = snapshot.moves_since(now - HOUR)
    budget = move_budget(pulsar, safety, recent, len(model.rows))
    stats["budget"] = budget
    stats["quarantined"] = [q.as_dict() for q in model.quarantined]
    # A reading that cannot be true is named with the decision, and not obeyed.
    skipped = [Skip("broker", q.broker, Reason.IMPLAUSIBLE, q.reason) for q in reported.quarantined]
    skipped += [
        Skip(
            "broker",
            q.broker,
            Reason.IMPLAUSIBLE,
            f"{q.reason}; no bundle moves to or from it until then",
        )
        for q in held_back
    ]
    if budget <= 0:
        skipped.append(Skip("broker", "*", Reason.RATE_LIMITED, f"{recent} moves in the last hour"))
        return SheddingDecision(
            (), Reason.RATE_LIMITED, tuple(skipped), stats, {"left": left}, NAME
        )
    cool_down = cool_down_s(pulsar, safety, fulcrum=True)
    blacklist = safety.blacklist if safety is not None else ()
    search = _Search(snapshot, model, pulsar, left, cool_down, blacklist, held)
    load = model.load.copy()
    unloads: list[Unload] = []
    too_big: set[int] = set()
    level = model.level()
    stats["level"] = level
    settled = level * (1 + SETTLE_BAND)

    usage = model.usage(load)
    while len(unloads) < budget:
        move = search.best_move(load, usage, too_big, settled)
        moves = [] if move is None else [move]
        stepped = False
        if move is None or move.gain < pulsar.fulcrum_min_gain_fraction:
            # No move gains enough: one that takes a broker above the level the cluster could
            # reach towards it without taking its destination above that level.
            step = search.toward(load, usage, settled, MIN_STEP * level)
            moves, stepped = ([], False) if step is None else ([step], True)
        if not moves:
            swap = None
            if len(unloads) + 2 <= budget:
                swap = search.best_swap(load, usage)
            if swap is None or swap[0].gain < pulsar.fulcrum_min_gain_fraction:
                break
            moves = list(swap)
        search.apply_all(load, usage, moves, unloads)
        if stepped and len(unloads) < budget:
            # The steps that follow from the same broker while it stays the hottest that can
            # shed, in one pass (a hot broker sheds hundreds of bundles in a large cluster).
            most = budget - len(unloads)
            steps = search.run_down(load, usage, moves[0].source, settled, MIN_STEP * level, most)
            search.apply_all(load, usage, steps, unloads)
    reason = Reason.OVERLOADED if unloads else Reason.BALANCED
    for row in sorted(too_big):
        name = search.name(row)
        skipped.append(
            Skip(
                "bundle",
                name,
                Reason.SOLE_BUNDLE,
                "too big to move: it alone outweighs the gap it would close; split instead",
            )
        )
    if not unloads:
        skipped += search.why_nothing(model.usage(load))
    for unload in unloads:
        left.setdefault(unload.bundle, []).append([unload.source, now])
    stats["predicted"] = {n: float(u) for n, u in zip(model.names, model.usage(load), strict=True)}
    splits = tuple(search.name(row) for row in sorted(too_big))[:MAX_SPLITS]
    memory = {"left": left, "seen": seen}
    return SheddingDecision(
        tuple(unloads), reason, tuple(skipped), stats, memory, NAME, splits=splits
    )


class _Search:
    """The candidate moves of one cycle over the model, with the bundles it may not move."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        model: LoadModel,
        pulsar: PulsarConfig,
        left: dict[str, list[list[Any]]],
        cool_down_s: float,
        blacklist: tuple[str, ...],
        held: set[str],
    ) -> None:
        self.snapshot, self.model, self.pulsar, self.left = snapshot, model, pulsar, left
        self.cool_down_s, self.blacklist = cool_down_s, blacklist
        # The brokers whose reading is held back: neither a source nor a destination.
        self.held = {i for i, name in enumerate(model.names) if name in held}
        self.owner = model.owner.copy()
        self.moved: set[int] = set()
        self.names: dict[int, str] = {}
        self.grouped = any(p.anti_affinity_group for p in snapshot.namespaces.values())
        self.relaxed = replace(pulsar, is_distribute_bundles_evenly_enabled=False)
        self.spread: dict[int, set[str]] = {}
        topics = np.asarray([snapshot.brokers[n].topics for n in model.names], dtype=np.int64)
        self.topics = topics
        self.bundle_topics = snapshot.table.counts[model.rows, 0]
        # The biggest movable rows of each broker the search looked at, forgotten by ``apply``
        # for its two brokers; whether a row is out of its cool-down and off the blacklist.
        self.biggest: dict[int, list[int]] = {}
        self.free: dict[int, bool] = {}
        # The rows grouped by the broker that owned them when the cycle began.
        owner = model.owner.astype(np.int16) if len(model.names) < 2**15 else model.owner
        self.by_owner = np.argsort(owner, kind="stable")  # a radix sort in 16 bits
        self.groups = np.concatenate(
            ([0], np.cumsum(np.bincount(model.owner, minlength=len(model.names))))
        ).tolist()
        self.ordered: dict[int, list[int]] = {}

    def name(self, row: int) -> str:
        if row not in self.names:
            self.names[row] = self.snapshot.table.names_at([int(self.model.rows[row])])[0]
        return self.names[row]

    def movable(self, row: int) -> bool:
        """Not moved this cycle, out of its cool-down, not blacklisted."""
        if row in self.moved:
            return False
        free = self.free.get(row)
        if free is None:
            name = self.name(row)
            unloaded = self.snapshot.recently_unloaded.get(name)
            free = self.free[row] = (
                unloaded is None or self.snapshot.now - unloaded >= self.cool_down_s
            ) and matching_pattern(name, self.blacklist) is None
        return free

    def rows_of(self, broker: int, count: int) -> list[int]:
        """The ``count`` biggest movable bundles of ``broker`` (none of a held broker's)."""
        if broker in self.held:
            return []
        known = self.biggest.get(broker)
        if known is not None and (len(known) >= count or known[-1] == -1):
            return [row for row in known[:count] if row >= 0]
        ordered = self.ordered.get(broker)
        if ordered is None:
            # The rows the broker owned when the cycle began, biggest first (the weight of each
            # on the broker: how much of its usage it is); a row moved to it this cycle is not
            # movable again, so this order stays right for every step of the cycle.
            start, end = self.groups[broker], self.groups[broker + 1]
            mine = self.by_owner[start:end]
            size = self.model.usage_of(self.model.bundle_load[mine], self.model.limits[broker])
            ordered = self.ordered[broker] = mine[np.argsort(-size, kind="stable")].tolist()
        out = []
        for row in ordered:
            if self.movable(row):
                out.append(row)
                if len(out) == count:
                    break
        # -1 ends a list that holds every movable row of the broker.
        self.biggest[broker] = out if len(out) == count else [*out, -1]
        return out

    def allowed(self, row: int, destination: int) -> bool:
        """The destination is not held back, not one the bundle left within the hour, has room
        for its topics, and keeps its anti-affinity group spread (when it has one)."""
        if destination in self.held:
            return False
        name = self.name(row)
        broker = self.model.names[destination]
        if any(b == broker for b, _ in self.left.get(name, ())):
            return False
        topics = self.topics[destination] + self.bundle_topics[row]
        if topics > self.pulsar.broker_max_topics:
            return False
        if not self.grouped:
            return True
        group = self.snapshot.namespaces.get(namespace_of_bundle(name))
        if group is None or not group.anti_affinity_group:
            return True
        if row not in self.spread:
            # Pulsar's filters without the even-distribution heuristic, over every other broker.
            source = self.model.names[int(self.model.owner[row])]
            others = [n for n in self.model.names if n != source]
            kept, _, _ = filter_candidates(self.snapshot, name, self.relaxed, {}, others)
            self.spread[row] = set(kept)
        return broker in self.spread[row]

    def landing(self, load: np.ndarray, targets: list[int], delta: np.ndarray) -> np.ndarray:
        """(targets, bundles): each of the ``targets`` brokers' usage with each bundle of
        ``delta`` (bundles, 5) added to its ``load``, in one pass."""
        return self.model.usage_of(
            (self.model.background[targets] + load[targets])[:, None, :] + delta[None],
            self.model.limits[targets][:, None, :],
        )

    def best_move(
        self, load: np.ndarray, usage: np.ndarray, too_big: set[int], settled: float
    ) -> _Move | None:
        """The single move with the largest predicted gain, or None; a source's biggest bundle
        that no destination can take without ending above the source is added to ``too_big``
        when the source is above ``settled``."""
        mean = usage.mean()
        hot = [i for i in _lowest(-usage, SOURCES) if usage[i] > mean]
        cool = _lowest(usage, DESTINATIONS)
        best: _Move | None = None
        for source in hot:
            rows = self.rows_of(source, CANDIDATES)
            if not rows:
                continue
            # Below the source (above the mean): the coolest (below the mean) always is.
            targets = [d for d in cool if usage[d] < usage[source]]
            delta = self.model.bundle_load[rows]
            after_source = self.model.broker_usage(source, load[source] - delta)
            after_all = self.landing(load, targets, delta)
            peaks = np.maximum(usage[source], usage[targets])
            gains_all = peaks[:, None] - np.maximum(after_source[None, :], after_all)
            orders = np.argsort(-gains_all, axis=1, kind="stable").tolist()
            for i, destination in enumerate(targets):
                gains, after_destination = gains_all[i], after_all[i]
                for k in orders[i]:
                    if gains[k] <= 0:
                        # Too big: it lands the destination higher than the source was.
                        if k == 0 and usage[source] > settled:
                            too_big.add(rows[k])
                        break
                    if not self.allowed(rows[k], destination):
                        continue
                    if best is None or gains[k] > best.gain:
                        best = _Move(
                            rows[k],
                            source,
                            destination,
                            float(gains[k]),
                            (float(usage[source]), float(usage[destination])),
                            (float(after_source[k]), float(after_destination[k])),
                        )
                    break
        if best is not None:
            too_big.discard(best.row)
        return best

    def toward(
        self, load: np.ndarray, usage: np.ndarray, settled: float, least: float
    ) -> _Move | None:
        """A step towards the level: from the hottest broker above ``settled`` that has one
        (hottest first, among ``SOURCES``), the move of one of its bundles to one of the
        coolest brokers that lowers the higher usage of the two the most, by more than
        ``least`` (a fraction of usage; by anything when even the source's biggest bundle
        weighs less); None when no broker above ``settled`` has such a move."""
        cool = _lowest(usage, DESTINATIONS)
        for source in _lowest(-usage, SOURCES):
            if usage[source] <= settled:
                return None
            rows = self.rows_of(source, CANDIDATES)
            if not rows:
                continue
            delta = self.model.bundle_load[rows]
            after_source = self.model.broker_usage(source, load[source] - delta)
            # A source whose biggest bundle is below ``least`` (thousands of small bundles) may
            # step by less: its load moves a small bundle at a time or not at all.
            floor = least
            if self.model.usage_of(delta[0], self.model.limits[source]) < least:
                floor = 0.0
            best: _Move | None = None
            targets = [d for d in cool if usage[d] < usage[source]]
            after_all = self.landing(load, targets, delta)
            gains_all = usage[source] - np.maximum(after_source[None, :], after_all)
            orders = np.argsort(-gains_all, axis=1, kind="stable").tolist()
            for i, destination in enumerate(targets):
                gains, after = gains_all[i], after_all[i]
                for k in orders[i]:
                    if gains[k] <= floor or (best is not None and gains[k] <= best.gain):
                        break
                    if not self.allowed(rows[k], destination):
                        continue
                    best = _Move(
                        rows[k],
                        source,
                        destination,
                        float(gains[k]),
                        (float(usage[source]), float(usage[destination])),
                        (float(after_source[k]), float(after[k])),
                    )
                    break
            if best is not None:
                return best
        return None

    def run_down(
        self,
        load: np.ndarray,
        usage: np.ndarray,
        source: int,
        settled: float,
        least: float,
        most: int,
    ) -> list[_Move]:
        """The steps ``toward`` would go on taking from ``source`` while it stays the hottest
        broker that sheds, found in one pass: its biggest movable bundles, biggest first, each
        to the next coolest broker, as long as each step gains more than ``least`` (anything
        when its biggest bundle weighs less), leaves its destination no higher than the source,
        and leaves the source above ``settled`` and above every broker below it before the
        step (the next one down, and each destination filled); at most ``most`` steps."""
        if usage[source] <= settled:
            return []
        rows = self.rows_of(source, CANDIDATES)
        others = np.delete(usage, source)
        below = others[others <= usage[source]]
        cool = [i for i in _lowest(usage, len(rows) + 1) if i != source]
        count = min(len(rows), len(cool), most)
        if count < 1:  # its last movable bundle was the step's
            return []
        rows, cool = rows[:count], cool[:count]
        delta = self.model.bundle_load[rows]
        after_source = self.model.broker_usage(source, load[source] - np.cumsum(delta, axis=0))
        before_source = np.concatenate(([usage[source]], after_source[:-1]))
        after = self.model.usage_of(
            self.model.background[cool] + load[cool] + delta, self.model.limits[cool]
        )
        gains = before_source - np.maximum(after_source, after)
        floor = least
        if self.model.usage_of(delta[0], self.model.limits[source]) < least:
            floor = 0.0
        next_down = float(np.max(below, initial=-math.inf))
        above = np.maximum.accumulate(np.concatenate(([next_down], after[:-1])))
        fine = (gains > floor) & (after <= after_source) & (before_source > settled)
        fine &= before_source >= above
        out: list[_Move] = []
        for k in range(count):
            if not fine[k] or not self.allowed(rows[k], cool[k]):
                break
            out.append(
                _Move(
                    rows[k],
                    source,
                    cool[k],
                    float(gains[k]),
                    (float(before_source[k]), float(usage[cool[k]])),
                    (float(after_source[k]), float(after[k])),
                )
            )
        return out

    def best_swap(self, load: np.ndarray, usage: np.ndarray) -> tuple[_Move, _Move] | None:
        """A bundle each way between the hottest and the coolest broker, when it gains."""
        source, destination = int(np.argmax(usage)), int(np.argmin(usage))
        if source == destination:
            return None
        out = self.rows_of(source, CANDIDATES // 4)
        back = self.rows_of(destination, CANDIDATES)
        if not out or not back:
            return None
        a = self.model.bundle_load[out][:, None, :]
        b = self.model.bundle_load[back][None, :, :]
        after_source = self.model.broker_usage(source, load[source] - a + b)
        after_destination = self.model.broker_usage(destination, load[destination] + a - b)
        peak = max(usage[source], usage[destination])
        gains = peak - np.maximum(after_source, after_destination)
        for flat in np.argsort(-gains, axis=None, kind="stable").tolist():
            i, j = divmod(flat, len(back))
            if gains[i, j] <= 0:
                return None
            if not (self.allowed(out[i], destination) and self.allowed(back[j], source)):
                continue
            gain = float(gains[i, j])
            before = (float(usage[source]), float(usage[destination]))
            after = (float(after_source[i, j]), float(after_destination[i, j]))
            return (
                _Move(out[i], source, destination, gain, before, after),
                _Move(back[j], destination, source, gain, before[::-1], after[::-1]),
            )
        return None

    def apply_all(
        self, load: np.ndarray, usage: np.ndarray, moves: list[_Move], unloads: list[Unload]
    ) -> None:
        """Apply ``moves`` to ``load``, update ``usage`` for the brokers they touch, and add
        their unloads to ``unloads``."""
        if not moves:
            return
        for m in moves:
            self.apply(load, m)
            unloads.append(self.unload(m))
        touched = sorted({m.source for m in moves} | {m.destination for m in moves})
        usage[touched] = self.model.usage_of(
            self.model.background[touched] + load[touched], self.model.limits[touched]
        )

    def apply(self, load: np.ndarray, move: _Move) -> None:
        delta = self.model.bundle_load[move.row]
        load[move.source] -= delta
        load[move.destination] += delta
        self.owner[move.row] = move.destination
        self.biggest.pop(move.source, None)
        self.biggest.pop(move.destination, None)
        self.topics[move.source] -= self.bundle_topics[move.row]
        self.topics[move.destination] += self.bundle_topics[move.row]
        self.moved.add(move.row)

    def unload(self, move: _Move) -> Unload:
        names = self.model.names
        return Unload(
            self.name(move.row),
            names[move.source],
            names[move.destination],
            Reason.LOAD_IMBALANCE,
            move.gain,
            "predictedGain",
        )

    def why_nothing(self, usage: np.ndarray) -> list[Skip]:
        """Why the hottest broker keeps its load: its reading held back, pinned by its
        background, every bundle in cool-down, or no move gains the minimum."""
        hottest = int(np.argmax(usage))
        name = self.model.names[hottest]
        background = float(self.model.background_usage()[hottest])
        mean = float(usage.mean())
        if usage[hottest] - mean < self.pulsar.fulcrum_min_gain_fraction:
            return []
        if hottest in self.held:  # its figures are in doubt: say that before what they say
            detail = (
                "its reading is held back for a report (ImplausibleReading): no bundle moves "
                "to or from it until the next"
            )
        elif background >= mean:
            detail = (
                f"pinned by its own background: {explain.percent(background)} of its "
                f"{explain.percent(float(usage[hottest]))} is not its bundles' (mean "
                f"{explain.percent(mean)})"
            )
        elif not self.rows_of(hottest, 1):
            detail = "every bundle it owns is in cool-down, blacklisted or moved already"
        else:
            detail = (
                f"no move lowers it by the minimum gain "
                f"{explain.percent(self.pulsar.fulcrum_min_gain_fraction)}"
            )
        return [Skip("broker", name, Reason.BALANCED, detail)]
