"""The load model's quarantine of readings that cannot be true (balancer.load_model.implausible,
issue 24 item 3): the poison report of the demo (a CPU at 208 %), an unknown NIC limit (−1),
a CPU reported in % × cores against a 100 % limit; each named with its numbers, none of them
setting the level or the CPU one message costs, the trusted resources still used."""

from dataclasses import replace

import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import ResourceUsage
from balancer.load_model import IMPLAUSIBLE_OVER, LoadModel, cpu_per_msg
from balancer.shedding.fulcrum import shed
from tests.balancer.scenarios import _cluster

PULSAR = PulsarConfig.from_keys({"loadBalancerSheddingGracePeriodMinutes": 0})


def _three(cpu1=90.0):
    """b1 with four 50 MiB/s bundles at ``cpu1`` % CPU, b2 and b3 at 20 % with one each."""
    return _cluster(
        {
            "b1": (cpu1, [(f"t/ns/0x{i:08x}_0x{i + 1:08x}", 50) for i in range(4)]),
            "b2": (20, [("t/ns/0x10000000_0x20000000", 50)]),
            "b3": (20, [("t/ns/0x20000000_0x30000000", 50)]),
        }
    )


def _with(snap, name, **resources):
    brokers = dict(snap.brokers)
    brokers[name] = replace(brokers[name], **resources)
    return replace(snap, brokers=brokers)


def test_a_cpu_at_208_percent_is_quarantined_and_sets_no_level():
    trusted = LoadModel.of(_three(), ["b1", "b2", "b3"], PULSAR.weights)
    poisoned = LoadModel.of(_three(208.0), ["b1", "b2", "b3"], PULSAR.weights)
    [q] = poisoned.quarantined
    assert (q.broker, q.resource, q.usage, q.limit) == ("b1", "cpu", 208.0, 100.0)
    assert "208%" in q.reason
    assert f"{IMPLAUSIBLE_OVER:.2f}×" in q.reason
    # What its bundles explain is all b1 is said to use: the level is the trusted cluster's,
    # not 208 %; the cost per message is the trusted brokers' (b2 and b3 set it either way).
    assert poisoned.level() < 1.0
    assert poisoned.level() <= trusted.level()
    assert poisoned.cost == pytest.approx(trusted.cost)
    assert poisoned.usage()[0] == pytest.approx(float(poisoned.load[0, 0]) / 100)
    # The shedder names it, and still balances: b1's bundles are the hottest by their own load.
    decision = shed(_three(208.0), PULSAR, {})
    assert [(s.name, s.reason) for s in decision.skipped if s.reason == Reason.IMPLAUSIBLE] == [
        ("b1", Reason.IMPLAUSIBLE)
    ]
    assert decision.stats["quarantined"] == [q.as_dict()]
    assert decision.unloads
    assert decision.unloads[0].source == "b1"


def test_a_cpu_in_percent_times_cores_is_quarantined():
    # 8 cores at 100 % each reported as 800 against a limit of 100.
    snap = _with(_three(), "b2", cpu=ResourceUsage(800.0, 100.0))
    model = LoadModel.of(snap, ["b1", "b2", "b3"], PULSAR.weights)
    assert [(q.broker, q.resource) for q in model.quarantined] == [("b2", "cpu")]
    assert "% × cores" in model.quarantined[0].reason
    # Just above the limit is a busy broker, not an impossible one.
    busy = _with(_three(), "b2", cpu=ResourceUsage(100.0 * IMPLAUSIBLE_OVER - 1, 100.0))
    assert LoadModel.of(busy, ["b1", "b2", "b3"], PULSAR.weights).quarantined == ()


def test_an_unknown_nic_limit_is_quarantined_the_cpu_still_used():
    snap = _with(_three(), "b3", bandwidth_out=ResourceUsage(5e8, -1.0))
    model = LoadModel.of(snap, ["b1", "b2", "b3"], PULSAR.weights)
    [q] = model.quarantined
    assert (q.broker, q.resource, q.limit) == ("b3", "bandwidth_out", -1.0)
    assert "loadBalancerOverrideBrokerNicSpeedGbps" in q.reason
    assert model.usage()[2] == pytest.approx(0.20)  # its CPU, trusted, still counts
    # A resource of weight 0 is not read at all: nothing to quarantine.
    ignored = replace(PULSAR, bandwidth_out_weight=0.0)
    assert LoadModel.of(snap, ["b1", "b2", "b3"], ignored.weights).quarantined == ()


def test_a_reading_that_is_not_a_number_is_quarantined():
    snap = _with(_three(), "b1", cpu=ResourceUsage(float("nan"), 100.0))
    model = LoadModel.of(snap, ["b1", "b2", "b3"], PULSAR.weights)
    assert [(q.broker, q.resource) for q in model.quarantined] == [("b1", "cpu")]
    assert cpu_per_msg(snap, ["b1"]) == 0.0  # b1's NaN sets no cost
    assert all(map(float.__ne__, model.usage().tolist(), [float("nan")] * 3))


def test_a_cost_given_is_the_models_and_a_bundle_without_messages_costs_by_its_bytes():
    snap = _three()
    given = LoadModel.of(snap, ["b1", "b2", "b3"], PULSAR.weights, cost=0.5)
    assert given.cost == 0.5
    # No message rate anywhere: the CPU one byte/s costs carries the bundles' CPU instead.
    from balancer.load import MessageRates

    quiet = replace(
        snap,
        bundles={
            n: replace(b, short_term=MessageRates(0, 0, 50.0, 50.0))
            for n, b in snap.bundles.items()
        },
    )
    model = LoadModel.of(quiet, ["b1", "b2", "b3"], PULSAR.weights)
    assert model.cost_per_byte > 0
    assert model.bundle_load[:, 0] == pytest.approx([100.0 * model.cost_per_byte] * 6)


def test_a_reading_the_last_report_contradicts_is_held_back_for_one_report():
    """A figure missing from one report, and a background that jumps by more than half the
    limit with no load to explain it: the last report's figures stand in, named; a second
    report that says the same is believed (issue 24, item 3)."""
    names = ["b1", "b2", "b3"]
    first, remembered = LoadModel.of(_three(), names, PULSAR.weights).against_last({})
    assert first.quarantined == ()
    # b2's CPU background jumps from 0 % to 75 % of its limit in one report (its bundle's
    # load unchanged); b3's CPU is missing from the next report.
    jumped = _with(_three(), "b2", cpu=ResourceUsage(95.0, 100.0))
    jumped = _with(jumped, "b3", cpu=ResourceUsage(0.0, 0.0))
    held, again = LoadModel.of(jumped, names, PULSAR.weights).against_last(remembered)
    reasons = {q.broker: q.reason for q in held.quarantined}
    assert set(reasons) == {"b2", "b3"}
    assert "background moved from 0% to 7" in reasons["b2"]
    assert "of its limit in one report, with no load to explain it" in reasons["b2"]
    assert "missing from this report" in reasons["b3"]
    # The last backgrounds (none) and limits stand in: b2 and b3 are their bundle's load, as
    # a report ago (the cost per message now b1's alone: b3's missing CPU says nothing of it).
    assert held.usage()[1:].tolist() == pytest.approx([0.225, 0.225])
    assert first.usage()[1:].tolist() == pytest.approx([0.20, 0.20])
    # A second report that says the same is believed; the missing figure is then absent.
    believed, _ = LoadModel.of(jumped, names, PULSAR.weights).against_last(again)
    assert believed.quarantined == ()
    assert believed.usage()[1] == pytest.approx(0.95)
    # A jump within half the limit is load coming and going: believed at once.
    busy = _with(_three(), "b2", cpu=ResourceUsage(60.0, 100.0))
    assert LoadModel.of(busy, names, PULSAR.weights).against_last(remembered)[0].quarantined == ()
    # Anything else remembered is ignored, never raised.
    odd = {"b1": "x", "b2": {"background": [1, 2]}, "b3": {"limit": None}}
    assert LoadModel.of(jumped, names, PULSAR.weights).against_last(odd)[0].quarantined == ()


def test_the_shedder_holds_a_jump_back_for_one_cycle_and_remembers_what_was_reported():
    first = shed(_three(), PULSAR, {})
    jumped = _with(_three(), "b2", cpu=ResourceUsage(95.0, 100.0))
    second = shed(jumped, PULSAR, first.state)
    assert [s.name for s in second.skipped if s.reason == Reason.IMPLAUSIBLE] == ["b2"]
    assert second.stats["brokers"]["b2"]["usage"] == pytest.approx(0.20)
    assert second.state["seen"]["b2"]["background"][0] == pytest.approx(75.0)
    third = shed(jumped, PULSAR, second.state)
    assert not [s for s in third.skipped if s.reason == Reason.IMPLAUSIBLE]
    assert third.stats["brokers"]["b2"]["usage"] == pytest.approx(0.95)
    assert shed(jumped, PULSAR, {"seen": ["not", "a", "map"]}).stats["quarantined"] == []


def test_no_bundle_moves_to_or_from_a_broker_whose_reading_is_held_back():
    """A background that spiked for two reports (believed) and then fell back: the fall is held
    back for one report, so the broker still looks hot on the spike's figures. Nothing moves
    to or from it on them (it shed seven bundles once, from what was the coolest broker); b1,
    truly hot, still sheds."""
    spike = _with(_three(), "b3", cpu=ResourceUsage(99.0, 100.0))
    state = shed(_three(), PULSAR, {}).state
    state = shed(spike, PULSAR, state).state  # held back: a jump of 79 % of the limit
    believed = shed(spike, PULSAR, state)
    assert believed.stats["brokers"]["b3"]["usage"] == pytest.approx(0.99)
    fallen = shed(_three(), PULSAR, believed.state)
    assert fallen.stats["brokers"]["b3"]["usage"] == pytest.approx(0.99)  # the spike stands in
    [held] = [s for s in fallen.skipped if s.reason == Reason.IMPLAUSIBLE]
    assert held.name == "b3"
    assert held.detail.endswith("no bundle moves to or from it until then")
    assert fallen.unloads
    assert all("b3" not in (u.source, u.destination) for u in fallen.unloads)
    assert {u.source for u in fallen.unloads} == {"b1"}
    # Nothing else to move: why the hottest (held) broker keeps its load says so.
    calm = shed(_three(cpu1=20.0), PULSAR, believed.state)
    assert not calm.unloads
    [why] = [s for s in calm.skipped if s.reason == Reason.BALANCED]
    assert (why.name, why.detail) == (
        "b3",
        "its reading is held back for a report (ImplausibleReading): no bundle moves to or from "
        "it until the next",
    )


def test_a_plan_not_carried_out_still_remembers_the_reports():
    """Observe-only: the plan's moves never happen, its reports did. Only the shedder's memory
    of the reports is taken from the plan; the rest of the memory stays as it was."""
    from balancer.shedding.fulcrum import NAME, reports_remembered

    kept = {NAME: {"left": {"t/ns/b": [["b1", 1.0]]}, "seen": {"b1": "old"}}, "other": {"n": 1}}
    planned = {NAME: {"left": {"t/ns/b": [["b2", 2.0]]}, "seen": {"b1": "new"}}, "other": {"n": 2}}
    assert reports_remembered(kept, planned) == {
        NAME: {"left": {"t/ns/b": [["b1", 1.0]]}, "seen": {"b1": "new"}},
        "other": {"n": 1},
    }
    assert reports_remembered({}, planned) == {NAME: {"seen": {"b1": "new"}}}
    assert reports_remembered({NAME: "odd"}, planned) == {NAME: {"seen": {"b1": "new"}}}
    assert reports_remembered(kept, {"other": {}}) == kept  # another shedder's plan
    assert reports_remembered(kept, {NAME: {"left": {}}}) == kept  # no reports remembered
