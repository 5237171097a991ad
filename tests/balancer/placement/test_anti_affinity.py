from balancer.config import PulsarConfig
from balancer.decisions import Reason
from balancer.load import BrokerLoad, BundleLoad
from balancer.placement.filters import anti_affinity
from balancer.placement.place import place
from balancer.snapshot import ClusterSnapshot, NamespacePolicy

DOMAINS_ON = PulsarConfig.from_keys({"failureDomainsEnabled": True})


def cluster(owned: dict[str, list[str]], domains: dict[str, str], group="payments"):
    """owned: broker -> namespaces of the group it owns a bundle of (ns names "t/nsX")."""
    brokers = {b: BrokerLoad(b, failure_domain=domains.get(b, "")) for b in domains}
    bundles = {}
    namespaces = {"t/new": NamespacePolicy("t/new", group)}
    for broker, names in owned.items():
        for ns in names:
            name = f"{ns}/0x00000000_0x{abs(hash((broker, ns))) % 0xFFFFFFFF or 1:08x}"
            bundles[name] = BundleLoad(name, broker)
            namespaces[ns] = NamespacePolicy(ns, group.upper())  # case-insensitive
    bundles["t/new/0x00000000_0xffffffff"] = BundleLoad("t/new/0x00000000_0xffffffff", None)
    return ClusterSnapshot(0, brokers, bundles, namespaces)


NEW = "t/new/0x00000000_0xffffffff"


def test_doc_comment_example_keeps_least_loaded_domains_then_brokers():
    # d1 {b1:2, b2:1}, d2 {b3:2, b4:1}, d3 {b5:2, b6:2} -> domain totals 3, 3, 4 -> {b2, b4}.
    owned = {
        "b1": ["t/n1", "t/n2"],
        "b2": ["t/n3"],
        "b3": ["t/n4", "t/n5"],
        "b4": ["t/n6"],
        "b5": ["t/n7", "t/n8"],
        "b6": ["t/n9", "t/n10"],
    }
    domains = {"b1": "d1", "b2": "d1", "b3": "d2", "b4": "d2", "b5": "d3", "b6": "d3"}
    snap = cluster(owned, domains)
    kept, rejected = anti_affinity(snap, sorted(domains), NEW, DOMAINS_ON, {})
    assert kept == ["b2", "b4"]
    assert {r.broker for r in rejected} == {"b1", "b3", "b5", "b6"}
    assert all(r.reason == Reason.ANTI_AFFINITY for r in rejected)


def test_without_failure_domains_a_broker_with_none_of_the_group_wins():
    snap = cluster({"b0": ["t/n0"], "b2": ["t/n1"]}, {"b0": "", "b1": "", "b2": "", "b3": ""})
    kept, _ = anti_affinity(snap, ["b0", "b1", "b2", "b3"], NEW, PulsarConfig(), {})
    assert kept == ["b1", "b3"]


def test_when_every_broker_has_some_the_minimum_is_kept():
    snap = cluster({"b0": ["t/n0", "t/n1"], "b1": ["t/n2"]}, {"b0": "", "b1": ""})
    kept, _ = anti_affinity(snap, ["b0", "b1"], NEW, PulsarConfig(), {})
    assert kept == ["b1"]


def test_preallocated_bundles_count_and_no_group_means_no_filter():
    snap = cluster({}, {"b0": "", "b1": ""})
    kept, _ = anti_affinity(
        snap, ["b0", "b1"], NEW, PulsarConfig(), {"t/n9/0x00000000_0x10000000": "b0"}
    )
    assert kept == ["b0", "b1"]  # t/n9 is not a group member
    grouped = ClusterSnapshot(
        0,
        snap.brokers,
        snap.bundles,
        {**snap.namespaces, "t/n9": NamespacePolicy("t/n9", "payments")},
    )
    kept, _ = anti_affinity(
        grouped, ["b0", "b1"], NEW, PulsarConfig(), {"t/n9/0x00000000_0x10000000": "b0"}
    )
    assert kept == ["b1"]
    plain = ClusterSnapshot(0, snap.brokers, snap.bundles, {})
    assert anti_affinity(plain, ["b0", "b1"], NEW, PulsarConfig(), {})[0] == ["b0", "b1"]


def test_placement_spreads_a_group_across_failure_domains():
    # Spec example: 4 brokers, 2 domains, a group of 5 namespaces placed one after another.
    domains = {"b0": "d1", "b1": "d1", "b2": "d2", "b3": "d2"}
    brokers = {b: BrokerLoad(b, failure_domain=d) for b, d in domains.items()}
    namespaces = {f"t/ns{i}": NamespacePolicy(f"t/ns{i}", "g") for i in range(5)}
    bundles = {
        f"t/ns{i}/0x00000000_0xffffffff": BundleLoad(f"t/ns{i}/0x00000000_0xffffffff")
        for i in range(5)
    }
    state = {}
    chosen = []
    config = PulsarConfig.from_keys({"failureDomainsEnabled": True})
    for i in range(5):
        snap = ClusterSnapshot(0, brokers, bundles, namespaces)
        placement = place(snap, f"t/ns{i}/0x00000000_0xffffffff", config, state)
        state = placement.state
        chosen.append(placement.broker)
    # The first two land in different domains, the first four on four different brokers.
    assert domains[chosen[0]] != domains[chosen[1]]
    assert len(set(chosen[:4])) == 4
