"""Strategies and algorithms by name. Names are Pulsar's class simple names (CLI.md); snake_case
aliases are accepted case-insensitively (``threshold_shedder``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from balancer.bundles import BundleRange
from balancer.config import PulsarConfig
from balancer.danube import rebalance
from balancer.danube.config import DanubeConfig
from balancer.decisions import SheddingDecision
from balancer.errors import UnknownStrategy
from balancer.placement.selection import SELECTORS
from balancer.shedding import avg, overload, threshold, transfer, uniform
from balancer.snapshot import ClusterSnapshot
from balancer.splitting import algorithms
from balancer.units import HashPoint

Shedder = Callable[[ClusterSnapshot, Any, dict[str, Any]], SheddingDecision]
SplitAlgorithm = Callable[
    [BundleRange, Sequence[algorithms.TopicLoad], Sequence[HashPoint] | None, PulsarConfig],
    list[HashPoint] | None,
]

SHEDDERS: Final[Mapping[str, Shedder]] = {
    "ThresholdShedder": threshold.shed,
    "OverloadShedder": overload.shed,
    "UniformLoadShedder": uniform.shed,
    "AvgShedder": avg.shed,
    "TransferShedder": transfer.shed,
    "danube": rebalance.shed,
}
DANUBE_PLACEMENT: Final[tuple[str, ...]] = ("fair", "balanced", "weighted_load")
PLACEMENT_STRATEGIES: Final[tuple[str, ...]] = (*SELECTORS, *DANUBE_PLACEMENT)
# Danube's strategies read Danube's keys; everything else reads Pulsar's.
DANUBE_STRATEGIES: Final = frozenset({"danube", *DANUBE_PLACEMENT})


def config_class(strategy: str) -> type[PulsarConfig] | type[DanubeConfig]:
    """The configuration family of a (canonical) strategy name."""
    return DanubeConfig if strategy in DANUBE_STRATEGIES else PulsarConfig


SPLIT_ALGORITHMS: Final[Mapping[str, SplitAlgorithm]] = {
    "range_equally_divide": algorithms.range_equally_divide_split,
    "topic_count_equally_divide": algorithms.topic_count_equally_divide,
    "specified_positions_divide": algorithms.specified_positions_divide,
    "flow_or_qps_equally_divide": algorithms.flow_or_qps_equally_divide,
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
