from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.placement.place import place
from balancer.registry import SHEDDERS
from balancer.safety import SafetyConfig, lost_brokers
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
    snap, reports = scenarios.broker_loss()
    assert lost_brokers(snap, reports, SafetyConfig(broker_timeout_s=60)) == ["b2"]
    assert lost_brokers(snap, reports, SafetyConfig(broker_timeout_s=900)) == []
