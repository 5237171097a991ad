"""HTML pages: parse the request, call one selector, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET
from plotly.offline import get_plotlyjs

from balancer.registry import ENTRIES
from console import selectors
from console.access import is_operator, may_act
from console.models import AuditEvent, Namespace, ReportRun


@require_GET
@cache_control(max_age=86400, public=True)
def plotly_js(request: HttpRequest) -> HttpResponse:
    """Plotly's JavaScript from the installed plotly package: no CDN."""
    return HttpResponse(get_plotlyjs(), content_type="application/javascript")


def favicon(request: HttpRequest) -> HttpResponse:
    """No icon, said without a 404 (the admin's and DRF's pages ask for /favicon.ico)."""
    response = HttpResponse(status=204)
    response["Cache-Control"] = "max-age=86400"
    return response


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
            "is_operator": may_act(request.user)[0],
        },
    )


@login_required
def bundle_map(request: HttpRequest) -> HttpResponse:
    """Every namespace's hash space as its bundles, coloured by owner; a broker's bundles as a
    treemap; a bundle's panel with Unload and Split (previewed) for operators. Live."""
    return render(
        request,
        "console/bundle_map.html",
        {
            "data": selectors.bundle_map(),
            "split_algorithms": [e.as_dict() for e in ENTRIES if e.kind == "split"],
            "is_operator": is_operator(request.user),
        },
    )


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
    """Namespaces with their bundle counts."""
    return render(request, "console/namespaces.html", {"namespaces": Namespace.objects.all()})


@login_required
def namespace_bundles(request: HttpRequest, name: str) -> HttpResponse:
    """One namespace's bundles, their owners and load; Unload for operators."""
    namespace = get_object_or_404(Namespace, name=name)
    bundles = selectors.bundles_with_loads(
        list(namespace.bundles.select_related("owner").order_by("lower"))
    )
    return render(
        request,
        "console/bundles.html",
        {"namespace": namespace, "bundles": bundles, "is_operator": is_operator(request.user)},
    )


@login_required
def audit(request: HttpRequest) -> HttpResponse:
    """Every automatic and manual action, newest first."""
    page = Paginator(AuditEvent.objects.select_related("actor"), 100).get_page(
        request.GET.get("page")
    )
    return render(request, "console/audit.html", {"page": page})


@login_required
def reports(request: HttpRequest) -> HttpResponse:
    """Spark report runs and the charts of the newest successful one."""
    runs = list(ReportRun.objects.all()[:20])
    latest = next((r for r in runs if r.status == ReportRun.Status.SUCCEEDED), None)
    return render(
        request,
        "console/reports.html",
        {"runs": runs, "latest": latest, "is_operator": is_operator(request.user)},
    )
