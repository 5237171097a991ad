"""Every strategy's and split algorithm's name, in one place (the registry maps them to code).

Pulsar's are its class simple names (CLI.md), Danube's its own words, Fulcrum's its own. Each is a
``StrEnum``: a member is the string itself (``ShedderName.THRESHOLD == "ThresholdShedder"``), so
stored configs, the API and the wire keep plain strings, and renaming one is a one-line change
that mypy follows to every use. A member's repr is its string's too: a message that quotes a name
(``'AvgShedder'``) reads the same whether it came from the registry or from a request.
"""

from __future__ import annotations

from enum import StrEnum


class _Name(StrEnum):
    def __repr__(self) -> str:
        return repr(self.value)


class ShedderName(_Name):
    """The shedding strategies (``balancer.registry.SHEDDERS``)."""

    THRESHOLD = "ThresholdShedder"
    OVERLOAD = "OverloadShedder"
    UNIFORM_LOAD = "UniformLoadShedder"
    AVG = "AvgShedder"
    TRANSFER = "TransferShedder"
    DANUBE = "danube"
    FULCRUM = "FulcrumShedder"


class PlacementName(_Name):
    """The placement strategies (``balancer.placement.selection.SELECTORS`` and Danube's)."""

    LEAST_LONG_TERM_MESSAGE_RATE = "LeastLongTermMessageRate"
    LEAST_RESOURCE_USAGE_WITH_WEIGHT = "LeastResourceUsageWithWeight"
    AVG = "AvgShedder"  # AvgShedder places too: its own selection (Pulsar's AvgShedder)
    FULCRUM = "FulcrumPlacement"
    DANUBE_FAIR = "fair"
    DANUBE_BALANCED = "balanced"
    DANUBE_WEIGHTED_LOAD = "weighted_load"


class ProposerName(_Name):
    """Who proposed an action no strategy proposed (``Action.strategy``; an operator's plan's
    ``CyclePlan.strategy``)."""

    LIFECYCLE = "lifecycle"  # the broker life cycle: a drained or lost broker's bundles
    OPERATOR = "operator"  # an operator's plan (the console, the API, the CLI)
    AUTO_SPLIT = "auto-split"  # the cycle's split of a bundle past Pulsar's split thresholds


class SplitAlgorithmName(_Name):
    """The split algorithms (``balancer.registry.SPLIT_ALGORITHMS``; Pulsar's names)."""

    RANGE_EQUALLY_DIVIDE = "range_equally_divide"
    TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
    SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
    FLOW_OR_QPS_EQUALLY_DIVIDE = "flow_or_qps_equally_divide"
