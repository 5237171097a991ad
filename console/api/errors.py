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
from console.errors import ConsoleError

log = logging.getLogger(__name__)


# Every refused request's ``code``, by its HTTP status (one word a client may branch on).
CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
    500: "internal",
    503: "unavailable",
}


def error_body(status: int, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """The one shape of every refused request, everywhere in the API: ``{"error": {"code",
    "message", "field", ...extra}}`` (``code`` from the status, ``CODES``; ``field`` the input
    at fault or None)."""
    code = CODES.get(status, "error")
    return {"error": {"code": code, "message": message, "field": field, **extra}}


def console_error_body(exc: ConsoleError) -> dict[str, Any]:
    """A refused request's body (``error_body``) with the error's extra figures."""
    return error_body(exc.status, exc.message, exc.field, **exc.extra)


INTERNAL_ERROR = error_body(500, "internal error; the server log has the details")


def _words(errors: Any) -> str:
    """A validation error's messages in words: a list's joined, a nested object's (a list
    item's, say) each after where it is (``0: Ensure this field has no more than 60
    characters.``), never Python's repr of DRF's ``ErrorDetail``."""
    if isinstance(errors, dict):
        return "; ".join(f"{k}: {_words(v)}" for k, v in errors.items())
    if isinstance(errors, list | tuple):
        return " ".join(_words(e) for e in errors)
    return str(errors)


def _drf_body(status: int, data: Any) -> dict[str, Any]:
    """DRF's own refusals in the one shape: a validation error's fields (the first named as
    ``field``, all of them in ``fields``), else its ``detail``."""
    if isinstance(data, dict) and "detail" not in data:
        fields = {str(k): v if isinstance(v, list) else [v] for k, v in data.items()}
        message = "; ".join(f"{k}: {_words(v)}" for k, v in fields.items())
        first = next(iter(fields), None)
        return error_body(status, message or "invalid input", first, fields=fields)
    if isinstance(data, list):
        return error_body(status, _words(data) or "invalid input")
    detail = data.get("detail", "") if isinstance(data, dict) else data
    return error_body(status, str(detail))


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every refusal as ``error_body``: console and balancer errors with the field at fault,
    DRF's own (validation, authentication, permission, parsing) converted, Redis away a 503,
    anything else a 500 without its traceback."""
    if isinstance(exc, ConsoleError):
        return Response(console_error_body(exc), status=exc.status)
    if isinstance(exc, BalancerError):
        found = exc.as_dict()
        return Response(
            error_body(400, found.get("message") or str(exc), found.get("field")), status=400
        )
    if isinstance(exc, RequestDataTooBig):  # a body without Content-Length, read past the limit
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"a request body is at most {limit:,} bytes"
        return Response(error_body(413, message, "body"), status=413)
    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        # The live load store (Redis) away: nothing was done (a write's transaction rolled
        # back), the operator may try again once it is back.
        log.warning("refused while the live load store is unreachable: %s", exc)
        message = f"the live load store (Redis) is unreachable, nothing was done; retry: {exc}"
        return Response(error_body(503, message[:300]), status=503, headers={"Retry-After": "5"})
    response = drf_handler(exc, context)
    if response is None:
        # Anything else is our bug: logged with its traceback, answered without it.
        log.error("unhandled error in %s", context.get("view"), exc_info=exc)
        return Response(INTERNAL_ERROR, status=500)
    response.data = _drf_body(response.status_code, response.data)
    return response


def json_404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404 for a path no route serves: JSON under /api/, the plain page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(404, f"no such endpoint: {request.path}"), status=404)
    return page_not_found(request, exception or Http404())


def json_500(request: HttpRequest) -> HttpResponse:
    """Django's 500 outside DRF: JSON under /api/, the plain page elsewhere; never a traceback."""
    if request.path.startswith("/api/"):
        return JsonResponse(INTERNAL_ERROR, status=500)
    return server_error(request)
