import pytest

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, plan_cycle
from balancer.decisions import Reason
from balancer.placement.place import place
from balancer.registry import SHEDDERS
from balancer.safety import SafetyConfig
from tests.balancer import scenarios

CONFIG = PulsarConfig()


def test_one_hot_broker_sheds_only_from_the_hot_broker():
    snap = scenarios.one_hot_broker()
    for name in ("ThresholdShedder", "OverloadShedder"):
        decision = SHEDDERS[name](snap, CONFIG, {})
        assert decision.unloads, name
        assert {u.source for u in decision.unloads} == {"b1"}, name


def test_sole_bundle_overload_is_reported_not_shed():
    decision = SHEDDERS["ThresholdShedder"](scenarios.sole_bundle_overload(), CONFIG, {})
    assert decision.unloads == ()
    assert (decision.skipped[0].name, decision.skipped[0].reason) == ("b1", Reason.SOLE_BUNDLE)


def test_anti_affinity_unsatisfiable_still_places_on_the_least_crowded():
    snap = scenarios.anti_affinity_unsatisfiable()
    placement = place(snap, "t/g2/0x00000000_0xffffffff", CONFIG, {})
    assert placement.broker in {"b1", "b2"}  # both hold one namespace of g: a tie, not a failure
    assert placement.reason == Reason.LEAST_LOADED


def test_scale_out_5_to_10_moves_load_to_new_brokers():
    snap = scenarios.scale_out_5_to_10()
    config = PulsarConfig.from_keys({"loadBalancerBundleUnloadMinThroughputThreshold": 0})
    decision = SHEDDERS["ThresholdShedder"](snap, config, {})
    assert {u.source for u in decision.unloads} == {f"old{i}" for i in range(5)}
    state = {"preallocated": {}}
    destinations = []
    for unload in decision.unloads:
        placement = place(snap, unload.bundle, config, state)
        state = placement.state
        destinations.append(placement.broker)
    assert set(destinations) <= {f"new{i}" for i in range(5)}
    assert len(set(destinations)) == 5  # spread, not piled on one new broker


def test_broker_loss_is_detected_after_the_timeout():
    snap = scenarios.broker_loss()
    plan = plan_cycle(snap, CycleConfig(safety=SafetyConfig(broker_timeout_s=60)), {})
    assert plan.lost == ("b2",)
    moved = [a for a in plan.actions if a.kind == "unload" and a.reason == "BrokerLost"]
    assert {a.target for a in moved} == set(snap.owned_by("b2"))
    assert all(a.destination in {"b1", "b3"} for a in moved)
    assert "sent no load report for 600 s (timeout 60 s)" in moved[0].explanation
    patient = plan_cycle(snap, CycleConfig(safety=SafetyConfig(broker_timeout_s=900)), {})
    assert patient.lost == ()


def test_the_first_tick_declares_no_broker_lost():
    # Brokers that never reported are pending, not lost: nothing moves before they report.
    plan = plan_cycle(scenarios.first_tick(), CycleConfig(), {}, now=scenarios.NOW + 3600)
    assert plan.lost == ()
    assert plan.pending == ("b1", "b2", "b3")
    assert not [a for a in plan.actions if a.reason == "BrokerLost"]


def test_avg_shedder_moves_a_share_not_every_bundle_of_the_hot_broker():
    # With msg rates that agree with throughputs, AvgShedder moves part of b1's load.
    snap = scenarios.scale_out_5_to_10()
    state: dict = {}
    for _ in range(3):  # the hit counters must reach loadBalancerAvgShedderHitCountHighThreshold
        decision = SHEDDERS["AvgShedder"](snap, CONFIG, state)
        state = decision.state
        if decision.unloads:
            break
    assert decision.unloads
    for source in {u.source for u in decision.unloads}:
        moved = [u for u in decision.unloads if u.source == source]
        # (32,000 − 0 msg/s) × 0.2 = 6,400 msg/s may move: one 4,000 msg/s bundle of eight.
        assert len(moved) == 1
        assert moved[0].metric == "msgRate"
        assert moved[0].load == pytest.approx(4000.0)
