"""Requests refused before any view: a NUL character in the path or the query string (no
name, filter or token of Fulcrum has one, and PostgreSQL text cannot hold one: it would be a
500 deep in a query instead of a 400 here)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse


def nul_refused(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., HttpResponse]:
    """400 for a path or query string holding NUL (``%00``), JSON under /api/."""

    def middleware(request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or "%00" in request.META.get("QUERY_STRING", ""):
            message = "the address contains a NUL character"
            if request.path.startswith("/api/"):
                return JsonResponse({"error": {"message": message, "field": None}}, status=400)
            return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
        return get_response(request)

    return middleware
