"""Danube's placement of an unassigned topic: round-robin among the least loaded brokers."""

from __future__ import annotations

from typing import Any

from balancer.danube.config import DanubeConfig
from balancer.danube.rankings import ranked
from balancer.decisions import Placement, Reason
from balancer.names import ShedderName
from balancer.snapshot import ClusterSnapshot


def place(
    snapshot: ClusterSnapshot,
    topic: str,
    config: DanubeConfig,
    state: dict[str, Any],
    hint: dict[str, Any] | None = None,
) -> Placement:
    """Choose the broker for ``topic`` from the ``assignment_strategy`` rankings.

    A ``hint`` from a move comes first: ``{"reason": "rebalance", "toBroker", "fromBroker"}`` goes
    to ``toBroker`` when it is active, ``{"reason": "unload", "fromBroker"}`` (or an inactive
    target) to the first active broker in the rankings other than ``fromBroker``. Otherwise the
    candidates are the active brokers whose score is within 10 % of the minimum (score ≤ min +
    min / 10: with integer scores this is the code's "exactly the minimum below 10"); the pick is
    the candidate after ``state["lastSelected"]`` in ranking order, wrapping, or the first when the
    last pick is not a candidate. No candidate: the first active broker; none at all: no broker.

    Source: Danube ``assign_topic`` / round-robin selection (DANUBE.md §3).
    """
    rankings = ranked(snapshot, config.assignment_strategy)
    scores = {n: float(s) for n, s in rankings}
    active = [n for n, _ in rankings if snapshot.brokers[n].is_active]

    def result(broker: str | None, reason: Reason, candidates: list[str]) -> Placement:
        new_state = {**state, "lastSelected": broker} if broker else dict(state)
        return Placement(
            topic, broker, reason, tuple(candidates), (), scores, new_state, ShedderName.DANUBE
        )

    if hint:
        source = hint.get("fromBroker")
        target = hint.get("toBroker")
        if hint.get("reason") == "rebalance" and target in active:
            return result(target, Reason.HINT, [target])
        others = [n for n in active if n != source]
        return result(others[0] if others else None, Reason.HINT, others)
    if not rankings:
        return result(None, Reason.NO_CANDIDATES, [])
    least = rankings[0][1]
    candidates = [n for n, s in rankings if s <= least + least / 10 and n in active]
    if not candidates:
        return result(active[0] if active else None, Reason.NO_CANDIDATES, active[:1])
    last = state.get("lastSelected")
    if last in candidates:
        chosen = candidates[(candidates.index(last) + 1) % len(candidates)]
    else:
        chosen = candidates[0]
    return result(chosen, Reason.ROUND_ROBIN, candidates)
