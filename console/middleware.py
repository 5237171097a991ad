"""What every request goes through before a view: refused early — a NUL character in the path
or the query string (no name, filter or token of Fulcrum has one, and PostgreSQL text cannot
hold one: it would be a 500 deep in a query instead of a 400 here), a body over its limit
(413), an API body that is not one strict JSON object (400/415) — and reads that answer from
the last figures while the live load store is away."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

from console import loadstore
from console.api.errors import console_error_body, error_body
from console.errors import ConsoleError
from console.services.bodies import OPERATOR_BODY_MAX_BYTES, body_size_check, json_object

# Checked by their own, stricter reader (``services.ingest.report_parse``), on the hot path.
_OWN_READER = ("/api/load-reports/",)


def nul_refused(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., HttpResponse]:
    """400 for a path or query string holding NUL (``%00``), JSON under /api/."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            message = "the address contains a NUL character"
            if request.path.startswith("/api/"):
                return JsonResponse(error_body(400, message), status=400)
            return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
        return get_response(request)

    return middleware


def body_limited(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[..., HttpResponse]:
    """413 for a body whose Content-Length is over the limit of where it is sent, before
    anything reads it: ``FULCRUM_MAX_REPORT_BYTES`` for load reports,
    ``OPERATOR_BODY_MAX_BYTES`` for the rest of the API (JSON), ``DATA_UPLOAD_MAX_MEMORY_SIZE``
    for pages. A body without Content-Length is held to the same limits where it is read."""

    def middleware(request: HttpRequest) -> HttpResponse:
        try:
            announced = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            announced = 0
        if request.path.startswith(_OWN_READER):
            limit, what = settings.FULCRUM_MAX_REPORT_BYTES, "a load report"
        elif request.path.startswith("/api/"):
            limit, what = OPERATOR_BODY_MAX_BYTES, "an API request body"
        else:
            limit, what = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or announced, "a request body"
        try:
            body_size_check(announced, limit=limit, what=what)
        except ConsoleError as error:
            if request.path.startswith("/api/"):
                return JsonResponse(console_error_body(error), status=413)
            return HttpResponse(error.message, status=413, content_type="text/plain; charset=utf-8")
        return get_response(request)

    return middleware


def json_checked(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[..., HttpResponse]:
    """Every body sent to the operator API (POST, PUT, PATCH, DELETE under /api/) is checked
    before any view, whether or not the view reads it: JSON only (415 otherwise), one object,
    by ``services.bodies.json_object``'s rules (413 / 400 naming the key). The decoded object is
    kept as ``request.fulcrum_json`` for DRF's parser (``console.api.parsers``)."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if (
            request.method not in ("POST", "PUT", "PATCH", "DELETE")
            or not request.path.startswith("/api/")
            or request.path.startswith(_OWN_READER)
        ):
            return get_response(request)
        try:
            raw = request.body
            if raw.strip() and request.content_type != "application/json":
                raise ConsoleError(
                    f"the body must be application/json (got {request.content_type or 'none'})",
                    status=415,
                    field="body",
                )
            request.fulcrum_json = json_object(raw)  # type: ignore[attr-defined]
        except RequestDataTooBig:  # no Content-Length, read past DATA_UPLOAD_MAX_MEMORY_SIZE
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            message = f"a request body is at most {limit:,} bytes"
            return JsonResponse(
                console_error_body(ConsoleError(message, status=413, field="body")), status=413
            )
        except ConsoleError as error:
            return JsonResponse(console_error_body(error), status=error.status)
        return get_response(request)

    return middleware


def store_fallback(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[..., HttpResponse]:
    """Reads (GET, HEAD) answer while the live load store (Redis) is away: from the last
    figures this process read (``loadstore.stale_allowed``), pages with a banner
    (``context_processors.store_outage``), every response with ``X-Fulcrum-Stale`` saying since
    when. Writes are not covered: they fail as they would."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return get_response(request)
        with loadstore.stale_allowed():
            response = get_response(request)
        found = loadstore.outage()
        if found is not None and found.since is not None:
            since = datetime.fromtimestamp(found.since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            response["X-Fulcrum-Stale"] = f"live load store unreachable since {since}"
        return response

    return middleware
