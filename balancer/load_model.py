"""Fulcrum's load model: each broker's usage as an unmovable background plus the load of the
bundles it owns, so that the usage after any move can be predicted.

- A bundle's load, per resource (the five of Pulsar's load report): CPU = its short-term
  message rate (msgRateIn + msgRateOut, msg/s) × the CPU one message costs; bandwidth in/out =
  its short-term throughput in/out (bytes/s); memory and direct memory: none (a broker's heap
  does not follow a bundle quickly).
- The CPU one message costs (percent of one core per msg/s) is estimated from the reports: the
  least ``cpu usage / msg rate`` over the brokers that report messages — the broker with the
  least CPU per message has the least unexplained CPU, so this is the lower envelope of the
  cost (an upper bound of the true cost that is exact when one broker has no background).
- A broker's background, per resource: its reported usage less its bundles' load (never below
  0); what no move can take away (the NAB series in the simulator, a broker's own work in a
  real cluster).
- A broker's usage: Pulsar's weighted max over the five resources (``BrokerLoad.
  weighted_max_usage``, in float64), a fraction of its capacity: what the console's CV and
  max/mean measure.
- Readings that cannot be true are quarantined, per broker and resource (``implausible``): a
  usage more than ``IMPLAUSIBLE_OVER`` times its limit (a CPU at 208 % of what the broker has;
  a CPU reported in % × cores against a 100 % limit), a usage without a limit (0 or −1: an
  unknown NIC speed, which Pulsar's ``loadBalancerOverrideBrokerNicSpeedGbps`` exists for), a
  usage that is not a number or below 0. The model keeps what it can still trust — that
  resource's load from the broker's bundles — and drops the rest: no background for it, no
  say in the CPU one message costs, so that it never sets the level for the cluster.
- Readings the broker's last report contradicts are held back for one report
  (``LoadModel.against_last``): a figure missing from this report, and a background that moved
  by more than ``JUMP_FRACTION`` of its limit (a change no load explains); the last figures
  stand in for them until a second report says the same.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from balancer.load import ResourceWeights
from balancer.snapshot import RESOURCES, ClusterSnapshot

CPU, MEMORY, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT = range(5)
# A reading above its limit by more than this factor cannot be true: a resource holds at most
# its capacity (a quarter more covers a sample taken across a burst of a busy broker).
IMPLAUSIBLE_OVER: Final = 1.25
# A background that moves by more than this fraction of its limit from one report to the next
# is held back for one report (``LoadModel.against_last``): half a broker's capacity appearing
# or vanishing between two reports, with its bundles' load unchanged, is more often a bad
# reading than a real change, and a real one is believed a report later.
JUMP_FRACTION: Final = 0.5


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A resource of a broker whose reading the model does not trust: ``resource`` a name of
    ``RESOURCES``; ``usage`` and ``limit`` as reported, in the resource's unit; ``reason`` in
    words, with the numbers."""

    broker: str
    resource: str
    usage: float
    limit: float
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "broker": self.broker,
            "resource": self.resource,
            "usage": self.usage,
            "limit": self.limit,
            "reason": self.reason,
        }


def implausible(
    names: Sequence[str], usage: np.ndarray, limits: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, tuple[Quarantine, ...]]:
    """The readings of ``names`` that cannot be true, among the resources that count (weight >
    0): a usage over ``IMPLAUSIBLE_OVER`` × its limit, a usage with a limit of 0 or less (an
    unknown capacity), a usage that is not a finite number ≥ 0.

    Args:
        usage, limits: (brokers, 5) as reported, ``RESOURCES`` order, in ``names`` order.
        weights: (5,) Pulsar's resource weights.

    Returns:
        (brokers, 5) the quarantined mask, and each quarantined reading with its reason.

    Source: Fulcrum (issue 24); Pulsar overrides an unknown NIC speed with
    ``loadBalancerOverrideBrokerNicSpeedGbps`` rather than trusting it.
    """
    counts = np.broadcast_to(weights > 0, usage.shape)
    bad_number = ~np.isfinite(usage) | (usage < 0)
    no_limit = ~bad_number & (usage > 0) & ~(limits > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        over = ~bad_number & (limits > 0) & (usage > limits * IMPLAUSIBLE_OVER)
    mask = counts & (bad_number | no_limit | over)
    found = []
    for i, r in zip(*np.nonzero(mask), strict=True):
        used, limit, resource = float(usage[i, r]), float(limits[i, r]), RESOURCES[r]
        if bad_number[i, r]:
            reason = f"{resource} usage {used} is not a reading (not a number, or below 0)"
        elif no_limit[i, r]:
            reason = (
                f"{resource} limit {limit:g} is unknown (0 or −1), usage {used:g}: its "
                "capacity cannot be told (set it, e.g. Pulsar's "
                "loadBalancerOverrideBrokerNicSpeedGbps for a NIC)"
            )
        else:
            reason = (
                f"{resource} usage {used / limit:.0%} of its limit ({used:g} of {limit:g}) is "
                f"more than {IMPLAUSIBLE_OVER:.2f}× what it can hold (a CPU in % × cores?)"
            )
        found.append(Quarantine(names[i], resource, used, limit, reason))
    return mask, tuple(found)


def cpu_per_msg(
    snapshot: ClusterSnapshot, brokers: Sequence[str], distrusted: frozenset[str] = frozenset()
) -> float:
    """The CPU one msg/s costs (percent of one core per msg/s): the least ``cpu usage / msg
    rate`` over ``brokers`` that report messages (the report's own msgRateIn + msgRateOut, of
    the same instant as its CPU), but those whose CPU reading is ``distrusted`` or missing
    (no limit); 0 when none does."""
    best = np.inf
    for name in brokers:
        broker = snapshot.brokers[name]
        if name in distrusted or not math.isfinite(broker.cpu.usage) or broker.cpu.limit <= 0:
            continue  # no CPU reading (missing, or not trusted): it says nothing of the cost
        if broker.rates.msg_rate > 0:
            best = min(best, broker.cpu.usage / broker.rates.msg_rate)
    return 0.0 if best == np.inf else float(best)


def cpu_per_byte(
    snapshot: ClusterSnapshot, brokers: Sequence[str], distrusted: frozenset[str] = frozenset()
) -> float:
    """The CPU one byte/s costs (percent of one core per byte/s), for bundles that report no
    message rate: the least ``cpu usage / throughput`` (in + out) over ``brokers`` that
    report throughput, but those whose CPU reading is ``distrusted``; 0 when none does."""
    best = np.inf
    for name in brokers:
        broker = snapshot.brokers[name]
        if name in distrusted or not math.isfinite(broker.cpu.usage) or broker.cpu.limit <= 0:
            continue
        if broker.rates.throughput > 0:
            best = min(best, broker.cpu.usage / broker.rates.throughput)
    return 0.0 if best == np.inf else float(best)


def trusted_costs(snapshot: ClusterSnapshot, brokers: Sequence[str]) -> tuple[float, float]:
    """(``cpu_per_msg``, ``cpu_per_byte``) over ``brokers`` but those whose CPU reading is
    quarantined (``implausible``): percent of one core per msg/s, and per byte/s."""
    names = tuple(sorted(brokers))
    if not names:
        return 0.0, 0.0
    every_usage, every_limit = snapshot.resource_arrays()
    order = {name: i for i, name in enumerate(snapshot.brokers)}
    picked = np.asarray([order[n] for n in names], dtype=np.int64)
    cpu_only = np.asarray([1.0, 0.0, 0.0, 0.0, 0.0])  # the costs are CPU's alone
    _, quarantined = implausible(names, every_usage[picked], every_limit[picked], cpu_only)
    off = frozenset(q.broker for q in quarantined if q.resource == "cpu")
    return cpu_per_msg(snapshot, names, off), cpu_per_byte(snapshot, names, off)


def bundle_loads(short_term: np.ndarray, cost: float, cost_per_byte: float = 0.0) -> np.ndarray:
    """(n, 5) bundles' load per resource from their (n, 4) short-term rates (msg/s in and
    out, bytes/s in and out, ``RATE_FIELDS`` order): CPU = msg rate × ``cost`` (percent of one
    core per msg/s) — for a bundle that reports no message rate, its throughput ×
    ``cost_per_byte`` —, bandwidth in/out = throughput in/out, no memory."""
    rates = np.asarray(short_term, dtype=np.float64).reshape(-1, 4)
    out = np.zeros((len(rates), 5), dtype=np.float64)
    messages = rates[:, 0] + rates[:, 1]
    out[:, CPU] = np.where(
        messages > 0, messages * cost, (rates[:, 2] + rates[:, 3]) * cost_per_byte
    )
    out[:, BANDWIDTH_IN] = rates[:, 2]
    out[:, BANDWIDTH_OUT] = rates[:, 3]
    return out


@dataclass(frozen=True)
class LoadModel:
    """The modelled brokers' usage, split into background and bundle load.

    Attributes:
        names: the modelled brokers, in name order; ``index`` maps a name to its position.
        limits: (brokers, 5) capacity per resource, in the resource's unit (cpu percent of one
            core, memory MiB, bandwidth bytes/s), in ``RESOURCES`` order.
        background: (brokers, 5) usage no move can take away.
        load: (brokers, 5) the load of the bundles each broker owns.
        weights: (5,) Pulsar's resource weights.
        cost: the CPU one msg/s costs (percent of one core per msg/s).
        rows: the table rows of the bundles the modelled brokers own.
        owner: each row's broker (a position in ``names``).
        bundle_load: (rows, 5) each bundle's load per resource.
        cost_per_byte: the CPU one byte/s costs, for bundles without a message rate.
        quarantined: the readings not trusted (``implausible``): their background is 0, so
            the broker's usage of that resource is its bundles' load alone.
    """

    names: tuple[str, ...]
    index: dict[str, int]
    limits: np.ndarray
    background: np.ndarray
    load: np.ndarray
    weights: np.ndarray
    cost: float
    rows: np.ndarray
    owner: np.ndarray
    bundle_load: np.ndarray
    cost_per_byte: float = 0.0
    quarantined: tuple[Quarantine, ...] = field(default=())

    @classmethod
    def of(
        cls,
        snapshot: ClusterSnapshot,
        brokers: Sequence[str],
        weights: ResourceWeights,
        cost: float | None = None,
    ) -> LoadModel:
        """The model of ``brokers`` in ``snapshot``; ``cost`` (percent of one core per msg/s)
        defaults to ``cpu_per_msg`` of the snapshot."""
        names = tuple(sorted(brokers))
        index = {name: i for i, name in enumerate(names)}
        w = np.asarray([getattr(weights, r) for r in RESOURCES], dtype=np.float64)
        every_usage, every_limit = snapshot.resource_arrays()
        order = {name: i for i, name in enumerate(snapshot.brokers)}
        picked = np.asarray([order[n] for n in names], dtype=np.int64)
        usage, limits = every_usage[picked], every_limit[picked]
        distrusted, quarantined = implausible(names, usage, limits, w)
        cpu_off = frozenset(q.broker for q in quarantined if q.resource == "cpu")
        if cost is None:
            cost = cpu_per_msg(snapshot, names, cpu_off)
        per_byte = cpu_per_byte(snapshot, names, cpu_off)
        table = snapshot.table
        position = snapshot.owner_positions()
        remap = np.full(len(snapshot.brokers) + 1, -1, dtype=np.int64)
        remap[picked] = np.arange(len(names))
        owner = remap[position]  # -1 (unowned, position -1) maps to remap[-1] = -1
        rows = np.flatnonzero(owner >= 0)
        owner = owner[rows]
        bundle_load = bundle_loads(table.short_term[rows], cost, per_byte)
        load = np.zeros((len(names), 5), dtype=np.float64)
        for column in (CPU, BANDWIDTH_IN, BANDWIDTH_OUT):
            load[:, column] = np.bincount(
                owner, weights=bundle_load[:, column], minlength=len(names)
            )
        with np.errstate(invalid="ignore"):
            background = np.maximum(usage - load, 0.0)
        background[distrusted] = (
            0.0  # what the broker's bundles explain is all it can be said to use
        )
        background[~np.isfinite(background)] = 0.0
        return cls(
            names,
            index,
            limits,
            background,
            load,
            w,
            cost,
            rows,
            owner,
            bundle_load,
            per_byte,
            quarantined,
        )

    def level(self) -> float:
        """The lowest highest usage any assignment could reach (a lower bound): no broker goes
        below its background, and each resource's total cannot sit below its share of the
        total capacity."""
        if not len(self.names):
            return 0.0
        own = float(self.background_usage().max())
        limits = self.limits.sum(axis=0)
        total = self.background.sum(axis=0) + self.load.sum(axis=0)
        spread = float(self.usage_of(total, limits))
        return max(own, spread)

    def background_usage(self) -> np.ndarray:
        """Every modelled broker's usage (fraction) with none of its bundles."""
        return self.usage(np.zeros_like(self.load))

    def weighted_limits(self) -> np.ndarray:
        """(brokers, 5) capacities such that ``max(total / capacity)`` is the weighted max usage:
        limit / weight, ``inf`` for a resource of weight 0 or without a limit."""
        weighted = (self.limits > 0) & (self.weights > 0)
        return np.where(
            weighted, self.limits / np.where(self.weights > 0, self.weights, 1.0), np.inf
        )

    def usage(self, load: np.ndarray | None = None) -> np.ndarray:
        """Every modelled broker's usage (fraction) with ``load`` (default: the bundles it owns
        now) on top of its background."""
        return self.usage_of(self.background + (self.load if load is None else load), self.limits)

    def usage_of(self, total: np.ndarray, limits: np.ndarray) -> np.ndarray:
        """The weighted max over the last axis of ``total / limits`` (0 where a limit is ≤ 0)."""
        safe = np.where(limits > 0, limits, 1.0)
        percent = np.where(limits > 0, total / safe, 0.0)
        return np.max(percent * self.weights, axis=-1)  # type: ignore[no-any-return]

    def broker_usage(self, broker: int, load: np.ndarray) -> np.ndarray:
        """Broker ``broker``'s usage with each row of ``load`` (k, 5) as its bundles' load."""
        return self.usage_of(self.background[broker] + load, self.limits[broker])

    def against_last(self, last: Mapping[str, Any]) -> tuple[LoadModel, dict[str, Any]]:
        """This model with the readings its brokers' previous reports contradict held back
        for one report: a resource (of weight > 0) whose figure is missing from this report
        (limit 0 or less, usage 0) though the last one had it, and a background that moved by
        more than ``JUMP_FRACTION`` of the limit in one report — a change no load explains,
        since the background is what the bundles do not. Each such reading is quarantined,
        and the last report's background and limit stand in for it; a second report that says
        the same is believed (what is remembered is always what was reported).

        Args:
            last: what the previous call returned, broker -> {"background": [5], "limit":
                [5]} in the resources' units (anything else is ignored).

        Returns:
            (the model, what to remember for the next report: each broker's reported
            background and limits).
        """
        background, limits = self.background.copy(), self.limits.copy()
        held: list[Quarantine] = []
        for i, name in enumerate(self.names):
            seen = last.get(name)
            try:
                before = np.asarray(seen["background"], dtype=np.float64).reshape(5)  # type: ignore[index]
                before_limit = np.asarray(seen["limit"], dtype=np.float64).reshape(5)  # type: ignore[index]
            except (TypeError, KeyError, ValueError):
                continue
            for r in np.flatnonzero(self.weights > 0).tolist():
                now_limit, was = float(self.limits[i, r]), float(before_limit[r])
                resource = RESOURCES[r]
                if was > 0 and not now_limit > 0 and self.background[i, r] == 0:
                    reason = (
                        f"{resource} is missing from this report (the last one had "
                        f"{before[r]:g} of {was:g} as background): the last figures stand in "
                        "for one report"
                    )
                elif now_limit > 0 and was > 0:
                    jump = (self.background[i, r] - before[r]) / now_limit
                    if abs(jump) <= JUMP_FRACTION:
                        continue
                    reason = (
                        f"{resource} background moved from {before[r] / was:.0%} to "
                        f"{self.background[i, r] / now_limit:.0%} of its limit in one report, "
                        "with no load to explain it: the last background stands until a second "
                        "report says the same"
                    )
                else:
                    continue
                background[i, r], limits[i, r] = before[r], was
                reported = float(self.background[i, r] + self.load[i, r])
                held.append(Quarantine(name, resource, reported, now_limit, reason))
        remembered = {
            name: {"background": self.background[i].tolist(), "limit": self.limits[i].tolist()}
            for i, name in enumerate(self.names)
        }
        if not held:
            return self, remembered
        model = replace(
            self,
            background=background,
            limits=limits,
            quarantined=(*self.quarantined, *held),
        )
        return model, remembered
