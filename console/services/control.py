"""Taking and releasing control of an attached Pulsar cluster (PULSAR_ADMIN.md §3.7, the
rolling-upgrade guide's pattern): Fulcrum never fights Pulsar's own shedder.

Taking control turns Pulsar's shedding off through its dynamic configuration
(``loadBalancerSheddingEnabled=false``; ``loadBalancerAutoBundleSplitEnabled=false`` too when
Fulcrum splits) after recording each key's effective value and override; releasing control
puts the effective values back and removes the overrides Fulcrum introduced. Both are an
admin's action, previewed, confirmed and audited.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from console import metrics, selectors
from console.access import actor_check
from console.errors import ConsoleError
from console.models import AuditEvent, BalancerConfig, PulsarConnection
from console.pulsar.admin import PulsarAdmin, PulsarAdminError
from console.pulsar.release import changes_of, restore, restored_said
from console.services import executor
from console.services.connections import admin_for, connection_get, connection_mode_set

SHEDDING: Final = "loadBalancerSheddingEnabled"
AUTO_SPLIT: Final = "loadBalancerAutoBundleSplitEnabled"


def _keys() -> list[str]:
    """The keys taking control turns off: shedding, and auto-split when Fulcrum splits."""
    config = BalancerConfig.objects.first()
    return [SHEDDING, AUTO_SPLIT] if config and config.is_auto_split_enabled else [SHEDDING]


def _unreachable(exc: PulsarAdminError, doing: str) -> ConsoleError:
    return ConsoleError(
        f"Pulsar refused {doing}: {exc.method} {exc.url} answered "
        f"{exc.status or 'nothing'} {exc.reason}",
        status=502,
        field="connection",
    )


def control_preview(connection_id: int, action: str = "") -> dict[str, Any]:
    """What taking (in observe-only), releasing or re-asserting (in control) would change, read
    live; ``action`` "reassert" asks for the last (default: take or release by the mode).

    Returns:
        ``{"connection", "mode", "action": "take"|"release"|"reassert", "changes": [{"key",
        "effective", "override" (None: none), "to", "how"}], "inFlight": moves, "conflict"}``.

    Raises:
        ConsoleError: 404 unknown connection; 409 a key this cluster cannot change at runtime,
            or a re-assert while not in control; 502 Pulsar could not be read.
    """
    connection = connection_get(connection_id)
    with admin_for(connection) as admin:
        if action == "reassert":
            if connection.mode != PulsarConnection.Mode.CONTROL:
                raise ConsoleError(f"Fulcrum does not control {connection.name}", status=409)
            keys = set(connection.previous_config)
            changes = [c for c in _take_changes(admin) if c["key"] in keys]
        elif connection.mode == PulsarConnection.Mode.CONTROL:
            changes = _release_changes(connection, admin)
            action = "release"
        else:
            changes = _take_changes(admin)
            action = "take"
    return {
        "connection": connection.name,
        "mode": connection.mode,
        "action": action,
        "changes": changes,
        "inFlight": selectors.moves_in_flight(connection),
        "conflict": connection.conflict,
    }


def _take_changes(admin: PulsarAdmin) -> list[dict[str, Any]]:
    try:
        dynamic = set(admin.dynamic_config_names())
        overrides = admin.dynamic_overrides()
        effective = admin.runtime_config()
    except PulsarAdminError as exc:
        raise _unreachable(exc, "reading its configuration") from exc
    changes = []
    for key in _keys():
        if key not in dynamic:
            raise ConsoleError(
                f"{key} cannot be changed at runtime on this cluster (not in its dynamic "
                "configuration): Fulcrum cannot take control without fighting Pulsar's shedder",
                status=409,
                field="connection",
            )
        changes.append(
            {
                "key": key,
                "effective": effective.get(key, ""),
                "override": overrides.get(key),
                "to": "false",
                "how": "set (dynamic configuration, cluster-wide)",
            }
        )
    return changes


def _release_changes(connection: PulsarConnection, admin: PulsarAdmin) -> list[dict[str, Any]]:
    try:
        effective = admin.runtime_config()
        overrides = admin.dynamic_overrides()
    except PulsarAdminError as exc:
        raise _unreachable(exc, "reading its configuration") from exc
    changes = []
    for key, before in connection.previous_config.items():
        how = f"set back (its override {before.get('override')} kept)"
        if before.get("override") is None:
            how = "set back, then the override Fulcrum introduced removed"
        changes.append(
            {
                "key": key,
                "effective": effective.get(key, ""),
                "override": overrides.get(key),
                "to": before.get("effective") or "true",
                "how": how,
            }
        )
    return changes


def control_take(
    connection_id: int, *, actor: User | None, confirm: bool, now: datetime
) -> dict[str, Any]:
    """Take control: turn Pulsar's shedding (and auto-split when Fulcrum splits) off, keeping
    the previous values; the executor then sends Fulcrum's moves. A key that fails to change
    rolls back those changed before it.

    Returns:
        ``control_preview``'s changes as applied.

    Raises:
        ConsoleError: 403 not an admin; 400 without ``confirm``; 409 already in control, or a
            key that is not dynamic; 502 Pulsar refused (nothing is left changed).
    """
    actor_check(actor, admin=True)
    if not confirm:
        raise ConsoleError("confirm must be true to take control", field="confirm")
    # The connection's row stays locked while Pulsar is changed: a second take (another admin,
    # the demo's take at start) waits, then finds Fulcrum in control.
    with transaction.atomic():
        connection = connection_get(connection_id, lock=True)
        if not connection.is_attached:
            raise ConsoleError(
                f"{connection.name} is not attached: Fulcrum neither observes nor balances it",
                status=409,
                field="connection",
            )
        if connection.mode == PulsarConnection.Mode.CONTROL:
            raise ConsoleError(f"Fulcrum already controls {connection.name}", status=409)
        with admin_for(connection) as admin:
            changes = _take_changes(admin)
            tried: list[dict[str, Any]] = []
            refusal = ""
            try:
                for change in changes:
                    tried.append(change)  # a call that timed out may have been applied
                    admin.set_dynamic_config(change["key"], change["to"])
                check = admin.dynamic_overrides()
                wrong = [c["key"] for c in changes if check.get(c["key"]) != "false"]
                if wrong:
                    refusal = f"Pulsar did not keep {', '.join(wrong)}=false"
            except PulsarAdminError as exc:
                refusal = f"{exc.method} {exc.url} answered {exc.status or 'nothing'} {exc.reason}"
            if refusal:
                failed = restore(admin, tried)
                if not failed:
                    raise ConsoleError(
                        f"{refusal}: control not taken; the {len(tried)} change(s) rolled back",
                        status=502,
                        field="connection",
                    )
                # Pulsar is still changed: keep what to restore, so that a release can.
                connection_mode_set(
                    connection,
                    PulsarConnection.Mode.CONTROL,
                    _previous(tried),
                    actor,
                    now,
                    f"taking control failed ({refusal}) and Pulsar refused to roll back "
                    f"{'; '.join(failed)}: held in control with the executor stopped, release "
                    "control to restore",
                    stopped=True,
                )
                raise ConsoleError(
                    f"{refusal}; Pulsar still changed ({'; '.join(failed)}): release control to "
                    "restore it",
                    status=502,
                    field="connection",
                )
        connection = connection_mode_set(
            connection,
            PulsarConnection.Mode.CONTROL,
            _previous(changes),
            actor,
            now,
            "control taken: Fulcrum's executor sends the balancer's moves; "
            + "; ".join(_said(c) for c in changes),
        )
    return {"connection": connection.name, "mode": connection.mode, "changes": changes}


def _previous(changes: list[dict[str, Any]]) -> dict[str, Any]:
    """What releasing control restores: key -> its effective value and override before."""
    return {c["key"]: {"effective": c["effective"], "override": c["override"]} for c in changes}


def _said(change: dict[str, Any]) -> str:
    override = change["override"]
    was = f"override {override}" if override is not None else "no override"
    return f"{change['key']} {change['effective'] or '?'} -> {change['to']} (was {was})"


def control_release(
    connection_id: int,
    *,
    actor: User | None,
    confirm: bool,
    now: datetime,
    by: str = "",
    why: str = "",
) -> dict[str, Any]:
    """Release control: queued moves are cancelled (those sent are still verified), Pulsar's
    configuration is put back as it was, the connection is observe-only again. ``by`` and
    ``why``: control handed back without an admin's click (the dead-man, ``manage.py
    pulsar_release``), recorded in ``handed_back`` and the audit.

    Raises:
        ConsoleError: 403 not an admin; 400 without ``confirm``; 409 not in control; 502 a key
            Pulsar refused to restore (the connection stays in control, the executor stopped,
            so that it can be tried again).
    """
    actor_check(actor, admin=True)
    if not confirm:
        raise ConsoleError("confirm must be true to release control", field="confirm")
    who = actor.get_username() if actor else (by or "the balancer")
    executor.executor_set(
        connection_id,
        stopped=True,
        actor=actor,
        now=now,
        why=f"control was released by {who}",
    )
    with transaction.atomic():
        connection = connection_get(connection_id, lock=True)
        if connection.mode != PulsarConnection.Mode.CONTROL:
            raise ConsoleError(f"Fulcrum does not control {connection.name}", status=409)
        changes = changes_of(connection.previous_config)
        with admin_for(connection) as admin:
            failed = restore(admin, changes)
        if failed:
            raise ConsoleError(
                "Pulsar refused to restore " + "; ".join(failed) + ": still in control, executor "
                "stopped; try again",
                status=502,
                field="connection",
            )
        said = f"Pulsar's configuration restored: {restored_said(changes)}"
        reason = f"control released: observe-only again, {said}"
        if by:
            reason = f"control handed back to Pulsar by {by}: {why}; observe-only again, {said}"
        connection = connection_mode_set(
            connection, PulsarConnection.Mode.OBSERVE, {}, actor, now, reason
        )
        connection.conflict = {}
        if by:
            connection.handed_back = {"at": now.isoformat(), "by": by, "why": why}
        connection.save(update_fields=["conflict", "handed_back"])
    return {"connection": connection.name, "mode": connection.mode, "changes": changes}


def control_conflict_check(
    connection: PulsarConnection, lb_config: dict[str, str], admin: PulsarAdmin, now: datetime
) -> str:
    """On every observation while Fulcrum holds control: is a key it turned off (Pulsar's
    shedding, its auto-split when Fulcrum splits) back on — the cluster restarted with its
    broker.conf, or another admin? Then the executor stops at once (never two balancers),
    audited, recorded on the connection (``conflict``, shown on every page) and in
    ``/metrics``; with ``FULCRUM_PULSAR_REASSERT`` the keys are set off again and the executor
    runs again (audited), else it stays stopped until an admin re-asserts control or releases
    it. ``lb_config``: the effective values just observed (E17, strings).

    Returns:
        What it found or did, in words ("" when nothing is wrong).
    """
    connection.refresh_from_db(fields=["mode", "previous_config", "conflict"])
    if connection.mode != PulsarConnection.Mode.CONTROL:
        metrics.PULSAR_CONFLICT.set(0)
        return ""
    back_on = sorted(k for k in connection.previous_config if lb_config.get(k) == "true")
    if not back_on:
        metrics.PULSAR_CONFLICT.set(1 if connection.conflict else 0)
        return ""
    metrics.PULSAR_CONFLICT.set(1)
    said = ", ".join(f"{k}=true" for k in back_on)
    if not connection.conflict:
        why = f"Pulsar's own balancing is on again ({said}) while Fulcrum holds control"
        executor.executor_set(
            connection.pk, stopped=True, actor=None, now=now, why=f"{why}: cancelled"
        )
        with transaction.atomic():
            row = connection_get(connection.pk, lock=True)
            row.conflict = {"at": now.isoformat(), "keys": back_on, "why": why}
            row.save(update_fields=["conflict"])
            AuditEvent.objects.create(
                at=now,
                action=AuditEvent.Action.CONTROL,
                target=row.name,
                reason=f"{why}: two balancers; Fulcrum's executor stopped until control is "
                "re-asserted or released",
            )
        connection.conflict = row.conflict
    if not settings.FULCRUM_PULSAR_REASSERT:
        return f"{said}: executor stopped until an admin decides"
    try:
        control_reassert(connection.pk, actor=None, confirm=True, now=now, admin=admin)
    except ConsoleError as exc:
        return f"{said}: re-asserting failed ({exc.message}); executor stopped"
    return f"{said}: re-asserted (FULCRUM_PULSAR_REASSERT)"


def control_reassert(
    connection_id: int,
    *,
    actor: User | None,
    confirm: bool,
    now: datetime,
    admin: PulsarAdmin | None = None,
) -> dict[str, Any]:
    """Fulcrum holds control and Pulsar's own balancing was found back on: set the keys off
    again (checked), clear the conflict and start the executor again. Audited.

    Raises:
        ConsoleError: 403 not an admin; 400 without ``confirm``; 409 not in control; 502 Pulsar
            refused (the executor stays stopped).
    """
    actor_check(actor, admin=True)
    if not confirm:
        raise ConsoleError("confirm must be true to re-assert control", field="confirm")
    with transaction.atomic():
        connection = connection_get(connection_id, lock=True)
        if connection.mode != PulsarConnection.Mode.CONTROL:
            raise ConsoleError(f"Fulcrum does not control {connection.name}", status=409)
        keys = list(connection.previous_config)
        client = admin or admin_for(connection)
        try:
            for key in keys:
                client.set_dynamic_config(key, "false")
            check = client.dynamic_overrides()
        except PulsarAdminError as exc:
            raise _unreachable(exc, "to turn its own balancing off again") from exc
        finally:
            if admin is None:
                client.close()
        wrong = [k for k in keys if check.get(k) != "false"]
        if wrong:
            raise ConsoleError(
                f"Pulsar did not keep {', '.join(wrong)}=false: the executor stays stopped",
                status=502,
                field="connection",
            )
        who = actor.get_username() if actor else "FULCRUM_PULSAR_REASSERT"
        connection.conflict = {}
        connection.is_executor_stopped = False
        connection.save(update_fields=["conflict", "is_executor_stopped"])
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.CONTROL,
            target=connection.name,
            reason=f"control re-asserted by {who}: "
            + ", ".join(f"{k} -> false" for k in keys)
            + "; executor started again",
        )
    metrics.PULSAR_CONFLICT.set(0)
    return {"connection": connection.name, "mode": connection.mode, "reasserted": keys}
