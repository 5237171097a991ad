"""What a cycle plans with and returns: its config (strategies, Pulsar's tunables, safety), the
actions with their outcome, metric and explanation, the load statistics, the plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Final, TypeAlias, TypeVar, overload

from balancer.config import PulsarConfig
from balancer.danube.config import DanubeConfig
from balancer.decisions import Reason, SheddingDecision
from balancer.hashing import format_hash
from balancer.names import PlacementName, ShedderName, SplitAlgorithmName
from balancer.registry import (
    DANUBE_PLACEMENT,
    console_strategy,
)
from balancer.safety import SafetyConfig

# Split algorithms that cut by the bundle's topics: they need its owner's per-topic stats
# (``ClusterSnapshot.bundle_topics``); the other two need only the bundle's range.
TOPIC_SPLITS: Final = frozenset(
    {SplitAlgorithmName.TOPIC_COUNT_EQUALLY_DIVIDE, SplitAlgorithmName.FLOW_OR_QPS_EQUALLY_DIVIDE}
)


# A cycle's placements list their candidates' scores and filtered brokers (``Action.candidates``)
# when it places at most this many bundles over at most EXPLAINED_BROKERS_TOTAL brokers × bundles:
# the moves of a shedding cycle, not the thousands of bundles of a start.
EXPLAINED_PLACEMENTS: Final = 16


EXPLAINED_BROKERS_TOTAL: Final = 16_000


# At most this many candidates, and as many filtered brokers, per place action.
EXPLAINED_BROKERS: Final = 32


# What each placement's score is, for the metric of a place action.
PLACEMENT_METRICS: Final = {
    PlacementName.LEAST_LONG_TERM_MESSAGE_RATE: "longTermMsgRate",
    PlacementName.LEAST_RESOURCE_USAGE_WITH_WEIGHT: "weightedUsage",
    PlacementName.FULCRUM: "weightedUsage",
    **dict.fromkeys(DANUBE_PLACEMENT, "rankingScore"),
}


# Shedders that read the whole cycle configuration (safety included), and whose destinations are
# checked against Pulsar's hard placement filters only (not the even-distribution heuristic).
FULCRUM_SHEDDERS: Final = frozenset({ShedderName.FULCRUM})


class ActionKind(StrEnum):
    """What an action does (CLI.md ``kind``)."""

    UNLOAD = "unload"
    PLACE = "place"
    SPLIT = "split"
    BROKER_STATE = "brokerState"


@dataclass(frozen=True, slots=True)
class Strategies:
    """The cycle's strategies by registry name (the console's defaults)."""

    shedder: str = ShedderName.FULCRUM
    placement: str = PlacementName.FULCRUM
    split_algorithm: str = SplitAlgorithmName.RANGE_EQUALLY_DIVIDE


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionBase:
    """What every action of a plan carries (one of ``UnloadAction``, ``PlaceAction``,
    ``SplitAction``, ``BrokerStateAction``: the type ``Action``).

    Attributes:
        target: the bundle (or, for a broker-state change, the broker).
        reason: why (Overloaded, BrokerLost, Drain, LeastLoaded, StrategyDestination, Topics...).
        explanation: one sentence with the numbers and their units, made by the core.
        metric: the figure that ranked it, with its unit.
        veto: None when planned; else why it must not be applied.
        forced: an operator overrode ``veto`` explicitly; the action is planned anyway.
        strategy: the strategy (or "lifecycle", "operator") that proposed it.
    """

    kind: ClassVar[ActionKind]
    target: str
    reason: str
    explanation: str
    metric: Metric | None = None
    veto: Reason | None = None
    forced: bool = False
    strategy: str = ""

    @property
    def is_planned(self) -> bool:
        """Whether the action is to be applied (not vetoed, or forced past its veto)."""
        return self.veto is None or self.forced

    @property
    def outcome(self) -> str:
        """``planned`` or ``vetoed``."""
        return "planned" if self.is_planned else "vetoed"

    def _said(self, where: dict[str, Any]) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry, with ``where`` (its bundle or broker and
        where it goes) after its kind."""
        out: dict[str, Any] = {"kind": str(self.kind), **where}
        out |= {"outcome": self.outcome, "reason": self.reason}
        if self.veto is not None:
            out["veto"] = str(self.veto)
        if self.forced:
            out["forced"] = True
        if self.metric is not None:
            out["metric"] = self.metric.as_dict()
        return out

    def _ends(self, out: dict[str, Any]) -> dict[str, Any]:
        out["strategy"] = self.strategy
        out["explanation"] = self.explanation
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class UnloadAction(ActionBase):
    """A bundle leaves its broker.

    Attributes:
        source: the broker it leaves (None only on an operator's unload of a bundle nobody
            owns, vetoed NotOwner).
        destination: where its place action sends it (None: none yet, or no broker can take it).
    """

    kind: ClassVar[ActionKind] = ActionKind.UNLOAD
    source: str | None
    destination: str | None = None

    def to(self, destination: str | None) -> UnloadAction:
        """This unload sending the bundle to ``destination`` (a fast ``dataclasses.replace``)."""
        return UnloadAction(
            target=self.target,
            reason=self.reason,
            explanation=self.explanation,
            metric=self.metric,
            veto=self.veto,
            forced=self.forced,
            strategy=self.strategy,
            source=self.source,
            destination=destination,
        )

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry."""
        where = {"bundle": self.target, "source": self.source, "destination": self.destination}
        return self._ends(self._said(where))


@dataclass(frozen=True, slots=True, kw_only=True)
class PlaceAction(ActionBase):
    """A bundle nobody owns (now, or once its unload is applied) goes to a broker.

    Attributes:
        destination: the broker that takes it (None: no serving broker can; vetoed).
        source: the broker it left, for a move; None for a bundle nobody owned.
        candidates: for the moves of a cycle: every broker the placement scored, best first,
            then every broker its filters removed (at most ``EXPLAINED_BROKERS`` of each; see
            ``EXPLAINED_PLACEMENTS``).
    """

    kind: ClassVar[ActionKind] = ActionKind.PLACE
    destination: str | None
    source: str | None = None
    candidates: tuple[Candidate, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry."""
        where = {"bundle": self.target, "source": self.source, "destination": self.destination}
        out = self._ends(self._said(where))
        if self.candidates:
            out["candidates"] = [c.as_dict() for c in self.candidates]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitAction(ActionBase):
    """A bundle is cut into children, on its owner.

    Attributes:
        source: its owner (None: nobody owns it).
        boundaries: the cut points.
        children: the names of the new bundles.
    """

    kind: ClassVar[ActionKind] = ActionKind.SPLIT
    source: str | None
    boundaries: tuple[int, ...] = ()
    children: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry."""
        out = self._said({"bundle": self.target, "source": self.source, "destination": None})
        out["boundaries"] = [format_hash(b) for b in self.boundaries]
        out["children"] = list(self.children)
        return self._ends(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerStateAction(ActionBase):
    """A broker's state changes (Fulcrum's own: active, draining, drained); ``target`` is the
    broker.

    Attributes:
        previous: its state when the plan was made.
        state: its new state.
    """

    kind: ClassVar[ActionKind] = ActionKind.BROKER_STATE
    previous: str
    state: str

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``actions`` entry (``from``, ``to``: the states)."""
        where = {"broker": self.target, "from": self.previous, "to": self.state}
        return self._ends(self._said(where))


# One action of a plan.
Action: TypeAlias = UnloadAction | PlaceAction | SplitAction | BrokerStateAction


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

    @property
    def measured_cv(self) -> float | None:
        """The CV, or None below two serving brokers (a 0 there would read as balanced)."""
        return self.cv if self.serving >= 2 else None

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


A = TypeVar("A", bound=ActionBase)


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

    @overload
    def planned(self, kind: None = None) -> list[Action]: ...
    @overload
    def planned(self, kind: type[A]) -> list[A]: ...
    @overload
    def planned(self, kind: ActionKind) -> list[Action]: ...
    def planned(self, kind: ActionKind | type[ActionBase] | None = None) -> list[Any]:
        """The actions to apply, optionally of one kind (``ActionKind``, or its type:
        ``plan.planned(UnloadAction)`` is a ``list[UnloadAction]``), in order."""
        if isinstance(kind, type):
            return [a for a in self.actions if a.is_planned and isinstance(a, kind)]
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
        states = self.planned(BrokerStateAction)
        parts += [f"{a.target} {a.previous} -> {a.state}" for a in states]
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


def _cycle_shedder(name: str) -> str:
    return console_strategy("shedder", name, "strategies.shedder")


def _cycle_placement(name: str) -> str:
    return console_strategy("placement", name, "strategies.placement")
