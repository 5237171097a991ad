"""The load model: broker resources, bundle message rates, weighted usage.

Percentages follow Pulsar's float32 arithmetic exactly, because equality edge cases in Pulsar's own
tests depend on it (PULSAR.md §0.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from balancer.units import BytesPerSec, Fraction, HashPoint, MsgPerSec

_HUNDRED = np.float32(100.0)


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """One resource of a broker: ``usage`` and ``limit`` in the resource's unit (cpu percent of one
    core, memory MiB, bandwidth bytes/s). An absent resource is 0 of 0, which counts as 0 %."""

    usage: float = 0.0
    limit: float = 0.0

    def percent(self) -> float:
        """usage / limit × 100 computed in float32 (Pulsar ``ResourceUsage.percentUsage``); 0 when
        the limit is not positive. Not clamped: 140 % stays 140 %."""
        if self.limit <= 0:
            return 0.0
        if abs(self.usage) < _NO_OVERFLOW_USAGE and self.limit > _NO_OVERFLOW_LIMIT:
            return _percent(self.usage, self.limit)
        with np.errstate(over="ignore", invalid="ignore"):  # Java's float arithmetic: no trap
            return _percent(self.usage, self.limit)


# Below this usage and above this limit, usage / limit × 100 stays inside float's range (3.4e38),
# so percent() needs no np.errstate (about 0.9 µs a call, five calls a broker).
_NO_OVERFLOW_USAGE, _NO_OVERFLOW_LIMIT = 1e30, 1e-6


def _percent(usage: float, limit: float) -> float:
    return float(np.float32(np.float32(usage) / np.float32(limit) * _HUNDRED))


def as_float32(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``values`` (usages and limits) cast to float as Pulsar's ``ResourceUsage.percentUsage``
    casts its doubles (``(float) usage``): one beyond float's range becomes ±infinity (Java's
    narrowing conversion, JLS §5.1.3), as NumPy makes it too, without NumPy's warning."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class MessageRates:
    """Message rates (msg/s) and throughputs (bytes/s) of a bundle or broker, in and out."""

    msg_rate_in: MsgPerSec = 0.0
    msg_rate_out: MsgPerSec = 0.0
    msg_throughput_in: BytesPerSec = 0.0
    msg_throughput_out: BytesPerSec = 0.0

    @property
    def msg_rate(self) -> MsgPerSec:
        """msgRateIn + msgRateOut."""
        return self.msg_rate_in + self.msg_rate_out

    @property
    def throughput(self) -> BytesPerSec:
        """msgThroughputIn + msgThroughputOut."""
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass(frozen=True, slots=True)
class ResourceWeights:
    """Weights of the five resources in the weighted max usage (Pulsar defaults: memory and direct
    memory 0, the others 1)."""

    cpu: float = 1.0
    memory: float = 0.0
    direct_memory: float = 0.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0


@dataclass(frozen=True, slots=True)
class TopicStats:
    """One topic as a Danube broker reports it: msg/s, bytes/s, connections, backlog (messages)."""

    name: str
    message_rate: MsgPerSec = 0.0
    byte_rate: BytesPerSec = 0.0
    producers: int = 0
    consumers: int = 0
    subscriptions: int = 0
    backlog: int = 0


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    """One broker's latest load report plus its identity and state.

    Attributes:
        name: broker id, e.g. ``broker-1``.
        failure_domain: the failure domain's name ("" when none).
        state: ``active``, ``draining`` or ``drained``; only active brokers take new bundles.
        cpu, memory, direct_memory, bandwidth_in, bandwidth_out: (usage, limit) pairs.
        rates: the broker's totals over its bundles (msg/s, bytes/s).
        bundles: names of the bundles the broker reports owning.
        topics: number of topics served.
        topic_stats: per-topic stats when the report carries them (Danube's TopicLoad).
        top_bundles: the extensible load manager's top-k bundle report, as reported (smallest
            first); None when the report has none.
        weighted_max_ema, msg_throughput_ema, updated_at: the extensible BrokerLoadData figures
            (fraction, bytes/s, s since epoch) when the report carries them.
        reported_at: when the broker's newest load report arrived (s since epoch); None when it
            never reported (a *pending* broker, never declared lost).
    """

    name: str
    failure_domain: str = ""
    state: str = "active"
    cpu: ResourceUsage = field(default_factory=ResourceUsage)
    memory: ResourceUsage = field(default_factory=ResourceUsage)
    direct_memory: ResourceUsage = field(default_factory=ResourceUsage)
    bandwidth_in: ResourceUsage = field(default_factory=ResourceUsage)
    bandwidth_out: ResourceUsage = field(default_factory=ResourceUsage)
    rates: MessageRates = field(default_factory=MessageRates)
    bundles: Sequence[str] = ()
    topics: int = 0
    topic_stats: tuple[TopicStats, ...] = ()
    top_bundles: tuple[tuple[str, float, float], ...] | None = None  # (name, in, out) bytes/s
    weighted_max_ema: float | None = None  # extensible BrokerLoadData, when reported
    msg_throughput_ema: float | None = None
    updated_at: float | None = None
    reported_at: float | None = None

    @property
    def is_active(self) -> bool:
        """Whether the broker may take new bundles (Danube: missing state means active)."""
        return self.state == "active"

    def max_resource_usage(self) -> Fraction:
        """Unweighted max usage over cpu, direct memory and bandwidth in/out (memory excluded, the
        parity target of Pulsar's LocalBrokerData tests), as a fraction."""
        return (
            max(
                self.cpu.percent(),
                self.direct_memory.percent(),
                self.bandwidth_in.percent(),
                self.bandwidth_out.percent(),
            )
            / 100.0
        )

    def weighted_max_usage(self, weights: ResourceWeights) -> Fraction:
        """Max over the five resources of percent × weight, / 100 (Pulsar
        ``getMaxResourceUsageWithWeight``), as a fraction; not clamped at 1.0."""
        return (
            max(
                self.cpu.percent() * weights.cpu,
                self.memory.percent() * weights.memory,
                self.direct_memory.percent() * weights.direct_memory,
                self.bandwidth_in.percent() * weights.bandwidth_in,
                self.bandwidth_out.percent() * weights.bandwidth_out,
            )
            / 100.0
        )


@dataclass(frozen=True, slots=True)
class BundleLoad:
    """A bundle's load as the leader keeps it: short-term (shedding) and long-term (placement,
    split detection) time-averaged rates, plus topic and session counts."""

    name: str
    owner: str | None = None
    short_term: MessageRates = field(default_factory=MessageRates)
    long_term: MessageRates = field(default_factory=MessageRates)
    topics: int = 0
    producers: int = 0
    consumers: int = 0


SHORT_TERM_SAMPLES = 10
LONG_TERM_SAMPLES = 1000


def time_average(
    old: MessageRates, new: MessageRates, samples: int, max_samples: int
) -> MessageRates:
    """Fold one new sample into a running average over at most ``max_samples`` samples.

    With n = min(samples + 1, max_samples): value = ((n - 1) × old + new) / n, so the first
    sample is taken as is and later ones weigh 1/n.

    Args:
        old: the average so far (msg/s, bytes/s).
        new: the latest sample.
        samples: samples folded in so far (0 for none).
        max_samples: 10 for short-term data, 1000 for long-term (Pulsar's defaults).

    Source: Pulsar TimeAverageMessageData.update (PULSAR.md §0.2).
    """
    n = min(samples + 1, max_samples)

    def fold(a: float, b: float) -> float:
        return ((n - 1) * a + b) / n

    return MessageRates(
        fold(old.msg_rate_in, new.msg_rate_in),
        fold(old.msg_rate_out, new.msg_rate_out),
        fold(old.msg_throughput_in, new.msg_throughput_in),
        fold(old.msg_throughput_out, new.msg_throughput_out),
    )


def time_average_columns(
    old: np.ndarray, new: np.ndarray, samples: np.ndarray, max_samples: int
) -> np.ndarray:
    """``time_average`` for many bundles at once, with the same float64 arithmetic.

    Args:
        old, new: (n, k) averages so far and new samples (msg/s, bytes/s).
        samples: (n,) samples folded in so far.
        max_samples: 10 for short-term data, 1000 for long-term.

    Source: Pulsar TimeAverageMessageData.update (PULSAR.md §0.2).
    """
    n = np.minimum(np.asarray(samples, dtype=np.int64) + 1, max_samples).astype(np.float64)
    n = n.reshape(-1, 1)
    return ((n - 1) * old + new) / n  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class TopicLoad:
    """A topic in the bundle: hash position, msg rate in+out (msg/s), throughput in+out (bytes/s).

    ``has_stats`` False: the broker reported no stats for it (flow_or_qps ignores it).
    """

    name: str
    hash: HashPoint
    msg_rate: MsgPerSec = 0.0
    throughput: BytesPerSec = 0.0
    has_stats: bool = True
