"""The simulated cluster served as a Pulsar cluster (console/connectors/pulsar_cluster.py):
driven through Fulcrum's own connector (``PulsarAdmin``, ``observe``) against real servers on
free local ports, and through ``PulsarCluster.handle`` for the edge cases — Pulsar's shapes,
status codes, 307 hops and quirks of PULSAR_ADMIN.md, and Pulsar's own shedder between steps."""

from __future__ import annotations

import json
import logging
import socket
import time
from urllib.parse import parse_qs

import pytest

from balancer.hashing import topic_hash
from balancer.simulator.layout import DEMO
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from console.connectors.pulsar_cluster import (
    EXTENSIBLE,
    MODULAR,
    UNEXPECTED,
    Assignment,
    PulsarCluster,
    main,
    serve,
    stop,
)
from console.pulsar.admin import PulsarAdmin, PulsarAdminError
from console.pulsar.observe import observe, report_document
from tests.support import free_port_block, free_ports

TOKEN = "s3cret-jwt"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(autouse=True)
def _live_load_store():
    """Overrides tests/console/conftest.py's: nothing here touches the console's Redis."""
    return


@pytest.fixture(scope="module")
def traffic():
    traces = default_traces_dir()
    workload = build_workload(DEMO, load_functions(traces))
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in DEMO.brokers}
    return workload, cpu


@pytest.fixture
def make(traffic):
    """A cluster on fresh free ports (not served), with the token by default."""

    def build(**options) -> PulsarCluster:
        options.setdefault("token", TOKEN)
        return PulsarCluster(*traffic, ports=free_ports(8), **options)

    return build


@pytest.fixture
def served(make):
    """Start a cluster's brokers after ``steps`` trace minutes; an admin client enters through
    broker ``entry``."""
    running = []

    def start(*, steps: int = 1, entry: int = 0, token: str | None = TOKEN, **options):
        cluster = make(token=token, **options)
        for _ in range(steps):
            cluster.step(0.0)
        servers = serve(cluster)
        admin = PulsarAdmin(
            f"http://{cluster.broker_ids[entry]}", token=token, read_timeout_s=5, act_timeout_s=5
        )
        running.append((servers, admin))
        return cluster, admin

    yield start
    for servers, admin in running:
        admin.close()
        stop(servers)


def owned_bundle(cluster: PulsarCluster, avoid=()) -> tuple[str, str]:
    """(bundle, owner) of the first owned non-heartbeat bundle whose owner is not in ``avoid``."""
    return next(
        (b, o)
        for b, o in sorted(cluster.owners.items())
        if o is not None and not cluster.is_system(b) and o not in avoid
    )


def put(cluster, broker, path, query="", body=b""):
    return cluster.handle(broker, "PUT", path, query, AUTH, body)


def reason(response) -> str:
    return json.loads(response[2])["reason"]


def test_brokers_leader_domains_and_owned_bundles_have_pulsar_s_shapes_and_hops(served):
    cluster, admin = served(entry=2)
    ids = cluster.broker_ids
    # Every cluster of the configuration store, the remote one first (a Set in Pulsar).
    assert admin.clusters() == ["demo-dr", "demo"]
    assert admin.brokers("demo") == sorted(ids)
    assert admin.get_list("/admin/v2/brokers") == ids
    assert admin.leader() == {"serviceUrl": f"http://{ids[0]}", "brokerId": ids[0]}
    assert admin.failure_domains("demo") == {
        "zone-a": ids[0:3],
        "zone-b": ids[3:6],
        "zone-c": ids[6:8],
    }
    target = ids[5]
    owned = admin.owned_bundles("demo", target)
    status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
    assert owned == {b: status for b, o in cluster.owners.items() if o == target}
    assert f"pulsar/demo/{target}/0x00000000_0xffffffff" in owned
    assert f"pulsar/{target}/0x00000000_0xffffffff" in owned
    # Asked of broker 2, answered by broker 5 after a 307 that carried the token along.
    hops = [(r.broker, r.status) for r in cluster.requests if r.path.endswith("/ownedNamespaces")]
    assert hops == [(ids[2], 307), (target, 200)]
    assert "pulsar" in admin.tenants()
    # The heartbeat namespaces have no policies and are not listed; pulsar/system is.
    assert admin.namespaces("pulsar") == ["pulsar/system"]


def test_a_redirect_names_the_target_broker_by_absolute_url(make):
    cluster = make()
    cluster.step(0.0)
    bundle, owner = owned_bundle(cluster, avoid=[cluster.broker_ids[1]])
    status, headers, _ = put(
        cluster, cluster.broker_ids[1], f"/admin/v2/namespaces/{bundle}/unload"
    )
    assert status == 307
    assert headers["Location"] == (
        f"http://{owner}/admin/v2/namespaces/{bundle}/unload?authoritative=false"
    )
    assert put(cluster, cluster.broker_ids[1], "/admin/v2/nothing/here")[0] == 404


def test_the_connector_observes_the_cluster_and_accepts_every_broker_s_report(served):
    cluster, admin = served()
    seen = observe(admin)
    assert seen.errors == []
    assert seen.brokers == sorted(cluster.broker_ids)
    assert seen.leader == cluster.broker_ids[0]
    assert seen.load_manager == MODULAR
    assert len(seen.namespaces) == len(DEMO.namespaces) + len(DEMO.anti_affinity)
    assert seen.namespaces["acme/orders-east"][1] == "orders-ha"
    assert seen.namespaces["acme/orders"] == (
        [f"0x{k * 0x10000000:08x}" for k in range(16)] + ["0xffffffff"],
        None,
    )
    assert seen.unowned() == []
    assert seen.owners == {b: o for b, o in cluster.owners.items() if not cluster.is_system(b)}
    assert set(seen.reports) == set(cluster.broker_ids)
    for broker, data in seen.reports.items():
        owned = [b for b, o in seen.owners.items() if o == broker]
        doc = report_document(broker, data, owned)
        assert set(doc["bundles"]) == set(owned)
        # lastStats: every bundle with loaded topics (PulsarStats.getBundleStats), and
        # bundles/numBundles counted from them (LocalBrokerData.updateBundleData).
        loaded = {b for b in owned if cluster._stats.get(b, {}).get("topics", 0) > 0}
        assert set(doc["bundleStats"]) == loaded
        assert set(data["bundles"]) == set(data["lastStats"]) == loaded
        assert data["numBundles"] == len(loaded)
        assert data["bundleStats"] == data["lastStats"]
        assert doc["bandwidthIn"]["usage"] == pytest.approx(data["msgThroughputIn"])
        assert doc["cpu"]["limit"] == 800.0
    # Observing never looks a topic up nor splits: nothing was assigned by the connector.
    assert not [r for r in cluster.requests if r.path.startswith("/lookup/")]
    assert {a.cause for a in cluster.assignments} == {"client"}
    # E11's lastStats is not the top N (that limit is PIP-354's, on the leader's writes): its
    # bundles are those E12 lists, every bundle with loaded topics.
    broker = cluster.broker_ids[3]
    report = admin.load_report(broker)
    assert set(report["lastStats"]) == set(e12_throughput(admin, broker))
    assert len(report["lastStats"]) > 10


def e12_throughput(admin: PulsarAdmin, broker: str) -> dict[str, float]:
    """Bundle -> throughput in + out (bytes/s) summed from the broker's E12 topic stats."""
    out: dict[str, float] = {}
    for namespace, ranges in admin.get_object(
        "/admin/v2/broker-stats/topics", broker=broker
    ).items():
        for label, domains in ranges.items():
            out[f"{namespace}/{label}"] = sum(
                t["msgThroughputIn"] + t["msgThroughputOut"] for t in domains["persistent"].values()
            )
    return out


def test_anti_affinity_bundle_of_a_topic_domains_and_health_read_as_pulsar_answers(make):
    cluster = make()
    broker = cluster.broker_ids[1]

    def get(path, query=""):
        return cluster.handle(broker, "GET", path, query, AUTH)

    group = get("/admin/v2/namespaces/acme/orders-east/antiAffinity")
    assert (group[0], group[2]) == (200, b"orders-ha")
    assert group[1]["Content-Type"].startswith("application/json")  # raw text, JSON media type
    assert get("/admin/v2/namespaces/acme/orders/antiAffinity") == (204, {}, b"")
    members = get("/admin/v2/namespaces/demo/antiAffinity/ledger-dr", "tenant=initech")
    assert json.loads(members[2]) == ["initech/ledger-primary", "initech/ledger-standby"]
    label = get("/lookup/v2/topic/persistent/acme/orders/t1/bundle")[2].decode()
    assert label == _sixteenth("persistent://acme/orders/t1")
    assert not cluster.assignments  # asking for the bundle of a topic assigns nothing
    assert json.loads(get("/admin/v2/clusters/demo/failureDomains/zone-c")[2]) == {
        "brokers": cluster.broker_ids[6:8]
    }
    assert get("/admin/v2/clusters/demo/failureDomains/zone-x")[0] == 404
    assert get("/admin/v2/brokers/health")[2] == b"ok"
    assert get("/admin/v2/namespaces/nobody")[0] == 404


def _sixteenth(topic: str) -> str:
    """The range label of the initial 16 bundles that holds ``topic``."""
    index = topic_hash(topic) >> 28
    upper = 0xFFFFFFFF if index == 15 else (index + 1) << 28
    return f"0x{index << 28:08x}_0x{upper:08x}"


def test_a_2_10_cluster_has_no_leader_broker_id_and_ignores_the_destination(make):
    cluster = make(pulsar_version="2.10.6")
    cluster.step(0.0)
    ids = cluster.broker_ids
    leader = cluster.handle(ids[3], "GET", "/admin/v2/brokers/leaderBroker", "", AUTH)
    assert json.loads(leader[2]) == {"serviceUrl": f"http://{ids[0]}"}
    bundle, owner = owned_bundle(cluster)
    response = put(cluster, owner, f"/admin/v2/namespaces/{bundle}/unload", "destinationBroker=x:1")
    assert response[0] == 204  # no 409: the parameter did not exist yet
    assert cluster.owners[bundle] is None
    assert cluster.affinity == {}
    report = json.loads(
        cluster.handle(ids[0], "GET", "/admin/v2/broker-stats/load-report", "", AUTH)[2]
    )
    assert report["bundleStats"] == report["lastStats"]
    assert "loadManagerClassName" not in report
    assert report["brokerVersionString"] == "2.10.6"


def test_unloading_a_bundle_nobody_owns_is_204_and_only_leaves_a_hint(served):
    """NamespacesBase.internalUnloadNamespaceBundleAsync checks the destination (409) and sets
    the modular leader's hint before it checks ownership: an unowned bundle's unload to a
    destination is a 204 that leaves the hint for its next lookup."""
    cluster, admin = served(steps=0)
    before = dict(cluster.owners)
    admin.unload("acme/orders/0x00000000_0x10000000")
    assert not cluster.affinity
    with pytest.raises(PulsarAdminError) as inactive:
        admin.unload("acme/orders/0x00000000_0x10000000", destination="gone:1")
    assert inactive.value.status == 409
    admin.unload("acme/orders/0x00000000_0x10000000", destination=cluster.broker_ids[3])
    assert cluster.owners == before
    assert not cluster.assignments
    # 3.3.2 keys the hint by range (apache/pulsar#25518 came with 4.0.10 / 4.2.1).
    assert cluster.affinity == {"0x00000000_0x10000000": cluster.broker_ids[3]}


def test_a_modular_unload_to_a_destination_goes_via_the_leader_and_the_next_lookup_obeys(served):
    cluster, admin = served(entry=5)
    admin.set_dynamic_config("loadBalancerSheddingEnabled", "false")
    ids = cluster.broker_ids
    leader, entry = ids[0], ids[5]
    bundle, owner = owned_bundle(cluster, avoid=[leader, entry])
    destination = ids[7] if owner != ids[7] else ids[6]
    admin.unload(bundle, destination)
    hops = [
        (r.broker, r.status, parse_qs(r.query))
        for r in cluster.requests
        if r.path.endswith("/unload")
    ]
    assert hops == [
        (entry, 307, {"destinationBroker": [destination]}),
        (leader, 307, {"destinationBroker": [destination], "authoritative": ["false"]}),
        (owner, 204, {"authoritative": ["true"]}),  # the owner's hop drops the destination
    ]
    assert cluster.owners[bundle] is None
    assert observe(admin).unowned() == [bundle]
    cluster.step(0.0)  # the clients' lookup consumes the one-shot affinity
    assert cluster.owners[bundle] == destination
    assert cluster.assignments[-1] == Assignment(1, bundle, destination, "client", affinity=True)
    assert cluster.affinity == {}


def test_an_inactive_destination_is_refused_with_409(make):
    cluster = make()
    cluster.step(0.0)
    bundle, owner = owned_bundle(cluster)
    path = f"/admin/v2/namespaces/{bundle}/unload"
    response = put(cluster, owner, path, "destinationBroker=10.9.9.9%3A8080")
    assert response[0] == 409
    assert reason(response) == "Not allowed unload namespace bundle to inactive destination broker"
    assert cluster.owners[bundle] == owner
    # An http:// prefix is stripped: an active broker named by URL is a destination.
    other = next(b for b in cluster.broker_ids if b != owner)
    assert put(cluster, owner, path, f"destinationBroker=http://{other}")[0] in (204, 307)


def test_an_extensible_unload_to_a_destination_is_a_transfer_and_to_its_owner_a_500(served):
    cluster, admin = served(load_manager="extensible", unload_delay_s=0.05)
    bundle, owner = owned_bundle(cluster)
    destination = next(b for b in cluster.broker_ids if b != owner)
    started = time.monotonic()
    admin.unload(bundle, destination)
    assert time.monotonic() - started >= 0.05  # the call blocks while the bundle moves
    assert cluster.owners[bundle] == destination  # at once, no lookup needed
    assert cluster.assignments[-1].cause == "transfer"
    with pytest.raises(PulsarAdminError) as refused:
        admin.unload(bundle, destination)
    assert refused.value.status == 500
    assert "cannot be transfer to same broker" in refused.value.reason
    status, headers, body = put(
        cluster,
        destination,
        f"/admin/v2/namespaces/{bundle}/unload",
        f"destinationBroker={destination}",
    )
    assert status == 500
    assert headers["Content-Type"].startswith("text/plain")
    assert body.decode().startswith(UNEXPECTED)
    seen = observe(admin)  # no load report over REST: read from /metrics and E12 instead
    assert seen.load_manager == EXTENSIBLE
    assert seen.errors == []
    for broker, data in seen.reports.items():
        report_document(broker, data, [b for b, o in seen.owners.items() if o == broker])


def test_split_refusals_are_412(make):
    cluster = make()
    cluster.step(0.0)
    bundle = "acme/orders/0x10000000_0x20000000"
    owner = cluster.owners[bundle]
    path = f"/admin/v2/namespaces/{bundle}/split"
    before = {ns: list(b) for ns, b in cluster.boundaries.items()}
    unsupported = put(cluster, owner, path, "splitAlgorithmName=half_and_half")
    assert unsupported[0] == 412
    assert "range_equally_divide" in reason(unsupported)
    specified = "splitAlgorithmName=specified_positions_divide"
    assert put(cluster, owner, path, specified)[0] == 412
    assert put(cluster, owner, path, specified, b"[]")[0] == 412
    # A position outside the bundle is dropped silently (SpecifiedPositionsBundleSplitAlgorithm):
    # no boundary left, nothing split, 204 under the modular load manager.
    assert put(cluster, owner, path, specified, b"[1]")[0] == 204
    assert cluster.boundaries == before
    malformed = put(cluster, owner, "/admin/v2/namespaces/acme/orders/0x0000_0xzz/split")
    assert malformed[0] == 412
    stale = put(cluster, owner, "/admin/v2/namespaces/acme/orders/0x00000000_0x20000000/split")
    assert stale[0] == 412
    assert reason(stale).startswith("Invalid bundle range")
    assert (
        put(cluster, owner, "/admin/v2/namespaces/acme/nope/0x00000000_0x10000000/split")[0] == 404
    )
    assert cluster.boundaries == before


def test_a_split_replaces_the_bundle_by_two_children_on_its_owner(served):
    cluster, admin = served(entry=6)
    bundle = "acme/orders/0x00000000_0x10000000"
    owner = cluster.owners[bundle]
    admin.split(bundle, "range_equally_divide")
    assert admin.bundle_boundaries("acme/orders")[:3] == ["0x00000000", "0x08000000", "0x10000000"]
    owned = admin.owned_bundles("demo", owner)
    assert {"acme/orders/0x00000000_0x08000000", "acme/orders/0x08000000_0x10000000"} <= set(owned)
    assert bundle not in owned
    # The modular load manager unloads both children when asked to.
    admin.split(
        "acme/orders/0x00000000_0x08000000", "specified_positions_divide", [0x04000000], unload=True
    )
    assert cluster.owners["acme/orders/0x00000000_0x04000000"] is None
    assert cluster.owners["acme/orders/0x04000000_0x08000000"] is None
    assert admin.bundle_boundaries("acme/orders")[:4] == [
        "0x00000000",
        "0x04000000",
        "0x08000000",
        "0x10000000",
    ]


def test_topic_count_split_halves_the_topics_that_broker_stats_show(served):
    cluster, admin = served()
    bundle = "globex/logs/0x40000000_0x50000000"
    owner = cluster.owners[bundle]
    stats = admin.get_object("/admin/v2/broker-stats/topics", broker=owner)
    topics = stats["globex/logs"]["0x40000000_0x50000000"]["persistent"]
    assert len(topics) >= 2
    assert {"msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut"} <= set(
        next(iter(topics.values()))
    )
    admin.split(bundle, "topic_count_equally_divide")
    bounds = cluster.boundaries["globex/logs"]
    cut = bounds[bounds.index(0x40000000) + 1]
    assert 0x40000000 < cut < 0x50000000
    assert bounds[bounds.index(cut) + 1] == 0x50000000
    after = admin.get_object("/admin/v2/broker-stats/topics", broker=owner)["globex/logs"]
    counts = [
        len(after[f"0x40000000_0x{cut:08x}"]["persistent"]),
        len(after[f"0x{cut:08x}_0x50000000"]["persistent"]),
    ]
    assert sum(counts) == len(topics)
    assert abs(counts[0] - counts[1]) <= 1


def test_splitting_a_bundle_nobody_owns_assigns_it_first(make):
    cluster = make(load_manager="extensible")
    bundle = "acme/payments/0x00000000_0x10000000"
    path = f"/admin/v2/namespaces/{bundle}/split"
    entry = cluster.broker_ids[0]
    status, _headers, _ = put(cluster, entry, path, "unload=true")
    # Pulsar's quirk: the ownership check of a split assigns a bundle nobody owns.
    assert [(a.bundle, a.cause) for a in cluster.assignments] == [(bundle, "split")]
    owner = cluster.assignments[-1].broker
    assert status == (204 if owner == entry else 307)
    if status == 307:
        assert put(cluster, owner, path, "unload=true&authoritative=true")[0] == 204
    # Extensible: ``unload`` is ignored, both children stay with the owner.
    assert cluster.owners["acme/payments/0x00000000_0x08000000"] == owner
    assert cluster.owners["acme/payments/0x08000000_0x10000000"] == owner


def test_every_request_needs_the_token(make, served):
    cluster = make()
    entry = cluster.broker_ids[0]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        for path in ("/admin/v2/clusters", "/metrics"):
            status, _, body = cluster.handle(entry, "GET", path, "", headers)
            assert status == 401
            assert json.loads(body)["reason"]
    assert cluster.handle(entry, "GET", "/metrics", "", AUTH)[0] == 200
    running, _ = served(steps=0)
    with (
        PulsarAdmin(f"http://{running.broker_ids[0]}") as anonymous,
        pytest.raises(PulsarAdminError) as refused,
    ):
        anonymous.clusters()
    assert refused.value.status == 401
    assert refused.value.reason == "Authentication required"


def test_dynamic_configuration_round_trip(served):
    cluster, admin = served(steps=0)
    ids = cluster.broker_ids
    admin.set_dynamic_config("loadBalancerSheddingEnabled", "false")
    splits = "range_equally_divide,specified_positions_divide"  # the comma travels escaped
    admin.set_dynamic_config("supportedNamespaceBundleSplitAlgorithms", splits)
    assert admin.dynamic_overrides() == {
        "loadBalancerSheddingEnabled": "false",
        "supportedNamespaceBundleSplitAlgorithms": splits,
    }
    runtime = admin.runtime_config(ids[3])
    assert runtime["loadBalancerSheddingEnabled"] == "false"
    assert runtime["loadManagerClassName"] == MODULAR
    assert runtime["webServicePort"] == f"Optional[{ids[3].rsplit(':', 1)[1]}]"  # Java's
    assert runtime["loadBalancerSheddingIntervalMinutes"] == "1"
    editable = admin.get_list("/admin/v2/brokers/configuration")
    assert "loadBalancerSheddingEnabled" in editable
    assert "loadBalancerEnabled" not in editable
    assert "loadManagerClassName" in editable  # dynamic in Pulsar's ServiceConfiguration
    for name, value, expected in (
        ("loadBalancerEnabled", "false", "Can't update non-dynamic configuration"),
        ("loadManagerClassName", EXTENSIBLE, "Invalid dynamic-config value"),
        ("noSuchKey", "1", "Can't update non-dynamic configuration"),
        ("loadBalancerSheddingEnabled", "maybe", "Invalid dynamic-config value"),
        ("loadBalancerSheddingIntervalMinutes", "ten", "Invalid dynamic-config value"),
    ):
        with pytest.raises(PulsarAdminError) as refused:
            admin.set_dynamic_config(name, value)
        assert (refused.value.status, refused.value.reason) == (412, expected)
    admin.delete_dynamic_config("loadBalancerSheddingEnabled")
    assert "loadBalancerSheddingEnabled" not in admin.dynamic_overrides()
    # Pulsar: the override is gone, the value stays until the broker restarts.
    assert admin.runtime_config()["loadBalancerSheddingEnabled"] == "false"
    cluster.step(0.0)
    with pytest.raises(PulsarAdminError) as refused:
        admin.split("acme/orders/0x00000000_0x10000000", "topic_count_equally_divide")
    assert refused.value.status == 412


def all_on(cluster: PulsarCluster, broker: str) -> None:
    for bundle in cluster.owners:
        if not cluster.is_system(bundle):
            cluster.owners[bundle] = broker


def test_pulsar_s_own_shedder_unloads_from_an_overloaded_broker(make, caplog):
    cluster = make()
    hot = cluster.broker_ids[4]
    all_on(cluster, hot)
    caplog.set_level(logging.INFO, logger="fulcrum.pulsar_cluster")
    cluster.step(0.0)
    assert not cluster.shed_log  # the first interval has not passed yet
    cluster.step(0.0)
    record = cluster.shed_log[-1]
    assert record.strategy == "ThresholdShedder"
    assert record.reason == "Overloaded"
    assert record.unloads
    assert {(s, d) for _, s, d in record.unloads} == {(hot, None)}
    moved = [b for b, _, _ in record.unloads]
    assert all(cluster.owners[b] is None for b in moved)
    assert "ThresholdShedder (Overloaded)" in caplog.text
    cluster.step(0.0)  # the clients' lookups place them with Pulsar's placement
    assert all(cluster.owners[b] is not None for b in moved)
    assert any(cluster.owners[b] != hot for b in moved)


def test_pulsar_s_shedder_does_nothing_when_shedding_is_disabled(make):
    cluster = make()
    hot = cluster.broker_ids[4]
    all_on(cluster, hot)
    path = "/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/false"
    assert cluster.handle(hot, "POST", path, "", AUTH)[0] == 200  # Response.ok() from 3.x
    for _ in range(3):
        cluster.step(0.0)
    assert not cluster.shed_log
    assert {o for b, o in cluster.owners.items() if not cluster.is_system(b)} == {hot}


def test_metrics_and_the_extensible_load_report(make):
    cluster = make(load_manager="extensible")
    cluster.step(0.0)
    broker = cluster.broker_ids[2]
    status, headers, body = cluster.handle(
        broker, "GET", "/admin/v2/broker-stats/load-report", "", AUTH
    )
    assert status == 500
    assert headers["Content-Type"].startswith("text/plain")
    assert body.decode().startswith(UNEXPECTED)
    status, headers, body = cluster.handle(broker, "GET", "/metrics", "", AUTH)
    text = body.decode()
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    assert "# TYPE pulsar_lb_cpu_usage gauge" in text
    assert 'pulsar_lb_cpu_usage{cluster="demo",broker="127.0.0.1",metric="loadBalancing"} ' in text
    assert 'feature="max_ema"' in text
    assert "pulsar_bundle_" not in text
    modular = make()
    modular.step(0.0)
    text = modular.handle(broker := modular.broker_ids[2], "GET", "/metrics", "", AUTH)[2].decode()
    assert "pulsar_bundle_" not in text  # exposeBundlesMetricsInPrometheus is false by default
    assert "pulsar_lb_cpu_usage" in text
    modular = make(expose_bundle_metrics=True)
    modular.step(0.0)
    text = modular.handle(broker := modular.broker_ids[2], "GET", "/metrics", "", AUTH)[2].decode()
    owned = [b for b, o in modular.owners.items() if o == broker and not modular.is_system(b)]
    rates = [line for line in text.splitlines() if line.startswith("pulsar_bundle_msg_rate_in{")]
    assert len(rates) == len(owned)
    assert f'bundle="{owned[0]}"' in text
    assert "pulsar_lb_resource_usage" not in text


def test_a_lookup_assigns_an_unowned_bundle_and_the_request_log_records_it(served):
    cluster, admin = served(steps=0)
    topic = "persistent://acme/orders/t1"
    data = admin.get_object("/lookup/v2/topic/persistent/acme/orders/t1")
    bundle = f"acme/orders/{_sixteenth(topic)}"
    owner = cluster.owners[bundle]
    assert owner is not None
    assert data["httpUrl"] == f"http://{owner}"
    assert data["brokerUrl"].startswith("pulsar://127.0.0.1:")
    assert data["nativeUrl"]
    assert list(cluster.assignments) == [Assignment(0, bundle, owner, "lookup")]
    admin.get_object("/lookup/v2/topic/persistent/acme/orders/t1")
    assert len(cluster.assignments) == 1  # owned now: a lookup just answers
    lookups = [r for r in cluster.requests if r.path.startswith("/lookup/")]
    assert [(r.method, r.path, r.status) for r in lookups] == [
        ("GET", "/lookup/v2/topic/persistent/acme/orders/t1", 200)
    ] * 2


def test_the_command_line_serves_and_plays_the_traces(caplog):
    base = free_port_block(8)
    caplog.set_level(logging.INFO, logger="fulcrum.pulsar_cluster")
    main(["--base-port", str(base), "--steps", "2", "--step-seconds", "0", "--token", TOKEN])
    assert "trace minute 0" in caplog.text
    assert "trace minute 1" in caplog.text
    assert f"127.0.0.1:{base}" in caplog.text
    assert _all_free(range(base, base + 8))  # stopped: the ports are free again


def test_the_command_line_serves_a_cluster_of_any_size_over_http_and_https(
    caplog, capsys, tmp_path
):
    base = free_port_block(24)
    caplog.set_level(logging.INFO, logger="fulcrum.pulsar_cluster")
    main(
        [
            "--base-port",
            str(base),
            "--tls-base-port",
            str(base + 12),
            "--tls-dir",
            str(tmp_path),
            "--brokers",
            "12",
            "--namespaces",
            "30",
            "--bundles-per-namespace",
            "8",
            "--failure-domains",
            "4",
            "--pulsar-version",
            "4.0.10",
            "--remote-clusters",
            "",
            "--steps",
            "1",
            "--step-seconds",
            "0",
            "--token",
            TOKEN,
        ]
    )
    assert "12 brokers, 30 namespaces, 240 bundles" in caplog.text
    assert "Pulsar 4.0.10" in caplog.text
    assert (tmp_path / "pulsar-ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert _all_free(range(base, base + 24))
    with pytest.raises(SystemExit):
        main(["--brokers", "2", "--failure-domains", "3", "--steps", "0"])
    assert "3 failure domains need at least as many brokers" in capsys.readouterr().err


def _all_free(ports) -> bool:
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True
