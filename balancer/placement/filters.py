"""Candidate filters applied before a placement strategy selects; each reports whom it rejected.

Source: Pulsar ModularLoadManagerImpl.selectBrokerForAssignment and LoadManagerShared
(PULSAR.md §1 steps 2-6, §8.4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from balancer.bundles import namespace_of_bundle
from balancer.config import PulsarConfig
from balancer.decisions import Reason, Rejection
from balancer.placement.preallocated import running_total
from balancer.snapshot import ClusterSnapshot


def active_brokers(
    snapshot: ClusterSnapshot, candidates: list[str]
) -> tuple[list[str], list[Rejection]]:
    """Drop draining and drained brokers: they take no new bundles."""
    kept, rejected = [], []
    for name in candidates:
        broker = snapshot.brokers[name]
        if broker.is_active:
            kept.append(name)
        else:
            rejected.append(Rejection(name, "inactive", Reason.INACTIVE, f"state {broker.state}"))
    return kept, rejected


def max_topics(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    config: PulsarConfig,
    preallocated: Mapping[str, str],
) -> tuple[list[str], list[Rejection]]:
    """Drop brokers whose topics (reported + preallocated bundles') exceed
    ``loadBalancerBrokerMaxTopics``, unless that would drop every broker (then keep all)."""

    def add(extra: Counter[str], bundle: str, broker: str) -> None:
        load = snapshot.bundles.get(bundle)
        extra[broker] += load.topics if load else 0

    extra = running_total(snapshot, preallocated, "topics", Counter[str], add)
    kept, rejected = [], []
    for name in candidates:
        topics = snapshot.brokers[name].topics + extra[name]
        if topics > config.broker_max_topics:
            rejected.append(
                Rejection(
                    name,
                    "max_topics",
                    Reason.TOO_MANY_TOPICS,
                    f"{topics} topics > {config.broker_max_topics}",
                )
            )
        else:
            kept.append(name)
    if not kept:
        return candidates, []
    return kept, rejected


def even_distribution(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    bundle: str,
    preallocated: Mapping[str, str],
) -> tuple[list[str], list[Rejection]]:
    """Keep the brokers owning the fewest bundles of ``bundle``'s namespace (owned or preallocated).

    Source: Pulsar ``removeMostServicingBrokersForNamespace`` (PULSAR.md §8.4).
    """
    namespace = namespace_of_bundle(bundle)
    counts: Counter[str] = Counter(snapshot.bundle_counts(namespace))
    own = snapshot.bundles.get(bundle)
    if own is not None and own.owner is not None:
        counts[own.owner] -= 1

    def add(placed: dict[str, Counter[str]], other: str, broker: str) -> None:
        owner = snapshot.bundles[other].owner if other in snapshot.bundles else None
        if owner is None:
            placed.setdefault(namespace_of_bundle(other), Counter())[broker] += 1

    placed = running_total(snapshot, preallocated, "unowned per namespace", dict, add)
    counts.update(placed.get(namespace, Counter()))
    if bundle in preallocated and (own is None or own.owner is None):
        counts[preallocated[bundle]] -= 1  # placed again in the same pass: not itself
    if not candidates:
        return candidates, []
    least = min(counts[name] for name in candidates)
    kept = [name for name in candidates if counts[name] == least]
    rejected = [
        Rejection(
            name,
            "even_distribution",
            Reason.NOT_LEAST_BUNDLES,
            f"owns {counts[name]} bundles of {namespace}, the least is {least}",
        )
        for name in candidates
        if counts[name] != least
    ]
    return kept, rejected


def anti_affinity(
    snapshot: ClusterSnapshot,
    candidates: list[str],
    bundle: str,
    config: PulsarConfig,
    preallocated: Mapping[str, str],
) -> tuple[list[str], list[Rejection]]:
    """Spread an anti-affinity group's namespaces across failure domains and brokers.

    count(b) = distinct namespaces of the group (case-insensitive) that broker b owns or has
    preallocated a bundle of. With ``failureDomainsEnabled``, keep the candidates of the domains
    with the least total count (brokers without a domain share the default one); then, if some
    candidate has count 0, drop every candidate with count > 0, else keep the minimal count.

    | broker | domain | count | kept (failure domains on) |
    |---|---|---|---|
    | b1, b2 | d1 | 2, 1 | d1 total 3: yes -> b2 (count 1) |
    | b3, b4 | d2 | 2, 1 | d2 total 3: yes -> b4 (count 1) |
    | b5, b6 | d3 | 2, 2 | d3 total 4: no |

    Source: Pulsar LoadManagerShared.filterAntiAffinityGroupOwnedBrokers (PULSAR.md §8.1).
    """
    namespace = namespace_of_bundle(bundle)
    policy = snapshot.namespaces.get(namespace)
    group = (policy.anti_affinity_group or "").strip().lower() if policy else ""
    if not group or not candidates:
        return candidates, []
    members = {
        name
        for name, ns in snapshot.namespaces.items()
        if (ns.anti_affinity_group or "").strip().lower() == group
    }
    owned: dict[str, set[str]] = {
        name: snapshot.namespaces_owned_by(name) & members for name in candidates
    }
    for other, broker in preallocated.items():
        ns = namespace_of_bundle(other)
        if ns in members:
            owned.setdefault(broker, set()).add(ns)
    counts = {name: len(owned.get(name, ())) for name in candidates}
    rejected: list[Rejection] = []
    kept = list(candidates)
    if config.is_failure_domains_enabled:
        domain_totals: Counter[str] = Counter()
        for name in kept:
            domain_totals[snapshot.brokers[name].failure_domain] += counts[name]
        least_domain = min(domain_totals.values())
        rejected += [
            Rejection(
                name,
                "anti_affinity",
                Reason.ANTI_AFFINITY,
                f"failure domain {snapshot.brokers[name].failure_domain or 'default'!r} holds "
                f"{domain_totals[snapshot.brokers[name].failure_domain]} namespaces of group "
                f"{group!r}, the least is {least_domain}",
            )
            for name in kept
            if domain_totals[snapshot.brokers[name].failure_domain] != least_domain
        ]
        kept = [
            n for n in kept if domain_totals[snapshot.brokers[n].failure_domain] == least_domain
        ]
    least = min(counts[n] for n in kept)
    rejected += [
        Rejection(
            name,
            "anti_affinity",
            Reason.ANTI_AFFINITY,
            f"owns {counts[name]} namespaces of group {group!r}, the least is {least}",
        )
        for name in kept
        if counts[name] != least
    ]
    return [n for n in kept if counts[n] == least], rejected


def should_anti_affinity_unload(
    snapshot: ClusterSnapshot, bundle: str, owner: str, candidates: list[str]
) -> bool:
    """Whether unloading ``bundle`` from ``owner`` can improve its anti-affinity group's spread.

    Over the candidate brokers, with count = namespaces of the group a broker owns: unload when
    the least count is 0 or the owner's count is above the least; otherwise only when not every
    candidate has the least count. Bundles of namespaces without a group always may go.

    | owner b0 holds | others hold | unload? |
    |---|---|---|
    | 1 | b1: 0 | yes |
    | 1 | b1: 1, b2: 0 | yes |
    | 1 | b1: 1, b2: 1 | no |

    Source: Pulsar LoadManagerShared.shouldAntiAffinityNamespaceUnload (PULSAR.md §8.3).
    """
    policy = snapshot.namespaces.get(namespace_of_bundle(bundle))
    group = (policy.anti_affinity_group or "").strip().lower() if policy else ""
    if not group or not candidates:
        return True
    members = {
        name
        for name, ns in snapshot.namespaces.items()
        if (ns.anti_affinity_group or "").strip().lower() == group
    }
    counts = {name: len(snapshot.namespaces_owned_by(name) & members) for name in candidates}
    least = min(counts.values())
    current = len(snapshot.namespaces_owned_by(owner) & members)
    if least == 0 or current > least:
        return True
    return not all(count == least for count in counts.values())


def anti_affinity_spread(
    snapshot: ClusterSnapshot, config: PulsarConfig, serving: list[str]
) -> list[dict[str, object]]:
    """How each anti-affinity group's namespaces are spread, and where the spread breaks the
    rule ``anti_affinity`` places by (Pulsar counts a group's namespaces per broker, not bundles).

    One entry per group (names compared case-insensitively, shown as first written), sorted:
    ``{"group", "namespaces", "brokers": {broker: [namespaces it owns bundles of]}, "domains":
    {domain: namespaces held}, "violations": [{"broker" or "domain", "namespaces", "reason"}]}``.
    A violation: a broker owns bundles of two or more of the group's namespaces while a serving
    broker owns none of them; with ``failureDomainsEnabled``, the same for failure domains
    (brokers without a domain share "default").

    Source: Pulsar LoadManagerShared.filterAntiAffinityGroupOwnedBrokers (PULSAR.md §8.1).
    """
    groups: dict[str, tuple[str, list[str]]] = {}
    for name in sorted(snapshot.namespaces):
        written = (snapshot.namespaces[name].anti_affinity_group or "").strip()
        if written:
            groups.setdefault(written.lower(), (written, []))[1].append(name)
    out: list[dict[str, object]] = []
    for _, (written, members) in sorted(groups.items()):
        member_set = set(members)
        held = {
            broker: sorted(snapshot.namespaces_owned_by(broker) & member_set)
            for broker in sorted(snapshot.brokers)
        }
        held = {broker: names for broker, names in held.items() if names}
        violations: list[dict[str, object]] = []
        free = [b for b in serving if b not in held]
        for broker, names in held.items():
            if len(names) >= 2 and free:
                violations.append(
                    {
                        "broker": broker,
                        "namespaces": names,
                        "reason": f"{broker} owns bundles of {len(names)} namespaces of group "
                        f"{written!r} ({', '.join(names)}) while {free[0]} owns none",
                    }
                )
        domain_of = {b: snapshot.brokers[b].failure_domain or "default" for b in snapshot.brokers}
        domains: dict[str, set[str]] = {domain_of[b]: set() for b in serving}
        for broker, names in held.items():
            domains.setdefault(domain_of[broker], set()).update(names)
        if config.is_failure_domains_enabled:
            empty = sorted(d for d, inside in domains.items() if not inside)
            for domain, inside in sorted(domains.items()):
                if len(inside) >= 2 and empty:
                    violations.append(
                        {
                            "domain": domain,
                            "namespaces": sorted(inside),
                            "reason": f"failure domain {domain!r} holds {len(inside)} namespaces "
                            f"of group {written!r} while {empty[0]!r} holds none",
                        }
                    )
        out.append(
            {
                "group": written,
                "namespaces": members,
                "brokers": held,
                "domains": {d: len(inside) for d, inside in sorted(domains.items())},
                "violations": violations,
            }
        )
    return out
