"""Numbers in words, with their units: the sentences every decision records are made here, in
the core, so that the console, the CLI and the audit say the same thing."""

from __future__ import annotations

from balancer.decisions import METRIC_UNITS
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
    }
    return f"{words.get(name, name)} {quantity(value, METRIC_UNITS.get(name, ''))}"
