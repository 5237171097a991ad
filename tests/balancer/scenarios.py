"""Named clusters for scenario tests (in the style of cruise-control's DeterministicCluster)."""

from __future__ import annotations

from balancer.config import PulsarConfig
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage
from balancer.snapshot import ClusterSnapshot, NamespacePolicy

MIB = 1024 * 1024
NOW = 1_000_000.0
# Pulsar's tunables with no grace period and no minimum throughput to unload.
EASY = PulsarConfig.from_keys(
    {
        "loadBalancerBundleUnloadMinThroughputThreshold": 0,
        "loadBalancerSheddingGracePeriodMinutes": 0,
    }
)


MSG_PER_MIB = 100.0  # every bundle carries 100 msg/s in and out per MiB/s of throughput


def _cluster(spec: dict[str, tuple[float, list[tuple[str, float]]]], **kw) -> ClusterSnapshot:
    """spec: broker -> (cpu %, [(bundle, MiB/s)]); a broker's rates are the sums of its
    bundles' (msg/s and bytes/s agree), its usage is the given CPU."""
    brokers, bundles = {}, {}
    reported = kw.get("reported", {})
    for name, (cpu, owned) in spec.items():
        mib = sum(t for _, t in owned)
        brokers[name] = BrokerLoad(
            name,
            failure_domain=kw.get("domains", {}).get(name, ""),
            state=kw.get("states", {}).get(name, "active"),
            cpu=ResourceUsage(cpu, 100),
            rates=MessageRates(mib * MSG_PER_MIB, mib * MSG_PER_MIB, mib * MIB / 2, mib * MIB / 2),
            bundles=tuple(b for b, _ in owned),
            reported_at=reported.get(name, NOW),
        )
        for bundle, mib in owned:
            rates = MessageRates(mib * MSG_PER_MIB, mib * MSG_PER_MIB, mib * MIB / 2, mib * MIB / 2)
            bundles[bundle] = BundleLoad(bundle, name, rates, rates, topics=10)
    for bundle in kw.get("unowned", ()):
        bundles[bundle] = BundleLoad(bundle)
    return ClusterSnapshot(NOW, brokers, bundles, kw.get("namespaces", {}))


def one_hot_broker() -> ClusterSnapshot:
    """b1 at 90 % CPU with four 50 MiB/s bundles; b2, b3 at 20 % with one each."""
    return _cluster(
        {
            "b1": (90, [(f"t/ns/0x{i:08x}_0x{i + 1:08x}", 50) for i in range(4)]),
            "b2": (20, [("t/ns/0x10000000_0x20000000", 50)]),
            "b3": (20, [("t/ns/0x20000000_0x30000000", 50)]),
        }
    )


def sole_bundle_overload() -> ClusterSnapshot:
    """b1 at 95 % with a single 400 MiB/s bundle: nothing can be shed from it."""
    return _cluster(
        {"b1": (95, [("t/hot/0x00000000_0xffffffff", 400)]), "b2": (10, [("t/ns/0x0_0x1", 1)])}
    )


def anti_affinity_unsatisfiable() -> ClusterSnapshot:
    """Both brokers already own a namespace of group g; a third namespace of g needs placing."""
    namespaces = {f"t/g{i}": NamespacePolicy(f"t/g{i}", "g") for i in range(3)}
    return _cluster(
        {
            "b1": (20, [("t/g0/0x00000000_0xffffffff", 1)]),
            "b2": (20, [("t/g1/0x00000000_0xffffffff", 1)]),
        },
        namespaces=namespaces,
        unowned=["t/g2/0x00000000_0xffffffff"],
    )


def scale_out_5_to_10() -> ClusterSnapshot:
    """Five loaded brokers with eight bundles each, plus five new empty brokers."""
    spec: dict[str, tuple[float, list[tuple[str, float]]]] = {
        f"old{i}": (70, [(f"t/ns{i}/0x{k:08x}_0x{k + 1:08x}", 20) for k in range(8)])
        for i in range(5)
    }
    spec |= {f"new{i}": (2, []) for i in range(5)}
    return _cluster(spec)


def broker_loss() -> ClusterSnapshot:
    """b2 stopped reporting 10 minutes ago; b1 and b3 reported just now."""
    return _cluster(
        {
            "b1": (30, [("t/ns/0x00000000_0x40000000", 10)]),
            "b2": (30, [("t/ns/0x40000000_0x80000000", 10), ("t/ns/0x80000000_0xc0000000", 10)]),
            "b3": (30, [("t/ns/0xc0000000_0xffffffff", 10)]),
        },
        reported={"b2": NOW - 600},
    )


def first_tick() -> ClusterSnapshot:
    """Right after start: three brokers own bundles but none has reported yet."""
    return _cluster(
        {
            "b1": (0, [("t/ns/0x00000000_0x80000000", 10)]),
            "b2": (0, [("t/ns/0x80000000_0xffffffff", 10)]),
            "b3": (0, []),
        },
        reported={"b1": None, "b2": None, "b3": None},
    )
