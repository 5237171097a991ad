"""The live load store: every broker's newest load report and its bundles' time-averaged rates,
kept in Redis because it is hot, high-rate data.

The ingest path writes one broker's entry per report (a hash: the report as JSON and the bundle
records as packed NumPy rows); the tick and the pages read every entry in one round trip. The
metadata store (ownership, config, decisions, audit) never sees a report: the reports also go
to a Redis stream that ``history_flush`` folds into ``LoadReport`` rows in batches.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import redis
from django.conf import settings

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
    since epoch) and its bundles' records (``BUNDLE_RECORD``)."""

    report: dict[str, Any]
    bundles: np.ndarray

    @property
    def reported_at(self) -> float:
        return float(self.report["reportedAt"])


@cache
def client() -> redis.Redis:
    """The process's Redis client (a connection pool; safe across forks)."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )


def _key(broker: str) -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}broker:{broker}"


def _history_key() -> str:
    return f"{settings.FULCRUM_LOAD_STORE_PREFIX}history"


def entry_get(broker: str) -> BrokerEntry | None:
    """One broker's entry, None when it never reported."""
    raw = client().hgetall(_key(broker))
    return _entry(raw)


def entries_get(brokers: list[str]) -> dict[str, BrokerEntry]:
    """The entries of ``brokers`` that reported, in one round trip."""
    pipe = client().pipeline(transaction=False)
    for name in brokers:
        pipe.hgetall(_key(name))
    out = {}
    for name, raw in zip(brokers, pipe.execute(), strict=True):
        entry = _entry(raw)
        if entry is not None:
            out[name] = entry
    return out


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


def entry_put(
    broker: str,
    build: Callable[[BrokerEntry | None], BrokerEntry],
    *,
    reported_at: float,
) -> BrokerEntry:
    """Replace ``broker``'s entry with ``build(previous entry or None)`` when ``reported_at`` is
    newer than the stored report, atomically (optimistic: WATCH, retried on a concurrent write),
    and append the report to the history stream.

    Raises:
        StaleReport: the stored report is as new or newer; nothing is written.
    """
    key = _key(broker)
    with client().pipeline() as pipe:
        while True:
            try:
                pipe.watch(key)
                previous = _entry(pipe.hgetall(key))
                if previous is not None and previous.reported_at >= reported_at:
                    raise StaleReport(previous.reported_at)
                entry = build(previous)
                report = json.dumps(entry.report, separators=(",", ":"))
                pipe.multi()
                pipe.hset(key, mapping={"report": report, "bundles": entry.bundles.tobytes()})
                pipe.xadd(
                    _history_key(),
                    {"broker": broker, "report": report},
                    maxlen=HISTORY_MAX,
                    approximate=True,
                )
                pipe.execute()
                return entry
            except redis.WatchError:
                continue


def entry_delete(broker: str) -> None:
    """Forget a broker's entry (the broker was removed)."""
    client().delete(_key(broker))


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


def clear() -> None:
    """Remove every key of this store (tests, and a reset of the demo)."""
    redis_client = client()
    keys = list(redis_client.scan_iter(match=f"{settings.FULCRUM_LOAD_STORE_PREFIX}*", count=1000))
    if keys:
        redis_client.delete(*keys)
