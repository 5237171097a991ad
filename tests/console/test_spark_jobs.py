"""The Spark transforms (console/reports/jobs.py) on small DataFrames with known answers, and
the strategy advisor (console/reports/advisor.py) on a tiny history where one config is clearly
best; in one local Spark session (no Django)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

pytestmark = pytest.mark.spark

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def spark():
    import os
    import sys

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("fulcrum-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()
    # py4j says INFO "Closing down clientserver connection" when its objects are collected, at
    # the worker's exit after pytest-xdist closed its output: "--- Logging error ---" in make
    # test's log. Nothing to say then.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + seconds, UTC)


def brokers_frame(spark, rows):
    """rows: (broker, seconds after T0, weighted usage fraction)."""
    return spark.createDataFrame(
        [(b, at(s), u * 100, u, 0.0, 0.0, 0.0, 0.0) for b, s, u in rows],
        "broker string, reported_at timestamp, cpu_percent double, "
        "weighted_usage_fraction double, msg_throughput_in_bytes_per_s double, "
        "msg_throughput_out_bytes_per_s double, msg_rate_in double, msg_rate_out double",
    )


def bundles_frame(spark, rows):
    """rows: (bundle, seconds after T0, owner, msg rate (in), throughput (in, bytes/s), topics)."""
    return spark.createDataFrame(
        [(at(s), b.rsplit("/", 1)[0], b, o, m, 0.0, t, 0.0, n) for b, s, o, m, t, n in rows],
        "at timestamp, namespace string, bundle string, owner string, msg_rate_in double, "
        "msg_rate_out double, msg_throughput_in_bytes_per_s double, "
        "msg_throughput_out_bytes_per_s double, topics long",
    )


def actions_frame(spark, rows):
    """rows: (id, seconds after T0, action, bundle, source, destination)."""
    return spark.createDataFrame(
        [(i, at(s), a, b, src, dst) for i, s, a, b, src, dst in rows],
        "id long, at timestamp, action string, target string, source string, destination string",
    )


def test_cluster_cv_and_max_over_mean_per_minute(spark):
    from console.reports.jobs import cluster_minutes

    frame = brokers_frame(
        spark,
        [("b1", 0, 0.2), ("b1", 30, 0.2), ("b2", 10, 0.6), ("b1", 60, 0.5), ("b2", 70, 0.5)],
    )
    rows = [r.asDict() for r in cluster_minutes(frame).collect()]
    assert len(rows) == 2
    # Minute one: 0.2 and 0.6 -> mean 0.4, std 0.2, CV 0.5, max/mean 1.5; minute two: equal.
    assert rows[0]["cv"] == pytest.approx(0.5)
    assert rows[0]["max_over_mean"] == pytest.approx(1.5)
    assert rows[0]["brokers"] == 2
    assert rows[1]["cv"] == pytest.approx(0.0)


def test_hot_bundles_rank_by_p95_count_moves_and_name_split_candidates(spark):
    from console.reports.jobs import OPTIONS, hot_bundles

    samples = []
    for s in range(0, 600, 60):
        samples += [
            ("t/a/0x0_0x1", s, "b1", 40_000.0, 1e6, 5),  # over 30,000 msg/s: a split candidate
            ("t/a/0x1_0x2", s, "b1", 100.0, 5e6, 3),
            ("t/b/0x0_0x1", s, "b2" if s < 300 else "b3", 10.0, 1e3, 1),
        ]
    moves = actions_frame(
        spark,
        [
            (1, 300, "unload", "t/b/0x0_0x1", "b2", "b3"),
            (2, 400, "split", "t/a/0x0_0x1", "b1", ""),
        ],
    )
    rows = {
        r["bundle"]: r.asDict()
        for r in hot_bundles(bundles_frame(spark, samples), moves, {**OPTIONS, "top": 2}).collect()
    }
    # Top 2 by throughput (0x1_0x2, then 0x0_0x1) and top 2 by msg rate: the same two.
    assert set(rows) == {"t/a/0x0_0x1", "t/a/0x1_0x2"}
    assert rows["t/a/0x1_0x2"]["throughput_rank"] == 1
    assert rows["t/a/0x0_0x1"]["msg_rate_rank"] == 1
    hot = rows["t/a/0x0_0x1"]
    assert (hot["split_candidate"], hot["split_reasons"]) == (True, "msg rate")
    assert (hot["splits"], hot["moves"], hot["samples"]) == (1, 0, 10)
    assert rows["t/a/0x1_0x2"]["split_candidate"] is False
    every = {
        r["bundle"]: r.asDict()
        for r in hot_bundles(bundles_frame(spark, samples), moves, OPTIONS).collect()
    }
    assert every["t/b/0x0_0x1"]["moves"] == 1
    assert every["t/b/0x0_0x1"]["owner"] == "b3"  # its owner at its last sample


def test_a_move_is_joined_with_its_brokers_load_before_and_after(spark):
    from console.reports.jobs import move_effects

    reports = brokers_frame(
        spark,
        [
            ("src", -120, 0.8),
            ("src", -60, 0.8),
            ("src", 60, 0.5),
            ("src", 120, 0.5),
            ("dst", -60, 0.2),
            ("dst", 60, 0.4),
            ("src", 900, 0.1),  # outside the 300 s window
            ("other", 60, 0.9),
        ],
    )
    moves = actions_frame(
        spark,
        [
            (1, 0, "unload", "t/a/0x0_0x1", "src", "dst"),
            (2, 0, "unload", "t/a/0x1_0x2", "src", "nowhere"),  # no reports of its destination
            (3, 0, "split", "t/a/0x0_0x1", "src", ""),  # not a move
        ],
    )
    rows = {r["id"]: r.asDict() for r in move_effects(moves, reports, 300).collect()}
    assert set(rows) == {1, 2}
    move = rows[1]
    assert (move["source_before"], move["source_after"]) == (0.8, 0.5)
    assert (move["destination_before"], move["destination_after"]) == (0.2, 0.4)
    assert move["gain"] == pytest.approx(0.3)
    assert move["helped"] is True
    assert rows[2]["gain"] is None
    assert rows[2]["helped"] is None


def test_namespace_load_per_hour(spark):
    from console.reports.jobs import namespace_hours

    samples = [
        ("t/a/0x0_0x1", 0, "b1", 100.0, 1e6, 1),
        ("t/a/0x1_0x2", 0, "b1", 50.0, 2e6, 1),
        ("t/a/0x0_0x1", 60, "b1", 300.0, 1e6, 1),
        ("t/b/0x0_0x1", 0, "b2", 10.0, 1e3, 1),
    ]
    rows = {
        r["namespace"]: r.asDict() for r in namespace_hours(bundles_frame(spark, samples)).collect()
    }
    # t/a: 150 msg/s at 0 s (two bundles), 300 at 60 s: mean 225, max 300.
    assert rows["t/a"]["msg_rate_mean"] == pytest.approx(225.0)
    assert rows["t/a"]["msg_rate_max"] == pytest.approx(300.0)
    assert rows["t/a"]["bundles"] == 2
    assert rows["t/b"]["throughput_mean"] == pytest.approx(1e3)


def test_the_report_writes_each_result_and_names_what_it_could_not(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from console.reports.jobs import run
    from console.services.history import BROKER_SCHEMA

    table = pa.Table.from_pylist(
        [
            {f.name: None for f in BROKER_SCHEMA}
            | {
                "broker": b,
                "reported_at": at(s),
                "cpu_percent": 10.0,
                "weighted_usage_fraction": 0.1,
                "msg_throughput_in_bytes_per_s": 1.0,
                "msg_throughput_out_bytes_per_s": 1.0,
                "date": "2026-11-20",
            }
            for b, s in (("b1", 0), ("b2", 0))
        ],
        schema=BROKER_SCHEMA,
    )
    pq.write_to_dataset(table, str(tmp_path / "history" / "brokers"), partition_cols=["date"])
    summary = run(spark, str(tmp_path / "history"), str(tmp_path / "out"), {})
    assert summary["written"] == ["broker_hours", "cluster_minutes"]
    assert summary["missing"] == {
        "hot_bundles": "no bundle samples",
        "move_effects": "no moves or no load reports",
        "namespace_hours": "no bundle samples",
    }
    (part,) = (tmp_path / "out" / "cluster_minutes").glob("part-*.json")
    assert json.loads(part.read_text().splitlines()[0])["minute"] == "2026-11-20T10:00:00Z"


def test_pareto_front_and_ranking_of_the_advisor():
    from console.reports.advisor import score, windows

    assert windows([0.0, 10.0, 3700.0, 7300.0, 7400.0], 3600) == [(0.0, 3600.0), (7200.0, 10800.0)]
    spec = {
        "candidates": [
            {"id": 0, "label": "current", "changes": {}},
            {"id": 1, "label": "better", "changes": {"shedder": "FulcrumShedder"}},
            {"id": 2, "label": "dominated", "changes": {}},
            {"id": 3, "label": "cheap", "changes": {}},
        ]
    }

    def row(candidate, mm, moves):
        return {
            "candidate": candidate,
            "cycles": 2,
            "moves": moves,
            "oscillations": 0,
            "vetoed": 0,
            "splits": 0,
            "hours": 1.0,
            "cv": [0.1, 0.1],
            "mm": [mm, mm],
            "error": None,
        }

    ranking = score(spec, [row(0, 1.5, 2), row(1, 1.1, 4), row(2, 1.6, 6), row(3, 1.4, 0)])
    assert [r["label"] for r in ranking] == ["better", "cheap", "current", "dominated"]
    assert {r["label"]: r["pareto"] for r in ranking} == {
        "better": True,
        "cheap": True,
        "current": False,
        "dominated": False,
    }
    assert ranking[0]["movesPerHour"] == 4.0


def test_the_advisor_replays_the_history_and_ranks_the_config_that_balances_first(spark, tmp_path):
    """Two brokers, every bundle on one: a config that never sheds against FulcrumShedder."""
    import pyarrow.parquet as pq

    from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
    from balancer.snapshot import ClusterSnapshot
    from balancer.wire import snapshot_document
    from console.reports.advisor import run
    from console.services.history import snapshot_tables

    names = [f"t/a/0x{i:08x}_0x{i + 1:08x}" for i in range(8)]
    rates = MessageRates(1000.0, 1000.0, 1e6, 1e6)
    documents = []
    for k in range(30):
        now = T0.timestamp() + 60 * k
        brokers = {
            "b1": BrokerLoad(
                "b1",
                cpu=ResourceUsage(80, 100),
                rates=MessageRates(8000, 8000, 8e6, 8e6),
                bundles=tuple(names),
                reported_at=now,
            ),
            "b2": BrokerLoad("b2", cpu=ResourceUsage(5, 100), reported_at=now),
        }
        bundles = {n: BundleLoad(n, "b1", rates, rates, topics=1) for n in names}
        documents.append(snapshot_document(ClusterSnapshot(now, brokers, bundles), topics=False))
    snapshots, _ = snapshot_tables(documents)
    pq.write_to_dataset(snapshots, str(tmp_path / "history" / "snapshots"), partition_cols=["date"])
    cycle = {
        "strategies": {"shedder": "OverloadShedder", "placement": "LeastLongTermMessageRate"},
        "config": {"loadBalancerBrokerOverloadedThresholdPercentage": 99},
        "safety": {},
    }
    fulcrum = {
        "strategies": {"shedder": "FulcrumShedder", "placement": "FulcrumPlacement"},
        "config": {},
        "safety": {},
    }
    spec = {
        "intervalS": 60.0,
        "windowS": 900.0,
        "since": None,
        "measure": fulcrum,
        "candidates": [
            {"id": 0, "label": "never sheds", "changes": {}, "cycle": cycle},
            {
                "id": 1,
                "label": "Fulcrum",
                "changes": {"shedder": "FulcrumShedder"},
                "cycle": fulcrum,
            },
        ],
    }
    summary = run(spark, str(tmp_path / "history"), str(tmp_path / "out"), spec)
    assert (summary["windows"], summary["tasks"]) == (2, 4)
    lines = (tmp_path / "out" / "ranking" / "part-00000.json").read_text().splitlines()
    best, worst = (json.loads(line) for line in lines)
    assert (best["label"], worst["label"]) == ("Fulcrum", "never sheds")
    assert best["maxOverMeanMedian"] < worst["maxOverMeanMedian"]
    assert worst["moves"] == 0
    assert best["moves"] > 0
    assert best["hours"] == pytest.approx(worst["hours"])
