"""Load report ingest: check the whole report, then write the broker's entry in the live load
store (``console.loadstore``), never the metadata store. ``load_reports_fold`` folds the reports
into ``LoadReport`` rows in batches and publishes the new rankings."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Annotated, Any

import numpy as np
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from balancer.load import LONG_TERM_SAMPLES, SHORT_TERM_SAMPLES, time_average_columns
from console import loadstore, realtime, selectors
from console.models import Broker, Bundle, LoadReport
from console.services.errors import ConsoleError

INT64_MAX = 2**63 - 1
# Rates and throughputs above this are not a broker's (1 Pmsg/s, 1 PB/s).
RATE_MAX = 1e15
# A report may be dated this far ahead of the console's clock (s).
FUTURE_SKEW_S = 300.0

Number = Annotated[float, Field(ge=0, le=RATE_MAX, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ResourceInput(_Strict):
    """A resource as usage and limit, in the resource's unit (cpu: percent of one core; memory:
    MiB; bandwidth: bytes/s). usage lies within 0…10 × limit."""

    usage: Number = 0.0
    limit: Number = 0.0

    @model_validator(mode="after")
    def _usage_within_limit(self) -> ResourceInput:
        if self.usage > 10 * self.limit:
            raise ValueError(f"usage {self.usage:g} is outside 0…10 × limit ({self.limit:g})")
        return self


class BundleStatsInput(_Strict):
    """One bundle's rates since the last report (msg/s, bytes/s) and its counts."""

    msgRateIn: Number = 0.0  # noqa: N815 - the wire's names (CLI.md)
    msgRateOut: Number = 0.0  # noqa: N815
    msgThroughputIn: Number = 0.0  # noqa: N815
    msgThroughputOut: Number = 0.0  # noqa: N815
    topics: Count = 0
    producers: Count = 0
    consumers: Count = 0


class LoadReportInput(_Strict):
    """A broker's load report: the CLI.md broker document plus ``timestamp`` (s since epoch;
    the console's clock when absent) and ``bundleStats`` (bundle name -> stats, only bundles the
    broker owns, each once)."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    timestamp: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    cpu: ResourceInput = ResourceInput()
    memory: ResourceInput = ResourceInput()
    directMemory: ResourceInput = ResourceInput()  # noqa: N815
    bandwidthIn: ResourceInput = ResourceInput()  # noqa: N815
    bandwidthOut: ResourceInput = ResourceInput()  # noqa: N815
    msgRateIn: Number = 0.0  # noqa: N815
    msgRateOut: Number = 0.0  # noqa: N815
    msgThroughputIn: Number = 0.0  # noqa: N815
    msgThroughputOut: Number = 0.0  # noqa: N815
    bundles: Annotated[list[Annotated[str, Field(max_length=300)]], Field(max_length=100_000)] = []
    topics: Count = 0
    bundleStats: dict[Annotated[str, Field(max_length=300)], BundleStatsInput] = {}  # noqa: N815


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def report_parse(raw: bytes) -> LoadReportInput:
    """The body of a load report, checked whole: JSON, no duplicate keys, every field typed,
    finite and in range.

    Raises:
        ConsoleError: 413 over ``FULCRUM_MAX_REPORT_BYTES``; 400 naming the first bad field.
    """
    if len(raw) > settings.FULCRUM_MAX_REPORT_BYTES:
        raise ConsoleError(
            f"a load report is at most {settings.FULCRUM_MAX_REPORT_BYTES:,} bytes "
            f"(got {len(raw):,})",
            status=413,
        )
    try:
        doc = json.loads(raw, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as dup:
        raise ConsoleError(f"{dup.key!r} appears twice", field=dup.key) from None
    except (ValueError, RecursionError) as exc:
        raise ConsoleError(f"not a JSON document: {str(exc)[:200]}", field="body") from None
    try:
        return LoadReportInput.model_validate(doc)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "body"
        raise ConsoleError(f"{where}: {error['msg']}", field=where) from None


def _bundle_name(namespace: str, lower: int, upper: int) -> str:
    return f"{namespace}/0x{lower:08x}_0x{upper:08x}"


def load_report_ingest(raw: bytes, *, as_broker: str | None) -> loadstore.BrokerEntry:
    """Check one load report and make it the broker's newest, folding its bundle stats into the
    short- and long-term averages (Pulsar's TimeAverageMessageData).

    Args:
        raw: the request body (JSON).
        as_broker: the broker the credentials belong to; None for the demo's shared token.

    Raises:
        ConsoleError: 413 too large; 400 naming the field (bad value, a timestamp more than
            5 minutes ahead or not after the last accepted one, a duplicate bundle, a bundle
            the broker does not own — ``code: ownership_drift`` —, more stats than owned
            bundles); 403 a report for another broker; 404 an unknown broker. Nothing is
            written for a refused report.
    """
    report = report_parse(raw)
    if as_broker is not None and report.name != as_broker:
        raise ConsoleError(
            f"these credentials speak for {as_broker}, not {report.name}",
            status=403,
            field="name",
        )
    now = time.time()
    at = now if report.timestamp is None else report.timestamp
    if at > now + FUTURE_SKEW_S:
        raise ConsoleError(
            f"timestamp {at:.0f} is {at - now:.0f} s ahead of the console's clock "
            f"(at most {FUTURE_SKEW_S:.0f} s)",
            field="timestamp",
        )
    twice = [name for name, n in Counter(report.bundles).items() if n > 1]
    if twice:
        raise ConsoleError(f"bundle {twice[0]} is listed twice", field="bundles")
    owned = list(
        Bundle.objects.filter(owner__name=report.name).values_list(
            "namespace_id", "namespace__name", "lower", "upper"
        )
    )
    if not owned and not Broker.objects.filter(name=report.name).exists():
        raise ConsoleError(f"unknown broker {report.name!r}", status=404, field="name")
    if len(report.bundleStats) > len(owned):
        raise ConsoleError(
            f"{len(report.bundleStats)} bundle stats for the {len(owned)} bundle(s) "
            f"{report.name} owns",
            field="bundleStats",
        )
    rows = {_bundle_name(name, lo, hi): (ns, lo, hi) for ns, name, lo, hi in owned}
    drift = [name for name in report.bundleStats if name not in rows]
    if drift:
        raise ConsoleError(
            f"{report.name} does not own {', '.join(sorted(drift)[:5])}"
            + (f" and {len(drift) - 5} more" if len(drift) > 5 else "")
            + " (ownership drift: not folded into load)",
            field=f"bundleStats.{sorted(drift)[0]}",
            code="ownership_drift",
            drift=sorted(drift),
        )
    stats = list(report.bundleStats.items())
    new = np.zeros(len(stats), dtype=loadstore.BUNDLE_RECORD)
    if stats:
        keys = np.asarray([rows[name] for name, _ in stats], dtype=np.int64)
        new["namespace"], new["lower"], new["upper"] = keys[:, 0], keys[:, 1], keys[:, 2]
        new["short"] = [
            (v.msgRateIn, v.msgRateOut, v.msgThroughputIn, v.msgThroughputOut) for _, v in stats
        ]
        new["counts"] = [(v.topics, v.producers, v.consumers) for _, v in stats]
    document = report.model_dump(exclude={"timestamp", "bundleStats", "bundles"})
    document["reportedAt"] = at
    document["bundleCount"] = len(owned)

    def build(previous: loadstore.BrokerEntry | None) -> loadstore.BrokerEntry:
        return loadstore.BrokerEntry(document, _fold(previous, new))

    try:
        return loadstore.entry_put(report.name, build, reported_at=at)
    except loadstore.StaleReport as stale:
        raise ConsoleError(
            f"timestamp {at:.3f} is not after {report.name}'s last accepted report "
            f"({stale.last_at:.3f})",
            field="timestamp",
        ) from None


def _fold(previous: loadstore.BrokerEntry | None, new: np.ndarray) -> np.ndarray:
    """The new samples (in ``new["short"]``) folded into the averages a previous entry of the
    same broker holds for the same bundles; a bundle new to the broker starts from its sample."""
    samples = new["short"].copy()
    old_short = np.zeros_like(samples)
    old_long = np.zeros_like(samples)
    counts = np.zeros(len(new), dtype=np.int64)
    if previous is not None and len(previous.bundles) and len(new):
        old = previous.bundles
        index = {
            key: i
            for i, key in enumerate(
                zip(
                    old["namespace"].tolist(),
                    old["lower"].tolist(),
                    old["upper"].tolist(),
                    strict=True,
                )
            )
        }
        wanted = zip(
            new["namespace"].tolist(), new["lower"].tolist(), new["upper"].tolist(), strict=True
        )
        found = np.asarray([index.get(key, -1) for key in wanted], dtype=np.int64)
        hit = found >= 0
        old_short[hit] = old["short"][found[hit]]
        old_long[hit] = old["long"][found[hit]]
        counts[hit] = old["samples"][found[hit]]
    folded = new.copy()
    folded["short"] = time_average_columns(old_short, samples, counts, SHORT_TERM_SAMPLES)
    folded["long"] = time_average_columns(old_long, samples, counts, LONG_TERM_SAMPLES)
    folded["samples"] = counts + 1
    return folded


def load_reports_fold(*, batch: int = 5000) -> int:
    """Fold the reports waiting in the live store's history stream into ``LoadReport`` rows
    (one bulk insert per batch), then publish the rankings once. Returns the rows written."""
    written = 0
    brokers = {b.name: b.pk for b in Broker.objects.only("pk", "name")}
    weights = selectors.pulsar_config_get().weights
    while True:
        items = loadstore.history_read(batch)
        if not items:
            break
        rows = []
        for _, name, doc in items:
            if name not in brokers:
                continue
            load = selectors.broker_load_from_document(name, doc)
            rows.append(
                LoadReport(
                    broker_id=brokers[name],
                    reported_at=datetime.fromtimestamp(float(doc["reportedAt"]), UTC),
                    cpu_usage=load.cpu.usage,
                    cpu_limit=load.cpu.limit,
                    memory_usage_mib=load.memory.usage,
                    memory_limit_mib=load.memory.limit,
                    direct_memory_usage_mib=load.direct_memory.usage,
                    direct_memory_limit_mib=load.direct_memory.limit,
                    bandwidth_in_usage_bytes_per_s=load.bandwidth_in.usage,
                    bandwidth_in_limit_bytes_per_s=load.bandwidth_in.limit,
                    bandwidth_out_usage_bytes_per_s=load.bandwidth_out.usage,
                    bandwidth_out_limit_bytes_per_s=load.bandwidth_out.limit,
                    msg_rate_in=load.rates.msg_rate_in,
                    msg_rate_out=load.rates.msg_rate_out,
                    msg_throughput_in_bytes_per_s=load.rates.msg_throughput_in,
                    msg_throughput_out_bytes_per_s=load.rates.msg_throughput_out,
                    bundle_count=int(doc.get("bundleCount", 0)),
                    topic_count=load.topics,
                    weighted_usage_fraction=_finite(load.weighted_max_usage(weights)),
                )
            )
        LoadReport.objects.bulk_create(rows, batch_size=1000)
        loadstore.history_trim([stream_id for stream_id, _, _ in items])
        written += len(rows)
        if len(items) < batch:
            break
    if written:
        rows_now = selectors.broker_rankings()
        realtime.publish(
            realtime.LOAD_REPORTED,
            {"rankings": rows_now, **selectors.current_imbalance(rows_now)},
        )
    return written


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
