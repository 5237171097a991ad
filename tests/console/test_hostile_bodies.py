"""Hostile bodies on every endpoint that takes one (listed from the OpenAPI schema, so that a
new endpoint is covered the day it is added): each answers 4xx naming what is wrong, never 5xx,
and nothing moves, is audited or saved."""

import json

import pytest
from drf_spectacular.generators import SchemaGenerator

from console.models import (
    AuditEvent,
    Bundle,
    ConfigVersion,
    PulsarConnection,
    ReportRun,
)
from console.services.bodies import OPERATOR_BODY_MAX_BYTES
from tests.conftest import owned_and_reported


def write_operations() -> list[tuple[str, str]]:
    """(method, path template) of every operation with a body or a write method."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        (method, path)
        for path, operations in document["paths"].items()
        for method in operations
        if method in ("post", "put", "patch")
    )


# (what, body, content type, the statuses it may answer). 400 naming the fault; 413 for size;
# 415 for a body that is not JSON by its type. Top-level non-objects may also be refused by the
# view's own validation (still 400).
DEEP_ARRAY = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
HOSTILE = [
    ("10 MB body", b'{"reason": "' + b"x" * 10_000_000 + b'"}', "application/json", {413}),
    (
        "just over the operator limit",
        b'{"reason": "' + b"x" * OPERATOR_BODY_MAX_BYTES + b'"}',
        "application/json",
        {413},
    ),
    ("100,000-deep array", DEEP_ARRAY, "application/json", {400}),
    ("100,000-deep object", DEEP_OBJECT, "application/json", {400}),
    ("duplicate key", b'{"preview": true, "preview": false}', "application/json", {400}),
    ("duplicate nested key", b'{"values": {"a": 1, "a": 2}}', "application/json", {400}),
    ("NaN", b'{"reason": NaN}', "application/json", {400}),
    ("Infinity", b'{"force": Infinity}', "application/json", {400}),
    ("1e999", b'{"positions": [1e999]}', "application/json", {400}),
    ("invalid UTF-8", b'{"reason": "\xff\xfe"}', "application/json", {400}),
    ("lone surrogate", b'{"reason": "\\ud800"}', "application/json", {400}),
    ("not JSON", b"preview=false", "application/json", {400}),
    ("truncated", b'{"preview": tr', "application/json", {400}),
    ("a list", b"[]", "application/json", {400}),
    ("a string", b'"unload"', "application/json", {400}),
    ("a number", b"7", "application/json", {400}),
    ("null", b"null", "application/json", {400}),
    (
        "form with a duplicate",
        b"preview=true&preview=false",
        "application/x-www-form-urlencoded",
        {415},
    ),
    ("multipart", b"--x\r\n\r\n--x--\r\n", "multipart/form-data; boundary=x", {415}),
]


@pytest.fixture
def world(cluster, broker_client, operator, operator_client):
    """Owners, reports, one audited unload (for /audit/{id}/undo/), a config version, a Pulsar
    connection and a report run: every path parameter names something real."""
    brokers = owned_and_reported()
    bundle = Bundle.objects.first()
    assert operator_client.post(f"/api/bundles/{bundle.pk}/unload/").status_code == 200
    values = operator_client.get("/api/config/").json()["values"]
    draft = {**values, "shedder": "uniform_load_shedder"}
    saved = operator_client.post("/api/config/", {"values": draft})
    assert saved.status_code == 200, saved.content
    ids = {
        "audit": AuditEvent.objects.filter(action="unload").latest("id").pk,
        "bundles": bundle.pk,
        "brokers": brokers[0].name,
        "versions": ConfigVersion.objects.latest("id").pk,
        "pulsar": PulsarConnection.objects.create(name="p", admin_url="http://p:8080").pk,
        "reports": ReportRun.objects.create(master="local[2]", kind=ReportRun.Kind.REPORT).pk,
    }
    return ids


def filled(template: str, ids: dict) -> str:
    """``template`` with its path parameter replaced by the id of the thing it names."""
    parts = template.strip("/").split("/")
    for i, part in enumerate(parts):
        if part.startswith("{"):
            parts[i] = str(ids[parts[i - 1]])
    return "/" + "/".join(parts) + "/"


def state() -> tuple:
    """What a hostile body must not change: owners, audit, config versions, runs."""
    return (
        sorted(Bundle.objects.values_list("pk", "owner_id")),
        AuditEvent.objects.count(),
        ConfigVersion.objects.count(),
        sorted(ReportRun.objects.values_list("pk", "status")),
        list(PulsarConnection.objects.values_list("mode", "is_attached")),
    )


def test_every_body_endpoint_refuses_every_hostile_body_with_a_4xx(
    world, operator_client, broker_client
):
    operations = write_operations()
    assert len(operations) >= 15  # the schema was read, not an empty list
    before = state()
    failures = []
    for method, template in operations:
        path = filled(template, world)
        client = broker_client if template == "/api/load-reports/" else operator_client
        for what, body, content_type, allowed in HOSTILE:
            if template == "/api/load-reports/" and what == "just over the operator limit":
                continue  # the load-report limit is 4 MiB (FULCRUM_MAX_REPORT_BYTES)
            response = getattr(client, method)(path, body, content_type=content_type)
            if response.status_code not in allowed | ({400} if 415 in allowed else set()):
                failures.append((template, what, response.status_code, response.content[:160]))
                continue
            if not response.json().get("error", {}).get("message"):
                failures.append((template, what, response.status_code, response.content[:160]))
    assert failures == [], "\n".join(map(str, failures))
    assert state() == before


def test_a_duplicated_preview_key_is_refused_naming_it_and_nothing_moves(world, operator_client):
    bundle = Bundle.objects.exclude(owner=None).last()
    owner = bundle.owner_id
    audited = AuditEvent.objects.count()
    response = operator_client.post(
        f"/api/bundles/{bundle.pk}/unload/",
        b'{"preview": true, "preview": false}',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "'preview' appears twice",
        "field": "preview",
    }
    bundle.refresh_from_db()
    assert bundle.owner_id == owner
    assert AuditEvent.objects.count() == audited


def test_a_deep_document_names_the_limit_and_a_big_one_its_size(world, operator_client):
    response = operator_client.post("/api/config/", DEEP_OBJECT, content_type="application/json")
    assert response.status_code == 400
    assert "nested deeper than 200 levels" in response.json()["error"]["message"]
    big = json.dumps({"reason": "x" * (OPERATOR_BODY_MAX_BYTES + 10)}).encode()
    response = operator_client.post("/api/config/", big, content_type="application/json")
    assert response.status_code == 413
    assert f"at most {OPERATOR_BODY_MAX_BYTES:,} bytes" in response.json()["error"]["message"]
    # Over Django's own limit the middleware answers before any view reads the body.
    response = operator_client.post(
        "/api/config/", b"x" * 10_000_000, content_type="application/json"
    )
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "body"


def test_html_forms_refuse_a_body_over_the_limit_with_413(world, client, operator):
    client.force_login(operator)
    response = client.post(
        "/config/", b"x" * 10_000_000, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 413
