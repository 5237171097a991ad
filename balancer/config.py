"""Balancer tunables: Pulsar's configuration keys, their defaults, and their in-memory units.

Configuration arrives with the reference systems' own key names and units (percent, minutes, MiB);
``PulsarConfig.from_keys`` converts them once, here, to fractions, seconds and bytes.
Defaults are PULSAR.md §12.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from balancer.errors import BalancerError
from balancer.load import ResourceWeights
from balancer.names import PlacementName, ShedderName, SplitAlgorithmName
from balancer.units import MIB


def _percent(value: float) -> float:
    return value / 100.0


def _minutes(value: float) -> float:
    return value * 60.0


def _mib(value: float) -> float:
    return value * MIB


def _same(value: float) -> float:
    return value


@dataclass(frozen=True, slots=True)
class PulsarConfig:
    """Frozen tunables in core units (fractions, seconds, bytes/s)."""

    threshold_shedder_fraction: float = 0.10
    overloaded_threshold_fraction: float = 0.85
    history_resource_fraction: float = 0.9
    bundle_unload_min_throughput_bytes_per_s: float = 10 * MIB
    is_lower_boundary_shedding_enabled: bool = False
    cpu_weight: float = 1.0
    memory_weight: float = 0.0
    direct_memory_weight: float = 0.0
    bandwidth_in_weight: float = 1.0
    bandwidth_out_weight: float = 1.0
    grace_period_s: float = 30 * 60.0
    is_distribute_bundles_evenly_enabled: bool = True
    broker_max_topics: int = 50_000
    is_failure_domains_enabled: bool = False
    # UniformLoadShedder / AvgShedder
    msg_rate_difference_percent: float = 50.0
    msg_throughput_multiplier_difference: float = 4.0
    max_unload_fraction: float = 0.2
    min_unload_msg_per_s: float = 1000.0
    min_unload_throughput_bytes_per_s: float = 1024 * 1024.0
    max_unload_bundles_per_shedding: int = -1
    # AvgShedder
    avg_shedder_low_threshold: float = 15.0
    avg_shedder_high_threshold: float = 40.0
    avg_shedder_hit_count_low: int = 8
    avg_shedder_hit_count_high: int = 2
    # TransferShedder (extensible load manager)
    broker_load_target_std: float = 0.25
    max_brokers_shed_per_cycle: int = 3
    shedding_condition_hit_count: int = 3
    shedding_delay_s: float = 180.0
    broker_load_data_ttl_s: float = 1800.0
    max_bundles_in_load_report: int = 10
    is_transfer_enabled: bool = True
    is_shedding_bundles_with_policies_enabled: bool = False
    is_debug_mode_enabled: bool = False
    # LeastResourceUsageWithWeight
    average_resource_usage_difference_fraction: float = 0.10
    # split detection and algorithms
    bundle_max_topics: int = 1000
    bundle_max_sessions: int = 1000
    bundle_max_msg_rate: float = 30_000.0
    bundle_max_bandwidth_bytes_per_s: float = 100 * MIB
    namespace_max_bundles: int = 128
    flow_or_qps_difference_fraction: float = 0.10
    seed: int = 0
    # FulcrumShedder (Fulcrum's own; docs/developers/cycle.md § "Fulcrum's own strategy")
    fulcrum_min_gain_fraction: float = 0.03
    fulcrum_max_moves_per_cycle: int = 0  # 0: derived from the cluster (half its bundles)
    fulcrum_max_moves_per_hour: int = 0  # 0: no hourly limit
    fulcrum_cool_down_s: float = 600.0
    # Accepted so that a broker.conf's load-balancer section reads as is; the cycle's cadence,
    # strategies and split algorithm come from Fulcrum's own configuration (CycleConfig).
    shedding_interval_s: float = 60.0
    split_interval_s: float = 60.0
    split_condition_hit_count: int = 3
    max_bundles_to_split_per_cycle: int = 10
    default_bundles_per_namespace: int = 4
    is_auto_bundle_split_enabled: bool = True
    is_auto_unload_split_bundles_enabled: bool = True
    load_manager_class_name: str = "ModularLoadManagerImpl"
    shedding_strategy_class: str = ShedderName.THRESHOLD
    placement_strategy_class: str = PlacementName.LEAST_LONG_TERM_MESSAGE_RATE
    default_split_algorithm: str = SplitAlgorithmName.RANGE_EQUALLY_DIVIDE
    supported_split_algorithms: str = ",".join(SplitAlgorithmName)
    topic_bundle_assignment_strategy: str = "ConsistentHashingTopicBundleAssigner"

    @property
    def weights(self) -> ResourceWeights:
        """The five resource weights as one value."""
        return ResourceWeights(
            cpu=self.cpu_weight,
            memory=self.memory_weight,
            direct_memory=self.direct_memory_weight,
            bandwidth_in=self.bandwidth_in_weight,
            bandwidth_out=self.bandwidth_out_weight,
        )

    @classmethod
    def from_keys(cls, keys: Mapping[str, Any], path: str = "config") -> PulsarConfig:
        """Build from reference keys (``{"loadBalancerBrokerThresholdShedderPercentage": 10}``).

        Raises:
            BalancerError: an unknown key (the message lists the valid ones) or a value of the
                wrong type; ``field`` is ``config.<key>``.
        """
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, value in keys.items():
            if key not in PULSAR_KEYS:
                raise BalancerError(
                    f"unknown configuration key {key!r}; "
                    f"valid keys: {', '.join(sorted(PULSAR_KEYS))}",
                    field=f"{path}.{key}",
                )
            name, convert = PULSAR_KEYS[key]
            expected = types[name]
            if expected == "bool":
                if not isinstance(value, bool):
                    raise BalancerError(f"{key} must be true or false", field=f"{path}.{key}")
                changes[name] = value
                continue
            if expected == "str":
                if isinstance(value, list) and all(isinstance(v, str) for v in value):
                    value = ",".join(value)
                if not isinstance(value, str) or not value.strip():
                    raise BalancerError(f"{key} must be a non-empty string", field=f"{path}.{key}")
                changes[name] = value.strip()
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BalancerError(f"{key} must be a number", field=f"{path}.{key}")
            if value < 0 and key not in MAY_BE_NEGATIVE:
                raise BalancerError(f"{key} must not be negative", field=f"{path}.{key}")
            if expected == "int" and not float(value).is_integer():
                raise BalancerError(f"{key} must be a whole number", field=f"{path}.{key}")
            converted = convert(value)
            changes[name] = int(converted) if expected == "int" else float(converted)
        return replace(cls(), **changes)


# Reference key -> (field, converter from the reference unit to the core unit).
PULSAR_KEYS: Final[Mapping[str, tuple[str, Callable[[float], float]]]] = {
    "loadBalancerBrokerThresholdShedderPercentage": ("threshold_shedder_fraction", _percent),
    "loadBalancerBrokerOverloadedThresholdPercentage": ("overloaded_threshold_fraction", _percent),
    "loadBalancerHistoryResourcePercentage": ("history_resource_fraction", _same),
    "loadBalancerBundleUnloadMinThroughputThreshold": (
        "bundle_unload_min_throughput_bytes_per_s",
        _mib,
    ),
    "lowerBoundarySheddingEnabled": ("is_lower_boundary_shedding_enabled", _same),
    "loadBalancerCPUResourceWeight": ("cpu_weight", _same),
    "loadBalancerMemoryResourceWeight": ("memory_weight", _same),
    "loadBalancerDirectMemoryResourceWeight": ("direct_memory_weight", _same),
    "loadBalancerBandwidthInResourceWeight": ("bandwidth_in_weight", _same),
    "loadBalancerBandwidthOutResourceWeight": ("bandwidth_out_weight", _same),
    "loadBalancerBandwithInResourceWeight": ("bandwidth_in_weight", _same),
    "loadBalancerBandwithOutResourceWeight": ("bandwidth_out_weight", _same),
    "loadBalancerSheddingGracePeriodMinutes": ("grace_period_s", _minutes),
    "loadBalancerDistributeBundlesEvenlyEnabled": ("is_distribute_bundles_evenly_enabled", _same),
    "loadBalancerBrokerMaxTopics": ("broker_max_topics", _same),
    "failureDomainsEnabled": ("is_failure_domains_enabled", _same),
    "loadBalancerMsgRateDifferenceShedderThreshold": ("msg_rate_difference_percent", _same),
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": (
        "msg_throughput_multiplier_difference",
        _same,
    ),
    "maxUnloadPercentage": ("max_unload_fraction", _same),
    "minUnloadMessage": ("min_unload_msg_per_s", _same),
    "minUnloadMessageThroughput": ("min_unload_throughput_bytes_per_s", _same),
    "maxUnloadBundleNumPerShedding": ("max_unload_bundles_per_shedding", _same),
    "loadBalancerAvgShedderLowThreshold": ("avg_shedder_low_threshold", _same),
    "loadBalancerAvgShedderHighThreshold": ("avg_shedder_high_threshold", _same),
    "loadBalancerAvgShedderHitCountLowThreshold": ("avg_shedder_hit_count_low", _same),
    "loadBalancerAvgShedderHitCountHighThreshold": ("avg_shedder_hit_count_high", _same),
    "loadBalancerBrokerLoadTargetStd": ("broker_load_target_std", _same),
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": ("max_brokers_shed_per_cycle", _same),
    "loadBalancerSheddingConditionHitCountThreshold": ("shedding_condition_hit_count", _same),
    "loadBalanceSheddingDelayInSeconds": ("shedding_delay_s", _same),
    "loadBalancerBrokerLoadDataTTLInSeconds": ("broker_load_data_ttl_s", _same),
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": ("max_bundles_in_load_report", _same),
    "loadBalancerTransferEnabled": ("is_transfer_enabled", _same),
    "loadBalancerSheddingBundlesWithPoliciesEnabled": (
        "is_shedding_bundles_with_policies_enabled",
        _same,
    ),
    "loadBalancerDebugModeEnabled": ("is_debug_mode_enabled", _same),
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": (
        "average_resource_usage_difference_fraction",
        _percent,
    ),
    "loadBalancerNamespaceBundleMaxTopics": ("bundle_max_topics", _same),
    "loadBalancerNamespaceBundleMaxSessions": ("bundle_max_sessions", _same),
    "loadBalancerNamespaceBundleMaxMsgRate": ("bundle_max_msg_rate", _same),
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": ("bundle_max_bandwidth_bytes_per_s", _mib),
    "loadBalancerNamespaceMaximumBundles": ("namespace_max_bundles", _same),
    "flowOrQpsDifferenceThresholdPercentage": ("flow_or_qps_difference_fraction", _percent),
    "seed": ("seed", _same),
    "fulcrumMinGainPercentage": ("fulcrum_min_gain_fraction", _percent),
    "fulcrumMaxMovesPerCycle": ("fulcrum_max_moves_per_cycle", _same),
    "fulcrumMaxMovesPerHour": ("fulcrum_max_moves_per_hour", _same),
    "fulcrumBundleCoolDownMinutes": ("fulcrum_cool_down_s", _minutes),
    "loadBalancerSheddingIntervalMinutes": ("shedding_interval_s", _minutes),
    "loadBalancerSplitIntervalMinutes": ("split_interval_s", _minutes),
    "loadBalancerNamespaceBundleSplitConditionHitCountThreshold": (
        "split_condition_hit_count",
        _same,
    ),
    "loadBalancerMaxNumberOfBundlesToSplitPerCycle": ("max_bundles_to_split_per_cycle", _same),
    "defaultNumberOfNamespaceBundles": ("default_bundles_per_namespace", _same),
    "loadBalancerAutoBundleSplitEnabled": ("is_auto_bundle_split_enabled", _same),
    "loadBalancerAutoUnloadSplitBundlesEnabled": ("is_auto_unload_split_bundles_enabled", _same),
    "loadManagerClassName": ("load_manager_class_name", _same),
    "loadBalancerLoadSheddingStrategy": ("shedding_strategy_class", _same),
    "loadBalancerLoadPlacementStrategy": ("placement_strategy_class", _same),
    "defaultNamespaceBundleSplitAlgorithm": ("default_split_algorithm", _same),
    "supportedNamespaceBundleSplitAlgorithms": ("supported_split_algorithms", _same),
    "topicBundleAssignmentStrategy": ("topic_bundle_assignment_strategy", _same),
}
# maxUnloadBundleNumPerShedding = -1 means "no limit"; sessions ≤ 0 disables that split condition.
MAY_BE_NEGATIVE: Final = frozenset(
    {"maxUnloadBundleNumPerShedding", "loadBalancerNamespaceBundleMaxSessions"}
)
