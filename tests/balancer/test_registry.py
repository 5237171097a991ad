"""One registry: every strategy and algorithm by name, whether the console runs it, and the
parameters it reads with their units, defaults and ranges."""

import pytest

from balancer.config import PulsarConfig
from balancer.errors import UnknownStrategy
from balancer.names import PlacementName, ShedderName
from balancer.registry import (
    ENTRIES,
    console_names,
    parameter,
    parameter_errors,
    strategy_info,
)

# PULSAR.md §12, every key of the table.
SECTION_12 = [
    "loadManagerClassName",
    "loadBalancerLoadSheddingStrategy",
    "loadBalancerLoadPlacementStrategy",
    "loadBalancerSheddingIntervalMinutes",
    "loadBalancerSheddingGracePeriodMinutes",
    "loadBalancerBrokerThresholdShedderPercentage",
    "loadBalancerBrokerOverloadedThresholdPercentage",
    "loadBalancerHistoryResourcePercentage",
    "loadBalancerBundleUnloadMinThroughputThreshold",
    "lowerBoundarySheddingEnabled",
    "loadBalancerCPUResourceWeight",
    "loadBalancerBandwidthInResourceWeight",
    "loadBalancerBandwidthOutResourceWeight",
    "loadBalancerMemoryResourceWeight",
    "loadBalancerDirectMemoryResourceWeight",
    "loadBalancerMsgRateDifferenceShedderThreshold",
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
    "maxUnloadPercentage",
    "minUnloadMessage",
    "minUnloadMessageThroughput",
    "maxUnloadBundleNumPerShedding",
    "loadBalancerAvgShedderLowThreshold",
    "loadBalancerAvgShedderHighThreshold",
    "loadBalancerAvgShedderHitCountLowThreshold",
    "loadBalancerAvgShedderHitCountHighThreshold",
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage",
    "loadBalancerDistributeBundlesEvenlyEnabled",
    "loadBalancerBrokerMaxTopics",
    "loadBalancerBrokerLoadTargetStd",
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle",
    "loadBalancerSheddingConditionHitCountThreshold",
    "loadBalanceSheddingDelayInSeconds",
    "loadBalancerBrokerLoadDataTTLInSeconds",
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport",
    "loadBalancerTransferEnabled",
    "loadBalancerSheddingBundlesWithPoliciesEnabled",
    "loadBalancerDebugModeEnabled",
    "loadBalancerAutoBundleSplitEnabled",
    "loadBalancerAutoUnloadSplitBundlesEnabled",
    "loadBalancerNamespaceBundleMaxTopics",
    "loadBalancerNamespaceBundleMaxSessions",
    "loadBalancerNamespaceBundleMaxMsgRate",
    "loadBalancerNamespaceBundleMaxBandwidthMbytes",
    "loadBalancerNamespaceMaximumBundles",
    "loadBalancerNamespaceBundleSplitConditionHitCountThreshold",
    "loadBalancerMaxNumberOfBundlesToSplitPerCycle",
    "loadBalancerSplitIntervalMinutes",
    "defaultNamespaceBundleSplitAlgorithm",
    "supportedNamespaceBundleSplitAlgorithms",
    "flowOrQpsDifferenceThresholdPercentage",
    "defaultNumberOfNamespaceBundles",
    "topicBundleAssignmentStrategy",
    "failureDomainsEnabled",
]


@pytest.mark.parametrize("key", SECTION_12)
def test_every_key_of_pulsars_defaults_table_is_accepted_with_its_default(key):
    described = parameter(key)
    config = PulsarConfig.from_keys({key: described.default})
    assert config == PulsarConfig()  # the described default is the default, in its own unit


@pytest.mark.parametrize(
    ("key", "default"),
    [  # PULSAR.md §12, as written there
        ("loadBalancerSheddingIntervalMinutes", 1),
        ("loadBalancerSheddingGracePeriodMinutes", 30),
        ("loadBalancerBrokerThresholdShedderPercentage", 10),
        ("loadBalancerBrokerOverloadedThresholdPercentage", 85),
        ("loadBalancerBundleUnloadMinThroughputThreshold", 10),
        ("minUnloadMessageThroughput", 1048576),
        ("maxUnloadBundleNumPerShedding", -1),
        ("loadBalancerBrokerLoadTargetStd", 0.25),
        ("loadBalancerNamespaceBundleMaxBandwidthMbytes", 100),
        ("loadBalancerAutoBundleSplitEnabled", True),
        ("defaultNamespaceBundleSplitAlgorithm", "range_equally_divide"),
        ("loadBalancerMaxNumberOfBundlesToSplitPerCycle", 10),
    ],
)
def test_described_defaults_are_pulsars(key, default):
    assert parameter(key).default == default


def test_units_and_conversions_are_the_references():
    interval = PulsarConfig.from_keys({"loadBalancerSheddingIntervalMinutes": 2})
    assert interval.shedding_interval_s == 120.0
    assert parameter("loadBalancerSheddingIntervalMinutes").unit == "min"
    assert parameter("loadBalancerBrokerThresholdShedderPercentage").unit == "%"
    assert parameter("loadBalancerBundleUnloadMinThroughputThreshold").unit == "MiB/s"
    assert parameter("maxUnloadBundleNumPerShedding").minimum == -1.0
    assert parameter("loadBalancerBrokerMaxTopics").unit == "count"
    assert parameter("loadBalancerCPUResourceWeight").unit == "weight"
    listed = PulsarConfig.from_keys({"supportedNamespaceBundleSplitAlgorithms": ["a", "b"]})
    assert listed.supported_split_algorithms == "a,b"


def test_parameter_errors_name_each_bad_key():
    errors = parameter_errors(
        {"maxUnloadPercentage": 1.5, "loadManagerClassName": "", "x": 1, "seed": 3}
    )
    assert set(errors) == {"maxUnloadPercentage", "loadManagerClassName", "x"}
    assert parameter_errors({"loadBalancerBrokerThresholdShedderPercentage": 100}) == {}
    assert parameter_errors({"loadBalancerTransferEnabled": True, "seed": 1}) == {}
    assert parameter_errors({"aggressiveness": "aggressive", "cv_threshold": 0.5}) == {}
    assert set(parameter_errors({"aggressiveness": "wild", "cv_threshold": 3})) == {
        "aggressiveness",
        "cv_threshold",
    }


def test_the_registry_says_what_the_console_runs_and_why_not():
    assert console_names("shedder") == (
        "ThresholdShedder",
        "OverloadShedder",
        "UniformLoadShedder",
        "AvgShedder",
        "TransferShedder",
        "danube",
        "FulcrumShedder",
    )
    gain = parameter("fulcrumMinGainPercentage")
    assert (gain.unit, gain.default, gain.maximum) == ("%", 3.0, 100.0)
    assert parameter("fulcrumBundleCoolDownMinutes").default == 10.0
    assert parameter("fulcrumMaxMovesPerCycle").source.startswith("Fulcrum")
    assert strategy_info("placement", "fulcrum_placement").in_console
    assert console_names("split") == (
        "range_equally_divide",
        "specified_positions_divide",
        "topic_count_equally_divide",
        "flow_or_qps_equally_divide",
    )
    danube = strategy_info("shedder", "danube")
    assert danube.in_console
    assert danube.as_dict()["parameters"][0] == {
        "key": "aggressiveness",
        "unit": "name",
        "default": "balanced",
        "minimum": None,
        "maximum": None,
        "source": "DANUBE.md §6 (balanced preset)",
    }
    assert parameter("cv_threshold").maximum == 1.0
    assert parameter("blacklist_topics").default == ""
    topics = strategy_info("split", "topic_count_equally_divide")
    assert topics.in_console
    assert "per-topic stats" in topics.summary
    assert strategy_info("placement", "avg_shedder").kind == "placement"
    doc = strategy_info("shedder", "threshold_shedder").as_dict()
    assert doc["inConsole"] is True
    assert doc["parameters"][0]["key"] == "loadBalancerBrokerThresholdShedderPercentage"
    with pytest.raises(UnknownStrategy) as err:
        strategy_info("split", "nope")
    assert err.value.field == "algorithm"
    for entry in ENTRIES:
        assert entry.in_console or entry.why_not, entry.name
        for key in entry.parameters:
            parameter(key)  # every parameter a strategy reads is a known key


def test_a_name_quotes_as_its_string():
    """A message quoting a name (``{name!r}``) reads the same from the registry as from a
    request."""
    assert repr(ShedderName.AVG) == repr("AvgShedder") == "'AvgShedder'"
    assert f"{PlacementName.FULCRUM!r}" == "'FulcrumPlacement'"
