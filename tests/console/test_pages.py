import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from console.models import Broker, Bundle
from tests.conftest import report


@pytest.fixture
def logged_in(client, operator):
    client.force_login(operator)
    return client


def test_pages_need_login(client, cluster):
    for url in ("/", "/namespaces/", "/audit/", "/reports/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_dashboard_shows_rankings_and_cv(logged_in, cluster, broker_client):
    broker_client.post("/api/load-reports/", report("broker-1", 55), format="json")
    response = logged_in.get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "broker-1" in body
    assert "55.0" in body
    assert 'id="cv-chart"' in body
    assert reverse("plotly-js") in body
    # Every script is served by us: no absolute URL (a CDN) in any src.
    assert re.findall(r'src="(?:https?:)?//', body) == []


def test_with_one_serving_broker_the_dashboard_shows_no_cv_of_zero(
    logged_in, cluster, broker_client
):
    """Issue 25, item 2: the CV is over the brokers that serve; one broker carrying everything
    has a CV of 0 that would read "perfectly balanced"."""
    from console import selectors

    for name, cpu in (("broker-1", 55), ("broker-2", 20), ("broker-3", 20)):
        broker_client.post("/api/load-reports/", report(name, cpu), format="json")
    assert selectors.current_imbalance()["serving"] == 3
    assert "— (" not in logged_in.get("/").content.decode()
    # A broker silent past the broker timeout is lost: it serves nothing, counted nowhere.
    with time_machine.travel(datetime.now(UTC) + timedelta(seconds=120), tick=False):
        assert selectors.current_imbalance()["serving"] == 0
    Broker.objects.exclude(name="broker-1").update(state="drained")
    assert selectors.current_imbalance()["serving"] == 1
    body = logged_in.get("/").content.decode()
    cv = re.search(r'<div id="cv" class="big">([^<]*)</div>', body)
    assert cv is not None
    assert cv.group(1) == "— (1 serving broker)"


def test_dashboard_query_count_does_not_grow_with_brokers(logged_in, cluster):
    with CaptureQueriesContext(connection) as few:
        logged_in.get("/")
    cluster_obj = Broker.objects.first().cluster
    for i in range(10):
        Broker.objects.create(cluster=cluster_obj, name=f"extra-{i}")
    with CaptureQueriesContext(connection) as many:
        logged_in.get("/")
    assert len(many) == len(few)


def test_bundles_page_links_each_bundle_to_its_panel_on_the_map(logged_in, cluster, client, viewer):
    bundle = Bundle.objects.select_related("namespace").order_by("lower").first()
    bundle.owner = Broker.objects.first()
    bundle.save()
    body = logged_in.get("/namespaces/acme/orders/bundles/").content.decode()
    assert body.count("Unload or split on the map") == 4
    assert f'href="/bundles/?bundle={bundle.name}"' in body
    client.force_login(viewer)
    as_viewer = client.get("/namespaces/acme/orders/bundles/").content.decode()
    assert "Unload or split" not in as_viewer
    assert as_viewer.count("On the map") == 4


def test_cluster_pages_render_for_viewers_with_a_read_only_banner(cluster, client, viewer):
    client.force_login(viewer)
    for path in ("/bundles/", "/domains/"):
        body = client.get(path).content.decode()
        assert "Read-only: your role is viewer" in body
        assert 'id="unload-form"' not in body


def test_no_favicon_is_a_204_not_a_404(client):
    assert client.get("/favicon.ico").status_code == 204


def test_audit_and_reports_pages_render(logged_in, cluster):
    assert "No action matches" in logged_in.get("/audit/").content.decode()
    page = logged_in.get("/reports/").content.decode()
    assert "Run the load report" in page
    assert "Run the strategy advisor" in page


def test_the_cv_plot_breaks_where_the_console_was_stopped(logged_in, cluster):
    from datetime import UTC, datetime, timedelta

    from console.models import ClusterSample

    start = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    # Every 10 s for a minute, then nothing for two hours (stopped), then again.
    times = [start + timedelta(seconds=10 * i) for i in range(6)]
    times += [start + timedelta(hours=2, seconds=10 * i) for i in range(3)]
    ClusterSample.objects.bulk_create(
        ClusterSample(at=t, mean_usage_fraction=0.5, std_usage_fraction=0.1, cv=0.2) for t in times
    )
    series = logged_in.get("/").context["cv_series"]
    assert series["cv"].count(None) == 1
    gap = series["cv"].index(None)
    assert series["at"][gap - 1] < series["at"][gap] < series["at"][gap + 1]
    assert len(series["cv"]) == len(times) + 1
