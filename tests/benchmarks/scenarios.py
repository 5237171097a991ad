"""Generated clusters for the quality benchmark: families of worlds drawn at any size from a
seed, so that no constant of a strategy is tuned to one world (issue 24, item 2).

    .venv/bin/python -m tests.benchmarks.scenarios [--sizes 4x40 20x400 ...] [--seeds 5]
        [--families scale-out-x2 ...] [--strategies FulcrumShedder ThresholdShedder ...]

Every family builds a ``quality.World`` of ``brokers`` × ``bundles`` from ``seed``:

- ``scale-out-x1.5``, ``-x2``, ``-x4``: the bundles on the first brokers (a 1/1.5, 1/2, 1/4
  share), the others joined empty at minute 0;
- ``scale-in``: a quarter of the brokers drained from minute 10;
- ``hot-broker``: one broker owns three times its share of the bundles;
- ``background``: a tenth of the brokers (at least one) with 25–40 % CPU no move can take away;
- ``diurnal``: every bundle follows a day curve (±60 %, ±10 % noise a minute) of its own phase,
  over a window of the day;
- ``drift``: every bundle's load a random walk (±3 % a minute);
- ``bursty``: one bundle in twenty at five times its load for 10–20 minutes, at random times;
- ``heterogeneous``: brokers of sizes ½, 1 and 2, each given the same number of bundles.

Bundle loads are lognormal (σ 0.8: a few large, most small), scaled so that the cluster's mean
CPU is 45–60 % of its capacity; bandwidth follows each bundle's message rate with a per-bundle
bytes-per-message between 0.5 and 2 KiB, so CPU or bandwidth may be the fullest resource.

Printed per family and size: over the seeds, the median and p95 of max/mean ÷ the per-cycle
optimum (at every cycle from the third on: the first two are the event's), the cycles until
CV < 0.10 (scale-out), moves per hour next to the fewest that reach the goal (``Fewest``: a
greedy reference that moves only what brings every broker within 1.05× the cycle's optimum), and
oscillations (a bundle back on a broker it left within the hour).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tests.benchmarks import optimum, quality

FAMILIES = (
    "scale-out-x1.5",
    "scale-out-x2",
    "scale-out-x4",
    "scale-in",
    "hot-broker",
    "background",
    "diurnal",
    "drift",
    "bursty",
    "heterogeneous",
)
SIZES = ((4, 40), (20, 400), (50, 2_000), (200, 20_000))
MINUTES = 120
# Cycles after the event that are its own: not counted in the ratios (goal: scale-out within 2).
WARM_UP_CYCLES = 2
# The goal: max/mean within this factor of the per-cycle optimum (what ``Fewest`` moves for).
GOAL = 1.05
CPU_MSGS_PER_S = 60_000.0
BANDWIDTH = 125_000_000.0  # bytes/s: a 1 Gbit/s NIC


def _sizes(rng: np.random.Generator, bundles: int, brokers: float) -> np.ndarray:
    """Lognormal bundle loads (CPU percent of a size-1 broker), their sum a mean CPU of 45–60 %
    over ``brokers`` size-1 brokers."""
    raw = rng.lognormal(0.0, 0.8, bundles)
    return raw / raw.sum() * brokers * rng.uniform(40.0, 55.0)


def _table(rng: np.random.Generator, sizes: np.ndarray) -> np.ndarray:
    """(bundles, 4) msg/s in and out, bytes/s in and out for loads in CPU percent."""
    msgs = sizes / 100.0 * CPU_MSGS_PER_S / 2
    per_msg = rng.uniform(512.0, 2048.0, len(sizes))
    return np.column_stack([msgs, msgs, msgs * per_msg, msgs * per_msg])


def world(family: str, brokers: int, bundles: int, seed: int, minutes: int = MINUTES):
    """The ``family`` world of ``brokers`` × ``bundles`` drawn from ``seed``.

    Raises:
        ValueError: an unknown family.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    rng = np.random.default_rng([seed, brokers, bundles, FAMILIES.index(family)])
    names = [f"b{j:03d}" for j in range(brokers)]
    bundle_names = [f"t/ns{i % 97}/0x{i:08x}_0x{i + 1:08x}" for i in range(bundles)]
    background = rng.uniform(1.0, 5.0, brokers)
    capacity = None
    present: Callable[[int], np.ndarray] | None = None
    draining: Callable[[int], np.ndarray] | None = None
    serving = brokers
    owners = rng.permutation(bundles) % brokers
    if family.startswith("scale-out"):
        factor = float(family.rsplit("x", 1)[1])
        serving = max(1, round(brokers / factor))
        owners = rng.permutation(bundles) % serving
    elif family == "scale-in":
        leaving = max(1, brokers // 4)
        draining = _from(minute=10, brokers=brokers, chosen=np.arange(brokers - leaving, brokers))
        serving = brokers - leaving
    elif family == "hot-broker":
        weights = np.ones(brokers)
        weights[0] = 3.0
        owners = rng.choice(brokers, bundles, p=weights / weights.sum())
    elif family == "background":
        chosen = rng.choice(brokers, max(1, brokers // 10), replace=False)
        background[chosen] = rng.uniform(25.0, 40.0, len(chosen))
    elif family == "heterogeneous":
        capacity = rng.choice([0.5, 1.0, 2.0], brokers)
        capacity[:3] = [0.5, 1.0, 2.0][: min(3, brokers)]
        serving = float(capacity.sum())
    sizes = _sizes(rng, bundles, serving)
    table = _table(rng, sizes)
    loads = _loads(family, rng, table, minutes)
    return quality.World(
        f"{family} {brokers}×{bundles} seed {seed}",
        names,
        bundle_names,
        loads,
        lambda m: background,
        minutes,
        cpu_msgs_per_s=CPU_MSGS_PER_S,
        bandwidth=BANDWIDTH,
        present=present,
        draining=draining,
        owners=owners.astype(np.int64),
        domains=[f"domain-{j % 5}" for j in range(brokers)],
        capacity=capacity,
    )


def _from(minute: int, brokers: int, chosen: np.ndarray) -> Callable[[int], np.ndarray]:
    """Whether each broker is in ``chosen`` from ``minute`` on."""
    mask = np.zeros(brokers, dtype=bool)
    mask[chosen] = True
    none = np.zeros(brokers, dtype=bool)
    return lambda m: mask if m >= minute else none


def _loads(
    family: str, rng: np.random.Generator, table: np.ndarray, minutes: int
) -> Callable[[int], np.ndarray]:
    """Each minute's (bundles, 4) loads: constant, or moving as the family has it."""
    n = len(table)
    if family == "diurnal":
        phase = rng.uniform(0, 2 * math.pi, n)
        noise = rng.uniform(0.9, 1.1, (minutes, n))
        start = rng.uniform(0, 1440)  # the window's place in the day
        curve = [
            (1 + 0.6 * np.sin(2 * math.pi * (start + m) / 1440 + phase)) * noise[m]
            for m in range(minutes)
        ]
        return lambda m: table * curve[m][:, None]
    if family == "drift":
        steps = rng.uniform(-0.03, 0.03, (minutes, n))
        walk = np.exp(np.cumsum(np.log1p(steps), axis=0))
        return lambda m: table * walk[m][:, None]
    if family == "bursty":
        factor = np.ones((minutes, n))
        for i in rng.choice(n, max(1, n // 20), replace=False):
            start = int(rng.integers(0, minutes))
            factor[start : start + int(rng.integers(10, 21)), i] = 5.0
        return lambda m: table * factor[m][:, None]
    return lambda m: table


@dataclass
class Outcome:
    """One strategy on the worlds of one family and size, over the seeds."""

    family: str
    size: tuple[int, int]
    strategy: str
    ratios: list[float] = field(default_factory=list)
    moves_per_hour: list[float] = field(default_factory=list)
    fewest_per_hour: list[float] = field(default_factory=list)
    oscillations: int = 0
    to_cv: list[int | None] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios) if self.ratios else math.nan

    @property
    def p95(self) -> float:
        ordered = sorted(self.ratios)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)] if ordered else math.nan


def cycle_minutes(minutes: int) -> list[int]:
    """The minutes at which the cycle runs (every ``CYCLE_MINUTES``)."""
    c = quality.CYCLE_MINUTES
    return [m for m in range(minutes) if m % c == c - 1]


def measure(
    family: str,
    brokers: int,
    bundles: int,
    seeds: list[int],
    strategies: list[str],
    *,
    minutes: int = MINUTES,
    iterations: int | None = None,
) -> list[Outcome]:
    """Every strategy on the family's world for each seed, against the per-cycle optimum: the
    best assignment of each cycle minute's loads (``optimum.heuristic``, ``iterations`` of
    local search), held until the next cycle as a strategy's plan is — or a strategy's own
    assignment, when its highest usage is lower. Counted from ``WARM_UP_CYCLES`` cycles after
    the event (minute 0, or 10 for scale-in). ``iterations`` defaults to 300, 30 above 2,000
    bundles."""
    outcomes = [Outcome(family, (brokers, bundles), s) for s in strategies]
    cycles = cycle_minutes(minutes)
    if iterations is None:
        # The local search's passes: a minute of them per optimum above a few thousand bundles,
        # where LPT alone is within a bundle of the best.
        iterations = 300 if bundles <= 2_000 else 30
    for seed in seeds:
        w = world(family, brokers, bundles, seed, minutes)
        results = [quality.run(w, s) for s in strategies]
        event = 10 if family == "scale-in" else 0
        first = event + WARM_UP_CYCLES * quality.CYCLE_MINUTES
        held = None
        fewest = Fewest(w)
        for m in range(minutes):
            if held is None or m - 1 in cycles:
                # Solved with the loads its cycle saw (the minute before), held from now on.
                held = _optimum(w, max(0, m - 1), iterations)
                if m - 1 in cycles:
                    usage, counting = w.usage(held.owner_of(w, m - 1), m - 1)
                    fewest.cycle(m - 1, GOAL * float(usage[counting].max()))
            if m < first:
                continue
            usage, counting = w.usage(held.owner_of(w, m), m)
            used = usage[counting]
            peak, spread = float(used.max()), float(used.max()) / float(used.mean())
            for r in results:
                if r.peaks[m] < peak - 1e-12:
                    peak, spread = r.peaks[m], r.spreads[m]
            for o, r in zip(outcomes, results, strict=True):
                o.ratios.append(r.spreads[m] / spread if spread > 0 else 1.0)
        for o, r in zip(outcomes, results, strict=True):
            o.moves_per_hour.append(r.moves / (minutes / 60))
            o.fewest_per_hour.append(fewest.moves / (minutes / 60))
            o.oscillations += r.oscillations
            o.cycle_ms += r.cycle_ms
            o.to_cv.append(
                next(
                    (k for k, m in enumerate(cycles) if m >= event and r.cvs[m] < 0.10),
                    None,
                )
            )
    return outcomes


class Fewest:
    """A reference for moves: from its own assignment (the world's at minute 0), each cycle
    moves only what it must to bring every broker that counts within ``target`` (``GOAL`` × the
    cycle's optimum): first every bundle on a broker that does not count (drained, down) or on
    none, largest first onto the broker it leaves least full; then, while the fullest broker is
    above the target, its largest bundle that fits on the least full broker within the target.
    Largest first is the fewest moves that take a broker down by a given load, so its count is
    an estimate (greedy, with the loads of the cycle's own minute, which a strategy sees only
    as averages) of the fewest moves that reach the goal; it stops where no single move fits.
    """

    def __init__(self, w: quality.World) -> None:
        self.w = w
        n = len(w.bundles)
        self.owner = (w.owners if w.owners is not None else np.full(n, -1)).copy()
        self.moves = 0

    def cycle(self, minute: int, target: float) -> None:
        w = self.w
        loads = w.resource_loads(w.loads(minute))
        caps = w.caps()
        _, counting = w.usage(self.owner, minute)
        total = np.zeros((len(w.brokers), 3))
        total[:, 0] = w.background(minute)
        placed = (self.owner >= 0) & counting[np.maximum(self.owner, 0)]
        np.add.at(total, self.owner[placed], loads[placed])
        size = np.max(loads / caps.min(axis=0), axis=1)
        homes = np.flatnonzero(counting)
        if not len(homes):
            return
        for i in np.flatnonzero(~placed)[np.argsort(-size[~placed], kind="stable")].tolist():
            after = np.max((total[homes] + loads[i]) / caps[homes], axis=1)
            j = int(homes[int(np.argmin(after))])
            total[j] += loads[i]
            self.owner[i] = j
            self.moves += 1
        while True:
            usage = np.max(total[homes] / caps[homes], axis=1)
            hottest = int(homes[int(np.argmax(usage))])
            if usage.max() <= target:
                return
            coolest = int(homes[int(np.argmin(usage))])
            mine = np.flatnonzero(self.owner == hottest)
            fits = np.max((total[coolest] + loads[mine]) / caps[coolest], axis=1) <= target
            if not fits.any():
                return  # no single move reaches the goal from here
            i = int(mine[fits][int(np.argmax(size[mine][fits]))])
            total[hottest] -= loads[i]
            total[coolest] += loads[i]
            self.owner[i] = coolest
            self.moves += 1


@dataclass
class _Held:
    """An optimum of the brokers that counted when it was solved (``idx``), as owners."""

    owner: np.ndarray
    idx: np.ndarray

    def owner_of(self, w: quality.World, minute: int) -> np.ndarray:
        return self.idx[self.owner]


def _optimum(w: quality.World, minute: int, iterations: int) -> _Held:
    _, counting = w.usage(np.full(len(w.bundles), -1), minute)
    idx = np.flatnonzero(counting)
    loads = w.resource_loads(w.loads(minute))
    background = np.zeros((len(idx), 3))
    background[:, 0] = w.background(minute)[idx]
    best = optimum.heuristic(loads, background, w.caps()[idx], iterations=iterations)
    return _Held(best.owner, idx)


def _parse_size(text: str) -> tuple[int, int]:
    brokers, bundles = text.lower().split("x")
    return int(brokers), int(bundles)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="*", default=[f"{b}x{n}" for b, n in SIZES[:3]])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--strategies", nargs="*", default=["FulcrumShedder", "ThresholdShedder"])
    parser.add_argument("--minutes", type=int, default=MINUTES)
    args = parser.parse_args(argv)
    print(
        "| family | brokers × bundles | strategy | median ÷ opt | p95 ÷ opt | moves/hour (median)"
        " | fewest moves/hour (median) | cycles to CV < 0.10 (max) | oscillations"
        " | cycle ms (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for size in map(_parse_size, args.sizes):
        for family in args.families:
            started = time.perf_counter()
            outcomes = measure(
                family, *size, list(range(args.seeds)), args.strategies, minutes=args.minutes
            )
            for o in outcomes:
                reached = [c for c in o.to_cv if c is not None]
                to_cv = (
                    "–" if len(reached) < len(o.to_cv) else str(max(reached)) if reached else "–"
                )
                print(
                    f"| {family} | {size[0]}×{size[1]} | {o.strategy} | {o.median:.3f} "
                    f"| {o.p95:.3f} | {statistics.median(o.moves_per_hour):.0f} "
                    f"| {statistics.median(o.fewest_per_hour):.0f} | {to_cv} "
                    f"| {o.oscillations} "
                    f"| {statistics.median(o.cycle_ms) if o.cycle_ms else 0:.1f} |",
                    flush=True,
                )
            del started


if __name__ == "__main__":
    main()
