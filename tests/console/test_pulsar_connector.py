"""The Pulsar admin client and observation (console/pulsar/admin.py,
observe.py) against a fake two-broker Pulsar cluster replayed with respx, with
the shapes, status codes and quirks of PULSAR_ADMIN.md: 307 to the owner or the named broker,
the token re-sent on every hop, JSON and text/plain errors, heartbeat bundles, 204 bodies."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import respx

from console.pulsar.admin import PulsarAdmin, PulsarAdminError, error_reason
from console.pulsar.observe import (
    ObservationError,
    is_system_bundle,
    observe,
    report_document,
)

TOKEN = "s3cret-jwt"
B1, B2 = "broker-1:8080", "broker-2:8080"
MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"


def local_broker_data(name: str, owned: list[str]) -> dict:
    """A LocalBrokerData as PULSAR_ADMIN.md §3.3 quotes it (values changed per broker)."""
    return {
        "webServiceUrl": f"http://{name}",
        "cpu": {"usage": 240.0, "limit": 800.0},
        "memory": {"usage": 124.0, "limit": 2096.0},
        "directMemory": {"usage": 36.0, "limit": 256.0},
        "bandwidthIn": {"usage": 800.0, "limit": 1.0e7},
        "bandwidthOut": {"usage": 400.0, "limit": -1.0},
        "msgThroughputIn": 2048.0,
        "msgThroughputOut": 1024.0,
        "msgRateIn": 20.0,
        "msgRateOut": 10.0,
        "lastUpdate": 1690979816792,
        "lastStats": {
            b: {
                "msgRateIn": 10.0,
                "msgThroughputIn": 1024.0,
                "msgRateOut": 5.0,
                "msgThroughputOut": 512.0,
                "consumerCount": 2,
                "producerCount": 1,
                "topics": 3,
                "cacheSize": 0,
            }
            for b in owned
        }
        | {"public/default/0xc0000000_0xffffffff": {"msgRateIn": 99.0}},  # given away since
        "numTopics": 6,
        "numBundles": len(owned),
        "bundles": owned,
        "brokerVersionString": "3.3.2",
        "loadManagerClassName": MODULAR,
        "loadReportType": "LocalBrokerData",
        "someFieldFromTheFuture": {"ignored": True},
    }


class FakePulsar:
    """Two brokers; broker-1 is the service URL, broker-2 the leader. Records every request."""

    def __init__(self, load_manager: str = MODULAR) -> None:
        self.requests: list[httpx.Request] = []
        self.load_manager = load_manager
        self.owned = {
            B1: ["public/default/0x00000000_0x40000000", "public/default/0x40000000_0x80000000"],
            B2: ["public/default/0x80000000_0xc0000000"],
        }
        self.heartbeats = {
            B1: [
                "pulsar/broker-1:8080/0x00000000_0xffffffff",
                "pulsar/c1/broker-1:8080/0x00000000_0xffffffff",
            ],
            B2: ["pulsar/broker-2:8080/0x00000000_0xffffffff"],
        }
        self.down: set[str] = set()
        self.owned_fails: set[str] = set()
        self.domains_answer: object = {"zone-a": {"brokers": [B1]}, "zone-b": {"brokers": [B2]}}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        host = request.url.netloc.decode()
        if host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return httpx.Response(401, json={"reason": "Unauthorized"})
        path = request.url.path
        query = parse_qs(urlsplit(str(request.url)).query)

        def elsewhere(broker: str) -> httpx.Response:
            location = f"http://{broker}{path}?authoritative=true"
            kept = {k: v for k, v in query.items() if k != "authoritative"}
            for key, values in kept.items():
                location += f"&{key}={values[0]}"
            return httpx.Response(307, headers={"Location": location})

        if path == "/admin/v2/clusters":
            return httpx.Response(200, json=["c1"])
        if path == "/admin/v2/brokers/c1":
            return httpx.Response(200, json=[B2, B1])
        if path == "/admin/v2/brokers/leaderBroker":
            return httpx.Response(200, json={"serviceUrl": f"http://{B2}", "brokerId": B2})
        if path.startswith("/admin/v2/brokers/c1/") and path.endswith("/ownedNamespaces"):
            named = path.split("/")[5]
            if named != host:
                return elsewhere(named)
            if named in self.owned_fails:
                return httpx.Response(500, text="--- An unexpected error occurred ---\nTimeout")
            status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
            return httpx.Response(
                200, json=dict.fromkeys(self.owned[named] + self.heartbeats[named], status)
            )
        if path == "/admin/v2/clusters/c1/failureDomains":
            return httpx.Response(200, json=self.domains_answer)
        if path == "/admin/v2/tenants":
            return httpx.Response(200, json=["public", "pulsar"])
        if path == "/admin/v2/namespaces/public":
            return httpx.Response(200, json=["public/default"])
        if path == "/admin/v2/namespaces/pulsar":
            return httpx.Response(200, json=["pulsar/broker-1:8080", "pulsar/c1/broker-1:8080"])
        if path == "/admin/v2/namespaces/public/default/bundles":
            bounds = ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]
            return httpx.Response(200, json={"boundaries": bounds, "numBundles": 4})
        if path == "/admin/v2/namespaces/public/default/antiAffinity":
            return httpx.Response(200, text="group-1")
        if path == "/admin/v2/brokers/configuration/runtime":
            return httpx.Response(200, json={"loadManagerClassName": self.load_manager})
        if path == "/admin/v2/broker-stats/load-report":
            if self.load_manager.endswith("ExtensibleLoadManagerImpl"):
                return httpx.Response(
                    500,
                    text="--- An unexpected error occurred in the server ---\n\n"
                    "Message: java.lang.UnsupportedOperationException\n\nStacktrace:\n\n...",
                    headers={"Content-Type": "text/plain"},
                )
            return httpx.Response(200, json=local_broker_data(host, self.owned[host]))
        if path.endswith("/split"):
            if query.get("splitAlgorithmName") == ["nonsense"]:
                return httpx.Response(
                    412, json={"reason": "Unsupported split algorithm name nonsense"}
                )
            owner = next(
                b
                for b, owned in self.owned.items()
                if any(path.endswith(f"{o.split('/')[-1]}/split") for o in owned)
            )
            if owner != host:
                return elsewhere(owner)
            return httpx.Response(204)
        if path.endswith("/unload"):
            destination = query.get("destinationBroker", [None])[0]
            if destination is not None and destination not in self.owned:
                return httpx.Response(
                    409,
                    json={"reason": "Not allowed unload namespace bundle to inactive destination"},
                )
            if destination is not None and host != B2:  # ML: the leader takes the affinity first
                return elsewhere(B2)
            return httpx.Response(204)
        if path == "/downgrade":
            return httpx.Response(307, headers={"Location": f"http://{B2}/x"})
        if path == "/loop":
            return httpx.Response(307, headers={"Location": f"http://{host}/loop"})
        return httpx.Response(404, json={"reason": f"no such path {path}"})


@pytest.fixture
def fake():
    return FakePulsar()


@pytest.fixture
def router(fake):
    """Every httpx request answered by ``fake`` (respx)."""
    with respx.mock(assert_all_called=False) as mocked:
        mocked.route().mock(side_effect=fake)
        yield mocked


@pytest.fixture
def admin(router):
    with PulsarAdmin(f"http://{B1}", token=TOKEN) as client:
        yield client


def test_a_redirect_is_followed_with_the_method_the_body_and_the_token(admin, fake):
    admin.split("public/default/0x80000000_0xc0000000", "specified_positions_divide", [0xA0000000])
    first, second = fake.requests
    assert (first.url.host, second.url.host) == ("broker-1", "broker-2")  # 307 to the owner
    assert second.method == "PUT"
    assert json.loads(second.content) == [0xA0000000]
    assert second.headers["authorization"] == f"Bearer {TOKEN}"
    assert parse_qs(second.url.query.decode())["splitAlgorithmName"] == [
        "specified_positions_divide"
    ]
    # An unload to a destination goes by the leader, then to the owner, token every hop.
    fake.requests.clear()
    admin.unload("public/default/0x00000000_0x40000000", destination=B2)
    assert [r.url.host for r in fake.requests] == ["broker-1", "broker-2"]
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)


def test_pulsar_s_refusals_carry_its_reason_json_or_text(admin, fake):
    with pytest.raises(PulsarAdminError) as refused:
        admin.split("public/default/0x00000000_0x40000000", "nonsense")
    assert (refused.value.status, refused.value.reason) == (
        412,
        "Unsupported split algorithm name nonsense",
    )
    with pytest.raises(PulsarAdminError) as inactive:
        admin.unload("public/default/0x00000000_0x40000000", destination="gone:8080")
    assert inactive.value.status == 409
    fake.load_manager = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
    with pytest.raises(PulsarAdminError) as unsupported:
        admin.load_report(B1)
    assert unsupported.value.status == 500
    assert unsupported.value.reason == "Message: java.lang.UnsupportedOperationException"
    with pytest.raises(PulsarAdminError) as looping:
        admin.request("GET", "/loop")
    assert "more than 5 redirects" in looping.value.reason
    no_token = PulsarAdmin(f"http://{B1}")
    with pytest.raises(PulsarAdminError) as unauthorized:
        no_token.clusters()
    assert (unauthorized.value.status, unauthorized.value.reason) == (401, "Unauthorized")
    with pytest.raises(ValueError, match="not a bundle name"):
        admin.unload("public/default")
    assert error_reason(httpx.Response(503)) == "Service Unavailable"


def test_the_observation_maps_brokers_domains_namespaces_owners_and_load(admin, fake):
    seen = observe(admin)
    assert (seen.cluster, seen.brokers, seen.leader) == ("c1", [B1, B2], B2)
    assert seen.domains == {B1: "zone-a", B2: "zone-b"}
    assert seen.namespaces == {
        "public/default": (
            ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
            "group-1",
        )
    }
    # Owners from every broker's ownedNamespaces (redirected to it), heartbeats left out.
    assert seen.owners == {b: owner for owner, owned in fake.owned.items() for b in owned}
    assert seen.unowned() == ["public/default/0xc0000000_0xffffffff"]
    assert set(seen.reports) == {B1, B2}
    assert not seen.extensible
    assert seen.errors == []
    # Nothing looked a topic up (a lookup would assign the unowned bundle).
    assert not any("/lookup/" in str(r.url) for r in fake.requests)
    assert all(r.method == "GET" for r in fake.requests)


def test_a_broker_that_cannot_be_reached_is_named_and_the_rest_stands(admin, fake):
    fake.down.add(B2)
    seen = observe(admin)
    assert seen.owners == dict.fromkeys(fake.owned[B1], B1)
    assert set(seen.reports) == {B1}
    assert any(e.startswith(f"{B2}: owned bundles: ConnectError") for e in seen.errors)
    assert any(e.startswith(f"{B2}: load report") for e in seen.errors)
    # Under the extensible load manager no load report is asked for (this fake serves neither
    # /metrics nor topic stats: each broker's load is named as unread).
    fake.down.clear()
    fake.load_manager = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
    fake.requests.clear()
    extensible = observe(admin)
    assert extensible.extensible
    assert extensible.reports == {}
    assert not any(r.url.path.endswith("/load-report") for r in fake.requests)
    assert any(e.startswith(f"{B1}: load report: ") for e in extensible.errors)


def test_a_load_report_becomes_the_report_fulcrum_ingests(fake):
    from console.services.ingest import report_parse

    owned = fake.owned[B1] + fake.heartbeats[B1]
    doc = report_document(B1, local_broker_data(B1, fake.owned[B1]), owned, read_at=1.8e9)
    parsed = report_parse(json.dumps(doc).encode())  # what the ingest path checks
    assert parsed.name == B1
    assert doc["bandwidthIn"] == {"usage": 800.0 * 125, "limit": 1.0e7 * 125}  # kbit/s -> bytes/s
    assert doc["bandwidthOut"] == {"usage": 0.0, "limit": 0.0}  # -1: the NIC's speed is unknown
    assert doc["cpu"] == {"usage": 240.0, "limit": 800.0}
    # The time Fulcrum read it, never lastUpdate (the broker's last metadata-store write).
    assert doc["timestamp"] == 1.8e9
    assert "timestamp" not in report_document(B1, local_broker_data(B1, []), [])
    assert doc["bundles"] == fake.owned[B1]  # heartbeats left out
    # Stats only for the bundles it owns now, with Pulsar's counts renamed.
    assert set(doc["bundleStats"]) == set(fake.owned[B1])
    stats = doc["bundleStats"]["public/default/0x00000000_0x40000000"]
    assert (stats["topics"], stats["producers"], stats["consumers"]) == (3, 1, 2)
    assert is_system_bundle("pulsar/c1/broker-1:8080/0x00000000_0xffffffff")
    assert is_system_bundle("pulsar/system/0x00000000_0xffffffff")  # the extensible channel
    assert not is_system_bundle("pulsar/functions/0x00000000_0xffffffff")


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["cpu"].update(usage="high"), "cpu.usage"),
        (lambda d: d.update(bandwidthIn=[1, 2]), "bandwidthIn"),
        (lambda d: d.update(msgRateIn=float("nan")), "msgRateIn"),
        (lambda d: d.update(numTopics=-1), "numTopics"),
        (
            lambda d: d["lastStats"]["public/default/0x00000000_0x40000000"].update(topics=True),
            "lastStats.public/default/0x00000000_0x40000000.topics",
        ),
    ],
)
def test_a_malformed_load_report_is_refused_naming_the_broker_and_the_field(fake, mutate, field):
    data = local_broker_data(B1, fake.owned[B1])
    mutate(data)
    with pytest.raises(ObservationError) as refused:
        report_document(B1, data, fake.owned[B1])
    assert (refused.value.broker, refused.value.field) == (B1, field)


def test_an_observation_becomes_the_metadata_store_and_the_live_load(admin, fake, router, db):
    from console import loadstore
    from console.models import Broker, Bundle, Namespace
    from console.services.pulsar import pulsar_observation_apply

    summary = pulsar_observation_apply(observe(admin))
    assert summary | {"errors": None} == {
        "brokers": 2,
        "bundles": 4,
        "owned": 3,
        "unowned": 1,
        "reports": 2,
        "unchanged": 0,
        "refused": [],
        "errors": None,
    }
    domains = dict(Broker.objects.values_list("name", "failure_domain__name"))
    assert domains == {B1: "zone-a", B2: "zone-b"}
    namespace = Namespace.objects.get(name="public/default")
    assert namespace.anti_affinity_group == "group-1"
    owners = {
        b.name: b.owner.name if b.owner else None
        for b in Bundle.objects.select_related("namespace", "owner")
    }
    assert owners == {
        "public/default/0x00000000_0x40000000": B1,
        "public/default/0x40000000_0x80000000": B1,
        "public/default/0x80000000_0xc0000000": B2,
        "public/default/0xc0000000_0xffffffff": None,
    }
    # Each report went through the ingest path: the broker's newest entry in the live store.
    entries = loadstore.entries_get([B1, B2])
    assert set(entries) == {B1, B2}
    # Read again: the figures are fresh though lastUpdate (the broker's last metadata-store
    # write, constant here) has not moved — each report's time is when Fulcrum read it.
    again_seen = observe(admin)
    again = pulsar_observation_apply(again_seen)
    assert (again["reports"], again["unchanged"], again["refused"]) == (2, 0, [])
    read = again_seen.reads[B1]
    assert read.last_update == pytest.approx(1690979816.792)
    assert read.read_at > read.last_update + 86_400  # years after Pulsar's last write
    assert loadstore.entries_get([B1])[B1].reported_at == pytest.approx(read.read_at)
    # A split in Pulsar: the parent replaced by its children, owned where Pulsar says.
    children = ["public/default/0x80000000_0xa0000000", "public/default/0xa0000000_0xc0000000"]
    fake.owned[B2] = children
    bounds = ["0x00000000", "0x40000000", "0x80000000", "0xa0000000", "0xc0000000", "0xffffffff"]
    original = fake.__call__

    def split_done(request):
        if request.url.path == "/admin/v2/namespaces/public/default/bundles":
            return httpx.Response(200, json={"boundaries": bounds, "numBundles": 5})
        return original(request)

    router.routes[0].side_effect = split_done
    after = pulsar_observation_apply(observe(admin))
    assert after["bundles"] == 5
    names = set(
        Bundle.objects.filter(owner__name=B2)
        .select_related("namespace")
        .values_list("lower", flat=True)
    )
    assert names == {0x80000000, 0xA0000000}


def test_a_malformed_report_or_boundaries_are_refused_by_name_and_nothing_else_is_lost(
    admin, fake, db
):
    from console.models import Bundle
    from console.services.pulsar import pulsar_observation_apply

    seen = observe(admin)
    seen.reports[B1]["cpu"]["usage"] = "busy"
    seen.namespaces["public/other"] = (["0x00000000", "0x80000000"], None)  # not up to 0xffffffff
    summary = pulsar_observation_apply(seen)
    assert summary["reports"] == 1
    bad_bounds, bad_report = summary["refused"]
    assert bad_bounds.startswith("public/other: boundaries: must rise from 0x00000000")
    assert bad_report == f"{B1}: cpu.usage: must be a finite number, not 'busy'"
    assert Bundle.objects.count() == 4  # the good namespace is there


def test_the_beat_task_observes_only_when_a_cluster_is_attached(settings, db, monkeypatch):
    from console.models import PulsarConnection
    from console.services.pulsar import pulsar_sync_run

    settings.FULCRUM_PULSAR_URL = ""
    assert pulsar_sync_run() is None
    PulsarConnection.objects.create(name="stored", admin_url="http://x:8080")  # not attached
    assert pulsar_sync_run() is None
    # From the environment: added attached, observe-only, its token read from the environment.
    monkeypatch.setenv("FULCRUM_PULSAR_TOKEN", "from-the-environment")
    settings.FULCRUM_PULSAR_URL = "http://127.0.0.1:1"  # nothing listens there
    with pytest.raises(PulsarAdminError):
        pulsar_sync_run()
    made = PulsarConnection.objects.get(name=settings.FULCRUM_PULSAR_NAME)
    assert (made.is_attached, made.mode, made.token_env) == (
        True,
        "observe",
        "FULCRUM_PULSAR_TOKEN",
    )
    assert made.observation["failure"].startswith("GET http://127.0.0.1:1/admin/v2/clusters: 0")


def test_attached_to_pulsar_the_balancer_records_its_plans_and_applies_none(cluster, operator):
    """Observe-only: the tick's plan is a decision that moved nothing; an operator's move is
    refused with the reason."""
    from console.errors import ConsoleError
    from console.models import AuditEvent, Bundle, Decision
    from console.services import bundle_unload, shedding_tick_run
    from tests.conftest import ingest, report

    brokers = ["broker-1", "broker-2", "broker-3"]
    bundles = list(Bundle.objects.select_related("namespace").order_by("namespace__name", "lower"))
    from console.models import Broker

    owner = Broker.objects.get(name="broker-1")
    Bundle.objects.update(owner=owner)
    for name, cpu in zip(brokers, (95, 5, 5), strict=True):
        ingest(report(name, cpu, bundles=[b.name for b in bundles] if name == "broker-1" else []))
    from console.models import PulsarConnection

    PulsarConnection.objects.create(name="c1", admin_url="http://broker-1:8080", is_attached=True)
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    config.shedder = "FulcrumShedder"
    config.save()
    decision = shedding_tick_run()
    assert decision is not None
    assert decision.summary.startswith("observe-only")
    assert decision.details["notSent"].startswith("observe-only: Fulcrum observes")
    # The shedder remembers the reports (the next are compared with them), not moves it did
    # not make.
    memory = balancer_config_get().state["FulcrumShedder"]
    assert set(memory["seen"]) == set(brokers)
    assert not memory.get("left")
    assert set(Bundle.objects.values_list("owner__name", flat=True)) == {"broker-1"}
    assert not AuditEvent.objects.filter(action="unload").exists()
    with pytest.raises(ConsoleError) as refused:
        bundle_unload(bundles[0].name, actor=operator, note="try")
    assert refused.value.status == 409
    assert "observe-only" in refused.value.message
    assert Decision.objects.count() == 1


def test_a_broker_whose_bundles_cannot_be_read_keeps_them_and_odd_answers_are_named(
    admin, fake, db
):
    from console.models import Bundle
    from console.services.pulsar import pulsar_observation_apply

    pulsar_observation_apply(observe(admin))
    fake.owned_fails.add(B2)
    fake.domains_answer = ["not", "an", "object"]
    seen = observe(admin)
    assert seen.unknown_owners == {B2}
    assert B2 not in seen.reports  # its bundles unknown: its report is not taken
    assert any(e.startswith("failure domains:") and "not a JSON object" in e for e in seen.errors)
    pulsar_observation_apply(seen)
    kept = Bundle.objects.get(lower=0x80000000)
    assert kept.owner.name == B2  # not emptied by one failed read
    assert is_system_bundle("sla-monitor/c1/broker-1:8080/0x00000000_0xffffffff")


def test_the_token_never_follows_a_redirect_from_https_down_to_http(fake, router):
    secure = PulsarAdmin(f"https://{B1}", token=TOKEN)
    with pytest.raises(PulsarAdminError) as refused:
        secure.request("GET", "/downgrade")
    assert "refused" in refused.value.reason
    assert [r.url.scheme for r in fake.requests] == ["https"]


# The extensible load manager's metrics as Prometheus text (names and labels of
# PULSAR_ADMIN.md §3.6; values from ExtensibleLoadManagerImplTest's expected metrics).
LB = 'cluster="c1",broker="localhost",metric="loadBalancing"'
EXTENSIBLE_METRICS = f"""\
# TYPE pulsar_lb_bandwidth_in_usage gauge
pulsar_lb_bandwidth_in_usage{{{LB}}} 3.0
pulsar_lb_bandwidth_out_usage{{{LB}}} 4.0
pulsar_lb_cpu_usage{{{LB}}} 1.0
pulsar_lb_directMemory_usage{{{LB}}} 2.0
pulsar_lb_memory_usage{{{LB}}} 400.0
pulsar_lb_resource_usage{{{LB},feature="max_ema"}} 4.0
pulsar_lb_unload_broker_breakdown_total{{{LB},reason="CoolDown",result="Skip"}} 5
pulsar_lb_bundles_split_total{{cluster="c1",broker="localhost",metric="bundlesSplit"}} 35
"""


def test_the_extensible_manager_s_metrics_and_topic_stats_make_a_report():
    from console.pulsar.observe import extensible_report, parse_metrics
    from console.services.ingest import report_parse

    seen = parse_metrics(B1, EXTENSIBLE_METRICS)
    assert seen.usage == {
        "bandwidthIn": 3.0,
        "bandwidthOut": 4.0,
        "cpu": 1.0,
        "directMemory": 2.0,
        "memory": 400.0,
    }
    topics = {
        "public/default": {
            "0x40000000_0x80000000": {
                "persistent": {
                    "persistent://public/default/t1": {
                        "msgRateIn": 10.0,
                        "msgThroughputIn": 10240.0,
                        "msgRateOut": 20.0,
                        "msgThroughputOut": 20480.0,
                    },
                    "persistent://public/default/t2": {"msgRateIn": 5.0, "msgThroughputIn": 0.0},
                }
            }
        },
        "pulsar/c1/broker-1:8080": {"0x00000000_0xffffffff": {"persistent": {}}},
    }
    report = extensible_report(B1, seen.usage, topics)
    bundle = "public/default/0x40000000_0x80000000"
    assert set(report["lastStats"]) == {bundle}  # the heartbeat left out
    assert report["lastStats"][bundle]["msgRateIn"] == 15.0
    assert report["lastStats"][bundle]["topics"] == 2
    # Bandwidth: the summed throughput (kbit/s) against the limit its percentage implies.
    assert report["bandwidthIn"] == {"usage": 10240.0 / 125, "limit": 10240.0 / 125 * 100 / 3.0}
    assert report["cpu"] == {"usage": 1.0, "limit": 100.0}
    doc = report_document(B1, report, [bundle])
    assert report_parse(json.dumps(doc).encode()).name == B1  # the ingest path takes it
    with pytest.raises(ObservationError) as missing:
        extensible_report(B1, {"cpu": 1.0}, topics)
    assert missing.value.field == "metrics.pulsar_lb_memory_usage"


def test_under_the_modular_manager_metrics_are_never_read_and_idle_bundles_stay_idle(
    admin, fake, router
):
    """ModularLoadManagerImpl.updateLocalBrokerData fills lastStats and the optional
    pulsar_bundle_* metrics from the same getBundleStats(): an owned bundle absent from
    lastStats is idle, in the metrics neither, so /metrics is never read, exported or not."""
    from console.pulsar.observe import parse_metrics

    original = fake.__call__

    def exported(request):
        if request.url.path == "/admin/v2/brokers/configuration/runtime":
            runtime = original(request).json()
            return httpx.Response(200, json=runtime | {"exposeBundlesMetricsInPrometheus": "true"})
        if request.url.netloc.decode() == B1 and request.url.path.endswith("/load-report"):
            data = original(request).json()
            data["lastStats"] = {fake.owned[B1][0]: data["lastStats"][fake.owned[B1][0]]}
            return httpx.Response(200, json=data)
        return original(request)

    router.routes[0].side_effect = exported
    seen = observe(admin)
    assert not any(r.url.path == "/metrics" for r in fake.requests)
    owned = [b for b, o in seen.owners.items() if o == B1]
    doc = report_document(B1, seen.reports[B1], owned, read_at=1.0)
    assert set(doc["bundles"]) == set(fake.owned[B1])
    assert set(doc["bundleStats"]) == {fake.owned[B1][0]}  # the idle one has no figures
    assert seen.reads[B1].missing == []
    usage = parse_metrics(B1, 'pulsar_lb_cpu_usage{broker="b"} 12.5\nother_metric 1\n').usage
    assert usage == {"cpu": 12.5}
    with pytest.raises(ObservationError) as bad:
        parse_metrics(B1, "pulsar_lb_cpu_usage{broker=} oops\n")
    assert bad.value.field == "metrics"
    with pytest.raises(ObservationError, match="must be ≥ 0"):
        parse_metrics(B1, 'pulsar_lb_cpu_usage{broker="b"} -1\n')


def test_over_https_the_token_never_goes_to_a_broker_s_http_url(fake, router, tmp_path):
    from console.pulsar.admin import PulsarAdminSetupError

    secure = PulsarAdmin(f"https://{B1}", token=TOKEN, broker_urls={B2: "http://broker-2:8080"})
    with pytest.raises(PulsarAdminError, match="refused to send the token over http://"):
        secure.load_report(B2)
    # Over https a broker's URL is never guessed from its id (whose port is the http one).
    with pytest.raises(PulsarAdminError, match="https URL of broker broker-3:8080 is not known"):
        secure.load_report("broker-3:8080")
    assert not fake.requests  # nothing left the client
    with pytest.raises(PulsarAdminSetupError) as unreadable:
        PulsarAdmin(f"https://{B1}", token=TOKEN, tls_ca_file=str(tmp_path / "missing.pem"))
    assert unreadable.value.field == "tls_ca_file"


def test_a_get_whose_connection_broke_before_an_answer_is_sent_once_more_and_nothing_else(
    admin, fake, router
):
    """A kept-alive connection the server closed as the request went out (httpx ReadError,
    seen about once in five passes over 200 brokers): a GET changes nothing, so it is sent once
    more (RFC 9110 §9.2.2); an unload may have been acted on, so it is not."""
    broken = {"left": 1}

    def flaky(request: httpx.Request) -> httpx.Response:
        if broken["left"]:
            broken["left"] -= 1
            raise httpx.ReadError("[Errno 9] Bad file descriptor", request=request)
        return fake(request)

    router.routes.clear()
    router.route().mock(side_effect=flaky)
    calls = admin.calls
    assert admin.clusters() == ["c1"]
    assert admin.calls == calls + 2
    assert [r.result for r in admin.calls_taken()][-1] == "ok"
    broken["left"] = 2  # broken twice: named, as before
    with pytest.raises(PulsarAdminError) as twice:
        admin.clusters()
    assert twice.value.reason.startswith("ReadError")
    assert twice.value.reached
    broken["left"] = 1
    fake.requests.clear()
    with pytest.raises(PulsarAdminError) as unload:
        admin.unload("public/default/0x00000000_0x40000000")
    assert unload.value.reason.startswith("ReadError")
    assert fake.requests == []  # never sent again
