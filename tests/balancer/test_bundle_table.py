"""The columnar bundle store: a snapshot built from columns reads and decides exactly as one
built from ``BundleLoad`` values."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from balancer.bundle_table import RATE_FIELDS, BundleNames, BundleTable
from balancer.bundles import parse_bundle_name
from balancer.cycle import CycleConfig, Strategies, plan_cycle
from balancer.errors import InvalidSnapshot
from balancer.load import BrokerLoad, BundleLoad, MessageRates
from balancer.registry import SHEDDERS
from balancer.safety import SafetyConfig
from balancer.snapshot import ClusterSnapshot
from tests.balancer.test_cycle import EASY
from tests.balancer.test_invariants import snapshots


def load(name, owner=None, tput=0.0, rate=0.0, topics=0):
    return BundleLoad(
        name,
        owner,
        MessageRates(rate, 0.0, tput, 0.0),
        MessageRates(rate, rate, 0.0, tput),
        topics,
        topics + 1,
        topics + 2,
    )


def columnar(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The same snapshot with canonical, name-less columns (as the console reads the database),
    rows shuffled, and each broker's bundles as a view on the table."""
    loads = list(snapshot.bundles.values())[::-1]
    namespaces = sorted({parse_bundle_name(b.name).namespace for b in loads})
    owners = sorted({b.owner for b in loads if b.owner is not None})
    table = BundleTable(
        namespaces=namespaces,
        namespace=[namespaces.index(parse_bundle_name(b.name).namespace) for b in loads],
        lower=[parse_bundle_name(b.name).range.lower for b in loads],
        upper=[parse_bundle_name(b.name).range.upper for b in loads],
        owners=owners,
        owner=[-1 if b.owner is None else owners.index(b.owner) for b in loads],
        short_term=[[getattr(b.short_term, f) for f in RATE_FIELDS] for b in loads],
        long_term=[[getattr(b.long_term, f) for f in RATE_FIELDS] for b in loads],
        counts=[[b.topics, b.producers, b.consumers] for b in loads],
    )
    brokers = {
        name: replace(
            broker,
            bundles=BundleNames(table, np.asarray([table.row(n) for n in broker.bundles], int)),
        )
        for name, broker in snapshot.brokers.items()
    }
    return ClusterSnapshot(
        snapshot.now,
        brokers,
        table,
        snapshot.namespaces,
        snapshot.recently_unloaded,
        snapshot.recent_moves,
    )


def ranges(namespaces, namespace, lower, upper, owners=(), owner=None):
    """A table of canonical bundles without load (zero rates and counts)."""
    count = len(namespace)
    return BundleTable(
        namespaces=namespaces,
        namespace=namespace,
        lower=lower,
        upper=upper,
        owners=list(owners),
        owner=[-1] * count if owner is None else owner,
        short_term=np.zeros((count, 4)),
        long_term=np.zeros((count, 4)),
        counts=np.zeros((count, 3)),
    )


def _canonical(name):
    bundle = parse_bundle_name(name)
    return bundle.namespace, bundle.range.lower


def test_a_table_of_loads_gives_them_back_by_name():
    loads = [load("t/b/x", "b1", 5.0, 2.0, 3), load("t/a/y", None, 1.0)]
    table = BundleTable.from_loads(loads)
    assert list(table) == ["t/b/x", "t/a/y"]
    assert len(table) == 2
    assert table["t/b/x"] == loads[0]
    assert table["t/a/y"] == loads[1]
    assert "t/a/y" in table
    assert "t/a/z" not in table
    assert 7 not in table
    assert table.get("nope") is None
    with pytest.raises(KeyError):
        table["nope"]
    assert repr(table) == "BundleTable(2 bundles)"


def test_canonical_rows_are_sorted_formatted_and_found_by_search():
    table = ranges(
        ["t/ns1", "t/ns10"],
        [1, 0, 0],
        [0, 0x80000000, 0],
        [0xFFFFFFFF, 0xFFFFFFFF, 0x80000000],
        owners=["b1"],
        owner=[0, -1, 0],
    )
    names = ["t/ns1/0x00000000_0x80000000", "t/ns1/0x80000000_0xffffffff"]
    assert list(table) == [*names, "t/ns10/0x00000000_0xffffffff"]
    assert table.row(names[1]) == 1
    assert table.owner_name(1) is None
    assert table[names[0]].owner == "b1"
    # Same lower, another upper; an unknown namespace; a malformed range; no such lower.
    assert table.row("t/ns1/0x00000000_0xffffffff") is None
    assert table.row("t/ns2/0x00000000_0xffffffff") is None
    assert table.row("t/ns1/zz") is None
    assert table.row("t/ns1/0x00000001_0x80000000") is None
    assert table.row("t/ns10/0x10000000_0xffffffff") is None
    rows = np.arange(3)
    order = np.lexsort(table.name_order_keys(rows))
    assert table.names_at(order) == sorted(table)
    moved = table.with_owners(np.asarray([-1, 0, 0]), ["b2"])
    assert [moved[n].owner for n in moved] == [None, "b2", "b2"]
    assert [table[n].owner for n in table] == ["b1", None, "b1"]


def test_a_table_without_names_needs_its_ranges():
    with pytest.raises(ValueError, match="lower and upper"):
        BundleTable(
            namespaces=[],
            namespace=[],
            owners=[],
            owner=[],
            short_term=[],
            long_term=[],
            counts=[],
        )


def test_a_broker_s_bundles_as_a_view_read_like_a_tuple():
    table = BundleTable.from_loads([load("n/a"), load("n/b"), load("n/c")])
    view = BundleNames(table, np.asarray([2, 0]))
    assert len(view) == 2
    assert view[0] == "n/c"
    assert view[-1] == "n/a"
    assert view[0:1] == ("n/c",)
    assert list(view) == ["n/c", "n/a"]
    assert "n/a" in view
    assert "n/b" not in view
    assert "n/zz" not in view
    assert 3 not in view
    assert view == ("n/c", "n/a")
    assert view == ["n/c", "n/a"]
    assert view != ("n/a", "n/c")
    assert view != "n/cn/a"
    assert hash(view) == hash(("n/c", "n/a"))
    assert repr(view) == "('n/c', 'n/a')"


def test_an_owner_missing_from_the_brokers_is_refused_with_its_bundle():
    table = BundleTable.from_loads([load("n/a", "b1"), load("n/b", "ghost")])
    with pytest.raises(InvalidSnapshot, match="n/b is owned by unknown broker 'ghost'"):
        ClusterSnapshot(0.0, {"b1": BrokerLoad("b1")}, table)


def test_an_empty_snapshot_has_empty_indexes():
    empty = ClusterSnapshot(0.0, {}, {})
    assert empty.unowned == ()
    assert empty.owned_by("b1") == []
    assert empty.bundle_counts("n") == {}
    assert list(empty.bundle_owner_positions("n")) == []
    assert empty._reported()[0].size == 0


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(snapshots(), st.sampled_from(sorted(SHEDDERS)))
def test_columns_decide_exactly_as_loads(snapshot, shedder):
    # The table keeps canonical rows in (namespace, lower) order, as the database reads them.
    snapshot = ClusterSnapshot(
        snapshot.now,
        snapshot.brokers,
        {n: snapshot.bundles[n] for n in sorted(snapshot.bundles, key=_canonical)},
        snapshot.namespaces,
        snapshot.recently_unloaded,
    )
    columns = columnar(snapshot)
    assert list(columns.bundles) == list(snapshot.bundles)
    assert dict(columns.bundles) == dict(snapshot.bundles)
    assert columns.unowned == snapshot.unowned
    for name in snapshot.brokers:
        assert columns.owned_by(name) == snapshot.owned_by(name)
        assert columns.namespaces_owned_by(name) == snapshot.namespaces_owned_by(name)
        assert columns.long_term_msg_rate(name) == snapshot.long_term_msg_rate(name)
        got, want = columns.bundles_by_throughput(name), snapshot.bundles_by_throughput(name)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
    for namespace in ("ns0", "ns1", "ns2", "absent"):
        assert columns.bundle_counts(namespace) == snapshot.bundle_counts(namespace)
    gone = list(snapshot.brokers)[:1]
    assert dict(columns.without_brokers(gone).bundles) == dict(
        snapshot.without_brokers(gone).bundles
    )
    config = CycleConfig(
        strategies=Strategies(shedder=shedder, placement="LeastLongTermMessageRate"),
        pulsar=EASY,
        safety=SafetyConfig(bundle_cool_down_s=0),
    )
    want_plan = plan_cycle(snapshot, config, {}, snapshot.now)
    got_plan = plan_cycle(columns, config, {}, snapshot.now)
    assert got_plan.actions == want_plan.actions
    assert got_plan.reason == want_plan.reason
    # NaN-aware: a usage too big for float32 (Pulsar's percentages) is inf, its CV NaN.
    np.testing.assert_equal(asdict(got_plan.after), asdict(want_plan.after))


def test_a_recent_unload_of_a_bundle_gone_since_is_ignored():
    snapshot = ClusterSnapshot(
        10.0,
        {"b1": BrokerLoad("b1", bundles=("n/a", "n/gone"))},
        {"n/a": load("n/a", "b1", tput=5.0)},
        recently_unloaded={"n/gone": 5.0, "n/a": 7.0},
    )
    names, throughputs, unloaded = snapshot.bundles_by_throughput("b1")
    assert names == ["n/a"]
    assert throughputs.tolist() == [5.0]
    assert unloaded.tolist() == [7.0]


def test_many_canonical_bundles_are_found_at_once():
    table = ranges(
        ["t/a", "t/b"], [0, 0, 1], [0, 0x80000000, 0], [0x80000000, 0xFFFFFFFF, 0xFFFFFFFF]
    )
    rows = table.rows_of(
        np.asarray([1, 0, 0, 1, -1, 2]),
        np.asarray([0, 0x80000000, 0, 0, 0, 0]),
        np.asarray([0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0x1, 0xFFFFFFFF, 0xFFFFFFFF]),
    )
    # Found; found; another upper; another upper; no namespace; past the last key.
    assert rows.tolist() == [2, 1, -1, -1, -1, -1]
    empty = ranges([], [], [], [])
    assert empty.rows_of(np.asarray([0]), np.asarray([0]), np.asarray([1])).tolist() == [-1]
    with pytest.raises(ValueError, match="canonical"):
        BundleTable.from_loads([load("n/a")]).rows_of(np.zeros(1), np.zeros(1), np.zeros(1))
