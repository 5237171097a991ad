"""HTML pages: parse the request, call one selector, render."""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from balancer.registry import ENTRIES
from console import metrics, selectors
from console.access import is_operator, may_act
from console.errors import ConsoleError
from console.models import AuditEvent, Broker, Bundle, Decision, Namespace, ReportRun
from console.services.config import config_values
from console.services.users import ROLES, user_role_set, users_list

# The console's Plotly: plotly.js's core with only the trace types the console's modules
# (static/console/) draw (scatter, bar, treemap), built by `make plotly` from js/plotly-fulcrum.js
# and committed.
PLOTLY_BUNDLE = settings.BASE_DIR / "static" / "vendor" / "plotly-fulcrum.min.js"


@functools.cache
def plotly_bundle() -> bytes:
    """The bundle's bytes, read once per process; a missing file says how to get it back."""
    try:
        return PLOTLY_BUNDLE.read_bytes()
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"{PLOTLY_BUNDLE} is missing: it is committed with the code (git checkout it), "
            "or `make plotly` builds it (Node and npm)"
        ) from None


def plotly_digest() -> str:
    """The first 12 hex digits of the bundle's SHA-256: its URL names it, so that a copy a
    browser cached is never another build's."""
    return hashlib.sha256(plotly_bundle()).hexdigest()[:12]


@require_GET
@cache_control(max_age=86400, public=True)
def plotly_js(request: HttpRequest) -> HttpResponse:
    """Plotly's JavaScript, our partial bundle: no CDN; gzipped for a browser that accepts it
    (1.10 MB -> 0.39 MB, compressed once per process), cached a day under a URL naming its
    digest. UTF-8: plotly.js holds a few characters past ASCII (a regular expression's U+FFFD)."""
    content_type = "application/javascript; charset=utf-8"
    if "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(_plotly_gzipped(), content_type=content_type)
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(plotly_bundle(), content_type=content_type)
    patch_vary_headers(response, ["Accept-Encoding"])
    return response


@functools.cache
def _plotly_gzipped() -> bytes:
    return gzip.compress(plotly_bundle(), compresslevel=6)


def favicon(request: HttpRequest) -> HttpResponse:
    """No icon, said without a 404 (the admin's and DRF's pages ask for /favicon.ico)."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "max-age=86400"
    return response


# Broker rows a page of the dashboard's rankings shows (the browser holds them all and pages).
RANKINGS_PAGE_ROWS = 50


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Broker rankings, current CV and the CV over time, the shedding loop's health (Pause and
    Resume for operators) and the latest acting decisions; live over the websocket."""
    rows = selectors.broker_rankings()
    return render(
        request,
        "console/dashboard.html",
        {
            "rankings": rows,
            "imbalance": selectors.current_imbalance(rows),
            "cv_series": selectors.cv_series(),
            "feed": selectors.decision_feed(),
            "health": selectors.loop_health(),
            "balance": selectors.balance_status(),
            "is_operator": may_act(request.user)[0],
            "page_rows": RANKINGS_PAGE_ROWS,
        },
    )


@login_required
def bundle_map(request: HttpRequest) -> HttpResponse:
    """Every namespace's hash space as its bundles, coloured by owner; a broker's bundles as a
    treemap; a bundle's panel with Unload and Split (previewed) for operators. Live."""
    error = None
    try:
        page, contains = selectors.page_params(request.GET, "namespace")
    except ConsoleError as exc:
        error, page, contains = exc.message, 1, ""
    asked = str(request.GET.get("bundle") or "")
    if "/" in asked and not request.GET.get("namespace") and not request.GET.get("page"):
        # A bundle asked by name (the audit's links): the page of its namespace.
        contains = asked.rsplit("/", 1)[0][:300].replace("\x00", "")
    return render(
        request,
        "console/bundle_map.html",
        {
            "error": error,
            "data": selectors.bundle_map(page=page, contains=contains),
            "page_bundles": selectors.BUNDLE_MAP_PAGE_BUNDLES,
            "split_algorithms": [e.as_dict() for e in ENTRIES if e.kind == "split"],
            "is_operator": is_operator(request.user),
        },
    )


@login_required
def config(request: HttpRequest) -> HttpResponse:
    """The strategy config: strategies from the registry with their descriptions and sources,
    parameters with defaults, units and ranges; what-if against the current config; every save
    a version with its diff; rollback. Operators edit; everyone reads."""
    return render(
        request,
        "console/config.html",
        {
            "state": {
                "values": config_values(selectors.balancer_config_get()),
                "versions": selectors.config_versions(),
                "draft": _advisor_draft(request),
            },
            "entries": [e.as_dict() for e in ENTRIES],
            "kinds": [
                ("shedder", "Shedder"),
                ("placement", "Placement"),
                ("split_algorithm", "Split algorithm"),
            ],
            "is_operator": may_act(request.user)[0],
        },
    )


def _advisor_draft(request: HttpRequest) -> dict[str, Any] | None:
    """``?advisor=<run>&candidate=<id>``: that candidate of an advisor run as the editor's draft
    (``{"run", "rank", "label", "changes"}``); None without it or when the run has no such
    candidate."""
    try:
        run_id, candidate = int(request.GET["advisor"]), int(request.GET["candidate"])
    except (KeyError, ValueError):
        return None
    run = ReportRun.objects.filter(
        pk=run_id, kind=ReportRun.Kind.ADVISOR, status=ReportRun.Status.SUCCEEDED
    ).first()
    if run is None:
        return None
    rows = selectors.report_results(run, "ranking", limit=5000)["rows"]
    row = next((r for r in rows if r.get("id") == candidate), None)
    if row is None or not isinstance(row.get("changes"), dict):
        return None
    return {
        "run": run.pk,
        "rank": row.get("rank"),
        "label": row.get("label"),
        "changes": row["changes"],
    }


@login_required
def domains(request: HttpRequest) -> HttpResponse:
    """Failure domains as columns of broker cards, anti-affinity groups and their violations;
    Drain and Activate (previewed) for operators. Live."""
    return render(
        request,
        "console/domains.html",
        {"data": selectors.domain_layout(), "is_operator": is_operator(request.user)},
    )


@login_required
def namespaces(request: HttpRequest) -> HttpResponse:
    """Namespaces with their bundle counts, 100 a page (``?page=``; past the last, the last),
    filtered by ``?q=`` (part of a name); a bad one is named and the first page shown."""
    error = None
    try:
        number, q = selectors.page_params(request.GET, "q")
    except ConsoleError as exc:
        error, number, q = exc.message, 1, ""
    page = Paginator(selectors.namespace_rows(q), 100).get_page(number)
    return render(request, "console/namespaces.html", {"page": page, "q": q, "error": error})


# Bundle rows a page of a broker's or a namespace's bundle table shows.
BUNDLE_ROWS_PAGE = 100


@login_required
def namespace_bundles(request: HttpRequest, name: str) -> HttpResponse:
    """One namespace's bundles, their owners and load, 100 a page (``?page=``, by hash range);
    Unload for operators."""
    namespace = get_object_or_404(Namespace, name=name)
    page = Paginator(
        namespace.bundles.select_related("owner").order_by("lower"), BUNDLE_ROWS_PAGE
    ).get_page(request.GET.get("page"))
    return render(
        request,
        "console/bundles.html",
        {
            "namespace": namespace,
            "bundles": selectors.bundles_with_loads(list(page)),
            "page": page,
            "is_operator": is_operator(request.user),
        },
    )


@login_required
def broker(request: HttpRequest, name: str) -> HttpResponse:
    """One broker: its load over time with the moves that touched it, its bundles (busiest
    first, 100 a page: ``?page=``), its latest actions; Drain and Activate (previewed) for
    operators."""
    row = get_object_or_404(Broker, name=name)
    rankings = selectors.broker_rankings()
    ranking = next(r for r in rankings if r["name"] == name)
    bundles = selectors.bundles_with_loads(
        list(Bundle.objects.filter(owner=row).select_related("namespace", "owner"))
    )
    page = Paginator(
        sorted(bundles, key=lambda b: (-b.throughput_bytes_per_s, b.name)), BUNDLE_ROWS_PAGE
    ).get_page(request.GET.get("page"))
    range_s = 3600
    return render(
        request,
        "console/broker.html",
        {
            "broker": row,
            "row": ranking,
            "brokers": len(rankings),
            "bundles": page,
            "events": selectors.audit_events({"broker": name})[:20],
            "pulsar_read": selectors.pulsar_broker_read(name),
            "quarantined": selectors.broker_quarantined(name),
            "drain": selectors.drain_progress().get(name),
            "history": selectors.broker_history(name, range_s=range_s),
            "ranges": selectors.BROKER_RANGES_S,
            "range_s": range_s,
            "retention_h": settings.FULCRUM_REPORT_RETENTION_S / 3600,
            "is_operator": may_act(request.user)[0],
        },
    )


# Actions a page of a decision shows (a drain plans one unload and one placement a bundle).
DECISION_ACTIONS_PAGE = 100


@login_required
def decision(request: HttpRequest, pk: int) -> HttpResponse:
    """One decision explained: the brokers' usage before it, predicted and observed after, the
    rule that fired with its figures, every action with its veto (100 a page: ``?page=``), the
    shedder's skips."""
    row = get_object_or_404(Decision, pk=pk)
    explained = selectors.decision_explained(row)
    actions = Paginator(explained["actions"], DECISION_ACTIONS_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "console/decision.html",
        {
            "decision": row,
            "explained": explained,
            "actions": actions,
            # What the chart draws: not the actions (a drain or a start has thousands).
            "chart": {
                "brokers": explained["brokers"],
                "before": explained["before"],
                "after": explained["after"],
            },
        },
    )


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    """Every automatic and manual action, newest first, one row per operation; filters, search
    and a CSV export of what is filtered."""
    error = None
    try:
        rows = selectors.audit_events(request.GET)
    except ConsoleError as exc:
        error, rows = exc.message, AuditEvent.objects.none()
    page = Paginator(rows, 100).get_page(request.GET.get("page"))
    times = [e.at for e in page]
    # Oscillation alerts: the moves on this page that sent a bundle back within the hour.
    bounced = (
        {b["id"] for b in selectors.bounces(since=min(times), until=max(times))} if times else set()
    )
    # ... and the moves that completed a broker's flip-flop (gave, took, gave again).
    flips: dict[int, list[str]] = {}
    for f in selectors.flip_flops(since=min(times), until=max(times)) if times else ():
        flips.setdefault(f["id"], []).append(f"{f['broker']}: {f['pattern']} within the hour")
    # Undo: which rows of the page were undone (by which row), and which can still be.
    undone = dict(
        AuditEvent.objects.filter(reverses__in=[e.pk for e in page]).values_list("reverses", "pk")
    )
    # Undo is offered where it can succeed, and said why not where it cannot.
    undo = selectors.undo_blockers([e for e in page if e.pk not in undone])
    rows_shown = [
        (event, flips.get(event.pk, []), undone.get(event.pk), undo.get(event.pk)) for event in page
    ]
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "console/audit.html",
        {
            "page": page,
            "error": error,
            "filters": {k: request.GET.get(k, "") for k in selectors.AUDIT_FILTERS},
            "actions": [*AuditEvent.Action.values, "undo"],
            "actors": [
                "balancer",
                *User.objects.order_by("username").values_list("username", flat=True),
            ],
            "query": query.urlencode(),
            "bounced": bounced,
            "rows": rows_shown,
            "is_operator": is_operator(request.user),
        },
    )


class _Echo:
    """A file whose write returns what it was given (Django's streaming CSV recipe)."""

    def write(self, value: str) -> str:
        return value


@login_required
def audit_csv(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """The filtered audit as CSV (UTC times; load as usage fractions 0–1, as stored)."""
    try:
        rows = selectors.audit_events(request.GET)
    except ConsoleError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    writer = csv.writer(_Echo())
    header = ["at_utc", "actor", "action", "target", "source", "destination", "reason"]
    header += ["load_before", "load_after", "decision"]

    def lines() -> Iterator[str]:
        yield writer.writerow(header)
        for e in rows.iterator(chunk_size=2000):
            yield writer.writerow(
                [
                    e.at.astimezone(UTC).isoformat(),
                    e.actor_name,
                    e.action,
                    e.target,
                    e.source,
                    e.destination,
                    e.reason,
                    json.dumps(e.load_before),
                    json.dumps(e.load_after) if e.load_after is not None else "",
                    e.decision_id or "",
                ]
            )

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="fulcrum-audit.csv"'
    return response


@login_required
def reports(request: HttpRequest) -> HttpResponse:
    """Spark runs over the history — the load report and the strategy advisor — with their
    progress, and the charts of the newest successful run of each kind (read by the page from
    ``/api/reports/<id>/results/<name>/``)."""
    runs = list(ReportRun.objects.all()[:20])
    latest = {
        kind: next(
            (r.pk for r in runs if r.status == ReportRun.Status.SUCCEEDED and r.kind == kind), None
        )
        for kind in ReportRun.Kind.values
    }
    return render(
        request,
        "console/reports.html",
        {"runs": runs, "latest": latest, "is_operator": is_operator(request.user)},
    )


@login_required
def pulsar(request: HttpRequest) -> HttpResponse:
    """The attached Pulsar cluster: the connection and its last observation, control (take or
    release, previewed and confirmed, admins), the executor (stop or start), the moves in
    flight and what verifying each found. Live."""
    return render(
        request,
        "console/pulsar.html",
        {
            "data": selectors.pulsar_status(),
            "is_operator": is_operator(request.user),
            "is_admin": request.user.is_superuser,
        },
    )


def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    """``/metrics`` for Prometheus (``console.metrics``): every process's metrics. With
    ``FULCRUM_METRICS_TOKEN`` set, only for ``Authorization: Bearer <token>`` (401 otherwise);
    without one, 403 unless ``FULCRUM_METRICS_PUBLIC`` (the figures are not for anyone)."""
    token = settings.FULCRUM_METRICS_TOKEN
    if not token and not settings.FULCRUM_METRICS_PUBLIC:
        return HttpResponse(
            "metrics are not public: set FULCRUM_METRICS_TOKEN (Prometheus sends it as "
            "Authorization: Bearer <token>) or FULCRUM_METRICS_PUBLIC=1\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse(
                "metrics need Authorization: Bearer <FULCRUM_METRICS_TOKEN>\n",
                status=401,
                content_type="text/plain; charset=utf-8",
            )
            response["WWW-Authenticate"] = 'Bearer realm="fulcrum-metrics"'
            return response
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)


def lockout(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """django-axes' lockout (``AXES_LOCKOUT_CALLABLE``): a page with the navigation, how many
    failed logins locked the user name out from this address, for how long, and until when
    (the newest failed attempt plus ``AXES_COOLOFF_TIME``); 429."""
    username = get_client_username(request, credentials) or ""
    cool_off = get_cool_off(request)
    latest = (
        AccessAttempt.objects.filter(username=username).order_by("-attempt_time").first()
        if username
        else None
    )
    until = latest.attempt_time + cool_off if latest is not None and cool_off else None
    left_s = max(0.0, (until - datetime.now(UTC)).total_seconds()) if until else None
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "cooloff_minutes": round(cool_off.total_seconds() / 60) if cool_off else 0,
        "until": until.astimezone(UTC).isoformat() if until else None,
        "left_minutes": None if left_s is None else max(1, round(left_s / 60)),
    }
    return render(request, "lockout.html", context, status=429)


@login_required
def users(request: HttpRequest) -> HttpResponse:
    """Admins only: every console user with their role, and a form that makes a user or gives
    one another role (``services.users.user_role_set``: audited; a new user's password is
    shown once). Anyone else: 403."""
    if not request.user.is_superuser:
        raise PermissionDenied("the users page is an admin's")
    said, error, field, made = "", "", "", None
    if request.method == "POST":
        name = request.POST.get("name", "")
        role = request.POST.get("role", "")
        password = request.POST.get("password") or None
        try:
            user, made = user_role_set(name, role, password=password, actor=request.user)
            said = f"{user.username} is now {role}."
        except ConsoleError as exc:
            error, field = exc.message, exc.field or ""
    return render(
        request,
        "console/users.html",
        {
            "users": users_list(),
            "roles": ROLES,
            "said": said,
            "error": error,
            "field": field,
            "made": made,
            "posted": request.POST if request.method == "POST" else {},
        },
        status=400 if error else 200,
    )
