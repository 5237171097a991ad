import math
import warnings

import numpy as np
import pytest

from balancer.load import (
    LONG_TERM_SAMPLES,
    SHORT_TERM_SAMPLES,
    BrokerLoad,
    MessageRates,
    ResourceUsage,
    ResourceWeights,
    as_float32,
    time_average,
)
from tests.balancer import builders


def test_percent_is_computed_in_float32_like_pulsar():
    # Java: (double) (((float) 1 / (float) 3) * 100) is 33.333335876464844 (checked in jshell).
    assert ResourceUsage(1, 3).percent() == 33.333335876464844


def test_a_usage_beyond_floats_range_is_infinite_as_in_java_without_a_warning():
    # Java: (float) 1e300 is Infinity (JLS 5.1.3), Infinity / Infinity is NaN; neither traps.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ResourceUsage(1e300, 100).percent() == math.inf
        assert math.isnan(ResourceUsage(1e300, 1e300).percent())
        assert as_float32([1e300, -1e300, 1.5]).tolist() == [math.inf, -math.inf, 1.5]
        snapshot = builders.snapshot([builders.broker("b1", 1e300), builders.broker("b2", 10.0)])
        assert snapshot.max_usage()["b1"] == math.inf


def test_percent_is_zero_without_a_limit_and_unclamped_above_100():
    assert ResourceUsage(50, 0).percent() == 0.0
    assert ResourceUsage(140, 100).percent() == 140.0


def test_weighted_max_usage_ignores_memory_by_default():
    broker = BrokerLoad("b", cpu=ResourceUsage(20, 100), memory=ResourceUsage(90, 100))
    assert broker.weighted_max_usage(ResourceWeights()) == pytest.approx(0.2)
    assert broker.weighted_max_usage(ResourceWeights(memory=1.0)) == pytest.approx(0.9)


def test_max_resource_usage_excludes_memory():
    broker = BrokerLoad("b", bandwidth_out=ResourceUsage(30, 100), memory=ResourceUsage(99, 100))
    assert broker.max_resource_usage() == pytest.approx(0.3)


def test_time_average_takes_the_first_sample_as_is_then_averages():
    first = time_average(MessageRates(), MessageRates(10, 0, 100, 0), 0, 10)
    assert first.msg_rate_in == 10
    second = time_average(first, MessageRates(20, 0, 300, 0), 1, 10)
    assert second.msg_rate_in == 15
    assert second.msg_throughput_in == 200


def test_time_average_window_is_capped_at_max_samples():
    old = MessageRates(100, 0, 0, 0)
    assert time_average(old, MessageRates(0, 0, 0, 0), 500, 10).msg_rate_in == pytest.approx(90)


def test_time_average_columns_folds_exactly_as_one_at_a_time():
    from balancer.load import time_average_columns

    rng = np.random.default_rng(3)
    old = rng.uniform(0, 1e6, (50, 4))
    new = rng.uniform(0, 1e6, (50, 4))
    samples = rng.integers(0, 1500, 50)
    for limit in (SHORT_TERM_SAMPLES, LONG_TERM_SAMPLES):
        folded = time_average_columns(old, new, samples, limit)
        for i in range(50):
            one = time_average(MessageRates(*old[i]), MessageRates(*new[i]), int(samples[i]), limit)
            assert tuple(folded[i]) == (
                one.msg_rate_in,
                one.msg_rate_out,
                one.msg_throughput_in,
                one.msg_throughput_out,
            )
