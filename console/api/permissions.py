"""Who may call what: brokers (shared token), logged-in users (read), operators (act)."""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request

from console.access import BROKER_AGENT_USERNAME, OPERATORS_GROUP, is_operator, may_act

__all__ = ["OPERATORS_GROUP", "BrokerAgent", "IsBrokerAgent", "IsOperator", "is_operator"]


class BrokerAgent:
    """The identity of a broker (or the simulator) that presented the broker token."""

    is_authenticated = True
    is_active = True
    is_superuser = False
    pk = None
    username = BROKER_AGENT_USERNAME

    def get_username(self) -> str:
        return self.username


class BrokerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Broker <FULCRUM_BROKER_TOKEN>``: brokers' load reports and lookups."""

    keyword = "Broker"

    def authenticate(self, request: Request) -> tuple[BrokerAgent, str] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != self.keyword:
            return None
        if len(header) != 2 or not hmac.compare_digest(header[1], settings.FULCRUM_BROKER_TOKEN):
            raise exceptions.AuthenticationFailed("invalid broker token")
        return BrokerAgent(), header[1]

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class IsBrokerAgent(permissions.BasePermission):
    """Only brokers send load reports."""

    message = "load reports need the broker token"

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, BrokerAgent)


class IsOperator(permissions.BasePermission):
    """Operator actions; refused for everybody in read-only mode."""

    message = "this action needs an operator"

    def has_permission(self, request: Request, view: Any) -> bool:
        allowed, why = may_act(request.user)
        if not allowed:
            self.message = why
        return allowed
