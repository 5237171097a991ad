"""A Pulsar cluster observed through its admin API becomes the console's metadata store and live
load (``console.pulsar.observe``): brokers with their failure domains, namespaces with
their bundles and anti-affinity groups, the owner of every bundle, and each broker's load report
through the same validated path as a pushed report (``services.ingest``)."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

from django.conf import settings
from django.db import transaction

from console import loadstore
from console.models import Broker, Bundle, Cluster, FailureDomain, Namespace, Tenant
from console.pulsar.admin import PulsarAdmin
from console.pulsar.observe import (
    Observation,
    ObservationError,
    observe,
    report_document,
)
from console.services.errors import ConsoleError
from console.services.ingest import load_report_ingest

log = logging.getLogger(__name__)


def _bounds(namespace: str, boundaries: list[str]) -> list[tuple[int, int]]:
    """``["0x00000000", …, "0xffffffff"]`` -> [(lower, upper)], checked.

    Raises:
        ObservationError: boundaries that are not increasing 32-bit hex numbers from 0 to
            0xffffffff.
    """
    try:
        points = [int(b, 16) for b in boundaries]
    except (TypeError, ValueError):
        raise ObservationError(
            namespace, "boundaries", f"not hex numbers: {boundaries!r}"
        ) from None
    if (
        len(points) < 2
        or points[0] != 0
        or points[-1] != 0xFFFFFFFF
        or points != sorted(set(points))
    ):
        raise ObservationError(
            namespace, "boundaries", f"must rise from 0x00000000 to 0xffffffff: {boundaries!r}"
        )
    return list(itertools.pairwise(points))


def pulsar_observation_apply(seen: Observation) -> dict[str, Any]:
    """Make the metadata store what the cluster says, in one transaction: brokers (created when
    new, their failure domains set; a broker Pulsar no longer lists is left to time out),
    tenants, namespaces (their anti-affinity groups), bundles (those split or merged replaced),
    and every bundle's owner (None when no broker owns it). Then each broker's load report goes
    through the ingest path; a refused one is named, never folded into load.

    Returns:
        ``{"brokers", "bundles", "owned", "unowned", "reports" (accepted), "unchanged" (reports
        Pulsar had not renewed), "refused": ["<broker>: <field>: <why>", ...], "errors": what
        the observation could not read}``.
    """
    refused: list[str] = []
    with transaction.atomic():
        cluster = Cluster.objects.order_by("pk").first() or Cluster.objects.create(
            name=seen.cluster
        )
        domains = {
            name: FailureDomain.objects.get_or_create(cluster=cluster, name=name)[0]
            for name in sorted(set(seen.domains.values()) - {""})
        }
        brokers: dict[str, Broker] = {}
        for name in seen.brokers:
            broker, _ = Broker.objects.get_or_create(name=name, defaults={"cluster": cluster})
            domain = domains.get(seen.domains.get(name, ""))
            if broker.failure_domain_id != (domain.pk if domain else None):
                broker.failure_domain = domain
                broker.save(update_fields=["failure_domain"])
            brokers[name] = broker
        owned_rows = 0
        bundle_count = 0
        for name, (boundaries, group) in sorted(seen.namespaces.items()):
            try:
                ranges = _bounds(name, boundaries)
            except ObservationError as exc:
                refused.append(str(exc))
                continue
            tenant, _ = Tenant.objects.get_or_create(cluster=cluster, name=name.split("/", 1)[0])
            namespace, _ = Namespace.objects.get_or_create(name=name, defaults={"tenant": tenant})
            if namespace.anti_affinity_group != (group or ""):
                namespace.anti_affinity_group = group or ""
                namespace.save(update_fields=["anti_affinity_group"])
            existing = {(b.lower, b.upper): b for b in namespace.bundles.all()}
            Bundle.objects.filter(
                pk__in=[b.pk for key, b in existing.items() if key not in set(ranges)]
            ).delete()
            for lower, upper in ranges:
                label = f"{name}/0x{lower:08x}_0x{upper:08x}"
                owner = brokers.get(seen.owners.get(label, ""))
                bundle = existing.get((lower, upper))
                if owner is None and bundle is not None and bundle.owner_id is not None:
                    # Its owner's list could not be read this time: it keeps the owner it had.
                    known = next((b for b in brokers.values() if b.pk == bundle.owner_id), None)
                    if known is not None and known.name in seen.unknown_owners:
                        owner = known
                if bundle is None:
                    Bundle.objects.create(
                        namespace=namespace, lower=lower, upper=upper, owner=owner
                    )
                elif bundle.owner_id != (owner.pk if owner else None):
                    bundle.owner = owner
                    bundle.save(update_fields=["owner"])
                owned_rows += owner is not None
                bundle_count += 1
        loadstore.ownership_changing()
    accepted = unchanged = 0
    for reporter, data in sorted(seen.reports.items()):
        owned = sorted(b for b, owner in seen.owners.items() if owner == reporter)
        try:
            document = report_document(reporter, data, owned)
            load_report_ingest(json.dumps(document).encode(), as_broker=reporter)
            accepted += 1
        except ObservationError as exc:
            refused.append(str(exc))
        except ConsoleError as exc:
            if exc.field == "timestamp" and "after" in exc.message:
                unchanged += 1  # Pulsar has not renewed its report since the last observation
            else:
                where = exc.field or "body"
                said = exc.message.removeprefix(f"{where}: ")
                refused.append(f"{reporter}: {where}: {said}")
    for line in refused:
        log.warning("Pulsar observation refused: %s", line)
    return {
        "brokers": len(seen.brokers),
        "bundles": bundle_count,
        "owned": owned_rows,
        "unowned": bundle_count - owned_rows,
        "reports": accepted,
        "unchanged": unchanged,
        "refused": refused,
        "errors": list(seen.errors),
    }


def pulsar_observe_run() -> dict[str, Any] | None:
    """Observe the cluster at ``FULCRUM_PULSAR_URL`` (with ``FULCRUM_PULSAR_TOKEN``) and apply
    what it says (``pulsar_observation_apply``); None when no cluster is configured.

    Raises:
        PulsarAdminError: a cluster-wide read failed (the previous state stands).
    """
    if not settings.FULCRUM_PULSAR_URL:
        return None
    token = settings.FULCRUM_PULSAR_TOKEN or None
    with PulsarAdmin(settings.FULCRUM_PULSAR_URL, token=token) as admin:
        return pulsar_observation_apply(observe(admin))
