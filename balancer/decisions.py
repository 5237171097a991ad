"""What the balancer decides, each with its reason and the numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Reason(StrEnum):
    """Why something was unloaded, skipped, placed, or why a cycle stayed quiet (CLI.md names)."""

    OVERLOADED = "Overloaded"
    UNDERLOADED = "Underloaded"
    LOAD_IMBALANCE = "LoadImbalance"
    BALANCED = "Balanced"
    NO_LOAD_DATA = "NoLoadData"
    NO_BROKERS = "NoBrokers"
    COOL_DOWN = "CoolDown"
    SOLE_BUNDLE = "SoleBundle"
    NO_BUNDLES = "NoBundles"
    BELOW_MIN_THROUGHPUT = "BelowMinThroughput"
    LEAST_LOADED = "LeastLoaded"
    ALL_OVERLOADED = "AllOverloaded"
    NO_CANDIDATES = "NoCandidates"
    INACTIVE = "Inactive"
    TOO_MANY_TOPICS = "TooManyTopics"
    NOT_LEAST_BUNDLES = "NotLeastBundlesOfNamespace"
    RESELECTED_OVERLOADED = "ReselectedOverloaded"
    ANTI_AFFINITY = "AntiAffinity"
    RATE_LIMITED = "RateLimited"
    NOT_ENOUGH_BROKERS = "NotEnoughBrokers"
    DISABLED = "Disabled"
    BLACKLISTED = "Blacklisted"
    TOO_YOUNG = "TooYoung"
    ROUND_ROBIN = "RoundRobin"
    HINT = "Hint"
    NOT_OWNER = "NotOwner"
    DRAIN = "Drain"
    BROKER_LOST = "BrokerLost"
    ADMIN = "Admin"
    HIT_COUNT = "HitCount"
    OUTDATED_DATA = "OutDatedData"
    GRACE_PERIOD = "GracePeriod"
    DESTINATION = "StrategyDestination"
    NOT_SERVING = "NotServing"
    NO_TOPIC_DATA = "NoTopicData"
    OPERATOR = "Operator"
    ALREADY_MOVING = "AlreadyMoving"
    UNKNOWN_BUNDLE = "UnknownBundle"
    IMPLAUSIBLE = "ImplausibleReading"


# The figure that ranked an unload, and its unit (CLI.md ``metric``).
METRIC_UNITS: dict[str, str] = {
    "msgThroughput": "bytes/s",
    "msgRate": "msg/s",
    "topicLoad": "score",
    "longTermMsgRate": "msg/s",
    "weightedUsage": "fraction",
    "rankingScore": "score",
    "predictedGain": "fraction",
}


@dataclass(frozen=True, slots=True)
class Unload:
    """Release ``bundle`` from ``source``; ``destination`` None lets placement choose later.

    ``load`` is the figure that ranked the bundle, named by ``metric`` (a key of METRIC_UNITS:
    ``msgThroughput`` bytes/s of short-term throughput for most of Pulsar's shedders, ``msgRate``
    msg/s where a shedder ranked by message rate)."""

    bundle: str
    source: str
    destination: str | None
    reason: Reason
    load: float
    metric: str = "msgThroughput"

    def as_dict(self) -> dict[str, Any]:
        """The CLI form: ``{"bundle", "source", "destination", "reason", "load"}``."""
        return {
            "bundle": self.bundle,
            "source": self.source,
            "destination": self.destination,
            "reason": str(self.reason),
            "load": self.load,
            "metric": {"name": self.metric, "value": self.load, "unit": METRIC_UNITS[self.metric]},
        }


@dataclass(frozen=True, slots=True)
class Skip:
    """Something left alone and why: ``kind`` is "broker" or "bundle"."""

    kind: str
    name: str
    reason: Reason
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The CLI form: ``{"broker" or "bundle": name, "reason", "detail"}``."""
        out: dict[str, Any] = {self.kind: self.name, "reason": str(self.reason)}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class SheddingDecision:
    """One shedding cycle's result.

    Attributes:
        unloads: in selection order.
        reason: why the cycle acted (e.g. Overloaded) or stayed quiet (Balanced, NoLoadData).
        skipped: brokers and bundles left alone, with reasons.
        stats: the numbers behind it (avgUsage, per-broker usage as fractions, thresholds).
        state: what the strategy remembers for the next cycle; feed it back unchanged.
        strategy: the registry name of the shedder.
        splits: bundles the strategy asks the cycle to split rather than move (too big to
            move: FulcrumShedder).
    """

    unloads: tuple[Unload, ...]
    reason: Reason
    skipped: tuple[Skip, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    strategy: str = ""
    splits: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The CLI output document of ``shed``."""
        return {
            "unloads": [u.as_dict() for u in self.unloads],
            "reason": str(self.reason),
            "state": self.state,
            "stats": self.stats,
            "skipped": [s.as_dict() for s in self.skipped],
        }


@dataclass(frozen=True, slots=True)
class Rejection:
    """A broker removed from the candidates by a placement filter, and why."""

    broker: str
    filter: str
    reason: Reason
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The CLI form of one ``filtered`` entry."""
        return {
            "broker": self.broker,
            "filter": self.filter,
            "reason": str(self.reason),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Placement:
    """Which broker gets ``bundle``; ``broker`` None when no candidate was left.

    ``scores`` holds each candidate's figure (LeastLongTermMessageRate: msg/s, inf when overloaded).
    """

    bundle: str
    broker: str | None
    reason: Reason
    candidates: tuple[str, ...]
    filtered: tuple[Rejection, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    strategy: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The CLI output document of ``place``."""
        return {
            "bundle": self.bundle,
            "broker": self.broker,
            "reason": str(self.reason),
            "candidates": list(self.candidates),
            "filtered": [r.as_dict() for r in self.filtered],
            "scores": {k: (None if v == float("inf") else v) for k, v in self.scores.items()},
            "state": self.state,
        }
