from balancer.decisions import Reason, Unload
from balancer.load import BrokerLoad, BundleLoad
from balancer.safety import (
    SafetyConfig,
    drain_unloads,
    is_blacklisted,
    lost_brokers,
    screen_unloads,
)
from balancer.snapshot import ClusterSnapshot

NOW = 10_000.0


def snap(states=None):
    brokers = {n: BrokerLoad(n, state=(states or {}).get(n, "active")) for n in ("a", "b")}
    bundles = {f"t/ns/{i}": BundleLoad(f"t/ns/{i}", "a") for i in range(4)}
    bundles["t/pay/0"] = BundleLoad("t/pay/0", "b")
    return ClusterSnapshot(NOW, brokers, bundles)


def u(bundle, source="a"):
    return Unload(bundle, source, None, Reason.OVERLOADED, 1.0)


def test_screen_keeps_safe_unloads_in_order_and_says_why_others_stay():
    unloads = [u("t/ns/0"), u("t/ns/0"), u("t/pay/0", "a"), u("t/ns/1"), u("t/ns/2"), u("gone")]
    config = SafetyConfig(bundle_cool_down_s=300, blacklist=("t/ns/2",))
    kept, skipped = screen_unloads(unloads, snap(), {"t/ns/1": NOW - 100}, config)
    assert [k.bundle for k in kept] == ["t/ns/0"]
    assert [(s.name, s.reason) for s in skipped] == [
        ("t/ns/0", Reason.NOT_OWNER),  # already unloaded in this batch: never two moves
        ("t/pay/0", Reason.NOT_OWNER),
        ("t/ns/1", Reason.COOL_DOWN),
        ("t/ns/2", Reason.BLACKLISTED),
        ("gone", Reason.NOT_OWNER),
    ]


def test_move_rate_limit_counts_the_last_hour():
    moves = {"x": NOW - 100, "y": NOW - 4000}
    kept, skipped = screen_unloads(
        [u("t/ns/0"), u("t/ns/1")], snap(), moves, SafetyConfig(max_moves_per_hour=2)
    )
    assert [k.bundle for k in kept] == ["t/ns/0"]
    assert skipped[0].reason == Reason.RATE_LIMITED


def test_blacklist_matches_bundle_or_namespace_patterns():
    assert is_blacklisted("t/pay/0x00000000_0xffffffff", ["t/pay"])
    assert is_blacklisted("t/pay/0x00000000_0xffffffff", ["*/pay/*"])
    assert not is_blacklisted("t/payments/0x00000000_0xffffffff", ["t/pay"])


def test_a_draining_broker_gives_up_every_bundle():
    unloads = drain_unloads(snap({"a": "draining"}))
    assert {x.bundle for x in unloads} == {f"t/ns/{i}" for i in range(4)}
    assert {x.reason for x in unloads} == {Reason.DRAIN}
    assert drain_unloads(snap()) == []


def test_lost_brokers_are_the_silent_ones():
    config = SafetyConfig(broker_timeout_s=60)
    assert lost_brokers(snap(), {"a": NOW - 61, "b": NOW - 10}, config) == ["a"]
    assert lost_brokers(snap(), {"a": NOW}, config) == ["b"]  # owns bundles, never reported
