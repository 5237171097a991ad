"""One exception handler: balancer and console errors -> 400/404/409 with the field at fault."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from balancer.errors import BalancerError
from console.services.errors import ConsoleError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """``{"error": {"message", "field"}}`` for refused requests; DRF's own handling otherwise."""
    if isinstance(exc, ConsoleError):
        return Response(
            {"error": {"message": exc.message, "field": exc.field, **exc.extra}}, status=exc.status
        )
    if isinstance(exc, BalancerError):
        return Response({"error": exc.as_dict()}, status=400)
    return drf_handler(exc, context)
