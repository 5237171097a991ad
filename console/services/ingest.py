"""Load report ingest: check the whole report, then write the broker's entry in the live load
store (``console.loadstore``), never the metadata store. ``load_reports_fold`` folds the reports
into ``LoadReport`` rows in batches and publishes the new rankings."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Annotated, Any, Required

import numpy as np
import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from typing_extensions import TypedDict

from balancer.bundles import Bundle, BundleRange, namespace_of_topic, parse_bundle_name
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.load import LONG_TERM_SAMPLES, SHORT_TERM_SAMPLES, time_average_columns
from console import loadstore, metrics, realtime, selectors
from console.errors import ConsoleError
from console.models import Broker, LoadReport
from console.services.bodies import body_size_check, json_body

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


class TopicStatsInput(TypedDict, total=False):
    """One topic of a bundle (Pulsar's ``broker-stats/topics`` figures): its full name and its
    rates since the last report (msg/s, bytes/s); an absent rate is 0."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]

    topic: Required[Annotated[str, Field(min_length=1, max_length=500)]]
    msgRateIn: Number
    msgRateOut: Number
    msgThroughputIn: Number
    msgThroughputOut: Number


class BundleStatsInput(TypedDict, total=False):
    """One bundle's rates since the last report (msg/s, bytes/s) and its counts; an absent
    field is 0. ``topicStats`` (optional) lists its topics with their rates: what the
    topic_count_equally_divide and flow_or_qps_equally_divide splits cut by. A TypedDict, not a
    model: a report holds hundreds and validates in half the time."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)  # type: ignore[misc]

    msgRateIn: Number
    msgRateOut: Number
    msgThroughputIn: Number
    msgThroughputOut: Number
    topics: Count
    producers: Count
    consumers: Count
    topicStats: Annotated[list[TopicStatsInput], Field(max_length=100_000)]


_RATE_NAMES = ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
_COUNT_NAMES = ("topics", "producers", "consumers")


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


def report_size_check(size: int) -> None:
    """Refuse a body of ``size`` bytes over ``FULCRUM_MAX_REPORT_BYTES``.

    Raises:
        ConsoleError: 413.
    """
    body_size_check(size, limit=settings.FULCRUM_MAX_REPORT_BYTES, what="a load report")


def report_parse(raw: bytes) -> LoadReportInput:
    """The body of a load report, checked whole: JSON by ``bodies.json_body``'s rules (no
    duplicate keys, ...), every field typed, finite and in range.

    Raises:
        ConsoleError: 413 over ``FULCRUM_MAX_REPORT_BYTES``; 400 naming the first bad field.
    """
    doc = json_body(
        raw, limit=settings.FULCRUM_MAX_REPORT_BYTES, what="a load report", finite_check=False
    )
    try:
        return LoadReportInput.model_validate(doc)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "body"
        raise ConsoleError(f"{where}: {error['msg']}", field=where) from None


def load_report_ingest(raw: bytes, *, as_broker: str | None) -> loadstore.BrokerEntry:
    """``load_report_ingest_async`` for synchronous callers (the DRF view, commands, tests), on
    a Redis connection of its own."""

    async def once() -> loadstore.BrokerEntry:
        async with loadstore.own_async_client():
            return await load_report_ingest_async(raw, as_broker=as_broker)

    return async_to_sync(once)()


# Reports ``load_reports_ingest`` checks at once: each holds a Redis connection of the client's
# pool (``loadstore``: 100) while it waits.
INGEST_CONCURRENCY = 16


def load_reports_ingest(
    reports: Sequence[tuple[bytes, str | None]],
) -> list[loadstore.BrokerEntry | ConsoleError]:
    """``load_report_ingest`` of many reports ``(raw, as_broker)`` in one event loop on one
    Redis connection, ``INGEST_CONCURRENCY`` at a time (an observation pass of 200 brokers:
    0.2 s, not 1.6 s): each report's entry, or the ``ConsoleError`` that refused it, in order."""

    slots = asyncio.Semaphore(INGEST_CONCURRENCY)

    async def one(raw: bytes, as_broker: str | None) -> loadstore.BrokerEntry | ConsoleError:
        async with slots:
            try:
                return await load_report_ingest_async(raw, as_broker=as_broker)
            except ConsoleError as exc:
                return exc

    async def every() -> list[loadstore.BrokerEntry | ConsoleError]:
        async with loadstore.own_async_client():
            return list(await asyncio.gather(*(one(raw, who) for raw, who in reports)))

    return async_to_sync(every)() if reports else []


async def load_report_ingest_async(raw: bytes, *, as_broker: str | None) -> loadstore.BrokerEntry:
    """``_ingest``, counted in ``fulcrum_load_reports_total`` (accepted or refused)."""
    try:
        entry = await _ingest(raw, as_broker=as_broker)
    except ConsoleError:
        metrics.LOAD_REPORTS.labels(result="refused").inc()
        raise
    metrics.LOAD_REPORTS.labels(result="accepted").inc()
    return entry


async def _ingest(raw: bytes, *, as_broker: str | None) -> loadstore.BrokerEntry:
    """Check one load report and make it the broker's newest, folding its bundle stats into the
    short- and long-term averages (Pulsar's TimeAverageMessageData).

    The bundles the broker owns come from this process's cache (``_owned_bundles``), checked
    against the ownership version in the same Redis call that writes the entry: the usual
    report costs that one round trip and no database query.

    Args:
        raw: the request body (JSON).
        as_broker: the broker the credentials belong to; None for the demo's shared token.

    Raises:
        ConsoleError: 413 too large; 400 naming the field (bad value, a timestamp more than
            5 minutes ahead or not after the last accepted one, a duplicate bundle, a bundle
            the broker does not own — ``code: ownership_drift`` —, more stats than owned
            bundles); 403 a report for another broker; 404 an unknown broker; 503 the live
            load store is unreachable. Nothing is written for a refused report.
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
    document = report.model_dump(exclude={"timestamp", "bundleStats", "bundles"})
    document["reportedAt"] = at
    version: str | None = None
    fresh = False
    try:
        for _ in range(_MAX_ATTEMPTS):
            version, owned, fresh = await _owned_bundles(report.name, version, fresh=fresh)
            try:
                new = _records(report, owned)
            except ConsoleError:
                if fresh:
                    raise
                # Refused on this process's copy: make sure on a fresh one.
                version, fresh = None, True
                continue
            document["bundleCount"] = len(owned)
            topics = _topics(report)

            def build(
                previous: loadstore.BrokerEntry | None, new: np.ndarray = new
            ) -> loadstore.BrokerEntry:
                return loadstore.BrokerEntry(document, _fold(previous, new))

            try:
                return await loadstore.entry_put(
                    report.name,
                    build,
                    reported_at=at,
                    ownership=version,
                    topics=json.dumps(topics, separators=(",", ":")) if topics else "",
                )
            except loadstore.OwnershipChanged as changed:
                version, fresh = changed.version, True
        raise ConsoleError(
            f"bundles kept changing owners while this report was checked ({_MAX_ATTEMPTS} "
            "tries); send it again",
            status=503,
        )
    except loadstore.StaleReport as stale:
        raise ConsoleError(
            f"timestamp {at:.3f} is not after {report.name}'s last accepted report "
            f"({stale.last_at:.3f})",
            field="timestamp",
        ) from None
    except redis.RedisError as exc:
        raise ConsoleError(
            f"the live load store (Redis) is unavailable, retry later: {exc}", status=503
        ) from None


# Tries at checking a report against ownership that moves meanwhile.
_MAX_ATTEMPTS = 5

# Owned bundles per broker, as (ownership version, read at (monotonic s), rows). Re-read when the
# ownership version moves, and at least this often in case a writer did not say so.
_OWNED_MAX_AGE_S = 60.0
_owned: dict[str, tuple[str, float, tuple[tuple[int, str, int, int], ...]]] = {}


async def _owned_bundles(
    broker: str, version: str | None, *, fresh: bool
) -> tuple[str, tuple[tuple[int, str, int, int], ...], bool]:
    """(ownership version, the bundles ``broker`` owns, whether they were just read): this
    process's copy when it is recent and ``fresh`` is not asked, else read again (as of
    ``version``, or of the current version when None).

    Raises:
        ConsoleError: 404 no such broker.
    """
    now = time.monotonic()
    hit = _owned.get(broker)
    if not fresh and hit is not None and now - hit[1] < _OWNED_MAX_AGE_S:
        return hit[0], hit[2], False
    if version is None:
        version = await loadstore.ownership_version()
    rows = await selectors.database_read(selectors.broker_owned_bundles, broker)
    if rows is None:
        _owned.pop(broker, None)
        raise ConsoleError(f"unknown broker {broker!r}", status=404, field="name")
    if len(_owned) >= 10_000:
        _owned.clear()
    owned = tuple(rows)
    _owned[broker] = (version, now, owned)
    return version, owned, True


def _records(report: LoadReportInput, owned: tuple[tuple[int, str, int, int], ...]) -> np.ndarray:
    """The report's bundle stats as ``BUNDLE_RECORD`` rows (new samples in ``short``).

    Raises:
        ConsoleError: 400 more stats than owned bundles, or stats for a bundle the broker does
            not own (``code: ownership_drift``).
    """
    stats = report.bundleStats
    new = np.zeros(len(stats), dtype=loadstore.BUNDLE_RECORD)
    names = tuple(stats)
    cached = _keys.get(report.name)
    if cached is not None and cached[0] is owned and cached[1] == names:
        keys = cached[2]
    else:
        keys = _stats_keys(report.name, owned, names)
        if len(_keys) >= 10_000:
            _keys.clear()
        _keys[report.name] = (owned, names, keys)
    if stats:
        new["namespace"], new["lower"], new["upper"] = keys[:, 0], keys[:, 1], keys[:, 2]
        values = stats.values()
        try:
            rates = [_rates(v) for v in values]
            counts = [_counts(v) for v in values]
        except KeyError:  # a field left out: it is 0
            rates = [[v.get(k, 0.0) for k in _RATE_NAMES] for v in values]
            counts = [[v.get(k, 0) for k in _COUNT_NAMES] for v in values]
        new["short"] = np.array(rates, dtype=np.float64)
        new["counts"] = np.array(counts, dtype=np.int64)
    return new


def _topics(report: LoadReportInput) -> dict[str, list[list[Any]]]:
    """The bundles' topics of a report whose bundles were checked as owned: bundle name ->
    [[topic, hash, msg/s in+out, bytes/s in+out], ...].

    Raises:
        ConsoleError: 400 naming ``bundleStats.<bundle>.topicStats.<i>.topic``: a topic of
            another namespace, one that does not hash into the bundle, or one listed twice.
    """
    out: dict[str, list[list[Any]]] = {}
    for name, stats in report.bundleStats.items():
        listed = stats.get("topicStats")
        if listed is None:
            continue
        bundle = parse_bundle_name(name)
        rows = []
        seen: set[str] = set()
        for i, item in enumerate(listed):
            topic = item["topic"]
            where = f"bundleStats.{name}.topicStats.{i}.topic"
            try:
                namespace = namespace_of_topic(topic)
            except BalancerError as exc:
                raise ConsoleError(f"{where}: {exc.message}", field=where) from None
            point = topic_hash(topic)
            if namespace != bundle.namespace or not bundle.range.contains(point):
                raise ConsoleError(
                    f"{where}: {topic} (hash {format_hash(point)}) is not in bundle {name}",
                    field=where,
                )
            if topic in seen:
                raise ConsoleError(f"{where}: {topic} is listed twice", field=where)
            seen.add(topic)
            rates: list[float] = [float(item.get(key, 0.0)) for key in _RATE_NAMES]  # type: ignore[arg-type]
            rows.append([topic, point, rates[0] + rates[1], rates[2] + rates[3]])
        out[name] = rows
    return out


_rates = itemgetter(*_RATE_NAMES)
_counts = itemgetter(*_COUNT_NAMES)


# Per broker: the owned bundles and stats names its last report was checked with, and their keys
# (a broker names the same bundles in the same order until they move).
_keys: dict[str, tuple[tuple[tuple[int, str, int, int], ...], tuple[str, ...], np.ndarray]] = {}


def _stats_keys(
    broker: str, owned: tuple[tuple[int, str, int, int], ...], names: tuple[str, ...]
) -> np.ndarray:
    """(namespace id, lower, upper) of each of ``names`` among the bundles ``broker`` owns, as
    an (n, 3) array.

    Raises:
        ConsoleError: 400 more names than owned bundles, or a name not owned
            (``code: ownership_drift``).
    """
    if len(names) > len(owned):
        raise ConsoleError(
            f"{len(names)} bundle stats for the {len(owned)} bundle(s) {broker} owns",
            field="bundleStats",
        )
    rows = {Bundle(name, BundleRange(lo, hi)).name: (ns, lo, hi) for ns, name, lo, hi in owned}
    drift = sorted(name for name in names if name not in rows)
    if drift:
        raise ConsoleError(
            f"{broker} does not own {', '.join(drift[:5])}"
            + (f" and {len(drift) - 5} more" if len(drift) > 5 else "")
            + " (ownership drift: not folded into load)",
            field=f"bundleStats.{drift[0]}",
            code="ownership_drift",
            drift=drift,
        )
    keys = np.asarray([rows[name] for name in names], dtype=np.int64).reshape(-1, 3)
    keys.setflags(write=False)  # kept for the broker's next reports
    return keys


def _fold(previous: loadstore.BrokerEntry | None, new: np.ndarray) -> np.ndarray:
    """The new samples (in ``new["short"]``) folded into the averages a previous entry of the
    same broker holds for the same bundles; a bundle new to the broker starts from its sample."""
    samples = new["short"].copy()
    old_short = np.zeros_like(samples)
    old_long = np.zeros_like(samples)
    counts = np.zeros(len(new), dtype=np.int64)
    old = previous.bundles if previous is not None else new[:0]
    if len(old) == len(new) and all(
        np.array_equal(old[key], new[key]) for key in ("namespace", "lower", "upper")
    ):  # the same bundles as last time, in the same order: the usual report
        old_short, old_long, counts = old["short"], old["long"], old["samples"]
    elif len(old) and len(new):
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
        # Only the rows that changed since the last message (the dashboards keep the rest).
        delta = realtime.rankings_delta(loadstore.rankings_swap(rows_now), rows_now)
        realtime.publish(realtime.LOAD_REPORTED, {**delta, **selectors.current_imbalance(rows_now)})
    return written


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
