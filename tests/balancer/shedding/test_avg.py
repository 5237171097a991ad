from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.placement.place import place
from balancer.shedding.avg import shed
from balancer.snapshot import ClusterSnapshot

# The PIP's recommended maxUnloadPercentage 0.5, and minUnloadMessage below the example's 250.
CONFIG = PulsarConfig.from_keys({"maxUnloadPercentage": 0.5, "minUnloadMessage": 100})


def doc_example():
    """Scores 20, 30, 52, 70, 80; the 80 broker serves 1000 msg/s, the 20 broker 500."""
    cpu = {"b20": 20, "b30": 30, "b52": 52, "b70": 70, "b80": 80}
    rate = {"b20": 500, "b80": 1000}
    owned = {"b80": {"x/300": 300, "x/200": 200, "x/100": 100, "x/050": 50}, "b20": {"x/500": 500}}
    brokers = {
        n: BrokerLoad(
            n,
            cpu=ResourceUsage(c, 100),
            rates=MessageRates(rate.get(n, 0), 0, 0, 0),
            bundles=tuple(owned.get(n, {})),
        )
        for n, c in cpu.items()
    }
    bundles = {
        b: BundleLoad(b, n, short_term=MessageRates(r, 0, 0, 0))
        for n, bs in owned.items()
        for b, r in bs.items()
    }
    bundles["y/new"] = BundleLoad("y/new")
    return ClusterSnapshot(0, brokers, bundles)


def test_pairs_from_both_ends_and_the_middle_broker_pairs_with_itself():
    decision = shed(doc_example(), CONFIG, {})
    assert decision.stats["pairs"] == [["b20", "b80"], ["b30", "b70"]]
    # 80 - 20 = 60 reaches the high threshold (40): high counts 1, below the 2 needed. 70 % is
    # 69.99999809 in float32, so 70 - 30 falls just under 40 and only the low counts grow.
    assert decision.unloads == ()
    assert decision.state["hitCountHigh"] == {"b20": 1, "b80": 1}
    assert decision.state["hitCountLow"] == {"b20": 1, "b80": 1, "b30": 1, "b70": 1}


def test_second_cycle_fires_and_moves_what_fits_towards_the_min_broker():
    first = shed(doc_example(), CONFIG, {})
    second = shed(doc_example(), CONFIG, first.state)
    # need = (1000 - 500) × 0.5 = 250: 300 does not fit, 200 does (50 left), 100 not, 50 does.
    assert [(u.bundle, u.destination) for u in second.unloads] == [
        ("x/200", "b20"),
        ("x/050", "b20"),
    ]
    assert second.state["bundleBrokerMap"] == {"x/200": "b20", "x/050": "b20"}
    # Firing clears the pair's counters; the (30, 70) pair does not fire yet (low count 2 < 8).
    assert "b80" not in second.state["hitCountHigh"]
    assert second.state["hitCountLow"] == {"b30": 2, "b70": 2}


def test_placement_follows_the_recorded_destination():
    first = shed(doc_example(), CONFIG, {})
    second = shed(doc_example(), CONFIG, first.state)
    snap = doc_example()
    # Even distribution would keep only brokers owning none of namespace x (not b20).
    config = PulsarConfig.from_keys(
        {"maxUnloadPercentage": 0.5, "loadBalancerDistributeBundlesEvenlyEnabled": False}
    )
    placement = place(snap, "x/200", config, second.state, strategy="AvgShedder")
    assert placement.broker == "b20"
    other = place(snap, "y/new", config, second.state, strategy="AvgShedder")
    assert other.state["bundleBrokerMap"]["y/new"] == other.broker


def test_balanced_pairs_clear_counters_and_no_pairs_clears_everything():
    snap = ClusterSnapshot(
        0, {n: BrokerLoad(n, cpu=ResourceUsage(50, 100)) for n in ("a", "b", "c")}, {}
    )
    decision = shed(snap, CONFIG, {"hitCountHigh": {"a": 1, "zz": 3}, "hitCountLow": {"zz": 2}})
    assert decision.state["hitCountHigh"] == {}
    assert decision.state["hitCountLow"] == {}
    assert decision.reason == Reason.BALANCED


def test_low_hit_count_fires_after_eight_moderate_cycles():
    cpu = {"a": 10, "b": 35}  # diff 25: low counts only
    brokers = {
        n: BrokerLoad(
            n,
            cpu=ResourceUsage(c, 100),
            rates=MessageRates(0, 0, 100e6 if n == "b" else 0, 0),
            bundles=(f"{n}/1", f"{n}/2"),
        )
        for n, c in cpu.items()
    }
    bundles = {
        f"{n}/{k}": BundleLoad(f"{n}/{k}", n, short_term=MessageRates(0, 0, 5e6, 0))
        for n in cpu
        for k in (1, 2)
    }
    snap = ClusterSnapshot(0, brokers, bundles)
    state = {}
    for cycle in range(8):
        decision = shed(snap, PulsarConfig(), state)
        state = decision.state
        assert bool(decision.unloads) == (cycle == 7)
    # Throughput mode: need 100e6 × 0.2 = 20e6 bytes/s: both 5e6 bundles fit.
    assert len(decision.unloads) == 2


def test_scores_less_than_a_point_apart_compare_equal():
    cpu = {"a": 10.5, "b": 10.2, "c": 9.9, "d": 90}
    snap = ClusterSnapshot(
        0, {n: BrokerLoad(n, cpu=ResourceUsage(c, 100)) for n, c in cpu.items()}, {}
    )
    # Truncated differences: a~b, b~c, a~c all 0, so name order is kept among them.
    assert shed(snap, CONFIG, {}).stats["order"] == ["a", "b", "c", "d"]
