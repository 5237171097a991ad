"""Fulcrum's safety vetoes, as the cycle applies them to a strategy's unloads."""

import pytest

from balancer.cycle import CycleConfig, LoadStats, screen_unloads
from balancer.decisions import Reason, Unload
from balancer.load import BrokerLoad, BundleLoad, MessageRates
from balancer.safety import SafetyConfig, matching_pattern
from balancer.snapshot import ClusterSnapshot

NOW = 10_000.0


def snap(unloaded=None):
    brokers = {n: BrokerLoad(n) for n in ("a", "b")}
    rates = MessageRates(0, 0, 3 * 1024 * 1024, 0)
    bundles = {f"t/ns/{i}": BundleLoad(f"t/ns/{i}", "a", rates) for i in range(4)}
    bundles["t/pay/0"] = BundleLoad("t/pay/0", "b")
    return ClusterSnapshot(NOW, brokers, bundles, recently_unloaded=unloaded or {})


def u(bundle, source="a", metric="msgThroughput"):
    return Unload(bundle, source, None, Reason.OVERLOADED, 2048.0, metric)


def screen(unloads, snapshot, safety, pulsar_grace_s=0.0, moving=None, lost=()):
    from balancer.config import PulsarConfig

    config = CycleConfig(pulsar=PulsarConfig(grace_period_s=pulsar_grace_s), safety=safety)
    stats = LoadStats.of({"a": 0.8, "b": 0.2})
    return screen_unloads(
        unloads, snapshot, config, NOW, set(moving or ()), lost, "ThresholdShedder", stats
    )


def test_screen_keeps_safe_unloads_in_order_and_says_why_others_stay():
    unloads = [u("t/ns/0"), u("t/ns/0"), u("t/pay/0"), u("t/ns/1"), u("t/ns/2"), u("gone")]
    safety = SafetyConfig(bundle_cool_down_s=300, blacklist=("t/ns/2",))
    actions = screen(unloads, snap({"t/ns/1": NOW - 100}), safety)
    assert [(a.target, a.veto) for a in actions] == [
        ("t/ns/0", None),
        ("t/ns/0", Reason.ALREADY_MOVING),  # never two moves of one bundle in one cycle
        ("t/pay/0", Reason.NOT_OWNER),
        ("t/ns/1", Reason.COOL_DOWN),
        ("t/ns/2", Reason.BLACKLISTED),
        ("gone", Reason.UNKNOWN_BUNDLE),
    ]
    said = {a.target: a.explanation for a in actions[2:]}
    assert said["t/pay/0"].startswith("a does not own t/pay/0 (owner: b)")
    assert said["t/ns/1"].startswith("moved 100 s ago; cool-down 300 s")
    assert said["t/ns/2"].startswith("t/ns/2 matches the blacklist pattern 't/ns/2'")
    planned = actions[0]
    assert planned.explanation == (
        "ThresholdShedder Overloaded: a at 80.0 % (mean 50.0 %); throughput 2.0 KiB/s"
    )
    assert planned.metric.as_dict() == {"name": "msgThroughput", "value": 2048.0, "unit": "bytes/s"}


def test_pulsar_grace_period_and_fulcrum_cool_down_are_distinct_vetoes():
    snapshot = snap({"t/ns/0": NOW - 100, "t/ns/1": NOW - 1000})
    actions = screen(
        [u("t/ns/0"), u("t/ns/1")], snapshot, SafetyConfig(bundle_cool_down_s=300), 1800.0
    )
    assert [a.veto for a in actions] == [Reason.COOL_DOWN, Reason.GRACE_PERIOD]
    assert "Pulsar's grace period 1800 s" in actions[1].explanation


def test_the_rate_limit_counts_every_move_when_the_moves_are_known():
    # One bundle moved three times in the hour is three moves; a split's children are none.
    snapshot = ClusterSnapshot(
        NOW,
        snap().brokers,
        snap().bundles,
        recently_unloaded={"x": NOW - 100, "child": NOW - 50},
        recent_moves=(NOW - 3000, NOW - 2000, NOW - 100, NOW - 4000),
    )
    actions = screen(
        [u("t/ns/0"), u("t/ns/1")],
        snapshot,
        SafetyConfig(bundle_cool_down_s=0, max_moves_per_hour=4),
    )
    assert [a.veto for a in actions] == [None, Reason.RATE_LIMITED]
    assert actions[1].explanation.startswith("4 moves in the last hour; limit 4 per hour")


def test_move_rate_limit_counts_the_last_hour_and_this_batch():
    snapshot = snap({"x": NOW - 100, "y": NOW - 4000})
    actions = screen(
        [u("t/ns/0"), u("t/ns/1")],
        snapshot,
        SafetyConfig(bundle_cool_down_s=0, max_moves_per_hour=2),
    )
    assert [a.veto for a in actions] == [None, Reason.RATE_LIMITED]
    assert actions[1].explanation.startswith("2 moves in the last hour; limit 2 per hour")


def test_a_bundle_moving_already_or_a_lost_source_is_vetoed():
    actions = screen(
        [u("t/ns/0"), u("t/pay/0", "b")], snap(), SafetyConfig(), moving={"t/ns/0"}, lost=("b",)
    )
    assert [a.veto for a in actions] == [Reason.ALREADY_MOVING, Reason.BROKER_LOST]


def test_metric_units_follow_the_figure_that_ranked_the_bundle():
    (action,) = screen([u("t/ns/0", metric="msgRate")], snap(), SafetyConfig())
    assert action.metric.unit == "msg/s"
    assert action.explanation.endswith("msg rate 2,048.0 msg/s")


def test_blacklist_matches_bundle_or_namespace_patterns():
    assert matching_pattern("t/pay/0x00000000_0xffffffff", ["t/pay"]) == "t/pay"
    assert matching_pattern("t/pay/0x00000000_0xffffffff", ["x/*", "*/pay/*"]) == "*/pay/*"
    assert matching_pattern("t/payments/0x00000000_0xffffffff", ["t/pay"]) is None


@pytest.mark.parametrize("cool_down", [0.0, 60.0])
def test_an_old_move_is_no_veto(cool_down):
    (action,) = screen([u("t/ns/0")], snap({"t/ns/0": NOW - 3601}), SafetyConfig(cool_down))
    assert action.is_planned
