"""The prediction after a plan: each broker's usage with the planned moves applied, and the load
statistics before and after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from balancer.cycle.model import Action, LoadStats, PlaceAction, UnloadAction
from balancer.load import MessageRates, ResourceWeights, as_float32
from balancer.load_model import bundle_loads, trusted_costs
from balancer.snapshot import ClusterSnapshot, percent_float32
from balancer.units import Seconds


def predict(
    snapshot: ClusterSnapshot,
    weights: ResourceWeights,
    serving: Sequence[str],
    actions: Iterable[Action],
) -> LoadStats:
    """The statistics over ``serving`` once the planned unloads and placements apply.

    A moved bundle takes with it what the load model (``balancer.load_model``) says it weighs:
    its short-term throughput in and out (bytes/s, against each broker's bandwidth limits) and
    its short-term message rate × the CPU one message costs (``trusted_costs``; its throughput
    × the CPU one byte/s costs when it reports no message rate); a broker's
    background and memory stay. The same figures as FulcrumShedder's own prediction, so that a
    decision shows one set of numbers. A bundle unloaded and not placed leaves its source only.
    Usage is Pulsar's weighted max in float32 percentages, as ``BrokerLoad.weighted_max_usage``.
    """
    usage = snapshot.weighted_usage(weights)
    cost = trusted_costs(snapshot, [n for n in serving if n in snapshot.brokers])
    shifts: list[tuple[str, str, float]] = []
    for action in actions:
        if not action.is_planned:
            continue
        if isinstance(action, UnloadAction) and action.source:
            shifts.append((action.target, action.source, -1.0))
        elif isinstance(action, PlaceAction) and action.destination:
            shifts.append((action.target, action.destination, 1.0))
    deltas = _shift(snapshot, shifts, cost)
    after = {n: usage[n] for n in serving}
    touched = [n for n in deltas if n in after]
    if touched:
        brokers = [snapshot.brokers[n] for n in touched]
        moved = {
            "cpu": (0, "cpu"),
            "bandwidth_in": (1, "bandwidth_in"),
            "bandwidth_out": (2, "bandwidth_out"),
        }
        weighted = []
        for resource in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"):
            used = np.asarray([getattr(b, resource).usage for b in brokers], dtype=np.float64)
            if resource in moved:
                index = moved[resource][0]
                used = np.maximum(used + [deltas[n][index] for n in touched], 0.0)
            limit = as_float32([getattr(b, resource).limit for b in brokers])
            percent = percent_float32(as_float32(used), limit)
            weighted.append(percent * getattr(weights, resource))
        values = (np.max(np.vstack(weighted), axis=0) / 100.0).tolist()
        after.update(zip(touched, values, strict=True))
    return LoadStats.of(after)


def _shift(
    snapshot: ClusterSnapshot,
    shifts: Sequence[tuple[str, str, float]],
    cost: tuple[float, float],
) -> dict[str, list[float]]:
    """Each broker's change of load, [CPU, bandwidth in, bandwidth out], when each ``(bundle,
    broker, sign)`` of ``shifts`` moves that bundle's load onto (``sign`` 1) or off (−1) that
    broker: its throughput, and its CPU by the load model (``bundle_loads`` with ``cost``: per
    msg/s, per byte/s)."""
    known: list[tuple[MessageRates, str, float]] = []
    for bundle, broker, sign in shifts:
        load = snapshot.bundles.get(bundle)
        if load is not None:
            known.append((load.short_term, broker, sign))
    deltas: dict[str, list[float]] = {}
    if not known:
        return deltas
    rates = np.asarray(
        [
            (r.msg_rate_in, r.msg_rate_out, r.msg_throughput_in, r.msg_throughput_out)
            for r, _, _ in known
        ],
        dtype=np.float64,
    )
    cpu = bundle_loads(rates, *cost)[:, 0].tolist()
    for (_, broker, sign), c, r in zip(known, cpu, rates.tolist(), strict=True):
        delta = deltas.setdefault(broker, [0.0, 0.0, 0.0])
        delta[0] += sign * c
        delta[1] += sign * r[2]
        delta[2] += sign * r[3]
    return deltas


def reassign(
    snapshot: ClusterSnapshot,
    owners: Mapping[str, str | None],
    *,
    now: Seconds | None = None,
    recently_unloaded: Mapping[str, Seconds] | None = None,
    recent_moves: Sequence[Seconds] | None = None,
) -> ClusterSnapshot:
    """``snapshot`` with its bundles owned as ``owners`` says, each broker's load moved with
    them by the load model of :func:`predict` (a bundle takes its short-term throughput in and
    out, its message rates, its topics and its CPU — msg rate × the CPU one message costs, or
    throughput × the CPU one byte/s costs —; a broker's background and memory stay).

    ``owners`` maps bundle -> broker (None: unowned); a bundle it omits keeps its owner, an
    owner that is not a broker of the snapshot leaves the bundle unowned. ``now`` moves the
    snapshot in time (each broker's ``reportedAt`` with it, so the reports keep their age);
    ``recently_unloaded`` and ``recent_moves`` replace the snapshot's. This is how the replay
    of recorded load (``balancer.simulator.replay``) sees a cluster its plans have changed.
    """
    shifts: list[tuple[str, str, float]] = []
    rates: dict[str, list[float]] = {}  # broker -> [msg in, msg out, bytes in, bytes out, topics]
    cost = trusted_costs(snapshot, list(snapshot.brokers))
    bundles: dict[str, Any] = {}
    owned: dict[str, list[str]] = {name: [] for name in snapshot.brokers}
    changed = False
    for load in snapshot.bundles.values():
        old = load.owner
        new = owners.get(load.name, old)
        if new is not None and new not in snapshot.brokers:
            new = None
        if new != old:
            changed = True
            moved = load.short_term
            figures = (
                moved.msg_rate_in,
                moved.msg_rate_out,
                moved.msg_throughput_in,
                moved.msg_throughput_out,
                float(load.topics),
            )
            for side, sign in ((old, -1.0), (new, 1.0)):
                if side is None:
                    continue
                shifts.append((load.name, side, sign))
                total = rates.setdefault(side, [0.0] * 5)
                for i, figure in enumerate(figures):
                    total[i] += sign * figure
            load = replace(load, owner=new)
        if new is not None:
            owned[new].append(load.name)
        bundles[load.name] = load
    deltas = _shift(snapshot, shifts, cost)  # broker -> [cpu, bandwidth in, bandwidth out]
    offset = 0.0 if now is None else now - snapshot.now
    brokers = {}
    for name, broker in snapshot.brokers.items():
        if name in deltas:
            cpu, bw_in, bw_out = deltas[name]
            m_in, m_out, t_in, t_out, topics = rates[name]
            broker = replace(
                broker,
                cpu=replace(broker.cpu, usage=max(0.0, broker.cpu.usage + cpu)),
                bandwidth_in=replace(
                    broker.bandwidth_in, usage=max(0.0, broker.bandwidth_in.usage + bw_in)
                ),
                bandwidth_out=replace(
                    broker.bandwidth_out, usage=max(0.0, broker.bandwidth_out.usage + bw_out)
                ),
                rates=replace(
                    broker.rates,
                    msg_rate_in=max(0.0, broker.rates.msg_rate_in + m_in),
                    msg_rate_out=max(0.0, broker.rates.msg_rate_out + m_out),
                    msg_throughput_in=max(0.0, broker.rates.msg_throughput_in + t_in),
                    msg_throughput_out=max(0.0, broker.rates.msg_throughput_out + t_out),
                ),
                topics=max(0, broker.topics + round(topics)),
            )
        if changed:
            broker = replace(broker, bundles=tuple(owned[name]))
        if offset and broker.reported_at is not None:
            broker = replace(broker, reported_at=broker.reported_at + offset)
        brokers[name] = broker
    return ClusterSnapshot(
        snapshot.now + offset,
        brokers,
        bundles if changed else snapshot.bundles,
        snapshot.namespaces,
        snapshot.recently_unloaded if recently_unloaded is None else dict(recently_unloaded),
        snapshot.recent_moves if recent_moves is None else tuple(recent_moves),
        snapshot.bundle_topics,
    )
