"""Numbers in words, with their units: the sentences every decision records are made here, in
the core, so that the console, the CLI and the audit say the same thing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from balancer.decisions import METRIC_UNITS
from balancer.names import ShedderName
from balancer.units import MIB


def percent(fraction: float) -> str:
    """0.4 -> "40.0 %" (fractions inside, percent in words)."""
    return f"{fraction * 100:.1f} %"


def bytes_per_s(value: float) -> str:
    """Throughput in the largest binary unit that keeps it readable: "30.0 MiB/s", "512 B/s"."""
    if abs(value) >= MIB:
        return f"{value / MIB:.1f} MiB/s"
    if abs(value) >= 1024:
        return f"{value / 1024:.1f} KiB/s"
    return f"{value:.0f} B/s"


def msg_per_s(value: float) -> str:
    """ "1,000.0 msg/s"."""
    return f"{value:,.1f} msg/s"


def seconds(value: float) -> str:
    """ "42 s"."""
    return f"{value:.0f} s"


def quantity(value: float, unit: str) -> str:
    """A figure in its unit's words: bytes/s, msg/s, fraction (as percent) or a bare score."""
    if unit == "bytes/s":
        return bytes_per_s(value)
    if unit == "msg/s":
        return msg_per_s(value)
    if unit == "fraction":
        return percent(value)
    return f"{value:.3g}"


def metric(name: str, value: float) -> str:
    """A named metric (a key of METRIC_UNITS) in words: "msgThroughput 30.0 MiB/s"."""
    words = {
        "msgThroughput": "throughput",
        "msgRate": "msg rate",
        "topicLoad": "topic load score",
        "longTermMsgRate": "long-term msg rate",
        "weightedUsage": "weighted usage",
        "rankingScore": "Danube ranking score",
        "predictedGain": "predicted gain",
    }
    return f"{words.get(name, name)} {quantity(value, METRIC_UNITS.get(name, ''))}"


def shedder_figures(strategy: str, broker: str, stats: Mapping[str, Any]) -> str:
    """The numbers a shedder decided on for ``broker``, in words, from its own ``stats``
    (empty when the strategy or the figures are unknown, so the caller says something generic).

    ThresholdShedder: the broker's usage history (EMA) against the mean and the threshold;
    OverloadShedder: its usage against the overload bar; TransferShedder: its load (EMA) against
    the mean, and the std against the target; UniformLoadShedder: the max and min broker msg
    rates or throughputs; AvgShedder: its score (percent); Danube: its ranking score against
    mean + σ, and the CV against the threshold; FulcrumShedder: its usage and background
    against the mean.
    """
    figures = _SHEDDER_FIGURES.get(strategy)
    if figures is None:
        return ""
    try:
        return figures(broker, stats.get("brokers", {}).get(broker), stats)
    except (KeyError, TypeError):
        return ""


def _threshold(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"usage history {percent(mine['history'])} (now {percent(mine['usage'])}) "
        f"against the mean {percent(stats['avgUsage'])} ± threshold "
        f"{percent(stats['threshold'])}"
    )


def _overload(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"at {percent(mine['usage'])}, above the overload bar {percent(stats['overloadThreshold'])}"
    )


def _transfer(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"load (EMA) {percent(mine)} against the mean {percent(stats['avgUsage'])}; "
        f"std {percent(stats['std'])} vs target {percent(stats['targetStd'])}"
    )


def _uniform(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"msg rate {msg_per_s(stats['maxMsgRate'])} vs min {msg_per_s(stats['minMsgRate'])} "
        f"({stats['msgRateDifferencePercent']:.0f} % apart), throughput "
        f"{bytes_per_s(stats['maxThroughput'])} vs min {bytes_per_s(stats['minThroughput'])}"
    )


def _avg(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return f"score {stats['scores'][broker]:.1f} % (weighted usage)"


def _fulcrum(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"at {percent(mine['usage'])} (background {percent(mine['background'])}) "
        f"against the mean {percent(stats['avgUsage'])}"
    )


def _danube(broker: str, mine: Any, stats: Mapping[str, Any]) -> str:
    return (
        f"ranking score {mine['score']} above mean + σ {stats['mean'] + stats['std']:.1f}; "
        f"CV {stats['cv']:.2f} > {stats['threshold']:.2f}"
    )


# Each shedder's figures in words: (broker, its own stats or None, the decision's stats) -> words.
_SHEDDER_FIGURES: Final[Mapping[str, Callable[[str, Any, Mapping[str, Any]], str]]] = {
    ShedderName.THRESHOLD: _threshold,
    ShedderName.OVERLOAD: _overload,
    ShedderName.TRANSFER: _transfer,
    ShedderName.UNIFORM_LOAD: _uniform,
    ShedderName.AVG: _avg,
    ShedderName.FULCRUM: _fulcrum,
    ShedderName.DANUBE: _danube,
}
