"""The executor: the moves Fulcrum sends to an attached Pulsar cluster in control, and what
observing the cluster afterwards found (PULSAR_ADMIN.md §4).

A plan applied while in control (``services.apply``) queues one ``PulsarMove`` per move: an
unload with its planned destination (Pulsar ≥ 3.0: ``destinationBroker``; older: a plain
unload, said so), or a split with the configured algorithm. ``moves_send`` sends at most
``max_moves_in_flight`` at a time, after checking on the last observation that the bundle still
has the owner the plan saw (never an unload or a split of an unowned bundle — a split would
assign it — nor a transfer to the current owner). A 204 does not say a bundle moved: after the
next observation ``moves_verify`` records what happened — moved as planned, moved elsewhere (the
modular load manager's destination is a one-shot hint a concurrent lookup can lose), still
unowned, or failed with Pulsar's reason — in the audit.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F

from balancer import bundles as bundle_ops
from balancer.cycle import PlaceAction, plan_unload, reassign
from balancer.decisions import Reason
from balancer.errors import BalancerError
from console import metrics, realtime, selectors
from console.access import actor_check
from console.celery import app
from console.errors import ConsoleError
from console.models import AuditEvent, Broker, PulsarConnection, PulsarMove
from console.pulsar.admin import PulsarAdmin, PulsarAdminError
from console.pulsar.observe import Observation, affinity_by_range, supports_destination
from console.selectors.pulsar import UNOWNED_AFTER_S
from console.services.connections import connection_get

log = logging.getLogger(__name__)

# A bundle still on its source this long after Pulsar answered 204 did not move (Pulsar waits up
# to namespaceBundleUnloadingTimeoutMs, 60 s by default, before it answers).
STILL_ON_SOURCE_S: Final = 60.0
IN_FLIGHT: Final = PulsarMove.IN_FLIGHT
# A queued move not sent within this long is dropped: the plan it came from is stale.
QUEUED_TTL_S: Final = 120.0
# A split Pulsar accepted and made nothing of (SpecifiedPositionsBundleSplitAlgorithm returns no
# boundary when the bundle has at most one loaded topic, and drops positions outside it): the
# modular load manager answers 204 and splits nothing; the extensible one answers 500.
NO_SPLIT: Final = (
    "Pulsar found no valid boundary and split nothing (the bundle had at most one loaded "
    "topic, or the positions were outside it)"
)
# ExtensibleLoadManagerImpl.splitNamespaceBundleAsync's IllegalStateException, a 500.
NO_BOUNDARY: Final = re.compile(r"not found under namespace", re.IGNORECASE)
# A send that certainly never reached Pulsar (no connection, no token) is tried again at the
# next pass, once its owner is checked again, at most this many sends in all; bounded so that a
# broker that cannot be reached costs at most three passes, not QUEUED_TTL_S of retries.
MAX_SEND_ATTEMPTS: Final = 3


def moves_queue(
    connection: PulsarConnection,
    moves: list[tuple[PulsarMove, AuditEvent]],
) -> None:
    """Store planned moves with the audit rows that announce them (inside the caller's
    transaction) and wake the executor once the transaction commits."""
    for move, event in moves:
        event.save()
        move.connection = connection
        move.audit = event
        try:
            with transaction.atomic():
                move.save()
        except IntegrityError:  # another plan queued a move of this bundle at the same time
            raise ConsoleError(
                f"{move.bundle}: another move of this bundle was just queued (one at a time)",
                status=409,
                field="bundle",
            ) from None
        realtime.publish(realtime.BUNDLE_MOVED, event.summary())
    if moves:
        # The Celery app, not a task module (services never import tasks): by name, on the
        # route of settings.CELERY_TASK_ROUTES.
        transaction.on_commit(lambda: app.send_task("console.tasks.pulsar_sync"))


def _finish(
    move: PulsarMove,
    outcome: str,
    reason: str,
    now: datetime,
    owner: str = "",
    *,
    expected: tuple[str, ...] = (PulsarMove.State.SENDING, PulsarMove.State.VERIFYING),
) -> bool:
    """End a move with its outcome and audit what was found, only if it is still in one of the
    ``expected`` states (a compare-and-set: two passes never end it twice). Returns whether it
    did."""
    ended = PulsarMove.objects.filter(pk=move.pk, state__in=expected).update(
        state=PulsarMove.State.DONE, outcome=outcome, outcome_reason=reason, finished_at=now
    )
    if not ended:
        return False
    metrics.PULSAR_MOVES.labels(outcome=outcome).inc()
    move.state, move.outcome, move.outcome_reason, move.finished_at = (
        PulsarMove.State.DONE,
        outcome,
        reason,
        now,
    )
    event = AuditEvent.objects.create(
        at=now,
        action=AuditEvent.Action.VERIFY,
        target=move.bundle,
        source=move.source,
        destination=owner,
        reason=f"{move.kind} {outcome}: {reason}",
        decision=move.audit.decision if move.audit else None,
    )
    realtime.publish(realtime.BUNDLE_MOVED, event.summary())
    return True


@dataclass
class _Send:
    move: PulsarMove
    destination: str | None  # what is sent as destinationBroker
    note: str  # said with the outcome


def _range(bundle: str) -> str:
    return bundle.rsplit("/", 1)[-1]


def moves_send(
    connection: PulsarConnection,
    admin: PulsarAdmin,
    *,
    now: datetime,
    version: str = "",
    extensible: bool = False,
) -> int:
    """Send the queued moves, oldest first, while fewer than ``max_moves_in_flight`` are being
    sent or verified (none while observe-only or stopped: the connection is read again first).
    Each is checked against the owners just observed; one that no longer fits is skipped, with
    why; one queued longer than ``QUEUED_TTL_S`` is dropped. ``version``: the cluster's, as
    observed (below 3.0 an unload goes without its destination, said so). On a modular cluster
    that keys its destination hint by bundle range (``affinity_by_range``), an unload with a
    destination waits while another of the same range is in flight: the two hints would
    overwrite each other on the leader.

    A call whose answer was lost (unreachable, a timeout, a 5xx: Pulsar may have done it) is
    verified by observing like an accepted one; a 4xx refusal ends the move as failed with
    Pulsar's reason.

    Returns:
        How many calls were sent and are now being verified.
    """
    connection = PulsarConnection.objects.get(pk=connection.pk)
    if connection.mode != PulsarConnection.Mode.CONTROL or connection.is_executor_stopped:
        return 0
    _unstick(connection, now, admin.act_timeout_s)
    _expire(connection, now)
    busy = list(
        connection.moves.filter(state__in=[PulsarMove.State.SENDING, PulsarMove.State.VERIFYING])
    )
    room = max(0, connection.max_moves_in_flight - len(busy))
    by_range = affinity_by_range(version, extensible=extensible)
    # range -> whether an unload of it in flight carries a destination: on a cluster that keys
    # the affinity by range, the next assignment of any bundle of that range takes it.
    flying: dict[str, bool] = {}
    for m in busy:
        if m.kind == PulsarMove.Kind.UNLOAD:
            flying[_range(m.bundle)] = flying.get(_range(m.bundle), False) or bool(m.destination)
    queued: list[PulsarMove] = []
    for move in connection.moves.filter(state=PulsarMove.State.QUEUED).order_by("id"):
        if len(queued) >= room:
            break
        if by_range and move.kind == PulsarMove.Kind.UNLOAD:
            bundle_range = _range(move.bundle)
            if bundle_range in flying and (flying[bundle_range] or move.destination):
                wait = (
                    f"waiting: another unload of range {bundle_range} is in flight, and "
                    f"Pulsar {version or '(version unknown)'} keys an unload's destination (its "
                    "bundle affinity) by bundle range, so either could take the other's "
                    "(apache/pulsar#25518); "
                )
                if move.outcome_reason != wait:
                    PulsarMove.objects.filter(pk=move.pk).update(outcome_reason=wait)
                continue
            flying[bundle_range] = flying.get(bundle_range, False) or bool(move.destination)
        queued.append(move)
    with transaction.atomic():
        # Read again under the connection's lock: a release (an admin's, the dead-man's) stops
        # the executor in its own transaction first, and no move is claimed after it.
        fresh = PulsarConnection.objects.select_for_update().get(pk=connection.pk)
        if fresh.mode != PulsarConnection.Mode.CONTROL or fresh.is_executor_stopped:
            return 0
        claimed = [
            m
            for m in queued
            if PulsarMove.objects.filter(pk=m.pk, state=PulsarMove.State.QUEUED).update(
                state=PulsarMove.State.SENDING,
                sent_at=now,
                outcome_reason="",
                attempts=F("attempts") + 1,
            )
        ]
    for m in claimed:
        m.attempts += 1
    owners = _owners([m.bundle for m in claimed])
    states = dict(Broker.objects.values_list("name", "state"))
    replanner = _Replanner(now)
    sends: list[_Send] = []
    for move in claimed:
        move.sent_at = now
        waited = (now - move.created_at).total_seconds()
        why = _refusal(move, owners)
        if not why and waited > QUEUED_TTL_S:
            why = f"queued {waited:.0f} s ago, longer than {QUEUED_TTL_S:.0f} s: its plan is stale"
        note = ""
        gone = _destination_gone(move, states)
        if not why and gone:
            # Its destination left service after the plan (a drain): planned again, by the
            # same rules, among the brokers that serve now.
            why, note = replanner.replan(move, gone)
        if why:
            _finish(move, PulsarMove.Outcome.SKIPPED, f"{why}; nothing was sent", now)
            continue
        destination = move.destination or None
        if destination and not supports_destination(version):
            destination = None
            note += (
                f"destination not supported by this cluster's version ({version}): sent as a "
                f"plain unload (planned for {move.destination}), Pulsar places the bundle; "
            )
            PulsarMove.objects.filter(pk=move.pk).update(destination="")
            move.destination = ""
        sends.append(_Send(move, destination, note))

    def send(item: _Send) -> None:
        move = item.move
        try:
            if move.kind == PulsarMove.Kind.UNLOAD:
                admin.unload(move.bundle, item.destination)
            else:
                admin.split(move.bundle, move.algorithm, list(move.boundaries))
        except PulsarAdminError:
            raise
        except Exception as exc:  # never leave a move in SENDING: said, and verified
            raise PulsarAdminError(0, f"{type(exc).__name__}: {exc}", "PUT", move.bundle) from exc

    sent = 0
    # An unload waits up to namespaceBundleUnloadingTimeoutMs: its calls get their own timeout.
    deadline = admin.act_timeout_s + 5
    for item, result in admin.each(sends, send, deadline_s=deadline, method="PUT"):
        move = item.move
        note = item.note
        if isinstance(result, PulsarAdminError):
            if (
                move.kind == PulsarMove.Kind.SPLIT
                and extensible
                and result.status == 500
                and NO_BOUNDARY.search(result.reason)
            ):
                # The extensible load manager's answer to a split with no valid boundary.
                why = f"{note}{NO_SPLIT} (HTTP {result.status}: {result.reason})"
                _finish(
                    move, PulsarMove.Outcome.NOOP, why, now, expected=(PulsarMove.State.SENDING,)
                )
                continue
            if not result.reached:
                # Certainly not sent: sent again at the next pass, after the owner check (a
                # bundle that moved meanwhile is skipped then, so nothing is done twice).
                if move.attempts < MAX_SEND_ATTEMPTS:
                    why = (
                        f"{note}not sent (attempt {move.attempts} of {MAX_SEND_ATTEMPTS}): "
                        f"{result.reason}; tried again at the next pass, after checking its "
                        "owner again"
                    )
                    PulsarMove.objects.filter(pk=move.pk, state=PulsarMove.State.SENDING).update(
                        state=PulsarMove.State.QUEUED, outcome_reason=why
                    )
                else:
                    why = (
                        f"{note}never reached Pulsar in {MAX_SEND_ATTEMPTS} attempts: "
                        f"{result.reason}"
                    )
                    _finish(
                        move,
                        PulsarMove.Outcome.FAILED,
                        why,
                        now,
                        expected=(PulsarMove.State.SENDING,),
                    )
                continue
            if 400 <= result.status < 500:
                why = f"{note}Pulsar refused it (HTTP {result.status}): {result.reason}"
                _finish(
                    move, PulsarMove.Outcome.FAILED, why, now, expected=(PulsarMove.State.SENDING,)
                )
                continue
            status = f"HTTP {result.status}" if result.status else "no answer"
            note += f"Pulsar's answer was lost ({status}: {result.reason}); "
        answered = result.status if isinstance(result, PulsarAdminError) else 200
        sent += PulsarMove.objects.filter(pk=move.pk, state=PulsarMove.State.SENDING).update(
            state=PulsarMove.State.VERIFYING, outcome_reason=note, last_status=answered
        )
    return sent


def _expire(connection: PulsarConnection, now: datetime) -> None:
    """Drop every queued move older than ``QUEUED_TTL_S`` at once (not a few per pass): its
    plan is stale."""
    limit = now - timedelta(seconds=QUEUED_TTL_S)
    for move in connection.moves.filter(state=PulsarMove.State.QUEUED, created_at__lt=limit):
        waited = (now - move.created_at).total_seconds()
        _finish(
            move,
            PulsarMove.Outcome.SKIPPED,
            f"queued {waited:.0f} s ago, longer than {QUEUED_TTL_S:.0f} s: its plan is stale; "
            "nothing was sent",
            now,
            expected=(PulsarMove.State.QUEUED,),
        )


def _unstick(connection: PulsarConnection, now: datetime, act_timeout_s: float) -> None:
    """A move left in SENDING (its worker died mid-call) longer than an act call can take is
    verified by observing: Pulsar may have done it."""
    limit = now - timedelta(seconds=act_timeout_s + 30)  # ACT_TIMEOUT_S + 30 by default
    connection.moves.filter(state=PulsarMove.State.SENDING, sent_at__lt=limit).update(
        state=PulsarMove.State.VERIFYING,
        outcome_reason="the executor stopped while sending it; ",
    )


def _owners(bundles: list[str]) -> dict[str, str | None]:
    """bundle -> owner name (None: unowned) in the metadata store (the last observation);
    absent: no such bundle any more."""
    return {
        name: (row.owner.name if row.owner else None)
        for name, row in selectors.bundle_rows(bundles).items()
    }


def _refusal(move: PulsarMove, owners: dict[str, str | None]) -> str:
    """Why a move must not be sent now ("" when it may)."""
    if move.bundle not in owners:
        return "it is no longer a bundle (split or merged since the plan)"
    other = (
        PulsarMove.objects.filter(
            bundle=move.bundle, state__in=[PulsarMove.State.SENDING, PulsarMove.State.VERIFYING]
        )
        .exclude(pk=move.pk)
        .first()
    )
    if other is not None:
        return f"move {other.pk} of this bundle is still {other.state}"
    owner = owners[move.bundle]
    if owner is None:
        return (
            "no broker owns it now; Fulcrum never unloads or splits an unowned bundle (a split "
            "would assign it)"
        )
    if owner != move.source:
        return f"its owner changed since the plan: now {owner}, not {move.source}"
    if move.destination and move.destination == owner:
        return f"it is already on {owner}: no transfer to the current owner"
    return ""


def _destination_gone(move: PulsarMove, states: dict[str, str]) -> str:
    """Why an unload's planned destination no longer takes bundles ("" when it does): it is
    draining or drained (an operator's drain began after the plan), or no longer a broker."""
    if move.kind != PulsarMove.Kind.UNLOAD or not move.destination:
        return ""
    state = states.get(move.destination)
    if state is None:
        return f"{move.destination} is no longer a broker"
    if state != Broker.State.ACTIVE:
        return f"{move.destination} is {state}"
    return ""


class _Replanner:
    """Plans a queued unload's destination again when its own left service: the operator's
    unload of the cycle (``balancer.cycle.plan_unload``, the configured placement among the
    brokers that serve now), passing the bundle's cool-down alone (its own queuing started it):
    any other veto (blacklist, rate limit, grace period) skips the move. One snapshot for the
    pass, each re-planned bundle's load moved onto its new broker (``reassign``), so that two
    re-plans do not both pick the same least-loaded broker. The new destination is audited,
    on a row of its own and on the move's announcing row."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.inputs: tuple[Any, Any, Any] | None = None

    def replan(self, move: PulsarMove, gone: str) -> tuple[str, str]:
        """(why it must not be sent, "") or ("", a note for its outcome) with
        ``move.destination`` set to the new one (saved). Never raises: a failure to plan
        (the live load store away, say) skips the move, saying why."""
        try:
            return self._replan(move, gone)
        except Exception as exc:  # the executor's pass goes on whatever a re-plan meets
            log.warning("could not re-plan move %s of %s: %s", move.pk, move.bundle, exc)
            return f"{gone}, and no other destination could be planned ({exc})"[:500], ""

    def _replan(self, move: PulsarMove, gone: str) -> tuple[str, str]:
        if self.inputs is None:
            config = selectors.balancer_config_get()
            self.inputs = (
                selectors.cluster_snapshot_get(now=self.now),
                selectors.cycle_config_get(config),
                config.state,
            )
        snapshot, cycle, state = self.inputs
        unforced = plan_unload(snapshot, cycle, state, move.bundle)
        other = [a for a in unforced.vetoed if a.veto not in (Reason.COOL_DOWN, None)]
        if other:
            return f"{gone}, and its move again is vetoed: {other[0].explanation}", ""
        plan = plan_unload(snapshot, cycle, state, move.bundle, force=True)
        place = next(iter(plan.planned(PlaceAction)), None)
        if place is None or not place.destination:
            vetoed = plan.vetoed[0].explanation if plan.vetoed else "no broker may take it"
            return f"{gone}, and no other broker may take it: {vetoed}", ""
        # The next re-plan of this pass sees this bundle on its new broker.
        self.inputs = (reassign(snapshot, {move.bundle: place.destination}), cycle, state)
        planned = move.destination
        move.destination = place.destination
        PulsarMove.objects.filter(pk=move.pk).update(destination=place.destination)
        if move.audit_id:  # the move's announcement names where it goes now
            AuditEvent.objects.filter(pk=move.audit_id).update(destination=place.destination)
        said = (
            f"re-planned when sending: {gone} since the plan, so not to {planned}; "
            f"to {place.destination} instead ({place.explanation})"
        )
        event = AuditEvent.objects.create(
            at=self.now,
            action=AuditEvent.Action.PLACE,
            target=move.bundle,
            source=move.source,
            destination=place.destination,
            reason=said,
            decision=move.audit.decision if move.audit else None,
        )
        realtime.publish(realtime.BUNDLE_MOVED, event.summary())
        return "", f"{said}; "


def moves_verify(connection: PulsarConnection, seen: Observation, *, now: datetime) -> int:
    """Record what the observation ``seen`` says of each move awaiting verification: an unload
    moved as planned / elsewhere, still on its source after ``STILL_ON_SOURCE_S`` (failed), or
    unowned after ``UNOWNED_AFTER_S``; a split as planned, at other positions, or not done.
    A broker whose bundles could not be read leaves its moves waiting.

    Returns:
        How many moves it ended.
    """
    bundles = set(seen.bundles())
    ended = 0
    waiting = connection.moves.filter(state=PulsarMove.State.VERIFYING).select_related("audit")
    for move in waiting:
        waited = (now - (move.sent_at or now)).total_seconds()
        said = move.outcome_reason
        after = f"{waited:.0f} s after it was sent"
        if move.bundle.rsplit("/", 1)[0] not in seen.namespaces:
            continue  # its namespace could not be read this time: nothing to conclude
        if move.kind == PulsarMove.Kind.UNLOAD:
            owner = seen.owners.get(move.bundle)
            if move.bundle not in bundles:
                _finish(
                    move,
                    PulsarMove.Outcome.FAILED,
                    f"{said}it is no longer a bundle of its namespace {after} (split meanwhile)",
                    now,
                )
            elif owner is None and waited < UNOWNED_AFTER_S:
                continue  # a client's lookup will place it
            elif owner is None:
                unread = ", ".join(sorted(seen.unknown_owners))
                maybe = f" (the owned bundles of {unread} could not be read)" if unread else ""
                _finish(
                    move,
                    PulsarMove.Outcome.UNOWNED,
                    f"{said}unloaded, and no broker owns it {after}{maybe}: no client has "
                    "looked it up",
                    now,
                )
            elif owner == move.source:
                if move.last_status >= 500 and move.attempts < MAX_SEND_ATTEMPTS:
                    # Pulsar answered (an unload answers once done or failed) and the bundle
                    # is still on its source: nothing was done. Sent again, after the owner
                    # check, instead of waiting STILL_ON_SOURCE_S to call it failed.
                    why = (
                        f"Pulsar answered HTTP {move.last_status} and the bundle was still on "
                        f"{owner}, its source, {after}: nothing was done (attempt "
                        f"{move.attempts} of {MAX_SEND_ATTEMPTS}); tried again at the next "
                        "send, after checking its owner again"
                    )
                    PulsarMove.objects.filter(pk=move.pk, state=PulsarMove.State.VERIFYING).update(
                        state=PulsarMove.State.QUEUED, outcome_reason=why
                    )
                    continue
                if waited < STILL_ON_SOURCE_S:
                    continue
                _finish(
                    move,
                    PulsarMove.Outcome.FAILED,
                    f"{said}owned by {owner}, its source, {after}: not unloaded, or placed "
                    "back there",
                    now,
                    owner,
                )
            elif not move.destination or owner == move.destination:
                where = "as planned" if move.destination else "by Pulsar's placement"
                _finish(
                    move,
                    PulsarMove.Outcome.AS_PLANNED,
                    f"{said}moved {where}: {move.source} -> {owner}, verified {after}",
                    now,
                    owner,
                )
            else:
                _finish(
                    move,
                    PulsarMove.Outcome.ELSEWHERE,
                    f"{said}Pulsar placed it on {owner}, not on {move.destination} as planned "
                    "(the modular load manager's destination is a one-shot hint a concurrent "
                    f"lookup can take); verified {after}",
                    now,
                    owner,
                )
        else:
            ended += _verify_split(move, seen, bundles, waited, after, now)
            continue
        ended += move.state == PulsarMove.State.DONE
    return ended


def _verify_split(
    move: PulsarMove,
    seen: Observation,
    bundles: set[str],
    waited: float,
    after: str,
    now: datetime,
) -> int:
    try:
        parsed = bundle_ops.parse_bundle_name(move.bundle)
    except BalancerError:  # stored by the executor itself: cannot happen, but never loop on it
        _finish(move, PulsarMove.Outcome.FAILED, "not a bundle name", now)
        return 1
    if move.bundle in bundles:
        if waited < STILL_ON_SOURCE_S:
            return 0
        _finish(
            move,
            PulsarMove.Outcome.NOOP,
            f"{move.outcome_reason}{NO_SPLIT}; still one bundle {after}",
            now,
        )
        return 1
    lower, upper = parsed.range.lower, parsed.range.upper
    children = sorted(
        b
        for b in bundles
        if b.startswith(parsed.namespace + "/")
        and lower <= bundle_ops.parse_bundle_name(b).range.lower < upper
    )
    positions = [bundle_ops.parse_bundle_name(b).range.lower for b in children[1:]]
    owners = sorted({seen.owners.get(b) or "nobody" for b in children})
    where = f"into {len(children)} bundles owned by {', '.join(owners)}"
    if positions == list(move.boundaries):
        outcome, how = PulsarMove.Outcome.AS_PLANNED, f"split as planned {where}"
    else:
        planned = ", ".join(f"0x{p:08x}" for p in move.boundaries)
        found = ", ".join(f"0x{p:08x}" for p in positions)
        outcome = PulsarMove.Outcome.ELSEWHERE
        how = f"split at {found or 'no position'} (planned {planned}) {where}"
    _finish(move, outcome, f"{move.outcome_reason}{how}, verified {after}", now)
    return 1


def moves_cancel(connection: PulsarConnection, why: str, now: datetime) -> int:
    """End every queued move as cancelled, each by compare-and-set (a move the executor claimed
    meanwhile is sent, and verified); those already sent are still verified."""
    cancelled = 0
    for move in connection.moves.filter(state=PulsarMove.State.QUEUED).select_related("audit"):
        cancelled += _finish(
            move, PulsarMove.Outcome.CANCELLED, why, now, expected=(PulsarMove.State.QUEUED,)
        )
    return cancelled


def executor_set(
    connection_id: int, *, stopped: bool, actor: User | None, now: datetime, why: str = ""
) -> PulsarConnection:
    """Stop the executor (queued moves are cancelled, ``why`` said on them; moves already sent
    are still verified; the balancer's plans are recorded, not sent) or start it again.
    Audited.

    Raises:
        ConsoleError: 403 for a viewer; 404 for an unknown connection; 409 a start while Pulsar's
            own balancing is on (``conflict``).
    """
    actor_check(actor)
    with transaction.atomic():
        connection = connection_get(connection_id, lock=True)
        if connection.is_executor_stopped == stopped:
            return connection
        if not stopped and connection.conflict:
            raise ConsoleError(
                f"{connection.conflict.get('why', 'Pulsar balances on its own')}: re-assert "
                "control (an admin, on the Pulsar page) or release it; the executor does not "
                "run beside Pulsar's own balancing",
                status=409,
                field="stopped",
            )
        connection.is_executor_stopped = stopped
        connection.save(update_fields=["is_executor_stopped"])
        who = actor.get_username() if actor else "the balancer"
        cancelled = 0
        if stopped:
            cancelled = moves_cancel(connection, why or f"the executor was stopped by {who}", now)
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.CONTROL,
            target=connection.name,
            reason=(
                f"executor stopped: {cancelled} queued move(s) cancelled; moves already sent "
                "are still verified; plans are recorded, not sent"
                if stopped
                else "executor started: planned moves are sent to Pulsar again"
            ),
        )
    return connection
