import pytest

from balancer.danube.config import DanubeConfig
from balancer.danube.placement import place
from balancer.danube.rankings import balanced, fair, ranked, weighted_load
from balancer.danube.rebalance import is_blacklisted, shed, topic_load_score
from balancer.decisions import Reason
from balancer.errors import BalancerError
from balancer.load import BrokerLoad, ResourceUsage, TopicStats
from balancer.snapshot import ClusterSnapshot

NOW = 10_000.0
FAIR = DanubeConfig.from_keys({"assignment_strategy": "fair"})


def topics(broker, n, mb=0.0, prefix="/default"):
    return tuple(TopicStats(f"{prefix}/{broker}-{i}", byte_rate=mb * 1_000_000) for i in range(n))


def cluster(counts, *, states=None, extra=None, cpu=None):
    """Brokers whose fair score is their topic count."""
    brokers = {}
    for name, n in counts.items():
        stats = (extra or {}).get(name, topics(name, n))
        brokers[name] = BrokerLoad(
            name,
            state=(states or {}).get(name, "active"),
            cpu=ResourceUsage((cpu or {}).get(name, 0), 100),
            topic_stats=stats,
        )
    return ClusterSnapshot(NOW, brokers, {})


def test_presets_set_threshold_interval_moves_and_cooldown():
    c = DanubeConfig.from_keys({"aggressiveness": "conservative"})
    assert (c.cv_threshold, c.check_interval_s, c.max_moves_per_hour, c.cooldown_s) == (
        0.4,
        600,
        5,
        120,
    )
    a = DanubeConfig.from_keys({"aggressiveness": "aggressive", "max_moves_per_hour": 3})
    assert (a.cv_threshold, a.max_moves_per_hour, a.cooldown_s) == (0.2, 3, 30)
    assert DanubeConfig.from_keys({}).cv_threshold == 0.3


@pytest.mark.parametrize(
    ("keys", "field"),
    [
        ({"aggressiveness": "wild"}, "config.aggressiveness"),
        ({"nope": 1}, "config.nope"),
        ({"blacklist_topics": "x"}, "config.blacklist_topics"),
        ({"enabled": "yes"}, "config.enabled"),
        ({"assignment_strategy": "random"}, "config.assignment_strategy"),
        ({"cooldown_seconds": -1}, "config.cooldown_seconds"),
    ],
)
def test_bad_danube_keys_name_the_field(keys, field):
    with pytest.raises(BalancerError) as err:
        DanubeConfig.from_keys(keys)
    assert err.value.field == field


def test_fair_and_balanced_rankings():
    snap = cluster({"b1": 3, "b2": 1})
    assert fair(snap) == {"b1": 3, "b2": 1}
    assert balanced(snap) == {"b1": 3, "b2": 1}  # no cpu or memory anywhere: topic counts
    loaded = cluster({"b1": 3, "b2": 1}, cpu={"b1": 50})
    # b1: floor(0.3 × 0.2 × 3 + 0.35 × 50) = floor(17.68) = 17; b2: floor(0.3 × 0.2) = 0.
    assert balanced(loaded) == {"b1": 17, "b2": 0}
    assert ranked(loaded, "balanced") == [("b2", 0), ("b1", 17)]


def test_weighted_load_weights_the_bottleneck():
    snap = cluster({"b1": 2, "b2": 2}, cpu={"b1": 90, "b2": 10})
    scores = weighted_load(snap)
    # Maxima are floored at 1.0, so the topic load 0.4 stays 0.4.
    # b1: cpu is the bottleneck (1.0 > 0.7): 0.5 × 1.0 + 0.15 × 0.4 = 0.56 -> 56.
    assert scores["b1"] == 56
    # b2: largest utilisation 0.4 ≤ 0.7: 0.25 × 0.4 + 0.25 × (10 / 90) = 0.128 -> 12.
    assert scores["b2"] == 12


def test_doc_example_metrics_and_classification():
    # Loads 45, 30, 25: mean 33.33, std 8.50, CV 0.255; overloaded > 41.83 -> b1 only.
    decision = shed(cluster({"b1": 45, "b2": 30, "b3": 25}), FAIR, {})
    assert decision.stats["cv"] == pytest.approx(0.255, abs=1e-3)
    assert decision.stats["brokers"]["b1"]["overloaded"]
    assert not any(b["underloaded"] for b in decision.stats["brokers"].values())
    assert decision.reason == Reason.BALANCED  # 0.255 ≤ 0.30 (balanced preset)


def test_aggressive_moves_the_lightest_topic_to_the_least_loaded_broker():
    light = TopicStats("/default/topic-A", byte_rate=5_000_000)
    heavy = TopicStats("/default/topic-C", byte_rate=40_000_000)
    extra = {"b1": (heavy, light, *topics("b1", 43))}
    config = DanubeConfig.from_keys({"assignment_strategy": "fair", "aggressiveness": "aggressive"})
    decision = shed(cluster({"b1": 45, "b2": 30, "b3": 25}, extra=extra), config, {})
    assert decision.reason == Reason.LOAD_IMBALANCE
    [move] = decision.unloads
    # Zero-throughput topics score 0.2, lighter than topic-A: the lightest overall goes first.
    assert (move.source, move.destination) == ("b1", "b3")
    assert move.load == pytest.approx(0.2)
    assert decision.state["moves"][-1]["to"] == "b3"


def test_single_move_then_cooldown_then_rate_limit():
    config = DanubeConfig.from_keys(
        {"assignment_strategy": "fair", "aggressiveness": "aggressive", "max_moves_per_hour": 2}
    )
    snap = cluster({"b1": 45, "b2": 30, "b3": 25})
    first = shed(snap, config, {})
    assert len(first.unloads) == 1
    assert shed(snap, config, first.state).reason == Reason.COOL_DOWN
    later = ClusterSnapshot(NOW + 31, snap.brokers, {})
    second = shed(later, config, first.state)
    assert len(second.unloads) == 1  # one move per cycle, once the cooldown has passed
    third = shed(ClusterSnapshot(NOW + 62, snap.brokers, {}), config, second.state)
    assert third.reason == Reason.RATE_LIMITED


def test_blacklist_is_shell_wildcards_anywhere():
    assert is_blacklisted("/default/critical-orders", ("/default/critical-*",))
    assert is_blacklisted("/system/a/b", ("/system/*",))
    assert not is_blacklisted("/systemx/t", ("/system/*",))
    extra = {"b1": topics("b1", 45, prefix="/critical")}
    config = DanubeConfig.from_keys(
        {
            "assignment_strategy": "fair",
            "aggressiveness": "aggressive",
            "blacklist_topics": ["/critical/*"],
        }
    )
    decision = shed(cluster({"b1": 45, "b2": 30, "b3": 25}, extra=extra), config, {})
    assert decision.unloads == ()
    assert {s.reason for s in decision.skipped} == {Reason.BLACKLISTED}


def test_topics_first_seen_after_the_first_cycle_are_too_young():
    config = DanubeConfig.from_keys({"assignment_strategy": "fair", "aggressiveness": "aggressive"})
    old = {name: topics(name, 1, prefix="/old") for name in ("b1", "b2", "b3")}
    quiet = shed(cluster({"b1": 1, "b2": 1, "b3": 1}, extra=old), config, {})
    snap = cluster({"b1": 45, "b2": 30, "b3": 25})
    decision = shed(snap, config, quiet.state)
    assert decision.unloads == ()
    assert Reason.TOO_YOUNG in {s.reason for s in decision.skipped}
    old_enough = ClusterSnapshot(NOW + 301, snap.brokers, {})
    assert shed(old_enough, config, decision.state).unloads


def test_disabled_and_too_few_brokers_do_nothing():
    config = DanubeConfig.from_keys({"assignment_strategy": "fair", "enabled": False})
    assert shed(cluster({"b1": 45, "b2": 1}), config, {}).reason == Reason.DISABLED
    assert shed(cluster({"b1": 45}), FAIR, {}).reason == Reason.NOT_ENOUGH_BROKERS


def test_target_is_the_least_loaded_active_broker():
    config = DanubeConfig.from_keys({"assignment_strategy": "fair", "aggressiveness": "aggressive"})
    snap = cluster({"b1": 60, "b2": 30, "b3": 10, "b4": 20}, states={"b3": "draining"})
    decision = shed(snap, config, {})
    assert decision.unloads[0].destination == "b4"
    assert decision.stats["mean"] == pytest.approx(110 / 3)  # draining brokers do not count


def test_topic_load_score_follows_the_document():
    topic = TopicStats("/t", byte_rate=2_000_000, producers=1, consumers=2, backlog=5000)
    assert topic_load_score(topic) == pytest.approx(0.2 + 0.6 + 0.9 + 0.1)


def test_round_robin_among_brokers_within_ten_percent_of_the_minimum():
    snap = cluster({"b1": 10, "b2": 11, "b3": 10, "b4": 20})
    picks, state = [], {}
    for _ in range(4):
        placement = place(snap, "/default/new", FAIR, state)
        state = placement.state
        picks.append(placement.broker)
    assert picks == ["b1", "b3", "b2", "b1"]


def test_below_ten_only_the_exact_minimum_qualifies_and_inactive_are_skipped():
    snap = cluster({"b1": 5, "b2": 6, "b3": 5}, states={"b1": "drained"})
    assert place(snap, "/t", FAIR, {}).broker == "b3"
    assert place(snap, "/t", FAIR, {}).candidates == ("b3",)
    all_drained = cluster({"b1": 1}, states={"b1": "drained"})
    assert place(all_drained, "/t", FAIR, {}).broker is None


def test_hints_from_moves_and_unloads():
    snap = cluster({"b1": 5, "b2": 6, "b3": 9})
    move = {"reason": "rebalance", "fromBroker": "b1", "toBroker": "b3"}
    assert place(snap, "/t", FAIR, {}, move).broker == "b3"
    unload = {"reason": "unload", "fromBroker": "b1"}
    assert place(snap, "/t", FAIR, {}, unload).broker == "b2"
