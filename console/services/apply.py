"""Applying a plan: the one place that writes owners, splits and broker states, the Decision that
stores the plan whole, and one AuditEvent per applied change.

The walk over the plan is the core's (``balancer.cycle.apply_plan``); this module gives it its
sink: the metadata store (``StoreSink``: every bundle write a compare-and-set on the owner the
plan expected, a conditional UPDATE), or an attached Pulsar cluster in control (``PulsarSink``:
each move queued for the executor). A plan made against a stale owner is never applied twice: an
operator's plan is refused whole with 409, the tick's stale actions are skipped and recorded.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from balancer import bundles as bundle_ops
from balancer.cycle import (
    LEFT,
    Action,
    Applied,
    BrokerStateAction,
    Change,
    CyclePlan,
    Move,
    PlaceAction,
    Refused,
    Sink,
    SplitAction,
    StalePlan,
    UnloadAction,
    Verdict,
    apply_plan,
)
from balancer.errors import BalancerError
from balancer.names import SplitAlgorithmName
from console import loadstore, metrics, realtime, selectors
from console.errors import ConsoleError
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


def _figures(plan: CyclePlan, *brokers: str | None) -> dict[str, Any]:
    """Usage fractions of the brokers an action touched, and the cluster CV, before the plan."""
    figures: dict[str, Any] = {
        b: round(plan.before.brokers[b], 4) for b in brokers if b and b in plan.before.brokers
    }
    measured = plan.before.measured_cv
    figures["cv"] = None if measured is None else round(measured, 4)
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
    leave_moving: bool = False,
) -> Decision:
    """Apply ``plan`` in one transaction and record it: ``balancer.cycle.apply_plan`` with the
    metadata store as its sink (``StoreSink``), or, attached to a Pulsar cluster in control, the
    executor (``PulsarSink``); then, the same for both, the Decision, one audit row per accepted
    change (the sink says how it is carried out), the moves counted and everything published.

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
        leave_moving: (a drain) a bundle whose move is still in flight on Pulsar is left to
            that move and the ticks after it, listed in the decision, instead of refusing the
            whole plan: the tick moves whatever is still on a draining broker.

    Raises:
        ConsoleError: 409 for a stale plan when ``refuse_stale``; 409 for an operator's plan
            while an attached Pulsar cluster is observe-only or its executor is stopped, or while
            its moves are in flight.
    """
    connection = selectors.pulsar_connection_attached()
    if connection is not None:
        if connection.mode != PulsarConnection.Mode.CONTROL:
            return _observe_only(plan, connection, now=now, actor=actor, kind=kind)
        why = _not_sent(plan, connection, actor)
        if why:
            return _observe_only(plan, connection, now=now, actor=actor, kind=kind, why=why)
    with transaction.atomic():
        sink: StoreSink
        if connection is None:
            if any(not isinstance(a, BrokerStateAction) for a in plan.planned()):
                loadstore.ownership_changing()
            sink = StoreSink(plan, now)
        else:
            sink = PulsarSink(plan, now, connection, leave_moving=leave_moving)
        applied = _apply(plan, sink, refuse_stale)
        decision = _decision(plan, now, kind)
        events = [_audit(plan, decision, now, actor, change) for change in applied.changes]
        for change, event in zip(applied.changes, events, strict=True):
            if event.action == AuditEvent.Action.UNLOAD:
                event.reverses = reverses
            sink.said(change, event)
            event.reason = operator_reason(note, event.reason)
        sink.record(decision, events)
        _moves_count(events, actor)
        _details(decision, stale=applied.stale, **sink.details())
        _publish(decision)
    return decision


def _apply(plan: CyclePlan, sink: Sink, refuse_stale: bool) -> Applied:
    """``apply_plan``, its refusal of an operator's plan said as a 409."""
    try:
        return apply_plan(plan, sink, refuse_stale=refuse_stale)
    except StalePlan as exc:
        raise ConsoleError(exc.message, status=409, field=exc.field, reason=exc.code) from None


def _details(decision: Decision, **extra: Any) -> None:
    """Add the non-empty ``extra`` (stale, waiting, ...) to the decision's details."""
    extra = {k: v for k, v in extra.items() if v}
    if extra:
        decision.details = {**decision.details, **extra}
        decision.save(update_fields=["details"])


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


class StoreSink:
    """The metadata store as ``apply_plan``'s sink: every change is a conditional UPDATE (or
    DELETE) on the row the plan read, so a plan made against a stale owner is never applied
    twice, and PostgreSQL re-checks it after a concurrent write."""

    def __init__(self, plan: CyclePlan, now: datetime) -> None:
        self.now = now
        self.rows = selectors.bundle_rows(
            a.target for a in plan.planned() if not isinstance(a, BrokerStateAction)
        )
        self.brokers = {b.name: b for b in Broker.objects.all()}
        self.waiting: list[dict[str, str]] = []

    def said(self, change: Change, event: AuditEvent) -> None:
        """Add to ``event``'s reason how ``change`` is carried out: nothing more here, it is
        done."""

    def record(self, decision: Decision, events: list[AuditEvent]) -> None:
        """Store ``decision``'s audit rows and publish them."""
        AuditEvent.objects.bulk_create(events)
        for event in AuditEvent.objects.filter(decision=decision).select_related("actor"):
            realtime.publish(realtime.BUNDLE_MOVED, event.summary())

    def details(self) -> dict[str, Any]:
        """What the decision's details say of this sink: the brokers still waiting to be
        drained."""
        return {"waiting": self.waiting}

    def leaving(self, broker: str) -> int:
        """Moves off ``broker`` this plan queued so far and has not yet stored: none here (the
        store's moves are done as they are accepted)."""
        return 0

    def unload(self, action: UnloadAction) -> Verdict:
        """Unowned, with ``last_unloaded_at`` now, if ``action.source`` still owns it."""
        row = self.rows.get(action.target)
        source = self.brokers.get(action.source or "")
        if (
            row is not None
            and source is not None
            and _compare_and_set(row, expected=source, owner=None, unloaded_at=self.now)
        ):
            return None
        return _stale(action, row)

    def place(self, action: PlaceAction, unload: UnloadAction | None) -> Verdict:
        """Owned by ``action.destination``, if nobody owns it."""
        row = self.rows.get(action.target)
        target = self.brokers.get(action.destination or "")
        if (
            row is not None
            and target is not None
            and _compare_and_set(row, expected=None, owner=target)
        ):
            return None
        return _stale(action, row)

    def split(self, action: SplitAction) -> Verdict:
        """The bundle replaced by its children (unowned, in their grace period) if it still has
        the owner the plan saw (a conditional delete) and the namespace's bundles still
        partition its hash space."""
        row = self.rows.get(action.target)
        if row is not None and _split(row, action, self.now, self.brokers):
            return None
        return _stale(action, row)

    def broker_state(self, action: BrokerStateAction) -> Verdict:
        """A broker's state (Fulcrum's own: active, draining, drained), by compare-and-set on
        the state the plan saw: an operator's activation made after the snapshot is never
        overwritten by a tick's "drained". A broker is *drained* only when it owns no bundle
        and no move to or from it is queued or in flight on Pulsar (moves are applied when
        Pulsar is seen doing them): until then it stays draining, said in the decision's
        ``waiting`` (not stale: a tick says it again once it is true)."""
        broker = self.brokers.get(action.target)
        if broker is not None and action.state == Broker.State.DRAINED:
            left = drain_left(broker, self.leaving(broker.name))
            if left:
                self.waiting.append({"broker": broker.name, "reason": left})
                return LEFT
        if broker is not None:
            changed = Broker.objects.filter(pk=broker.pk, state=action.previous).update(
                state=action.state, state_since=self.now
            )
            if changed:
                return None
            broker.refresh_from_db(fields=["state"])
        now_state = "it no longer exists" if broker is None else f"its state is now {broker.state}"
        return Refused(
            f"broker {action.target} was {action.previous} when the plan was made; {now_state}",
            field="broker",
        )


class PulsarSink(StoreSink):
    """An attached Pulsar cluster in control as ``apply_plan``'s sink: an unload or a split is
    accepted if the bundle still has the owner the plan saw (the last observation) and no move
    of it is in flight, and becomes a ``PulsarMove`` the executor sends (``services.executor``);
    owners change only when Pulsar is seen doing it. A placement of a bundle nobody owned is
    left to Pulsar (its next lookup assigns it), and so is a lost broker's unload (its
    ownership ends with its session); broker states are Fulcrum's own, set as in the store."""

    def __init__(
        self,
        plan: CyclePlan,
        now: datetime,
        connection: PulsarConnection,
        *,
        leave_moving: bool = False,
    ) -> None:
        super().__init__(plan, now)
        self.busy = dict(
            connection.moves.filter(state__in=PulsarMove.IN_FLIGHT).values_list("bundle", "pk")
        )
        self.connection = connection
        self.leave_moving = leave_moving
        self.moving: list[str] = []  # bundles left to the move in flight (``leave_moving``)
        self.lost: list[str] = []
        self.left: list[str] = []
        self.moves: list[tuple[PulsarMove, AuditEvent]] = []
        self.accepted: Counter[str] = Counter()  # source -> its unloads accepted in this plan

    def said(self, change: Change, event: AuditEvent) -> None:
        """A move or a split becomes the ``PulsarMove`` the executor sends, and its audit row
        says how."""
        if isinstance(change, Move):
            move = _unload_move(change, event)
        elif isinstance(change, SplitAction):
            move = _split_move(change, event.at)
        else:
            return
        self.moves.append((move, event))
        event.reason += (
            f"; sent to Pulsar by the executor ({_sent_as(move)}) and verified by observing"
        )

    def record(self, decision: Decision, events: list[AuditEvent]) -> None:
        """Queue the moves for the executor with their audit rows (the cool-down counts from
        the request: the tick does not pick the bundle again); store and publish the others."""
        unloads = [m.bundle for m, _ in self.moves if m.kind == PulsarMove.Kind.UNLOAD]
        Bundle.objects.filter(pk__in=[self.rows[b].pk for b in unloads]).update(
            last_unloaded_at=self.now
        )
        executor.moves_queue(self.connection, self.moves)
        queued = {id(event) for _, event in self.moves}
        others = [event for event in events if id(event) not in queued]
        AuditEvent.objects.bulk_create(others)
        for event in others:
            realtime.publish(realtime.BUNDLE_MOVED, event.summary())

    def details(self) -> dict[str, Any]:
        """The brokers still waiting to be drained, and what was left to Pulsar."""
        return super().details() | {
            "lostLeftToPulsar": self.lost
            and {
                "bundles": self.lost,
                "reason": "a lost broker's bundles are released by Pulsar itself: no unload sent",
            },
            "leftToPulsar": self.left
            and {
                "bundles": self.left,
                "reason": "unowned: Pulsar assigns a bundle at the next lookup of its topics",
            },
            "leftToMovesInFlight": self.moving
            and {
                "bundles": self.moving,
                "reason": "a move of it is in flight on Pulsar: the ticks move it off a "
                "draining broker once that move is verified",
            },
        }

    def unload(self, action: UnloadAction) -> Verdict:
        """Accepted (the move is made with its placement); left to Pulsar for a lost broker."""
        if action.reason == "BrokerLost":
            # A broker whose report Fulcrum could not read may be well: no unload.
            self.lost.append(action.target)
            return LEFT
        verdict = self._owned(action)
        if verdict is None and action.source:
            self.accepted[action.source] += 1
        return verdict

    def place(self, action: PlaceAction, unload: UnloadAction | None) -> Verdict:
        """Accepted with its unload (one move); a bundle nobody owned is left to Pulsar."""
        if unload is None:
            self.left.append(action.target)
            return LEFT
        return None

    def split(self, action: SplitAction) -> Verdict:
        """Accepted: the cuts Fulcrum planned are sent as they are."""
        return self._owned(action)

    def leaving(self, broker: str) -> int:
        """Moves off ``broker`` this plan accepted: queued with its audit rows (``record``),
        after the walk that asks."""
        return self.accepted[broker]

    def _owned(self, action: UnloadAction | SplitAction) -> Verdict:
        row = self.rows.get(action.target)
        owner = row.owner.name if row is not None and row.owner else None
        if row is None or owner is None or owner != action.source:
            return _stale(action, row)
        if action.target in self.busy:
            if self.leave_moving and isinstance(action, UnloadAction):
                self.moving.append(action.target)
                return LEFT
            return Refused(
                f"{action.target}: move {self.busy[action.target]} of this bundle is still in "
                "flight on Pulsar (one at a time)",
                code="InFlight",
            )
        return None


def _audit(
    plan: CyclePlan, decision: Decision, now: datetime, actor: User | None, change: Change
) -> AuditEvent:
    """The audit row of one accepted change: a move (its unload and the placement that
    followed it), a split, or a broker's state."""
    if isinstance(change, Move):
        return _move_event(plan, decision, now, actor, change.unload, change.place)
    if isinstance(change, SplitAction):
        return AuditEvent(
            at=now,
            actor=actor,
            action=AuditEvent.Action.SPLIT,
            target=change.target,
            source=change.source or "",
            reason=_said(change),
            decision=decision,
            load_before=_figures(plan, change.source),
        )
    return AuditEvent(
        at=now,
        actor=actor,
        action=AuditEvent.Action.ACTIVATE
        if change.state == Broker.State.ACTIVE
        else AuditEvent.Action.DRAIN,
        target=change.target,
        source=change.target,
        reason=f"{change.previous} -> {change.state}: {_said(change)}",
        decision=decision,
        load_before=_figures(plan, change.target),
    )


def drain_left(broker: Broker, queuing: int = 0) -> str:
    """What keeps ``broker`` from being drained, in words ("" when nothing): the bundles it
    still owns, and the moves from or to it queued or in flight on Pulsar, with ``queuing``
    moves off it that the plan being applied queues."""
    owned = Bundle.objects.filter(owner=broker).count()
    moving = PulsarMove.objects.filter(state__in=PulsarMove.IN_FLIGHT).filter(
        Q(source=broker.name) | Q(destination=broker.name)
    )
    queued = moving.filter(state=PulsarMove.State.QUEUED).count() + queuing
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


def _stale(action: UnloadAction | PlaceAction | SplitAction, row: Bundle | None) -> Refused:
    """A bundle action refused: what the plan expected, and who owns the bundle now."""
    if row is None:
        now_owner = "it no longer exists"
    else:
        row.refresh_from_db(fields=["owner"])
        now_owner = f"its owner is now {row.owner.name if row.owner else 'nobody'}"
    expected = action.source if not isinstance(action, PlaceAction) else None
    return Refused(
        f"{action.target} changed since the plan was made: expected owner "
        f"{expected or 'nobody'}, {now_owner}"
    )


def _move_event(
    plan: CyclePlan,
    decision: Decision,
    now: datetime,
    actor: User | None,
    unload: UnloadAction | None,
    place: PlaceAction | None,
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


def _split(row: Bundle, action: SplitAction, now: datetime, brokers: dict[str, Broker]) -> bool:
    """Replace the bundle by its children (unowned, in their grace period) if it still has the
    owner the plan saw (a conditional delete) and the namespace's bundles still partition its
    hash space; False, writing nothing, otherwise."""
    namespace: Namespace = row.namespace
    current = list(namespace.bundles.order_by("lower"))
    boundaries = [r.lower for r in current] + [current[-1].upper]
    try:
        bundle_ops.split_boundaries(
            boundaries, bundle_ops.BundleRange(row.lower, row.upper), list(action.boundaries)
        )
    except BalancerError:
        return False
    points = [row.lower, *action.boundaries, row.upper]
    owner = brokers.get(action.source or "")
    rows = Bundle.objects.filter(pk=row.pk)
    rows = rows.filter(owner_id__isnull=True) if owner is None else rows.filter(owner_id=owner.pk)
    if action.source and owner is None:
        return False
    deleted, _ = rows.delete()
    if not deleted:
        return False
    Bundle.objects.bulk_create(
        [
            Bundle(namespace=namespace, lower=a, upper=b, last_unloaded_at=now)
            for a, b in itertools.pairwise(points)
        ]
    )
    return True


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


def _not_sent(plan: CyclePlan, connection: PulsarConnection, actor: User | None) -> str:
    """In control of a Pulsar cluster, why ``plan``'s moves are not sent ("": they are): the
    executor is stopped, or (the tick's plan) moves are still in flight. In control, each
    accepted move becomes a ``PulsarMove`` the executor sends (``PulsarSink``), audited now and
    verified by observing (``services.executor``)."""
    if not any(isinstance(a, UnloadAction | SplitAction) for a in plan.planned()):
        return ""
    if connection.is_executor_stopped:
        return "the executor is stopped: Fulcrum sends no move to Pulsar"
    in_flight = selectors.moves_in_flight(connection)
    if in_flight and actor is None:
        return f"waiting for {in_flight} move(s) in flight on Pulsar to be verified"
    return ""


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


def _unload_move(move: Move, event: AuditEvent) -> PulsarMove:
    """The unload and the placement that chose its destination, as one ``PulsarMove``."""
    unload, place = move.unload, move.place
    assert unload is not None  # PulsarSink leaves a placement alone to Pulsar
    if place is None:
        event.reason = _said(unload) + "; Pulsar places it at the next lookup"
    return PulsarMove(
        kind=PulsarMove.Kind.UNLOAD,
        bundle=unload.target,
        source=unload.source or "",
        destination=(place.destination or "") if place else "",
        created_at=event.at,
    )


def _split_move(action: SplitAction, now: datetime) -> PulsarMove:
    """A split as the ``PulsarMove`` that sends its cuts as they were planned (with the
    operator's or the configured algorithm): the audit says what Pulsar did."""
    return PulsarMove(
        kind=PulsarMove.Kind.SPLIT,
        bundle=action.target,
        source=action.source or "",
        algorithm=SPECIFIED_POSITIONS,
        boundaries=list(action.boundaries),
        created_at=now,
    )
