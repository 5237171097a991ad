"""The demo cluster's layout: brokers, failure domains, tenants, namespaces, bundle counts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    """A simulated broker and its capacity.

    Attributes:
        name: broker id.
        failure_domain: the domain it fails with.
        cpu_series: NAB EC2 CPU file (name without .csv) giving its background CPU.
        bandwidth_bytes_per_s: NIC capacity each way (bytes/s).
        cpu_msgs_per_s: message rate (in + out, msg/s) that alone takes 100 % CPU.
        memory_mib: heap limit (MiB).
    """

    name: str
    failure_domain: str
    cpu_series: str
    bandwidth_bytes_per_s: float = 125_000_000.0  # 1 Gbit/s
    cpu_msgs_per_s: float = 60_000.0
    memory_mib: float = 8192.0


@dataclass(frozen=True, slots=True)
class Layout:
    """A cluster layout: brokers, and tenant -> namespaces with their initial bundle count."""

    cluster: str
    brokers: tuple[BrokerSpec, ...]
    namespaces: tuple[str, ...]  # "tenant/ns"
    bundles_per_namespace: int
    # Namespaces in anti-affinity groups: (namespace, group, bundles). They carry no trace
    # traffic (the workload uses ``namespaces``); the console seeds them to show the spread.
    anti_affinity: tuple[tuple[str, str, int], ...] = ()

    @property
    def tenants(self) -> list[str]:
        """Tenant names, in first-seen order."""
        every = [*self.namespaces, *(ns for ns, _, _ in self.anti_affinity)]
        return list(dict.fromkeys(ns.split("/")[0] for ns in every))

    @property
    def failure_domains(self) -> list[str]:
        """Failure domain names, in first-seen order."""
        return list(dict.fromkeys(b.failure_domain for b in self.brokers))


_CPU_SERIES = ("24ae8d", "53ea38", "5f5533", "77c1ca", "825cc2", "ac20cd", "c6585a", "fe7f93")
_DOMAINS = ("zone-a", "zone-a", "zone-a", "zone-b", "zone-b", "zone-b", "zone-c", "zone-c")

DEMO = Layout(
    cluster="demo",
    brokers=tuple(
        BrokerSpec(f"broker-{i + 1}", _DOMAINS[i], f"ec2_cpu_utilization_{_CPU_SERIES[i]}")
        for i in range(8)
    ),
    namespaces=(
        "acme/orders",
        "acme/payments",
        "globex/telemetry",
        "globex/logs",
        "initech/events",
        "initech/billing",
    ),
    bundles_per_namespace=16,
    anti_affinity=(
        ("acme/orders-east", "orders-ha", 1),
        ("acme/orders-west", "orders-ha", 1),
        ("acme/orders-central", "orders-ha", 1),
        ("initech/ledger-primary", "ledger-dr", 2),
        ("initech/ledger-standby", "ledger-dr", 2),
    ),
)


def generated_layout(
    brokers: int,
    namespaces: int,
    bundles_per_namespace: int,
    failure_domains: int,
    *,
    cluster: str = "demo",
    namespaces_per_tenant: int = 10,
) -> Layout:
    """A layout of any size: ``brokers`` brokers (``broker-1`` …) dealt round-robin over
    ``failure_domains`` domains (``zone-a`` …, then ``zone-27`` …), each with one of the NAB CPU
    series in turn; ``namespaces`` namespaces (``tenant-01/ns-0001`` …), ``namespaces_per_tenant``
    to a tenant, of ``bundles_per_namespace`` bundles each; no anti-affinity group.

    Raises:
        ValueError: a count below 1, or more failure domains than brokers.
    """
    counts = {
        "brokers": brokers,
        "namespaces": namespaces,
        "bundles_per_namespace": bundles_per_namespace,
        "failure_domains": failure_domains,
        "namespaces_per_tenant": namespaces_per_tenant,
    }
    low = [name for name, value in counts.items() if value < 1]
    if low:
        raise ValueError(f"{low[0]} must be at least 1, not {counts[low[0]]}")
    if failure_domains > brokers:
        raise ValueError(f"{failure_domains} failure domains need at least as many brokers")

    def domain(i: int) -> str:
        return f"zone-{chr(ord('a') + i)}" if i < 26 else f"zone-{i + 1}"

    width = max(2, len(str((namespaces - 1) // namespaces_per_tenant + 1)))
    return Layout(
        cluster=cluster,
        brokers=tuple(
            BrokerSpec(
                f"broker-{i + 1}",
                domain(i % failure_domains),
                f"ec2_cpu_utilization_{_CPU_SERIES[i % len(_CPU_SERIES)]}",
            )
            for i in range(brokers)
        ),
        namespaces=tuple(
            f"tenant-{i // namespaces_per_tenant + 1:0{width}d}/ns-{i + 1:04d}"
            for i in range(namespaces)
        ),
        bundles_per_namespace=bundles_per_namespace,
    )
