"""Who may do what: one module that the API's permissions and the pages both use."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from console.errors import ConsoleError

OPERATORS_GROUP = "operators"
BROKER_AGENT_USERNAME = "broker-agent"


def is_broker_agent(user: Any) -> bool:
    """A broker (or the simulator) that presented the broker token."""
    return getattr(user, "username", None) == BROKER_AGENT_USERNAME and not getattr(
        user, "pk", None
    )


def is_operator(user: Any) -> bool:
    """Superusers and members of the ``operators`` group may act on the cluster."""
    if is_broker_agent(user) or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or user.groups.filter(name=OPERATORS_GROUP).exists())


def may_act(user: Any) -> tuple[bool, str]:
    """(allowed, why not) for an operator action: refused for everybody in read-only mode."""
    if settings.FULCRUM_READ_ONLY:
        return False, "the console is in read-only mode"
    if not is_operator(user):
        return False, "this action needs an operator"
    return True, ""


def role_of(user: Any) -> str:
    """The role the console shows and enforces: ``admin`` (superuser: also the Django admin),
    ``operator`` (the operators group: acts on the cluster), else ``viewer`` (reads)."""
    if getattr(user, "is_superuser", False):
        return "admin"
    return "operator" if is_operator(user) else "viewer"


def role(request: Any) -> dict[str, Any]:
    """Template context: the user's ``role``, and ``read_only`` when they may not act."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return {}
    allowed, why = may_act(user)
    return {"role": role_of(user), "read_only": "" if allowed else why}


def actor_check(actor: Any, *, admin: bool = False) -> None:
    """Refuse an action to someone whose role does not allow it: an operator's (or, with
    ``admin``, a superuser's). ``None`` is the balancer itself, or a command run on the server.
    Every service that changes the cluster or its config calls this first.

    Raises:
        ConsoleError: 403 with why.
    """
    if actor is None:
        return
    if admin and not getattr(actor, "is_superuser", False):
        raise ConsoleError("this action needs an admin (a superuser)", status=403)
    allowed, why = may_act(actor)
    if not allowed:
        raise ConsoleError(why, status=403)
