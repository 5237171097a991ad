"""The live load store: every broker's newest load report and its bundles' time-averaged rates,
kept in Redis because it is hot, high-rate data.

The ingest path writes one broker's entry per report (a hash: the report as JSON and the bundle
records as packed NumPy rows); the tick and the pages read every entry in one round trip. The
metadata store (ownership, config, decisions, audit) never sees a report: the reports also go
to a Redis stream that ``history_flush`` folds into ``LoadReport`` rows in batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import numpy as np
import redis
import redis.asyncio as aredis
from django.conf import settings
from django.db import transaction
from redis.backoff import NoBackoff
from redis.retry import Retry

# One row per bundle of a broker's entry. The bundle is named by its namespace's database id
# and hash range; rates in RATE_FIELDS order (msg/s, msg/s, bytes/s, bytes/s).
BUNDLE_RECORD = np.dtype(
    [
        ("namespace", "<i8"),
        ("lower", "<i8"),
        ("upper", "<i8"),
        ("short", "<f8", (4,)),
        ("long", "<f8", (4,)),
        ("samples", "<i8"),
        ("counts", "<i8", (3,)),
    ]
)
log = logging.getLogger(__name__)
T = TypeVar("T")

# Reports kept in the history stream when nobody folds them (a bounded backlog).
HISTORY_MAX = 200_000


class StaleReport(Exception):
    """A report not newer than the broker's last accepted one."""

    def __init__(self, last_at: float) -> None:
        super().__init__(last_at)
        self.last_at = last_at


@dataclass(frozen=True)
class BrokerEntry:
    """One broker's entry: its validated report (CLI.md broker document, ``reportedAt`` in s
    since epoch) and its bundles' records (``BUNDLE_RECORD``). The topics its report listed are
    kept beside it, under a key of their own (``topics_get``), read by the snapshot only."""

    report: dict[str, Any]
    bundles: np.ndarray

    @property
    def reported_at(self) -> float:
        return float(self.report["reportedAt"])


# Every client of this store, synchronous or asyncio: its timeouts (s).
_CLIENT_OPTIONS: dict[str, Any] = {
    "socket_timeout": 5,
    "socket_connect_timeout": 2,
    "health_check_interval": 30,
}


# Redis unreachable, timing out, or loading its append-only file after a restart.
UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)

# Set by the web's middleware (``console.middleware.store_fallback``) for pages and read APIs:
# while Redis is away they answer from the last figures this process read, said in a banner.
# Never set for the tick or ingest: a plan is not made on stale loads.
_stale_allowed: ContextVar[bool] = ContextVar("fulcrum_stale_allowed", default=False)


@dataclass
class Outage:
    """This process's view of the store: unreachable since ``since`` (Unix time, s) with
    ``error``, its figures last read at ``last_read`` (Unix time, s; None: never)."""

    since: float | None = None
    error: str = ""
    last_read: float | None = None
    probed_at: float = 0.0  # when a page last tried Redis during the outage


# During an outage, pages try Redis at most this often (s); the others answer from memory.
PROBE_S = 1.0


_outage = Outage()
_outage_lock = threading.Lock()
# What this process last read, served while Redis is away (pages only): broker -> entry,
# broker -> topics, gauge name -> value.
_last_entries: dict[str, BrokerEntry] = {}
_last_topics: dict[str, dict[str, list[list[Any]]]] = {}
_last_gauges: dict[str, dict[str, Any] | None] = {}


@contextmanager
def stale_allowed() -> Iterator[None]:
    """Within: reads answer from this process's last figures while Redis is away."""
    token = _stale_allowed.set(True)
    try:
        yield
    finally:
        _stale_allowed.reset(token)


def outage() -> Outage | None:
    """The store's outage as this process last saw it, None while reads succeed."""
    with _outage_lock:
        return (
            Outage(_outage.since, _outage.error, _outage.last_read, _outage.probed_at)
            if _outage.since
            else None
        )


def outage_check() -> Outage | None:
    """``outage``, after one PING when an outage was seen (so that a banner goes as soon as
    Redis answers again; within ``stale_allowed`` at most every ``PROBE_S``); no round trip
    while reads succeed."""
    if outage() is None:
        return None
    with contextlib.suppress(*UNAVAILABLE):
        _read_or_last(lambda: client().ping(), lambda: None)
    return outage()


def _up() -> None:
    with _outage_lock:
        _outage.since, _outage.error, _outage.last_read = None, "", time.time()


def _down(exc: BaseException) -> None:
    with _outage_lock:
        if _outage.since is None:
            _outage.since = time.time()
            log.warning("the live load store (Redis) cannot be reached: %s", exc)
        _outage.error = f"{type(exc).__name__}: {exc}"[:300]


def _read_or_last(read: Callable[[], T], fallback: Callable[[], T]) -> T:
    """``read()``; while Redis is away, ``fallback()`` where stale figures are allowed (pages:
    Redis is tried again at most every ``PROBE_S``, the pages in between answer at once), else
    the error (the tick, ingest)."""
    stale_ok = _stale_allowed.get()
    if stale_ok:
        with _outage_lock:
            recent = _outage.since is not None and time.time() - _outage.probed_at < PROBE_S
            if not recent:
                _outage.probed_at = time.time()
        if recent:
            return fallback()
    try:
        value = read()
    except UNAVAILABLE as exc:
        _down(exc)
        if stale_ok:
            return fallback()
        raise
    _up()
    return value


def client() -> redis.Redis:
    """The process's Redis client (a connection pool; safe across forks). Within
    ``stale_allowed`` (pages) a client that fails at once, without redis-py's retries with
    backoff (which would hold a page for seconds while Redis is away)."""
    return _client(settings.REDIS_URL, fail_fast=_stale_allowed.get())


@cache
def _client(url: str, *, fail_fast: bool) -> redis.Redis:
    if fail_fast:
        return redis.Redis.from_url(
            url, **{**_CLIENT_OPTIONS, "socket_connect_timeout": 1}, retry=Retry(NoBackoff(), 0)
        )
    return redis.Redis.from_url(url, **_CLIENT_OPTIONS)


def _key(broker: str) -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}broker:{broker}"


def _history_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}history"


def _topics_key(broker: str) -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}topics:{broker}"


def topics_get(brokers: list[str]) -> dict[str, dict[str, list[list[Any]]]]:
    """The topics the newest report of each of ``brokers`` listed, in one round trip: broker ->
    bundle name -> [[topic, hash, msg/s in+out, bytes/s in+out], ...]; a broker whose report
    listed none is absent, and an entry that does not decode is left out (and logged)."""

    def read() -> dict[str, dict[str, list[list[Any]]]]:
        pipe = client().pipeline(transaction=False)
        for name in brokers:
            pipe.get(_topics_key(name))
        out = {}
        for name, raw in zip(brokers, pipe.execute(), strict=True):
            if not raw:
                continue
            try:
                found = json.loads(raw)
            except ValueError:
                found = None
            if isinstance(found, dict):
                out[name] = _last_topics[name] = found
            else:
                log.warning("skipping %s's damaged topic list in the live load store", name)
        return out

    return _read_or_last(read, lambda: {b: _last_topics[b] for b in brokers if b in _last_topics})


def entry_get(broker: str) -> BrokerEntry | None:
    """One broker's entry, None when it never reported."""
    raw = client().hgetall(_key(broker))
    return _entry(raw)


def entries_get(brokers: list[str]) -> dict[str, BrokerEntry]:
    """The entries of ``brokers`` that reported, in one round trip (within ``stale_allowed``,
    while Redis is away: the entries this process read last)."""

    def read() -> dict[str, BrokerEntry]:
        pipe = client().pipeline(transaction=False)
        for name in brokers:
            pipe.hgetall(_key(name))
        out = {}
        for name, raw in zip(brokers, pipe.execute(), strict=True):
            entry = _entry(raw)
            if entry is not None:
                out[name] = _last_entries[name] = entry
        return out

    return _read_or_last(read, lambda: {b: _last_entries[b] for b in brokers if b in _last_entries})


def _entry(raw: Any) -> BrokerEntry | None:
    """A stored hash (bytes -> bytes) as an entry, None when empty."""
    if not raw or b"report" not in raw:
        return None
    try:
        report = json.loads(raw[b"report"])
        at = float(report["reportedAt"])
        bundles = np.frombuffer(raw.get(b"bundles", b""), dtype=BUNDLE_RECORD)
    except (KeyError, TypeError, ValueError) as exc:
        # Only checked reports are written here; a damaged entry (by hand, an old version) is
        # skipped, as if the broker had not reported, and said so.
        log.warning("skipping a damaged load store entry: %r", exc)
        return None
    if not math.isfinite(at):
        return None
    return BrokerEntry(report, bundles)


# Compare-and-set of a broker's entry: written only when its "at" field (the id of the write
# that made it) is still the one the caller's previous entry had ("" for none) and the
# ownership version is the one the caller checked the report's bundles against; the report is
# appended to the history stream.
# KEYS: entry, history, ownership version, the broker's topics. ARGV: expected write id, new
# write id, report JSON, bundle records, history maxlen, broker, expected ownership version, a
# fresh version (used when there is none yet), the bundles' topics (JSON, "" for none). Returns
# {1}: written; {0}: another write came first; {-1, version}: the ownership changed since.
_PUT_IF_UNCHANGED = """
local version = redis.call('GET', KEYS[3])
if not version then
  version = ARGV[8]
  redis.call('SET', KEYS[3], version)
end
if version ~= ARGV[7] then return {-1, version} end
local at = redis.call('HGET', KEYS[1], 'at')
if (at or '') ~= ARGV[1] then return {0} end
redis.call('HSET', KEYS[1], 'at', ARGV[2], 'report', ARGV[3], 'bundles', ARGV[4])
if ARGV[9] == '' then redis.call('DEL', KEYS[4]) else redis.call('SET', KEYS[4], ARGV[9]) end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'broker', ARGV[6], 'report', ARGV[3])
return {1}
"""


class OwnershipChanged(Exception):
    """Bundles changed owners since the caller read them; ``version`` is the current one."""

    def __init__(self, version: str) -> None:
        super().__init__(version)
        self.version = version


class _Recent:
    """The entries this process wrote last, per broker, with the id of the write that made them:
    a broker keeps its connection, so its next report usually lands here and needs no read.
    Bounded by the bytes of bundle records held (least recently written dropped first)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self.entries: OrderedDict[str, tuple[str, BrokerEntry]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, broker: str) -> tuple[str, BrokerEntry] | None:
        with self.lock:
            return self.entries.get(broker)

    def put(self, broker: str, at: str, entry: BrokerEntry) -> None:
        with self.lock:
            self._drop(broker)
            self.entries[broker] = (at, entry)
            self.held += entry.bundles.nbytes
            while self.held > self.max_bytes and self.entries:
                self._drop(next(iter(self.entries)))

    def drop(self, broker: str) -> None:
        with self.lock:
            self._drop(broker)

    def _drop(self, broker: str) -> None:
        old = self.entries.pop(broker, None)
        if old is not None:
            self.held -= old[1].bundles.nbytes

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.held = 0


_recent = _Recent(max_bytes=64 * 1024 * 1024)

# The Redis client of the current task when it brings its own (``own_async_client``).
_scoped_client: ContextVar[aredis.Redis | None] = ContextVar("loadstore_client", default=None)
_loop_clients: dict[asyncio.AbstractEventLoop, aredis.Redis] = {}


def async_client() -> aredis.Redis:
    """The asyncio Redis client of the running event loop (one per loop: the web worker's)."""
    scoped = _scoped_client.get()
    if scoped is not None:
        return scoped
    loop = asyncio.get_running_loop()
    found = _loop_clients.get(loop)
    if found is None:
        for gone in [old for old in _loop_clients if old.is_closed()]:
            del _loop_clients[gone]  # a throwaway loop's client, and its sockets, can go
        found = _loop_clients[loop] = aredis.Redis.from_url(settings.REDIS_URL, **_CLIENT_OPTIONS)
    return found


@asynccontextmanager
async def own_async_client() -> AsyncIterator[None]:
    """A client of its own for the current task, closed at the end (a synchronous caller runs
    the ingest on a throwaway event loop)."""
    redis_client = aredis.Redis.from_url(settings.REDIS_URL, **_CLIENT_OPTIONS)
    token = _scoped_client.set(redis_client)
    try:
        yield
    finally:
        _scoped_client.reset(token)
        await redis_client.aclose()


def _ownership_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}ownership"


def ownership_changed() -> None:
    """Record that bundles changed owners (a fresh version), so that every process re-reads
    the ownership it checks reports against. A Redis failure is logged, not raised: the
    processes re-read ownership within a minute anyway."""
    try:
        client().set(_ownership_key(), uuid.uuid4().hex)
    except redis.RedisError as exc:
        log.warning("could not record an ownership change in the live load store: %s", exc)


def ownership_changing() -> None:
    """Bundles change owners in the current transaction: a fresh version now (a reader in
    this transaction) and another once it commits (a reader that read before the commit)."""
    ownership_changed()
    transaction.on_commit(ownership_changed, robust=True)


async def ownership_version() -> str:
    """The current ownership version (made when there is none yet)."""
    made = uuid.uuid4().hex
    found: Any = await async_client().set(_ownership_key(), made, nx=True, get=True)
    return made if found is None else bytes(found).decode()


async def _read(broker: str) -> tuple[str, BrokerEntry | None]:
    raw: Any = await async_client().hgetall(_key(broker))
    return (raw or {}).get(b"at", b"").decode(), _entry(raw)


async def entry_put(
    broker: str,
    build: Callable[[BrokerEntry | None], BrokerEntry],
    *,
    reported_at: float,
    ownership: str,
    topics: str = "",
) -> BrokerEntry:
    """Replace ``broker``'s entry with ``build(previous entry or None)`` when ``reported_at`` is
    newer than the stored report and the ownership version is still ``ownership``, atomically
    (compare-and-set, one round trip when this process wrote the previous entry; retried on a
    concurrent write), and append the report to the history stream; ``topics`` (JSON, "" for
    none) replaces the broker's topic list in the same write.

    Raises:
        StaleReport: the stored report is as new or newer; nothing is written.
        OwnershipChanged: bundles changed owners since ``ownership``; nothing is written.
    """
    recent = _recent.get(broker)
    at, previous = recent if recent is not None else await _read(broker)
    put_if_unchanged = async_client().register_script(_PUT_IF_UNCHANGED)  # EVALSHA, loads once
    while True:
        if previous is not None and previous.reported_at >= reported_at:
            if recent is not None:  # the store may have been cleared since: ask it
                recent = None
                at, previous = await _read(broker)
                continue
            raise StaleReport(previous.reported_at)
        entry = build(previous)
        report = json.dumps(entry.report, separators=(",", ":"))
        new_at = uuid.uuid4().hex  # this write's id: never repeats, unlike a timestamp
        answer = await put_if_unchanged(
            keys=[_key(broker), _history_key(), _ownership_key(), _topics_key(broker)],
            args=[
                at,
                new_at,
                report,
                entry.bundles.tobytes(),
                HISTORY_MAX,
                broker,
                ownership,
                uuid.uuid4().hex,
                topics,
            ],
        )
        if answer[0] == 1:
            _recent.put(broker, new_at, entry)
            return entry
        if answer[0] == -1:
            raise OwnershipChanged(answer[1].decode())
        recent = None
        at, previous = await _read(broker)


def entry_delete(broker: str) -> None:
    """Forget a broker's entry (the broker was removed)."""
    _recent.drop(broker)
    client().delete(_key(broker), _topics_key(broker))


def history_read(count: int) -> list[tuple[bytes, str, dict[str, Any]]]:
    """The oldest ``count`` reports of the history stream: (id, broker, report)."""
    rows: Any = client().xrange(_history_key(), count=count)
    return [
        (stream_id, fields[b"broker"].decode(), json.loads(fields[b"report"]))
        for stream_id, fields in rows or []
    ]


def history_trim(ids: list[bytes]) -> None:
    """Drop folded reports from the history stream."""
    if ids:
        client().xdel(_history_key(), *ids)


# The recorded samples (``REPLAY_SERIES``): "hour" every ``FULCRUM_REPLAY_SAMPLE_S`` seconds
# over ``FULCRUM_REPLAY_WINDOW_S``, "day" every ``FULCRUM_REPLAY_DAY_SAMPLE_S`` over a day.
REPLAY_SERIES = ("hour", "day")
# The replay samples this process read last per series (at, document): what a page shows while
# Redis is away.
_last_replay: dict[str, list[tuple[float, dict[str, Any]]]] = {}


def _replay_key(series: str = "hour") -> str:
    if series not in REPLAY_SERIES:
        raise ValueError(f"unknown replay series {series!r}; one of {', '.join(REPLAY_SERIES)}")
    suffix = "" if series == "hour" else f":{series}"
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}replay{suffix}"


def replay_sample_add(
    at: float, document: dict[str, Any], keep_s: float, series: str = "hour"
) -> None:
    """Record one snapshot document (``balancer.wire.snapshot_document``) taken at ``at`` (s
    since epoch) in ``series`` (``REPLAY_SERIES``) for the replays, compressed, and forget
    those older than ``keep_s`` seconds. One round trip."""
    blob = zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 6)
    key = _replay_key(series)
    pipe = client().pipeline(transaction=False)
    pipe.zadd(key, {blob: at})
    pipe.zremrangebyscore(key, "-inf", f"({at - keep_s}")
    pipe.execute()


def replay_sample_last_at(series: str = "hour") -> float | None:
    """When the newest snapshot of ``series`` was taken (s since epoch); None when none is."""
    rows: Any = client().zrange(_replay_key(series), -1, -1, withscores=True)
    return float(rows[0][1]) if rows else None


def replay_samples(since: float, series: str = "hour") -> list[dict[str, Any]]:
    """The snapshot documents of ``series`` taken at or after ``since``, oldest first; an entry
    that does not decode is left out (and logged), never raised. Within ``stale_allowed``,
    while Redis is away: those of the last read of this process."""

    def read() -> list[dict[str, Any]]:
        rows: Any = client().zrangebyscore(_replay_key(series), since, "+inf", withscores=True)
        out = []
        for blob, at in rows or []:
            try:
                out.append((float(at), json.loads(zlib.decompress(blob))))
            except (zlib.error, ValueError):
                log.warning("a recorded snapshot for the replay does not decode; left out")
        _last_replay[series] = out
        return [document for _, document in out]

    return _read_or_last(read, lambda: [d for at, d in _last_replay.get(series, []) if at >= since])


def _moves_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}replay:moves"


def _owners_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}replay:owners"


def replay_owners_get() -> dict[str, str]:
    """The recorder's memory: bundle -> the broker last seen owning it ({} when none, or when
    what is kept does not decode)."""
    blob: Any = client().get(_owners_key())
    if not blob:
        return {}
    try:
        known = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError):
        log.warning("the recorder's last known owners do not decode; counting starts again")
        return {}
    return known if isinstance(known, dict) else {}


def replay_owners_put(owners: dict[str, str]) -> None:
    """Keep ``owners`` (bundle -> broker) as the recorder's memory, compressed."""
    blob = zlib.compress(json.dumps(owners, separators=(",", ":")).encode(), 6)
    client().set(_owners_key(), blob)


def replay_moves_add(at: float, moves: int, keep_s: float) -> None:
    """Record that ``moves`` bundles were seen on another broker at ``at`` (s since epoch),
    and forget the counts older than ``keep_s`` seconds. One round trip."""
    pipe = client().pipeline(transaction=False)
    pipe.zadd(_moves_key(), {f"{at!r}:{int(moves)}": at})
    pipe.zremrangebyscore(_moves_key(), "-inf", f"({at - keep_s}")
    pipe.execute()


def replay_moves_between(after: float, until: float) -> int:
    """The bundles seen on another broker after ``after`` and at or before ``until`` (s since
    epoch), by ``replay_moves_add``; 0 while Redis is away and a page asks."""

    def read() -> int:
        rows: Any = client().zrangebyscore(_moves_key(), f"({after}", until)
        total = 0
        for member in rows or []:
            text = member.decode() if isinstance(member, bytes) else str(member)
            try:
                total += int(text.rsplit(":", 1)[1])
            except (IndexError, ValueError):
                continue
        return total

    return _read_or_last(read, lambda: 0)


def clear() -> None:
    """Remove every key of this store (tests, and a reset of the demo)."""
    _recent.clear()
    redis_client = client()
    keys = list(redis_client.scan_iter(match=f"{settings.FULCRUM_LOAD_STORE_PREFIX}*", count=1000))
    if keys:
        redis_client.delete(*keys)


def gauge_put(name: str, value: dict[str, Any]) -> None:
    """Keep one computed figure for the pages (the optimality gauge, say), as JSON."""
    client().set(f"{settings.FULCRUM_LOAD_STORE_PREFIX}gauge:{name}", json.dumps(value))


def gauge_get(name: str) -> dict[str, Any] | None:
    """A figure kept by ``gauge_put``; None when there is none or it does not decode (within
    ``stale_allowed``, while Redis is away: the one this process read last)."""

    def read() -> dict[str, Any] | None:
        raw: Any = client().get(f"{settings.FULCRUM_LOAD_STORE_PREFIX}gauge:{name}")
        try:
            found = json.loads(raw) if raw else None
        except ValueError:
            found = None
        _last_gauges[name] = found if isinstance(found, dict) else None
        return _last_gauges[name]

    return _read_or_last(read, lambda: _last_gauges.get(name))


def _published_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}rankings:published"


def rankings_swap(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Record ``rows`` as the rankings last sent to the dashboards; the ones sent before (None:
    none yet, or an entry nobody can read). One round trip (SET with GET)."""
    found: Any = client().set(_published_key(), json.dumps(rows), get=True)
    if not found:
        return None
    try:
        previous = json.loads(found)
    except ValueError:
        return None
    return previous if isinstance(previous, list) else None
