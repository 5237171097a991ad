import io
import json

import pytest

from balancer.cli import main


def run(argv, doc=None):
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(json.dumps(doc) if doc is not None else "")
    code = main(argv, stdin=stdin, stdout=out, stderr=err)
    return (
        code,
        (json.loads(out.getvalue()) if out.getvalue() else None),
        (json.loads(err.getvalue()) if err.getvalue() else None),
    )


SNAPSHOT = {
    "config": {"loadBalancerBrokerThresholdShedderPercentage": 10},
    "now": 1700000000.0,
    "brokers": [
        {
            "name": "broker-1",
            "cpu": {"usage": 40, "limit": 100},
            "msgRateIn": 1000,
            "msgRateOut": 1000,
            "msgThroughputIn": 104857600,
            "msgThroughputOut": 104857600,
            "bundles": ["t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000"],
        },
        {
            "name": "broker-2",
            "cpu": {"usage": 10, "limit": 100},
            "bundles": ["t/ns/0x80000000_0xc0000000"],
        },
        {"name": "broker-3", "cpu": {"usage": 10, "limit": 100}, "bundles": []},
    ],
    "bundles": [
        {
            "name": "t/ns/0x00000000_0x40000000",
            "owner": "broker-1",
            "shortTerm": {
                "msgRateIn": 600,
                "msgRateOut": 600,
                "msgThroughputIn": 62914560,
                "msgThroughputOut": 62914560,
            },
        },
        {
            "name": "t/ns/0x40000000_0x80000000",
            "owner": "broker-1",
            "shortTerm": {
                "msgRateIn": 400,
                "msgRateOut": 400,
                "msgThroughputIn": 41943040,
                "msgThroughputOut": 41943040,
            },
        },
        {"name": "t/ns/0x80000000_0xc0000000", "owner": "broker-2"},
        {"name": "t/ns/0xc0000000_0xffffffff", "owner": None},
    ],
}


def test_hash_prints_lowercase_hashes():
    code, out, _ = run(["hash", "123456789"])
    assert code == 0
    assert out == {"hashes": [{"topic": "123456789", "hash": "0xcbf43926"}]}


def test_bundles_prints_initial_boundaries():
    code, out, _ = run(["bundles", "--count", "4", "--namespace", "t/ns"])
    assert code == 0
    assert out["boundaries"] == [
        "0x00000000",
        "0x40000000",
        "0x80000000",
        "0xc0000000",
        "0xffffffff",
    ]
    assert out["bundles"][0] == "t/ns/0x00000000_0x40000000"


def test_shed_follows_the_threshold_shedder():
    code, out, _ = run(["shed", "--strategy", "ThresholdShedder"], SNAPSHOT)
    assert code == 0
    assert [u["bundle"] for u in out["unloads"]] == ["t/ns/0x00000000_0x40000000"]
    assert out["unloads"][0]["reason"] == "Overloaded"
    assert out["state"]["brokerAvgResourceUsage"]["broker-1"] == pytest.approx(0.4)


def test_shed_accepts_snake_case_alias_and_state_round_trips():
    _, first, _ = run(["shed", "--strategy", "threshold_shedder"], SNAPSHOT)
    _, second, _ = run(
        ["shed", "--strategy", "THRESHOLDSHEDDER"], {**SNAPSHOT, "state": first["state"]}
    )
    assert second["state"]["brokerAvgResourceUsage"]["broker-1"] == pytest.approx(0.4)


def test_place_picks_a_broker_and_reports_candidates():
    code, out, _ = run(["place"], {**SNAPSHOT, "bundle": "t/ns/0xc0000000_0xffffffff"})
    assert code == 0
    assert out["broker"] == "broker-3"
    assert out["state"]["preallocated"] == {"t/ns/0xc0000000_0xffffffff": "broker-3"}


def test_lookup_finds_bundle_and_owner():
    from balancer.hashing import topic_hash

    topic = "persistent://t/ns/orders"
    code, out, _ = run(["lookup", topic], SNAPSHOT)
    assert code == 0
    assert out["hash"] == f"0x{topic_hash(topic):08x}"
    lower, upper = (int(x, 16) for x in out["bundle"].rsplit("/", 1)[1].split("_"))
    assert lower <= topic_hash(topic) < upper or topic_hash(topic) == upper == 0xFFFFFFFF


def test_lookup_uses_bundle_count_when_no_bundles_are_listed():
    doc = {"namespaces": [{"name": "t/other", "bundleCount": 4}]}
    code, out, _ = run(["lookup", "persistent://t/other/x"], doc)
    assert code == 0
    assert out["owner"] is None


def test_split_range_equally_divide():
    code, out, _ = run(
        ["split", "--algorithm", "range_equally_divide"],
        {"bundle": {"lower": "0x00000000", "upper": "0x80000000", "namespace": "t/ns"}},
    )
    assert code == 0
    assert out == {
        "boundaries": ["0x40000000"],
        "bundles": ["t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000"],
    }


def test_split_by_name():
    _, out, _ = run(["split"], {"bundle": {"name": "t/ns/0x00000000_0xffffffff"}})
    assert out["boundaries"] == ["0x7fffffff"]


@pytest.mark.parametrize(
    ("argv", "doc", "field"),
    [
        (
            ["shed"],
            {"brokers": [{"name": "b", "cpu": {"usage": 1, "limit": "x"}}]},
            "brokers[0].cpu.limit",
        ),
        (["shed"], {"brokers": [{"name": "b"}, {"name": "b"}]}, "brokers[1].name"),
        (["shed"], {"brokers": [{"cpu": {"usage": 1, "limit": 2}}]}, "brokers[0].name"),
        (["shed"], {"config": {"nope": 1}}, "config.nope"),
        (["shed"], {"bundles": [{"name": "t/ns/x", "owner": "ghost"}]}, "bundles[0].owner"),
        (["shed", "--strategy", "Nope"], {}, "strategy"),
        (["split", "--algorithm", "nope"], {}, "algorithm"),
        (["split"], {"bundle": {"lower": "zz", "upper": "0x1"}}, "bundle.lower"),
        (["place"], {"brokers": []}, "bundle"),
        (["lookup", "persistent://t/missing/x"], {}, "bundles"),
    ],
)
def test_bad_input_exits_2_with_the_field_and_prints_nothing(argv, doc, field):
    code, out, err = run(argv, doc)
    assert code == 2
    assert out is None
    assert err["error"]["field"] == field
    assert err["error"]["message"]


def test_unknown_strategy_lists_the_valid_names():
    _, _, err = run(["shed", "--strategy", "Nope"], {})
    assert "ThresholdShedder" in err["error"]["message"]


def test_invalid_json_and_missing_file_are_bad_input(tmp_path):
    code, _, err = run(["shed"], None)
    assert code == 2
    assert err["error"]["field"] == "input"
    code, _, err = run(["--input", str(tmp_path / "none.json"), "shed"])
    assert code == 2
    assert "cannot read input" in err["error"]["message"]


def test_input_file_is_read(tmp_path):
    path = tmp_path / "in.json"
    path.write_text(json.dumps(SNAPSHOT))
    code, out, _ = run(["shed", "--input", str(path)])
    assert code == 0
    assert out["unloads"]


def test_unknown_command_is_bad_input():
    code, _, err = run(["explode"])
    assert code == 2
    assert err["error"]["field"] == "argv"


def test_split_topic_count_hashes_topics_without_a_hash():
    doc = {
        "bundle": {"name": "t/ns/0x00000000_0xffffffff"},
        "topics": [{"topic": "a", "hash": "0x10000000"}, {"topic": "b", "hash": "0x30000000"}],
    }
    _, out, _ = run(["split", "--algorithm", "topic_count_equally_divide"], doc)
    assert out["boundaries"] == ["0x20000000"]
    assert out["bundles"] == ["t/ns/0x00000000_0x20000000", "t/ns/0x20000000_0xffffffff"]
    hashed = {"bundle": doc["bundle"], "topics": [{"topic": "x"}, {"topic": "y"}]}
    assert run(["split", "--algorithm", "topic_count_equally_divide"], hashed)[0] == 0


def test_split_flow_or_qps_returns_every_boundary_and_child():
    hashes = ["0x10000000", "0x15000000", "0x24000000", "0x39000000", "0x58000000", "0x76000000"]
    doc = {
        "config": {
            "loadBalancerNamespaceBundleMaxMsgRate": 1900,
            "loadBalancerNamespaceBundleMaxBandwidthMbytes": 90,
        },
        "bundle": {"name": "t/ns/0x00000000_0xffffffff"},
        "topics": [
            {
                "topic": f"t{i}",
                "hash": h,
                "msgRateIn": 100 * (i + 1),
                "msgThroughputIn": 10 * (i + 1) * 1048576,
            }
            for i, h in enumerate(hashes)
        ],
    }
    code, out, _ = run(["split", "--algorithm", "flow_or_qps_equally_divide"], doc)
    assert code == 0
    assert out["boundaries"] == ["0x2e800001", "0x67000001"]
    assert len(out["bundles"]) == 3


def test_split_with_no_boundary_says_so_and_outside_boundary_is_refused():
    doc = {"bundle": {"name": "t/ns/0x00000000_0x80000000"}, "topics": [{"topic": "a"}]}
    _, out, _ = run(["split", "--algorithm", "topic_count_equally_divide"], doc)
    assert out == {"boundaries": [], "bundles": [], "reason": "NoSplit"}
    outside = {
        "bundle": {"name": "t/ns/0x00000000_0x10000000"},
        "topics": [{"topic": "a", "hash": "0x20000000"}, {"topic": "b", "hash": "0x40000000"}],
    }
    code, _, err = run(["split", "--algorithm", "topic_count_equally_divide"], outside)
    assert code == 2
    assert err["error"]["field"] == "bundle"


def test_split_positions_are_validated():
    doc = {
        "bundle": {"name": "t/ns/0x00000000_0x80000000"},
        "topics": [{"topic": "a"}, {"topic": "b"}],
    }
    code, out, _ = run(
        ["split", "--algorithm", "specified_positions_divide"], {**doc, "positions": ["0x10000000"]}
    )
    assert out["boundaries"] == ["0x10000000"]
    code, _, err = run(["split", "--algorithm", "specified_positions_divide"], doc)
    assert (code, err["error"]["field"]) == (2, "positions")
    code, _, err = run(
        ["split", "--algorithm", "specified_positions_divide"], {**doc, "positions": ["x"]}
    )
    assert err["error"]["field"] == "positions[0]"


def test_split_check_lists_bundles_over_the_limits():
    doc = {
        "brokers": [
            {"name": "b1", "bundles": ["t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"]}
        ],
        "bundles": [
            {"name": "t/ns/0x00000000_0x80000000", "owner": "b1", "topics": 2000},
            {"name": "t/ns/0x80000000_0xffffffff", "owner": "b1", "topics": 5},
        ],
    }
    code, out, _ = run(["split-check"], doc)
    assert code == 0
    assert out["splits"] == [
        {
            "bundle": "t/ns/0x00000000_0x80000000",
            "reason": "Topics",
            "value": 2000.0,
            "limit": 1000.0,
        }
    ]


DANUBE = {
    "config": {"assignment_strategy": "fair", "aggressiveness": "aggressive"},
    "now": 1000.0,
    "brokers": [
        {
            "name": "b1",
            "topics": [{"name": f"/default/t{i}", "byteRate": 1000.0 * i} for i in range(45)],
        },
        {"name": "b2", "topics": [{"name": f"/default/u{i}"} for i in range(30)]},
        {"name": "b3", "topics": [{"name": f"/default/v{i}"} for i in range(25)]},
    ],
}


def test_shed_danube_reads_danube_keys_and_moves_one_topic():
    code, out, _ = run(["shed", "--strategy", "danube"], DANUBE)
    assert code == 0
    assert out["reason"] == "LoadImbalance"
    assert out["unloads"] == [
        {
            "bundle": "/default/t0",
            "source": "b1",
            "destination": "b3",
            "reason": "LoadImbalance",
            "load": 0.2,
            "metric": {"name": "topicLoad", "value": 0.2, "unit": "score"},
        }
    ]
    assert out["state"]["moves"][0]["topic"] == "/default/t0"


def test_danube_rejects_pulsar_keys_and_vice_versa():
    code, _, err = run(
        ["shed", "--strategy", "danube"],
        {**DANUBE, "config": {"loadBalancerBrokerThresholdShedderPercentage": 5}},
    )
    assert (code, err["error"]["field"]) == (
        2,
        "config.loadBalancerBrokerThresholdShedderPercentage",
    )
    code, _, err = run(["shed"], {**DANUBE, "config": {"aggressiveness": "aggressive"}})
    assert (code, err["error"]["field"]) == (2, "config.aggressiveness")


def test_place_fair_round_robin_and_state():
    doc = {**DANUBE, "brokers": DANUBE["brokers"][1:], "topic": "/default/new"}
    code, out, _ = run(["place", "--strategy", "fair"], doc)
    assert code == 0
    assert out["broker"] == "b3"
    assert out["state"]["lastSelected"] == "b3"


def test_bad_topic_stats_name_the_field():
    doc = {"brokers": [{"name": "b1", "topics": [{"name": "/t", "byteRate": -1}]}]}
    code, _, err = run(["shed", "--strategy", "danube"], doc)
    assert (code, err["error"]["field"]) == (2, "brokers[0].topics[0].byteRate")


def test_cycle_runs_the_whole_cycle_and_explains_every_action():
    doc = {
        **SNAPSHOT,
        "config": {"loadBalancerSheddingGracePeriodMinutes": 0},
        "strategies": {"shedder": "threshold_shedder", "placement": "LeastLongTermMessageRate"},
        "safety": {
            "coolDownSeconds": 0,
            "maxMovesPerHour": 10,
            "blacklist": ["x/*"],
            "brokerTimeoutSeconds": 60,
            "autoSplit": False,
        },
    }
    code, out, _ = run(["cycle"], doc)
    assert code == 0
    assert out["reason"] == "Overloaded"
    kinds = [a["kind"] for a in out["actions"]]
    assert kinds[:2] == ["unload", "place"]
    unload = out["actions"][0]
    assert unload["source"] == "broker-1"
    assert unload["outcome"] == "planned"
    assert unload["metric"]["unit"] == "bytes/s"
    assert "MiB/s" in unload["explanation"]
    assert out["actions"][1]["destination"] == unload["destination"]
    # The unowned bundle is placed too, and stats give the prediction.
    assert any(
        a["kind"] == "place" and a["bundle"] == "t/ns/0xc0000000_0xffffffff" for a in out["actions"]
    )
    assert out["stats"]["after"]["cv"] < out["stats"]["before"]["cv"]
    assert set(out["state"]) == {"ThresholdShedder"}
    # Feeding the state back is the next cycle.
    code, _again, _ = run(["cycle"], {**doc, "state": out["state"]})
    assert code == 0


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"safety": {"coolDown": 1}}, "safety.coolDown"),
        ({"safety": {"coolDownSeconds": -1}}, "safety.coolDownSeconds"),
        ({"safety": {"brokerTimeoutSeconds": "x"}}, "safety.brokerTimeoutSeconds"),
        ({"safety": {"maxMovesPerHour": -2}}, "safety.maxMovesPerHour"),
        ({"safety": {"blacklist": [""]}}, "safety.blacklist[0]"),
        ({"safety": {"autoSplit": "yes"}}, "safety.autoSplit"),
        ({"strategies": {"shedderName": "x"}}, "strategies.shedderName"),
        ({"strategies": {"placement": "AvgShedder"}}, "strategies.placement"),
        ({"config": {"aggressiveness": "wild"}}, "config.aggressiveness"),
        ({"strategies": {"shedder": "Nope"}}, "strategy"),
        (
            {"config": {"loadBalancerSheddingIntervalMinute": 1}},
            "config.loadBalancerSheddingIntervalMinute",
        ),
    ],
)
def test_cycle_refuses_bad_input_naming_the_field(extra, field):
    code, out, err = run(["cycle"], {**SNAPSHOT, **extra})
    assert code == 2
    assert out is None
    assert err["error"]["field"] == field


def test_shed_applies_pulsars_anti_affinity_unload_guard():
    last = "t/ns/0xc0000000_0xffffffff"
    brokers = [*SNAPSHOT["brokers"][:2], {**SNAPSHOT["brokers"][2], "bundles": [last]}]
    bundles = [*SNAPSHOT["bundles"][:3], {"name": last, "owner": "broker-3"}]
    doc = {
        **SNAPSHOT,
        "brokers": brokers,
        "bundles": bundles,
        "config": {"loadBalancerSheddingGracePeriodMinutes": 0},
        "namespaces": [{"name": "t/ns", "antiAffinityGroup": "g"}],
    }
    code, out, _ = run(["shed", "--strategy", "ThresholdShedder"], doc)
    assert code == 0
    # Every broker already holds t/ns (group g): moving a bundle cannot spread g better.
    assert out["unloads"] == []
    assert out["reason"] == "AntiAffinity"
    assert {s["reason"] for s in out["skipped"]} == {"AntiAffinity"}


def test_cycle_runs_danube_on_bundles_with_danube_keys():
    doc = {
        **SNAPSHOT,
        "config": {
            "aggressiveness": "aggressive",
            "min_topic_age_seconds": 0,
            "loadBalancerSheddingGracePeriodMinutes": 0,
        },
        "strategies": {"shedder": "danube", "placement": "balanced"},
        "safety": {"coolDownSeconds": 0},
    }
    code, out, _ = run(["cycle"], doc)
    assert code == 0
    assert out["strategy"] == "danube"
    assert out["shedding"]["stats"]["threshold"] == 0.2  # the aggressive preset
    unloads = [a for a in out["actions"] if a["kind"] == "unload"]
    assert len(unloads) == 1  # Danube: one move per cycle
    assert unloads[0]["metric"]["unit"] == "score"
    assert unloads[0]["source"] == "broker-1"
    placed = [a for a in out["actions"] if a["kind"] == "place"]
    assert all(a["destination"] for a in placed)


def test_recent_moves_must_be_times():
    code, _, err = run(["cycle"], {**SNAPSHOT, "recentMoves": [1.0, "soon"]})
    assert code == 2
    assert err["error"]["field"] == "recentMoves[1]"
