import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from console.models import AuditEvent, Broker, Bundle
from tests.conftest import bundle_load, report


@pytest.fixture
def owned(cluster, broker_client):
    brokers = list(Broker.objects.all())
    for i, bundle in enumerate(Bundle.objects.all()):
        bundle.owner = brokers[i % 3]
        bundle.save()
    for b in brokers:
        broker_client.post("/api/load-reports/", report(b.name, 20), format="json")
    return Bundle.objects.select_related("namespace").first()


def test_operator_unloads_through_the_api(owned, operator_client):
    response = operator_client.post(f"/api/bundles/{owned.pk}/unload/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["bundle"] == owned.name
    assert body["source"]
    assert AuditEvent.objects.filter(action="unload", actor__username="alice").count() == 1


def test_viewers_may_read_but_not_unload(owned, viewer):
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.get("/api/bundles/").status_code == 200
    assert client.get("/api/rankings/").status_code == 200
    assert client.post(f"/api/bundles/{owned.pk}/unload/").status_code == 403
    assert AuditEvent.objects.count() == 0


def test_anonymous_gets_nothing(owned):
    assert APIClient().get("/api/bundles/").status_code == 401
    assert APIClient().get("/api/audit/").status_code == 401


@override_settings(FULCRUM_READ_ONLY=True)
def test_read_only_mode_refuses_every_operator_action(owned, operator_client):
    response = operator_client.post(f"/api/bundles/{owned.pk}/unload/")
    assert response.status_code == 403
    error = response.json()["error"]  # the one error shape, DRF's refusals too
    assert (error["code"], error["field"]) == ("forbidden", None)
    assert "read-only" in error["message"]
    assert operator_client.post("/api/reports/").status_code == 403


def test_unload_of_unowned_bundle_is_409_with_reason(cluster, operator_client):
    bundle = Bundle.objects.first()
    response = operator_client.post(f"/api/bundles/{bundle.pk}/unload/")
    assert response.status_code == 409
    assert "nothing to unload" in response.json()["error"]["message"]


def test_lookup_and_ownership_for_brokers(cluster, broker_client):
    response = broker_client.get("/api/lookup/", {"topic": "persistent://acme/orders/x"})
    assert response.status_code == 200
    owner = response.json()["owner"]
    ownership = broker_client.get("/api/ownership/").json()["bundles"]
    assert len(ownership) == 8
    assert [b["owner"] for b in ownership if b["name"] == response.json()["bundle"]] == [owner]
    assert broker_client.get("/api/lookup/").status_code == 400


def test_rankings_are_least_loaded_first_with_the_cv(owned, operator_client, broker_client):
    broker_client.post("/api/load-reports/", report("broker-2", 80), format="json")
    body = operator_client.get("/api/rankings/").json()
    assert [r["name"] for r in body["rankings"]][-1] == "broker-2"
    assert body["rankings"][-1]["score"] == 80.0
    assert body["cv"] == pytest.approx(0.7071, abs=1e-3)  # 20/20/80: std 28.28 / mean 40


def test_decisions_and_audit_are_listed(owned, operator_client):
    operator_client.post(f"/api/bundles/{owned.pk}/unload/")
    page = operator_client.get("/api/audit/").json()
    assert page["count"] == 1
    audit = page["results"]
    assert [e["action"] for e in audit] == ["unload"]  # one row per move, with its destination
    assert audit[0]["destination"]
    decision = operator_client.get("/api/decisions/").json()["results"][0]
    assert decision["kind"] == "operator"
    assert [a["kind"] for a in decision["details"]["actions"]] == ["unload", "place"]


def test_openapi_schema_is_served(operator_client):
    response = operator_client.get("/api/schema/")
    assert response.status_code == 200


def test_operators_drain_and_activate_brokers_through_the_api(owned, operator_client, viewer):
    response = operator_client.post("/api/brokers/broker-2/drain/")
    # broker-2 owns nothing: the drain completes in the same plan.
    assert response.json() == {"broker": "broker-2", "state": "drained"}
    assert operator_client.post("/api/brokers/broker-2/activate/").json()["state"] == "active"
    assert operator_client.post("/api/brokers/ghost/drain/").status_code == 404
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.post("/api/brokers/broker-2/drain/").status_code == 403


def test_operators_split_through_the_api_with_positions(owned, operator_client, broker_client):
    bundle = Bundle.objects.select_related("namespace", "owner").get(
        namespace__name="acme/orders", lower=0
    )
    bundle_load(bundle.name, topics=4)
    # Its owner reports the bundle's 4 topics.
    posted = broker_client.post(
        "/api/load-reports/", report(bundle.owner.name, 20, bundles=[bundle.name]), format="json"
    )
    assert posted.status_code == 201, posted.content
    bundle.save()
    response = operator_client.post(
        f"/api/bundles/{bundle.pk}/split/",
        {"algorithm": "specified_positions_divide", "positions": ["0x10000000", "0x30000000"]},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["boundaries"] == ["0x10000000", "0x30000000"]
    bad = operator_client.post(
        f"/api/bundles/{bundle.pk}/split/", {"positions": ["zz"]}, format="json"
    )
    assert bad.status_code in (400, 404)


def test_the_registry_is_served_for_the_config_editor(operator_client):
    body = operator_client.get("/api/strategies/").json()
    by_name = {(e["kind"], e["name"]): e for e in body["strategies"]}
    assert by_name[("shedder", "ThresholdShedder")]["inConsole"] is True
    assert by_name[("split", "topic_count_equally_divide")]["inConsole"] is True
    assert "per-topic stats" in by_name[("split", "topic_count_equally_divide")]["summary"]
    assert by_name[("placement", "AvgShedder")]["whyNot"]
    assert by_name[("shedder", "danube")]["inConsole"] is True
    first = by_name[("shedder", "ThresholdShedder")]["parameters"][0]
    assert first == {
        "key": "loadBalancerBrokerThresholdShedderPercentage",
        "unit": "%",
        "default": 10.0,
        "minimum": 0.0,
        "maximum": 100.0,
        "source": "PULSAR.md §12",
    }


def _state():
    """Everything an operator action could write."""
    return (
        sorted(Bundle.objects.values_list("namespace_id", "lower", "owner_id")),
        sorted(Broker.objects.values_list("name", "state")),
        AuditEvent.objects.count(),
    )


def test_previews_plan_and_write_nothing(owned, operator_client):
    owner = Bundle.objects.select_related("owner").get(pk=owned.pk).owner.name
    before = _state()
    unload = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name, "preview": True}, format="json"
    ).json()
    assert unload["preview"] is True
    assert unload["owner"] == owner
    assert [a["kind"] for a in unload["plan"]["actions"]] == ["unload", "place"]
    choices = {d["broker"]: d for d in unload["destinations"]}
    assert choices[owner] == {
        "broker": owner,
        "eligible": False,
        "why": "the bundle's owner",
        "warning": None,
    }
    assert any(d["eligible"] for d in unload["destinations"])
    # The split algorithms this bundle's data allows: those that cut by topics only with its
    # owner's per-topic stats (this owner reports none), the others always.
    splits = {c["name"]: c for c in unload["splits"]}
    assert splits["range_equally_divide"]["allowed"] is True
    assert splits["specified_positions_divide"]["allowed"] is True
    for name in ("topic_count_equally_divide", "flow_or_qps_equally_divide"):
        assert splits[name] == {
            "name": name,
            "allowed": False,
            "why": "its owner reports no per-topic stats for it",
        }
    split = operator_client.post(
        f"/api/bundles/{owned.pk}/split/", {"preview": True, "reason": "hot"}, format="json"
    ).json()
    assert [c["fraction"] for c in split["children"]] == [0.5, 0.5]
    assert split["algorithm"] == "range_equally_divide"
    drain = operator_client.post(
        f"/api/brokers/{owner}/drain/", {"preview": True}, format="json"
    ).json()
    moves = [a for a in drain["plan"]["actions"] if a["kind"] == "unload"]
    assert len(moves) == Bundle.objects.filter(owner__name=owner).count()
    assert drain["vetoed"] is False
    assert _state() == before


def test_a_preview_says_whether_an_override_would_pass_its_veto(owned, operator_client):
    first = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name}, format="json"
    )
    assert first.status_code == 200, first.content
    again = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name, "preview": True}, format="json"
    ).json()
    assert again["vetoed"] is True
    assert again["overridable"] is True  # a cool-down: force passes it
    assert again["plan"]["actions"][0]["veto"] == "CoolDown"
    assert again["overrides"] == ["CoolDown"]
    # The override the preview showed, and the API refuses one that would pass more.
    bad = operator_client.post(
        "/api/bundles/by-name/unload/",
        {"bundle": owned.name, "force": True, "overrides": "CoolDown"},
        format="json",
    )
    assert bad.status_code == 400
    assert "overrides" in bad.content.decode()
    # A bad item of the list is said where it is, in words (not Python's repr of DRF's error).
    long = operator_client.post(
        "/api/bundles/by-name/unload/",
        {"bundle": owned.name, "force": True, "overrides": ["x" * 61]},
        format="json",
    )
    assert long.status_code == 400
    message = long.json()["error"]["message"]
    assert message == "overrides: 0: Ensure this field has no more than 60 characters."
    forced = operator_client.post(
        "/api/bundles/by-name/unload/",
        {"bundle": owned.name, "force": True, "overrides": []},
        format="json",
    )
    assert forced.status_code == 409
    assert "CoolDown, which the preview did not show" in forced.content.decode()
    split = operator_client.post(
        f"/api/bundles/{owned.pk}/split/",
        {"preview": True, "algorithm": "flow_or_qps_equally_divide"},
        format="json",
    ).json()
    assert split["vetoed"] is True
    assert split["overridable"] is False  # no per-topic data: nothing overrides that


def test_the_operators_reason_is_audited_first(owned, operator_client):
    response = operator_client.post(
        "/api/bundles/by-name/unload/",
        {"bundle": owned.name, "reason": "broker-1 maintenance"},
        format="json",
    )
    assert response.status_code == 200, response.content
    event = AuditEvent.objects.get(action="unload")
    assert event.reason.startswith("Operator's reason: broker-1 maintenance. operator unload of")


def test_by_name_actions_refuse_a_missing_name_and_viewers(owned, operator_client, viewer):
    missing = operator_client.post("/api/bundles/by-name/unload/", {}, format="json")
    assert missing.status_code == 400
    assert missing.json()["error"]["field"] == "bundle"
    unknown = operator_client.post(
        "/api/bundles/by-name/split/", {"bundle": "acme/orders/0x0_0x1"}, format="json"
    )
    assert unknown.status_code in (400, 404)
    client = APIClient()
    client.force_authenticate(viewer)
    assert (
        client.post(
            "/api/bundles/by-name/unload/", {"bundle": owned.name, "preview": True}, format="json"
        ).status_code
        == 403
    )
    long = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name, "reason": "x" * 501}, format="json"
    )
    assert long.status_code == 400
    assert AuditEvent.objects.count() == 0


def test_bundle_map_and_domains_are_served_to_every_user(owned, viewer):
    client = APIClient()
    client.force_authenticate(viewer)
    bundle_map = client.get("/api/bundle-map/").json()
    rows = [b for ns in bundle_map["namespaces"] for b in ns["bundles"]]
    assert len(rows) == Bundle.objects.count()
    assert {r[8] for r in rows} == {"none"}  # the reports of ``owned`` carry no bundle stats
    assert [b["name"] for b in bundle_map["brokers"]] == ["broker-1", "broker-2", "broker-3"]
    domains = client.get("/api/domains/").json()
    assert [d["name"] for d in domains["domains"]] == ["zone-a", "zone-b"]
    assert domains["groups"] == []
    assert APIClient().get("/api/bundle-map/").status_code == 401


def test_quiet_cycles_collapse_between_acting_decisions(cluster, operator_client):
    from datetime import timedelta

    from django.utils import timezone

    from console.models import Decision

    start = timezone.now() - timedelta(minutes=10)

    def decide(minute, reason, summary):
        Decision.objects.create(
            at=start + timedelta(minutes=minute),
            kind="shed",
            strategy="ThresholdShedder",
            reason=reason,
            summary=summary,
        )

    decide(0, "Overloaded", "1 unload(s); CV 0.40 -> 0.20 predicted")
    for minute in range(1, 5):
        decide(minute, "Balanced", "no action")
    decide(5, "Balanced", "no action; broker-2 skipped: NoBundles")
    decide(6, "BadConfig", "no action: the balancer configuration is refused — x")
    decide(7, "Overloaded", "no action; 1 vetoed")
    decide(8, "Balanced", "no action")
    feed = operator_client.get("/api/decision-feed/").json()["feed"]
    assert [(i["type"], i.get("reason"), i.get("count")) for i in feed] == [
        ("quiet", "Balanced", 1),
        ("decision", "Overloaded", None),  # a veto is news
        ("decision", "BadConfig", None),  # so is a refused configuration
        ("quiet", "Balanced", 5),
        ("decision", "Overloaded", None),
    ]
    assert feed[3]["first"] < feed[3]["last"]


def test_pause_and_resume_shedding_audited_and_for_operators_only(cluster, operator_client, viewer):
    health = operator_client.get("/api/loop/").json()
    assert health["sheddingEnabled"] is True
    assert health["lastTick"] is None
    assert health["overdue"] is True
    assert health["strategies"]["shedder"] == "ThresholdShedder"
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.post("/api/loop/pause/").status_code == 403
    paused = operator_client.post("/api/loop/pause/").json()
    assert paused["sheddingEnabled"] is False
    assert operator_client.post("/api/loop/resume/").json()["sheddingEnabled"] is True
    events = list(AuditEvent.objects.filter(action="config").order_by("id"))
    assert [e.reason for e in events] == [
        "Operator's reason: paused. is_shedding_enabled: True → False",
        "Operator's reason: resumed. is_shedding_enabled: False → True",
    ]
    assert {e.actor.username for e in events} == {"alice"}


def test_audit_filters_search_pages_and_csv(owned, operator_client, client, operator):
    import csv
    import io
    from datetime import timedelta

    from django.utils import timezone

    from console.services import broker_state_set

    moved = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name, "reason": "hot spot"}, format="json"
    ).json()
    broker_state_set("broker-3", "draining", actor=None)
    rows = operator_client.get("/api/audit/", {"actor": "alice"}).json()["results"]
    assert [(r["action"], r["target"]) for r in rows] == [("unload", owned.name)]
    assert operator_client.get("/api/audit/", {"actor": "balancer"}).json()["count"] >= 1
    by_broker = operator_client.get("/api/audit/", {"broker": moved["destination"]}).json()
    assert owned.name in [r["target"] for r in by_broker["results"]]
    namespace = owned.name.rsplit("/", 1)[0]
    mine = operator_client.get("/api/audit/", {"namespace": namespace, "actor": "alice"}).json()
    assert [r["target"] for r in mine["results"]] == [owned.name]
    others = operator_client.get("/api/audit/", {"namespace": "acme/nowhere"}).json()
    assert others["count"] == 0
    assert operator_client.get("/api/audit/", {"q": "HOT SPOT"}).json()["count"] == 1
    later = (timezone.now() + timedelta(minutes=1)).replace(tzinfo=None).isoformat()
    assert operator_client.get("/api/audit/", {"since": later}).json()["count"] == 0
    assert operator_client.get("/api/audit/", {"until": later}).json()["count"] >= 2
    bad = operator_client.get("/api/audit/", {"action": "teleport"})
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "action"
    assert operator_client.get("/api/audit/", {"since": "yesterday"}).status_code == 400
    nul = operator_client.get("/api/audit/", {"q": "a\x00b"})
    assert nul.status_code == 400  # refused before any query (PostgreSQL text cannot hold NUL)
    assert "NUL" in nul.json()["error"]["message"]
    assert operator_client.get("/api/brokers/a%00b/history/").status_code == 400
    assert client.get("/brokers/a%00b/").status_code == 400
    from console.errors import ConsoleError
    from console.selectors import audit_events

    with pytest.raises(ConsoleError, match="NUL"):
        audit_events({"broker": "a\x00"})
    assert operator_client.get("/api/audit/", {"page_size": 1}).json()["next"]

    client.force_login(operator)
    page = client.get("/audit/", {"action": "unload", "actor": "alice"}).content.decode()
    assert "Export CSV (1 rows)" in page
    assert f"/decisions/{moved['decision']}/" in page
    assert "not an ISO 8601 time" in client.get("/audit/", {"since": "soon"}).content.decode()
    response = client.get("/audit/export.csv", {"action": "unload", "actor": "alice"})
    assert response["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0][:3] == ["at_utc", "actor", "action"]
    assert [(r[1], r[2], r[3]) for r in table[1:]] == [("alice", "unload", owned.name)]
    assert table[1][6].startswith("Operator's reason: hot spot.")
    assert client.get("/audit/export.csv", {"action": "x"}).status_code == 400


def test_a_decision_page_explains_the_plan(owned, operator_client, client, operator):
    from console.models import Decision
    from console.services import shedding_tick_run

    moved = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name}, format="json"
    ).json()
    shedding_tick_run()  # measures the load after
    client.force_login(operator)
    page = client.get(f"/decisions/{moved['decision']}/").content.decode()
    assert "operator unload of" in page
    assert "CV observed at the next tick" in page
    assert "next tick</span>" not in page  # the tick above filled the load after
    # Where the bundle could go: every broker the placement scored, the chosen one marked.
    assert "Where each bundle could go" in page
    (place,) = [
        a
        for a in Decision.objects.get(pk=moved["decision"]).details["actions"]
        if a["kind"] == "place"
    ]
    scored = [c["broker"] for c in place["candidates"] if "filter" not in c]
    assert place["destination"] in scored
    assert owned.owner.name not in scored  # never back where it was
    assert f'<tr class="chosen"><td>{place["destination"]}</td>' in page
    assert client.get("/decisions/999999/").status_code == 404

    from django.utils import timezone

    shed = Decision.objects.create(
        at=timezone.now(),
        kind="shed",
        strategy="ThresholdShedder",
        reason="Overloaded",
        summary="1 unload(s)",
        details={
            "shedding": {
                "reason": "Overloaded",
                "skipped": [  # Skip.as_dict: a broker, every broker ("*"), none named
                    {"broker": "broker-2", "reason": "NoBundles"},
                    {"broker": "*", "reason": "RateLimited", "detail": "30 moves in the hour"},
                    {"reason": "Balanced"},
                ],
                "stats": {
                    "threshold": 0.1,
                    "avgUsage": 0.123456789,
                    "brokers": {"broker-1": {"usage": 0.5, "history": 0.4}},
                },
            },
            "stats": {"before": {"brokers": {"broker-1": 0.5}, "cv": 0.3}},
            "actions": [],
        },
    )
    page = client.get(f"/decisions/{shed.pk}/").content.decode()
    assert "<code>0.1235</code>" in page  # 4 significant digits
    assert '<table id="rule-brokers"' in page
    assert "<th>history</th><th>usage</th>" in page
    assert "<b>broker-2</b> (broker): NoBundles" in page
    # A skip of no one broker says so, never "(): Balanced".
    assert "<b>every broker</b>: RateLimited — 30 moves in the hour" in page
    assert "<b>every broker</b>: Balanced" in page
    assert "(): " not in page


def test_a_brokers_history_is_bucketed_breaks_at_gaps_and_lists_its_moves(owned, operator_client):
    from datetime import timedelta

    from django.utils import timezone

    from console.models import LoadReport

    broker = Broker.objects.get(name="broker-1")
    now = timezone.now()

    def reported(seconds_ago, cpu):
        LoadReport.objects.create(
            broker=broker,
            reported_at=now - timedelta(seconds=seconds_ago),
            cpu_usage=cpu,
            cpu_limit=200,
            memory_usage_mib=0,
            memory_limit_mib=1,
            bandwidth_in_usage_bytes_per_s=10,
            bandwidth_in_limit_bytes_per_s=100,
            bandwidth_out_usage_bytes_per_s=0,
            bandwidth_out_limit_bytes_per_s=0,
            msg_rate_in=5,
            msg_rate_out=7,
            msg_throughput_in_bytes_per_s=1,
            msg_throughput_out_bytes_per_s=2,
            bundle_count=1,
            topic_count=1,
            weighted_usage_fraction=0.5,
        )

    for seconds_ago in (850, 848, 600, 598):  # two runs of reports, 4 minutes apart
        reported(seconds_ago, 100)
    moved = operator_client.post(
        "/api/bundles/by-name/unload/", {"bundle": owned.name}, format="json"
    ).json()
    body = operator_client.get("/api/brokers/broker-1/history/", {"range": 900}).json()
    assert body["cpu"] == [50.0, 50.0, None, 50.0, 50.0]  # percent of the limit; a break at the gap
    assert body["bandwidthIn"][0] == 10.0
    assert body["bandwidthOut"][0] == 0.0  # no capacity reported: 0, not a division by zero
    assert body["msgRate"][0] == 12.0
    assert body["throughput"][0] == 3.0
    touching = [m for m in body["moves"] if m["target"] == owned.name]
    assert touching
    assert touching[0]["decision"] == moved["decision"]
    assert operator_client.get("/api/brokers/broker-1/history/", {"range": 7}).status_code == 400
    assert operator_client.get("/api/brokers/broker-1/history/", {"range": "x"}).status_code == 400
    assert operator_client.get("/api/brokers/ghost/history/").status_code == 404


def test_the_broker_page_shows_its_bundles_actions_and_drain_for_operators(
    owned, client, operator, viewer
):
    client.force_login(operator)
    page = client.get("/brokers/broker-1/").content.decode()
    assert "Drain…" in page
    for bundle in Bundle.objects.filter(owner__name="broker-1").select_related("namespace"):
        assert f"<code>{bundle.name}</code>" in page
    client.force_login(viewer)
    assert "Drain…" not in client.get("/brokers/broker-1/").content.decode()
    assert client.get("/brokers/ghost/").status_code == 404


def test_config_what_if_save_as_versions_and_rollback(owned, operator_client, viewer):
    from console.models import BalancerConfig, ConfigVersion

    state = operator_client.get("/api/config/").json()
    assert state["values"]["shedder"] == "ThresholdShedder"
    assert state["versions"] == []
    draft = {**state["values"], "shedder": "uniform_load_shedder"}
    what_if = operator_client.post(
        "/api/config/", {"values": draft, "what_if": True}, format="json"
    ).json()
    assert what_if["current"]["strategy"] == "ThresholdShedder"
    assert what_if["draft"]["strategy"] == "UniformLoadShedder"
    assert "cv" in what_if["draft"]["after"]
    assert ConfigVersion.objects.count() == 0  # a what-if saves nothing
    saved = operator_client.post(
        "/api/config/", {"values": draft, "reason": "try uniform"}, format="json"
    ).json()
    assert saved["values"]["shedder"] == "UniformLoadShedder"  # canonical name
    first, original = saved["versions"][0], saved["versions"][1]
    assert first["changes"] == {"shedder": ["ThresholdShedder", "UniformLoadShedder"]}
    assert first["reason"] == "try uniform"
    assert first["actor"] == "alice"
    assert original["reason"] == "as found before the first edit"
    event = AuditEvent.objects.get(action="config")
    assert event.reason == (
        "Operator's reason: try uniform. shedder: 'ThresholdShedder' → 'UniformLoadShedder'"
    )
    same = operator_client.post("/api/config/", {"values": draft}, format="json").json()
    assert same["saved"] is None  # nothing changed, nothing written
    back = operator_client.post(
        f"/api/config/versions/{original['id']}/rollback/", {"reason": "worse"}, format="json"
    ).json()
    assert back["values"]["shedder"] == "ThresholdShedder"
    assert back["versions"][0]["reason"] == f"rollback to version {original['id']}: worse"
    assert BalancerConfig.objects.get().shedder == "ThresholdShedder"
    assert ConfigVersion.objects.count() == 3
    assert operator_client.post("/api/config/versions/999/rollback/").status_code == 404


def test_config_refusals_name_the_field_and_write_nothing(owned, operator_client, viewer):
    from console.models import ConfigVersion

    values = operator_client.get("/api/config/").json()["values"]
    for change, field in (
        ({"shedder": "Nope"}, "shedder"),
        ({"placement": "AvgShedder"}, "placement"),
        ({"split_algorithm": "nope"}, "split_algorithm"),
        ({"parameters": {"maxUnloadPercentage": 2}}, "parameters.maxUnloadPercentage"),
        ({"parameters": {"typo": 1}}, "parameters.typo"),
        ({"parameters": []}, "parameters"),
        ({"loop_interval_s": 0}, "loop_interval_s"),
        ({"loop_interval_s": True}, "loop_interval_s"),
        ({"is_shedding_enabled": "yes"}, "is_shedding_enabled"),
        ({"state": {}}, "state"),
    ):
        for what_if in (True, False):
            response = operator_client.post(
                "/api/config/", {"values": {**values, **change}, "what_if": what_if}, format="json"
            )
            assert response.status_code == 400, (change, response.content)
            assert response.json()["error"]["field"] == field
    assert ConfigVersion.objects.count() == 0
    assert AuditEvent.objects.filter(action="config").count() == 0
    client = APIClient()
    client.force_authenticate(viewer)
    assert client.get("/api/config/").status_code == 200
    assert client.post("/api/config/", {"values": values}, format="json").status_code == 403
    assert client.post("/api/config/versions/1/rollback/").status_code == 403


def test_services_refuse_viewers_themselves_not_only_the_api(owned, viewer, operator):
    from django.test import override_settings

    from console.errors import ConsoleError
    from console.services import broker_state_set, bundle_split, bundle_unload
    from console.services.config import config_rollback, config_save, shedding_pause_set
    from console.services.credentials import credential_revoke, credential_rotate
    from console.services.reports import report_run_request

    refused = [
        lambda who: bundle_unload(owned.name, actor=who),
        lambda who: bundle_unload(owned.name, actor=who, preview=True),
        lambda who: bundle_split(owned.name, actor=who),
        lambda who: broker_state_set("broker-2", "draining", actor=who),
        lambda who: config_save({"shedder": "AvgShedder"}, actor=who),
        lambda who: config_rollback(1, actor=who),
        lambda who: shedding_pause_set(True, actor=who),
        lambda who: report_run_request(actor=who),
    ]
    for act in refused:
        with pytest.raises(ConsoleError) as info:
            act(viewer)
        assert info.value.status == 403
    with override_settings(FULCRUM_READ_ONLY=True), pytest.raises(ConsoleError, match="read-only"):
        bundle_unload(owned.name, actor=operator)
    # Broker credentials are an admin's (a superuser's), or a command's on the server.
    for act in (credential_rotate, credential_revoke):
        with pytest.raises(ConsoleError, match="admin"):
            act("broker-1", actor=operator)
    assert credential_rotate("broker-1", actor=None)[1]
    assert AuditEvent.objects.exclude(action="credential").count() == 0


def test_config_replay_through_the_api(owned, operator_client, viewer):
    from console.services import shedding_tick_run

    values = operator_client.get("/api/config/").json()["values"]
    refused = operator_client.post(
        "/api/config/", {"values": values, "replay": True}, format="json"
    )
    assert refused.status_code == 409  # nothing recorded yet
    assert "not enough load recorded" in refused.json()["error"]["message"]
    bad = {**values, "parameters": {"maxUnloadPercentage": 2}}
    response = operator_client.post("/api/config/", {"values": bad, "replay": True}, format="json")
    assert response.json()["error"]["field"] == "parameters.maxUnloadPercentage"
    shedding_tick_run()
    from datetime import timedelta

    from django.utils import timezone

    shedding_tick_run(now=timezone.now() + timedelta(seconds=40))
    answer = operator_client.post(
        "/api/config/", {"values": values, "replay": True}, format="json"
    ).json()
    assert answer["samples"] == 2
    assert {"recorded", "current", "draft"} <= set(answer)
    client = APIClient()
    client.force_authenticate(viewer)
    assert (
        client.post("/api/config/", {"values": values, "replay": True}, format="json").status_code
        == 403
    )


def test_a_decision_that_placed_many_bundles_says_why_it_lists_no_candidates(
    cluster, client, viewer
):
    from django.utils import timezone

    from console.models import Decision

    many = Decision.objects.create(
        at=timezone.now(),
        kind="place",
        strategy="LeastLongTermMessageRate",
        reason="LeastLoaded",
        summary="20 placement(s)",
        details={
            "actions": [
                {
                    "kind": "place",
                    "bundle": f"t/ns/{i}",
                    "destination": "broker-1",
                    "outcome": "planned",
                    "reason": "LeastLoaded",
                    "explanation": "x",
                }
                for i in range(20)
            ]
        },
    )
    client.force_login(viewer)
    page = client.get(f"/decisions/{many.pk}/").content.decode()
    assert "for the 20 placements of this decision" in page
    assert "Where each bundle could go" not in page


def test_a_figure_per_broker_is_a_column_of_the_rule_s_table(cluster, client, viewer):
    from django.utils import timezone

    from console.models import Decision

    shed = Decision.objects.create(
        at=timezone.now(),
        kind="shed",
        strategy="FulcrumShedder",
        reason="Overloaded",
        summary="1 unload(s)",
        details={
            "shedding": {
                "reason": "Overloaded",
                "stats": {
                    "avgUsage": 0.3,
                    "brokers": {"broker-1": {"usage": 0.5}, "broker-2": {"usage": 0.1}},
                    "predicted": {"broker-1": 0.4, "broker-2": 0.2},
                    "elsewhere": {"ghost": 0.1},
                },
            },
            "actions": [],
        },
    )
    client.force_login(viewer)
    page = client.get(f"/decisions/{shed.pk}/").content.decode()
    # The plan's figures lead (none stored here: "—"); the shedder's usage follows, in %; its
    # own "predicted" gives way to the plan's after (one set of numbers per decision).
    assert (
        "<th>before</th><th>after (predicted)</th><th>observed (next tick)</th><th>usage</th></tr>"
    ) in page
    assert "<td>50.0 %</td>" in page
    assert "<th>predicted</th>" not in page
    assert "<th>elsewhere</th>" in page  # not the table's brokers: a figure of its own


def test_api_root_lists_every_endpoint_and_the_docs_are_served_locally(operator_client, client):
    """Issue 25, item 6: /api/ lists every endpoint (from the OpenAPI schema), /api/docs/ is
    Swagger UI from drf-spectacular-sidecar's files (no CDN), and every refusal has one shape."""
    import re

    from django.urls import get_resolver

    root = operator_client.get("/api/").json()
    paths = {e["path"] for e in root["endpoints"]}
    assert {"/api/pulsar/evidence/", "/api/bundles/by-name/unload/", "/api/domains/"} <= paths
    # Every route under api/ that the schema documents is listed (each once).
    assert len(paths) == len(root["endpoints"]) >= 30
    assert all(e["methods"] for e in root["endpoints"])
    # Each summary is its description's first paragraph whole, not its first line cut short.
    said = {e["path"]: e["summary"] for e in root["endpoints"]}
    assert said["/api/"].startswith("``/api/``: every endpoint of the API from its OpenAPI")
    assert said["/api/"].endswith("``/api/schema/`` (OpenAPI 3).")
    assert (root["docs"], root["schema"]) == ("/api/docs/", "/api/schema/")
    docs = operator_client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert "swagger-ui" in page
    assert re.findall(r'(?:src|href)="(?:https?:)?//', page) == []  # nothing from a CDN
    assert "drf_spectacular_sidecar/swagger-ui-dist" in page
    assert get_resolver()  # the route table loads
    # One error shape: DRF's own refusals too (not found, not allowed, not logged in).
    missing = operator_client.get("/api/decisions/999999/").json()["error"]
    assert (missing["code"], missing["field"]) == ("not_found", None)
    wrong_method = operator_client.delete("/api/rankings/").json()["error"]
    assert wrong_method["code"] == "method_not_allowed"
    anonymous = client.get("/api/rankings/")
    assert anonymous.status_code in (401, 403)
    assert set(anonymous.json()["error"]) == {"code", "message", "field"}


def test_a_viewer_saving_the_config_gets_the_one_error_shape(cluster, viewer):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(viewer)
    refused = client.post("/api/config/", {"values": {}}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert "operator" in refused.json()["error"]["message"]
