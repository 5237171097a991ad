"""Bundle writes: a client's lookup (placement of an unowned bundle), an operator's unload and
split. Each is a plan of the cycle (balancer.cycle), screened by its vetoes and applied by
``plan_apply`` with compare-and-set on the owner the operator saw."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from balancer import bundles as bundle_ops
from balancer.cycle import Action, ActionKind, CyclePlan, plan_placement, plan_split, plan_unload
from balancer.errors import BalancerError
from balancer.hashing import format_hash, topic_hash
from console import selectors
from console.models import Bundle, Decision, Namespace
from console.services.apply import bundle_rows, plan_apply
from console.services.errors import ConsoleError


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
        if not plan.planned(ActionKind.PLACE):
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


def bundle_unload(
    bundle_name: str,
    *,
    actor: User,
    expected_owner: str | None = None,
    destination: str | None = None,
    force: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """An operator unloads a bundle: it leaves its owner and is placed at once, on
    ``destination`` or where the configured placement chooses (never back on its owner).

    Raises:
        ConsoleError: 404 unknown bundle; 409 when the bundle is no longer owned by
            ``expected_owner``, has no owner, a veto refuses the move (cool-down, grace period,
            rate limit, blacklist, a destination the placement filters refuse — ``force``
            overrides these), or another operator moved it first.
    """
    now = now or timezone.now()
    row = _bundle(bundle_name)
    _check_expected(row, expected_owner)
    config = selectors.balancer_config_get()
    snapshot = selectors.cluster_snapshot_get(now=now)
    plan = plan_unload(
        snapshot,
        selectors.cycle_config_get(config),
        config.state,
        row.name,
        destination=destination or None,
        force=force,
        now=now.timestamp(),
    )
    _refuse_vetoed(plan)
    unload = plan.planned(ActionKind.UNLOAD)[0]
    _check_expected(row, expected_owner, unload.source or "")
    decision = plan_apply(
        plan, now=now, actor=actor, kind=Decision.Kind.OPERATOR, refuse_stale=True
    )
    place = next(iter(plan.planned(ActionKind.PLACE)), None)
    event = decision.auditevent_set.order_by("id").first()
    return {
        "bundle": row.name,
        "source": unload.source,
        "destination": place.destination if place else None,
        "forced": unload.forced or bool(place and place.forced),
        "explanation": unload.explanation,
        "audit": event.pk if event else None,
        "decision": decision.pk,
    }


def bundle_split(
    bundle_name: str,
    *,
    actor: User | None,
    algorithm: str | None = None,
    positions: list[int] | None = None,
    expected_owner: str | None = None,
    force: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Cut a bundle at the algorithm's boundaries; the children are unowned (Pulsar's
    ``loadBalancerAutoUnloadSplitBundlesEnabled``) and placed by the next lookup or tick. Audited.

    Raises:
        ConsoleError: 404 unknown bundle; 400 for an unknown algorithm, missing or bad positions;
            409 when the bundle changed owner since ``expected_owner``, the algorithm needs
            per-topic data, finds no boundary, or the bundle is blacklisted (unless ``force``).
    """
    now = now or timezone.now()
    row = _bundle(bundle_name)
    _check_expected(row, expected_owner)
    config = selectors.balancer_config_get()
    snapshot = selectors.cluster_snapshot_get(now=now)
    try:
        plan = plan_split(
            snapshot,
            selectors.cycle_config_get(config),
            row.name,
            algorithm,
            positions,
            force=force,
        )
    except BalancerError as exc:
        raise ConsoleError(exc.message, field=exc.field or "positions") from None
    _refuse_vetoed(plan)
    split = plan.planned(ActionKind.SPLIT)[0]
    _check_expected(row, expected_owner, split.source or "")
    plan_apply(plan, now=now, actor=actor, kind=Decision.Kind.OPERATOR, refuse_stale=True)
    return {
        "bundle": row.name,
        "boundaries": [format_hash(c) for c in split.boundaries],
        "children": list(split.children),
        "explanation": split.explanation,
    }
