"""Edge cases of the core's input handling and rarely taken branches."""

import json
import runpy
import sys

import pytest

from balancer import bundles as b
from balancer.config import PulsarConfig
from balancer.decisions import Reason, Skip
from balancer.errors import BalancerError, InvalidBundleRange, InvalidSnapshot
from balancer.load import BrokerLoad, BundleLoad
from balancer.simulator.layout import DEMO
from balancer.snapshot import ClusterSnapshot
from tests.balancer.test_cli import run


def test_config_units_and_type_errors():
    config = PulsarConfig.from_keys({"loadBalancerSheddingGracePeriodMinutes": 2, "seed": 3})
    assert config.grace_period_s == 120.0
    assert config.seed == 3
    for keys, fragment in (
        ({"lowerBoundarySheddingEnabled": 1}, "true or false"),
        ({"seed": "x"}, "a number"),
        ({"seed": -1}, "not be negative"),
        ({"seed": 1.5}, "whole number"),
    ):
        with pytest.raises(BalancerError) as err:
            PulsarConfig.from_keys(keys)
        assert fragment in err.value.message


def test_bundle_str_and_out_of_range_hash():
    bundle = b.parse_bundle_name("t/ns/0x00000000_0xffffffff")
    assert str(bundle) == "t/ns/0x00000000_0xffffffff"
    with pytest.raises(InvalidBundleRange):
        b.bundle_index_for(b.initial_boundaries(2), 1 << 32)


def test_skip_without_detail_and_layout_helpers():
    assert Skip("broker", "b", Reason.SOLE_BUNDLE).as_dict() == {
        "broker": "b",
        "reason": "SoleBundle",
    }
    assert DEMO.tenants == ["acme", "globex", "initech"]
    assert DEMO.failure_domains == ["zone-a", "zone-b", "zone-c"]


def test_snapshot_rejects_an_owner_that_is_not_a_broker():
    with pytest.raises(InvalidSnapshot):
        ClusterSnapshot(0, {}, {"t/ns/x": BundleLoad("t/ns/x", "ghost")})


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"brokers": {}}, "brokers"),
        ({"brokers": [{"name": "a", "cpu": {"limit": 1}}]}, "brokers[0].cpu.usage"),
        ({"brokers": [{"name": "a", "state": "asleep"}]}, "brokers[0].state"),
        ({"brokers": [1]}, "brokers[0]"),
        ({"brokers": [{"name": ""}]}, "brokers[0].name"),
        ({"brokers": [{"name": "a", "bundles": [""]}]}, "brokers[0].bundles[0]"),
        ({"brokers": [{"name": "a", "topics": -1}]}, "brokers[0].topics"),
        ({"brokers": [{"name": "a", "cpu": 5}]}, "brokers[0].cpu"),
        (
            {"brokers": [{"name": "a", "topBundles": [{"name": "x", "msgThroughputIn": "a"}]}]},
            "brokers[0].topBundles[0].msgThroughputIn",
        ),
        ({"brokers": [{"name": "a", "weightedMaxEMA": "high"}]}, "brokers[0].weightedMaxEMA"),
        ({"bundles": [{"name": "x", "owner": 5}]}, "bundles[0].owner"),
        ({"bundles": [{"name": "x"}, {"name": "x"}]}, "bundles[1].name"),
        ({"bundles": [{"name": "x", "shortTerm": []}]}, "bundles[0].shortTerm"),
        (
            {"namespaces": [{"name": "n", "antiAffinityGroup": 1}]},
            "namespaces[0].antiAffinityGroup",
        ),
        ({"recentlyUnloadedBundles": {"x": "yesterday"}}, "recentlyUnloadedBundles.x"),
        ({"now": float("inf")}, "now"),
        ({"state": []}, "state"),
        ({"config": []}, "config"),
    ],
)
def test_malformed_snapshots_name_the_field(doc, field):
    code, out, err = run(["shed"], doc)
    assert (code, out) == (2, None)
    assert err["error"]["field"] == field


def test_input_must_be_an_object_and_candidates_strings():
    code, _, err = run(["shed"], [1, 2])
    assert err["error"]["field"] == "input"
    doc = {"brokers": [{"name": "a"}], "bundle": "t/ns/x", "candidates": [1]}
    code, _, err = run(["place"], doc)
    assert (code, err["error"]["field"]) == (2, "candidates[0]")
    code, out, _ = run(["place"], {**doc, "candidates": ["a"]})
    assert out["broker"] == "a"


def test_hashes_may_be_integers_and_danube_place_takes_a_bundle_key_and_hint():
    _, out, _ = run(["split"], {"bundle": {"lower": 0, "upper": 0x80000000}})
    assert out["boundaries"] == ["0x40000000"]
    assert out["bundles"][0] == "0x00000000_0x40000000"
    doc = {
        "brokers": [{"name": "a"}, {"name": "b"}],
        "bundle": "/t/x",
        "hint": {"reason": "unload", "fromBroker": "a"},
    }
    _, out, _ = run(["place", "--strategy", "balanced"], doc)
    assert out["broker"] == "b"


def test_top_bundles_and_extensible_figures_are_parsed():
    from balancer.wire import parse_broker

    broker = parse_broker(
        {
            "name": "a",
            "topBundles": [{"name": "x", "msgThroughputIn": 5}],
            "weightedMaxEMA": 0.5,
            "msgThroughputEMA": 7,
            "updatedAt": 9,
        },
        "",
    )
    assert broker.top_bundles == (("x", 5.0, 0.0),)
    assert (broker.weighted_max_ema, broker.msg_throughput_ema, broker.updated_at) == (
        0.5,
        7.0,
        9.0,
    )


def test_modules_run_as_scripts(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["balancer", "hash", "123456789"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("balancer", run_name="__main__")
    assert done.value.code == 0
    assert json.loads(capsys.readouterr().out)["hashes"][0]["hash"] == "0xcbf43926"


def test_a_hash_must_be_hex_text_or_an_integer():
    code, _, err = run(["split"], {"bundle": {"lower": 1.5, "upper": 2}})
    assert (code, err["error"]["field"]) == (2, "bundle.lower")


def test_equal_throughputs_are_taken_in_name_order_whatever_the_report_order():

    from balancer.load import MessageRates
    from balancer.shedding.common import select_bundles_by_throughput

    names = ("ns/b", "ns/c", "ns/a", "ns/d")
    rates = {"ns/a": 5.0, "ns/b": 5.0, "ns/c": 5.0, "ns/d": 9.0}
    bundles = {n: BundleLoad(n, "x", short_term=MessageRates(0, 0, r, 0)) for n, r in rates.items()}
    snap = ClusterSnapshot(0, {"x": BrokerLoad("x", bundles=names), "y": BrokerLoad("y")}, bundles)
    unloads, _ = select_bundles_by_throughput(snap, snap.brokers["x"], 1e9, 0, Reason.OVERLOADED)
    assert [u.bundle for u in unloads] == ["ns/d", "ns/a", "ns/b", "ns/c"]
    assert snap.bundles_by_throughput("y")[0] == []
