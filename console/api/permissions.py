"""Who may call what: brokers (each its own token; the demo's shared token), logged-in users
(read), operators (act)."""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from console.access import BROKER_AGENT_USERNAME, OPERATORS_GROUP, is_operator, may_act
from console.selectors import credential_broker

__all__ = [
    "OPERATORS_GROUP",
    "BrokerAgent",
    "IsBrokerAgent",
    "IsOperator",
    "IsUser",
    "IsUserOrBroker",
    "is_operator",
]


class BrokerAgent:
    """The identity of a broker that presented its token: ``broker`` is the broker it speaks
    for, None for the demo's shared token (which may speak for any)."""

    is_authenticated = True
    is_active = True
    is_superuser = False
    pk = None
    username = BROKER_AGENT_USERNAME

    def __init__(self, broker: str | None) -> None:
        self.broker = broker

    def get_username(self) -> str:
        return self.broker or self.username


INVALID_BROKER_TOKEN = "invalid broker token"


def broker_agent(token: str, *, cached_only: bool = False) -> BrokerAgent | None:
    """The broker a token speaks for: its own (``credentials``), or any for the demo's shared
    FULCRUM_BROKER_TOKEN; None for an unknown or revoked token.

    Raises:
        NotCached: ``cached_only`` and the answer needs the database.
    """
    shared = settings.FULCRUM_BROKER_TOKEN
    if shared and hmac.compare_digest(token.encode(), shared.encode()):  # any text: no TypeError
        return BrokerAgent(None)
    broker = credential_broker(token, cached_only=cached_only)
    return None if broker is None else BrokerAgent(broker)


class BrokerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Broker <token>``: a broker's own token (``credentials``), or in demo
    mode the shared FULCRUM_BROKER_TOKEN."""

    keyword = "Broker"

    def authenticate(self, request: Request) -> tuple[BrokerAgent, str] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(INVALID_BROKER_TOKEN)
        agent = broker_agent(header[1])
        if agent is None:
            raise exceptions.AuthenticationFailed(INVALID_BROKER_TOKEN)
        return agent, header[1]

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsBrokerAgent(permissions.BasePermission):
    """Only brokers send load reports."""

    message = "load reports need the broker token"

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, BrokerAgent)


class IsUser(permissions.BasePermission):
    """A logged-in person (the default): broker credentials read nothing but what brokers need."""

    message = "this needs a logged-in user; broker tokens only report and look up"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and not isinstance(user, BrokerAgent))


class IsUserOrBroker(permissions.BasePermission):
    """A logged-in person or a broker (lookups and ownership)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated)


class IsOperator(permissions.BasePermission):
    """Operator actions; refused for everybody in read-only mode."""

    message = "this action needs an operator"

    def has_permission(self, request: Request, view: Any) -> bool:
        allowed, why = may_act(request.user)
        if not allowed:
            self.message = why
        return allowed


class BrokerTokenScheme(OpenApiAuthenticationExtension):
    """The broker token in the OpenAPI schema: ``Authorization: Broker <token>``."""

    target_class = "console.api.permissions.BrokerTokenAuthentication"
    name = "brokerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "Broker <token>: a broker's own token (manage.py broker_token)",
        }
