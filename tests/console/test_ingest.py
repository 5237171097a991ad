"""Load reports: checked whole before anything is written, kept in the live load store, folded
into the history in batches; each broker speaks only for itself."""

import json
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from console import loadstore, selectors
from console.models import AuditEvent, Broker, Bundle, LoadReport
from console.services import shedding_tick_run
from console.services.ingest import load_reports_fold
from tests.conftest import ingest, report

BUNDLE = "acme/orders/0x00000000_0x40000000"


def post(client, doc):
    return client.post("/api/load-reports/", doc, format="json")


def nothing_written():
    return loadstore.entry_get("broker-1") is None and load_reports_fold() == 0


def test_a_report_is_the_broker_s_newest_and_becomes_history_in_a_batch(cluster, broker_client):
    response = post(broker_client, report("broker-1", 42.0))
    assert response.status_code == 201, response.content
    assert response.json()["broker"] == "broker-1"
    row = next(r for r in selectors.broker_rankings() if r["name"] == "broker-1")
    assert row["score"] == 42.0
    assert LoadReport.objects.count() == 0  # the metadata store is not written per report
    assert load_reports_fold() == 1
    stored = LoadReport.objects.get()
    assert stored.broker.name == "broker-1"
    assert stored.weighted_usage_fraction == pytest.approx(0.42)


POISON = [
    (lambda d: d["cpu"].update(limit="lots"), "cpu.limit"),
    (lambda d: d["cpu"].update(usage=1e308, limit=1e-308), "cpu.usage"),
    (lambda d: d["cpu"].update(usage=1e6, limit=100), "cpu"),
    (lambda d: d.update(msgRateIn=-1), "msgRateIn"),
    (lambda d: d.update(msgRateIn=10**30), "msgRateIn"),
    (lambda d: d.update(topics=10**30), "topics"),
    (lambda d: d.pop("name"), "name"),
    (lambda d: d.update(bundles="all"), "bundles"),
    (lambda d: d.update(state="sleeping"), "state"),
    (lambda d: d.update(timestamp="yesterday"), "timestamp"),
    (lambda d: d.update(timestamp=1e20), "timestamp"),
    (lambda d: d.update(timestamp=time.time() + 3600 * 24 * 365 * 3000), "timestamp"),
    (
        lambda d: d.update(bundleStats={BUNDLE: {"msgRateIn": "x"}}),
        f"bundleStats.{BUNDLE}.msgRateIn",
    ),
    (lambda d: d.update(bundles=[BUNDLE, BUNDLE]), "bundles"),
    (
        lambda d: d.update(bundleStats={"acme/orders/0x40000000_0x80000000": {"msgRateIn": 1}}),
        "bundleStats.acme/orders/0x40000000_0x80000000",
    ),
]


@pytest.mark.parametrize(("mutate", "field"), POISON)
def test_a_poison_report_is_refused_naming_the_field_and_writes_nothing(
    owns_one, broker_client, mutate, field
):
    doc = report("broker-1", 42.0)
    mutate(doc)
    response = post(broker_client, doc)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["field"] == field
    assert nothing_written()
    # The next tick is fine.
    assert shedding_tick_run() is not None


def test_non_finite_numbers_duplicate_keys_and_deep_nesting_are_400(owns_one, broker_client):
    for body, field in (
        (b'{"name": "broker-1", "msgRateIn": Infinity}', "msgRateIn"),
        (b'{"name": "broker-1", "msgRateIn": NaN}', "msgRateIn"),
        (b'{"name": "broker-1", "msgRateIn": 1e999}', "msgRateIn"),
        (
            json.dumps({"name": "broker-1"})[:-1].encode()
            + f', "bundleStats": {{"{BUNDLE}": {{}}, "{BUNDLE}": {{}}}}}}'.encode(),
            BUNDLE,
        ),
        (b"[" * 100_000 + b"]" * 100_000, "body"),
        (b"not json", "body"),
    ):
        response = broker_client.post("/api/load-reports/", body, content_type="application/json")
        assert response.status_code == 400, (body[:60], response.content)
        assert response.json()["error"]["field"] == field
    assert nothing_written()


def test_more_stats_than_owned_bundles_is_400(owns_one, broker_client):
    stats = {f"acme/orders/0x{i:08x}_0x{i + 1:08x}": {} for i in range(3)}
    response = post(broker_client, report("broker-1", 1.0, stats=stats))
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "bundleStats"
    assert "3 bundle stats for the 1 bundle(s) broker-1 owns" in response.json()["error"]["message"]


def test_stats_for_another_broker_s_bundle_are_ownership_drift(owns_one, broker_client):
    bundle = Bundle.objects.select_related("namespace").get(namespace__name="acme/orders", lower=0)
    bundle.owner = Broker.objects.get(name="broker-2")
    bundle.save()
    other = Bundle.objects.select_related("namespace").get(namespace__name="acme/payments", lower=0)
    other.owner = Broker.objects.get(name="broker-1")
    other.save()
    response = post(broker_client, report("broker-1", 1.0, stats={BUNDLE: {"msgRateIn": 9}}))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "ownership_drift"
    assert error["drift"] == [BUNDLE]
    assert nothing_written()


def test_a_stale_or_replayed_timestamp_is_refused(owns_one, broker_client):
    now = time.time()
    assert post(broker_client, report("broker-1", 10.0, timestamp=now)).status_code == 201
    for stamp in (now, now - 600):
        response = post(broker_client, report("broker-1", 99.0, timestamp=stamp))
        assert response.status_code == 400
        assert response.json()["error"]["field"] == "timestamp"
    assert loadstore.entry_get("broker-1").report["cpu"]["usage"] == 10.0


def test_a_body_over_the_limit_is_a_json_413(owns_one, broker_client, settings):
    settings.FULCRUM_MAX_REPORT_BYTES = 1000
    doc = report("broker-1", 1.0, topics=1)
    doc["bundles"] = ["x" * 50] * 40
    response = post(broker_client, doc)
    assert response.status_code == 413
    assert "at most 1,000 bytes" in response.json()["error"]["message"]
    assert nothing_written()


def test_a_body_django_will_not_even_read_is_a_json_413_too(owns_one, broker_client, settings):
    settings.FULCRUM_MAX_REPORT_BYTES = 1000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000
    body = json.dumps({"name": "broker-1", "bundles": ["x" * 100] * 50}).encode()
    response = broker_client.post("/api/load-reports/", body, content_type="application/json")
    assert response.status_code == 413
    assert "at most 1,000 bytes" in response.json()["error"]["message"]
    assert nothing_written()


def test_unknown_broker_is_404_and_writes_nothing(cluster, broker_client):
    response = post(broker_client, report("ghost", 1.0))
    assert response.status_code == 404
    assert response.json()["error"]["field"] == "name"


def test_bundle_stats_fold_into_short_and_long_term_averages(owns_one, broker_client):
    now = time.time()
    for i, rate in enumerate((100.0, 300.0)):
        stats = {BUNDLE: {"msgRateIn": rate, "msgThroughputIn": rate * 1000, "topics": 3}}
        doc = report("broker-1", 10, bundles=[BUNDLE], stats=stats, timestamp=now + i)
        assert post(broker_client, doc).status_code == 201
    (bundle,) = selectors.bundles_with_loads(
        [Bundle.objects.select_related("namespace", "owner").get(pk=owns_one.pk)]
    )
    assert bundle.short_term["msgRateIn"] == pytest.approx(200.0)
    assert bundle.long_term["msgThroughputIn"] == pytest.approx(200_000.0)
    assert bundle.topics == 3
    assert loadstore.entry_get("broker-1").bundles["samples"].tolist() == [2]


def test_a_bad_stored_entry_never_stops_the_tick(owns_one, broker_client):
    # Whatever reaches the store was checked; a broker with no usable figures is 0 %.
    assert post(broker_client, report("broker-1", 50.0)).status_code == 201
    assert shedding_tick_run() is not None


# -- per-broker credentials --------------------------------------------------------------------


def token_client(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Broker {token}")
    return client


def test_a_broker_s_own_token_speaks_only_for_that_broker(owns_one, capsys):
    call_command("broker_token", "rotate", "broker-1")
    token = capsys.readouterr().out.strip()
    assert token.startswith("fbt_")
    client = token_client(token)
    assert post(client, report("broker-1", 10.0)).status_code == 201
    forged = post(client, report("broker-2", 99.0))
    assert forged.status_code == 403
    assert forged.json()["error"]["field"] == "name"
    assert loadstore.entry_get("broker-2") is None
    # It reads nothing else: not the audit, the decisions or the rankings.
    for path in ("/api/audit/", "/api/decisions/", "/api/rankings/", "/api/bundles/"):
        assert client.get(path).status_code == 403, path
    # Its ownership view is its own bundles and the unowned ones.
    owners = {b["owner"] for b in client.get("/api/ownership/").json()["bundles"]}
    assert owners == {"broker-1", None}
    stored = Broker.objects.get(name="broker-1").credentials.get()
    assert stored.token_sha256 != token
    assert token not in stored.prefix + stored.token_sha256


def test_rotating_or_revoking_a_token_stops_the_old_one_and_is_audited(owns_one, capsys):
    call_command("broker_token", "rotate", "broker-1")
    old = capsys.readouterr().out.strip()
    call_command("broker_token", "rotate", "broker-1")
    new = capsys.readouterr().out.strip()
    assert post(token_client(old), report("broker-1", 1.0)).status_code == 401
    assert post(token_client(new), report("broker-1", 1.0)).status_code == 201
    call_command("broker_token", "revoke", "broker-1")
    assert post(token_client(new), report("broker-1", 1.0)).status_code == 401
    reasons = list(AuditEvent.objects.filter(action="credential").values_list("reason", flat=True))
    assert len(reasons) == 3
    assert any("1 earlier token(s) revoked" in r for r in reasons)


def test_without_demo_mode_the_shared_token_is_refused(owns_one, settings):
    shared = settings.FULCRUM_BROKER_TOKEN
    settings.FULCRUM_BROKER_TOKEN = ""  # what the production profile sets
    assert post(token_client(shared), report("broker-1", 1.0)).status_code == 401


def test_load_reports_need_a_broker_token(cluster, operator_client):
    assert APIClient().post(
        "/api/load-reports/", report("broker-1", 1.0), format="json"
    ).status_code in (401, 403)
    assert post(operator_client, report("broker-1", 1.0)).status_code == 403
    assert post(token_client("wrong"), report("broker-1", 1.0)).status_code == 401


def test_a_damaged_stored_entry_is_skipped_and_the_tick_runs(owns_one, broker_client):
    assert post(broker_client, report("broker-2", 20.0)).status_code == 201
    loadstore.client().hset(
        f"{django_settings.FULCRUM_LOAD_STORE_PREFIX}broker:broker-1",
        mapping={"report": b'{"cpu": "broken"}', "bundles": b""},
    )
    assert shedding_tick_run() is not None
    rows = {r["name"]: r for r in selectors.broker_rankings()}
    assert rows["broker-1"]["score"] == 0.0
    assert rows["broker-2"]["score"] == 20.0


def test_the_console_rotates_a_broker_token_and_shows_it_once(owns_one, client):
    User.objects.create_superuser("root")
    client.force_login(User.objects.get(username="root"))
    broker = Broker.objects.get(name="broker-1")
    response = client.post(
        "/admin/console/broker/",
        {"action": "rotate_token", "_selected_action": [broker.pk]},
        follow=True,
    )
    shown = [str(m) for m in response.context["messages"]]
    token = shown[0].split("new token ")[1].split(" ")[0]
    assert post(token_client(token), report("broker-1", 5.0)).status_code == 201
    assert AuditEvent.objects.filter(action="credential", actor__username="root").exists()


def test_the_fold_sends_dashboards_the_whole_rankings_once_then_only_what_changed(
    cluster, monkeypatch
):
    from console import realtime

    sent = []
    monkeypatch.setattr(realtime, "publish", lambda kind, payload: sent.append((kind, payload)))
    for name, cpu in (("broker-1", 10), ("broker-2", 20), ("broker-3", 30)):
        ingest(report(name, cpu), as_broker=name)
    assert load_reports_fold() == 3
    ingest(report("broker-2", 50), as_broker="broker-2")
    assert load_reports_fold() == 1
    (kind, first), (_, second) = sent
    assert kind == realtime.LOAD_REPORTED
    assert first["full"] is True
    assert [r["name"] for r in first["changed"]] == first["order"]
    assert first["order"] == ["broker-1", "broker-2", "broker-3"]
    assert second["full"] is False
    # broker-2's load changed, and broker-3's rank with it; broker-1 is not sent again.
    assert [(r["name"], r["rank"]) for r in second["changed"]] == [("broker-3", 2), ("broker-2", 3)]
    assert second["changed"][1]["score"] == 50.0
    assert second["order"] == ["broker-1", "broker-3", "broker-2"]
    assert second["cv"] > first["cv"]


def test_a_rankings_delta_names_new_changed_and_reordered_rows():
    from console.realtime import rankings_delta

    a, b = {"name": "a", "score": 1.0}, {"name": "b", "score": 2.0}
    assert rankings_delta(None, [a, b]) == {"full": True, "order": ["a", "b"], "changed": [a, b]}
    moved = {"name": "a", "score": 3.0}
    assert rankings_delta([a, b], [b, moved]) == {
        "full": False,
        "order": ["b", "a"],
        "changed": [moved],
    }
    assert rankings_delta([a, b], [a, b])["changed"] == []


def topics_of(bundle_lower, bundle_upper, count, namespace="acme/orders"):
    from balancer.hashing import topic_hash

    names = (f"persistent://{namespace}/t{i}" for i in range(10_000))
    return [n for n in names if bundle_lower <= topic_hash(n) < bundle_upper][:count]


def test_per_topic_stats_are_checked_and_reach_the_snapshot(owns_one, broker_client):
    from datetime import UTC, datetime

    from balancer.hashing import topic_hash

    mine = topics_of(0, 0x40000000, 4)
    listed = [
        {"topic": t, "msgRateIn": 10.0 * (i + 1), "msgRateOut": 1.0, "msgThroughputIn": 100.0}
        for i, t in enumerate(mine)
    ]

    def with_topics(topic_stats):
        stats = {BUNDLE: {"msgRateIn": 104.0, "topics": 4, "topicStats": topic_stats}}
        return report("broker-1", 20, bundles=[BUNDLE], stats=stats)

    elsewhere = topics_of(0x40000000, 0x80000000, 1)[0]
    for bad, why in (
        ([*listed, {"topic": elsewhere}], "is not in bundle"),
        ([*listed, {"topic": "persistent://acme/payments/x"}], "is not in bundle"),
        ([*listed, listed[0]], "listed twice"),
        ([{"topic": "nonsense"}], "not a topic name"),
        ([{"topic": mine[0], "msgRateIn": -1}], "greater than or equal to 0"),
        ([{"msgRateIn": 1}], "Field required"),
    ):
        response = post(broker_client, with_topics(bad))
        assert response.status_code == 400, (bad, response.content)
        assert why in response.json()["error"]["message"]
        assert response.json()["error"]["field"].startswith(f"bundleStats.{BUNDLE}.topicStats.")
        assert nothing_written()
    assert post(broker_client, with_topics(listed)).status_code == 201
    snapshot = selectors.cluster_snapshot_get(now=datetime.now(UTC))
    topics = snapshot.bundle_topics[BUNDLE]
    assert [(t.name, t.hash) for t in topics] == [(t, topic_hash(t)) for t in mine]
    assert [t.msg_rate for t in topics] == [11.0, 21.0, 31.0, 41.0]
    assert [t.throughput for t in topics] == [100.0] * 4
    # A report without them: the bundle has none any more.
    assert post(broker_client, report("broker-1", 20, bundles=[BUNDLE])).status_code == 201
    assert BUNDLE not in selectors.cluster_snapshot_get(now=datetime.now(UTC)).bundle_topics


def test_a_damaged_topic_list_in_the_store_is_skipped(owns_one, broker_client):
    from datetime import UTC, datetime

    assert post(broker_client, report("broker-1", 20, bundles=[BUNDLE])).status_code == 201
    key = f"{django_settings.FULCRUM_LOAD_STORE_PREFIX}topics:broker-1"
    for damaged in (b"not json", b"[1, 2]", json.dumps({BUNDLE: [["t", "x", 1, 2]]}).encode()):
        loadstore.client().set(key, damaged)
        snapshot = selectors.cluster_snapshot_get(now=datetime.now(UTC))
        assert snapshot.bundle_topics == {}
        assert snapshot.brokers["broker-1"].reported_at is not None  # the report still counts
