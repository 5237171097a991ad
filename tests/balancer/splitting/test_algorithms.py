import pytest

from balancer.bundles import BundleRange
from balancer.config import PulsarConfig
from balancer.errors import BalancerError
from balancer.load import TopicLoad
from balancer.splitting.algorithms import (
    flow_or_qps_equally_divide,
    range_equally_divide_split,
    specified_positions_divide,
    topic_count_equally_divide,
)

MIB = 1024 * 1024
HALF = BundleRange(0, 0x80000000)
FULL = BundleRange(0, 0xFFFFFFFF)


def topics(*hashes, rates=None, mib=None):
    return [
        TopicLoad(f"t{i}", h, (rates or [0] * len(hashes))[i], (mib or [0] * len(hashes))[i] * MIB)
        for i, h in enumerate(hashes)
    ]


def test_range_equally_divide_is_the_midpoint_whatever_the_topics():
    assert range_equally_divide_split(HALF, [], None, PulsarConfig()) == [0x40000000]
    assert range_equally_divide_split(FULL, [], None, PulsarConfig()) == [0x7FFFFFFF]


def test_topic_count_example_follows_pulsars_code_not_its_docs():
    # Docs say 0x50000000; the code computes 0x35000000 + (0x65000000 - 0x35000000) / 2.
    hashes = (0x10000000, 0x20000000, 0x35000000, 0x65000000, 0x70000000, 0x75000000)
    assert topic_count_equally_divide(HALF, topics(*hashes), None, PulsarConfig()) == [0x4D000000]


def test_topic_count_with_unsorted_odd_and_too_few_topics():
    assert topic_count_equally_divide(HALF, topics(0x30, 0x10, 0x20), None, PulsarConfig()) == [
        0x18
    ]
    assert topic_count_equally_divide(HALF, topics(0x30), None, PulsarConfig()) is None
    # Two topics: a = h[0], b = h[1].
    assert topic_count_equally_divide(HALF, topics(0x10, 0x30), None, PulsarConfig()) == [0x20]


def test_specified_positions_keeps_those_strictly_inside():
    got = specified_positions_divide(
        HALF, topics(1, 2), [0x90000000, 0x20000000, 0, 0x10000000], PulsarConfig()
    )
    assert got == [0x10000000, 0x20000000]
    assert specified_positions_divide(HALF, topics(1, 2), [0x80000000], PulsarConfig()) is None
    assert specified_positions_divide(HALF, topics(1), [0x100], PulsarConfig()) is None
    with pytest.raises(BalancerError):
        specified_positions_divide(HALF, topics(1, 2), [], PulsarConfig())


SIX = (0x10000000, 0x15000000, 0x24000000, 0x39000000, 0x58000000, 0x76000000)


@pytest.mark.parametrize(
    ("max_rate", "max_mib", "expected"),
    [
        (450, 200, [0x1C800001, 0x2E800001, 0x48800001, 0x67000001]),
        (1900, 90, [0x2E800001, 0x67000001]),
        (1100, 110, [0x48800001]),
    ],
)
def test_flow_or_qps_examples_follow_pulsars_code(max_rate, max_mib, expected):
    # PULSAR.md §10.4: the docs' midpoints are miscomputed and omit the +1.
    config = PulsarConfig.from_keys(
        {
            "loadBalancerNamespaceBundleMaxMsgRate": max_rate,
            "loadBalancerNamespaceBundleMaxBandwidthMbytes": max_mib,
        }
    )
    loads = topics(*SIX, rates=[100, 200, 300, 400, 500, 600], mib=[10, 20, 30, 40, 50, 60])
    assert flow_or_qps_equally_divide(BundleRange(0, 0xFFFFFFFF), loads, None, config) == expected


def test_flow_or_qps_needs_enough_load_and_loaded_topics():
    config = PulsarConfig()  # 30000 msg/s, 100 MiB/s
    light = topics(*SIX, rates=[100] * 6, mib=[1] * 6)
    assert flow_or_qps_equally_divide(FULL, light, None, config) is None
    assert flow_or_qps_equally_divide(FULL, topics(1), None, config) is None
    idle = [TopicLoad("a", 1), TopicLoad("b", 2, 40000, 0), TopicLoad("c", 3, has_stats=False)]
    assert flow_or_qps_equally_divide(FULL, idle, None, config) is None
