"""Strategies and algorithms by name. Names are Pulsar's class simple names (CLI.md); snake_case
aliases are accepted case-insensitively (``threshold_shedder``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from balancer.bundles import BundleRange
from balancer.config import MAY_BE_NEGATIVE, PULSAR_KEYS, PulsarConfig
from balancer.danube import rebalance
from balancer.danube.config import KEYS as DANUBE_KEYS
from balancer.danube.config import DanubeConfig
from balancer.decisions import SheddingDecision
from balancer.errors import BalancerError, UnknownStrategy
from balancer.load import TopicLoad
from balancer.names import PlacementName, ShedderName, SplitAlgorithmName
from balancer.placement.selection import SELECTORS
from balancer.shedding import avg, fulcrum, overload, threshold, transfer, uniform
from balancer.snapshot import ClusterSnapshot
from balancer.splitting import algorithms
from balancer.units import HashPoint

Shedder = Callable[[ClusterSnapshot, Any, dict[str, Any]], SheddingDecision]
SplitAlgorithm = Callable[
    [BundleRange, Sequence[TopicLoad], Sequence[HashPoint] | None, PulsarConfig],
    list[HashPoint] | None,
]

SHEDDERS: Final[Mapping[str, Shedder]] = {
    ShedderName.THRESHOLD: threshold.shed,
    ShedderName.OVERLOAD: overload.shed,
    ShedderName.UNIFORM_LOAD: uniform.shed,
    ShedderName.AVG: avg.shed,
    ShedderName.TRANSFER: transfer.shed,
    ShedderName.DANUBE: rebalance.shed,
    ShedderName.FULCRUM: fulcrum.shed,
}
DANUBE_PLACEMENT: Final[tuple[str, ...]] = (
    PlacementName.DANUBE_FAIR,
    PlacementName.DANUBE_BALANCED,
    PlacementName.DANUBE_WEIGHTED_LOAD,
)
PLACEMENT_STRATEGIES: Final[tuple[str, ...]] = (*SELECTORS, *DANUBE_PLACEMENT)
# Danube's strategies read Danube's keys; everything else reads Pulsar's.
DANUBE_STRATEGIES: Final = frozenset({ShedderName.DANUBE, *DANUBE_PLACEMENT})


def config_class(strategy: str) -> type[PulsarConfig] | type[DanubeConfig]:
    """The configuration family of a (canonical) strategy name."""
    return DanubeConfig if strategy in DANUBE_STRATEGIES else PulsarConfig


SPLIT_ALGORITHMS: Final[Mapping[str, SplitAlgorithm]] = {
    SplitAlgorithmName.RANGE_EQUALLY_DIVIDE: algorithms.range_equally_divide_split,
    SplitAlgorithmName.TOPIC_COUNT_EQUALLY_DIVIDE: algorithms.topic_count_equally_divide,
    SplitAlgorithmName.SPECIFIED_POSITIONS_DIVIDE: algorithms.specified_positions_divide,
    SplitAlgorithmName.FLOW_OR_QPS_EQUALLY_DIVIDE: algorithms.flow_or_qps_equally_divide,
}

T = TypeVar("T")


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def canonical_name(name: str, available: Mapping[str, T] | tuple[str, ...], field: str) -> str:
    """The registry's own spelling of ``name``.

    Raises:
        UnknownStrategy: no such name; the message lists the valid ones.
    """
    for known in available:
        if _key(known) == _key(name):
            return known
    raise UnknownStrategy(name, available=sorted(available), field=field)


def get_shedder(name: str) -> tuple[str, Shedder]:
    """(canonical name, shedder) for ``name``; raises UnknownStrategy."""
    canonical = canonical_name(name, SHEDDERS, "strategy")
    return canonical, SHEDDERS[canonical]


def get_placement_strategy(name: str) -> str:
    """Canonical name of a placement strategy; raises UnknownStrategy."""
    return canonical_name(name, PLACEMENT_STRATEGIES, "strategy")


def get_split_algorithm(name: str) -> tuple[str, SplitAlgorithm]:
    """(canonical name, algorithm) for ``name``; raises UnknownStrategy."""
    canonical = canonical_name(name, SPLIT_ALGORITHMS, "algorithm")
    return canonical, SPLIT_ALGORITHMS[canonical]


# ---------------------------------------------------------------------------------------------
# What each strategy is, whether the console can run it, and the parameters it reads: the one
# description that the admin, the API and the config editor validate from.


@dataclass(frozen=True, slots=True)
class Parameter:
    """One reference configuration key, in its own unit (percent, minutes, MiB...).

    ``minimum``/``maximum`` bound valid values (None: unbounded); ``default`` is in ``unit``."""

    key: str
    unit: str
    default: float | int | bool | str
    minimum: float | None
    maximum: float | None
    source: str

    def as_dict(self) -> dict[str, object]:
        """``{"key", "unit", "default", "minimum", "maximum", "source"}``."""
        return {
            "key": self.key,
            "unit": self.unit,
            "default": self.default,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class StrategyInfo:
    """A registry entry: ``kind`` is shedder, placement or split; ``in_console`` says whether
    the console's cycle (which moves bundles) can run it, ``why_not`` why not."""

    name: str
    kind: str
    source: str
    summary: str
    in_console: bool
    parameters: tuple[str, ...]
    why_not: str = ""

    def as_dict(self) -> dict[str, object]:
        """The entry with its parameters described in full."""
        return {
            "name": self.name,
            "kind": self.kind,
            "source": self.source,
            "summary": self.summary,
            "inConsole": self.in_console,
            "whyNot": self.why_not,
            "parameters": [parameter(k).as_dict() for k in self.parameters],
        }


# Units of the keys whose converter keeps the value as it is (the others follow the converter).
_UNITS: Final[Mapping[str, str]] = {
    "loadBalancerHistoryResourcePercentage": "fraction",
    "maxUnloadPercentage": "fraction",
    "loadBalancerBrokerLoadTargetStd": "fraction",
    "loadBalancerMsgRateDifferenceShedderThreshold": "%",
    "loadBalancerAvgShedderLowThreshold": "%",
    "loadBalancerAvgShedderHighThreshold": "%",
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": "×",
    "minUnloadMessage": "msg/s",
    "minUnloadMessageThroughput": "bytes/s",
    "loadBalancerNamespaceBundleMaxMsgRate": "msg/s",
    "loadBalanceSheddingDelayInSeconds": "s",
    "loadBalancerBrokerLoadDataTTLInSeconds": "s",
}
_FRACTIONS: Final = frozenset({"loadBalancerHistoryResourcePercentage", "maxUnloadPercentage"})
_SECTION: Final = "PULSAR.md §12"


_DANUBE_UNITS: Final[Mapping[str, str]] = {
    "enabled": "true/false",
    "aggressiveness": "name",
    "cv_threshold": "fraction",
    "check_interval_seconds": "s",
    "max_moves_per_hour": "count",
    "cooldown_seconds": "s",
    "min_brokers_for_rebalance": "count",
    "min_topic_age_seconds": "s",
    "blacklist_topics": "patterns",
    "assignment_strategy": "name",
    "seed": "count",
}


def _danube_parameter(key: str) -> Parameter:
    name, _ = DANUBE_KEYS[key]
    default = getattr(DanubeConfig(), name)
    if isinstance(default, tuple):
        default = ",".join(default)
    unit = _DANUBE_UNITS[key]
    numeric = unit in ("fraction", "s", "count")
    return Parameter(
        key,
        unit,
        default,
        0.0 if numeric else None,
        1.0 if unit == "fraction" else None,
        "DANUBE.md §6 (balanced preset)",
    )


# Fulcrum's own keys: unit, minimum, maximum.
_FULCRUM: Final[Mapping[str, tuple[str, float, float | None]]] = {
    "fulcrumMinGainPercentage": ("%", 0.0, 100.0),
    "fulcrumMaxMovesPerCycle": ("count", 0.0, None),
    "fulcrumMaxMovesPerHour": ("count", 0.0, None),
    "fulcrumBundleCoolDownMinutes": ("min", 0.0, None),
}


def _fulcrum_parameter(key: str) -> Parameter:
    name, convert = PULSAR_KEYS[key]
    unit, minimum, maximum = _FULCRUM[key]
    value = getattr(PulsarConfig(), name)
    back = {"_percent": 100.0, "_minutes": 1 / 60.0}.get(convert.__name__, 1.0)
    return Parameter(
        key,
        unit,
        round(value * back, 6) if back != 1.0 else value,
        minimum,
        maximum,
        "Fulcrum, docs/developers/cycle.md § Fulcrum's own strategy",
    )


def parameter(key: str) -> Parameter:
    """The description of one reference key: Pulsar's (PULSAR.md §12, from PulsarConfig) or
    Danube's (DANUBE.md §6, from DanubeConfig; defaults of the balanced preset).

    Raises:
        KeyError: not a known key.
    """
    if key not in PULSAR_KEYS:
        return _danube_parameter(key)
    if key.startswith("fulcrum"):
        return _fulcrum_parameter(key)
    name, convert = PULSAR_KEYS[key]
    default = getattr(PulsarConfig(), name)
    unit = _UNITS.get(key)
    if isinstance(default, bool):
        return Parameter(key, "true/false", default, None, None, _SECTION)
    if isinstance(default, str):
        return Parameter(key, "name", default, None, None, _SECTION)
    if unit is None:
        unit = {
            "_percent": "%",
            "_minutes": "min",
            "_mib": "MiB/s",
        }.get(convert.__name__, "count" if isinstance(default, int) else "weight")
    back = {"_percent": 100.0, "_minutes": 1 / 60.0, "_mib": 1.0 / (1024 * 1024)}.get(
        convert.__name__, 1.0
    )
    value: float | int = default * back if back != 1.0 else default
    if isinstance(default, float) and back != 1.0:
        value = round(value, 6)
    minimum: float | None = -1.0 if key in MAY_BE_NEGATIVE else 0.0
    maximum: float | None = (
        100.0 if convert.__name__ == "_percent" else (1.0 if key in _FRACTIONS else None)
    )
    return Parameter(key, unit, value, minimum, maximum, _SECTION)


_COMMON: Final = ("loadBalancerSheddingGracePeriodMinutes",)
_WEIGHTS: Final = (
    "loadBalancerCPUResourceWeight",
    "loadBalancerMemoryResourceWeight",
    "loadBalancerDirectMemoryResourceWeight",
    "loadBalancerBandwidthInResourceWeight",
    "loadBalancerBandwidthOutResourceWeight",
)
_FILTERS: Final = (
    "loadBalancerBrokerMaxTopics",
    "loadBalancerDistributeBundlesEvenlyEnabled",
    "failureDomainsEnabled",
    "loadBalancerBrokerOverloadedThresholdPercentage",
)
_SPLIT: Final = (
    "loadBalancerNamespaceBundleMaxTopics",
    "loadBalancerNamespaceBundleMaxSessions",
    "loadBalancerNamespaceBundleMaxMsgRate",
    "loadBalancerNamespaceBundleMaxBandwidthMbytes",
    "loadBalancerNamespaceMaximumBundles",
)
_DANUBE_KEYS: Final = (
    "aggressiveness",
    "cv_threshold",
    "check_interval_seconds",
    "max_moves_per_hour",
    "cooldown_seconds",
    "min_brokers_for_rebalance",
    "min_topic_age_seconds",
    "blacklist_topics",
    "enabled",
)
ENTRIES: Final[tuple[StrategyInfo, ...]] = (
    StrategyInfo(
        ShedderName.THRESHOLD,
        "shedder",
        "Pulsar ThresholdShedder, PULSAR.md §2",
        "EMA of each broker's weighted max usage; sheds from brokers above mean + threshold",
        True,
        (
            "loadBalancerBrokerThresholdShedderPercentage",
            "loadBalancerHistoryResourcePercentage",
            "loadBalancerBundleUnloadMinThroughputThreshold",
            "lowerBoundarySheddingEnabled",
            *_WEIGHTS,
            *_COMMON,
        ),
    ),
    StrategyInfo(
        ShedderName.OVERLOAD,
        "shedder",
        "Pulsar OverloadShedder, PULSAR.md §3",
        "sheds from brokers whose max usage is above the overload bar",
        True,
        (
            "loadBalancerBrokerOverloadedThresholdPercentage",
            "loadBalancerBundleUnloadMinThroughputThreshold",
            *_COMMON,
        ),
    ),
    StrategyInfo(
        ShedderName.UNIFORM_LOAD,
        "shedder",
        "Pulsar UniformLoadShedder, PULSAR.md §4",
        "evens msg rate (then throughput) between the busiest and the idlest broker",
        True,
        (
            "loadBalancerMsgRateDifferenceShedderThreshold",
            "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
            "maxUnloadPercentage",
            "minUnloadMessage",
            "minUnloadMessageThroughput",
            "maxUnloadBundleNumPerShedding",
            *_COMMON,
        ),
    ),
    StrategyInfo(
        ShedderName.AVG,
        "shedder",
        "Pulsar AvgShedder (PIP-364), PULSAR.md §5",
        "pairs the hottest with the coolest brokers after repeated hits; chooses the destination",
        True,
        (
            "loadBalancerAvgShedderLowThreshold",
            "loadBalancerAvgShedderHighThreshold",
            "loadBalancerAvgShedderHitCountLowThreshold",
            "loadBalancerAvgShedderHitCountHighThreshold",
            "maxUnloadPercentage",
            "minUnloadMessage",
            "minUnloadMessageThroughput",
            *_COMMON,
        ),
    ),
    StrategyInfo(
        ShedderName.TRANSFER,
        "shedder",
        "Pulsar TransferShedder (extensible load manager), PULSAR.md §6",
        "transfers top bundles from the most to the least loaded brokers while the std of "
        "load stays above target",
        True,
        (
            "loadBalancerBrokerLoadTargetStd",
            "loadBalancerMaxNumberOfBrokerSheddingPerCycle",
            "loadBalancerSheddingConditionHitCountThreshold",
            "loadBalanceSheddingDelayInSeconds",
            "loadBalancerBrokerLoadDataTTLInSeconds",
            "loadBalancerMaxNumberOfBundlesInBundleLoadReport",
            "loadBalancerTransferEnabled",
            "loadBalancerSheddingBundlesWithPoliciesEnabled",
            "loadBalancerDebugModeEnabled",
            *_COMMON,
        ),
    ),
    StrategyInfo(
        ShedderName.DANUBE,
        "shedder",
        "Danube CV rebalancer, DANUBE.md §4–7 (bundles as its topics)",
        "one bundle per cycle from an overloaded broker to the least loaded, when the CV of the "
        "brokers' ranking scores exceeds the preset's threshold",
        True,
        _DANUBE_KEYS,
    ),
    StrategyInfo(
        ShedderName.FULCRUM,
        "shedder",
        "Fulcrum, docs/developers/cycle.md § Fulcrum's own strategy",
        "moves the bundles with the largest predicted gain (background load unmovable, the "
        "fullest resource decides) above a minimum gain, within a move budget; swaps when no "
        "single move gains; never back within the hour",
        True,
        (
            "fulcrumMinGainPercentage",
            "fulcrumMaxMovesPerCycle",
            "fulcrumMaxMovesPerHour",
            "fulcrumBundleCoolDownMinutes",
            *_WEIGHTS,
            *_COMMON,
            "loadBalancerBrokerMaxTopics",
            "failureDomainsEnabled",
        ),
    ),
    StrategyInfo(
        PlacementName.FULCRUM,
        "placement",
        "Fulcrum, docs/developers/cycle.md § Fulcrum's own strategy",
        "the broker with the least predicted usage once the bundle is on it (idle and new "
        "brokers first)",
        True,
        (*_WEIGHTS, *_FILTERS),
    ),
    StrategyInfo(
        PlacementName.LEAST_LONG_TERM_MESSAGE_RATE,
        "placement",
        "Pulsar LeastLongTermMessageRate, PULSAR.md §7.1",
        "least long-term msg rate of owned + preallocated bundles",
        True,
        _FILTERS,
    ),
    StrategyInfo(
        PlacementName.LEAST_RESOURCE_USAGE_WITH_WEIGHT,
        "placement",
        "Pulsar LeastResourceUsageWithWeight, PULSAR.md §7.2",
        "brokers at least the margin below the mean weighted usage (EMA)",
        True,
        (
            "loadBalancerAverageResourceUsageDifferenceThresholdPercentage",
            "loadBalancerHistoryResourcePercentage",
            *_WEIGHTS,
            *_FILTERS,
        ),
    ),
    StrategyInfo(
        ShedderName.AVG,
        "placement",
        "Pulsar AvgShedder placement, PULSAR.md §5",
        "the broker AvgShedder chose; the cycle honours it as the unload's destination",
        False,
        (),
        "the cycle honours AvgShedder's destination itself; choose another placement for "
        "the bundles it did not move",
    ),
    *(
        StrategyInfo(
            n,
            "placement",
            "Danube rankings, DANUBE.md §2–3 (bundles as its topics)",
            "round-robin among the active brokers within 10 % of the least ranking score",
            True,
            ("assignment_strategy",),
        )
        for n in DANUBE_PLACEMENT
    ),
    StrategyInfo(
        SplitAlgorithmName.RANGE_EQUALLY_DIVIDE,
        "split",
        "Pulsar, PULSAR.md §9.2",
        "the midpoint of the bundle's range",
        True,
        _SPLIT,
    ),
    StrategyInfo(
        SplitAlgorithmName.SPECIFIED_POSITIONS_DIVIDE,
        "split",
        "Pulsar, PULSAR.md §9.2",
        "at the operator's positions",
        True,
        (),
    ),
    StrategyInfo(
        SplitAlgorithmName.TOPIC_COUNT_EQUALLY_DIVIDE,
        "split",
        "Pulsar, PULSAR.md §9.2",
        "halves the bundle's topics (needs its owner's per-topic stats: bundleStats.*.topicStats)",
        True,
        (),
    ),
    StrategyInfo(
        SplitAlgorithmName.FLOW_OR_QPS_EQUALLY_DIVIDE,
        "split",
        "Pulsar, PULSAR.md §9.2",
        "cuts so that no child exceeds the bundle msg-rate or bandwidth limits (needs its "
        "owner's per-topic stats: bundleStats.*.topicStats)",
        True,
        (
            "flowOrQpsDifferenceThresholdPercentage",
            "loadBalancerNamespaceBundleMaxMsgRate",
            "loadBalancerNamespaceBundleMaxBandwidthMbytes",
        ),
    ),
)


def strategy_info(kind: str, name: str) -> StrategyInfo:
    """The registry entry of ``name`` (any spelling) among ``kind``'s strategies.

    Raises:
        UnknownStrategy: no such strategy of that kind; the message lists the valid ones.
    """
    entries = {i.name: i for i in ENTRIES if i.kind == kind}
    field_name = "algorithm" if kind == "split" else "strategy"
    return entries[canonical_name(name, tuple(entries), field_name)]


def console_strategy(kind: str, name: str, field: str) -> str:
    """The registry's name of a strategy the console's cycle can run.

    Raises:
        UnknownStrategy: an unknown name (the message lists the valid ones).
        BalancerError: a strategy the cycle cannot run, with why and the names it runs;
            ``field`` names the input at fault.
    """
    info = strategy_info(kind, name)
    if not info.in_console:
        raise BalancerError(
            f"{info.name}: {info.why_not}; the console runs {', '.join(console_names(kind))}",
            field=field,
        )
    return info.name


def console_names(kind: str) -> tuple[str, ...]:
    """The names of ``kind`` that the console's cycle can run, in registry order."""
    return tuple(i.name for i in ENTRIES if i.kind == kind and i.in_console)


def split_keys(keys: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Pulsar keys, Danube keys) of one configuration that may hold both families; a key
    neither knows stays with Pulsar's, whose parser names it as unknown."""
    danube = {k: v for k, v in keys.items() if k in DANUBE_KEYS and k not in PULSAR_KEYS}
    return {k: v for k, v in keys.items() if k not in danube}, danube


def parameter_errors(keys: Mapping[str, object], path: str = "parameters") -> dict[str, str]:
    """Every problem with ``keys`` (Pulsar or Danube reference keys and values), by key: unknown
    keys, wrong types, values outside the parameter's range. Empty when all are valid."""
    errors: dict[str, str] = {}
    for key, value in keys.items():
        try:
            if key in DANUBE_KEYS and key not in PULSAR_KEYS:
                DanubeConfig.from_keys({key: value}, path)
            else:
                PulsarConfig.from_keys({key: value}, path)
        except BalancerError as exc:
            errors[key] = exc.message
            continue
        info = parameter(key)
        if info.maximum is not None and isinstance(value, int | float) and value > info.maximum:
            errors[key] = f"{key} must be at most {info.maximum:g} {info.unit}"
    return errors
