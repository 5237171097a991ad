"""The preallocations of a placement pass are folded once (``running_total``), and a pass decides
exactly as if every placement added them all up again (a fresh snapshot each time, nothing
remembered): same brokers, same reasons, same scores to the last bit."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.placement import filters
from balancer.placement.place import place
from balancer.placement.preallocated import running_total
from balancer.snapshot import ClusterSnapshot
from tests.balancer.builders import broker, bundle, snapshot


def fresh(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The same cluster, remembering nothing."""
    return ClusterSnapshot(snap.now, dict(snap.brokers), dict(snap.bundles))


def test_a_growing_mapping_is_folded_once_and_a_changed_one_anew():
    snap = snapshot([broker("a", 10)])
    seen: list[str] = []

    def add(total: Counter[str], bundle: str, broker: str) -> None:
        seen.append(bundle)
        total[broker] += 1

    def fold(mapping: dict[str, str]) -> Counter[str]:
        return running_total(snap, mapping, "test", Counter[str], add)

    assert fold({"x/1": "a"}) == {"a": 1}
    assert fold({"x/1": "a", "x/2": "b"}) == {"a": 1, "b": 1}
    assert seen == ["x/1", "x/2"]  # the second call folded only the new one
    assert fold({"x/1": "b", "x/2": "b"}) == {"b": 2}  # an owner changed: anew
    assert fold({"x/2": "b"}) == {"b": 1}  # shrank: anew
    assert fold({}) == {}
    assert seen == ["x/1", "x/2", "x/1", "x/2", "x/2"]


def even_kept(snap, candidates, bundle, preallocated):
    """Pulsar's removeMostServicingBrokersForNamespace as it adds up (PULSAR.md §8.4)."""
    namespace = namespace_of_bundle(bundle)
    counts = Counter(snap.bundle_counts(namespace))
    own = snap.bundles.get(bundle)
    if own is not None and own.owner is not None:
        counts[own.owner] -= 1
    for other, owner_to_be in preallocated.items():
        owner = snap.bundles[other].owner if other in snap.bundles else None
        if other != bundle and owner is None and namespace_of_bundle(other) == namespace:
            counts[owner_to_be] += 1
    least = min(counts[name] for name in candidates)
    return [name for name in candidates if counts[name] == least]


def topics_kept(snap, candidates, config, preallocated):
    """loadBalancerBrokerMaxTopics over reported and preallocated topics, all added up."""
    extra = Counter()
    for other, owner_to_be in preallocated.items():
        extra[owner_to_be] += snap.bundles[other].topics if other in snap.bundles else 0
    kept = [n for n in candidates if snap.brokers[n].topics + extra[n] <= config.broker_max_topics]
    return kept or candidates


NAMES = [f"ns{n}/{i}" for n in range(2) for i in range(6)] + ["ns0/gone"]


@st.composite
def passes(draw):
    """A cluster of 2-5 brokers (some draining, some with topics), bundles of two namespaces
    owned or not, and a pass of placements with repeats and unknown bundles."""
    count = draw(st.integers(2, 5))
    brokers = [
        broker(
            f"b{j}",
            draw(st.floats(0, 99)),
            state=draw(st.sampled_from(["active", "active", "draining"])),
            topics=draw(st.integers(0, 6)),
            domain=f"zone-{j % 2}",
        )
        for j in range(count)
    ]
    owners = [None] + [b.name for b in brokers]
    bundles = [
        bundle(name, draw(st.sampled_from(owners)), draw(st.floats(0, 50)), draw(st.floats(0, 500)))
        for name in NAMES[:-1]
    ]
    order = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=12))
    return snapshot(brokers, bundles), order


@given(
    passes(),
    st.sampled_from(["FulcrumPlacement", "LeastLongTermMessageRate"]),
    st.booleans(),
    st.integers(1, 8),
)
def test_a_pass_decides_as_if_every_placement_added_everything_up_again(
    cluster, strategy, even, max_topics
):
    snap, order = cluster
    config = PulsarConfig.from_keys(
        {
            "loadBalancerDistributeBundlesEvenlyEnabled": even,
            "loadBalancerBrokerMaxTopics": max_topics,
        }
    )
    state: dict = {"preallocated": {}}
    again: dict = {"preallocated": {}}
    for name in order:
        # The filters against Pulsar's way: every preallocation added up at every call.
        pre, candidates = state["preallocated"], sorted(snap.brokers)
        assert filters.even_distribution(snap, candidates, name, pre)[0] == even_kept(
            snap, candidates, name, pre
        )
        assert filters.max_topics(snap, candidates, config, pre)[0] == topics_kept(
            snap, candidates, config, pre
        )
        remembered = place(snap, name, config, state, strategy=strategy)
        anew = place(fresh(snap), name, config, again, strategy=strategy)
        assert (remembered.broker, remembered.reason, remembered.scores) == (
            anew.broker,
            anew.reason,
            anew.scores,
        )
        assert remembered.filtered == anew.filtered
        state, again = remembered.state, anew.state
