"""One whole shedding cycle as a pure function: ``plan_cycle(snapshot, config, state, now)``.

The console's tick, the offline simulator, the benchmark and ``python -m balancer cycle`` all run
this function and apply the planned actions of its plan; nothing else assembles a cycle. The steps
run in the order of CLI.md § ``cycle``:

1. the broker life cycle: a broker that reported at least once and then stayed silent past
   ``broker_timeout_s`` is *lost* and its bundles are re-placed; one that never reported is
   *pending* and left alone; a draining broker gives up every bundle, then becomes drained;
2. the shedding strategy with Pulsar's post-strategy guard (``shed_guarded``);
3. Fulcrum's safety vetoes on every unload: ownership, cool-down, Pulsar's grace period, the move
   rate limit, the blacklist;
4. placement of every bundle left without an owner, honouring the destination a strategy chose
   (AvgShedder, TransferShedder) when it passes Pulsar's placement filters, else the configured
   placement through ``place_many``;
5. auto-split, when enabled.

Every action carries its outcome (planned, or vetoed with the veto), the metric that ranked it with
its unit, and an explanation sentence; the plan carries the load statistics before and the
prediction after (Pulsar's UnloadScheduler labels each decision; Cruise Control's
OptimizerResult carries the proposals with the stats before and after).

Operator actions are plans too (``plan_unload``, ``plan_split``, ``plan_drain``,
``plan_activate``), screened by the same vetoes; an operator overrides a veto only with ``force``,
and the action records that.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

import numpy as np

from balancer import explain
from balancer.bundles import namespace_of_bundle, parse_bundle_name
from balancer.config import PulsarConfig
from balancer.danube.bundles import bundle_view
from balancer.danube.config import DanubeConfig
from balancer.danube.placement import place as danube_place
from balancer.decisions import METRIC_UNITS, Placement, Reason, SheddingDecision, Unload
from balancer.errors import BalancerError, ImpossibleSplit
from balancer.hashing import format_hash
from balancer.load import MessageRates, ResourceWeights
from balancer.load_model import bundle_loads, trusted_costs
from balancer.placement.batch import place_many
from balancer.placement.place import filter_candidates
from balancer.registry import (
    DANUBE_PLACEMENT,
    console_strategy,
    get_split_algorithm,
)
from balancer.safety import SafetyConfig, matching_pattern
from balancer.shedding.guarded import shed_guarded
from balancer.snapshot import ClusterSnapshot, percent_float32
from balancer.splitting.algorithms import TopicLoad
from balancer.splitting.conditions import split_check
from balancer.units import Seconds

# Split algorithms that cut by the bundle's topics: they need its owner's per-topic stats
# (``ClusterSnapshot.bundle_topics``); the other two need only the bundle's range.
TOPIC_SPLITS: Final = frozenset({"topic_count_equally_divide", "flow_or_qps_equally_divide"})
# A cycle's placements list their candidates' scores and filtered brokers (``Action.candidates``)
# when it places at most this many bundles over at most EXPLAINED_BROKERS_TOTAL brokers × bundles:
# the moves of a shedding cycle, not the thousands of bundles of a start.
EXPLAINED_PLACEMENTS: Final = 16
EXPLAINED_BROKERS_TOTAL: Final = 16_000
# At most this many candidates, and as many filtered brokers, per place action.
EXPLAINED_BROKERS: Final = 32
# What each placement's score is, for the metric of a place action.
PLACEMENT_METRICS: Final = {
    "LeastLongTermMessageRate": "longTermMsgRate",
    "LeastResourceUsageWithWeight": "weightedUsage",
    "FulcrumPlacement": "weightedUsage",
    **dict.fromkeys(DANUBE_PLACEMENT, "rankingScore"),
}
# Shedders that read the whole cycle configuration (safety included), and whose destinations are
# checked against Pulsar's hard placement filters only (not the even-distribution heuristic).
FULCRUM_SHEDDERS: Final = frozenset({"FulcrumShedder"})


class ActionKind(StrEnum):
    """What an action does (CLI.md ``kind``)."""

    UNLOAD = "unload"
    PLACE = "place"
    SPLIT = "split"
    BROKER_STATE = "brokerState"


@dataclass(frozen=True, slots=True)
class Strategies:
    """The cycle's strategies by registry name (the console's defaults)."""

    shedder: str = "FulcrumShedder"
    placement: str = "FulcrumPlacement"
    split_algorithm: str = "range_equally_divide"


@dataclass(frozen=True, slots=True)
class CycleConfig:
    """Everything a cycle is configured by.

    Attributes:
        strategies: shedder, placement and split algorithm names.
        pulsar: Pulsar's tunables in core units (also read by placement and split detection).
        danube: Danube's settings, read by the ``danube`` shedder and Danube's placements.
        safety: Fulcrum's own limits (cool-down, move rate, blacklist, broker timeout, auto-split).
        is_shedding_enabled: False skips step 2 (the life cycle, placement and splits still run).
        is_destination_honoured: False re-places every unloaded bundle with the configured
            placement even when the strategy chose a destination (what Pulsar's modular load
            manager does with ThresholdShedder-style shedders; for comparisons).
    """

    strategies: Strategies = field(default_factory=Strategies)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    is_shedding_enabled: bool = True
    is_destination_honoured: bool = True
    danube: DanubeConfig = field(default_factory=DanubeConfig)


@dataclass(frozen=True, slots=True)
class Metric:
    """The figure that ranked an action, with its unit (``bytes/s``, ``msg/s``, ``fraction``,
    ``score``)."""

    name: str
    value: float
    unit: str

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "value", "unit"}``."""
        return {"name": self.name, "value": self.value, "unit": self.unit}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A broker a placement weighed for one bundle: its score, or the filter that removed it.

    Attributes:
        broker: the broker.
        score: the placement's figure for it (the unit of the place action's metric: msg/s for
            LeastLongTermMessageRate, a fraction for LeastResourceUsageWithWeight, Danube's
            ranking score); ``inf`` when it is over the overload bar; None when filtered out.
        filter: the placement filter that removed it ("" when it was a candidate).
        reason, detail: that filter's reason and its numbers, in words.
    """

    broker: str
    score: float | None = None
    filter: str = ""
    reason: str = ""
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """``{"broker", "score"}`` (null when infinite: over the overload bar), or ``{"broker",
        "filter", "reason", "detail"}`` for a broker filtered out."""
        if self.filter:
            return {
                "broker": self.broker,
                "filter": self.filter,
                "reason": self.reason,
                "detail": self.detail,
            }
        score = self.score if self.score is not None and math.isfinite(self.score) else None
        return {"broker": self.broker, "score": score}


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a plan.

    Attributes:
        kind: unload, place, split or brokerState.
        target: the bundle (or, for brokerState, the broker).
        source: the broker a bundle leaves (unload), or the broker's previous state (brokerState).
        destination: the broker that takes the bundle (place; on an unload, where its place
            action sends it), or the broker's new state (brokerState).
        reason: why (Overloaded, BrokerLost, Drain, LeastLoaded, StrategyDestination, Topics...).
        explanation: one sentence with the numbers and their units, made by the core.
        metric: the figure that ranked it, with its unit.
        veto: None when planned; else why it must not be applied.
        forced: an operator overrode ``veto`` explicitly; the action is planned anyway.
        boundaries: split only: the cut points.
        children: split only: the names of the new bundles.
        strategy: the strategy (or "lifecycle", "operator") that proposed it.
        candidates: place only, for the moves of a cycle: every broker the placement scored,
            best first, then every broker its filters removed (at most ``EXPLAINED_BROKERS``
            of each; see ``EXPLAINED_PLACEMENTS``).
    """

    kind: ActionKind
    target: str
    source: str | None
    destination: str | None
    reason: str
    explanation: str
    metric: Metric | None = None
    veto: Reason | None = None
    forced: bool = False
    boundaries: tuple[int, ...] = ()
    children: tuple[str, ...] = ()
    strategy: str = ""
    candidates: tuple[Candidate, ...] = ()

    def moved(self, source: str | None, destination: str | None) -> Action:
        """This action with another source and destination (a fast ``dataclasses.replace``)."""
        return Action(
            self.kind,
            self.target,
            source,
            destination,
            self.reason,
            self.explanation,
            self.metric,
            self.veto,
            self.forced,
            self.boundaries,
            self.children,
            self.strategy,
            self.candidates,
        )

    @property
    def is_planned(self) -> bool:
        """Whether the action is to be applied (not vetoed, or forced past its veto)."""
        return self.veto is None or self.forced

    @property
    def outcome(self) -> str:
        """``planned`` or ``vetoed``."""
        return "planned" if self.is_planned else "vetoed"

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry."""
        out: dict[str, Any] = {"kind": str(self.kind)}
        if self.kind == ActionKind.BROKER_STATE:
            out |= {"broker": self.target, "from": self.source, "to": self.destination}
        else:
            out |= {"bundle": self.target, "source": self.source, "destination": self.destination}
        out |= {"outcome": self.outcome, "reason": self.reason}
        if self.veto is not None:
            out["veto"] = str(self.veto)
        if self.forced:
            out["forced"] = True
        if self.metric is not None:
            out["metric"] = self.metric.as_dict()
        if self.kind == ActionKind.SPLIT:
            out["boundaries"] = [format_hash(b) for b in self.boundaries]
            out["children"] = list(self.children)
        out["strategy"] = self.strategy
        out["explanation"] = self.explanation
        if self.candidates:
            out["candidates"] = [c.as_dict() for c in self.candidates]
        return out


@dataclass(frozen=True, slots=True)
class LoadStats:
    """Broker usage (weighted max, fraction) over the serving brokers, and its spread.

    ``max_over_mean`` is the hottest broker's usage over the mean (1.0 = perfectly even)."""

    avg_usage: float
    std: float
    cv: float
    max_over_mean: float
    brokers: Mapping[str, float]

    @classmethod
    def of(cls, usage: Mapping[str, float]) -> LoadStats:
        """Population statistics of ``usage`` (broker -> fraction); all 0 when empty."""
        values = list(usage.values())
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0, {})
        mean = math.fsum(values) / len(values)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
        cv = std / mean if mean > 0 else 0.0
        return cls(mean, std, cv, max(values) / mean if mean > 0 else 0.0, dict(usage))

    @property
    def serving(self) -> int:
        """How many brokers the figures are over: below 2 there is no spread to measure (the
        CV of one broker is 0 however loaded it is)."""
        return len(self.brokers)

    def cv_said(self) -> str:
        """The CV in words: its value, or why there is none (fewer than two serving brokers)."""
        if self.serving < 2:
            return f"no CV: {self.serving} serving broker{'' if self.serving == 1 else 's'}"
        return f"CV {self.cv:.2f}"

    def as_dict(self) -> dict[str, Any]:
        """``{"avgUsage", "std", "cv", "maxOverMean", "serving", "brokers"}`` (fractions;
        ``serving``: how many brokers they are over)."""
        return {
            "avgUsage": self.avg_usage,
            "std": self.std,
            "cv": self.cv,
            "maxOverMean": self.max_over_mean,
            "serving": self.serving,
            "brokers": dict(self.brokers),
        }


@dataclass(frozen=True)
class CyclePlan:
    """The whole decision of one cycle (or one operator action).

    Attributes:
        reason: the cycle's reason: what the shedder decided (Overloaded, Balanced, HitCount...),
            else the life cycle's (BrokerLost, Drain), else why nothing ran (Disabled,
            NotEnoughBrokers); Operator for an operator's plan.
        strategy: the shedder's registry name ("operator" for operator plans).
        actions: in application order; an unload is followed by its place action.
        before, after: load statistics now and as predicted once the planned actions apply.
        state: strategy name -> what it remembers; feed it to the next cycle unchanged.
        shedding: the shedder's own output (unloads, skipped, stats), when it ran.
        lost, pending: brokers declared lost this cycle; brokers that never reported.
    """

    reason: str
    strategy: str
    actions: tuple[Action, ...]
    before: LoadStats
    after: LoadStats
    state: dict[str, Any]
    shedding: SheddingDecision | None = None
    lost: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()

    def planned(self, kind: ActionKind | None = None) -> list[Action]:
        """The actions to apply, optionally of one kind, in order."""
        return [a for a in self.actions if a.is_planned and (kind is None or a.kind == kind)]

    @property
    def vetoed(self) -> list[Action]:
        """The actions refused, in order."""
        return [a for a in self.actions if not a.is_planned]

    def summary(self) -> str:
        """One line for lists: what moves, how many were vetoed, and the predicted CV."""
        moves = self.planned(ActionKind.UNLOAD)
        splits = self.planned(ActionKind.SPLIT)
        places = [
            a for a in self.planned(ActionKind.PLACE) if a.target not in {m.target for m in moves}
        ]
        parts = []
        if moves:
            parts.append(f"{len(moves)} unload(s)")
        if places:
            parts.append(f"{len(places)} placement(s)")
        if splits:
            parts.append(f"{len(splits)} split(s)")
        states = self.planned(ActionKind.BROKER_STATE)
        parts += [f"{a.target} {a.source} -> {a.destination}" for a in states]
        vetoed = len(self.vetoed)
        head = ", ".join(parts) if parts else "no action"
        # Why nothing moved although a broker stood out: the shedder's own skips of brokers.
        skipped = self.shedding.skipped if self.shedding is not None and not parts else ()
        skips = [s for s in skipped if s.kind == "broker"][:3]
        if skips:
            head += "; " + ", ".join(
                f"{s.name} skipped: {s.reason}" + (f" ({s.detail})" if s.detail else "")
                for s in skips
            )
        if vetoed:
            head += f"; {vetoed} vetoed"
        if moves or states:
            before, after = self.before, self.after
            if before.serving >= 2 and after.serving >= 2:
                head += f"; CV {before.cv:.2f} -> {after.cv:.2f} predicted"
            else:  # one broker serving: its CV is 0 and says nothing of balance
                head += f"; {before.cv_said()} -> {after.cv_said()} predicted"
        return head

    def as_dict(self) -> dict[str, Any]:
        """The CLI output document of ``cycle``."""
        out: dict[str, Any] = {
            "reason": self.reason,
            "strategy": self.strategy,
            "actions": [a.as_dict() for a in self.actions],
            "stats": {"before": self.before.as_dict(), "after": self.after.as_dict()},
            "state": self.state,
            "lost": list(self.lost),
            "pending": list(self.pending),
        }
        if self.shedding is not None:
            out["shedding"] = {
                "reason": str(self.shedding.reason),
                "skipped": [s.as_dict() for s in self.shedding.skipped],
                "stats": self.shedding.stats,
            }
        return out


# ---------------------------------------------------------------------------------------------
# The cycle


def plan_cycle(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    now: Seconds | None = None,
) -> CyclePlan:
    """One whole shedding cycle: life cycle, shedder with guards, safety vetoes, placement,
    auto-split (module docstring). Pure: the same inputs give the same plan.

    Args:
        snapshot: the cluster as reported; brokers' ``reported_at`` drives the life cycle.
        config: strategies, Pulsar tunables, safety limits.
        state: strategy name -> what it remembered; ``{}`` for a fresh start.
        now: seconds since the epoch (default ``snapshot.now``).

    Raises:
        UnknownStrategy: a strategy name the registry does not know.
        BalancerError: a strategy the cycle cannot run on bundles (``field`` names it).
    """
    now = snapshot.now if now is None else now
    shedder_name = _cycle_shedder(config.strategies.shedder)
    placement_name = _cycle_placement(config.strategies.placement)
    weights = config.pulsar.weights
    lost, pending = broker_life(snapshot, config.safety, now)
    serving = [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
    usage = snapshot.weighted_usage(weights)
    before = LoadStats.of({n: usage[n] for n in serving})

    unloads = _life_cycle_unloads(snapshot, lost, set(), now, config.safety)
    state_out = dict(state)
    decision: SheddingDecision | None = None
    if not config.is_shedding_enabled:
        shed_reason = str(Reason.DISABLED)
    elif len(serving) < 2:
        shed_reason = str(Reason.NOT_ENOUGH_BROKERS)
    else:
        # Lost brokers have left, as in Pulsar where their registration is gone. Danube reads
        # its topics: the bundles, in the adaptation of balancer.danube.bundles.
        danube = shedder_name == "danube"
        decision = shed_guarded(
            shedder_name,
            bundle_view(snapshot, lost) if danube else snapshot.without_brokers(lost),
            config.danube
            if danube
            else (config if shedder_name in FULCRUM_SHEDDERS else config.pulsar),
            dict(state.get(shedder_name, {})),
            serving,
        )
        state_out[shedder_name] = decision.state
        shed_reason = str(decision.reason)
        moving = {a.target for a in unloads}
        unloads += screen_unloads(
            decision.unloads,
            snapshot,
            config,
            now,
            moving,
            lost,
            shedder_name,
            before,
            decision.stats,
        )
    actions, placement_state = _place(
        snapshot, config, dict(state.get(placement_name, {})), unloads, serving, placement_name
    )
    if placement_state:
        state_out[placement_name] = placement_state
    actions += _drained(snapshot, actions, lost)
    moving = {a.target for a in actions if a.kind == ActionKind.UNLOAD and a.is_planned}
    if decision is not None and decision.splits and config.safety.is_auto_split_enabled:
        # A shedder's "too big to move" is a split only where automatic splits are on; else
        # the shedder's skip (SoleBundle) says it, for an operator to split.
        splits = _strategy_splits(snapshot, config, decision, moving, now)
        actions += splits
        moving |= {a.target for a in splits}
    if config.safety.is_auto_split_enabled:
        actions += _auto_splits(snapshot, config, moving)
    shed_acted = any(
        a.kind == ActionKind.UNLOAD and a.strategy == shedder_name and a.is_planned for a in actions
    )
    life = [a for a in actions if a.strategy == "lifecycle" and a.kind == ActionKind.UNLOAD]
    reason = shed_reason if shed_acted or not life else life[0].reason
    return CyclePlan(
        reason=reason,
        strategy=shedder_name,
        actions=tuple(actions),
        before=before,
        after=predict(snapshot, weights, serving, actions),
        state=state_out,
        shedding=decision,
        lost=tuple(lost),
        pending=tuple(pending),
    )


def _cycle_shedder(name: str) -> str:
    return console_strategy("shedder", name, "strategies.shedder")


def _cycle_placement(name: str) -> str:
    return console_strategy("placement", name, "strategies.placement")


def broker_life(
    snapshot: ClusterSnapshot, safety: SafetyConfig, now: Seconds
) -> tuple[list[str], list[str]]:
    """(lost, pending) broker names: lost = reported at least once, then silent for longer than
    ``broker_timeout_s``; pending = never reported (never declared lost)."""
    lost, pending = [], []
    for name, broker in snapshot.brokers.items():
        if broker.reported_at is None:
            pending.append(name)
        elif now - broker.reported_at > safety.broker_timeout_s:
            lost.append(name)
    return lost, pending


def _life_cycle_unloads(
    snapshot: ClusterSnapshot,
    lost: Sequence[str],
    draining: set[str],
    now: Seconds,
    safety: SafetyConfig,
) -> list[Action]:
    """Unload every bundle of a lost or draining broker (mandatory: no veto applies)."""
    out = []
    lost_set = set(lost)
    for name, broker in snapshot.brokers.items():
        if name in lost_set:
            silent = now - (broker.reported_at or now)
            reason = Reason.BROKER_LOST
            why = (
                f"{name} sent no load report for {explain.seconds(silent)} "
                f"(timeout {explain.seconds(safety.broker_timeout_s)})"
            )
        elif broker.state == "draining" or name in draining:
            reason, why = Reason.DRAIN, f"{name} is draining"
        else:
            continue
        for bundle in snapshot.owned_by(name):
            load = snapshot.bundles[bundle].short_term.throughput
            out.append(
                Action(
                    ActionKind.UNLOAD,
                    bundle,
                    name,
                    None,
                    str(reason),
                    f"{why}; {explain.metric('msgThroughput', load)} to re-place",
                    Metric("msgThroughput", load, "bytes/s"),
                    strategy="lifecycle",
                )
            )
    return out


def screen_unloads(
    unloads: Iterable[Unload],
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    now: Seconds,
    moving: set[str],
    lost: Sequence[str],
    strategy: str,
    before: LoadStats,
    shed_stats: Mapping[str, Any] | None = None,
) -> list[Action]:
    """A strategy's unloads as actions, in order, each planned or vetoed by Fulcrum's safety rules:
    UnknownBundle, NotOwner (never two owners), Blacklisted, CoolDown (Fulcrum's
    ``bundle_cool_down_s``), GracePeriod (Pulsar's ``loadBalancerSheddingGracePeriodMinutes``),
    RateLimited (moves in the last hour, this batch included), AlreadyMoving (the bundle moves
    already in this cycle), BrokerLost (its source is lost). ``moving`` is updated in place."""
    out = []
    recent = snapshot.moves_since(now - 3600)
    planned = 0
    mean = explain.percent(before.avg_usage)
    heads: dict[tuple[str, str], str] = {}  # (source, reason) -> the sentence's start
    for unload in unloads:
        veto, why = _veto(unload.bundle, unload.source, snapshot, config, now, recent + planned)
        if veto is None and unload.bundle in moving:
            veto, why = Reason.ALREADY_MOVING, f"{unload.bundle} already moves this cycle"
        if veto is None and unload.source in lost:
            veto, why = Reason.BROKER_LOST, f"{unload.source} is lost; its bundles are re-placed"
        key = (unload.source, str(unload.reason))
        if key not in heads:
            figures = explain.shedder_figures(strategy, unload.source, shed_stats or {})
            if not figures:
                usage = before.brokers.get(unload.source)
                figures = (f"at {explain.percent(usage)} " if usage is not None else "") + (
                    f"(mean {mean})"
                )
            heads[key] = f"{strategy} {unload.reason}: {unload.source} {figures}; "
        said = heads[key] + explain.metric(unload.metric, unload.load)
        if unload.destination:
            said += f", to {unload.destination}"
        if veto is not None:
            said = f"{why} ({said})"
        else:
            planned += 1
            moving.add(unload.bundle)
        out.append(
            Action(
                ActionKind.UNLOAD,
                unload.bundle,
                unload.source,
                unload.destination,
                str(unload.reason),
                said,
                Metric(unload.metric, unload.load, METRIC_UNITS[unload.metric]),
                veto,
                strategy=strategy,
            )
        )
    return out


def _veto(
    bundle: str,
    source: str | None,
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    now: Seconds,
    moves_last_hour: int,
) -> tuple[Reason | None, str]:
    """Fulcrum's safety rules for moving ``bundle`` off ``source``: (veto or None, sentence)."""
    safety = config.safety
    load = snapshot.bundles.get(bundle)
    if load is None:
        return Reason.UNKNOWN_BUNDLE, f"{bundle} is not a bundle of the cluster"
    if load.owner is None or load.owner != source:
        owner = load.owner or "nobody"
        return Reason.NOT_OWNER, f"{source or 'nobody'} does not own {bundle} (owner: {owner})"
    pattern = matching_pattern(bundle, safety.blacklist)
    if pattern is not None:
        return Reason.BLACKLISTED, f"{bundle} matches the blacklist pattern {pattern!r}"
    moved = snapshot.recently_unloaded.get(bundle)
    if moved is not None and now - moved < safety.bundle_cool_down_s:
        return Reason.COOL_DOWN, (
            f"moved {explain.seconds(now - moved)} ago; cool-down "
            f"{explain.seconds(safety.bundle_cool_down_s)}"
        )
    if moved is not None and now - moved < config.pulsar.grace_period_s:
        return Reason.GRACE_PERIOD, (
            f"unloaded {explain.seconds(now - moved)} ago; Pulsar's grace period "
            f"{explain.seconds(config.pulsar.grace_period_s)}"
        )
    if safety.max_moves_per_hour and moves_last_hour >= safety.max_moves_per_hour:
        return Reason.RATE_LIMITED, (
            f"{moves_last_hour} moves in the last hour; limit {safety.max_moves_per_hour} per hour"
        )
    return None, ""


def _place(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    placement_state: dict[str, Any],
    unloads: list[Action],
    serving: list[str],
    strategy: str,
) -> tuple[list[Action], dict[str, Any]]:
    """Interleave each unload with the place action of its bundle, then place the bundles that
    had no owner already. A strategy's destination is honoured when it is serving, not the
    source, and kept by the placement filters; everything else goes through ``place_many``."""
    pulsar = config.pulsar
    preallocated: dict[str, str] = {}
    chosen: dict[str, Action] = {}
    refused: dict[str, str] = {}  # bundle -> why the strategy's destination was not honoured
    to_place: list[str] = []
    sources: dict[str, str] = {}
    serving_set = set(serving)
    fulcrum = any(u.strategy in FULCRUM_SHEDDERS for u in unloads)
    check = _DestinationCheck(
        snapshot,
        replace(pulsar, is_distribute_bundles_evenly_enabled=False) if fulcrum else pulsar,
        serving,
        [u.target for u in unloads],
    )
    for unload in unloads:
        if not unload.is_planned:
            continue
        sources[unload.target] = unload.source or ""
        dest = unload.destination if config.is_destination_honoured else None
        if dest and dest in serving_set and dest != unload.source:
            refusal = check.refusal(unload.target, dest, unload.source or "", preallocated)
            if refusal is None:
                preallocated[unload.target] = dest
                chosen[unload.target] = Action(
                    ActionKind.PLACE,
                    unload.target,
                    unload.source,
                    dest,
                    str(Reason.DESTINATION),
                    f"{unload.strategy} chose {dest} as the destination; it passes the "
                    "placement filters",
                    strategy=unload.strategy,
                )
                continue
            refused[unload.target] = (
                f"{unload.strategy}'s destination {dest} was refused by {refusal}"
            )
        to_place.append(unload.target)
    unowned = [b for b in snapshot.unowned if b not in sources]
    batch = to_place + unowned
    explain = _explains(batch, serving)
    remembered = {k: v for k, v in placement_state.items() if k != "preallocated"}
    if batch and strategy in DANUBE_PLACEMENT:
        placements, after = _danube_placements(
            snapshot, config, remembered, batch, serving, sources, strategy
        )
    elif batch:
        placements, after = place_many(
            snapshot,
            batch,
            pulsar,
            {**remembered, "preallocated": preallocated},
            strategy=strategy,
            candidates=serving,
            sources=sources,
            explain=explain,
        )
    if batch:
        remembered = {k: v for k, v in after.items() if k != "preallocated"}
        for placement in placements:
            chosen[placement.bundle] = _place_action(
                placement,
                strategy,
                refused.get(placement.bundle, ""),
                sources.get(placement.bundle),
                explained=explain,
            )
    out: list[Action] = []
    for unload in unloads:
        place = chosen.get(unload.target) if unload.is_planned else None
        if place is not None and place.is_planned:
            moved = place.destination != unload.destination
            out.append(unload.moved(unload.source, place.destination) if moved else unload)
        else:  # not placed this cycle: no destination to show
            keep = not unload.is_planned or unload.destination is None
            out.append(unload if keep else unload.moved(unload.source, None))
        if place is not None:
            out.append(place)
    out += [chosen[b] for b in unowned]
    return out, remembered


class _DestinationCheck:
    """Whether a strategy's destination survives Pulsar's placement filters over the serving
    brokers other than the bundle's source — the decision of ``filter_candidates``, computed per
    namespace once (thousands of destinations on thousands of brokers take milliseconds).

    The shortcut holds while no namespace has an anti-affinity group and no broker can reach
    ``loadBalancerBrokerMaxTopics`` this cycle; otherwise every check runs the filters."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pulsar: PulsarConfig,
        serving: list[str],
        moving: list[str],
    ) -> None:
        self.snapshot, self.pulsar, self.serving = snapshot, pulsar, serving
        self.serving_set = set(serving)
        extra = sum(snapshot.bundles[b].topics for b in moving if b in snapshot.bundles)
        room = all(snapshot.brokers[n].topics + extra <= pulsar.broker_max_topics for n in serving)
        groups = any(p.anti_affinity_group for p in snapshot.namespaces.values())
        self.exact = groups or not room
        self.namespaces: dict[str, tuple[Mapping[str, int], bool, list[tuple[int, str]]]] = {}

    def refusal(
        self, bundle: str, dest: str, source: str, preallocated: dict[str, str]
    ) -> str | None:
        """None when ``dest`` passes; else which filter refused it, in words."""
        if self.exact:
            others = [n for n in self.serving if n != source]
            kept, _, rejections = filter_candidates(
                self.snapshot, bundle, self.pulsar, preallocated, others
            )
            if dest in kept:
                return None
            refused = next((r for r in rejections if r.broker == dest), None)
            return f"the {refused.filter} filter ({refused.reason})" if refused else "the filters"
        if not self.pulsar.is_distribute_bundles_evenly_enabled:
            return None
        namespace = namespace_of_bundle(bundle)
        if namespace not in self.namespaces:
            counts: Mapping[str, int] = self.snapshot.bundle_counts(namespace)
            # Fewer owners than serving brokers: some serving broker owns none of it.
            has_zero = len(counts) < len(self.serving) or (
                sum(1 for n, c in counts.items() if c > 0 and n in self.serving_set)
                < len(self.serving)
            )
            smallest = (
                []
                if has_zero
                else heapq.nsmallest(2, ((counts.get(n, 0), n) for n in self.serving))
            )
            self.namespaces[namespace] = (counts, has_zero, smallest)
        counts, has_zero, smallest = self.namespaces[namespace]
        # The source owns this bundle (count ≥ 1), so it is never one of the zeros.
        least = 0 if has_zero else next(c for c, n in smallest if n != source)
        mine = counts.get(dest, 0)
        if mine == least:
            return None
        return (
            f"the even_distribution filter ({Reason.NOT_LEAST_BUNDLES}: {dest} owns {mine} "
            f"bundles of {namespace}, the least is {least})"
        )


def _danube_placements(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: dict[str, Any],
    bundles: list[str],
    serving: list[str],
    sources: Mapping[str, str],
    strategy: str,
) -> tuple[list[Placement], dict[str, Any]]:
    """Danube's assignment for bundles, one after the other: round-robin among the brokers
    within 10 % of the least ranking score; an unloaded bundle goes, as Danube sends an unloaded
    topic, to the first active broker of the rankings other than the one it left."""
    serving_set = set(serving)
    view = bundle_view(snapshot, [n for n in snapshot.brokers if n not in serving_set])
    danube = replace(config.danube, assignment_strategy=strategy)
    out = []
    for bundle in bundles:
        source = sources.get(bundle)
        hint = {"reason": "unload", "fromBroker": source} if source else None
        placement = danube_place(view, bundle, danube, state, hint)
        state = placement.state
        out.append(replace(placement, strategy=strategy))
    return out, state


def _explains(bundles: Sequence[str], serving: Sequence[str]) -> bool:
    """Whether the place actions of placing ``bundles`` list their candidates: at most
    ``EXPLAINED_PLACEMENTS`` bundles over at most ``EXPLAINED_BROKERS_TOTAL`` brokers × bundles."""
    return (
        len(bundles) <= EXPLAINED_PLACEMENTS
        and len(bundles) * len(serving) <= EXPLAINED_BROKERS_TOTAL
    )


def _place_action(
    placement: Placement,
    strategy: str,
    prefix: str,
    source: str | None = None,
    *,
    explained: bool = False,
) -> Action:
    """The place action of one placement; ``prefix`` says why a strategy's own destination was
    not honoured, ``source`` is the broker the bundle left (None for an unowned bundle);
    ``explained`` lists the placement's candidates and filtered brokers."""
    if placement.broker is None:
        return Action(
            ActionKind.PLACE,
            placement.bundle,
            source,
            None,
            str(placement.reason),
            f"{prefix}; no serving broker can take it"
            if prefix
            else "no serving broker can take it",
            veto=Reason.NO_CANDIDATES,
            strategy=strategy,
        )
    metric = None
    said = f"{strategy} chose {placement.broker} ({placement.reason})"
    score = placement.scores.get(placement.broker)
    name = PLACEMENT_METRICS.get(strategy)
    if score is not None and name is not None and math.isfinite(score):
        metric = Metric(name, score, METRIC_UNITS[name])
        said += f": {explain.metric(name, score)}"
    if prefix:
        said = f"{prefix}; {said}"
    return Action(
        ActionKind.PLACE,
        placement.bundle,
        source,
        placement.broker,
        str(placement.reason),
        said,
        metric,
        strategy=strategy,
        candidates=_candidates(placement) if explained else (),
    )


def _candidates(placement: Placement) -> tuple[Candidate, ...]:
    """Every broker a placement scored, best first (ties by name), then every broker its filters
    removed, at most ``EXPLAINED_BROKERS`` of each."""
    scored = sorted(placement.scores.items(), key=lambda item: (item[1], item[0]))
    out = [Candidate(broker, score) for broker, score in scored[:EXPLAINED_BROKERS]]
    out += [
        Candidate(r.broker, None, r.filter, str(r.reason), r.detail)
        for r in placement.filtered[:EXPLAINED_BROKERS]
    ]
    return tuple(out)


def _drained(snapshot: ClusterSnapshot, actions: list[Action], lost: Sequence[str]) -> list[Action]:
    """A draining broker whose every bundle leaves this cycle (or that has none) is drained."""
    out = []
    placed = {a.target for a in actions if a.kind == ActionKind.PLACE and a.is_planned}
    for name, broker in snapshot.brokers.items():
        if broker.state != "draining" or name in lost:
            continue
        owned = snapshot.owned_by(name)
        if all(b in placed for b in owned):
            out.append(
                Action(
                    ActionKind.BROKER_STATE,
                    name,
                    "draining",
                    "drained",
                    str(Reason.DRAIN),
                    f"drain complete: {len(owned)} bundle(s) leave {name} this cycle",
                    strategy="lifecycle",
                )
            )
    return out


def _strategy_splits(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    decision: SheddingDecision,
    moving: set[str],
    now: Seconds,
) -> list[Action]:
    """The splits a shedder asked for (a bundle too big to move), cut with the configured
    algorithm, when automatic splits are on; a bundle that moves this cycle, is idle (no
    message rate, no throughput), blacklisted, in its cool-down, or whose namespace has
    ``loadBalancerNamespaceMaximumBundles`` already is left alone."""
    out = []
    name = get_split_algorithm(config.strategies.split_algorithm)[0]
    for bundle in decision.splits:
        load = snapshot.bundles.get(bundle)
        if load is None or bundle in moving:
            continue
        if load.short_term.msg_rate <= 0 and load.short_term.throughput <= 0:
            continue  # idle: no load for a split to divide (Pulsar would find no boundary)
        namespace = namespace_of_bundle(bundle)
        if sum(snapshot.bundle_counts(namespace).values()) >= config.pulsar.namespace_max_bundles:
            continue
        veto, _ = _veto(bundle, load.owner, snapshot, config, now, 0)
        if veto is not None:
            continue
        said = (
            f"{decision.strategy}: {bundle} is too big to move (it alone outweighs the gap it "
            f"would close); {explain.metric('msgThroughput', load.short_term.throughput)}"
        )
        try:
            action = _split_action(snapshot, config, bundle, name, None, said, "TooBigToMove")
        except BalancerError as exc:  # e.g. specified_positions_divide without positions
            action = Action(
                ActionKind.SPLIT,
                bundle,
                load.owner,
                None,
                "TooBigToMove",
                f"{said}; {name} cannot cut it: {exc.message}",
                veto=Reason.NO_CANDIDATES,
            )
        metric = Metric("msgThroughput", load.short_term.throughput, "bytes/s")
        out.append(replace(action, metric=metric, strategy=decision.strategy))
    return out


def _auto_splits(snapshot: ClusterSnapshot, config: CycleConfig, moving: set[str]) -> list[Action]:
    """Pulsar's BundleSplitterTask over the snapshot, cut with the configured algorithm."""
    out = []
    name = get_split_algorithm(config.strategies.split_algorithm)[0]
    for candidate in split_check(snapshot, config.pulsar):
        if candidate.bundle in moving:
            continue
        unit = "msg/s" if candidate.reason == "MsgRate" else "bytes/s"
        if candidate.reason in ("Topics", "Sessions"):
            unit = "count"
        said = (
            f"auto-split: {candidate.reason} {_count_or(candidate.value, unit)} above the limit "
            f"{_count_or(candidate.limit, unit)}"
        )
        metric = Metric(candidate.reason, candidate.value, unit)
        try:
            action = _split_action(
                snapshot, config, candidate.bundle, name, None, said, candidate.reason
            )
        except BalancerError as exc:  # e.g. specified_positions_divide without positions
            action = Action(
                ActionKind.SPLIT,
                candidate.bundle,
                snapshot.bundles[candidate.bundle].owner,
                None,
                candidate.reason,
                f"{said}; {name} cannot cut it: {exc.message}",
                veto=Reason.NO_CANDIDATES,
            )
        out.append(replace(action, metric=metric, strategy="auto-split"))
    return out


def _count_or(value: float, unit: str) -> str:
    return f"{value:g}" if unit == "count" else explain.quantity(value, unit)


def _split_action(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    algorithm: str,
    positions: Sequence[int] | None,
    said: str,
    reason: str,
) -> Action:
    owner = snapshot.bundles[bundle].owner if bundle in snapshot.bundles else None
    if algorithm in TOPIC_SPLITS and bundle not in snapshot.bundle_topics:
        return Action(
            ActionKind.SPLIT,
            bundle,
            owner,
            None,
            reason,
            f"{said}; {algorithm} needs the bundle's per-topic hashes and rates, and the load "
            f"report of {owner or 'its owner'} carries none for it (its bundleStats have no "
            "topicStats; range_equally_divide or specified_positions_divide need none)",
            veto=Reason.NO_TOPIC_DATA,
        )
    cuts, children = split_children(snapshot, bundle, algorithm, positions, config.pulsar)
    if not cuts:
        return Action(
            ActionKind.SPLIT,
            bundle,
            owner,
            None,
            reason,
            f"{said}; {algorithm} finds no boundary inside it",
            veto=Reason.NO_CANDIDATES,
        )
    return Action(
        ActionKind.SPLIT,
        bundle,
        owner,
        None,
        reason,
        f"{said}; {algorithm} cuts at " + ", ".join(format_hash(c) for c in cuts),
        boundaries=tuple(cuts),
        children=tuple(children),
    )


def split_children(
    snapshot: ClusterSnapshot,
    bundle: str,
    algorithm: str,
    positions: Sequence[int] | None,
    pulsar: PulsarConfig,
) -> tuple[list[int], list[str]]:
    """(sorted cut points, children names) of cutting ``bundle`` with ``algorithm``: by its
    topics when its owner reported them (``snapshot.bundle_topics``), else by its range (the
    topic count alone: specified_positions_divide cuts only a bundle with two topics or more).

    Raises:
        BalancerError: a malformed bundle name, bad positions (``field`` names it).
    """
    parsed = parse_bundle_name(bundle)
    _, split_at = get_split_algorithm(algorithm)
    topics: Sequence[TopicLoad] | None = snapshot.bundle_topics.get(bundle)
    if topics is None:
        load = snapshot.bundles.get(bundle)
        # Stand-ins keep the reported topic count where the topics themselves are unknown.
        topics = [TopicLoad("", parsed.range.lower)] * (load.topics if load is not None else 0)
    cuts = sorted(set(split_at(parsed.range, topics, positions, pulsar) or []))
    for cut in cuts:
        if not parsed.range.lower < cut < parsed.range.upper:
            raise ImpossibleSplit(
                f"boundary {format_hash(cut)} is not strictly inside {parsed.range.label}",
                field="bundle" if positions is None else "positions",
            )
    points = [parsed.range.lower, *cuts, parsed.range.upper]
    children = [
        f"{parsed.namespace}/{format_hash(a)}_{format_hash(b)}"
        for a, b in itertools.pairwise(points)
    ]
    return cuts, children if cuts else []


# ---------------------------------------------------------------------------------------------
# The load model's prediction


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
        if action.kind == ActionKind.UNLOAD and action.source:
            shifts.append((action.target, action.source, -1.0))
        elif action.kind == ActionKind.PLACE and action.destination:
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
            limit = np.asarray([getattr(b, resource).limit for b in brokers], dtype=np.float32)
            percent = percent_float32(used.astype(np.float32), limit)
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


# ---------------------------------------------------------------------------------------------
# Operator actions as plans


def _operator_plan(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    actions: list[Action],
    serving: list[str],
    serving_before: list[str] | None = None,
) -> CyclePlan:
    """An operator's plan; its statistics over ``serving`` after it, and before it over
    ``serving_before`` (the same brokers unless the plan takes one out, as a drain does)."""
    usage = snapshot.weighted_usage(config.pulsar.weights)
    before = LoadStats.of({n: usage[n] for n in (serving_before or serving)})
    return CyclePlan(
        reason=str(Reason.OPERATOR),
        strategy="operator",
        actions=tuple(actions),
        before=before,
        after=predict(snapshot, config.pulsar.weights, serving, actions),
        state=dict(state),
    )


def _serving(snapshot: ClusterSnapshot, config: CycleConfig, now: Seconds) -> list[str]:
    lost, _ = broker_life(snapshot, config.safety, now)
    return [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]


def plan_unload(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    bundle: str,
    *,
    destination: str | None = None,
    force: bool = False,
    now: Seconds | None = None,
) -> CyclePlan:
    """An operator unloads ``bundle`` from its owner, to ``destination`` or wherever the
    configured placement chooses (never back to the owner), through the cycle's vetoes.

    ``force`` plans the move past a veto of cool-down, grace period, rate limit, blacklist or a
    destination refused by the placement filters, and the action records it; an unknown bundle,
    one without an owner, or a destination that is not a serving broker is refused whatever
    ``force`` says.
    """
    now = snapshot.now if now is None else now
    serving = _serving(snapshot, config, now)
    owner = snapshot.bundles[bundle].owner if bundle in snapshot.bundles else None
    recent = snapshot.moves_since(now - 3600)
    veto, why = _veto(bundle, owner, snapshot, config, now, recent)
    if owner is None and bundle in snapshot.bundles:
        veto, why = Reason.NOT_OWNER, f"{bundle} has no owner; nothing to unload"
    hard = veto in (Reason.UNKNOWN_BUNDLE, Reason.NOT_OWNER) or owner is None
    load = snapshot.bundles[bundle].short_term.throughput if bundle in snapshot.bundles else 0.0
    said = f"operator unload of {bundle} from {owner or 'nobody'}; " + explain.metric(
        "msgThroughput", load
    )
    if veto is not None:
        said = f"{why} ({said})"
    unload = Action(
        ActionKind.UNLOAD,
        bundle,
        owner,
        destination,
        str(Reason.OPERATOR),
        said,
        Metric("msgThroughput", load, "bytes/s"),
        veto,
        forced=force and veto is not None and not hard,
        strategy="operator",
    )
    if not unload.is_planned and (hard or destination is None):
        return _operator_plan(snapshot, config, state, [unload], serving)
    if destination is not None:
        # A named destination is checked even when the unload is vetoed: the preview shows
        # every veto an override would take (cool-down and placement filter alike), and an
        # override takes nothing it did not show.
        if destination not in serving or destination == owner:
            why = (
                f"{destination} is the bundle's owner"
                if destination == owner
                else f"{destination} is not a serving broker"
            )
            vetoed = replace(
                unload, veto=Reason.NOT_SERVING, forced=False, explanation=f"{why} ({said})"
            )
            return _operator_plan(snapshot, config, state, [vetoed], serving)
        kept, _, rejections = filter_candidates(snapshot, bundle, config.pulsar, {}, serving)
        place = Action(
            ActionKind.PLACE,
            bundle,
            owner,
            destination,
            str(Reason.OPERATOR),
            f"the operator chose {destination}",
            strategy="operator",
        )
        if destination not in kept:
            refused = next((r for r in rejections if r.broker == destination), None)
            detail = (
                f"{refused.filter} filter: {refused.reason}"
                + (f" ({refused.detail})" if refused.detail else "")
                if refused
                else "the placement filters"
            )
            place = replace(
                place,
                veto=Reason(refused.reason) if refused else Reason.NO_CANDIDATES,
                forced=force,
                explanation=f"{destination} is refused by {detail}",
            )
        if not unload.is_planned:
            # Vetoed itself: the filter's refusal is shown beside it, when there is one.
            shown = [unload, place] if place.veto is not None else [unload]
            return _operator_plan(snapshot, config, state, shown, serving)
        if not place.is_planned:
            vetoed = replace(unload, veto=place.veto, explanation=place.explanation)
            return _operator_plan(snapshot, config, state, [vetoed, place], serving)
        return _operator_plan(snapshot, config, state, [unload, place], serving)
    placement = _cycle_placement(config.strategies.placement)
    actions, remembered = _place(
        snapshot, config, dict(state.get(placement, {})), [unload], serving, placement
    )
    actions = [a for a in actions if a.target == bundle]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    return _operator_plan(snapshot, config, out_state, actions, serving)


def unload_destinations(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    *,
    now: Seconds | None = None,
) -> list[dict[str, Any]]:
    """Every broker as a destination for an operator's unload of ``bundle``, by name:
    ``{"broker", "eligible", "why", "warning"}``; ``why`` (None when eligible) says what
    refuses it: the bundle's owner, or a broker that is not serving (its state, or lost) —
    Pulsar refuses an inactive destination too. ``warning`` (None when none) names the placement
    filter that would not choose it and its numbers (Pulsar's filter chain: max topics,
    anti-affinity, even distribution; ``filter_candidates``): Pulsar takes ``unload
    --destinationBroker`` to any active broker, so it stays eligible, and the plan shows the
    filter's refusal as a veto an operator overrides knowingly.

    Raises:
        BalancerError: an unknown bundle (``field`` "bundle").
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    now = snapshot.now if now is None else now
    owner = snapshot.bundles[bundle].owner
    serving = _serving(snapshot, config, now)
    # The filters over every serving broker, the owner too, as ``plan_unload`` checks a
    # destination (Pulsar counts the owner's holdings in the anti-affinity spread).
    kept, _, rejections = filter_candidates(snapshot, bundle, config.pulsar, {}, serving)
    refused = {r.broker: r for r in rejections}
    out = []
    for name in sorted(snapshot.brokers):
        why: str | None = None
        warning: str | None = None
        if name == owner:
            why = "the bundle's owner"
        elif name not in serving:
            state = snapshot.brokers[name].state
            why = f"not serving ({state})" if state != "active" else "not serving (lost)"
        elif name not in kept:
            rejection = refused.get(name)
            warning = (
                f"{rejection.filter} filter: {rejection.detail or rejection.reason}"
                if rejection
                else "the placement filters"
            )
        out.append({"broker": name, "eligible": why is None, "why": why, "warning": warning})
    return out


def split_child_loads(
    snapshot: ClusterSnapshot, bundle: str, boundaries: Sequence[int]
) -> list[dict[str, Any]]:
    """Each child of cutting ``bundle`` at ``boundaries`` with its share of the bundle's
    short-term load: ``{"bundle", "fraction", "throughput" (bytes/s), "msgRate" (msg/s),
    "topics", "measured"}``. With its owner's per-topic stats (``snapshot.bundle_topics``) each
    child gets the share its own topics carry (``measured`` true); else topics are assumed
    spread evenly over the hash range (``fraction`` of the range; topics rounded so that they
    sum to the bundle's).

    Raises:
        BalancerError: an unknown bundle (``field`` "bundle"), or boundaries outside it.
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    parsed = parse_bundle_name(bundle)
    lower, upper = parsed.range.lower, parsed.range.upper
    points = [lower, *sorted(boundaries), upper]
    if any(b <= a for a, b in itertools.pairwise(points)):
        raise BalancerError(
            f"boundaries must lie strictly inside {parsed.range.label}", field="positions"
        )
    load = snapshot.bundles[bundle]
    width = upper - lower
    known = snapshot.bundle_topics.get(bundle)
    if known is not None:
        return _measured_children(parsed.namespace, points, known)
    out = []
    topics_given = 0
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        fraction = (b - a) / width
        topics = (
            load.topics - topics_given
            if i == len(points) - 2
            else round(load.topics * (b - lower) / width) - topics_given
        )
        topics_given += topics
        out.append(
            {
                "bundle": f"{parsed.namespace}/{format_hash(a)}_{format_hash(b)}",
                "fraction": fraction,
                "throughput": load.short_term.throughput * fraction,
                "msgRate": load.short_term.msg_rate * fraction,
                "topics": topics,
                "measured": False,
            }
        )
    return out


def _measured_children(
    namespace: str, points: Sequence[int], topics: Sequence[TopicLoad]
) -> list[dict[str, Any]]:
    """``split_child_loads`` from the bundle's topics: each child's topics and their rates; the
    fraction is the child's share of the bundle's throughput (of its topics when none flows)."""
    total = math.fsum(t.throughput for t in topics)
    out = []
    last = len(points) - 2
    for i, (a, b) in enumerate(itertools.pairwise(points)):
        mine = [t for t in topics if a <= t.hash < b or (i == last and t.hash == b)]
        throughput = math.fsum(t.throughput for t in mine)
        share = throughput / total if total > 0 else len(mine) / max(1, len(topics))
        out.append(
            {
                "bundle": f"{namespace}/{format_hash(a)}_{format_hash(b)}",
                "fraction": share,
                "throughput": throughput,
                "msgRate": math.fsum(t.msg_rate for t in mine),
                "topics": len(mine),
                "measured": True,
            }
        )
    return out


def plan_split(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    bundle: str,
    algorithm: str | None = None,
    positions: Sequence[int] | None = None,
    *,
    force: bool = False,
) -> CyclePlan:
    """An operator splits ``bundle`` with ``algorithm`` (default: the configured one) at its
    boundaries; the children are unowned and are placed by the next lookup or cycle (Pulsar's
    ``loadBalancerAutoUnloadSplitBundlesEnabled``). A blacklisted bundle is vetoed unless
    ``force``.

    Raises:
        UnknownStrategy: an unknown algorithm.
        BalancerError: an unknown bundle (``field`` "bundle"), missing or bad positions.
    """
    if bundle not in snapshot.bundles:
        raise BalancerError(f"unknown bundle {bundle!r}", field="bundle")
    name = get_split_algorithm(algorithm or config.strategies.split_algorithm)[0]
    action = _split_action(
        snapshot, config, bundle, name, positions, f"operator split of {bundle}", "Operator"
    )
    pattern = matching_pattern(bundle, config.safety.blacklist)
    if action.veto is None and pattern is not None:
        action = replace(
            action,
            veto=Reason.BLACKLISTED,
            forced=force,
            explanation=f"{bundle} matches the blacklist pattern {pattern!r}; "
            + action.explanation,
        )
    serving = _serving(snapshot, config, snapshot.now)
    return _operator_plan(snapshot, config, {}, [replace(action, strategy="operator")], serving)


def plan_drain(
    snapshot: ClusterSnapshot, config: CycleConfig, state: Mapping[str, Any], broker: str
) -> CyclePlan:
    """An operator drains ``broker``: it leaves the active set and every bundle it owns is
    re-placed in this plan; once all have a new owner it is drained. Vetoed (NotEnoughBrokers)
    when no other serving broker would be left.

    Raises:
        BalancerError: an unknown broker (``field`` "broker").
    """
    if broker not in snapshot.brokers:
        raise BalancerError(f"unknown broker {broker!r}", field="broker")
    now = snapshot.now
    current = snapshot.brokers[broker].state
    serving_before = _serving(snapshot, config, now)
    serving = [n for n in serving_before if n != broker]
    change = Action(
        ActionKind.BROKER_STATE,
        broker,
        current,
        "draining",
        str(Reason.DRAIN),
        f"operator drains {broker}: its {len(snapshot.owned_by(broker))} bundle(s) move away",
        strategy="operator",
    )
    if not serving:
        vetoed = replace(
            change,
            veto=Reason.NOT_ENOUGH_BROKERS,
            explanation=f"draining {broker} would leave no serving broker",
        )
        return _operator_plan(snapshot, config, state, [vetoed], serving_before)
    if current == "draining":
        change = replace(change, explanation=f"{broker} is draining already")
    brokers = {**snapshot.brokers, broker: replace(snapshot.brokers[broker], state="draining")}
    draining = ClusterSnapshot(
        snapshot.now, brokers, snapshot.bundles, snapshot.namespaces, snapshot.recently_unloaded
    )
    # Only this broker's bundles: other draining brokers move at the next cycle.
    unloads = [
        u
        for u in _life_cycle_unloads(draining, [], {broker}, now, config.safety)
        if u.source == broker
    ]
    placement = _cycle_placement(config.strategies.placement)
    actions, remembered = _place(
        draining, config, dict(state.get(placement, {})), unloads, serving, placement
    )
    actions = [a for a in actions if a.source == broker]
    drained = [a for a in _drained(draining, actions, []) if a.target == broker]
    actions = [change, *actions, *drained]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    return _operator_plan(draining, config, out_state, actions, serving, serving_before)


def plan_activate(snapshot: ClusterSnapshot, config: CycleConfig, broker: str) -> CyclePlan:
    """An operator returns ``broker`` to the active set (it takes bundles again).

    Raises:
        BalancerError: an unknown broker (``field`` "broker").
    """
    if broker not in snapshot.brokers:
        raise BalancerError(f"unknown broker {broker!r}", field="broker")
    current = snapshot.brokers[broker].state
    change = Action(
        ActionKind.BROKER_STATE,
        broker,
        current,
        "active",
        str(Reason.OPERATOR),
        f"operator activates {broker} (was {current})",
        strategy="operator",
    )
    serving = _serving(snapshot, config, snapshot.now)
    lost, _ = broker_life(snapshot, config.safety, snapshot.now)
    # After it, the broker serves too (unless lost): the figures after are over it as well.
    after = serving if broker in serving or broker in lost else [*serving, broker]
    return _operator_plan(snapshot, config, {}, [change], after, serving)


def apply_to_owners(
    plan: CyclePlan,
    owners: dict[str, str | None],
    recently_unloaded: dict[str, Seconds],
    now: Seconds,
) -> int:
    """Apply a plan's planned unloads and placements to an in-memory ownership map (the offline
    simulator's and the benchmark's metadata store); returns the number of unloads applied.
    An action whose bundle is not owned as the plan expects is skipped, never applied twice."""
    moved = 0
    for action in plan.planned():
        if action.kind == ActionKind.UNLOAD:
            if owners.get(action.target) != action.source:
                continue
            owners[action.target] = None
            recently_unloaded[action.target] = now
            moved += 1
        elif (
            action.kind == ActionKind.PLACE
            and action.destination is not None
            and owners.get(action.target) is None
        ):
            owners[action.target] = action.destination
    return moved


def plan_placement(
    snapshot: ClusterSnapshot,
    config: CycleConfig,
    state: Mapping[str, Any],
    bundles: Sequence[str],
    now: Seconds | None = None,
) -> CyclePlan:
    """Place unowned ``bundles`` with the configured placement over the serving brokers (a
    client's lookup of a topic whose bundle nobody owns): the cycle's placement step alone."""
    now = snapshot.now if now is None else now
    serving = _serving(snapshot, config, now)
    placement = _cycle_placement(config.strategies.placement)
    wanted = [b for b in bundles if b in snapshot.bundles and snapshot.bundles[b].owner is None]
    explain = _explains(wanted, serving)
    actions: list[Action] = []
    remembered: dict[str, Any] = {}
    if wanted and placement in DANUBE_PLACEMENT:
        placements, remembered = _danube_placements(
            snapshot, config, dict(state.get(placement, {})), wanted, serving, {}, placement
        )
    elif wanted:
        placements, after = place_many(
            snapshot,
            wanted,
            config.pulsar,
            {**state.get(placement, {}), "preallocated": {}},
            strategy=placement,
            candidates=serving,
            explain=explain,
        )
        remembered = {k: v for k, v in after.items() if k != "preallocated"}
    if wanted:
        actions = [_place_action(p, placement, "", explained=explain) for p in placements]
    out_state = {**state, placement: remembered} if remembered else dict(state)
    plan = _operator_plan(snapshot, config, out_state, actions, serving)
    return replace(plan, reason=str(Reason.LEAST_LOADED), strategy=placement)
