"""Reads: ORM rows -> balancer types, and the rows the pages show."""

from __future__ import annotations

import collections
import gc
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np
import psycopg
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.db.models import Case, Count, Field, Q, QuerySet, When
from psycopg.abc import Buffer

from balancer.bundle_table import BundleNames, BundleTable
from balancer.bundles import parse_bundle_name
from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies, broker_life
from balancer.danube.config import DanubeConfig
from balancer.errors import BalancerError
from balancer.load import BrokerLoad
from balancer.placement.filters import anti_affinity_spread
from balancer.registry import split_keys
from balancer.safety import SafetyConfig
from balancer.safety import cool_down_s as safety_cool_down_s
from balancer.shedding.fulcrum import NAME as FULCRUM
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from balancer.splitting.algorithms import TopicLoad
from balancer.stats import imbalance
from balancer.wire import parse_broker
from console import loadstore
from console.models import (
    AuditEvent,
    BalancerConfig,
    Broker,
    BrokerCredential,
    Bundle,
    BundleLive,
    Cluster,
    ClusterSample,
    ConfigVersion,
    Decision,
    LoadReport,
    Namespace,
    PulsarConnection,
    PulsarMove,
    ReportRun,
    is_quiet,
)
from console.services.deadman import deadman_alive, deadman_limit_s
from console.services.errors import ConsoleError

log = logging.getLogger(__name__)
T = TypeVar("T")


def broker_load_from_document(name: str, doc: dict[str, Any]) -> BrokerLoad:
    """A stored report (``loadstore.BrokerEntry.report``: CLI.md broker document with
    ``reportedAt``) as the balancer's ``BrokerLoad``."""
    load = parse_broker({**doc, "name": name}, "")
    # The report's time is also Pulsar's BrokerLoadData.updatedAt (TransferShedder's TTL).
    return replace(load, updated_at=load.reported_at)


def broker_load_get(
    broker: Broker, entry: loadstore.BrokerEntry | None, bundles: Sequence[str]
) -> BrokerLoad:
    """The balancer's view of a broker: its newest report in the live store (zeros, and
    ``reported_at`` None, if it never reported), its state and failure domain from the
    metadata store, and ``bundles``."""
    domain = broker.failure_domain.name if broker.failure_domain else ""
    if entry is None:
        return BrokerLoad(
            name=broker.name, failure_domain=domain, state=broker.state, bundles=bundles
        )
    try:
        load = broker_load_from_document(broker.name, entry.report)
    except (BalancerError, KeyError, TypeError, ValueError) as exc:
        # Only checked reports are stored; a damaged entry (written by hand, an old version)
        # must not stop the tick: the broker counts as one that has not reported.
        log.warning("skipping %s's stored load report: %s", broker.name, exc)
        return BrokerLoad(
            name=broker.name, failure_domain=domain, state=broker.state, bundles=bundles
        )
    return replace(load, failure_domain=domain, state=broker.state, bundles=bundles)


# The bundle columns a snapshot reads from the metadata store: ownership only (the loads are in
# the live load store).
_BUNDLE_FIELDS = ("namespace", "lower", "upper", "owner")


def _bundle_rows() -> np.ndarray:
    """Every bundle as one int64 row of ``_BUNDLE_FIELDS`` (owner -1 when none), shape (n, 4).

    Read with the driver, not the ORM: on PostgreSQL as one float8 array per column, received in
    binary and read by NumPy (ids and hash points are exact in float64); elsewhere as two packed
    integers per row streamed from the driver into one array."""
    quote = connection.ops.quote_name
    columns = []
    for name in _BUNDLE_FIELDS:
        field = Bundle._meta.get_field(name)
        assert isinstance(field, Field)
        assert field.column is not None
        column = quote(field.column)
        columns.append(f"COALESCE({column}, -1)" if name == "owner" else column)
    table = quote(Bundle._meta.db_table)
    if connection.vendor == "postgresql":
        return _postgresql_columns(columns, table).astype(np.int64)
    namespace, lower, upper, owner = columns
    with connection.cursor() as cursor:
        # Two integers per row instead of four (ids are below 2^31, hash points below 2^32):
        # half the Python objects to make and free.
        cursor.execute(
            f"SELECT ({namespace} << 32) | {lower}, (({owner} + 1) << 32) | {upper} FROM {table}"
        )
        # Streamed from the driver's cursor (Django's wrapper adds a generator step per row),
        # each row freed as soon as it is copied; no cycle can form, so the collector that a
        # million row tuples would wake again and again is paused meanwhile.
        collecting = gc.isenabled()
        gc.disable()
        try:
            packed = np.fromiter(itertools.chain.from_iterable(cursor.cursor), dtype=np.int64)
        finally:
            if collecting:
                gc.enable()
    packed = packed.reshape(-1, 2)
    low = np.int64(0xFFFFFFFF)
    return np.column_stack(
        [packed[:, 0] >> 32, packed[:, 0] & low, packed[:, 1] & low, (packed[:, 1] >> 32) - 1]
    )


def _postgresql_columns(columns: list[str], table: str) -> np.ndarray:
    """``SELECT array_agg(column::float8), ...`` in one scan, each array parsed by NumPy."""
    select = ", ".join(f"array_agg(CAST({c} AS DOUBLE PRECISION))" for c in columns)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.adapters.register_loader(FLOAT8_ARRAY_OID, _Float8ArrayLoader)
        cursor.execute(f"SELECT {select} FROM {table}", binary=True)
        arrays = cursor.fetchone()
    if arrays is None or arrays[0] is None:  # no bundles at all
        return np.zeros((0, len(columns)))
    return np.column_stack(arrays)


FLOAT8_ARRAY_OID = 1022  # PostgreSQL's float8[]


class _Float8ArrayLoader(psycopg.adapt.Loader):
    """A binary float8[] without NULLs -> a float64 NumPy array (psycopg loader protocol).

    The format: ndim, has-null flag, element type (4 bytes each), then per dimension its length
    and lower bound (4 + 4), then per element a 4-byte length and 8 big-endian bytes."""

    format = psycopg.pq.Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        view = memoryview(data)
        ndim = int.from_bytes(view[0:4], "big")
        if ndim == 0:
            return np.zeros(0)
        count = int.from_bytes(view[12:16], "big")
        element = np.dtype([("length", ">i4"), ("value", ">f8")])
        records = np.frombuffer(view[12 + 8 * ndim :], dtype=element, count=count)
        return records["value"].astype(np.float64)


def _codes(ids: np.ndarray, known: list[int]) -> np.ndarray:
    """Database ids -> positions in ``known`` (ascending ids); -1 for an id not there."""
    keys = np.asarray(known, dtype=np.int64)
    at = np.searchsorted(keys, ids)
    clipped = np.minimum(at, max(len(keys) - 1, 0))
    found = (at < len(keys)) & (keys[clipped] == ids) if len(keys) else np.zeros(len(ids), bool)
    return np.where(found, at, -1)


def cluster_snapshot_get(*, now: datetime) -> ClusterSnapshot:
    """Everything a decision may read: brokers' newest reports, bundle loads and owners (as
    columns: a ``BundleTable``), the namespaces' policies and the recently unloaded bundles
    (unload time, s since epoch)."""
    rows = _bundle_rows()
    # Read after the bundles: a namespace or broker deleted meanwhile drops its rows (the
    # bundles of a deleted broker are unowned by now).
    namespace_rows = list(
        Namespace.objects.order_by("id").values_list("id", "name", "anti_affinity_group")
    )
    broker_rows = list(Broker.objects.select_related("failure_domain").order_by("id"))
    namespace_pks = [pk for pk, _, _ in namespace_rows]
    namespace = _codes(rows[:, 0], namespace_pks)
    rows = rows[namespace >= 0]
    namespace = namespace[namespace >= 0]
    owner_ids = rows[:, 3]
    owner = np.where(owner_ids >= 0, _codes(owner_ids, [b.pk for b in broker_rows]), -1)
    count = len(rows)
    table = BundleTable(
        namespaces=[name for _, name, _ in namespace_rows],
        namespace=namespace,
        lower=rows[:, 1],
        upper=rows[:, 2],
        owners=[b.name for b in broker_rows],
        owner=owner,
        short_term=np.zeros((count, 4)),
        long_term=np.zeros((count, 4)),
        counts=np.zeros((count, 3), dtype=np.int64),
    )
    entries = loadstore.entries_get([b.name for b in broker_rows])
    reported = [
        (code, entries[b.name].bundles) for code, b in enumerate(broker_rows) if b.name in entries
    ]
    if reported:
        records = np.concatenate([r for _, r in reported])
        reporter = np.repeat([c for c, _ in reported], [len(r) for _, r in reported])
        at = table.rows_of(
            _codes(records["namespace"], namespace_pks), records["lower"], records["upper"]
        )
        # Only what the owner reports counts: a previous owner's entry may still hold a
        # bundle that moved since.
        mine = at >= 0
        mine[mine] = table.owner[at[mine]] == reporter[mine]
        table.short_term[at[mine]] = records["short"][mine]
        table.long_term[at[mine]] = records["long"][mine]
        table.counts[at[mine]] = records["counts"][mine]
    by_owner = np.argsort(table.owner, kind="stable")
    starts = np.searchsorted(table.owner[by_owner], np.arange(len(broker_rows) + 1))
    brokers = {
        b.name: broker_load_get(
            b, entries.get(b.name), BundleNames(table, by_owner[starts[i] : starts[i + 1]])
        )
        for i, b in enumerate(broker_rows)
    }
    namespace_names = {pk: name for pk, name, _ in namespace_rows}
    recently_unloaded = {
        f"{namespace_names[ns]}/0x{lower:08x}_0x{upper:08x}": at.timestamp()
        for ns, lower, upper, at in Bundle.objects.filter(last_unloaded_at__isnull=False)
        .order_by()
        .values_list("namespace_id", "lower", "upper", "last_unloaded_at")
        if ns in namespace_names and at is not None
    }
    namespaces = {name: NamespacePolicy(name, group or None) for _, name, group in namespace_rows}
    # Every move of the last hour, one per move (a split's children are not moves).
    moves = AuditEvent.objects.filter(
        action=AuditEvent.Action.UNLOAD, at__gte=now - timedelta(hours=1)
    ).values_list("at", flat=True)
    return ClusterSnapshot(
        now=now.timestamp(),
        brokers=brokers,
        bundles=table,
        namespaces=namespaces,
        recently_unloaded=recently_unloaded,
        recent_moves=tuple(at.timestamp() for at in moves),
        bundle_topics=_bundle_topics(loadstore.topics_get(list(entries)), brokers),
    )


def _bundle_topics(
    listed: Mapping[str, Mapping[str, Any]], brokers: Mapping[str, BrokerLoad]
) -> dict[str, tuple[TopicLoad, ...]]:
    """The topics each broker reported for the bundles it owns now (a previous owner's list
    may still name a bundle that moved since): bundle name -> topics. A damaged list (written
    by hand, an old version) is skipped and logged, never raised."""
    out: dict[str, tuple[TopicLoad, ...]] = {}
    for name, bundles in listed.items():
        if name not in brokers:
            continue
        owned = set(brokers[name].bundles)
        for bundle, rows in bundles.items():
            if bundle not in owned:
                continue
            try:
                out[bundle] = tuple(
                    TopicLoad(str(t), int(h), float(rate), float(size)) for t, h, rate, size in rows
                )
            except (TypeError, ValueError):
                log.warning("skipping %s's damaged topic list for %s", name, bundle)
    return out


def balancer_config_get() -> BalancerConfig:
    """The cluster's balancer config row (created with defaults on first use)."""
    cluster, _ = Cluster.objects.get_or_create(name="default")
    config, _ = BalancerConfig.objects.get_or_create(cluster=cluster)
    return config


def pulsar_config_get(config: BalancerConfig | None = None) -> PulsarConfig:
    """The stored parameters as the balancer's frozen config."""
    config = config or balancer_config_get()
    pulsar, _ = split_keys(config.parameters)
    return PulsarConfig.from_keys(pulsar)


def cycle_config_get(config: BalancerConfig | None = None) -> CycleConfig:
    """The cycle's whole configuration: the stored strategies and Pulsar parameters, and
    Fulcrum's safety limits from the settings (FULCRUM_BUNDLE_COOL_DOWN_S, ...)."""
    config = config or balancer_config_get()
    _, danube = split_keys(config.parameters)
    return CycleConfig(
        strategies=Strategies(config.shedder, config.placement, config.split_algorithm),
        pulsar=pulsar_config_get(config),
        danube=DanubeConfig.from_keys(danube),
        safety=SafetyConfig(
            bundle_cool_down_s=settings.FULCRUM_BUNDLE_COOL_DOWN_S,
            max_moves_per_hour=settings.FULCRUM_MAX_MOVES_PER_HOUR,
            blacklist=tuple(settings.FULCRUM_BLACKLIST),
            broker_timeout_s=settings.FULCRUM_BROKER_TIMEOUT_S,
            is_auto_split_enabled=config.is_auto_split_enabled,
        ),
        is_shedding_enabled=config.is_shedding_enabled,
    )


def broker_rankings() -> list[dict[str, Any]]:
    """Dashboard rows, least loaded first: score (weighted max usage, %), cpu %, bandwidth in/out %,
    bundles, throughput (bytes/s), msg rate (msg/s), state, failure domain."""
    rows = []
    counts: dict[int, int] = {}
    for owner_id in Bundle.objects.filter(owner__isnull=False).values_list("owner_id", flat=True):
        counts[owner_id] = counts.get(owner_id, 0) + 1
    brokers = list(Broker.objects.select_related("failure_domain"))
    entries = loadstore.entries_get([b.name for b in brokers])
    weights = pulsar_config_get().weights
    for broker in brokers:
        entry = entries.get(broker.name)
        load = broker_load_get(broker, entry, ())
        score = load.weighted_max_usage(weights) if entry is not None else 0.0
        rows.append(
            {
                "name": broker.name,
                "state": broker.state,
                "failureDomain": load.failure_domain,
                "score": round(score * 100, 1),
                "cpu": round(load.cpu.percent(), 1),
                "bandwidthIn": round(load.bandwidth_in.percent(), 1),
                "bandwidthOut": round(load.bandwidth_out.percent(), 1),
                "bundles": counts.get(broker.pk, 0),
                "throughput": load.rates.throughput,
                "msgRate": load.rates.msg_rate,
                "reportedAt": (
                    datetime.fromtimestamp(entry.reported_at, UTC).isoformat() if entry else None
                ),
            }
        )
    rows.sort(key=lambda r: (r["score"], r["name"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows


def current_imbalance(rows: list[dict[str, Any]] | None = None) -> dict[str, float]:
    """CV, mean and std of the serving brokers' scores (fractions: active, and reporting within
    ``FULCRUM_BROKER_TIMEOUT_S`` — a lost broker serves nothing), from the newest reports, and
    ``serving``, how many they are (below 2 the CV says nothing)."""
    rows = broker_rankings() if rows is None else rows
    # Serving: active, and reporting within the broker timeout (a lost broker serves nothing).
    fresh = datetime.now(UTC).timestamp() - settings.FULCRUM_BROKER_TIMEOUT_S
    scores = [
        r["score"] / 100
        for r in rows
        if r["state"] == "active"
        and r["reportedAt"]
        and datetime.fromisoformat(r["reportedAt"]).timestamp() >= fresh
    ]
    spread = imbalance(scores)
    return {"cv": spread.cv, "mean": spread.mean, "std": spread.std, "serving": len(scores)}


def namespace_rows(contains: str = "") -> QuerySet[Namespace]:
    """Namespaces by name with their tenant and ``bundle_count`` (one query a page, at any
    size); ``contains``: part of the name, any case."""
    rows = Namespace.objects.select_related("tenant").annotate(bundle_count=Count("bundles"))
    if contains:
        rows = rows.filter(name__icontains=contains)
    return rows.order_by("name")


def bundles_with_loads(bundles: Sequence[Bundle]) -> Sequence[Bundle]:
    """Attach the live load store's figures (``Bundle.live``) to ``bundles``, each read from
    its owner's entry; unowned or unreported bundles keep zeros. Returns ``bundles``."""
    owners = sorted({b.owner.name for b in bundles if b.owner_id is not None and b.owner})
    entries = loadstore.entries_get(owners)
    found: dict[tuple[int, int, int, str], tuple[Any, ...]] = {}
    for owner, entry in entries.items():
        for record in entry.bundles:
            key = (int(record["namespace"]), int(record["lower"]), int(record["upper"]), owner)
            found[key] = (record["short"], record["long"], record["counts"])
    for bundle in bundles:
        if bundle.owner is None:
            continue
        hit = found.get((bundle.namespace_id, bundle.lower, bundle.upper, bundle.owner.name))
        if hit is not None:
            short, long, counts = hit
            bundle.live = BundleLive(
                tuple(short.tolist()), tuple(long.tolist()), tuple(counts.tolist())
            )
    return bundles


# token SHA-256 -> (broker, monotonic expiry): a revoked token stops working within this long.
class NotCached(LookupError):
    """The answer is not cached and needs the database (asked with ``cached_only``)."""


_CREDENTIAL_CACHE_S = 2.0
# Every active token's digest -> its broker, and until when (monotonic s) that copy holds. One
# query reads them all: a thousand brokers' tokens cost one lookup per process every 2 s, and a
# stream of made-up tokens costs none.
_credentials: tuple[float, dict[str, str]] | None = None


def credential_broker(token: str, *, cached_only: bool = False) -> str | None:
    """The broker an active token belongs to, None for no such token. Revoked or rotated tokens
    stop within 2 s in every process (at once in the one that revoked them).

    Raises:
        NotCached: ``cached_only`` and the answer needs the database.
    """
    global _credentials
    table = _credentials
    now = time.monotonic()
    if table is None or table[0] <= now:
        if cached_only:
            raise NotCached(token)
        table = _credentials = (
            now + _CREDENTIAL_CACHE_S,
            dict(
                BrokerCredential.objects.filter(revoked_at__isnull=True).values_list(
                    "token_sha256", "broker__name"
                )
            ),
        )
    return table[1].get(BrokerCredential.digest(token))


def credential_cache_clear() -> None:
    """Forget cached token lookups (after a rotation or revocation in this process)."""
    global _credentials
    _credentials = None


def broker_owned_bundles(broker: str) -> list[tuple[int, str, int, int]] | None:
    """The bundles ``broker`` owns as (namespace id, namespace name, lower, upper); None when no
    broker has that name. One indexed query in SQL (the ORM's compilation costs more than the
    query, and every load report asks)."""
    # Table names come from the models, the broker name is a parameter.
    bundle, namespace, owner = (m._meta.db_table for m in (Bundle, Namespace, Broker))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT b.namespace_id, n.name, b.lower, b.upper FROM {bundle} b "
            f"JOIN {namespace} n ON n.id = b.namespace_id "
            f"WHERE b.owner_id = (SELECT id FROM {owner} WHERE name = %s)",
            [broker],
        )
        rows: list[tuple[int, str, int, int]] = cursor.fetchall()
    if not rows and not Broker.objects.filter(name=broker).exists():
        return None
    return rows


def decision_feed(*, limit: int = 10, scan: int = 1000) -> list[dict[str, Any]]:
    """The dashboard's latest decisions, newest first: each that acted (or vetoed, or failed)
    as ``{"type": "decision", "id", "at", "kind", "strategy", "reason", "summary"}``, and each
    run of quiet cycles between them as one ``{"type": "quiet", "count", "first", "last",
    "reason"}`` (times ISO 8601, UTC), so that no-op ticks never push actions out. At most
    ``limit`` items from the newest ``scan`` decisions."""
    feed: list[dict[str, Any]] = []
    rows = Decision.objects.values_list("id", "at", "kind", "strategy", "reason", "summary")
    for pk, at, kind, strategy, reason, summary in rows[:scan]:
        when = at.astimezone(UTC).isoformat()
        if is_quiet(reason, summary):
            if feed and feed[-1]["type"] == "quiet":
                feed[-1]["count"] += 1
                feed[-1]["first"] = when
                continue
            if len(feed) == limit:
                break
            feed.append(
                {"type": "quiet", "count": 1, "first": when, "last": when, "reason": reason}
            )
            continue
        if len(feed) == limit:
            break
        feed.append(
            {
                "type": "decision",
                "id": pk,
                "at": when,
                "kind": kind,
                "strategy": strategy,
                "reason": reason,
                "summary": summary,
            }
        )
    return feed


def loop_health(*, now: datetime | None = None) -> dict[str, Any]:
    """The shedding loop as an operator checks it: ``{"lastTick", "nextTick"}`` (ISO, UTC, or
    None before the first tick), ``intervalS`` (s), ``sheddingEnabled`` (False: paused — the
    life cycle and placement still run), ``overdue`` (no tick for 3 intervals: is a Celery
    worker and beat running?), ``strategies`` {shedder, placement, split}."""
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    last = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    interval = max(config.loop_interval_s, 1.0)
    return {
        "lastTick": last.astimezone(UTC).isoformat() if last else None,
        "nextTick": (last + timedelta(seconds=interval)).astimezone(UTC).isoformat()
        if last
        else None,
        "intervalS": interval,
        "sheddingEnabled": config.is_shedding_enabled,
        "overdue": last is None or (now - last).total_seconds() > 3 * interval,
        "strategies": {
            "shedder": config.shedder,
            "placement": config.placement,
            "split": config.split_algorithm,
        },
    }


# The words the cycle gives a move it makes because a broker is draining or lost
# (``balancer.cycle._life_cycle_unloads``): the cluster's or an operator's doing, not a change
# of the balancer's mind.
DELIBERATE_WORDS = (" is draining", " sent no load report for ")


def _moves(
    since: datetime, until: datetime
) -> list[tuple[int, str, str, str, datetime, Any, bool]]:
    """Every move (unload) from an hour before ``since`` to ``until``, oldest first: (audit id,
    bundle, source, destination, at, decision id, deliberate). *Deliberate*: an operator's
    (an unload, an undo, a drain's moves) or one a drain or a lost broker made the balancer
    make — never an oscillation of the balancer's."""
    deliberate = Q(actor__isnull=False) | Q(reverses__isnull=False)
    for words in DELIBERATE_WORDS:
        deliberate |= Q(reason__contains=words)
    rows = (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.UNLOAD,
            at__gte=since - timedelta(hours=1),
            at__lte=until,
        )
        .annotate(deliberate=Case(When(deliberate, then=True), default=False))
        .order_by("at", "id")
        .values_list("id", "target", "source", "destination", "at", "decision_id", "deliberate")
    )
    return list(rows)


def bounces(*, since: datetime, until: datetime | None = None) -> list[dict[str, Any]]:
    """Oscillations: moves of a bundle back to a broker it left within the hour before, among
    the moves from ``since`` to ``until`` (newest first): ``{"id", "bundle", "broker", "at"
    (ISO, UTC), "leftAt", "decision"}``. Only the balancer's own moves are oscillations: an
    operator's move back (an undo, a drain) is deliberate (``_moves``), though a balancer's
    move that undoes an operator's is one."""
    until = until or datetime.now(UTC)
    left: dict[str, list[tuple[str, datetime]]] = {}
    out = []
    for pk, bundle, source, destination, at, decision, deliberate in _moves(since, until):
        earlier = [
            t
            for broker, t in left.get(bundle, ())
            if broker == destination and at - t <= timedelta(hours=1)
        ]
        if destination and earlier and at >= since and not deliberate:
            out.append(
                {
                    "id": pk,
                    "bundle": bundle,
                    "broker": destination,
                    "at": at.astimezone(UTC).isoformat(),
                    "leftAt": earlier[-1].astimezone(UTC).isoformat(),
                    "decision": decision,
                }
            )
        if source:
            left.setdefault(bundle, []).append((source, at))
    return out[::-1]


def flip_flops(*, since: datetime, until: datetime | None = None) -> list[dict[str, Any]]:
    """Brokers flip-flopping: within one hour a broker gave bundles away, then received, then
    gave again (or received, gave, received): the balancer changed its mind about it twice (its
    own moves only: ``_moves``' deliberate ones are left out). The
    moves of one decision are one step per broker, by their balance (a swap, one bundle each
    way, is no step). One entry per decision completing such a pattern from ``since`` to
    ``until`` (newest first): ``{"id" (its last move's audit id), "broker", "at" (ISO, UTC),
    "firstAt" (the pattern's first step), "pattern" (e.g. "gave 2, took 1, gave 1"),
    "decision"}``."""
    until = until or datetime.now(UTC)
    # The moves grouped by decision (a move without one is a group of its own), in order.
    groups: list[tuple[Any, int, datetime, dict[str, int]]] = []
    keys: dict[Any, int] = {}
    for pk, _, source, destination, at, decision, deliberate in _moves(since, until):
        if deliberate:  # an operator's or a drain's: not the balancer changing its mind
            continue
        key = decision if decision is not None else ("move", pk)
        if key not in keys:
            keys[key] = len(groups)
            groups.append((decision, pk, at, {}))
        index = keys[key]
        decision_id, _, first_at, net = groups[index]
        groups[index] = (decision_id, pk, first_at, net)
        if source:
            net[source] = net.get(source, 0) + 1
        if destination:
            net[destination] = net.get(destination, 0) - 1
    # broker -> its steps in the window: (at, "gave" | "took", how many)
    seen: dict[str, list[tuple[datetime, str, int]]] = {}
    out = []
    for decision, last_pk, at, net in groups:
        for broker, balance in sorted(net.items()):
            if balance == 0:
                continue
            step = (at, "gave" if balance > 0 else "took", abs(balance))
            recent = [m for m in seen.get(broker, ()) if at - m[0] <= timedelta(hours=1)]
            recent.append(step)
            seen[broker] = recent
            runs: list[list[Any]] = []  # [way, count, first at]
            for t, way, count in recent:
                if runs and runs[-1][0] == way:
                    runs[-1][1] += count
                else:
                    runs.append([way, count, t])
            # A flip-flop is completed by the step that starts a third run.
            if len(runs) >= 3 and runs[-1][2] == at and at >= since:
                last = runs[-3:]
                out.append(
                    {
                        "id": last_pk,
                        "broker": broker,
                        "at": at.astimezone(UTC).isoformat(),
                        "firstAt": last[0][2].astimezone(UTC).isoformat(),
                        "pattern": ", ".join(f"{w} {n}" for w, n, _ in last),
                        "decision": decision,
                    }
                )
    return out[::-1]


def cool_down_s(config: BalancerConfig, cycle: CycleConfig) -> float:
    """How long (seconds) the balancer leaves a moved bundle alone under ``config``
    (``balancer.safety.cool_down_s``)."""
    return safety_cool_down_s(cycle.pulsar, cycle.safety, fulcrum=config.shedder == FULCRUM)


def balance_status(*, now: datetime | None = None) -> dict[str, Any]:
    """The dashboard's balance panel.

    Returns:
        ``optimality``: the gauge (``services.optimality``: "maxOverMean",
        "optimumMaxOverMean", "ratio", "at"), None until the worker measured it;
        ``budget``: {"used" (moves in the last hour), "limit" (the least of
        FULCRUM_MAX_MOVES_PER_HOUR when set and, under FulcrumShedder, its
        fulcrumMaxMovesPerHour when set (> 0); None: no limit)};
        ``coolDown``: {"seconds" (the longest of Fulcrum's cool-down, Pulsar's grace period and,
        under FulcrumShedder, its own), "bundles" (how many wait), "next": the five soonest
        eligible [{"bundle", "eligibleAt" (ISO, UTC), "inS"}]};
        ``oscillations``: ``bounces`` of the last hour; ``flipFlops``: ``flip_flops`` of the
        last hour;
        ``quiet``: when the latest shedding decision moved nothing, its strategy, reason and
        the brokers it left alone with why ([{"broker", "reason", "detail"}]), else None.
    """
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    fulcrum = config.shedder == FULCRUM
    used = AuditEvent.objects.filter(
        action=AuditEvent.Action.UNLOAD, at__gte=now - timedelta(hours=1)
    ).count()
    limits = [settings.FULCRUM_MAX_MOVES_PER_HOUR] if settings.FULCRUM_MAX_MOVES_PER_HOUR else []
    if fulcrum and cycle.pulsar.fulcrum_max_moves_per_hour > 0:
        limits.append(cycle.pulsar.fulcrum_max_moves_per_hour)
    cool = cool_down_s(config, cycle)
    waiting: list[tuple[datetime, str, int, int]] = sorted(
        (at + timedelta(seconds=cool), name, lower, upper)
        for name, lower, upper, at in Bundle.objects.filter(
            last_unloaded_at__gt=now - timedelta(seconds=cool)
        ).values_list("namespace__name", "lower", "upper", "last_unloaded_at")
        if at is not None
    )
    latest = Decision.objects.filter(kind=Decision.Kind.SHED).order_by("-at").first()
    quiet = None
    if latest is not None and not any(
        a.get("kind") == "unload" and a.get("outcome") == "planned"
        for a in (latest.details or {}).get("actions", [])
    ):
        skipped = ((latest.details or {}).get("shedding") or {}).get("skipped", [])
        quiet = {
            "strategy": latest.strategy,
            "reason": latest.reason,
            "at": latest.at.astimezone(UTC).isoformat(),
            "skipped": [
                {
                    "broker": s.get("broker"),
                    "reason": s.get("reason"),
                    "detail": s.get("detail", ""),
                }
                for s in skipped
                if isinstance(s, dict) and s.get("broker")
            ][:5],
        }
    return {
        "optimality": loadstore.gauge_get("optimality"),
        "budget": {"used": used, "limit": min(limits) if limits else None},
        "coolDown": {
            "seconds": cool,
            "bundles": len(waiting),
            "next": [
                {
                    "bundle": f"{name}/0x{lower:08x}_0x{upper:08x}",
                    "eligibleAt": at.astimezone(UTC).isoformat(),
                    "inS": max(0.0, (at - now).total_seconds()),
                }
                for at, name, lower, upper in waiting[:5]
            ],
        },
        "oscillations": bounces(since=now - timedelta(hours=1), until=now),
        "flipFlops": flip_flops(since=now - timedelta(hours=1), until=now),
        "quiet": quiet,
    }


REPORT_RESULTS: Final = (
    "broker_hours",
    "cluster_minutes",
    "hot_bundles",
    "move_effects",
    "namespace_hours",
    "ranking",
)


def report_results(
    run: ReportRun, name: str, *, limit: int = 1000, newest: bool = False
) -> dict[str, Any]:
    """The rows of one result a run wrote (JSON lines under ``FULCRUM_REPORTS_DIR/run-<id>/
    <name>/``), in the job's order (oldest first for time series): the first ``limit``, or with
    ``newest`` the last ``limit``; ``{"rows", "truncated" (more rows were written)}``; none when
    the run wrote none.

    Raises:
        ConsoleError: 404 for a name that is not a result (``REPORT_RESULTS``); 400 for a limit
            outside 1–5,000.
    """
    if name not in REPORT_RESULTS:
        raise ConsoleError(
            f"no result {name!r}; results: {', '.join(REPORT_RESULTS)}", status=404, field="name"
        )
    if not 1 <= limit <= 5000:
        raise ConsoleError("the limit is 1 to 5,000 rows", field="limit")
    rows: collections.deque[dict[str, Any]] = collections.deque(maxlen=limit if newest else None)
    seen = 0
    directory = Path(settings.FULCRUM_REPORTS_DIR) / f"run-{run.pk}" / name
    for part in sorted(directory.glob("part-*.json")):
        with part.open() as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn line: left out
                seen += 1
                if not newest and len(rows) == limit:
                    return {"rows": list(rows), "truncated": True}
                rows.append(row)
    return {"rows": list(rows), "truncated": seen > len(rows)}


def cv_series(*, limit: int = 360) -> dict[str, list[Any]]:
    """The last ``limit`` CV samples for the dashboard's plot: ``at`` (ISO 8601, UTC) and ``cv``
    (population standard deviation / mean of broker usage). Where two samples are more than 3
    loop intervals apart (the console was stopped) a null goes between them, so the line breaks
    there instead of drawing a trend nobody measured."""
    samples = list(ClusterSample.objects.order_by("-at")[:limit])[::-1]
    gap = timedelta(seconds=3 * max(balancer_config_get().loop_interval_s, 1.0))
    at: list[str] = []
    cv: list[float | None] = []
    for before, sample in zip([None, *samples], samples, strict=False):
        if before is not None and sample.at - before.at > gap:
            at.append((before.at + (sample.at - before.at) / 2).isoformat())
            cv.append(None)
        at.append(sample.at.isoformat())
        cv.append(sample.cv)
    return {"at": at, "cv": cv}


async def database_read(read: Callable[..., T], *args: Any) -> T:
    """``read(*args)`` on Django's sync thread, for the asyncio hot path (outside Django's request
    cycle, which would otherwise recycle the connection): a connection the database dropped is
    closed, so that the next read reconnects, and the call is refused.

    Raises:
        ConsoleError: 503 the metadata store is unreachable.
    """
    try:
        return await sync_to_async(read)(*args)
    except (OperationalError, InterfaceError) as exc:
        await sync_to_async(close_old_connections)()
        raise ConsoleError(
            f"the metadata store is unavailable, retry later: {exc}", status=503
        ) from None


# The bundle map's page: whole namespaces, in name order, up to this many bundles (at least one
# namespace); a cluster of at most this many is one page. 50,000 bundles in one page were 6 MB
# of JSON every 5 s to each open map (issue 26).
BUNDLE_MAP_PAGE_BUNDLES = 2000


def page_params(params: Mapping[str, str], text: str) -> tuple[int, str]:
    """A paged list's ``page`` (1-based; default 1) and its filter, the query parameter named
    ``text`` (part of a name, any case), from query ``params``: the bundle map's and the
    namespaces list's.

    Raises:
        ConsoleError: 400 naming ``page`` (not a whole number from 1) or ``text`` (over 300
            characters, or a NUL).
    """
    raw = str(params.get("page") or "1").strip()
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1 or len(raw) > 9:
        raise ConsoleError("page is a whole number from 1", field="page")
    contains = str(params.get(text) or "").strip()
    if len(contains) > 300 or "\x00" in contains:
        raise ConsoleError(f"{text} is at most 300 characters, without NUL", field=text)
    return int(raw), contains


def bundle_map(*, now: datetime | None = None, page: int = 1, contains: str = "") -> dict[str, Any]:
    """Every namespace's hash space as its bundles, for the bundle map: ``{"at" (ISO, UTC),
    "brokers": [{"name", "domain", "state"}] by name (a broker's colour is its position),
    "namespaces": [{"name", "antiAffinityGroup", "bundles": [[lower, upper, owner or None,
    throughput (bytes/s, short-term), msg rate (msg/s), topics, last move (ISO or None),
    eligible at, figures]]}]}``. ``eligible at`` (ISO, UTC): when a bundle moved within the
    cool-down (``cool_down_s``) may move again; None when it may now. Until then the balancer
    will not move it (an operator may, with an override). ``figures``: "reported" (its
    owner's last report), "estimated" (not reported since a split: its share of the hash range
    of the bundle it was cut from, as last reported) or "none". ``moving``: bundle name ->
    {"state" (queued, sending, verifying), "source", "destination" (None: Pulsar chooses)} for
    the unloads queued or in flight on an attached Pulsar cluster.

    Paged by whole namespaces (``BUNDLE_MAP_PAGE_BUNDLES``): ``page`` asks for one (past the
    last: the last), ``contains`` keeps the namespaces whose name holds it; ``"page": {"number",
    "pages", "namespaces" and "bundles" (all that match), "first", "last" (the page's
    namespaces), "contains"}``."""
    now = now or datetime.now(UTC)
    listed = Namespace.objects.order_by("name")
    if contains:
        listed = listed.filter(name__icontains=contains)
    pages: list[list[tuple[int, str]]] = [[]]
    size = total = 0
    for pk, name, count in listed.annotate(n=Count("bundles")).values_list("pk", "name", "n"):
        if pages[-1] and size + count > BUNDLE_MAP_PAGE_BUNDLES:
            pages.append([])
            size = 0
        pages[-1].append((pk, name))
        size += count
        total += count
    number = min(max(1, page), len(pages))
    shown = pages[number - 1]
    shown_ids = {pk for pk, _ in shown}
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    quiet_s = cool_down_s(config, cycle)
    brokers = list(Broker.objects.select_related("failure_domain").order_by("name"))
    # Every reported record: (namespace id, lower, upper) -> (reporter, throughput (bytes/s),
    # msg rate (msg/s), topics); by namespace too, where a split's children find their parent.
    reported: dict[tuple[int, int, int], tuple[str, float, float, int]] = {}
    by_namespace: dict[int, list[tuple[int, int, float, float, int]]] = {}
    for name, live in loadstore.entries_get([b.name for b in brokers]).items():
        records = live.bundles
        records = records[np.isin(records["namespace"], list(shown_ids))]
        short = records["short"]
        throughput = (short[:, 2] + short[:, 3]).tolist()
        msg_rate = (short[:, 0] + short[:, 1]).tolist()
        topics = records["counts"][:, 0].tolist()
        keys = zip(
            records["namespace"].tolist(),
            records["lower"].tolist(),
            records["upper"].tolist(),
            strict=True,
        )
        for key, t, m, n in zip(keys, throughput, msg_rate, topics, strict=True):
            reported[key] = (name, t, m, n)
            by_namespace.setdefault(key[0], []).append((key[1], key[2], t, m, n))
    policies = dict(
        Namespace.objects.filter(pk__in=shown_ids).values_list("pk", "anti_affinity_group")
    )
    namespaces: dict[int, dict[str, Any]] = {}
    rows = (
        Bundle.objects.filter(namespace_id__in=shown_ids)
        .order_by("namespace__name", "lower")
        .values_list(
            "namespace_id", "namespace__name", "lower", "upper", "owner__name", "last_unloaded_at"
        )
    )
    for namespace_id, namespace, lower, upper, owner, moved in rows:
        entry = namespaces.get(namespace_id)
        if entry is None:
            entry = namespaces[namespace_id] = {
                "name": namespace,
                "antiAffinityGroup": policies.get(namespace_id) or None,
                "bundles": [],
            }
        hit = reported.get((namespace_id, lower, upper))
        if hit is not None and owner is not None and hit[0] == owner:
            _, throughput, msg_rate, topics = hit
            figures = "reported"
        else:
            throughput, msg_rate, topics, figures = 0.0, 0.0, 0, "none"
            parent = next(
                (
                    r
                    for r in by_namespace.get(namespace_id, ())
                    if r[0] <= lower and upper <= r[1] and r[1] - r[0] > upper - lower
                ),
                None,
            )
            if parent is not None:
                share = (upper - lower) / (parent[1] - parent[0])
                throughput, msg_rate = parent[2] * share, parent[3] * share
                topics, figures = round(parent[4] * share), "estimated"
        entry["bundles"].append(
            [
                lower,
                upper,
                owner,
                throughput,
                msg_rate,
                topics,
                moved.astimezone(UTC).isoformat() if moved else None,
                (moved + timedelta(seconds=quiet_s)).astimezone(UTC).isoformat()
                if moved and (now - moved).total_seconds() < quiet_s
                else None,
                figures,
            ]
        )
    return {
        "at": now.astimezone(UTC).isoformat(),
        "brokers": [
            {
                "name": b.name,
                "domain": b.failure_domain.name if b.failure_domain else "",
                "state": b.state,
            }
            for b in brokers
        ],
        "namespaces": list(namespaces.values()),
        "page": {
            "number": number,
            "pages": len(pages),
            "namespaces": sum(len(p) for p in pages),
            "bundles": total,
            "first": shown[0][1] if shown else None,
            "last": shown[-1][1] if shown else None,
            "contains": contains,
        },
        # The bundles on their way on Pulsar: still on their owner until Pulsar is seen moving
        # them (a drained broker's, say), shown as what they are.
        "moving": {
            m.bundle: {"state": m.state, "destination": m.destination or None, "source": m.source}
            for m in PulsarMove.objects.filter(
                state__in=PulsarMove.IN_FLIGHT, kind=PulsarMove.Kind.UNLOAD
            ).only("bundle", "state", "destination", "source")
        },
    }


def drain_progress() -> dict[str, dict[str, Any]]:
    """Each broker that is draining or drained, by name: ``{"state", "since" (ISO 8601 UTC or
    None), "bundles" (still owned), "queued", "inFlight" (sent, being verified), "failed"
    (moves from or to it that ended failed or skipped since its drain began)}`` — moves on an
    attached Pulsar cluster (``PulsarMove``); 0 on the simulator, whose moves apply at once."""
    rows = list(Broker.objects.exclude(state=Broker.State.ACTIVE))
    if not rows:
        return {}
    names = [b.name for b in rows]
    owned = dict(
        Bundle.objects.filter(owner__name__in=names)
        .values("owner__name")
        .annotate(n=Count("id"))
        .values_list("owner__name", "n")
    )
    moves = PulsarMove.objects.filter(Q(source__in=names) | Q(destination__in=names))
    out: dict[str, dict[str, Any]] = {}
    for broker in rows:
        mine = moves.filter(Q(source=broker.name) | Q(destination=broker.name))
        failed = mine.filter(outcome__in=[PulsarMove.Outcome.FAILED, PulsarMove.Outcome.SKIPPED])
        if broker.state_since is not None:
            failed = failed.filter(finished_at__gte=broker.state_since)
        out[broker.name] = {
            "state": broker.state,
            "since": broker.state_since.astimezone(UTC).isoformat() if broker.state_since else None,
            "bundles": owned.get(broker.name, 0),
            "queued": mine.filter(state=PulsarMove.State.QUEUED).count(),
            "inFlight": mine.filter(
                state__in=[PulsarMove.State.SENDING, PulsarMove.State.VERIFYING]
            ).count(),
            "failed": failed.count(),
        }
    return out


def domain_layout(*, now: datetime | None = None) -> dict[str, Any]:
    """Failure domains as columns of broker cards (the dashboard's ranking rows) and the
    anti-affinity groups' spread with its violations (``anti_affinity_spread``): ``{"at",
    "failureDomainsEnabled", "domains": [{"name", "brokers": [ranking rows, with "drain":
    ``drain_progress``'s figures or None]}], "groups"}``."""
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    rows = broker_rankings()
    drains = drain_progress()
    domains: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["name"]):
        row = {**row, "drain": drains.get(row["name"])}
        domains.setdefault(row["failureDomain"] or "default", []).append(row)
    snapshot = cluster_snapshot_get(now=now)
    lost, _ = broker_life(snapshot, cycle.safety, now.timestamp())
    serving = [n for n, b in snapshot.brokers.items() if b.is_active and n not in lost]
    return {
        "at": now.astimezone(UTC).isoformat(),
        "failureDomainsEnabled": cycle.pulsar.is_failure_domains_enabled,
        "domains": [{"name": name, "brokers": domains[name]} for name in sorted(domains)],
        "groups": anti_affinity_spread(snapshot, cycle.pulsar, serving),
    }


def decision_explained(decision: Decision) -> dict[str, Any]:
    """Everything a decision page shows, from the stored plan (``CyclePlan.as_dict``) and the
    decision's audit rows: ``brokers`` [{"name", "before", "after" (predicted), "observed"}]
    (usage fractions; observed at the tick after, None until then), ``before``/``after``
    (mean, std, cv, maxOverMean), ``rule`` (the shedder's reason and its figures), ``actions``,
    ``skipped``, ``lost``, ``pending`` and ``events`` (audit rows with their load after)."""
    details = decision.details or {}
    stats = details.get("stats", {})
    before, after = stats.get("before", {}), stats.get("after", {})
    events = list(decision.auditevent_set.select_related("actor").order_by("id"))
    observed: dict[str, float] = {}
    observed_cv = None
    for event in events:
        for name, value in (event.load_after or {}).items():
            if name == "cv":
                observed_cv = value
            else:
                observed[name] = value
    names = sorted(set(before.get("brokers", {})) | set(after.get("brokers", {})))
    shedding = details.get("shedding") or {}
    brokers = [
        {
            "name": name,
            "before": before.get("brokers", {}).get(name),
            "after": after.get("brokers", {}).get(name),
            "observed": observed.get(name),
        }
        for name in names
    ]
    return {
        "brokers": brokers,
        "before": {k: before.get(k) for k in ("avgUsage", "std", "cv", "maxOverMean", "serving")},
        "after": {k: after.get(k) for k in ("avgUsage", "std", "cv", "maxOverMean", "serving")},
        "observedCv": observed_cv,
        "rule": _rule(details, shedding, decision, brokers),
        "actions": details.get("actions", []),
        "placements": _placements(details.get("actions", [])),
        "unexplainedPlacements": sum(
            1
            for a in details.get("actions", [])
            if a.get("kind") == "place"
            and a.get("destination")
            and not a.get("candidates")
            and a.get("reason") not in ("Operator", "StrategyDestination")
        ),
        "skipped": [
            {
                # As Skip.as_dict stores it ({"broker" or "bundle": name}).
                "kind": "bundle" if "bundle" in entry else "broker",
                "name": entry.get("broker") or entry.get("bundle") or entry.get("name") or "",
                "reason": entry.get("reason", ""),
                "detail": entry.get("detail", ""),
            }
            for entry in shedding.get("skipped", [])
            if isinstance(entry, dict)
        ],
        "stale": details.get("stale", []),
        "lost": details.get("lost", []),
        "pending": details.get("pending", []),
        "error": details.get("error"),
        "events": [
            {
                "id": e.pk,
                "action": e.action,
                "actor": e.actor_name,
                "target": e.target,
                "source": e.source,
                "destination": e.destination,
                "reason": e.reason,
                "before": e.load_before,
                "after": e.load_after,
            }
            for e in events
        ],
    }


def _placements(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The place actions that list their candidates (``Action.candidates``): ``bundle``,
    ``destination``, ``strategy``, ``metric`` and ``unit`` of the scores, ``scored`` [{"broker",
    "score"}] best first, ``filtered`` [{"broker", "filter", "reason", "detail"}]."""
    out = []
    for action in actions:
        candidates = action.get("candidates") or []
        if action.get("kind") != "place" or not candidates:
            continue
        metric = action.get("metric") or {}
        out.append(
            {
                "bundle": action.get("bundle"),
                "destination": action.get("destination"),
                "strategy": action.get("strategy", ""),
                "metric": metric.get("name", ""),
                "unit": metric.get("unit", ""),
                "scored": [c for c in candidates if "filter" not in c],
                "filtered": [c for c in candidates if "filter" in c],
            }
        )
    return out


# The audit's filters: query parameter -> what it matches.
AUDIT_FILTERS = {
    "id": "an audit row's id (the row alone)",
    "actor": 'an operator\'s username, or "balancer"',
    "action": "one of " + ", ".join([*AuditEvent.Action.values, "undo"]),
    "broker": "the broker a move left or reached, or the broker acted on",
    "namespace": "a namespace (tenant/ns): its bundles",
    "bundle": "part of a bundle's name",
    "q": "words in the reason or the target",
    "since": "ISO 8601 time, UTC unless it says otherwise (inclusive)",
    "until": "ISO 8601 time, UTC unless it says otherwise (exclusive)",
}


def bundle_rows(names: Iterable[str], *, skip_invalid: bool = False) -> dict[str, Bundle]:
    """The bundle rows of ``names`` (unknown names are absent), by name, in one query.

    Raises:
        ConsoleError: 400 (field ``bundle``) for a name that is no bundle name, unless
            ``skip_invalid`` (then it is absent, as an unknown one).
    """
    keys: dict[tuple[str, int, int], str] = {}
    for name in names:
        try:
            parsed = parse_bundle_name(name)
        except BalancerError as exc:
            if skip_invalid:
                continue
            raise ConsoleError(exc.message, field="bundle") from None
        keys[(parsed.namespace, parsed.range.lower, parsed.range.upper)] = name
    if not keys:
        return {}
    rows = Bundle.objects.select_related("namespace", "owner").filter(
        namespace__name__in={k[0] for k in keys}, lower__in={k[1] for k in keys}
    )
    out = {}
    for row in rows:
        found = keys.get((row.namespace.name, row.lower, row.upper))
        if found is not None:
            out[found] = row
    return out


def undo_blockers(events: Sequence[AuditEvent], *, now: datetime | None = None) -> dict[int, str]:
    """For each of ``events`` that is a move of a bundle from one broker to another (the ones
    an undo concerns), by id: "" when an undo can succeed, else why not — older than
    ``FULCRUM_UNDO_WINDOW_S``, the bundle moved on since or is gone, the broker it left is no
    longer active. (The vetoes — cool-down, filters — are for the undo's own preview.)"""
    now = now or datetime.now(UTC)
    moves = [
        e for e in events if e.action == AuditEvent.Action.UNLOAD and e.source and e.destination
    ]
    if not moves:
        return {}
    rows = bundle_rows([e.target for e in moves], skip_invalid=True)
    states = dict(Broker.objects.values_list("name", "state"))
    window = settings.FULCRUM_UNDO_WINDOW_S
    out: dict[int, str] = {}
    for e in moves:
        row = rows.get(e.target)
        owner = row.owner.name if row is not None and row.owner else None
        if (now - e.at).total_seconds() > window:
            out[e.pk] = f"older than the undo window ({window / 60:.0f} min)"
        elif row is None:
            out[e.pk] = "the bundle is gone (split or merged since)"
        elif owner != e.destination:
            out[e.pk] = f"the bundle moved on since: it is on {owner or 'no broker'}"
        elif states.get(e.source) != Broker.State.ACTIVE:
            out[e.pk] = f"{e.source}, the broker it left, is {states.get(e.source, 'gone')}"
        else:
            out[e.pk] = ""
    return out


def audit_events(params: Mapping[str, str]) -> QuerySet[AuditEvent]:
    """The audit, newest first, filtered by ``params`` (``AUDIT_FILTERS``; empty ones ignored).

    Raises:
        ConsoleError: 400 naming the parameter: an unknown action, a time that does not parse,
            a value over 300 characters.
    """
    rows = AuditEvent.objects.select_related("actor")
    values = {}
    for key in AUDIT_FILTERS:
        value = str(params.get(key) or "").strip()
        if len(value) > 300:
            raise ConsoleError(f"{key} is at most 300 characters", field=key)
        if "\x00" in value:  # PostgreSQL text cannot hold it; no name or reason has one
            raise ConsoleError(f"{key} contains a NUL character", field=key)
        values[key] = value
    if values["id"]:
        if not (values["id"].isascii() and values["id"].isdigit()):
            raise ConsoleError("id is an audit row's number", field="id")
        rows = rows.filter(pk=int(values["id"]))
    if values["actor"]:
        rows = (
            rows.filter(actor__isnull=True)
            if values["actor"] == "balancer"
            else rows.filter(actor__username=values["actor"])
        )
    if values["action"] == "undo":  # the audit's verb: an unload that reverses another
        rows = rows.filter(action=AuditEvent.Action.UNLOAD, reverses__isnull=False)
    elif values["action"]:
        if values["action"] not in AuditEvent.Action.values:
            raise ConsoleError(f"action must be {AUDIT_FILTERS['action']}", field="action")
        rows = rows.filter(action=values["action"])
    if values["broker"]:
        broker = values["broker"]
        rows = rows.filter(Q(source=broker) | Q(destination=broker) | Q(target=broker))
    if values["namespace"]:
        rows = rows.filter(target__startswith=values["namespace"].rstrip("/") + "/")
    if values["bundle"]:
        rows = rows.filter(target__icontains=values["bundle"])
    if values["q"]:
        rows = rows.filter(Q(reason__icontains=values["q"]) | Q(target__icontains=values["q"]))
    for key, lookup in (("since", "at__gte"), ("until", "at__lt")):
        if values[key]:
            try:
                when = datetime.fromisoformat(values[key])
            except ValueError:
                raise ConsoleError(
                    f"{key} is not an ISO 8601 time such as 2026-11-22T14:00", field=key
                ) from None
            rows = rows.filter(**{lookup: when if when.tzinfo else when.replace(tzinfo=UTC)})
    return rows


# The shedders' per-broker figures that are usage fractions (shown in %, as the chart).
FRACTION_COLUMNS = frozenset({"before", "after", "observed", "usage", "history", "background"})
# The plan's own figures, first in the rule's per-broker table; a shedder's own prediction
# ("predicted") gives way to the plan's "after": one set of numbers per decision.
PLAN_COLUMNS = ("before", "after", "observed")


def _rule(
    details: dict[str, Any],
    shedding: dict[str, Any],
    decision: Decision,
    brokers: list[dict[str, Any]],
) -> dict[str, Any]:
    """The shedder's reason and figures: scalars as ``figures`` [[name, value]], and its first
    per-broker table (a figure whose value maps brokers to figures) as ``perBroker`` {"name",
    "columns", "rows": [{"broker", "cells": [{"value", "fraction"}]}]}, led by the plan's
    before, after (predicted) and observed usage of ``brokers`` (``decision_explained``'s), the
    same figures as the chart and the cards; numbers to 4 significant digits, fractions marked
    (the page shows them in %)."""

    def said(value: Any) -> Any:
        return float(f"{value:.4g}") if isinstance(value, float) else value

    figures, per_broker = [], None
    by_broker: dict[str, dict[str, Any]] = {}  # figure -> broker -> a number
    stats = shedding.get("stats") or {}
    for name, value in stats.items():
        if name == "quarantined":
            continue  # each one is a skip of its own (ImplausibleReading), with its words
        tables = (
            isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values())
        )
        numbers = (
            isinstance(value, dict)
            and value
            and all(isinstance(v, int | float) for v in value.values())
        )
        if tables and per_broker is None:
            columns = sorted({k for v in value.values() for k in v})
            rows = [[b, *(said(v.get(c)) for c in columns)] for b, v in sorted(value.items())]
            per_broker = {"name": name, "columns": columns, "rows": rows}
        elif numbers:
            by_broker[name] = value
        else:
            figures.append([name, said(value)])
    # A figure per broker (FulcrumShedder's "predicted") is a column of the per-broker table
    # when its brokers are the table's; else it stays a figure.
    by_broker.pop("predicted", None)  # the plan's "after" is the prediction shown
    for name, value in by_broker.items():
        if per_broker is not None and set(value) <= {row[0] for row in per_broker["rows"]}:
            per_broker["columns"].append(name)
            for row in per_broker["rows"]:
                row.append(said(value.get(row[0])))
        else:
            figures.append([name, said(value)])
    table = None
    if per_broker is not None:
        plan = {b["name"]: b for b in brokers}
        columns = [*PLAN_COLUMNS, *per_broker["columns"]]
        table = {
            "name": per_broker["name"],
            "columns": columns,
            "rows": [
                {
                    "broker": row[0],
                    "cells": [
                        {"value": v, "fraction": c in FRACTION_COLUMNS}
                        for c, v in zip(
                            columns,
                            [*(plan.get(row[0], {}).get(c) for c in PLAN_COLUMNS), *row[1:]],
                            strict=True,
                        )
                    ],
                }
                for row in per_broker["rows"]
            ],
        }
    return {
        "strategy": details.get("strategy", decision.strategy),
        "reason": shedding.get("reason", details.get("reason", decision.reason)),
        "figures": figures,
        "perBroker": table,
    }


# The broker page's time ranges (s; the folded reports are kept FULCRUM_REPORT_RETENTION_S, 6 h
# by default: older load is in the Parquet history) and the most points a series is drawn with.
BROKER_RANGES_S = (900, 3600, 6 * 3600)
HISTORY_POINTS = 720


def _percent(usage: float, limit: float) -> float:
    return 100.0 * usage / limit if limit > 0 else 0.0


def broker_history(name: str, *, range_s: int, now: datetime | None = None) -> dict[str, Any]:
    """One broker's load over the last ``range_s`` seconds from the folded load reports, each
    series averaged into at most ``HISTORY_POINTS`` buckets: ``{"at" (ISO, UTC), "cpu",
    "bandwidthIn", "bandwidthOut" (percent of capacity), "msgRate" (msg/s), "throughput"
    (bytes/s)}``, and ``moves``: the audit rows that touched it in that time (``at``, ``action``,
    ``target``, ``source``, ``destination``, ``decision``, ``actor``).

    Raises:
        ConsoleError: 404 unknown broker; 400 a range not in ``BROKER_RANGES_S``.
    """
    if range_s not in BROKER_RANGES_S:
        raise ConsoleError(
            f"range must be one of {', '.join(str(r) for r in BROKER_RANGES_S)} seconds",
            field="range",
        )
    broker = Broker.objects.filter(name=name).first()
    if broker is None:
        raise ConsoleError(f"unknown broker {name!r}", status=404, field="broker")
    now = now or datetime.now(UTC)
    since = now - timedelta(seconds=range_s)
    rows = (
        LoadReport.objects.filter(broker=broker, reported_at__gte=since)
        .order_by("reported_at")
        .values_list(
            "reported_at",
            "cpu_usage",
            "cpu_limit",
            "bandwidth_in_usage_bytes_per_s",
            "bandwidth_in_limit_bytes_per_s",
            "bandwidth_out_usage_bytes_per_s",
            "bandwidth_out_limit_bytes_per_s",
            "msg_rate_in",
            "msg_rate_out",
            "msg_throughput_in_bytes_per_s",
            "msg_throughput_out_bytes_per_s",
        )
    )
    width = range_s / HISTORY_POINTS
    buckets: dict[int, list[tuple[float, ...]]] = {}
    for at, cpu, cpu_max, bw_in, bw_in_max, bw_out, bw_out_max, m_in, m_out, t_in, t_out in rows:
        key = int((at - since).total_seconds() // width)
        buckets.setdefault(key, []).append(
            (
                _percent(cpu, cpu_max),
                _percent(bw_in, bw_in_max),
                _percent(bw_out, bw_out_max),
                m_in + m_out,
                t_in + t_out,
            )
        )
    series: dict[str, list[Any]] = {
        k: [] for k in ("at", "cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput")
    }
    # Where reports stopped for longer than this (the console or the broker was down), a null
    # goes between the points, so the lines break instead of drawing load nobody measured.
    gap = max(3 * width, 30.0)
    previous = None
    for key in sorted(buckets):
        values = buckets[key]
        if previous is not None and (key - previous) * width > gap:
            series["at"].append(
                (since + timedelta(seconds=(previous + key + 1) * width / 2)).isoformat()
            )
            for name_ in ("cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput"):
                series[name_].append(None)
        previous = key
        series["at"].append((since + timedelta(seconds=(key + 0.5) * width)).isoformat())
        for i, name_ in enumerate(("cpu", "bandwidthIn", "bandwidthOut", "msgRate", "throughput")):
            series[name_].append(round(sum(v[i] for v in values) / len(values), 3))
    moves = (
        AuditEvent.objects.filter(at__gte=since)
        .filter(Q(source=name) | Q(destination=name) | Q(target=name))
        .select_related("actor")
        .order_by("at")[:2000]
    )
    return {
        **series,
        "rangeS": range_s,
        "moves": [
            {
                "at": e.at.astimezone(UTC).isoformat(),
                "action": e.action,
                "target": e.target,
                "source": e.source,
                "destination": e.destination,
                "decision": e.decision_id,
                "actor": e.actor_name,
            }
            for e in moves
        ],
    }


def config_versions(*, limit: int = 50) -> list[dict[str, Any]]:
    """The config's saved versions, newest first: ``{"id", "at" (ISO, UTC), "actor", "reason",
    "values", "changes" {field: [old, new]}}``."""
    rows = ConfigVersion.objects.select_related("actor").order_by("-id")[:limit]
    return [
        {
            "id": v.pk,
            "at": v.at.astimezone(UTC).isoformat(),
            "actor": v.actor_name,
            "reason": v.reason,
            "values": v.values,
            "changes": v.changes,
        }
        for v in rows
    ]


def pulsar_connection_attached() -> PulsarConnection | None:
    """The attached Pulsar connection (at most one: a database constraint), or None."""
    return PulsarConnection.objects.filter(is_attached=True).first()


def _pulsar_auth(connection: PulsarConnection) -> str:
    """How the connection authenticates, in words (never the secret)."""
    if connection.oauth2_issuer_url or connection.oauth2_key_file:
        said = f"OAuth2 client credentials from {connection.oauth2_issuer_url}"
        if connection.oauth2_audience:
            said += f" (audience {connection.oauth2_audience})"
    elif connection.token_file:
        said = f"token file {connection.token_file} (read again when it changes)"
    elif connection.token_env:
        said = f"token from the environment ({connection.token_env})"
    elif connection.token_encrypted:
        said = "token stored, encrypted"
    else:
        said = "no token"
    if connection.tls_cert_file:
        said += f"; TLS client certificate {connection.tls_cert_file}"
    return said


def pulsar_status(moves: int = 50) -> dict[str, Any]:
    """The Pulsar connections and, for the attached one, its moves in flight and the latest ended.

    Returns:
        ``{"connections": [{"id", "name", "adminUrl", "attached", "mode", "executorStopped",
        "maxMovesInFlight", "token": "environment <VAR>"|"stored, encrypted"|"none", "auth"
        (how it authenticates, in words), "clusterName" (configured, "" from the brokers),
        "tlsCaFile", "observedAt", "observation", "previousConfig", "inFlight", "controlledAt",
        "handedBack" ({"at", "by", "why"} or {})}], "deadman": {"limitS", "lastTickAt",
        "alive"} (the dead-man's limit, the shedding loop's last completed tick, whether a
        dead-man holds its lease), "observeS" (the observation period, s), "moves":
        [PulsarMove.summary(), ...] newest first}``.
    """
    out = []
    attached = None
    for c in PulsarConnection.objects.all():
        token = (
            f"environment {c.token_env}"
            if c.token_env
            else ("stored, encrypted" if c.token_encrypted else "none")
        )
        observation = {k: v for k, v in c.observation.items() if k != "brokerUrls"}
        in_flight = c.moves.filter(state__in=PulsarMove.IN_FLIGHT).count()
        out.append(
            {
                "id": c.pk,
                "name": c.name,
                "adminUrl": c.admin_url,
                "attached": c.is_attached,
                "mode": c.mode,
                "executorStopped": c.is_executor_stopped,
                "maxMovesInFlight": c.max_moves_in_flight,
                "token": token,
                "auth": _pulsar_auth(c),
                "clusterName": c.cluster_name,
                "tlsCaFile": c.tls_ca_file,
                "observedAt": c.observed_at.isoformat() if c.observed_at else None,
                "observation": observation,
                "previousConfig": c.previous_config,
                "inFlight": in_flight,
                "controlledAt": c.controlled_at.isoformat() if c.controlled_at else None,
                "handedBack": c.handed_back,
                "conflict": c.conflict,
                "trouble": pulsar_trouble(c) if c.is_attached else [],
            }
        )
        if c.is_attached:
            attached = c
    rows: list[dict[str, Any]] = []
    if attached is not None:
        flying = list(attached.moves.filter(state__in=PulsarMove.IN_FLIGHT).order_by("-id"))
        ended = list(attached.moves.filter(state=PulsarMove.State.DONE).order_by("-id")[:moves])
        rows = [m.summary() for m in flying + ended]
    last_tick = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    return {
        "connections": out,
        "deadman": {
            "limitS": deadman_limit_s(),
            "lastTickAt": last_tick.isoformat() if last_tick else None,
            "alive": deadman_alive(datetime.now(UTC)),
        },
        "observeS": settings.FULCRUM_PULSAR_OBSERVE_S,
        "moves": rows,
    }


def pulsar_trouble(
    connection: PulsarConnection, now: datetime | None = None
) -> list[dict[str, str]]:
    """What is wrong with observing and acting on the attached cluster, for the Pulsar page:
    ``[{"kind", "text"}]`` with kind "no-observation" (none completed for two periods), "slow"
    (the last pass took longer than its period), "failing-calls" (admin calls failed in the
    last pass), "late-moves" (moves waiting longer than ``executor.move_expected_s``); each
    text names the brokers, calls and seconds."""
    from console.services.executor import moves_late

    now = now or datetime.now(UTC)
    period = settings.FULCRUM_PULSAR_OBSERVE_S
    o = connection.observation or {}
    trouble: list[dict[str, str]] = []
    calls = o.get("calls") or {}
    rows = [r for r in calls.get("byCall") or [] if isinstance(r, dict)]
    slowest = sorted(rows, key=lambda r: -float(r.get("slowestS", 0)))[:3]
    said_slowest = ", ".join(
        f"{r.get('call')} on {r.get('broker')} {float(r.get('slowestS', 0)):.1f} s" for r in slowest
    )
    running = connection.pass_started_at and (
        connection.observed_at is None or connection.pass_started_at > connection.observed_at
    )
    age = (now - connection.observed_at).total_seconds() if connection.observed_at else None
    if (age is None and running) or (age is not None and age > 2 * period):
        text = (
            f"No observation has completed for {age:.0f} s"
            if age is not None
            else "No observation has completed yet"
        ) + f" (one is due every {period:.0f} s)"
        if running and connection.pass_started_at:
            under_way = (now - connection.pass_started_at).total_seconds()
            text += f"; the pass under way started {under_way:.0f} s ago"
        else:
            text += "; no pass is under way: is a Celery worker consuming the pulsar queue?"
        trouble.append({"kind": "no-observation", "text": text})
    took = o.get("durationS")
    if isinstance(took, (int, float)) and took > period:
        trouble.append(
            {
                "kind": "slow",
                "text": f"The last observation took {took:.1f} s, longer than its {period:.0f} s "
                f"period"
                + (
                    f" (reading Pulsar {float(o['readS']):.1f} s: {int(calls.get('total') or 0)}"
                    f" calls, {float(calls.get('bytes') or 0) / 1e6:.1f} MB; writing the "
                    f"metadata store and the live load {float(o.get('applyS') or 0):.1f} s)"
                    if isinstance(o.get("readS"), (int, float))
                    else ""
                )
                + (f"; slowest calls: {said_slowest}" if said_slowest else ""),
            }
        )
    failed, total = int(calls.get("failed") or 0), int(calls.get("total") or 0)
    window = [w for w in calls.get("window") or [] if isinstance(w, list) and len(w) == 2]
    failed_w, total_w = sum(int(w[1]) for w in window), sum(int(w[0]) for w in window)
    if failed or failed_w:
        failing = [r for r in rows if r.get("failed")][:3]
        named = "; ".join(
            f"{r.get('call')} on {r.get('broker')}: {r.get('failed')} of {r.get('calls')}"
            f" (last {r.get('lastFailure')})"
            for r in failing
        )
        text = f"{failed} of {total} admin calls failed in the last observation"
        if total:
            text += f" ({100 * failed / total:.0f} %)"
        if len(window) > 1 and total_w:
            text += (
                f"; {failed_w} of {total_w} ({100 * failed_w / total_w:.0f} %) over the last "
                f"{len(window)} passes"
            )
        trouble.append({"kind": "failing-calls", "text": text + (f": {named}" if named else "")})
    for late in moves_late(connection, now=now, observe_s=period):
        trouble.append({"kind": "late-moves", "text": late[0].upper() + late[1:]})
    return trouble


def pulsar_conflict_get() -> dict[str, Any] | None:
    """The attached connection's conflict — Pulsar's own balancing found back on while Fulcrum
    holds control (``{"connection", "at", "keys", "why"}``) — or None."""
    row = (
        PulsarConnection.objects.filter(is_attached=True, mode=PulsarConnection.Mode.CONTROL)
        .exclude(conflict={})
        .values("name", "conflict")
        .first()
    )
    return {"connection": row["name"], **row["conflict"]} if row else None


def broker_quarantined(name: str) -> dict[str, Any] | None:
    """The readings of broker ``name`` that the latest shedding decision did not trust
    (``balancer.load_model.implausible``: over its limit, without a limit, not a number).

    Returns:
        ``{"decision": pk, "at": ISO (UTC), "readings": [{"resource", "usage", "limit",
        "reason"}]}``, or None when the latest decision trusted all of them (or there is none).
    """
    latest = Decision.objects.filter(kind=Decision.Kind.SHED).order_by("-at").first()
    if latest is None:
        return None
    shedding = (latest.details or {}).get("shedding") or {}
    stats = shedding.get("stats") if isinstance(shedding, dict) else None
    entries = stats.get("quarantined") if isinstance(stats, dict) else None
    readings = [e for e in entries or [] if isinstance(e, dict) and e.get("broker") == name]
    if not readings:
        return None
    return {
        "decision": latest.pk,
        "at": latest.at.astimezone(UTC).isoformat(),
        "readings": readings,
    }


def pulsar_broker_read(name: str) -> dict[str, Any] | None:
    """How the attached Pulsar connection's last pass read broker ``name``'s load: ``{"readAt",
    "lastUpdate" (Pulsar's last metadata-store write of it, information only), "url",
    "missing", "calls"}``; None when no cluster is attached or the broker was not read."""
    connection = PulsarConnection.objects.filter(is_attached=True).only("observation").first()
    if connection is None:
        return None
    read = (connection.observation.get("brokerReads") or {}).get(name)
    return read if isinstance(read, dict) else None


def report_runs_running() -> bool:
    """A Spark run over the history is running now."""
    from console.models import ReportRun

    return ReportRun.objects.filter(status=ReportRun.Status.RUNNING).exists()
