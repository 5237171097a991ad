"""One exception handler: balancer and console errors -> 400/404/409 with the field at fault;
the live load store (Redis) unreachable -> 503."""

from __future__ import annotations

import logging
from typing import Any

import redis
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found, server_error
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from balancer.errors import BalancerError
from console.services.errors import ConsoleError

log = logging.getLogger(__name__)


def console_error_body(exc: ConsoleError) -> dict[str, Any]:
    """A refused request's body: ``{"error": {"message", "field", ...extra}}``."""
    return {"error": {"message": exc.message, "field": exc.field, **exc.extra}}


INTERNAL_ERROR = {
    "error": {"message": "internal error; the server log has the details", "field": None}
}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """``{"error": {"message", "field"}}`` for refused requests; DRF's own handling otherwise."""
    if isinstance(exc, ConsoleError):
        return Response(console_error_body(exc), status=exc.status)
    if isinstance(exc, BalancerError):
        return Response({"error": exc.as_dict()}, status=400)
    if isinstance(exc, RequestDataTooBig):  # a body without Content-Length, read past the limit
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"a request body is at most {limit:,} bytes"
        return Response({"error": {"message": message, "field": "body"}}, status=413)
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        # The live load store (Redis) away: nothing was done (a write's transaction rolled
        # back), the operator may try again once it is back.
        log.warning("refused while the live load store is unreachable: %s", exc)
        message = f"the live load store (Redis) is unreachable, nothing was done; retry: {exc}"
        return Response(
            {"error": {"message": message[:300], "field": None}},
            status=503,
            headers={"Retry-After": "5"},
        )
    response = drf_handler(exc, context)
    if response is None:
        # Anything else is our bug: logged with its traceback, answered without it.
        log.error("unhandled error in %s", context.get("view"), exc_info=exc)
        return Response(INTERNAL_ERROR, status=500)
    return response


def json_404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 for a path no route serves: JSON under /api/, the plain page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": {"message": f"no such endpoint: {request.path}", "field": None}}, status=404
        )
    return page_not_found(request, exception or Http404())


def json_500(request: HttpRequest) -> HttpResponse:
    """Django's 500 outside DRF: JSON under /api/, the plain page elsewhere; never a traceback."""
    if request.path.startswith("/api/"):
        return JsonResponse(INTERNAL_ERROR, status=500)
    return server_error(request)
