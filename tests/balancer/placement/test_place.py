import math

import pytest

from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.errors import InvalidSnapshot
from balancer.placement.place import place
from balancer.placement.selection import least_long_term_message_rate
from tests.balancer.builders import broker, bundle, snapshot

CONFIG = PulsarConfig()
NEW = "ns/0x80000000_0xffffffff"


def cluster(rates=(300, 100, 200), cpu=(10, 10, 10), states=("active",) * 3):
    names = ("a", "b", "c")
    brokers = [broker(n, cpu[i], (f"other/{n}",), state=states[i]) for i, n in enumerate(names)]
    bundles = [bundle(f"other/{n}", n, 0, rates[i]) for i, n in enumerate(names)]
    bundles.append(bundle(NEW, None))
    return snapshot(brokers, bundles)


def test_least_long_term_message_rate_picks_the_least_loaded_broker():
    placement = place(cluster(), NEW, CONFIG, {})
    assert placement.broker == "b"
    assert placement.reason == Reason.LEAST_LOADED
    assert placement.scores == {"a": 300, "b": 100, "c": 200}


def test_overloaded_brokers_score_infinity():
    broker_name, scores = least_long_term_message_rate(
        cluster(cpu=(10, 90, 10)), ["a", "b", "c"], CONFIG, {}
    )
    assert scores["b"] == math.inf
    assert broker_name == "c"


def test_when_every_broker_is_overloaded_any_may_be_chosen():
    chosen, scores = least_long_term_message_rate(
        cluster(cpu=(90, 90, 90)), ["a", "b", "c"], CONFIG, {}
    )
    assert all(s == math.inf for s in scores.values())
    assert chosen in {"a", "b", "c"}


def test_ties_are_broken_by_the_seeded_random_source_among_equals():
    chosen = {
        least_long_term_message_rate(
            cluster(rates=(100, 100, 500)), ["a", "b", "c"], PulsarConfig.from_keys({"seed": s}), {}
        )[0]
        for s in range(20)
    }
    assert chosen == {"a", "b"}


def test_placement_is_recorded_as_preallocated_and_counts_for_the_next_one():
    snap = cluster(rates=(300, 100, 200))
    first = place(snap, NEW, CONFIG, {})
    snap2 = snapshot(
        list(snap.brokers.values()),
        [*snap.bundles.values(), bundle("ns2/0x00000000_0xffffffff", None, 0, 500)],
    )
    bigger = {**first.state, "preallocated": {"ns2/0x00000000_0xffffffff": "b"}}
    second = place(
        snap2,
        NEW,
        PulsarConfig.from_keys({"loadBalancerDistributeBundlesEvenlyEnabled": False}),
        bigger,
    )
    assert first.state["preallocated"] == {NEW: "b"}
    assert second.scores["b"] == 600
    assert second.broker == "c"


def test_inactive_brokers_are_filtered_with_a_reason():
    placement = place(cluster(states=("active", "draining", "drained")), NEW, CONFIG, {})
    assert placement.broker == "a"
    assert {(r.broker, r.reason) for r in placement.filtered} == {
        ("b", Reason.INACTIVE),
        ("c", Reason.INACTIVE),
    }


def test_even_distribution_keeps_brokers_with_fewest_bundles_of_the_namespace():
    snap = cluster(rates=(300, 100, 200))
    snap = snapshot(
        list(snap.brokers.values()),
        [*snap.bundles.values(), bundle("ns/0x00000000_0x80000000", "b")],
    )
    placement = place(snap, NEW, CONFIG, {})
    assert placement.broker == "c"
    assert ("b", Reason.NOT_LEAST_BUNDLES) in {(r.broker, r.reason) for r in placement.filtered}


def test_overloaded_choice_is_reselected_over_all_active_brokers():
    # Only "a" owns no bundle of ns, so even distribution keeps it; it is overloaded, so the
    # strategy runs again over every active broker and picks the least loaded one.
    snap = cluster(rates=(300, 100, 200), cpu=(95, 10, 10))
    snap = snapshot(
        list(snap.brokers.values()),
        [
            *snap.bundles.values(),
            bundle("ns/0x00000000_0x40000000", "b"),
            bundle("ns/0x40000000_0x80000000", "c"),
        ],
    )
    placement = place(snap, NEW, CONFIG, {})
    assert placement.reason == Reason.RESELECTED_OVERLOADED
    assert placement.broker == "b"


def test_max_topics_filter_drops_brokers_unless_it_would_drop_all():
    brokers = [broker("a", 10, topics=60_000), broker("b", 10, topics=10)]
    snap = snapshot(brokers, [bundle(NEW, None)])
    placement = place(snap, NEW, CONFIG, {})
    assert placement.broker == "b"
    assert placement.filtered[0].reason == Reason.TOO_MANY_TOPICS
    both = snapshot(
        [broker("a", 10, topics=60_000), broker("b", 10, topics=70_000)], [bundle(NEW, None)]
    )
    assert place(both, NEW, CONFIG, {}).broker in {"a", "b"}


def test_no_active_broker_means_no_placement():
    snap = snapshot([broker("a", 10, state="drained")], [bundle(NEW, None)])
    placement = place(snap, NEW, CONFIG, {})
    assert placement.broker is None
    assert placement.reason == Reason.NO_CANDIDATES


def test_unknown_candidate_is_an_error():
    with pytest.raises(InvalidSnapshot):
        place(cluster(), NEW, CONFIG, {}, candidates=["zz"])


def test_candidates_restrict_the_choice():
    assert place(cluster(), NEW, CONFIG, {}, candidates=["a", "c"]).broker == "c"
