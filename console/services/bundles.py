"""Bundle writes: a client's lookup (placement of an unowned bundle), an operator's unload and
split. Each is a plan of the cycle (balancer.cycle), screened by its vetoes and applied by
``plan_apply`` with compare-and-set on the owner the operator saw."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from balancer import bundles as bundle_ops
from balancer.cycle import (
    TOPIC_SPLITS,
    Action,
    ActionKind,
    CyclePlan,
    PlaceAction,
    SplitAction,
    UnloadAction,
    plan_placement,
    plan_split,
    plan_unload,
    split_child_loads,
    unload_destinations,
)
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from balancer.registry import ENTRIES
from console import selectors
from console.access import actor_check
from console.errors import ConsoleError
from console.models import AuditEvent, Broker, Bundle, Decision, Namespace, PulsarMove
from console.selectors import bundle_rows
from console.services.apply import plan_apply


def _bundle(name: str) -> Bundle:
    """The bundle row ``name``.

    Raises:
        ConsoleError: 400 for a malformed name, 404 for an unknown bundle.
    """
    rows = bundle_rows([name])
    if name not in rows:
        raise ConsoleError(f"unknown bundle {name!r}", status=404, field="bundle")
    return rows[name]


def _check_expected(row: Bundle, expected_owner: str | None, planned: str | None = None) -> None:
    """409 when the bundle's owner (now, or as the plan saw it) is not the one the operator saw.

    The plan's compare-and-set then uses that same owner, so a move made by someone else between
    the operator's look and the write is never repeated."""
    current = planned if planned is not None else (row.owner.name if row.owner else None)
    if expected_owner is not None and expected_owner != (current or ""):
        raise ConsoleError(
            f"{row.name} is owned by {current or 'nobody'}, not {expected_owner}: "
            "it changed since you looked",
            status=409,
            field="expected_owner",
            reason="StalePlan",
        )


def _refuse_vetoed(plan: CyclePlan, field: str = "bundle") -> None:
    """An operator's plan whose action is vetoed answers 409 with the veto and its sentence."""
    vetoed: list[Action] = plan.vetoed
    if vetoed:
        first = vetoed[0]
        raise ConsoleError(
            f"{first.veto}: {first.explanation}",
            status=409,
            field="destination" if first.kind == ActionKind.PLACE else field,
            veto=str(first.veto),
            plan=plan.as_dict(),
        )


def bundle_lookup(topic: str, *, place: bool, now: datetime | None = None) -> dict[str, Any]:
    """Topic -> bundle -> owner; with ``place`` (a broker's or an operator's lookup) an unowned
    bundle is placed first with the configured placement, else its owner is None.

    Raises:
        ConsoleError: 400 for a malformed topic name, 404 for an unknown namespace, 409 when no
            broker can take the bundle.
    """
    now = now or timezone.now()
    try:
        namespace_name = bundle_ops.namespace_of_topic(topic)
    except BalancerError as exc:
        raise ConsoleError(exc.message, field="topic") from None
    try:
        namespace = Namespace.objects.get(name=namespace_name)
    except Namespace.DoesNotExist:
        raise ConsoleError(
            f"unknown namespace {namespace_name!r}", status=404, field="topic"
        ) from None
    rows = list(namespace.bundles.order_by("lower").select_related("owner"))
    boundaries = [r.lower for r in rows] + [rows[-1].upper]
    point = topic_hash(topic)
    row = rows[bundle_ops.bundle_index_for(boundaries, point)]
    if row.owner is None and place:
        config = selectors.balancer_config_get()
        snapshot = selectors.cluster_snapshot_get(now=now)
        plan = plan_placement(
            snapshot, selectors.cycle_config_get(config), config.state, [row.name]
        )
        if not plan.planned(PlaceAction):
            raise ConsoleError(f"no broker can take bundle {row.name}", status=409, field="topic")
        with transaction.atomic():
            # A concurrent lookup may have placed it first: its placement stands.
            plan_apply(plan, now=now, actor=None, kind=Decision.Kind.PLACE, refuse_stale=False)
            if plan.state != config.state:
                config.state = plan.state
                config.save(update_fields=["state"])
        row.refresh_from_db()
    return {
        "topic": topic,
        "hash": format_hash(point),
        "bundle": row.name,
        "owner": row.owner.name if row.owner else None,
    }


def _preview(plan: CyclePlan, forced: CyclePlan | None, **extra: Any) -> dict[str, Any]:
    """What an operator's action would do, applied to nothing: the plan (actions, vetoes,
    predicted CV), whether ``force`` would override its vetoes, which (``overrides``: every
    veto the forced plan passes — all of them shown in the plan), and ``extra``."""
    overridable = bool(plan.vetoed) and forced is not None and not forced.vetoed
    return {
        "preview": True,
        "plan": plan.as_dict(),
        "summary": plan.summary(),
        "vetoed": bool(plan.vetoed),
        "overridable": overridable,
        "overrides": _overridden(forced) if overridable and forced is not None else [],
        **extra,
    }


def _overridden(plan: CyclePlan) -> list[str]:
    """The vetoes ``plan`` passes by force, in the order of its actions, once each."""
    return list(dict.fromkeys(str(a.veto) for a in plan.actions if a.forced and a.veto))


def _overrides_check(plan: CyclePlan, overrides: Sequence[str] | None) -> None:
    """An override takes what the preview showed and nothing else: with ``overrides`` (the
    preview's list), a forced plan that would pass another veto is refused.

    Raises:
        ConsoleError: 409 naming ``overrides`` and each veto the preview did not show.
    """
    if overrides is None:
        return
    more = [v for v in _overridden(plan) if v not in set(overrides)]
    if more:
        raise ConsoleError(
            f"the override would also pass {', '.join(more)}, which the preview did not show "
            f"(it showed {', '.join(overrides) or 'none'}): preview again",
            status=409,
            field="overrides",
        )


def bundle_unload(
    bundle_name: str,
    *,
    actor: User | None,
    expected_owner: str | None = None,
    destination: str | None = None,
    force: bool = False,
    overrides: Sequence[str] | None = None,
    note: str = "",
    preview: bool = False,
    now: datetime | None = None,
    reverses: AuditEvent | None = None,
) -> dict[str, Any]:
    """An operator unloads a bundle: it leaves its owner and is placed at once, on
    ``destination`` or where the configured placement chooses (never back on its owner).
    ``note`` is the operator's reason, audited. With ``preview`` nothing is written: the answer
    is the plan with its vetoes and every broker as a destination (eligible, or why not).

    Raises:
        ConsoleError: 404 unknown bundle; 409 when the bundle is no longer owned by
            ``expected_owner``, has no owner, a veto refuses the move (cool-down, grace period,
            rate limit, blacklist, a destination the placement filters refuse — ``force``
            overrides these; given ``overrides``, the preview's list, only those), or another
            operator moved it first.
    """
    actor_check(actor)
    now = now or timezone.now()
    row = _bundle(bundle_name)
    _check_expected(row, expected_owner)
    config = selectors.balancer_config_get()
    cycle = selectors.cycle_config_get(config)
    snapshot = selectors.cluster_snapshot_get(now=now)

    def plan_with(forced: bool) -> CyclePlan:
        return plan_unload(
            snapshot,
            cycle,
            config.state,
            row.name,
            destination=destination or None,
            force=forced,
            now=now.timestamp(),
        )

    plan = plan_with(force)
    if preview:
        load = snapshot.bundles.get(row.name)
        return _preview(
            plan,
            plan_with(True) if plan.vetoed else None,
            bundle=row.name,
            owner=row.owner.name if row.owner else None,
            destinations=unload_destinations(snapshot, cycle, row.name, now=now.timestamp()),
            throughput=load.short_term.throughput if load else 0.0,
            splits=_split_choices(snapshot, row.name),
        )
    _refuse_vetoed(plan)
    if force:
        _overrides_check(plan, overrides)
    unload = plan.planned(UnloadAction)[0]
    _check_expected(row, expected_owner, unload.source or "")
    decision = plan_apply(
        plan,
        now=now,
        actor=actor,
        kind=Decision.Kind.OPERATOR,
        refuse_stale=True,
        note=note,
        reverses=reverses,
    )
    place = next(iter(plan.planned(PlaceAction)), None)
    event = decision.auditevent_set.order_by("id").first()
    return {
        "bundle": row.name,
        "source": unload.source,
        "destination": place.destination if place else None,
        "forced": unload.forced or bool(place and place.forced),
        "explanation": unload.explanation,
        "audit": event.pk if event else None,
        "decision": decision.pk,
        "inFlight": event is not None and PulsarMove.objects.filter(audit=event).exists(),
    }


def _split_choices(snapshot: Any, bundle: str) -> list[dict[str, Any]]:
    """Each split algorithm the console offers, for ``bundle``: ``{"name", "allowed", "why"}``
    — the ones that cut by topics need its owner's per-topic stats (``TOPIC_SPLITS``), and say
    so when the owner's report carries none for it."""
    has_topics = bundle in snapshot.bundle_topics
    out = []
    for entry in ENTRIES:
        if entry.kind != "split" or not entry.in_console:
            continue
        needs = entry.name in TOPIC_SPLITS
        out.append(
            {
                "name": entry.name,
                "allowed": has_topics or not needs,
                "why": None
                if has_topics or not needs
                else "its owner reports no per-topic stats for it",
            }
        )
    return out


def bundle_split(
    bundle_name: str,
    *,
    actor: User | None,
    algorithm: str | None = None,
    positions: list[int] | None = None,
    expected_owner: str | None = None,
    force: bool = False,
    note: str = "",
    preview: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Cut a bundle at the algorithm's boundaries; the children are unowned (Pulsar's
    ``loadBalancerAutoUnloadSplitBundlesEnabled``) and placed by the next lookup or tick. Audited,
    with ``note`` (the operator's reason). With ``preview`` nothing is written: the answer is the
    plan and each child's share of the load (``split_child_loads``).

    Raises:
        ConsoleError: 404 unknown bundle; 400 for an unknown algorithm, missing or bad positions;
            409 when the bundle changed owner since ``expected_owner``, the algorithm needs
            per-topic data, finds no boundary, or the bundle is blacklisted (unless ``force``).
    """
    actor_check(actor)
    now = now or timezone.now()
    row = _bundle(bundle_name)
    _check_expected(row, expected_owner)
    config = selectors.balancer_config_get()
    cycle = selectors.cycle_config_get(config)
    snapshot = selectors.cluster_snapshot_get(now=now)

    def plan_with(forced: bool) -> CyclePlan:
        try:
            return plan_split(snapshot, cycle, row.name, algorithm, positions, force=forced)
        except BalancerError as exc:
            raise ConsoleError(exc.message, field=exc.field or "positions") from None

    plan = plan_with(force)
    split = plan.actions[0]
    assert isinstance(split, SplitAction)  # plan_split plans exactly one split
    if preview:
        return _preview(
            plan,
            plan_with(True) if plan.vetoed else None,
            bundle=row.name,
            owner=row.owner.name if row.owner else None,
            algorithm=algorithm or cycle.strategies.split_algorithm,
            children=split_child_loads(snapshot, row.name, split.boundaries)
            if split.boundaries
            else [],
        )
    _refuse_vetoed(plan)
    _check_expected(row, expected_owner, split.source or "")
    plan_apply(
        plan, now=now, actor=actor, kind=Decision.Kind.OPERATOR, refuse_stale=True, note=note
    )
    return {
        "bundle": row.name,
        "boundaries": [format_hash(c) for c in split.boundaries],
        "children": list(split.children),
        "explanation": split.explanation,
    }


def bundle_unload_undo(
    audit_id: int,
    *,
    actor: User | None,
    note: str = "",
    force: bool = False,
    overrides: Sequence[str] | None = None,
    preview: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Undo a completed unload: the bundle goes back to the broker it left, as a new operator's
    unload (``bundle_unload``: the same vetoes — cool-down, grace period, budget, filters —,
    ``force`` with the preview's ``overrides``, and the preview) whose audit row links to the
    one it reverses. The answer is ``bundle_unload``'s with ``reverses`` (the audit row) and
    ``undoes`` (its ``source``, ``destination`` and ``at``, ISO 8601 UTC).

    Raises:
        ConsoleError: 404 an unknown audit row; 400 a row that is not an unload to a broker;
            409 the move is older than ``FULCRUM_UNDO_WINDOW_S``, was undone already, the
            bundle no longer exists, is still moving on Pulsar (``InFlight``) or has moved on
            since, the broker it left is gone, draining or drained, or what ``bundle_unload``
            refuses.
    """
    actor_check(actor)
    now = now or timezone.now()
    try:
        event = AuditEvent.objects.get(pk=audit_id)
    except AuditEvent.DoesNotExist:
        raise ConsoleError(f"unknown audit row {audit_id}", status=404, field="audit") from None
    if event.action != AuditEvent.Action.UNLOAD or not event.source or not event.destination:
        raise ConsoleError(
            f"audit row {audit_id} is a {event.action}, not an unload that moved a bundle from "
            "one broker to another: nothing to undo",
            field="audit",
        )
    window = settings.FULCRUM_UNDO_WINDOW_S
    age = (now - event.at).total_seconds()
    if age > window:
        raise ConsoleError(
            f"the move is {_duration(age)} old, past the undo window of {_duration(window)} "
            "(FULCRUM_UNDO_WINDOW_S): unload the bundle by hand if it must go back",
            status=409,
            field="audit",
        )
    undone = event.reversed_by.order_by("id").first()
    if undone is not None:
        raise ConsoleError(
            f"the move was undone already (audit row {undone.pk})", status=409, field="audit"
        )
    row = _bundle(event.target)  # 404 when it no longer exists (split or merged since)
    moving = (
        PulsarMove.objects.filter(bundle=row.name, state__in=PulsarMove.IN_FLIGHT)
        .order_by("-id")
        .first()
    )
    if moving is not None:
        when = (
            "it can be undone once Pulsar is seen doing it"
            if moving.audit_id == event.pk
            else "a later move than this one: only its latest move can be undone, once verified"
        )
        raise ConsoleError(
            f"{row.name} is still moving on Pulsar ({moving.state}: "
            f"{moving.source} -> {moving.destination or 'placed by Pulsar'}): {when}",
            status=409,
            field="audit",
            reason="InFlight",
        )
    owner = row.owner.name if row.owner else None
    if owner != event.destination:
        raise ConsoleError(
            f"{row.name} has moved on since: it is on {owner or 'no broker'}, not "
            f"{event.destination}; only its latest move can be undone",
            status=409,
            field="audit",
        )
    source = Broker.objects.filter(name=event.source).first()
    if source is None:
        raise ConsoleError(
            f"the broker it left, {event.source}, is gone", status=409, field="audit"
        )
    if source.state != Broker.State.ACTIVE:
        raise ConsoleError(
            f"the broker it left, {event.source}, is {source.state}: it takes no bundle",
            status=409,
            field="audit",
        )
    said = f"undo of audit row {event.pk} (its move {event.source} -> {event.destination})"
    return bundle_unload(
        row.name,
        actor=actor,
        expected_owner=owner,
        destination=event.source,
        force=force,
        overrides=overrides,
        note=f"{said}: {note}" if note else said,
        preview=preview,
        now=now,
        reverses=event,
    ) | {
        "reverses": event.pk,
        "undoes": {
            "source": event.source,
            "destination": event.destination,
            "at": event.at.isoformat(),
        },
    }


def bundle_last_move_undo(
    name: str,
    *,
    actor: User | None,
    note: str = "",
    force: bool = False,
    overrides: Sequence[str] | None = None,
    preview: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """``bundle_unload_undo`` of the bundle's latest audited unload (the bundle map's panel
    knows bundles, not audit rows); the answer names the row it undoes (``reverses``).

    With ``preview`` and no unload of it within the window, the answer is ``{"preview",
    "undoable": False, "bundle", "why"}`` (the bundle map asks of every bundle it shows).

    Raises:
        ConsoleError: 404 an unknown bundle; 409 no unload of it within the undo window (not a
            preview), or its last one placed it nowhere; what ``bundle_unload_undo`` raises
            for that row.
    """
    row = _bundle(name)
    now = now or timezone.now()
    window = settings.FULCRUM_UNDO_WINDOW_S
    last = (  # older ones cannot be undone: the window bounds the scan (the ``at`` index)
        AuditEvent.objects.filter(
            action=AuditEvent.Action.UNLOAD,
            target=row.name,
            at__gte=now - timedelta(seconds=window),
        )
        .order_by("-at", "-id")
        .first()
    )
    if last is None:
        why = (
            f"{row.name} has no unload within the undo window ({_duration(window)}): nothing "
            "to undo"
        )
        if preview:  # a question with a plain answer, not a failed request (the map asks)
            return {"preview": True, "undoable": False, "bundle": row.name, "why": why}
        raise ConsoleError(why, status=409, field="bundle")
    if not last.source or not last.destination:
        raise ConsoleError(
            f"its last unload (audit row {last.pk}) left it to the next lookup, not to a broker: "
            "there is no move to undo",
            status=409,
            field="bundle",
        )
    return bundle_unload_undo(
        last.pk,
        actor=actor,
        note=note,
        force=force,
        overrides=overrides,
        preview=preview,
        now=now,
    )


def _duration(seconds: float) -> str:
    """``5400`` -> ``1 h 30 min``; under an hour in min, under a minute in s."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"
