"""A Pulsar cluster observed through its admin API becomes the console's metadata store and live
load (``console.pulsar.observe``): brokers with their failure domains, namespaces with
their bundles and anti-affinity groups, the owner of every bundle, and each broker's load report
through the same validated path as a pushed report (``services.ingest``)."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console import leases, loadstore, metrics, realtime, selectors
from console.access import actor_check
from console.errors import ConsoleError
from console.leases import lease_kept
from console.models import (
    AuditEvent,
    BalancerConfig,
    Broker,
    Bundle,
    Cluster,
    FailureDomain,
    Namespace,
    PulsarConnection,
    PulsarMove,
    Tenant,
)
from console.pulsar.admin import CallRecord, PulsarAdmin, PulsarAdminError
from console.pulsar.observe import (
    Observation,
    ObservationError,
    ObserveCache,
    namespace_ranges,
    observe,
    report_document,
)
from console.services import executor
from console.services.connections import admin_for, token_encrypt
from console.services.control import AUTO_SPLIT, control_conflict_check, control_take
from console.services.ingest import load_reports_ingest

log = logging.getLogger(__name__)


def sync_lease_s() -> float:
    """The Pulsar pass's lease (s), kept while the pass runs (observing, verifying, sending: an
    unload may take 90 s) and renewed every third of it: one observation period (at least 5 s),
    so that a worker killed mid-pass delays the next pass by about two periods at most."""
    return max(settings.FULCRUM_PULSAR_OBSERVE_S, 5.0)


def _observed(bundle: str, before: str | None, owner: Broker | None, now: datetime) -> AuditEvent:
    """The audit row of a move Pulsar made on its own, as observed."""
    if owner is None:
        what = f"Pulsar unloaded it from {before} (observed); no broker owns it until a lookup"
    elif before is None:
        what = f"Pulsar placed it on {owner.name} at a lookup (observed)"
    else:
        what = f"Pulsar moved it from {before} to {owner.name} (observed)"
    return AuditEvent(
        at=now,
        action=AuditEvent.Action.OBSERVED,
        target=bundle,
        source=before or "",
        destination=owner.name if owner else "",
        reason=what,
    )


def pulsar_observation_apply(seen: Observation, *, now: datetime | None = None) -> dict[str, Any]:
    """Make the metadata store what the cluster says, in one transaction: brokers (created when
    new, their failure domains set; a broker Pulsar no longer lists is left to time out),
    tenants, namespaces (their anti-affinity groups), bundles (those split or merged replaced),
    and every bundle's owner (None when no broker owns it); a change Fulcrum's executor did not
    make (Pulsar's shedder, a lookup, a split, another admin) is audited as ``observed`` and starts
    the bundle's cool-down. Then each broker's load report goes
    through the ingest path; a refused one is named, never folded into load.

    Returns:
        ``{"brokers", "bundles", "owned", "unowned", "reports" (accepted), "unchanged" (reports
        not newer than the broker's last accepted one), "refused": ["<broker>: <field>: <why>",
        ...], "errors": what the observation could not read}``.
    """
    refused: list[str] = []
    now = now or timezone.now()
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
        by_pk = {b.pk: b.name for b in Broker.objects.all()}
        # Bundles Fulcrum's executor is moving: their owner changes are its own, verified there.
        # (sent ones only: a skipped or cancelled move changed nothing in Pulsar).
        ours = set(
            PulsarMove.objects.filter(
                state__in=[PulsarMove.State.SENDING, PulsarMove.State.VERIFYING]
            ).values_list("bundle", flat=True)
        ) | set(
            PulsarMove.objects.filter(
                finished_at__gte=now - timedelta(minutes=5), sent_at__isnull=False
            )
            .exclude(outcome__in=[PulsarMove.Outcome.SKIPPED, PulsarMove.Outcome.FAILED])
            .values_list("bundle", flat=True)
        )
        observed: list[AuditEvent] = []
        # Read in three queries, written only where something changed: 50,000 bundles took
        # 3 s a pass one model at a time (issue 26).
        broker_of_pk = {b.pk: b for b in brokers.values()}
        tenants = {t.name: t for t in Tenant.objects.filter(cluster=cluster)}
        namespaces = {n.name: n for n in Namespace.objects.filter(name__in=list(seen.namespaces))}
        rows: dict[int, dict[tuple[int, int], tuple[int, int | None]]] = {}
        for pk, namespace_id, lower, upper, owner_id in Bundle.objects.filter(
            namespace__in=list(namespaces.values())
        ).values_list("pk", "namespace_id", "lower", "upper", "owner_id"):
            rows.setdefault(namespace_id, {})[(lower, upper)] = (pk, owner_id)
        created: list[Bundle] = []
        moved: dict[tuple[int | None, bool], list[int]] = {}  # (owner, cool-down?) -> bundles
        gone_pks: list[int] = []
        for name, (boundaries, group) in sorted(seen.namespaces.items()):
            try:
                ranges = namespace_ranges(name, boundaries)
            except ObservationError as exc:
                refused.append(str(exc))
                continue
            tenant_name = name.split("/", 1)[0]
            if tenant_name not in tenants:
                tenants[tenant_name] = Tenant.objects.get_or_create(
                    cluster=cluster, name=tenant_name
                )[0]
            namespace = namespaces.get(name)
            if namespace is None:
                namespace, _ = Namespace.objects.get_or_create(
                    name=name, defaults={"tenant": tenants[tenant_name]}
                )
            if namespace.anti_affinity_group != (group or ""):
                namespace.anti_affinity_group = group or ""
                namespace.save(update_fields=["anti_affinity_group"])
            existing = rows.get(namespace.pk, {})
            now_ranges = set(ranges)
            for (lower, upper), (row_pk, was_owner) in existing.items():
                if (lower, upper) in now_ranges:
                    continue
                gone_pks.append(row_pk)
                label = f"{name}/0x{lower:08x}_0x{upper:08x}"
                if label not in ours:
                    parts = sum(1 for lo, hi in ranges if lower <= lo < upper)
                    observed.append(
                        AuditEvent(
                            at=now,
                            action=AuditEvent.Action.OBSERVED,
                            target=label,
                            source=by_pk.get(was_owner or 0, ""),
                            reason=f"Pulsar split it into {parts} bundles (observed)"
                            if parts > 1
                            else "Pulsar merged or removed it (observed)",
                        )
                    )
            for lower, upper in ranges:
                label = f"{name}/0x{lower:08x}_0x{upper:08x}"
                owner = brokers.get(seen.owners.get(label, ""))
                row = existing.get((lower, upper))
                if owner is None and row is not None and row[1] is not None:
                    # Its owner's list could not be read this time: it keeps the owner it had.
                    known = broker_of_pk.get(row[1])
                    if known is not None and known.name in seen.unknown_owners:
                        owner = known
                if row is None:
                    created.append(
                        Bundle(namespace=namespace, lower=lower, upper=upper, owner=owner)
                    )
                elif row[1] != (owner.pk if owner else None):
                    before = by_pk.get(row[1] or 0)
                    cool_down = before is not None and label not in ours
                    if cool_down:
                        # Pulsar moved it on its own: audited, and the cool-down counts from now.
                        observed.append(_observed(label, before, owner, now))
                    elif before is None and owner is not None and label not in ours:
                        observed.append(_observed(label, None, owner, now))
                    moved.setdefault((owner.pk if owner else None, cool_down), []).append(row[0])
                owned_rows += owner is not None
                bundle_count += 1
        if gone_pks:
            Bundle.objects.filter(pk__in=gone_pks).delete()
        Bundle.objects.bulk_create(created, batch_size=2000)
        for (owner_pk, cool_down), pks in moved.items():
            fields: dict[str, Any] = {"owner_id": owner_pk}
            if cool_down:
                fields["last_unloaded_at"] = now
            for at in range(0, len(pks), 2000):
                Bundle.objects.filter(pk__in=pks[at : at + 2000]).update(**fields)
        if seen.namespaces_complete:
            # Every namespace was read: one Pulsar no longer lists is gone, with its bundles.
            gone_ns = Namespace.objects.exclude(name__in=list(seen.namespaces))
            for namespace in gone_ns:
                observed.append(
                    AuditEvent(
                        at=now,
                        action=AuditEvent.Action.OBSERVED,
                        target=namespace.name,
                        reason="Pulsar no longer lists this namespace (observed): its bundles are "
                        "forgotten",
                    )
                )
            gone_ns.delete()
        AuditEvent.objects.bulk_create(observed)
        loadstore.ownership_changing()
    for event in observed:
        realtime.publish(realtime.BUNDLE_MOVED, event.summary())
    accepted = unchanged = 0
    owned_by: dict[str, list[str]] = {}
    for bundle, reporter in seen.owners.items():
        owned_by.setdefault(reporter, []).append(bundle)
    documents: list[tuple[bytes, str]] = []
    for reporter, data in sorted(seen.reports.items()):
        owned = sorted(owned_by.get(reporter, ()))
        read = seen.reads.get(reporter)
        try:
            document = report_document(
                reporter, data, owned, read_at=read.read_at if read else None
            )
            documents.append((json.dumps(document).encode(), reporter))
        except ObservationError as exc:
            refused.append(str(exc))
    for (_, reporter), result in zip(documents, load_reports_ingest(documents), strict=True):
        if not isinstance(result, ConsoleError):
            accepted += 1
        elif result.field == "timestamp" and "after" in result.message:
            # Not after the broker's last accepted report (one pushed meanwhile, or two
            # reads in the same instant): the newer one stands.
            unchanged += 1
        else:
            where = result.field or "body"
            said = result.message.removeprefix(f"{where}: ")
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


def _environment_fields() -> dict[str, str]:
    """The connection fields the environment sets (``FULCRUM_PULSAR_…``)."""
    return {
        "admin_url": settings.FULCRUM_PULSAR_URL,
        "tls_ca_file": settings.FULCRUM_PULSAR_TLS_CA,
        "token_file": settings.FULCRUM_PULSAR_TOKEN_FILE,
        "oauth2_issuer_url": settings.FULCRUM_PULSAR_OAUTH2_ISSUER_URL,
        "oauth2_audience": settings.FULCRUM_PULSAR_OAUTH2_AUDIENCE,
        "oauth2_key_file": settings.FULCRUM_PULSAR_OAUTH2_KEY_FILE,
        "oauth2_scope": settings.FULCRUM_PULSAR_OAUTH2_SCOPE,
        "tls_cert_file": settings.FULCRUM_PULSAR_TLS_CERT,
        "tls_key_file": settings.FULCRUM_PULSAR_TLS_KEY,
        "cluster_name": settings.FULCRUM_PULSAR_CLUSTER,
        # The token's variable only when it is set: another way may be in use.
        "token_env": "FULCRUM_PULSAR_TOKEN" if os.environ.get("FULCRUM_PULSAR_TOKEN") else "",
    }


def pulsar_connection_from_environment() -> PulsarConnection | None:
    """The connection ``FULCRUM_PULSAR_URL`` names (token from ``FULCRUM_PULSAR_TOKEN``, or
    ``FULCRUM_PULSAR_TOKEN_FILE``, or ``FULCRUM_PULSAR_OAUTH2_…``; CA from
    ``FULCRUM_PULSAR_TLS_CA``; client certificate from ``FULCRUM_PULSAR_TLS_CERT``/``_KEY``;
    cluster from ``FULCRUM_PULSAR_CLUSTER``), created attached in observe-only mode the first
    time, kept up to date; None when the variable is not set."""
    url = settings.FULCRUM_PULSAR_URL
    if not url:
        return None
    name = settings.FULCRUM_PULSAR_NAME
    fields = _environment_fields()
    # Every pass calls this: when nothing changed, one plain read and no lock.
    unchanged = PulsarConnection.objects.filter(name=name, **fields).first()
    if unchanged is not None:
        return unchanged
    with transaction.atomic():
        connection = PulsarConnection.objects.select_for_update().filter(name=name).first()
        if connection is None:
            attached = selectors.pulsar_connection_attached() is not None
            connection = PulsarConnection.objects.create(
                name=name, is_attached=not attached, **fields
            )
            AuditEvent.objects.create(
                at=timezone.now(),
                action=AuditEvent.Action.CONTROL,
                target=name,
                reason=f"Pulsar cluster {name} at {url} added from the environment"
                + ("" if attached else ", attached observe-only"),
            )
            if not attached:
                _layout_forget(connection, None)
        else:
            changed = [k for k, v in fields.items() if getattr(connection, k) != v]
            pinned = {"admin_url", "cluster_name"} & set(changed)
            if connection.mode == PulsarConnection.Mode.CONTROL and pinned:
                # Pointing a controlled connection elsewhere would leave the old cluster's
                # shedding off and restore its values on the new one.
                log.error(
                    "FULCRUM_PULSAR_URL/_CLUSTER changed to %s %s while Fulcrum controls %s at "
                    "%s: kept; release control first",
                    url,
                    fields["cluster_name"],
                    name,
                    connection.admin_url,
                )
                changed = [k for k in changed if k not in pinned]
            for key in changed:
                setattr(connection, key, fields[key])
            if changed:
                connection.save(update_fields=changed)
    return connection


def _iso(seconds: float | None) -> str | None:
    return datetime.fromtimestamp(seconds, UTC).isoformat() if seconds is not None else None


def _summary(seen: Observation, applied: dict[str, Any], calls: int) -> dict[str, Any]:
    """What the connection keeps of an observation: ``brokerUrls``, each broker's own web URL
    as Pulsar named it (E4's redirect); ``brokerReads``, broker -> ``{"readAt" (the report's
    time), "lastUpdate" (Pulsar's last metadata-store write of it, information only), "url",
    "missing" (figures that could not be read, with why), "calls"}``; ``adminCalls`` made by
    the pass."""
    return applied | {
        "cluster": seen.cluster,
        "clusterSource": seen.cluster_source,
        "leader": seen.leader,
        "loadManager": seen.load_manager,
        "extensible": seen.extensible,
        "version": seen.version,
        "versions": seen.versions,
        "lbConfig": seen.lb_config,
        "brokerUrls": dict(seen.broker_urls),
        "brokerReads": {
            broker: {
                "readAt": _iso(read.read_at),
                "lastUpdate": _iso(read.last_update),
                "url": read.url,
                "missing": list(read.missing),
                "calls": read.calls,
            }
            for broker, read in sorted(seen.reads.items())
        },
        "adminCalls": calls,
    }


# What each connection's passes keep between them in this process (console.pulsar.observe).
_caches: dict[int, ObserveCache] = {}


def pulsar_sync_run(*, now: datetime | None = None) -> dict[str, Any] | None:
    """One pass of the attached Pulsar connection: observe the cluster into the metadata store,
    verify the moves sent before, send the queued ones (when in control and the executor runs;
    ``services.executor``), and keep the observation's summary on the connection.

    Returns:
        The observation summary (``pulsar_observation_apply``'s and the cluster's leader, load
        manager, version, ``sent`` and ``verified`` moves); None when nothing is attached.
    """
    pulsar_connection_from_environment()
    connection = selectors.pulsar_connection_attached()
    if connection is None:
        return None
    now = now or timezone.now()
    with lease_kept(leases.PULSAR_SYNC, sync_lease_s()) as lease:
        if not lease.held:
            log.info("another Pulsar pass holds the lease; skipped")
            return None
        try:
            admin = admin_for(connection)
        except ConsoleError as exc:
            _failed(connection, now, exc.message)
            return None
        started = time.monotonic()
        PulsarConnection.objects.filter(pk=connection.pk).update(pass_started_at=now)
        failure = None
        try:
            summary = _pass(connection, admin, now)
        except PulsarAdminError as exc:
            failure = f"{exc.method} {exc.url}: {exc.status} {exc.reason}"
            raise
        finally:
            took = time.monotonic() - started
            calls = _calls_record(connection, admin.calls_taken(), took)
            if failure is not None:
                _failed(connection, now, failure, calls=calls, durationS=round(took, 3))
    summary["durationS"] = round(took, 3)
    summary["calls"] = calls
    connection.refresh_from_db(fields=["observation"])
    summary["controlAtStart"] = connection.observation.get("controlAtStart", False)
    connection.observation = summary
    connection.observed_at = now
    connection.save(update_fields=["observation", "observed_at"])
    metrics.PULSAR_OBSERVED.set(now.timestamp())
    metrics.PULSAR_MOVES_LATE.set(
        len(
            selectors.moves_late(
                connection, now=timezone.now(), observe_s=settings.FULCRUM_PULSAR_OBSERVE_S
            )
        )
    )
    if settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START and not summary["controlAtStart"]:
        _take_control_at_start(connection, now)
    return summary


# How many passes the failing-call rate on the Pulsar page looks back over.
CALL_WINDOW_PASSES = 20


def _calls_record(
    connection: PulsarConnection,
    records: list[CallRecord],
    took_s: float,
) -> dict[str, Any]:
    """Export one pass's admin calls to /metrics and summarise them for the Pulsar page:
    ``{"total", "bytes" (the answers' bodies), "failed", "window": [[calls, failed], ...] (the
    last CALL_WINDOW_PASSES passes, newest last), "byCall": [{"broker", "call", "calls",
    "failed", "slowestS", "meanS", "lastFailure"}, ...] (failing first, then slowest; at most
    20)}``. Durations in seconds."""
    metrics.PULSAR_OBSERVATION_SECONDS.observe(took_s)
    groups: dict[tuple[str, str], list[CallRecord]] = {}
    for record in records:
        metrics.PULSAR_CALLS.labels(
            broker=record.broker, call=record.call, result=record.result
        ).inc()
        metrics.PULSAR_CALL_SECONDS.labels(call=record.call).observe(record.seconds)
        groups.setdefault((record.broker, record.call), []).append(record)
    rows: list[dict[str, Any]] = []
    for (broker, call), group in groups.items():
        failures = [r for r in group if r.result != "ok"]
        rows.append(
            {
                "broker": broker,
                "call": call,
                "calls": len(group),
                "failed": len(failures),
                "slowestS": round(max(r.seconds for r in group), 3),
                "meanS": round(sum(r.seconds for r in group) / len(group), 3),
                "lastFailure": f"{failures[-1].result}: {failures[-1].reason}" if failures else "",
            }
        )
    rows.sort(key=lambda r: (-r["failed"], -r["slowestS"]))
    failed = sum(r["failed"] for r in rows)
    previous = (
        PulsarConnection.objects.filter(pk=connection.pk)
        .values_list("observation", flat=True)
        .first()
        or {}
    )
    window = [*((previous.get("calls") or {}).get("window") or []), [len(records), failed]]
    return {
        "total": len(records),
        "bytes": sum(r.size for r in records),
        "failed": failed,
        "window": window[-CALL_WINDOW_PASSES:],
        "byCall": rows[:20],
    }


def _pass(connection: PulsarConnection, admin: PulsarAdmin, now: datetime) -> dict[str, Any]:
    """Observe, verify, check control, send: the body of ``pulsar_sync_run``."""
    with admin:
        cache = _caches.setdefault(
            connection.pk, ObserveCache(usage_max_age_s=settings.FULCRUM_BROKER_TIMEOUT_S)
        )
        started, cpu = time.monotonic(), time.process_time()
        seen = observe(admin, connection.cluster_name or None, cache=cache)
        read, read_cpu = time.monotonic(), time.process_time()
        summary = _summary(seen, pulsar_observation_apply(seen, now=now), admin.calls)
        # Where the pass's time went (s): reading Pulsar, writing the metadata store and the
        # live load; the rest is verifying and sending moves. With the CPU this process spent
        # on each (s, its threads together): wall time beyond it was waiting on Pulsar, the
        # database or the machine's other processes.
        summary["readS"] = round(read - started, 3)
        summary["readCpuS"] = round(read_cpu - cpu, 3)
        summary["applyS"] = round(time.monotonic() - read, 3)
        summary["applyCpuS"] = round(time.process_time() - read_cpu, 3)
        summary["verified"] = executor.moves_verify(connection, seen, now=now)
        # Pulsar's own balancing back on while Fulcrum holds control: the executor stops
        # before anything is sent (services.control.control_conflict_check).
        summary["conflict"] = control_conflict_check(connection, seen.lb_config, admin, now)
        if connection.mode != PulsarConnection.Mode.CONTROL:
            # Control went back to Pulsar without a release's cancelling them (the
            # dead-man's): moves still queued are never sent.
            executor.moves_cancel(connection, f"Fulcrum no longer controls {connection.name}", now)
        # Sent after observing: each move is checked against the owners just seen.
        summary["sent"] = executor.moves_send(
            connection,
            admin,
            now=timezone.now(),
            version=seen.version,
            extensible=seen.extensible,
        )
        _auto_split_keep_off(connection, admin, seen, now)
    return summary


def _auto_split_keep_off(
    connection: PulsarConnection, admin: PulsarAdmin, seen: Observation, now: datetime
) -> None:
    """In control, when Fulcrum splits (its auto-split on, perhaps turned on after control was
    taken) and Pulsar's auto-split is on: turn Pulsar's off too, keeping its previous values for
    the release, audited. Fulcrum never splits against Pulsar."""
    connection.refresh_from_db(fields=["mode", "previous_config", "is_executor_stopped"])
    splits = BalancerConfig.objects.filter(is_auto_split_enabled=True).exists()
    if (
        connection.mode != PulsarConnection.Mode.CONTROL
        or connection.is_executor_stopped  # stopped, perhaps for a release under way
        or not splits
        or seen.lb_config.get(AUTO_SPLIT) != "true"
        or AUTO_SPLIT in connection.previous_config
    ):
        return
    try:
        override = admin.dynamic_overrides().get(AUTO_SPLIT)
        admin.set_dynamic_config(AUTO_SPLIT, "false")
    except PulsarAdminError as exc:
        log.warning("could not turn Pulsar's auto-split off: %s %s", exc.status, exc.reason)
        return
    connection.previous_config = {
        **connection.previous_config,
        AUTO_SPLIT: {"effective": "true", "override": override},
    }
    connection.save(update_fields=["previous_config"])
    AuditEvent.objects.create(
        at=now,
        action=AuditEvent.Action.CONTROL,
        target=connection.name,
        reason=f"Fulcrum splits bundles now: {AUTO_SPLIT} true -> false (restored when control "
        "is released)",
    )


def _take_control_at_start(connection: PulsarConnection, now: datetime) -> None:
    """The demo's one automatic take-over (FULCRUM_PULSAR_TAKE_CONTROL_AT_START): tried once;
    an admin who releases control later is not overruled."""
    connection.observation = {**connection.observation, "controlAtStart": True}
    connection.save(update_fields=["observation"])
    if connection.mode == PulsarConnection.Mode.CONTROL:
        return
    try:
        control_take(connection.pk, actor=None, confirm=True, now=now)
    except ConsoleError as exc:
        log.warning("could not take control of %s at start: %s", connection.name, exc.message)


def _failed(connection: PulsarConnection, now: datetime, why: str, **extra: Any) -> None:
    """The observation failed: said on the connection (the previous state stands; ``extra``,
    e.g. the pass's ``calls``, replaces its keys)."""
    connection.refresh_from_db(fields=["observation"])
    connection.observation = {
        **connection.observation,
        **extra,
        "failure": why,
        "failedAt": now.isoformat(),
    }
    connection.save(update_fields=["observation"])
    log.warning("Pulsar observation of %s failed: %s", connection.name, why)


def pulsar_connection_save(
    connection: PulsarConnection, *, token: str | None, actor: Any, changed: list[str]
) -> PulsarConnection:
    """Save a connection edited by an admin: a new ``token`` (None: keep the stored one; ""
    with no ``token_env``: none) is encrypted; attaching detaches no other (at most one is
    attached: the others must be detached first). Audited, the token never written out.

    Raises:
        ConsoleError: 403 not an admin; 409 another connection is attached, or this one is in
            control and would be detached (release control first).
    """
    actor_check(actor, admin=True)
    with transaction.atomic():
        pulsar_connection_check(connection, attached=connection.is_attached, lock=True)
        if token is not None:
            connection.token_encrypted = token_encrypt(token)
            changed = [*changed, "token"]
        created = connection.pk is None
        was_attached = (
            not created
            and PulsarConnection.objects.filter(pk=connection.pk, is_attached=True).exists()
        )
        connection.save()
        if connection.is_attached != was_attached:
            # Attached: the cluster shown before is replaced; detached: nothing is shown (the
            # console must not balance a layout it no longer observes).
            _layout_forget(connection, actor)
        AuditEvent.objects.create(
            at=timezone.now(),
            actor=actor,
            action=AuditEvent.Action.CONTROL,
            target=connection.name,
            reason=(
                f"Pulsar connection {connection.name} added at {connection.admin_url}"
                if created
                else f"Pulsar connection {connection.name} changed: {', '.join(changed) or '-'}"
            )
            + ("; attached observe-only" if connection.is_attached and created else ""),
        )
    return connection


def pulsar_connection_check(
    connection: PulsarConnection, *, attached: bool, lock: bool = False
) -> None:
    """Refuse a second attached connection, and detaching one Fulcrum controls.

    Raises:
        ConsoleError: 409 naming ``is_attached``.
    """
    if attached:
        rows = PulsarConnection.objects.filter(is_attached=True).exclude(pk=connection.pk)
        other = (rows.select_for_update() if lock else rows).first()
        if other is not None:
            raise ConsoleError(
                f"{other.name} is attached: detach it first (the console shows one cluster)",
                status=409,
                field="is_attached",
            )
    elif connection.pk and connection.mode == PulsarConnection.Mode.CONTROL:
        raise ConsoleError(
            f"Fulcrum controls {connection.name}: release control on the Pulsar page before "
            "detaching it",
            status=409,
            field="is_attached",
        )


def _layout_forget(connection: PulsarConnection, actor: Any) -> None:
    """Attaching or detaching ``connection`` replaces the cluster the console showed: its
    brokers, failure domains, tenants, namespaces, bundles and load reports are forgotten
    (decisions and the audit stay); the next observation brings the attached cluster's. Audited."""
    brokers = list(Broker.objects.values_list("name", flat=True))
    Namespace.objects.all().delete()
    Tenant.objects.all().delete()
    Broker.objects.all().delete()
    FailureDomain.objects.all().delete()

    def forget_live() -> None:
        for name in brokers:
            loadstore.entry_delete(name)
        loadstore.ownership_changing()

    transaction.on_commit(forget_live)
    if brokers:
        AuditEvent.objects.create(
            at=timezone.now(),
            actor=actor,
            action=AuditEvent.Action.CONTROL,
            target=connection.name,
            reason=f"{connection.name} {'attached' if connection.is_attached else 'detached'}: the "
            f"{len(brokers)} broker(s), namespaces and bundles shown before are forgotten"
            + ("; its own come with the next observation" if connection.is_attached else ""),
        )
