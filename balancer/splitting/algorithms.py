"""Split algorithms: where to cut one bundle, from its topics' hash positions and rates.

All take ``(bundle, topics, positions, config)`` and return the boundaries (possibly several) or
None for "no split". Integer arithmetic on unsigned 32-bit hashes; ``//`` is Java's integer
division on non-negative values. Source: Pulsar ``common/naming/*BundleSplitAlgorithm``
(PULSAR.md §10).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from balancer.bundles import BundleRange, range_equally_divide
from balancer.config import PulsarConfig
from balancer.errors import BalancerError
from balancer.load import TopicLoad
from balancer.units import HashPoint


def range_equally_divide_split(
    bundle: BundleRange,
    topics: Sequence[TopicLoad],
    positions: Sequence[HashPoint] | None,
    config: PulsarConfig,
) -> list[HashPoint] | None:
    """The midpoint ``lower + (upper - lower) // 2``, whatever the topics (the default algorithm).

    (0x00000000, 0x80000000) -> 0x40000000; (0x00000000, 0xffffffff) -> 0x7fffffff.
    """
    return [range_equally_divide(bundle)]


def topic_count_equally_divide(
    bundle: BundleRange,
    topics: Sequence[TopicLoad],
    positions: Sequence[HashPoint] | None,
    config: PulsarConfig,
) -> list[HashPoint] | None:
    """Cut between the two middle topics so each half holds about as many topics.

    With n ≥ 2 sorted hashes h: a = h[max(n//2 - 1, 0)], b = h[n//2], boundary = a + (b - a)//2.
    The boundary is not checked against the range here (applying the split does that).

    Worked example (PULSAR.md §10.2; Pulsar's code, not its docs, which say 0x50000000):

    | hashes (× 0x1000000) | a | b | boundary |
    |---|---|---|---|
    | 10, 20, 35, 65, 70, 75 | 0x35000000 | 0x65000000 | 0x4d000000 |

    Returns None with fewer than two topics.
    """
    if len(topics) <= 1:
        return None
    hashes = sorted(t.hash for t in topics)
    n = len(hashes)
    a, b = hashes[max(n // 2 - 1, 0)], hashes[n // 2]
    return [a + (b - a) // 2]


def specified_positions_divide(
    bundle: BundleRange,
    topics: Sequence[TopicLoad],
    positions: Sequence[HashPoint] | None,
    config: PulsarConfig,
) -> list[HashPoint] | None:
    """The operator's positions that lie strictly inside the bundle, sorted.

    Raises:
        BalancerError: no positions given (field ``positions``).

    Returns None with fewer than two topics or when no position is inside the range.
    """
    if not positions:
        raise BalancerError("specified_positions_divide needs positions", field="positions")
    if len(topics) <= 1:
        return None
    inside = [p for p in sorted(positions) if bundle.lower < p < bundle.upper]
    return inside or None


def flow_or_qps_equally_divide(
    bundle: BundleRange,
    topics: Sequence[TopicLoad],
    positions: Sequence[HashPoint] | None,
    config: PulsarConfig,
) -> list[HashPoint] | None:
    """Cut so that no piece exceeds the bundle msg-rate or bandwidth limits, all cuts at once.

    Topics without stats, or with zero rate and zero throughput, are ignored. Nothing is cut with
    fewer than two such topics, or when the totals stay below ``(1 + flowOrQpsDifference
    ThresholdPercentage/100)`` × ``loadBalancerNamespaceBundleMaxMsgRate`` (msg/s) and × the
    ``MaxBandwidthMbytes`` limit (MiB/s). Walking topics by hash, a new piece starts before topic
    i when the current piece, or the piece plus topic i, exceeds either limit; the boundary is
    ``h[i-1] + (h[i] - h[i-1]) // 2 + 1``.

    | limits | boundaries (t1..t6 at 0x10, 0x15, 0x24, 0x39, 0x58, 0x76 × 0x1000000) |
    |---|---|
    | 450 msg/s, 200 MiB/s | 0x1c800001, 0x2e800001, 0x48800001, 0x67000001 |
    | 1900 msg/s, 90 MiB/s | 0x2e800001, 0x67000001 |
    | 1100 msg/s, 110 MiB/s | 0x48800001 |

    Source: Pulsar FlowOrQpsEquallyDivideBundleSplitAlgorithm (PULSAR.md §10.4; its docs'
    midpoints are miscomputed and omit the +1).
    """
    if len(topics) <= 1:
        return None
    loaded = sorted(
        (t for t in topics if t.has_stats and (t.msg_rate > 0 or t.throughput > 0)),
        key=lambda t: t.hash,
    )
    max_rate, max_bytes = config.bundle_max_msg_rate, config.bundle_max_bandwidth_bytes_per_s
    factor = 1 + config.flow_or_qps_difference_fraction
    total_rate = sum(t.msg_rate for t in loaded)
    total_bytes = sum(t.throughput for t in loaded)
    if len(loaded) < 2 or (total_rate < max_rate * factor and total_bytes < max_bytes * factor):
        return None
    boundaries: list[HashPoint] = []
    group_rate, group_bytes = loaded[0].msg_rate, loaded[0].throughput
    for previous, topic in itertools.pairwise(loaded):
        if (
            group_rate > max_rate
            or group_bytes > max_bytes
            or group_rate + topic.msg_rate > max_rate
            or group_bytes + topic.throughput > max_bytes
        ):
            boundaries.append(previous.hash + (topic.hash - previous.hash) // 2 + 1)
            group_rate, group_bytes = topic.msg_rate, topic.throughput
        else:
            group_rate += topic.msg_rate
            group_bytes += topic.throughput
    return boundaries
