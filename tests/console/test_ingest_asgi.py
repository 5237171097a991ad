"""The brokers' hot path: ``POST /api/load-reports/`` with a broker token goes to the bare ASGI
app (``console.api.ingest_asgi``), which answers exactly as the DRF view does; the process's
caches of ownership and of the last entry never let a report through that the database would
refuse."""

import json
import time

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.core.management import call_command
from rest_framework.test import APIClient

from console import loadstore
from console.api import ingest_asgi
from console.errors import ConsoleError
from console.models import Broker, Bundle
from console.services import ingest as ingest_service
from tests.conftest import ingest, report
from tests.console.test_ingest import BUNDLE, POISON

# The ASGI app runs its database reads on Django's sync thread: its own connection, which sees
# only committed rows.
pytestmark = pytest.mark.django_db(transaction=True)


def asgi_post(body, *, token=None, headers=None):
    """POST ``body`` (a document, or bytes) through the whole ASGI entry point."""
    from console.asgi import application

    token = token or django_settings.FULCRUM_BROKER_TOKEN
    content = body if isinstance(body, bytes) else json.dumps(body).encode()

    async def send():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.post(
                "/api/load-reports/",
                content=content,
                headers={
                    "Authorization": f"Broker {token}".encode("latin-1"),
                    "Content-Type": "application/json",
                    **(headers or {}),
                },
            )

    return async_to_sync(send)()


def django_post(body, *, token=None):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Broker {token or django_settings.FULCRUM_BROKER_TOKEN}")
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post("/api/load-reports/", content, content_type="application/json")


def test_a_report_through_the_asgi_app_is_stored_and_answered_like_the_view(owns_one):
    stats = {BUNDLE: {"msgRateIn": 100.0, "topics": 2}}
    response = asgi_post(report("broker-1", 42.0, bundles=[BUNDLE], stats=stats))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["broker"] == "broker-1"
    assert body["bundles"] == 1
    entry = loadstore.entry_get("broker-1")
    assert entry.report["cpu"]["usage"] == 42.0
    assert entry.bundles["short"][0][0] == 100.0
    assert response.headers["content-type"] == "application/json"
    # The view answers the same shape.
    later = report("broker-1", 43.0, bundles=[BUNDLE], stats=stats, timestamp=time.time() + 1)
    assert set(django_post(later).json()) == set(body)


@pytest.mark.parametrize(("mutate", "field"), POISON)
def test_a_poison_report_gets_the_view_s_answer_and_writes_nothing(owns_one, mutate, field):
    doc = report("broker-1", 42.0)
    mutate(doc)
    fast, slow = asgi_post(doc), django_post(doc)
    assert (fast.status_code, fast.json()) == (slow.status_code, slow.json())
    assert fast.status_code == 400
    assert fast.json()["error"]["field"] == field
    assert loadstore.entry_get("broker-1") is None


def test_bad_json_tokens_and_sizes_get_the_view_s_answers(owns_one, settings):
    for body in (b"not json", b'{"name": "broker-1", "msgRateIn": NaN}', b"[" * 100_000):
        fast, slow = asgi_post(body), django_post(body)
        assert (fast.status_code, fast.json()) == (slow.status_code, slow.json()), body[:40]
    fast, slow = (
        asgi_post(report("broker-1", 1.0), token="wrong"),
        django_post(report("broker-1", 1.0), token="wrong"),
    )
    assert (
        (fast.status_code, fast.json())
        == (slow.status_code, slow.json())
        == (
            401,
            {
                "error": {
                    "code": "not_authenticated",
                    "message": "invalid broker token",
                    "field": None,
                }
            },
        )
    )
    assert fast.headers["www-authenticate"] == "Broker"
    settings.FULCRUM_MAX_REPORT_BYTES = 1000
    big = report("broker-1", 1.0)
    big["bundles"] = ["x" * 50] * 40
    fast = asgi_post(big)
    assert fast.status_code == 413
    assert "at most 1,000 bytes" in fast.json()["error"]["message"]
    assert loadstore.entry_get("broker-1") is None


def test_a_broker_token_speaks_only_for_its_broker_on_the_hot_path(owns_one, capsys):
    call_command("broker_token", "rotate", "broker-1")
    token = capsys.readouterr().out.strip()
    assert asgi_post(report("broker-1", 10.0), token=token).status_code == 201
    forged = asgi_post(report("broker-2", 99.0), token=token)
    assert forged.status_code == 403
    assert forged.json()["error"]["field"] == "name"
    assert loadstore.entry_get("broker-2") is None


def test_only_broker_reports_take_the_hot_path(settings):
    def scope(**changes):
        base = {
            "type": "http",
            "method": "POST",
            "path": "/api/load-reports/",
            "scheme": "http",
            "headers": [(b"host", b"testserver"), (b"authorization", b"Broker t")],
        }
        return {**base, **changes}

    assert ingest_asgi.handles(scope())
    assert not ingest_asgi.handles(scope(method="GET"))
    assert not ingest_asgi.handles(scope(path="/api/load-reports"))
    assert not ingest_asgi.handles(scope(headers=[(b"host", b"testserver")]))
    assert not ingest_asgi.handles(
        scope(headers=[(b"host", b"testserver"), (b"authorization", b"Bearer t")])
    )
    assert not ingest_asgi.handles(
        scope(headers=[(b"host", b"evil.example"), (b"authorization", b"Broker t")])
    )
    settings.SECURE_SSL_REDIRECT = True
    assert not ingest_asgi.handles(scope())  # Django redirects it to HTTPS
    assert ingest_asgi.handles(scope(scheme="https"))


def test_everything_but_a_broker_token_meets_the_view(owns_one, operator, client, monkeypatch):
    from console.asgi import application

    def not_here(*args):
        raise AssertionError("the hot path answered a request that is Django's")

    monkeypatch.setattr(ingest_asgi, "app", not_here)
    client.force_login(operator)

    async def send(headers):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://testserver",
            cookies={name: morsel.value for name, morsel in client.cookies.items()},
        ) as c:
            return await c.post("/api/load-reports/", json=report("broker-1", 1.0), headers=headers)

    as_operator = async_to_sync(send)({})
    assert as_operator.status_code == 403  # DRF's answer (CSRF: a session posts no reports)
    assert as_operator.json()["error"]["code"] == "forbidden"
    # The keyword is DRF's, exactly: "broker <token>" is not a broker token there either.
    lowercase = async_to_sync(send)(
        {"Authorization": f"broker {django_settings.FULCRUM_BROKER_TOKEN}"}
    )
    assert lowercase.status_code == 403
    assert loadstore.entry_get("broker-1") is None


def test_a_token_of_any_text_is_a_401_not_a_500(owns_one):
    response = asgi_post(report("broker-1", 1.0), token="tökén")
    assert response.status_code == 401
    assert django_post(report("broker-1", 1.0), token="tökén").status_code == 401


def test_without_redis_a_report_is_a_503_and_nothing_is_written(owns_one, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0))
    assert refused.value.status == 503
    assert "Redis" in refused.value.message


# -- the process's caches ----------------------------------------------------------------------


def test_a_bundle_the_balancer_moves_is_drift_at_once_for_its_old_owner(owns_one, operator):
    from console.services import bundle_unload

    other = Bundle.objects.get(namespace__name="acme/orders", lower=0x40000000)
    other.owner = Broker.objects.get(name="broker-1")
    other.save()
    both = [BUNDLE, "acme/orders/0x40000000_0x80000000"]
    assert ingest(report("broker-1", 1.0, bundles=both)).bundles.size == 2  # now cached
    bundle_unload(BUNDLE, actor=operator, destination="broker-2")  # plan_apply, bulk update
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0, bundles=both, timestamp=time.time() + 1))
    # Checked against the cached copy (2 bundles) it would have passed.
    assert refused.value.message == "2 bundle stats for the 1 bundle(s) broker-1 owns"


def test_a_moved_bundle_is_ownership_drift_at_once_for_its_old_owner(owns_one):
    assert ingest(report("broker-1", 1.0, bundles=[BUNDLE])) is not None  # ownership now cached
    Bundle.objects.filter(pk=owns_one.pk).update(owner=Broker.objects.get(name="broker-2"))
    loadstore.ownership_changing()  # what plan_apply says after its bulk update
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0, bundles=[BUNDLE], timestamp=time.time() + 1))
    assert refused.value.field.startswith("bundleStats")  # it owns nothing now
    assert ingest(report("broker-2", 1.0, bundles=[BUNDLE])).bundles.size == 1


def test_a_moved_bundle_is_seen_once_the_cached_copy_is_too_old(owns_one, monkeypatch):
    assert ingest(report("broker-1", 1.0, bundles=[BUNDLE])) is not None
    # A writer that does not announce the change (raw SQL): the cached copy still believes it...
    Bundle.objects.filter(pk=owns_one.pk).update(owner=None)
    assert ingest(report("broker-1", 1.0, bundles=[BUNDLE], timestamp=time.time() + 1))
    # ...until it is older than _OWNED_MAX_AGE_S.
    monkeypatch.setattr(ingest_service, "_OWNED_MAX_AGE_S", 0.0)
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0, bundles=[BUNDLE], timestamp=time.time() + 2))
    assert refused.value.field.startswith("bundleStats")


def test_a_newly_owned_bundle_is_accepted_although_the_cached_copy_lacks_it(owns_one):
    other = "acme/orders/0x40000000_0x80000000"
    assert ingest(report("broker-1", 1.0, bundles=[BUNDLE])) is not None
    second = Bundle.objects.get(namespace__name="acme/orders", lower=0x40000000)
    second.owner = Broker.objects.get(name="broker-1")
    second.save()
    entry = ingest(report("broker-1", 1.0, bundles=[BUNDLE, other], timestamp=time.time() + 1))
    assert entry.bundles.size == 2


def test_an_entry_written_by_another_process_is_folded_not_overwritten(owns_one):
    now = time.time()

    def rate_at(rate, at):
        stats = {BUNDLE: {"msgRateIn": rate}}
        return ingest(report("broker-1", 1.0, bundles=[BUNDLE], stats=stats, timestamp=at))

    rate_at(100.0, now)
    # Another web process takes the next report: this process's copy of the entry is stale.
    loadstore._recent.clear()
    rate_at(300.0, now + 1)
    stale_copy = loadstore.entry_get("broker-1")
    loadstore._recent.put("broker-1", "0.0", stale_copy)  # an "at" the store no longer has
    entry = rate_at(500.0, now + 2)
    assert entry.bundles["samples"].tolist() == [3]
    assert entry.bundles["short"][0][0] == pytest.approx((100 + 300 + 500) / 3)
    # A report older than the stored one is stale even when this process's copy says otherwise.
    loadstore._recent.put("broker-1", "0.0", stale_copy)
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0, timestamp=now + 1.5))
    assert refused.value.field == "timestamp"


def test_a_removed_broker_s_bundles_are_drift_for_it_at_once(owns_one):
    assert ingest(report("broker-1", 1.0, bundles=[BUNDLE])) is not None
    version = async_to_sync(loadstore.ownership_version)()
    Broker.objects.create(name="broker-9", cluster=owns_one.namespace.tenant.cluster)
    assert async_to_sync(loadstore.ownership_version)() == version  # a new broker owns nothing
    Broker.objects.get(name="broker-1").delete()
    assert async_to_sync(loadstore.ownership_version)() != version
    with pytest.raises(ConsoleError) as refused:
        ingest(report("broker-1", 1.0, bundles=[BUNDLE], timestamp=time.time() + 1))
    assert refused.value.status == 404
