"""At the size of a production cluster no page loads every bundle or namespace (issue 26, item
4): the bundle map comes in pages of whole namespaces up to ``BUNDLE_MAP_PAGE_BUNDLES`` bundles,
filtered by part of a namespace's name; the namespaces list 100 a page, its bundle counts in
the same query."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from console import selectors
from console.models import Bundle, Namespace
from console.selectors import bundles as bundle_selectors


@pytest.fixture
def small_pages(monkeypatch):
    # The package's name first (console/lazy.py keeps a name in the package once used): patched
    # second, its first use would read the patched 5 and undo would put 5 back, for every later
    # test in this process.
    monkeypatch.setattr(selectors, "BUNDLE_MAP_PAGE_BUNDLES", 5)
    monkeypatch.setattr(bundle_selectors, "BUNDLE_MAP_PAGE_BUNDLES", 5)


def _bundles(answer: dict) -> set[tuple[str, int]]:
    return {(ns["name"], b[0]) for ns in answer["namespaces"] for b in ns["bundles"]}


def test_the_bundle_map_comes_in_pages_of_whole_namespaces(cluster, viewer, small_pages):
    client = APIClient()
    client.force_authenticate(viewer)
    first = client.get("/api/bundle-map/").json()
    # The small layout: 2 namespaces of 4 bundles; 5 a page holds one namespace whole.
    assert first["page"] == {
        "number": 1,
        "pages": 2,
        "namespaces": 2,
        "bundles": 8,
        "first": "acme/orders",
        "last": "acme/orders",
        "contains": "",
    }
    second = client.get("/api/bundle-map/?page=2").json()
    every = {(b.namespace.name, b.lower) for b in Bundle.objects.select_related("namespace")}
    assert _bundles(first) | _bundles(second) == every
    assert not _bundles(first) & _bundles(second)
    # Past the last page: the last; filtered by part of a name, any case.
    assert client.get("/api/bundle-map/?page=9").json()["page"]["number"] == 2
    only = client.get("/api/bundle-map/?namespace=PAY").json()
    assert {ns["name"] for ns in only["namespaces"]} == {"acme/payments"}
    assert only["page"]["pages"] == 1
    for bad in ("0", "x", "-1", "１"):
        refused = client.get(f"/api/bundle-map/?page={bad}")
        assert refused.status_code == 400
        assert refused.json()["error"]["field"] == "page"


def test_the_bundle_map_page_pages_and_opens_on_an_asked_bundle(cluster, viewer, small_pages):
    client = Client()
    client.force_login(viewer)
    page = client.get("/bundles/").content.decode()
    assert "page 1 of 2" in page
    assert 'id="map-next"' in page
    assert "acme/payments" not in page.split('id="map-data"')[1]
    asked = Bundle.objects.select_related("namespace").get(namespace__name="acme/payments", lower=0)
    opened = client.get(f"/bundles/?bundle={asked.name}").content.decode()
    data = opened.split('id="map-data"')[1]
    assert "acme/payments" in data
    assert "acme/orders" not in data
    wrong = client.get("/bundles/?page=zero")
    assert wrong.status_code == 200
    assert "page is a whole number from 1" in wrong.content.decode()


def test_the_namespaces_list_is_paged_with_its_counts_in_one_query(
    cluster, viewer, django_assert_max_num_queries
):
    tenant = Namespace.objects.first().tenant
    Namespace.objects.bulk_create(
        [Namespace(tenant=tenant, name=f"acme/extra-{i:03d}") for i in range(150)]
    )
    client = Client()
    client.force_login(viewer)
    client.get("/namespaces/")  # the session and the user, cached for the count below
    with django_assert_max_num_queries(12):
        page = client.get("/namespaces/").content.decode()
    assert "page 1 of 2 (152 namespaces)" in page
    assert len(re.findall(r'href="/namespaces/[^"]+/bundles/"', page)) == 100
    second = client.get("/namespaces/?page=2").content.decode()
    assert len(re.findall(r'href="/namespaces/[^"]+/bundles/"', second)) == 52
    # Counts are each namespace's own: the layout's 4, the extras' none.
    assert "<td>4</td>" in second.split(">acme/orders</a>")[1].split("</tr>")[0]
    assert "<td>0</td>" in page.split(">acme/extra-000</a>")[1].split("</tr>")[0]
    # A bad filter or page is named, as the bundle map does, and the first page shown.
    for bad, said in (("q=" + "x" * 301, "q is at most 300"), ("page=0", "page is a whole")):
        refused = client.get(f"/namespaces/?{bad}").content.decode()
        assert said in refused
        assert "page 1 of 2 (152 namespaces)" in refused
    assert "page 2 of 2" in client.get("/namespaces/?page=9").content.decode()  # the last
    filtered = client.get("/namespaces/?q=PAYMENTS").content.decode()
    assert "acme/payments" in filtered
    assert "acme/extra-001" not in filtered


def test_a_brokers_and_a_namespaces_bundle_tables_are_paged(cluster, viewer, monkeypatch):
    from console import views
    from console.models import Broker

    monkeypatch.setattr(views, "BUNDLE_ROWS_PAGE", 3)
    Bundle.objects.update(owner=Broker.objects.get(name="broker-1"))
    client = Client()
    client.force_login(viewer)
    listed = lambda html: re.findall(r'<tr data-bundle="([^"]+)"', html)  # noqa: E731
    pages = [client.get(f"/brokers/broker-1/?page={n}").content.decode() for n in (1, 2, 3)]
    assert "bundles 1–3 of 8; page 1 of 3" in pages[0]
    assert 'rel="next" href="?page=2"' in pages[0]
    assert 'rel="prev"' not in pages[0]
    assert "bundles 7–8 of 8; page 3 of 3" in pages[2]
    assert 'rel="next"' not in pages[2]
    shown = [name for html in pages for name in listed(html)]
    assert sorted(shown) == sorted(b.name for b in Bundle.objects.select_related("namespace"))
    assert len(shown) == len(set(shown)) == 8
    # Past the last page, or not a number: the nearest page, as the namespaces list does.
    assert listed(client.get("/brokers/broker-1/?page=99").content.decode()) == listed(pages[2])
    assert listed(client.get("/brokers/broker-1/?page=x").content.decode()) == listed(pages[0])
    # A namespace's 4 bundles: 3 then 1, by hash range.
    first = client.get("/namespaces/acme/orders/bundles/").content.decode()
    second = client.get("/namespaces/acme/orders/bundles/?page=2").content.decode()
    lowers = [
        b.name
        for b in Bundle.objects.filter(namespace__name="acme/orders")
        .select_related("namespace")
        .order_by("lower")
    ]
    assert listed(first) + listed(second) == lowers
    assert "bundles 4–4 of 4; page 2 of 2" in second


def test_a_decisions_actions_are_paged_and_its_chart_gets_no_action(cluster, viewer):
    """A drain or a start plans thousands of actions: the decision page shows 100 a page,
    numbered in the plan's order, and the chart's data carries the brokers, not the actions."""
    from console.models import Decision

    actions = [
        {
            "kind": "unload",
            "bundle": f"acme/orders/0x{i:08x}_0x{i + 1:08x}",
            "source": "broker-1",
            "destination": "broker-2",
            "outcome": "planned",
            "explanation": f"move number {i + 1}",
        }
        for i in range(250)
    ]
    decision = Decision.objects.create(
        at=timezone.now(),
        kind=Decision.Kind.OPERATOR,
        strategy="Operator",
        reason="Operator",
        summary="250 unload(s)",
        details={"actions": actions},
    )
    client = Client()
    client.force_login(viewer)
    first = client.get(f"/decisions/{decision.pk}/").content.decode()
    last = client.get(f"/decisions/{decision.pk}/?page=3").content.decode()
    rows = lambda html: re.findall(r"move number (\d+)", html.split('id="actions"')[1])  # noqa: E731
    assert rows(first) == [str(n) for n in range(1, 101)]
    assert rows(last) == [str(n) for n in range(201, 251)]
    assert "<td>201</td>" in last
    assert "actions 201–250 of 250; page 3 of 3" in last
    assert "250 in all, 100 a page" in first
    chart = first.split('id="decision-data" type="application/json">')[1].split("</script>")[0]
    assert "move number" not in chart
    assert '"brokers"' in chart
