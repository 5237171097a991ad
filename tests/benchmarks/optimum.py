"""The best balance any assignment of bundles to brokers can reach, for reference.

A broker's usage is the fullest of its movable resources (CPU, bandwidth in, bandwidth out —
Pulsar's weighted max with its default weights), each its unmovable background plus the load of
the bundles it holds, over its capacity. The optimum minimises the highest usage:

- ``lower_bound``: what no assignment can beat (the LP relaxation's bound: every broker keeps
  its background; the cluster's total of each resource spread over its total capacity; every
  bundle lands somewhere);
- ``heuristic``: LPT (largest bundle first, onto the broker it leaves least full) then local
  search (moves and swaps off the fullest broker while they lower it);
- ``exact``: the mixed-integer program solved by HiGHS (``highspy``, the ``bench`` extra), with a
  time limit; None when highspy is not installed.
"""

from __future__ import annotations

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


def heuristic(
    loads: np.ndarray, background: np.ndarray, caps: np.ndarray, *, iterations: int = 2000
) -> Assignment:
    """LPT, then moves and swaps off the fullest broker while they lower it."""
    n, b = len(loads), len(background)
    owner = np.zeros(n, dtype=np.int64)
    total = background.astype(np.float64).copy()
    size = np.max(loads / caps.mean(axis=0), axis=1) if n else np.zeros(0)
    for i in np.argsort(-size, kind="stable"):
        after = np.max((total + loads[i]) / caps, axis=1)
        target = int(np.argmin(after))
        owner[i] = target
        total[target] += loads[i]
    for _ in range(iterations):
        usage = np.max(total / caps, axis=1)
        hot = int(np.argmax(usage))
        mine = np.flatnonzero(owner == hot)
        if not len(mine):
            break
        best, choice = usage[hot] - 1e-12, None
        # Moves: each of the hot broker's bundles to each other broker.
        left = np.max((total[hot] - loads[mine]) / caps[hot], axis=1)  # (m,)
        arrive = np.max((total[None, :, :] + loads[mine][:, None, :]) / caps[None, :, :], axis=2)
        peak = np.maximum(left[:, None], arrive)  # (m, b)
        peak[:, hot] = np.inf
        k = int(np.argmin(peak))
        i, dest = divmod(k, b)
        if peak[i, dest] < best:
            best, choice = float(peak[i, dest]), ("move", mine[i], dest)
        # Swaps: a hot bundle for a smaller one of another broker.
        for other in range(b):
            if other == hot:
                continue
            theirs = np.flatnonzero(owner == other)
            if not len(theirs):
                continue
            diff = loads[mine][:, None, :] - loads[theirs][None, :, :]  # (m, t, r)
            hot_after = np.max((total[hot] - diff) / caps[hot], axis=2)
            other_after = np.max((total[other] + diff) / caps[other], axis=2)
            pair = np.maximum(hot_after, other_after)
            k = int(np.argmin(pair))
            i, j = divmod(k, len(theirs))
            if pair[i, j] < best and max(usage[other], 0) < usage[hot]:
                best, choice = float(pair[i, j]), ("swap", mine[i], theirs[j], other)
        if choice is None:
            break
        if choice[0] == "move":
            _, i, dest = choice
            total[hot] -= loads[i]
            total[dest] += loads[i]
            owner[i] = dest
        else:
            _, i, j, other = choice
            total[hot] += loads[j] - loads[i]
            total[other] += loads[i] - loads[j]
            owner[i], owner[j] = other, hot
    return Assignment(owner, np.max(total / caps, axis=1))


def exact(
    loads: np.ndarray, background: np.ndarray, caps: np.ndarray, *, time_limit_s: float = 20.0
) -> tuple[Assignment, float] | None:
    """The optimum by HiGHS (the MIP's best assignment and its proven lower bound), or None
    when highspy is not installed."""
    try:
        import highspy
    except ImportError:
        return None
    n, b = len(loads), len(background)
    r = loads.shape[1]
    start = heuristic(loads, background, caps)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", time_limit_s)
    h.setOptionValue("mip_rel_gap", 1e-4)
    inf = highspy.kHighsInf
    # Columns: x[i, j] (n × b binaries), then t.
    count = n * b + 1
    lower = np.zeros(count)
    upper = np.ones(count)
    upper[-1] = inf
    cost = np.zeros(count)
    cost[-1] = 1.0
    h.addVars(count, lower, upper)
    h.changeColsCost(count, np.arange(count, dtype=np.int32), cost)
    h.changeColsIntegrality(
        n * b,
        np.arange(n * b, dtype=np.int32),
        np.full(n * b, highspy.HighsVarType.kInteger, dtype=np.uint8),
    )
    for i in range(n):  # every bundle on exactly one broker
        idx = np.arange(i * b, (i + 1) * b, dtype=np.int32)
        h.addRow(1.0, 1.0, b, idx, np.ones(b))
    for j in range(b):  # background + load ≤ t × capacity, per resource
        idx = np.append(np.arange(j, n * b, b, dtype=np.int32), np.int32(n * b))
        for k in range(r):
            values = np.append(loads[:, k] / caps[j, k], -1.0)
            h.addRow(-inf, -background[j, k] / caps[j, k], n + 1, idx, values)
    solution = highspy.HighsSolution()
    values = np.zeros(count)
    values[start.owner + np.arange(n) * b] = 1.0
    values[-1] = start.peak
    solution.col_value = values.tolist()
    solution.value_valid = True
    h.setSolution(solution)
    h.run()
    info = h.getInfo()
    x = np.asarray(h.getSolution().col_value[: n * b]).reshape(n, b)
    owner = np.argmax(x, axis=1)
    found = Assignment(owner, usage_of(owner, loads, background, caps))
    best = found if found.peak <= start.peak else start
    return best, float(info.mip_dual_bound)
