"""The demo cluster in the store: layout from balancer.simulator.layout, demo config, operator."""

from __future__ import annotations

import itertools
import secrets
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.db import transaction

from balancer.bundles import initial_boundaries
from balancer.simulator.layout import Layout
from console.access import OPERATORS_GROUP
from console.models import BalancerConfig, Broker, Bundle, Cluster, FailureDomain, Namespace, Tenant

# The demo plays a trace minute every 2 s (30x real time) on a small cluster, so some defaults
# are scaled with it: Pulsar's grace period (30 min -> 1 min of wall time, i.e. 30 simulated
# minutes) and minimum throughput worth an unload (10 MiB/s -> 1 MiB/s), and Fulcrum's
# cool-down (10 min -> 1 min of wall time, as the grace period). Fulcrum's move budget is
# derived from the cluster (no hourly limit by default), so it needs no scaling.
DEMO_PARAMETERS = {
    "loadBalancerSheddingGracePeriodMinutes": 1,
    "loadBalancerBundleUnloadMinThroughputThreshold": 1,
    "fulcrumBundleCoolDownMinutes": 1,
    # The demo's three zones: anti-affinity groups spread across them (Pulsar's filter).
    "failureDomainsEnabled": True,
}


@transaction.atomic
def config_seed() -> Cluster:
    """The cluster row and its demo balancer config alone: attached to a Pulsar cluster, the
    brokers, namespaces and bundles come from observing it. Idempotent."""
    cluster = Cluster.objects.order_by("pk").first() or Cluster.objects.create(name="default")
    BalancerConfig.objects.get_or_create(cluster=cluster, defaults={"parameters": DEMO_PARAMETERS})
    return cluster


@transaction.atomic
def cluster_seed(layout: Layout) -> Cluster:
    """Create the layout's cluster, failure domains, brokers, tenants, namespaces and bundles
    (unowned: placement assigns them on first lookup). Idempotent: existing rows are kept."""
    cluster, _ = Cluster.objects.get_or_create(name="default")
    domains = {
        name: FailureDomain.objects.get_or_create(cluster=cluster, name=name)[0]
        for name in layout.failure_domains
    }
    for spec in layout.brokers:
        Broker.objects.get_or_create(
            name=spec.name,
            defaults={"cluster": cluster, "failure_domain": domains[spec.failure_domain]},
        )
    tenants = {
        name: Tenant.objects.get_or_create(cluster=cluster, name=name)[0] for name in layout.tenants
    }
    for full_name in layout.namespaces:
        namespace, created = Namespace.objects.get_or_create(
            name=full_name, defaults={"tenant": tenants[full_name.split("/")[0]]}
        )
        if created:
            points = initial_boundaries(layout.bundles_per_namespace)
            Bundle.objects.bulk_create(
                Bundle(namespace=namespace, lower=a, upper=b) for a, b in itertools.pairwise(points)
            )
    for full_name, group, count in layout.anti_affinity:
        namespace, created = Namespace.objects.get_or_create(
            name=full_name,
            defaults={"tenant": tenants[full_name.split("/")[0]], "anti_affinity_group": group},
        )
        if created:
            points = initial_boundaries(count)
            Bundle.objects.bulk_create(
                Bundle(namespace=namespace, lower=a, upper=b) for a, b in itertools.pairwise(points)
            )
    BalancerConfig.objects.get_or_create(cluster=cluster, defaults={"parameters": DEMO_PARAMETERS})
    return cluster


def demo_operator_ensure(
    password_file: Path, username: str = "operator", *, admin: bool = False
) -> tuple[str, str]:
    """The demo operator's (username, password); created with a random password kept in
    ``password_file`` (mode 600) so that every ``make run`` can print it. ``admin``: a superuser
    (who may take and release control of a Pulsar cluster)."""
    group, _ = Group.objects.get_or_create(name=OPERATORS_GROUP)
    user = User.objects.filter(username=username).first()
    if user is not None and password_file.exists():
        return username, password_file.read_text().strip()
    password = secrets.token_urlsafe(12)
    if user is None:
        user = User.objects.create_user(
            username=username, password=password, is_superuser=admin, is_staff=admin
        )
    else:
        user.set_password(password)
        user.save()
    user.groups.add(group)
    password_file.parent.mkdir(parents=True, exist_ok=True)
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    return username, password
