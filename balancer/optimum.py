"""The best balance any assignment of bundles to brokers can reach: the reference of the
quality benchmark and of the console's optimality gauge.

A broker's usage is the fullest of its movable resources (CPU, bandwidth in, bandwidth out —
Pulsar's weighted max with its default weights), each its unmovable background plus the load of
the bundles it holds, over its capacity. The optimum minimises the highest usage:

- ``lower_bound``: what no assignment can beat (the LP relaxation's bound: every broker keeps
  its background; the cluster's total of each resource spread over its total capacity; every
  bundle lands somewhere);
- ``heuristic``: LPT (largest bundle first, onto the broker it leaves least full) then local
  search (moves and swaps off the fullest broker while they lower it);

(The exact optimum, by HiGHS, is the benchmark's: ``tests/benchmarks/optimum.py``.)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Assignment:
    """Bundle -> broker (index), with the usage it gives every broker (fractions)."""

    owner: np.ndarray
    usage: np.ndarray

    @property
    def peak(self) -> float:
        return float(self.usage.max())

    @property
    def max_over_mean(self) -> float:
        mean = float(self.usage.mean())
        return self.peak / mean if mean > 0 else 0.0


def usage_of(
    owner: np.ndarray, loads: np.ndarray, background: np.ndarray, caps: np.ndarray
) -> np.ndarray:
    """Every broker's usage: max over resources of (background + its bundles' load) / capacity.

    Args:
        owner: (n,) broker index per bundle.
        loads: (n, r) each bundle's load per resource (absolute units).
        background: (b, r) each broker's unmovable load.
        caps: (b, r) each broker's capacity.
    """
    total = background.copy()
    np.add.at(total, owner, loads)
    return np.max(total / caps, axis=1)  # type: ignore[no-any-return]


def lower_bound(loads: np.ndarray, background: np.ndarray, caps: np.ndarray) -> float:
    """No assignment's highest usage is below this."""
    own = float(np.max(background / caps))
    spread = float(np.max((background.sum(axis=0) + loads.sum(axis=0)) / caps.sum(axis=0)))
    if len(loads) == 0:
        return max(own, spread)
    # Each bundle on the broker where it fits best.
    alone = np.max((background[None, :, :] + loads[:, None, :]) / caps[None, :, :], axis=2)
    somewhere = float(np.max(np.min(alone, axis=1)))
    return max(own, spread, somewhere)


# Up to this many assignments (brokers ** bundles) the best is found by trying them all: local
# search, moving or swapping one bundle at a time, cannot find what needs two bundles to move
# together (a bundle for two others), which a handful of bundles often does.
EXHAUSTIVE = 4096


def _every_assignment(loads: np.ndarray, background: np.ndarray, caps: np.ndarray) -> Assignment:
    """The best of every assignment of the ``loads`` to the brokers (few: ``EXHAUSTIVE``)."""
    n, b = len(loads), len(background)
    owners = np.array(list(itertools.product(range(b), repeat=n)), dtype=np.int64).reshape(b**n, n)
    totals = np.repeat(background[None, :, :].astype(np.float64), len(owners), axis=0)
    rows = np.arange(len(owners))
    for i in range(n):
        totals[rows, owners[:, i]] += loads[i]
    peaks = np.max(totals / caps[None, :, :], axis=(1, 2))
    best = int(np.argmin(peaks))
    return Assignment(owners[best], np.max(totals[best] / caps, axis=1))


def heuristic(
    loads: np.ndarray,
    background: np.ndarray,
    caps: np.ndarray,
    *,
    iterations: int = 2000,
    start: np.ndarray | None = None,
) -> Assignment:
    """LPT (largest bundle first, onto the broker it leaves least full) — or ``start``, an
    assignment to improve — then the best move or swap of a bundle off the fullest broker while
    one lowers it (at most ``iterations``). Without ``start``, when there are at most
    ``EXHAUSTIVE`` assignments, the best of them all (exact).

    Args:
        loads: (n, r) each bundle's load per resource; background: (b, r); caps: (b, r) — a
            capacity may be ``inf`` (a resource that does not count).
        start: (n,) a broker index per bundle to start from instead of LPT.
    """
    n, b = len(loads), len(background)
    if start is None and b**n <= EXHAUSTIVE:
        return _every_assignment(loads, background, caps)
    total = background.astype(np.float64).copy()
    if start is not None:
        owner = np.asarray(start, dtype=np.int64).copy()
        np.add.at(total, owner, loads)
    else:
        owner = np.zeros(n, dtype=np.int64)
        size = np.max(loads / caps.mean(axis=0), axis=1)
        for i in np.argsort(-size, kind="stable"):
            target = int(np.argmin(np.max((total + loads[i]) / caps, axis=1)))
            owner[i] = target
            total[target] += loads[i]
    for _ in range(iterations):
        usage = np.max(total / caps, axis=1)
        hot = int(np.argmax(usage))
        mine = np.flatnonzero(owner == hot)
        best, choice = usage[hot] - 1e-12, None
        # Moves: each of the hot broker's bundles to each other broker.
        left = np.max((total[hot] - loads[mine]) / caps[hot], axis=1)
        arrive = np.max((total[None, :, :] + loads[mine][:, None, :]) / caps[None, :, :], axis=2)
        peak = np.maximum(left[:, None], arrive)
        peak[:, hot] = np.inf
        if peak.size:
            i, dest = divmod(int(np.argmin(peak)), b)
            if peak[i, dest] < best:
                best, choice = float(peak[i, dest]), (int(mine[i]), dest, -1)
        # Swaps: a hot bundle for one of another broker.
        for other in range(b):
            theirs = np.flatnonzero(owner == other)
            if other == hot or not len(theirs) or not len(mine):
                continue
            diff = loads[mine][:, None, :] - loads[theirs][None, :, :]
            pair = np.maximum(
                np.max((total[hot] - diff) / caps[hot], axis=2),
                np.max((total[other] + diff) / caps[other], axis=2),
            )
            i, j = divmod(int(np.argmin(pair)), len(theirs))
            if pair[i, j] < best:
                best, choice = float(pair[i, j]), (int(mine[i]), other, int(theirs[j]))
        if choice is None:
            break
        i, dest, j = choice
        total[hot] -= loads[i]
        total[dest] += loads[i]
        owner[i] = dest
        if j >= 0:
            total[dest] -= loads[j]
            total[hot] += loads[j]
            owner[j] = hot
    return Assignment(owner, np.max(total / caps, axis=1))
