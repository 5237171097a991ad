"""While the live load store (Redis) is away, every page and read API answers 200 from the last
figures the process read, with a banner (pages) and ``X-Fulcrum-Stale`` (every read), and
recovers by itself; the shedding loop plans nothing on stale loads (issue 23, item 3)."""

import time

import pytest
import redis
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator

from console import loadstore
from console.models import Bundle, Decision
from tests.conftest import owned_and_reported
from tests.support import free_port


@pytest.fixture
def world(cluster, operator):
    yield owned_and_reported(lambda i: 20 + 10 * i)
    loadstore.outage_check()  # Redis answers again: this process's outage ends


@pytest.fixture
def redis_away(settings):
    """Point the live load store at a port nobody listens on (connection refused); ``back()``
    points it at the tests' Redis again."""
    real = settings.REDIS_URL

    def away():
        settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"

    def back():
        settings.REDIS_URL = real

    away.back = back
    yield away
    back()


def read_apis() -> list[str]:
    """Every GET endpoint the OpenAPI schema lists without a path parameter."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        path
        for path, operations in document["paths"].items()
        if "get" in operations and "{" not in path
    )


PAGES = [
    "/",
    "/bundles/",
    "/domains/",
    "/config/",
    "/namespaces/",
    "/audit/",
    "/reports/",
    "/pulsar/",
]


def test_pages_and_read_apis_answer_from_the_last_figures_with_a_banner(
    world, redis_away, client, operator
):
    from console.services.shedding import shedding_tick_run

    client.force_login(operator)
    broker = world[-1].name
    pages = [*PAGES, f"/brokers/{broker}/", "/namespaces/acme/orders/bundles/"]
    before = {url: client.get(url) for url in pages}
    assert all(r.status_code == 200 for r in before.values())
    rankings = client.get("/api/rankings/").json()
    redis_away()
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert 'id="store-outage"' in body, url
        assert "Live load store unreachable" in body
        assert "the last this process read" in body
        assert response["X-Fulcrum-Stale"].startswith("live load store unreachable since ")
    apis = read_apis()
    assert "/api/rankings/" in apis
    assert len(apis) >= 10
    query = {"/api/lookup/": "?topic=persistent://acme/orders/t-1"}
    for url in apis:
        response = client.get(url + query.get(url, ""))
        assert response.status_code == 200, (url, response.content[:200])
        assert "X-Fulcrum-Stale" in response
    with override_settings(FULCRUM_METRICS_PUBLIC=True):
        assert client.get("/metrics").status_code == 200
    # The figures are the last ones read, not zeros.
    assert client.get("/api/rankings/").json() == rankings
    # The loop plans nothing on stale loads: the tick fails (its lease lets the next one run).
    decisions = Decision.objects.count()
    with pytest.raises(redis.exceptions.ConnectionError):
        shedding_tick_run()
    assert Decision.objects.count() == decisions


def test_the_banner_goes_as_soon_as_redis_answers(world, redis_away, client, operator):
    client.force_login(operator)
    client.get("/")
    redis_away()
    assert 'id="store-outage"' in client.get("/").content.decode()
    redis_away.back()
    time.sleep(loadstore.PROBE_S)
    response = client.get("/")
    assert 'id="store-outage"' not in response.content.decode()
    assert "X-Fulcrum-Stale" not in response


def test_a_write_while_redis_is_away_answers_503_and_does_nothing(
    world, redis_away, client, operator
):
    """An operator's unload (previewed or not) while the live load store is away: 503 saying
    why, with Retry-After, nothing moved or audited (not a 500)."""
    from console.models import AuditEvent

    client.force_login(operator)
    bundle = Bundle.objects.filter(owner__isnull=False).first()
    owner, audited = bundle.owner_id, AuditEvent.objects.count()
    redis_away()
    for body in ({"preview": True}, {"preview": False, "reason": "while Redis is away"}):
        answer = client.post(
            f"/api/bundles/{bundle.pk}/unload/", body, content_type="application/json"
        )
        assert answer.status_code == 503, answer.content
        assert answer["Retry-After"] == "5"
        assert answer.json()["error"]["message"].startswith(
            "the live load store (Redis) is unreachable, nothing was done"
        )
    bundle.refresh_from_db()
    assert bundle.owner_id == owner
    assert AuditEvent.objects.count() == audited
