from balancer.config import PulsarConfig
from balancer.load import BrokerLoad, BundleLoad, MessageRates
from balancer.snapshot import ClusterSnapshot
from balancer.splitting.conditions import split_check

MIB = 1024 * 1024


def snap(bundles):
    owned = tuple(b.name for b in bundles)
    return ClusterSnapshot(0, {"a": BrokerLoad("a", bundles=owned)}, {b.name: b for b in bundles})


def b(name, topics=10, sessions=0, rate=0.0, mib=0.0):
    return BundleLoad(
        name,
        "a",
        long_term=MessageRates(rate, 0, mib * MIB, 0),
        topics=topics,
        producers=sessions,
    )


def test_each_limit_is_a_reason_checked_in_order_and_strictly():
    found = split_check(
        snap(
            [
                b("ns/1", topics=1001),
                b("ns/2", sessions=1001),
                b("ns/3", rate=30001),
                b("ns/4", mib=101),
                b("ns/5", topics=1000, sessions=1000, rate=30000, mib=100),
            ]
        ),
        PulsarConfig(),
    )
    assert [(c.bundle, c.reason) for c in found] == [
        ("ns/1", "Topics"),
        ("ns/2", "Sessions"),
        ("ns/3", "MsgRate"),
        ("ns/4", "Bandwidth"),
    ]


def test_bundles_with_fewer_than_two_topics_are_never_split():
    assert split_check(snap([b("ns/1", topics=1, rate=1e9)]), PulsarConfig()) == []


def test_sessions_limit_can_be_disabled():
    config = PulsarConfig.from_keys({"loadBalancerNamespaceBundleMaxSessions": 0})
    assert split_check(snap([b("ns/1", sessions=5000)]), config) == []


def test_the_namespace_bundle_budget_caps_the_splits():
    config = PulsarConfig.from_keys({"loadBalancerNamespaceMaximumBundles": 3})
    found = split_check(snap([b("ns/1", rate=1e6), b("ns/2", rate=1e6)]), config)
    # 2 bundles + 1 accepted = 3: the second candidate would exceed the budget.
    assert [c.bundle for c in found] == ["ns/1"]
