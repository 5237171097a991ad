"""ClusterSnapshot: everything a decision may read, taken at one instant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from balancer.errors import InvalidSnapshot
from balancer.load import BrokerLoad, BundleLoad
from balancer.units import Seconds


@dataclass(frozen=True, slots=True)
class NamespacePolicy:
    """A namespace's policies that placement reads: its anti-affinity group, if any."""

    name: str
    anti_affinity_group: str | None = None


@dataclass(frozen=True)
class ClusterSnapshot:
    """The brokers' latest loads, bundle loads and ownership, and recent unloads.

    Attributes:
        now: seconds since the epoch at which the snapshot was taken.
        brokers: broker name -> load, iterated in ascending name (the tie-break order).
        bundles: bundle name -> load; ``owner`` is None for an unassigned bundle.
        namespaces: namespace name -> policy.
        recently_unloaded: bundle name -> unload time (s since epoch); the grace period applies.

    Raises:
        InvalidSnapshot: a bundle owned by a broker absent from ``brokers``.
    """

    now: Seconds
    brokers: Mapping[str, BrokerLoad]
    bundles: Mapping[str, BundleLoad]
    namespaces: Mapping[str, NamespacePolicy] = field(default_factory=dict)
    recently_unloaded: Mapping[str, Seconds] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ordered = {name: self.brokers[name] for name in sorted(self.brokers)}
        object.__setattr__(self, "brokers", MappingProxyType(ordered))
        for bundle in self.bundles.values():
            if bundle.owner is not None and bundle.owner not in self.brokers:
                raise InvalidSnapshot(
                    f"bundle {bundle.name} is owned by unknown broker {bundle.owner!r}",
                    field=f"bundles[{bundle.name}].owner",
                )

    def owned_bundles(self, broker: str) -> list[BundleLoad]:
        """Bundles whose owner is ``broker`` (by the ownership table, not the broker's report)."""
        return [b for b in self.bundles.values() if b.owner == broker]
