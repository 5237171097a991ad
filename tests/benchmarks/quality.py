"""How well every strategy balances, against the optimum of each minute, printed as Markdown.

    .venv/bin/python -m tests.benchmarks.quality [--minutes 1440] [--only NAME ...]
        [--exact-every 60]       # HiGHS on one minute in N (pip install -e '.[bench]')

Every strategy — the five Pulsar shedders with their placement (LeastLongTermMessageRate, as
Pulsar wires them; AvgShedder's and TransferShedder's own destinations honoured), Danube's
rebalancer with its balanced assignment, and Fulcrum's shedder and placement — runs through
``plan_cycle`` every 5 minutes on the same worlds, its plan applied to an ownership map:

- ``trace day``: the demo cluster (8 brokers, 6 namespaces × 16 bundles) playing a day of the
  Azure Functions trace, each broker's CPU = its NAB background + its bundles' messages (as the
  simulator plays it);
- named scenarios, two hours each: scale-out 5 → 10, scale-in 10 → 8, one hot broker, a hot
  bundle bigger than a broker's fair share, diurnal drift with ±10 % noise, broker loss, one
  broker with 30 % unmovable background.

A broker's usage is the fullest of CPU and bandwidth in/out (Pulsar's default weights), a
fraction of its capacity; the optimum of each minute is the best assignment of that minute's
bundle loads given every broker's background (``tests.benchmarks.optimum``: LPT + local search,
exact by HiGHS on samples). Printed per strategy: the median and p95 of max/mean ÷ the
optimum's, the median CV, moves per hour, the cycles until max/mean is within 5 % of the optimum
("–" never), and oscillations (a bundle back on a broker it left within the hour, but for a
drain's or a lost broker's unloads).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from balancer.bundles import bundles_from_boundaries, initial_boundaries
from balancer.config import PulsarConfig
from balancer.cycle import (
    Action,
    CycleConfig,
    OwnersSink,
    Strategies,
    Verdict,
    apply_plan,
    plan_cycle,
    plan_placement,
)
from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    BundleLoad,
    MessageRates,
    ResourceUsage,
    time_average_columns,
)
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot
from tests.benchmarks import optimum

MIB = 1024 * 1024
# Unloads that are not the balancer's choice: a bundle they send back is no oscillation.
DELIBERATE = frozenset({"Drain", "BrokerLost"})
# The reference row: the optimum re-solved at every tick.
RESOLVED = "(optimum re-solved every tick)"
MINUTE = 60.0
CYCLE_MINUTES = 5
HOUR = 3600.0

STRATEGIES: dict[str, tuple[str, str]] = {
    "ThresholdShedder": ("ThresholdShedder", "LeastLongTermMessageRate"),
    "OverloadShedder": ("OverloadShedder", "LeastLongTermMessageRate"),
    "UniformLoadShedder": ("UniformLoadShedder", "LeastLongTermMessageRate"),
    "AvgShedder": ("AvgShedder", "LeastLongTermMessageRate"),
    "TransferShedder": ("TransferShedder", "LeastLongTermMessageRate"),
    "danube": ("danube", "balanced"),
    "FulcrumShedder": ("FulcrumShedder", "FulcrumPlacement"),
}


@dataclass
class World:
    """A cluster over time: brokers with capacities and backgrounds, bundles with loads.

    Attributes:
        brokers: names, in order; ``domains`` their failure domains.
        bundles: names; ``loads(minute)`` -> (bundles, 4) msgRateIn, msgRateOut (msg/s),
            msgThroughputIn, msgThroughputOut (bytes/s).
        background(minute) -> (brokers,) CPU percent that is not the bundles'.
        cpu_msgs_per_s: the message rate (in + out) that alone takes 100 % of a broker's CPU.
        bandwidth: bytes/s each way per broker.
        present(minute) -> (brokers,) whether a broker is up and reporting.
        draining(minute) -> (brokers,) whether an operator drains it.
        owners: initial owner per bundle (index, -1 for none: placed at minute 0).
        capacity: (brokers,) each broker's size, a multiple of ``cpu_msgs_per_s`` and
            ``bandwidth`` (None: all 1).
    """

    name: str
    brokers: list[str]
    bundles: list[str]
    loads: Callable[[int], np.ndarray]
    background: Callable[[int], np.ndarray]
    minutes: int
    cpu_msgs_per_s: float = 60_000.0
    bandwidth: float = 125_000_000.0
    present: Callable[[int], np.ndarray] | None = None
    draining: Callable[[int], np.ndarray] | None = None
    owners: np.ndarray | None = None
    domains: list[str] = field(default_factory=list)
    capacity: np.ndarray | None = None

    def up(self, minute: int) -> np.ndarray:
        return (
            np.ones(len(self.brokers), dtype=bool) if self.present is None else self.present(minute)
        )

    def usage(self, owner: np.ndarray, minute: int) -> tuple[np.ndarray, np.ndarray]:
        """(usage fraction per broker, the brokers that count: up and not draining)."""
        loads = self.loads(minute)
        totals = np.zeros((len(self.brokers), 3))
        owned = owner >= 0
        resources = self.resource_loads(loads)
        np.add.at(totals, owner[owned], resources[owned])
        totals[:, 0] += self.background(minute)
        usage = np.max(totals / self.caps(), axis=1)
        counting = self.up(minute).copy()
        if self.draining is not None:
            counting &= ~self.draining(minute)
        return usage, counting

    def resource_loads(self, loads: np.ndarray) -> np.ndarray:
        """(bundles, 3): CPU percent, bandwidth in, bandwidth out (bytes/s)."""
        return np.column_stack(
            [(loads[:, 0] + loads[:, 1]) / self.cpu_msgs_per_s * 100.0, loads[:, 2], loads[:, 3]]
        )

    def caps(self) -> np.ndarray:
        """(brokers, 3): CPU percent, bandwidth in and out (bytes/s) each broker can carry."""
        caps = np.tile([100.0, self.bandwidth, self.bandwidth], (len(self.brokers), 1))
        return caps if self.capacity is None else caps * self.capacity[:, None]


@dataclass
class Result:
    """One strategy on one world: per minute its highest usage and max/mean (and ``ratios``,
    max/mean ÷ the reference's, once ``reference`` is known), its CV; its moves and
    oscillations; how many cycles until within 5 % of the reference; its cycles' times."""

    strategy: str
    peaks: list[float] = field(default_factory=list)
    spreads: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    cvs: list[float] = field(default_factory=list)
    moves: int = 0
    oscillations: int = 0
    converged: int | None = None
    cycle_ms: list[float] = field(default_factory=list)
    minutes: int = 0


def optimum_of(world: World, minute: int, exact: bool) -> optimum.Assignment:
    """The best assignment of the bundles of ``minute`` over the brokers that count."""
    _, counting = world.usage(np.full(len(world.bundles), -1), minute)
    idx = np.flatnonzero(counting)
    loads = world.resource_loads(world.loads(minute))
    background = np.zeros((len(idx), 3))
    background[:, 0] = world.background(minute)[idx]
    caps = world.caps()[idx]
    best = optimum.heuristic(loads, background, caps)
    if exact:
        solved = optimum.exact(loads, background, caps)
        if solved is not None and solved[0].peak < best.peak:
            best = solved[0]
    return best


def snapshot_of(
    world: World,
    owner: np.ndarray,
    minute: int,
    averages: dict[str, Any],
    unloaded: dict[str, float],
    moves_at: list[float],
) -> ClusterSnapshot:
    now = minute * MINUTE
    loads = world.loads(minute)
    resources = world.resource_loads(loads)
    up = world.up(minute)
    draining = world.draining(minute) if world.draining is not None else np.zeros(len(up), bool)
    bg = world.background(minute)
    caps = world.caps()
    brokers = {}
    for j, name in enumerate(world.brokers):
        mine = np.flatnonzero(owner == j)
        rates = loads[mine].sum(axis=0)
        brokers[name] = BrokerLoad(
            name,
            failure_domain=world.domains[j] if world.domains else "",
            state="draining" if draining[j] else "active",
            cpu=ResourceUsage(float(bg[j] + resources[mine, 0].sum()), float(caps[j, 0])),
            bandwidth_in=ResourceUsage(float(rates[2]), float(caps[j, 1])),
            bandwidth_out=ResourceUsage(float(rates[3]), float(caps[j, 2])),
            rates=MessageRates(*(float(v) for v in rates)),
            bundles=tuple(world.bundles[i] for i in mine),
            topics=len(mine),
            # A broker that is down stopped reporting when it went down.
            reported_at=now if up[j] else averages["lastSeen"].get(name),
        )
        if up[j]:
            averages["lastSeen"][name] = now
    bundles = {
        name: BundleLoad(
            name,
            world.brokers[owner[i]] if owner[i] >= 0 else None,
            MessageRates(*averages["short"][i]),
            MessageRates(*averages["long"][i]),
            topics=1,
        )
        for i, name in enumerate(world.bundles)
    }
    return ClusterSnapshot(
        now,
        {n: b for n, b in brokers.items() if b.reported_at is not None},
        bundles,
        recently_unloaded=dict(unloaded),
        recent_moves=tuple(t for t in moves_at if t > now - HOUR),
    )


class _Owners(MutableMapping[str, str | None]):
    """The benchmark's ownership array (bundle index -> broker index, -1: unowned) seen as the
    bundle -> broker map ``OwnersSink`` applies a plan to."""

    def __init__(self, world: World, owner: np.ndarray) -> None:
        self.world, self.owner = world, owner
        self.position = {name: i for i, name in enumerate(world.bundles)}
        self.index = {name: i for i, name in enumerate(world.brokers)}

    def __getitem__(self, bundle: str) -> str | None:
        i = self.owner[self.position[bundle]]
        return self.world.brokers[i] if i >= 0 else None

    def __setitem__(self, bundle: str, broker: str | None) -> None:
        self.owner[self.position[bundle]] = -1 if broker is None else self.index[broker]

    def __delitem__(self, bundle: str) -> None:
        raise TypeError("a bundle of the world is never removed")

    def __iter__(self) -> Iterator[str]:
        return iter(self.world.bundles)

    def __len__(self) -> int:
        return len(self.world.bundles)


class _Moves(OwnersSink):
    """``apply_plan``'s in-memory sink over the benchmark's array, counting the moves applied
    and the oscillations (a bundle back on a broker it left within the hour, not because its
    broker was drained or lost: those moves are the operator's or the cluster's)."""

    def __init__(
        self,
        owners: _Owners,
        now: float,
        unloaded: dict[str, float],
        moves_at: list[float],
        left: dict[str, list[tuple[str, float]]],
        why: dict[str, str],
        result: Result,
    ) -> None:
        super().__init__(owners, unloaded, now)
        self.moves_at, self.left, self.why, self.result = moves_at, left, why, result

    def unload(self, action: Action) -> Verdict:
        verdict = super().unload(action)
        if verdict is None:
            assert action.source is not None
            self.moves_at.append(self.now)
            self.left.setdefault(action.target, []).append((action.source, self.now))
            self.result.moves += 1
            self.why[action.target] = str(action.reason)
        return verdict

    def place(self, action: Action, unload: Action | None) -> Verdict:
        verdict = super().place(action, unload)
        if (
            verdict is None
            and self.why.get(action.target) not in DELIBERATE
            and any(
                b == action.destination and self.now - t < HOUR
                for b, t in self.left.get(action.target, ())
            )
        ):
            self.result.oscillations += 1
        return verdict


def run(world: World, strategy: str, parameters: dict[str, Any] | None = None) -> Result:
    """``strategy`` (a key of STRATEGIES) on ``world``, every 5 minutes; ``parameters``: Pulsar
    and Fulcrum keys (``{"fulcrumMinGainPercentage": 2}``) over the defaults."""
    shedder, placement = STRATEGIES[strategy]
    config = CycleConfig(
        strategies=Strategies(shedder=shedder, placement=placement),
        pulsar=PulsarConfig.from_keys(parameters or {}),
        safety=SafetyConfig(bundle_cool_down_s=60.0, broker_timeout_s=120.0),
    )
    n = len(world.bundles)
    owner = (world.owners if world.owners is not None else np.full(n, -1)).copy()
    averages: dict[str, Any] = {
        "short": np.zeros((n, 4)),
        "long": np.zeros((n, 4)),
        "samples": np.zeros(n, dtype=np.int64),
        "lastSeen": {},
    }
    state: dict[str, Any] = {}
    unloaded: dict[str, float] = {}
    moves_at: list[float] = []
    left: dict[str, list[tuple[str, float]]] = {}
    why: dict[str, str] = {}  # each bundle's last unload's reason
    result = Result(strategy, minutes=world.minutes)
    owners = _Owners(world, owner)
    for minute in range(world.minutes):
        sample = world.loads(minute)
        averages["short"] = time_average_columns(
            averages["short"], sample, averages["samples"], SHORT_TERM_SAMPLES
        )
        averages["long"] = time_average_columns(
            averages["long"], sample, averages["samples"], LONG_TERM_SAMPLES
        )
        averages["samples"] = averages["samples"] + 1
        snap = None
        if minute == 0 and (owner < 0).any():  # the clients' first lookups
            snap = snapshot_of(world, owner, minute, averages, unloaded, moves_at)
            plan = plan_placement(snap, config, state, list(snap.unowned))
            state = plan.state
            apply_plan(plan, _Moves(owners, 0.0, unloaded, moves_at, left, why, result))
        usage, counting = world.usage(owner, minute)
        used = usage[counting]
        mean = float(used.mean()) if len(used) else 0.0
        result.peaks.append(float(used.max()) if len(used) else 0.0)
        result.spreads.append(float(used.max()) / mean if mean > 0 else 0.0)
        result.cvs.append(float(used.std()) / mean if mean > 0 else 0.0)
        if minute % CYCLE_MINUTES != CYCLE_MINUTES - 1:
            continue
        now = minute * MINUTE
        snap = snapshot_of(world, owner, minute, averages, unloaded, moves_at)
        started = time.perf_counter()
        plan = plan_cycle(snap, config, state, now)
        result.cycle_ms.append((time.perf_counter() - started) * 1000)
        state = plan.state
        sink = _Moves(owners, now, unloaded, moves_at, left, why, result)
        apply_plan(plan, sink)
    return result


# ---------------------------------------------------------------------------------------------
# Worlds


def trace_day(minutes: int) -> World:
    from balancer.simulator.layout import DEMO
    from balancer.simulator.model import (
        BACKGROUND_CPU_SHARE,
        BundleMap,
        background_cpu,
        bundle_stats,
    )
    from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
    from balancer.simulator.workload import build_workload

    traces = default_traces_dir()
    workload = build_workload(DEMO, load_functions(traces))
    names = [
        b.name
        for ns in DEMO.namespaces
        for b in bundles_from_boundaries(ns, initial_boundaries(DEMO.bundles_per_namespace))
    ]
    bundle_map = BundleMap.build(workload, names)
    order = list(bundle_map.bundle_names)
    keys = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
    table = np.zeros((minutes, len(order), 4))
    for m in range(minutes):
        stats = bundle_stats(workload, bundle_map, m)
        table[m] = [[stats[b][k] for k in keys] for b in order]
    cpu = (
        np.asarray(
            [
                [background_cpu(load_cpu_series(traces, s.cpu_series), m) for s in DEMO.brokers]
                for m in range(minutes)
            ]
        )
        * BACKGROUND_CPU_SHARE
    )
    spec = DEMO.brokers[0]
    return World(
        "trace day",
        [b.name for b in DEMO.brokers],
        order,
        lambda m: table[m],
        lambda m: cpu[m],
        minutes,
        cpu_msgs_per_s=spec.cpu_msgs_per_s,
        bandwidth=spec.bandwidth_bytes_per_s,
        domains=[b.failure_domain for b in DEMO.brokers],
    )


def _static(
    name: str,
    brokers: int,
    sizes: np.ndarray,
    owners: np.ndarray,
    background: np.ndarray,
    minutes: int = 120,
    **kw: Any,
) -> World:
    """Bundles of constant load: ``sizes`` in CPU percent (msg/s at 600 msg/s per percent; a
    quarter as many bytes/s as a 1 Gbit/s NIC's percent)."""
    msgs = sizes * 600.0 / 2
    throughput = sizes * 125_000_000.0 / 100 / 4
    table = np.column_stack([msgs, msgs, throughput, throughput])
    return World(
        name,
        [f"b{j:02d}" for j in range(brokers)],
        [f"t/ns{i % 8}/0x{i:08x}_0x{i + 1:08x}" for i in range(len(sizes))],
        kw.pop("loads", lambda m: table),
        lambda m: background,
        minutes,
        owners=owners,
        **kw,
    )


def scenarios() -> list[World]:
    rng = np.random.default_rng(7)
    out = []
    # Scale-out 5 -> 10: five brokers at 70 % with eight bundles each, five new ones.
    out.append(
        _static(
            "scale-out 5 → 10",
            10,
            np.full(40, 8.5),
            np.repeat(np.arange(5), 8),
            np.concatenate([np.full(5, 2.0), np.full(5, 2.0)]),
        )
    )
    # Scale-in 10 -> 8: ten balanced brokers, two drained from minute 10.
    out.append(
        _static(
            "scale-in 10 → 8",
            10,
            rng.uniform(3, 7, 60),
            np.arange(60) % 10,
            np.full(10, 5.0),
            draining=lambda m: np.asarray([m >= 10 and j >= 8 for j in range(10)]),
        )
    )
    # One hot broker: b00 at ~90 % with four big bundles (10k msg/s each).
    sizes = np.concatenate([np.full(4, 20.0), rng.uniform(2, 4, 24)])
    owners = np.concatenate([np.zeros(4, dtype=np.int64), np.arange(24) % 3 + 1])
    out.append(_static("one hot broker", 4, sizes, owners, np.full(4, 5.0)))
    # A hot bundle bigger than a broker's fair share.
    sizes = np.concatenate([[60.0], rng.uniform(2, 5, 30)])
    owners = np.concatenate([[0], np.arange(30) % 4])
    out.append(_static("hot bundle > fair share", 4, sizes, owners, np.full(4, 5.0)))
    # Diurnal drift with ±10 % noise: every bundle follows a day curve (±60 %) of its own phase.
    base = rng.uniform(1, 4, 48)
    phase = rng.uniform(0, 2 * math.pi, 48)
    noise = rng.uniform(0.9, 1.1, (24 * 60, 48))

    def drift(days: int) -> Callable[[int], np.ndarray]:
        def loads(m: int) -> np.ndarray:
            sizes = base * (1 + 0.6 * np.sin(2 * math.pi * m / 1440 * days + phase)) * noise[m]
            msgs = sizes * 300.0
            throughput = sizes * 312_500.0
            return np.column_stack([msgs, msgs, throughput, throughput])

        return loads

    # ... over a day, and twelve times as fast (a day every two hours).
    for name, days, minutes in (
        ("diurnal drift ±10 %", 1, 1440),
        ("fast drift ±10 % (a day every 2 hours)", 12, 120),
    ):
        out.append(
            _static(
                name,
                6,
                base,
                np.arange(48) % 6,
                np.full(6, 5.0),
                minutes=minutes,
                loads=drift(days),
            )
        )
    # Broker loss: b03 stops reporting at minute 10.
    out.append(
        _static(
            "broker loss",
            6,
            rng.uniform(2, 6, 48),
            np.arange(48) % 6,
            np.full(6, 5.0),
            present=lambda m: np.asarray([not (j == 3 and m >= 10) for j in range(6)]),
        )
    )
    # One broker with 30 % unmovable background.
    out.append(
        _static(
            "30 % background on one broker",
            6,
            rng.uniform(2, 6, 48),
            np.arange(48) % 6,
            np.concatenate([[30.0], np.full(5, 2.0)]),
        )
    )
    return out


def resolved_every_tick(world: World, optima: list[optimum.Assignment]) -> Result:
    """What a 5-minute cycle could reach at best: at each tick, the optimum of that minute
    (perfect information, unlimited moves), held until the next tick."""
    result = Result(RESOLVED, minutes=world.minutes)
    n = len(world.bundles)
    owner = (world.owners if world.owners is not None else np.full(n, -1)).copy()
    for minute in range(world.minutes):
        if minute == 0 or minute % CYCLE_MINUTES == CYCLE_MINUTES - 1:
            _, counting = world.usage(owner, minute)
            best = np.flatnonzero(counting)[optima[minute].owner]
            # A move: an owned bundle given another broker (placing an unowned one is not).
            result.moves += int(np.count_nonzero((owner >= 0) & (best != owner)))
            owner = best
        usage, counting = world.usage(owner, minute)
        used = usage[counting]
        mean = float(used.mean()) if len(used) else 0.0
        result.peaks.append(float(used.max()) if len(used) else 0.0)
        result.spreads.append(float(used.max()) / mean if mean > 0 else 0.0)
        result.cvs.append(float(used.std()) / mean if mean > 0 else 0.0)
    return result


def reference(optima: list[optimum.Assignment], results: list[Result]) -> list[float]:
    """Per minute, the max/mean of the best known assignment: the optimum's, or a strategy's
    whose highest usage is lower still (the heuristic is not always optimal), so that the
    reference is never worse than any strategy's assignment. Fills each result's ratios and
    cycles to converge."""
    out = []
    for minute, best in enumerate(optima):
        peak, spread = best.peak, best.max_over_mean
        for r in results:
            if r.peaks[minute] < peak - 1e-12:
                peak, spread = r.peaks[minute], r.spreads[minute]
        out.append(spread)
    for r in results:
        r.ratios = [s / ref if ref > 0 else 1.0 for s, ref in zip(r.spreads, out, strict=True)]
        r.converged = next(
            (m // CYCLE_MINUTES for m, ratio in enumerate(r.ratios) if ratio <= 1.05), None
        )
    return out


def table(
    world: World,
    strategies: list[str],
    exact_every: int,
    parameters: dict[str, Any] | None = None,
) -> list[Result]:
    started = time.perf_counter()
    optima = [
        optimum_of(world, m, exact_every > 0 and m % exact_every == 0) for m in range(world.minutes)
    ]
    solved = time.perf_counter() - started
    results = [run(world, s, parameters) for s in strategies]
    results.append(resolved_every_tick(world, optima))
    absolute = statistics.median(reference(optima, results))
    print(
        f"\n### {world.name} ({len(world.brokers)} brokers, {len(world.bundles)} bundles, "
        f"{world.minutes} min; optimum max/mean median {absolute:.2f}, solved in {solved:.1f} s)\n"
    )
    print(
        "| strategy | median max/mean ÷ opt | p95 ÷ opt | median CV | moves/hour "
        "| cycles to ≤ 1.05× opt | oscillations | cycle (ms, median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        hours = r.minutes / 60
        ratios = sorted(r.ratios)
        p95 = ratios[max(0, math.ceil(0.95 * len(ratios)) - 1)]
        print(
            f"| {r.strategy} | {statistics.median(r.ratios):.3f} | {p95:.3f} "
            f"| {statistics.median(r.cvs):.3f} | {r.moves / hours:.1f} "
            f"| {'–' if r.converged is None else r.converged} | {r.oscillations} "
            f"| {statistics.median(r.cycle_ms) if r.cycle_ms else 0:.1f} |"
        )
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=int, default=1440)
    parser.add_argument("--only", nargs="*", default=None, help="world names to run")
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--exact-every", type=int, default=60)
    parser.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="Pulsar or Fulcrum parameters over the defaults, e.g. fulcrumMinGainPercentage=2",
    )
    args = parser.parse_args(argv)
    parameters = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    worlds = [trace_day(args.minutes), *scenarios()]
    for world in worlds:
        if args.only and not any(o.lower() in world.name.lower() for o in args.only):
            continue
        table(world, args.strategies, args.exact_every, parameters)


if __name__ == "__main__":
    main()
