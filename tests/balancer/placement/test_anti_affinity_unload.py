import pytest

from balancer.load import BrokerLoad, BundleLoad
from balancer.placement.filters import should_anti_affinity_unload
from balancer.snapshot import ClusterSnapshot, NamespacePolicy


def cluster(owned):
    """owned: broker -> namespaces of group g it owns one bundle of."""
    namespaces = {f"t/n{i}": NamespacePolicy(f"t/n{i}", "g") for i in range(5)}
    namespaces["t/free"] = NamespacePolicy("t/free")
    brokers = {b: BrokerLoad(b) for b in owned}
    bundles = {
        f"{ns}/0x00000000_0xffffffff": BundleLoad(f"{ns}/0x00000000_0xffffffff", b)
        for b, nss in owned.items()
        for ns in nss
    }
    return ClusterSnapshot(0, brokers, bundles, namespaces)


@pytest.mark.parametrize(
    ("owned", "expected"),
    [
        # Spec §8.3: owner b0 with {b0: 1} -> yes; {b0: 1, b1: 1} (b2 has 0) -> yes;
        # {b0: 1, b1: 1, b2: 1} -> no.
        ({"b0": ["t/n0"], "b1": [], "b2": []}, True),
        ({"b0": ["t/n0"], "b1": ["t/n1"], "b2": []}, True),
        ({"b0": ["t/n0"], "b1": ["t/n1"], "b2": ["t/n2"]}, False),
        # The owner holds more than the least: moving helps.
        ({"b0": ["t/n0", "t/n3"], "b1": ["t/n1"], "b2": ["t/n2"]}, True),
    ],
)
def test_spec_example_of_the_unload_guard(owned, expected):
    snap = cluster(owned)
    assert (
        should_anti_affinity_unload(snap, "t/n0/0x00000000_0xffffffff", "b0", sorted(owned))
        is expected
    )


def test_bundles_without_a_group_may_always_go():
    snap = cluster({"b0": ["t/n0"], "b1": ["t/n1"]})
    assert should_anti_affinity_unload(snap, "t/free/0x00000000_0xffffffff", "b0", ["b0", "b1"])
    assert should_anti_affinity_unload(snap, "t/n0/0x00000000_0xffffffff", "b0", [])


def test_when_all_candidates_hold_the_least_but_it_is_more_than_one():
    snap = cluster({"b0": ["t/n0", "t/n1"], "b1": ["t/n2", "t/n3"]})
    assert not should_anti_affinity_unload(snap, "t/n0/0x00000000_0xffffffff", "b0", ["b0", "b1"])
