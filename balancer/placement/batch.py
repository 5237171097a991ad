"""Placing many bundles at once: the same decisions as calling ``place`` for each in turn,
computed on arrays over the brokers so that thousands of placements on thousands of brokers take
milliseconds. Used for the bundles one shedding cycle unloads."""

from __future__ import annotations

import bisect
import functools
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.decisions import Placement, Reason
from balancer.errors import InvalidSnapshot
from balancer.names import PlacementName
from balancer.placement.place import place
from balancer.snapshot import ClusterSnapshot


def place_many(
    snapshot: ClusterSnapshot,
    bundles: Sequence[str],
    config: PulsarConfig,
    state: dict[str, Any],
    *,
    strategy: str = PlacementName.LEAST_LONG_TERM_MESSAGE_RATE,
    candidates: Sequence[str] | None = None,
    sources: Mapping[str, str] | None = None,
    explain: bool = False,
) -> tuple[list[Placement], dict[str, Any]]:
    """Place ``bundles`` one after the other, each seeing the ones placed before it.

    Each bundle's candidates are ``candidates`` (or every broker) without its entry in
    ``sources`` (the broker it was unloaded from) unless that would leave none. The decisions are
    those of :func:`balancer.placement.place.place` called in turn with the state threaded
    through; LeastLongTermMessageRate is computed on arrays, other strategies call ``place``.
    Batch placements carry the chosen broker's score only (no per-broker rejection lists) unless
    ``explain`` asks for every candidate's score and every filter's rejections (one ``place``
    per bundle: the same decisions, slower).

    Returns:
        (one Placement per bundle in order, the state after the last one).

    Raises:
        InvalidSnapshot: a candidate is not a broker of the snapshot.
    """
    names = list(snapshot.brokers)
    position = {name: i for i, name in enumerate(names)}
    base = np.zeros(len(names), dtype=bool)
    for name in names if candidates is None else candidates:
        if name not in position:
            raise InvalidSnapshot(f"candidate {name!r} is not a broker", field="candidates")
        base[position[name]] = True
    has_groups = any(p.anti_affinity_group for p in snapshot.namespaces.values())
    if explain or strategy != PlacementName.LEAST_LONG_TERM_MESSAGE_RATE or has_groups:
        return _one_by_one(snapshot, bundles, config, state, strategy, base, names, sources)
    brokers = list(snapshot.brokers.values())
    active = base & np.asarray([b.is_active for b in brokers], dtype=bool)
    usage = snapshot.weighted_usage(config.weights)
    max_usage = snapshot.max_usage()
    bar = config.overloaded_threshold_fraction
    overloaded_score = np.asarray([usage[n] > bar for n in names], dtype=bool)
    overloaded_max = np.asarray([max_usage[n] > bar for n in names], dtype=bool)
    long_term = np.asarray([snapshot.long_term_msg_rate(n) for n in names], dtype=np.float64)
    topics = np.asarray([b.topics for b in brokers], dtype=np.int64)
    preallocated: dict[str, str] = dict(state.get("preallocated", {}))
    extra = np.zeros(len(names), dtype=np.float64)
    extra_topics = np.zeros(len(names), dtype=np.int64)
    # Per namespace: bundles owned or preallocated by each broker position.
    counts: dict[str, _Tally] = {}

    nobody = _Tally(np.zeros(0, dtype=np.int64), len(names))  # even distribution off

    def namespace_counts(namespace: str) -> _Tally:
        if namespace not in counts:
            counts[namespace] = _Tally(snapshot.bundle_owner_positions(namespace), len(names))
        return counts[namespace]

    def count(bundle: str, broker: int, sign: int) -> None:
        load = snapshot.bundles.get(bundle)
        if load is not None:
            extra_topics[broker] += sign * load.topics
        if load is None or load.owner is None:
            namespace_counts(namespace_of_bundle(bundle)).add(broker, sign)

    def resum(broker: int) -> None:
        # The one-by-one sum, in the dict's order: exact, not just close.
        total = 0.0
        for other, owner in preallocated.items():
            if owner == names[broker] and other in snapshot.bundles:
                total += snapshot.bundles[other].long_term.msg_rate
        extra[broker] = total

    def preallocate(bundle: str, broker: int) -> None:
        """Record ``bundle`` on ``broker``, replacing an earlier preallocation of it."""
        earlier = preallocated.get(bundle)
        preallocated[bundle] = names[broker]
        if earlier is not None and not initial:
            count(bundle, position[earlier], -1)
            count(bundle, broker, +1)
            resum(position[earlier])
            resum(broker)
            return
        count(bundle, broker, +1)
        load = snapshot.bundles.get(bundle)
        if load is not None:
            extra[broker] += load.long_term.msg_rate

    initial = True
    for bundle, broker in list(preallocated.items()):
        preallocate(bundle, position[broker])
    initial = False
    # Scores and the topic limit change only at the broker just chosen: kept up to date in place,
    # with the brokers in score order, so that a placement usually looks at a few brokers only.
    scores = np.where(overloaded_score, np.inf, long_term + extra)
    active_count = int(active.sum())
    within_topics = (topics + extra_topics) <= config.broker_max_topics
    ok = bytearray((active & within_topics).tolist())
    ok_count = sum(ok)
    order = sorted(zip(scores.tolist(), range(len(names)), strict=True))
    even = config.is_distribute_bundles_evenly_enabled
    out: list[Placement] = []
    for bundle in bundles:
        source = (sources or {}).get(bundle)
        src = position.get(source, -1) if source is not None else -1
        if src >= 0 and not (active[src] and active_count > 1):
            src = -1
        namespace = namespace_of_bundle(bundle)
        # Brokers whose count of the namespace, without this bundle itself, is 0 although the
        # tally lists them: they hold only this bundle.
        only_this: set[int] = set()
        tally = nobody
        if even:
            tally = namespace_counts(namespace)
            own = snapshot.bundles.get(bundle)
            corrections = []
            if own is not None and own.owner is not None:
                corrections.append(position[own.owner])
            earlier = preallocated.get(bundle)
            if earlier is not None and (own is None or own.owner is None):
                corrections.append(position[earlier])
            for c in corrections:
                if tally.get(c) - corrections.count(c) <= 0:
                    only_this.add(c)
        chosen, reason = None, Reason.NO_CANDIDATES
        candidates_left = ok_count - (1 if src >= 0 and ok[src] else 0)
        if candidates_left > len(tally) - len(only_this):
            # Some candidate holds none of the namespace: the least count is 0, and the choice
            # is the lowest score among such candidates, found in score order.
            pool: list[int] = []
            best = np.inf
            for value, i in order:
                if pool and value != best:
                    break
                if ok[i] and i != src and (i not in tally or i in only_this):
                    best = value
                    pool.append(i)
            if best != np.inf:
                pool.sort()
                chosen, reason = pool[_first_draw(config.seed, len(pool))], Reason.LEAST_LOADED
        allowed = active
        if (chosen is None or overloaded_max[chosen]) and src >= 0:
            allowed = active.copy()
            allowed[src] = False
        if chosen is None:
            kept = allowed & within_topics
            if not kept.any():
                kept = allowed
            if even and kept.any():
                ns_counts = tally.dense()
                for c in corrections:  # this bundle itself does not count
                    ns_counts[c] -= 1
                least = ns_counts[kept].min()
                kept = kept & (ns_counts == least)
            if not kept.any():
                kept = allowed
            chosen, reason = _select(kept, scores, config.seed)
        if chosen is None:
            out.append(Placement(bundle, None, Reason.NO_CANDIDATES, (), (), {}, {}, strategy))
            continue
        if overloaded_max[chosen]:
            chosen, _ = _select(allowed, scores, config.seed)
            reason = Reason.RESELECTED_OVERLOADED
        assert chosen is not None  # allowed ⊇ kept, which was not empty
        score = float(scores[chosen])
        earlier = preallocated.get(bundle)
        preallocate(bundle, chosen)
        for i in {chosen, position[earlier] if earlier is not None else chosen}:
            if not overloaded_score[i]:
                old, new = float(scores[i]), float(long_term[i] + extra[i])
                if new != old:
                    del order[bisect.bisect_left(order, (old, i))]
                    bisect.insort(order, (new, i))
                    scores[i] = new
            within = bool(topics[i] + extra_topics[i] <= config.broker_max_topics)
            within_topics[i] = within
            now_ok = int(bool(active[i]) and within)
            ok_count += now_ok - ok[i]
            ok[i] = now_ok
        out.append(
            Placement(bundle, names[chosen], reason, (), (), {names[chosen]: score}, {}, strategy)
        )
    return out, {**state, "preallocated": preallocated}


class _Tally:
    """Bundles of one namespace per broker position, dense (counts may be 0)."""

    __slots__ = ("counts", "positive")

    def __init__(self, owners: np.ndarray, brokers: int) -> None:
        self.counts = np.bincount(owners, minlength=brokers).astype(np.int64)
        self.positive = int(np.count_nonzero(self.counts))

    def get(self, broker: int) -> int:
        """The count of ``broker`` (0 when it holds none)."""
        return int(self.counts[broker])

    def __contains__(self, broker: int) -> bool:
        return bool(self.counts[broker] > 0)

    def __len__(self) -> int:
        """Brokers with a positive count."""
        return self.positive

    def add(self, broker: int, sign: int) -> None:
        """One more (sign +1) or one fewer (-1) bundle on ``broker``, never below 0."""
        before = int(self.counts[broker])
        after = max(0, before + sign)
        self.counts[broker] = after
        self.positive += (after > 0) - (before > 0)

    def dense(self) -> np.ndarray:
        """A copy of the counts."""
        return self.counts.copy()


def _select(mask: np.ndarray, scores: np.ndarray, seed: int) -> tuple[int | None, Reason]:
    """LeastLongTermMessageRate over the masked brokers: the seeded choice among the minimal
    scores (ascending names), or among all when every score is infinite."""
    indices = np.flatnonzero(mask)
    if indices.size == 0:
        return None, Reason.NO_CANDIDATES
    sub = scores[indices]
    best = sub.min()
    if best == np.inf:
        pool = indices
        reason = Reason.ALL_OVERLOADED
    else:
        pool = indices[sub == best]
        reason = Reason.LEAST_LOADED
    return int(pool[_first_draw(seed, int(pool.size))]), reason


@functools.lru_cache(maxsize=4096)
def _first_draw(seed: int, size: int) -> int:
    """``random.Random(seed).randrange(size)``: what a freshly seeded choice picks (cached)."""
    return random.Random(seed).randrange(size)


def _one_by_one(
    snapshot: ClusterSnapshot,
    bundles: Sequence[str],
    config: PulsarConfig,
    state: dict[str, Any],
    strategy: str,
    base: np.ndarray,
    names: list[str],
    sources: Mapping[str, str] | None,
) -> tuple[list[Placement], dict[str, Any]]:
    allowed = [n for n, ok in zip(names, base.tolist(), strict=True) if ok]
    active = [n for n in allowed if snapshot.brokers[n].is_active]
    out = []
    for bundle in bundles:
        source = (sources or {}).get(bundle)
        others = [n for n in active if n != source]
        candidates = others if others else allowed
        placement = place(snapshot, bundle, config, state, candidates, strategy)
        state = placement.state
        out.append(placement)
    return out, state
