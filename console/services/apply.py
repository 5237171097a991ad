"""Applying a plan: the one place that writes owners, splits and broker states, the Decision that
stores the plan whole, and one AuditEvent per applied action.

Every bundle write is a compare-and-set on the owner the plan expected (a conditional UPDATE), so
a plan made against a stale owner is never applied twice: an operator's plan is refused whole
with 409, the tick's stale actions are skipped and recorded.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from balancer import bundles as bundle_ops
from balancer.cycle import Action, ActionKind, CyclePlan
from balancer.errors import BalancerError
from balancer.names import SplitAlgorithmName
from console import loadstore, metrics, realtime, selectors
from console.models import (
    AuditEvent,
    Broker,
    Bundle,
    Decision,
    Namespace,
    PulsarConnection,
    PulsarMove,
)
from console.services import executor
from console.services.errors import ConsoleError


def _figures(plan: CyclePlan, *brokers: str | None) -> dict[str, Any]:
    """Usage fractions of the brokers an action touched, and the cluster CV, before the plan."""
    figures: dict[str, Any] = {
        b: round(plan.before.brokers[b], 4) for b in brokers if b and b in plan.before.brokers
    }
    # One broker serving: no CV (its 0 says nothing of balance; ``LoadStats.cv_said``).
    figures["cv"] = round(plan.before.cv, 4) if plan.before.serving >= 2 else None
    return figures


def _said(action: Action) -> str:
    if action.forced and action.veto is not None:
        return f"{action.explanation} — forced past {action.veto} by the operator"
    return action.explanation


def operator_reason(note: str, reason: str) -> str:
    """An audit row's reason with the operator's own ``note`` first (unchanged without one)."""
    return f"Operator's reason: {note}. {reason}" if note else reason


def plan_apply(
    plan: CyclePlan,
    *,
    now: datetime,
    actor: User | None,
    kind: str,
    refuse_stale: bool,
    note: str = "",
    reverses: AuditEvent | None = None,
) -> Decision:
    """Apply ``plan`` in one transaction and record it.

    Args:
        plan: a cycle or operator plan; only its planned actions are applied.
        now: the time of the decision (audit and ``last_unloaded_at``).
        actor: the operator, or None for the balancer itself.
        kind: the Decision kind (shed, operator, place).
        refuse_stale: True (operator plans): an action whose bundle no longer has the owner the
            plan expected refuses the whole plan with 409; False (the tick): that action and the
            placement that follows it are skipped and listed in the decision as stale.
        note: the operator's own reason, recorded first in every audit row of the plan.
        reverses: the unload an operator's undo reverses, linked from the plan's unload.

    Raises:
        ConsoleError: 409 for a stale plan when ``refuse_stale``; 409 for an operator's plan
            while an attached Pulsar cluster is observe-only or its executor is stopped, or while
            its moves are in flight.
    """
    connection = selectors.pulsar_connection_attached()
    if connection is not None:
        if connection.mode != PulsarConnection.Mode.CONTROL:
            return _observe_only(plan, connection, now=now, actor=actor, kind=kind)
        return _apply_through_pulsar(
            plan,
            connection,
            now=now,
            actor=actor,
            kind=kind,
            refuse_stale=refuse_stale,
            note=note,
            reverses=reverses,
        )
    with transaction.atomic():
        planned = plan.planned()
        if any(a.kind in (ActionKind.UNLOAD, ActionKind.PLACE, ActionKind.SPLIT) for a in planned):
            loadstore.ownership_changing()
        rows = selectors.bundle_rows(
            a.target
            for a in planned
            if a.kind in (ActionKind.UNLOAD, ActionKind.PLACE, ActionKind.SPLIT)
        )
        brokers = {b.name: b for b in Broker.objects.all()}
        decision = _decision(plan, now, kind)
        stale: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []
        skipped: set[str] = set()
        pending_moves: dict[str, Action] = {}
        events: list[AuditEvent] = []
        for action in planned:
            row = rows.get(action.target)
            if action.kind == ActionKind.UNLOAD:
                source = brokers.get(action.source or "")
                ok = (
                    row is not None
                    and source is not None
                    and _compare_and_set(row, expected=source, owner=None, unloaded_at=now)
                )
                if not ok:
                    _stale(action, row, refuse_stale, stale, skipped)
                    continue
                pending_moves[action.target] = action
            elif action.kind == ActionKind.PLACE:
                if action.target in skipped:
                    continue
                target = brokers.get(action.destination or "")
                ok = (
                    row is not None
                    and target is not None
                    and _compare_and_set(row, expected=None, owner=target)
                )
                if not ok:
                    _stale(action, row, refuse_stale, stale, skipped)
                    continue
                unload = pending_moves.pop(action.target, None)
                events.append(_move_event(plan, decision, now, actor, unload, action))
            elif action.kind == ActionKind.SPLIT:
                event = None
                if row is not None:
                    event = _split(plan, decision, row, action, now, actor, brokers)
                if event is None:
                    _stale(action, row, refuse_stale, stale, skipped)
                    continue
                events.append(event)
            elif action.kind == ActionKind.BROKER_STATE:
                event = _broker_state(
                    plan, decision, action, brokers, now, actor, refuse_stale, stale, waiting
                )
                if event is not None:
                    events.append(event)
        # Unloads whose bundle found no new owner this plan: audited as unloads alone.
        for unload in pending_moves.values():
            events.append(_move_event(plan, decision, now, actor, unload, None))
        for event in events:
            event.reason = operator_reason(note, event.reason)
            if event.action == AuditEvent.Action.UNLOAD:
                event.reverses = reverses
        AuditEvent.objects.bulk_create(events)
        _moves_count(events, actor)
        extra = {k: v for k, v in (("stale", stale), ("waiting", waiting)) if v}
        if extra:
            decision.details = {**decision.details, **extra}
            decision.save(update_fields=["details"])
        for event in AuditEvent.objects.filter(decision=decision).select_related("actor"):
            realtime.publish(realtime.BUNDLE_MOVED, event.summary())
        _publish(decision)
    return decision


def _moves_count(events: Iterable[AuditEvent], actor: User | None) -> None:
    """``fulcrum_moves_total``: the unloads and splits of a plan, by who made it."""
    moved = sum(e.action in (AuditEvent.Action.UNLOAD, AuditEvent.Action.SPLIT) for e in events)
    if moved:
        metrics.MOVES.labels(actor="operator" if actor else "balancer").inc(moved)


def _decision(plan: CyclePlan, now: datetime, kind: str) -> Decision:
    """The decision that stores ``plan`` whole."""
    return Decision.objects.create(
        at=now,
        kind=kind,
        strategy=plan.strategy,
        reason=plan.reason,
        summary=plan.summary(),
        details=plan.as_dict(),
    )


def _publish(decision: Decision) -> None:
    realtime.publish(
        realtime.DECISION_MADE,
        {
            "id": decision.pk,
            "at": decision.at.isoformat(),
            "kind": decision.kind,
            "strategy": decision.strategy,
            "reason": decision.reason,
            "summary": decision.summary,
            "quiet": decision.is_quiet,
        },
    )


def _broker_state(
    plan: CyclePlan,
    decision: Decision,
    action: Action,
    brokers: dict[str, Broker],
    now: datetime,
    actor: User | None,
    refuse_stale: bool,
    stale: list[dict[str, Any]],
    waiting: list[dict[str, Any]],
) -> AuditEvent | None:
    """A broker's state (Fulcrum's own: active, draining, drained), by compare-and-set on the
    state the plan saw: an operator's activation made after the snapshot is never overwritten
    by a tick's "drained". None (listed as stale) when it changed. A broker is *drained* only
    when it owns no bundle and no move to or from it is queued or in flight on Pulsar (moves
    are applied when Pulsar is seen doing them): until then it stays draining, said in the
    decision's ``waiting`` (not stale — a tick says it again once it is true)."""
    broker = brokers.get(action.target)
    if broker is not None and action.destination == Broker.State.DRAINED:
        left = drain_left(broker)
        if left:
            waiting.append({"broker": broker.name, "reason": left})
            return None
    changed = broker is not None and Broker.objects.filter(
        pk=broker.pk, state=action.source
    ).update(state=action.destination, state_since=now)
    if not changed:
        _stale_state(action, broker, refuse_stale, stale)
        return None
    return AuditEvent(
        at=now,
        actor=actor,
        action=AuditEvent.Action.ACTIVATE
        if action.destination == Broker.State.ACTIVE
        else AuditEvent.Action.DRAIN,
        target=action.target,
        source=action.target,
        reason=f"{action.source} -> {action.destination}: {_said(action)}",
        decision=decision,
        load_before=_figures(plan, action.target),
    )


def drain_left(broker: Broker) -> str:
    """What keeps ``broker`` from being drained, in words ("" when nothing): the bundles it
    still owns, and the moves from or to it queued or in flight on Pulsar."""
    owned = Bundle.objects.filter(owner=broker).count()
    moving = PulsarMove.objects.filter(state__in=PulsarMove.IN_FLIGHT).filter(
        Q(source=broker.name) | Q(destination=broker.name)
    )
    queued = moving.filter(state=PulsarMove.State.QUEUED).count()
    flying = moving.exclude(state=PulsarMove.State.QUEUED).count()
    if not (owned or queued or flying):
        return ""
    return (
        f"{broker.name} stays draining: {owned} bundle(s) still on it, {queued} move(s) "
        f"queued and {flying} in flight on Pulsar"
    )


def _compare_and_set(
    row: Bundle,
    *,
    expected: Broker | None,
    owner: Broker | None,
    unloaded_at: datetime | None = None,
) -> bool:
    """Set the owner only if it still is ``expected`` (None: no owner), in one conditional UPDATE
    on the bundle row alone (no join), so that PostgreSQL re-checks it after a concurrent write."""
    rows = Bundle.objects.filter(pk=row.pk)
    rows = (
        rows.filter(owner_id__isnull=True)
        if expected is None
        else rows.filter(owner_id=expected.pk)
    )
    changes: dict[str, Any] = {"owner": owner}
    if unloaded_at is not None:
        changes["last_unloaded_at"] = unloaded_at
    if not rows.update(**changes):
        return False
    row.owner = owner
    return True


def _stale(
    action: Action,
    row: Bundle | None,
    refuse: bool,
    stale: list[dict[str, Any]],
    skipped: set[str],
) -> None:
    if row is None:
        now_owner = "it no longer exists"
    else:
        row.refresh_from_db(fields=["owner"])
        now_owner = f"its owner is now {row.owner.name if row.owner else 'nobody'}"
    expected = action.source if action.kind != ActionKind.PLACE else None
    message = (
        f"{action.target} changed since the plan was made: expected owner "
        f"{expected or 'nobody'}, {now_owner}"
    )
    if refuse:
        raise ConsoleError(message, status=409, field="bundle", reason="StalePlan")
    stale.append({"kind": str(action.kind), "target": action.target, "reason": message})
    skipped.add(action.target)


def _stale_state(
    action: Action, broker: Broker | None, refuse: bool, stale: list[dict[str, Any]]
) -> None:
    now_state = "it no longer exists" if broker is None else "its state changed"
    if broker is not None:
        broker.refresh_from_db(fields=["state"])
        now_state = f"its state is now {broker.state}"
    message = f"broker {action.target} was {action.source} when the plan was made; {now_state}"
    if refuse:
        raise ConsoleError(message, status=409, field="broker", reason="StalePlan")
    stale.append({"kind": str(action.kind), "target": action.target, "reason": message})


def _move_event(
    plan: CyclePlan,
    decision: Decision,
    now: datetime,
    actor: User | None,
    unload: Action | None,
    place: Action | None,
) -> AuditEvent:
    """One audit row per move: the unload and the placement that followed it."""
    if unload is None:
        assert place is not None
        return AuditEvent(
            at=now,
            actor=actor,
            action=AuditEvent.Action.PLACE,
            target=place.target,
            destination=place.destination or "",
            reason=_said(place),
            decision=decision,
            load_before=_figures(plan, place.destination),
        )
    reason = _said(unload)
    if place is not None:
        reason += f"; placed: {_said(place)}"
    else:
        reason += "; no broker could take it: it stays unowned until a lookup places it"
    return AuditEvent(
        at=now,
        actor=actor,
        action=AuditEvent.Action.UNLOAD,
        target=unload.target,
        source=unload.source or "",
        destination=place.destination or "" if place else "",
        reason=reason,
        decision=decision,
        load_before=_figures(plan, unload.source, place.destination if place else None),
    )


def _split(
    plan: CyclePlan,
    decision: Decision,
    row: Bundle,
    action: Action,
    now: datetime,
    actor: User | None,
    brokers: dict[str, Broker],
) -> AuditEvent | None:
    """Replace the bundle by its children (unowned, in their grace period) if it still has the
    owner the plan saw (a conditional delete) and the namespace's bundles still partition its
    hash space; None, writing nothing, otherwise."""
    namespace: Namespace = row.namespace
    current = list(namespace.bundles.order_by("lower"))
    boundaries = [r.lower for r in current] + [current[-1].upper]
    try:
        bundle_ops.split_boundaries(
            boundaries, bundle_ops.BundleRange(row.lower, row.upper), list(action.boundaries)
        )
    except BalancerError:
        return None
    points = [row.lower, *action.boundaries, row.upper]
    owner = brokers.get(action.source or "")
    rows = Bundle.objects.filter(pk=row.pk)
    rows = rows.filter(owner_id__isnull=True) if owner is None else rows.filter(owner_id=owner.pk)
    if action.source and owner is None:
        return None
    deleted, _ = rows.delete()
    if not deleted:
        return None
    Bundle.objects.bulk_create(
        [
            Bundle(namespace=namespace, lower=a, upper=b, last_unloaded_at=now)
            for a, b in itertools.pairwise(points)
        ]
    )
    return AuditEvent(
        at=now,
        actor=actor,
        action=AuditEvent.Action.SPLIT,
        target=action.target,
        source=action.source or "",
        reason=_said(action),
        decision=decision,
        load_before=_figures(plan, action.source),
    )


def _observe_only(
    plan: CyclePlan,
    connection: PulsarConnection,
    *,
    now: datetime,
    actor: User | None,
    kind: str,
    why: str = "",
) -> Decision:
    """Attached to a Pulsar cluster Fulcrum does not act on (observe-only, or ``why``): the
    balancer's plans are recorded, not applied (Pulsar owns the bundles; the metadata store
    follows its observation); an operator's is refused."""
    why = why or (
        f"observe-only: Fulcrum observes the Pulsar cluster {connection.name} and does not act "
        "on it (an admin takes control on the Pulsar page)"
    )
    if actor is not None:
        raise ConsoleError(f"{why}; nothing was changed", status=409, reason="NotInControl")
    return Decision.objects.create(
        at=now,
        kind=kind,
        strategy=plan.strategy,
        reason=plan.reason,
        summary=f"{why}; planned, not sent: {plan.summary()}"[:2000],
        details=plan.as_dict() | {"notSent": why},
    )


def _apply_through_pulsar(
    plan: CyclePlan,
    connection: PulsarConnection,
    *,
    now: datetime,
    actor: User | None,
    kind: str,
    refuse_stale: bool,
    note: str,
    reverses: AuditEvent | None = None,
) -> Decision:
    """In control of a Pulsar cluster: each move becomes a ``PulsarMove`` the executor sends
    (an unload with the destination its placement planned, a split), audited now and verified
    by observing (``services.executor``); owners change only when Pulsar says so. A placement
    of an unowned bundle is left to Pulsar (its next lookup assigns it); broker states are
    Fulcrum's own and applied here. The tick sends nothing while moves are in flight."""
    planned = plan.planned()
    moving = [a for a in planned if a.kind in (ActionKind.UNLOAD, ActionKind.SPLIT)]
    if moving and connection.is_executor_stopped:
        return _observe_only(
            plan,
            connection,
            now=now,
            actor=actor,
            kind=kind,
            why="the executor is stopped: Fulcrum sends no move to Pulsar",
        )
    in_flight = executor.moves_in_flight(connection)
    if moving and in_flight and actor is None:
        return _observe_only(
            plan,
            connection,
            now=now,
            actor=None,
            kind=kind,
            why=f"waiting for {in_flight} move(s) in flight on Pulsar to be verified",
        )
    with transaction.atomic():
        rows = selectors.bundle_rows(a.target for a in planned if a.kind != ActionKind.BROKER_STATE)
        brokers = {b.name: b for b in Broker.objects.all()}
        decision = _decision(plan, now, kind)
        stale: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []
        skipped: set[str] = set()
        left: list[str] = []
        lost: list[str] = []
        unloads: dict[str, Action] = {}
        moves: list[tuple[PulsarMove, AuditEvent]] = []
        events: list[AuditEvent] = []
        busy = dict(
            connection.moves.filter(state__in=PulsarMove.IN_FLIGHT).values_list("bundle", "pk")
        )
        for action in planned:
            row = rows.get(action.target)
            owner = row.owner.name if row is not None and row.owner else None
            if action.kind == ActionKind.UNLOAD and action.reason == "BrokerLost":
                # Pulsar releases a lost broker's bundles itself (its ownership ends with its
                # session); a broker whose report Fulcrum could not read may be well: no unload.
                lost.append(action.target)
                skipped.add(action.target)
                continue
            if action.kind in (ActionKind.UNLOAD, ActionKind.SPLIT):
                if row is None or owner is None or owner != action.source:
                    _stale(action, row, refuse_stale, stale, skipped)
                    continue
                if action.target in busy:
                    message = (
                        f"{action.target}: move {busy[action.target]} of this bundle is still in "
                        "flight on Pulsar (one at a time)"
                    )
                    if refuse_stale:
                        raise ConsoleError(message, status=409, field="bundle", reason="InFlight")
                    stale.append(
                        {"kind": str(action.kind), "target": action.target, "reason": message}
                    )
                    skipped.add(action.target)
                    continue
                if action.kind == ActionKind.UNLOAD:
                    unloads[action.target] = action
                    continue
                event = AuditEvent(
                    at=now,
                    actor=actor,
                    action=AuditEvent.Action.SPLIT,
                    target=action.target,
                    source=owner,
                    reason=_said(action),
                    decision=decision,
                    load_before=_figures(plan, owner),
                )
                # The cuts Fulcrum planned (with the operator's or the configured algorithm)
                # are sent as they are: the audit says what Pulsar did.
                move = PulsarMove(
                    kind=PulsarMove.Kind.SPLIT,
                    bundle=action.target,
                    source=owner,
                    algorithm=SPECIFIED_POSITIONS,
                    boundaries=list(action.boundaries),
                    created_at=now,
                )
                moves.append((move, event))
            elif action.kind == ActionKind.PLACE:
                unload = unloads.pop(action.target, None)
                if unload is None:
                    if action.target not in skipped:
                        left.append(action.target)
                    continue
                moves.append(_unload_move(plan, decision, now, actor, unload, action))
            elif action.kind == ActionKind.BROKER_STATE:
                changed = _broker_state(
                    plan, decision, action, brokers, now, actor, refuse_stale, stale, waiting
                )
                if changed is not None:
                    events.append(changed)
        for unload in unloads.values():
            moves.append(_unload_move(plan, decision, now, actor, unload, None))
        for move, event in moves:
            if move.kind == PulsarMove.Kind.UNLOAD:
                event.reverses = reverses
            event.reason = operator_reason(
                note,
                f"{event.reason}; sent to Pulsar by the executor ({_sent_as(move)}) and "
                "verified by observing",
            )
        for event in events:
            event.reason = operator_reason(note, event.reason)
        # The cool-down counts from the request: the tick does not pick the bundle again.
        Bundle.objects.filter(
            pk__in=[rows[m.bundle].pk for m, _ in moves if m.kind == PulsarMove.Kind.UNLOAD]
        ).update(last_unloaded_at=now)
        executor.moves_queue(connection, moves)
        _moves_count([event for _, event in moves], actor)
        AuditEvent.objects.bulk_create(events)
        for event in events:
            realtime.publish(realtime.BUNDLE_MOVED, event.summary())
        extra: dict[str, Any] = {}
        if stale:
            extra["stale"] = stale
        if waiting:
            extra["waiting"] = waiting
        if lost:
            extra["lostLeftToPulsar"] = {
                "bundles": lost,
                "reason": "a lost broker's bundles are released by Pulsar itself: no unload sent",
            }
        if left:
            extra["leftToPulsar"] = {
                "bundles": left,
                "reason": "unowned: Pulsar assigns a bundle at the next lookup of its topics",
            }
        if extra:
            decision.details = {**decision.details, **extra}
            decision.save(update_fields=["details"])
        _publish(decision)
    return decision


# Pulsar's split algorithm that takes the cut points as the request's body (PULSAR_ADMIN.md A2).
SPECIFIED_POSITIONS = SplitAlgorithmName.SPECIFIED_POSITIONS_DIVIDE


def _sent_as(move: PulsarMove) -> str:
    """How the executor sends ``move``, in words."""
    if move.kind == PulsarMove.Kind.SPLIT:
        cuts = ", ".join(f"0x{p:08x}" for p in move.boundaries)
        return f"split with {move.algorithm} at {cuts}"
    if move.destination:
        return f"unload with destination {move.destination}"
    return "unload; Pulsar places it"


def _unload_move(  # the unload and the placement that chose its destination, as one move
    plan: CyclePlan,
    decision: Decision,
    now: datetime,
    actor: User | None,
    unload: Action,
    place: Action | None,
) -> tuple[PulsarMove, AuditEvent]:
    event = _move_event(plan, decision, now, actor, unload, place)
    if place is None:
        event.reason = _said(unload) + "; Pulsar places it at the next lookup"
    move = PulsarMove(
        kind=PulsarMove.Kind.UNLOAD,
        bundle=unload.target,
        source=unload.source or "",
        destination=(place.destination or "") if place else "",
        created_at=now,
    )
    return move, event
