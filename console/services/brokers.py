"""Broker life cycle writes: an operator drains a broker (its bundles move away in the same plan,
then it is drained) or activates it again — plans of the cycle, applied by ``plan_apply``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from balancer.cycle import CyclePlan, plan_activate, plan_drain
from balancer.errors import BalancerError
from console import selectors
from console.access import actor_check
from console.errors import ConsoleError
from console.models import Broker, Decision
from console.services.apply import plan_apply


def broker_state_set(
    broker_name: str,
    state: str,
    *,
    actor: User | None,
    note: str = "",
    now: datetime | None = None,
) -> Broker:
    """Drain (``draining``) or activate (``active``) a broker. Idempotent; audited, with
    ``note`` (the operator's reason).

    Raises:
        ConsoleError: 404 unknown broker; 400 for a state other than draining or active; 409 when
            draining would leave no serving broker.
    """
    actor_check(actor)
    now = now or timezone.now()
    if state not in (Broker.State.DRAINING, Broker.State.ACTIVE):
        raise ConsoleError("state must be draining or active", field="state")
    try:
        broker = Broker.objects.get(name=broker_name)
    except Broker.DoesNotExist:
        raise ConsoleError(f"unknown broker {broker_name!r}", status=404, field="broker") from None
    if broker.state == state or (state == Broker.State.DRAINING and broker.state == "drained"):
        return broker
    plan = _state_plan(broker_name, state, now)
    if plan.vetoed:
        first = plan.vetoed[0]
        raise ConsoleError(first.explanation, status=409, field="broker", veto=str(first.veto))
    plan_apply(
        plan,
        now=now,
        actor=actor,
        kind=Decision.Kind.OPERATOR,
        refuse_stale=True,
        note=note,
        # A bundle of it moving already goes with that move; the ticks finish the drain.
        leave_moving=state == Broker.State.DRAINING,
    )
    broker.refresh_from_db()
    return broker


def broker_state_preview(
    broker_name: str, state: str, *, now: datetime | None = None
) -> dict[str, Any]:
    """What draining or activating a broker would do, written nowhere: the plan (each bundle
    and where it would go, the vetoes — draining the last serving broker is one), and its
    one-line summary.

    Raises:
        ConsoleError: 404 unknown broker; 400 for a state other than draining or active.
    """
    now = now or timezone.now()
    if state not in (Broker.State.DRAINING, Broker.State.ACTIVE):
        raise ConsoleError("state must be draining or active", field="state")
    if not Broker.objects.filter(name=broker_name).exists():
        raise ConsoleError(f"unknown broker {broker_name!r}", status=404, field="broker")
    plan = _state_plan(broker_name, state, now)
    return {
        "preview": True,
        "broker": broker_name,
        "state": state,
        "plan": plan.as_dict(),
        "summary": plan.summary(),
        "vetoed": bool(plan.vetoed),
    }


def _state_plan(broker_name: str, state: str, now: datetime) -> CyclePlan:
    config = selectors.balancer_config_get()
    cycle = selectors.cycle_config_get(config)
    snapshot = selectors.cluster_snapshot_get(now=now)
    try:
        if state == Broker.State.DRAINING:
            return plan_drain(snapshot, cycle, config.state, broker_name)
        return plan_activate(snapshot, cycle, broker_name)
    except BalancerError as exc:
        raise ConsoleError(exc.message, status=404, field="broker") from None
