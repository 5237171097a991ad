"""The cluster as the balancer sees it, read from the stores: the metadata store's brokers and
bundles (PostgreSQL columns read straight into arrays) with the live load (Redis).
"""

from __future__ import annotations

import gc
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import psycopg
from django.db import connection
from django.db.models import Field
from psycopg.abc import Buffer

from balancer.bundle_table import BundleNames, BundleTable
from balancer.errors import BalancerError
from balancer.load import BrokerLoad, TopicLoad
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from balancer.wire import parse_broker
from console import loadstore
from console.models import (
    AuditEvent,
    Broker,
    Bundle,
    Namespace,
)

log = logging.getLogger(__name__)


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
