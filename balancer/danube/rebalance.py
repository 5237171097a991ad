"""Danube's CV rebalancer: at most one topic move per cycle."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from balancer.danube.config import DanubeConfig
from balancer.danube.rankings import MB, ranked
from balancer.decisions import Reason, SheddingDecision, Skip, Unload
from balancer.load import TopicStats
from balancer.names import ShedderName
from balancer.snapshot import ClusterSnapshot
from balancer.stats import imbalance

NAME = ShedderName.DANUBE
HISTORY_LIMIT = 1000  # Danube keeps the last 1000 moves


def topic_load_score(topic: TopicStats) -> float:
    """0.2 × 1 + 0.3 × MB/s + 0.3 × (producers + consumers) + 0.2 × backlog / 10,000: the Danube
    document's load score for one topic (DANUBE.md §9 row 3: the document's formula is followed)."""
    return (
        0.2
        + 0.3 * (topic.byte_rate / MB)
        + 0.3 * (topic.producers + topic.consumers)
        + 0.2 * (topic.backlog / 10_000)
    )


def is_blacklisted(topic: str, patterns: tuple[str, ...]) -> bool:
    """Shell-style wildcards anywhere in the name (``/default/critical-*``, ``/system/*``)."""
    return any(fnmatchcase(topic, pattern) for pattern in patterns)


def shed(
    snapshot: ClusterSnapshot, config: DanubeConfig, state: dict[str, Any]
) -> SheddingDecision:
    """Move the lightest eligible topic of an overloaded broker to the least loaded active one,
    when the coefficient of variation of the brokers' ranking scores exceeds the threshold.

    Loads are the ``assignment_strategy`` ranking scores of active brokers; CV = population std /
    mean. Overloaded: load > mean + σ; underloaded: load < mean − σ and load < 0.5 × mean. Per
    cycle at most one move, and none when: disabled; fewer ranked brokers than
    ``min_brokers_for_rebalance``; CV ≤ threshold (the preset's, e.g. 0.30 for balanced); the
    last move is less than ``cooldown_seconds`` old; ``max_moves_per_hour`` moves in the last
    hour. Topics are skipped when blacklisted (shell wildcards), younger than
    ``min_topic_age_seconds`` (reports carry no creation time, so age counts from when the
    strategy first saw the topic; topics present at its first cycle count as old). The
    document's per-topic rule (no topic moved again within ``cooldown_seconds``) is implied by
    the cycle-level cooldown, which uses the same window.

    Args:
        snapshot: brokers with cpu/memory resources and per-topic stats (msg/s, bytes/s).
        config: Danube keys (aggressiveness preset, limits, blacklist).
        state: ``{"moves": [{"topic", "from", "to", "at"}], "topicFirstSeen": {topic: s}}``.

    Returns:
        At most one unload whose ``bundle`` is the topic name and ``destination`` the target;
        stats ``cv``, ``mean``, ``std``, ``max``, ``min``, ``threshold`` and per-broker scores.

    Source: Danube rebalancing (DANUBE.md §4-7), with the Danube document's rules where they
    differ from its code (spec README, decision 2).
    """
    moves: list[dict[str, Any]] = list(state.get("moves", []))
    first_seen: dict[str, float] = dict(state.get("topicFirstSeen", {}))
    is_first_cycle = "topicFirstSeen" not in state
    now = snapshot.now
    for broker in snapshot.brokers.values():
        for topic in broker.topic_stats:
            first_seen.setdefault(topic.name, 0.0 if is_first_cycle else now)
    rankings = ranked(snapshot, config.assignment_strategy)
    active = [(n, s) for n, s in rankings if snapshot.brokers[n].is_active]
    spread = imbalance(float(s) for _, s in active)
    upper = spread.mean + spread.std
    lower = spread.mean - spread.std
    overloaded = [n for n, s in active if s > upper]
    underloaded = {n for n, s in active if s < lower and s < 0.5 * spread.mean}
    is_overloaded = set(overloaded)
    stats = {
        "cv": spread.cv,
        "mean": spread.mean,
        "std": spread.std,
        "max": max((s for _, s in active), default=0),
        "min": min((s for _, s in active), default=0),
        "threshold": config.cv_threshold,
        "strategy": config.assignment_strategy,
        "brokers": {
            n: {"score": s, "overloaded": n in is_overloaded, "underloaded": n in underloaded}
            for n, s in rankings
        },
    }

    def decision(
        reason: Reason, unloads: tuple[Unload, ...] = (), skipped: list[Skip] | None = None
    ) -> SheddingDecision:
        return SheddingDecision(
            unloads=unloads,
            reason=reason,
            skipped=tuple(skipped or ()),
            stats=stats,
            state={"moves": moves[-HISTORY_LIMIT:], "topicFirstSeen": first_seen},
            strategy=NAME,
        )

    if not config.is_enabled:
        return decision(Reason.DISABLED)
    if len(rankings) < config.min_brokers_for_rebalance:
        return decision(Reason.NOT_ENOUGH_BROKERS)
    if spread.cv <= config.cv_threshold:
        return decision(Reason.BALANCED)
    if moves and moves[-1]["at"] > now - config.cooldown_s:
        return decision(Reason.COOL_DOWN)
    if sum(1 for m in moves if m["at"] >= now - 3600) >= config.max_moves_per_hour:
        return decision(Reason.RATE_LIMITED)
    skipped: list[Skip] = []
    for source in overloaded:
        candidates = []
        for topic in snapshot.brokers[source].topic_stats:
            if is_blacklisted(topic.name, config.blacklist_topics):
                skipped.append(Skip("topic", topic.name, Reason.BLACKLISTED))
            elif now - first_seen[topic.name] < config.min_topic_age_s:
                skipped.append(Skip("topic", topic.name, Reason.TOO_YOUNG))
            else:
                candidates.append((topic_load_score(topic), topic.name))
        # CV > threshold needs two active brokers with different loads: a target exists.
        target = next(n for n, _ in active if n != source)
        if not candidates:
            continue
        score, topic_name = min(candidates)
        moves.append({"topic": topic_name, "from": source, "to": target, "at": now})
        unload = Unload(topic_name, source, target, Reason.LOAD_IMBALANCE, score, "topicLoad")
        return decision(Reason.LOAD_IMBALANCE, (unload,), skipped)
    return decision(Reason.BALANCED if not overloaded else Reason.NO_BUNDLES, skipped=skipped)
