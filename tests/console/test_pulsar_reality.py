"""Fulcrum against Pulsar as Pulsar's source says it behaves (PULSAR_REALITY.md): the simulated
cluster follows the Pulsar class named in each test, and the connector copes — a steady broker's
``lastUpdate`` stays old while it keeps serving, per-broker calls over https go where Pulsar
redirects, the local cluster is never guessed among several, the modular leader's destination
hint keyed by range, a split Pulsar makes nothing of, a 302, slow brokers, and the ways to
authenticate (a token file, OAuth2 client credentials, a TLS client certificate)."""

from __future__ import annotations

import json
import logging
import ssl
import time
from datetime import UTC, datetime
from urllib.parse import parse_qs

import httpx
import pytest
import respx
import time_machine
import trustme

from balancer.cycle import broker_life
from balancer.safety import SafetyConfig
from balancer.simulator.layout import DEMO
from console.connectors.pulsar_cluster import PulsarCluster, serve, stop
from console.pulsar.admin import PulsarAdmin, PulsarAdminError
from console.pulsar.auth import AuthError, OAuth2ClientCredentials, TokenFile
from console.pulsar.observe import ObserveCache, cluster_name_get, observe
from tests.console.pulsar_world import TOKEN, answer, flat_cpu
from tests.support import free_ports

AUTH = {"Authorization": f"Bearer {TOKEN}"}
START = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def quiet_layout(cluster: PulsarCluster) -> str:
    """The last broker owns only the anti-affinity namespaces' bundles (no trace traffic); every
    other bundle is dealt over the other brokers. Returns the quiet broker."""
    quiet = cluster.broker_ids[-1]
    busy = cluster.broker_ids[:-1]
    idle = {ns for ns, _, _ in DEMO.anti_affinity}
    dealt = 0
    for bundle in sorted(cluster.owners):
        if cluster.is_system(bundle):
            continue
        if bundle.rsplit("/", 1)[0] in idle:
            cluster.owners[bundle] = quiet
        else:
            cluster.owners[bundle] = busy[dealt % len(busy)]
            dealt += 1
    cluster.effective["loadBalancerSheddingEnabled"] = False
    return quiet


def last_update(cluster: PulsarCluster, broker: str) -> int:
    status, _, body = cluster.handle(broker, "GET", "/admin/v2/broker-stats/load-report", "", AUTH)
    assert status == 200
    return int(json.loads(body)["lastUpdate"])


# -- lastUpdate: ModularLoadManagerImpl.writeBrokerDataOnZooKeeper / needBrokerDataUpdate ---------


def test_last_update_moves_only_when_the_broker_writes_its_report(workload):
    now = [START.timestamp()]
    cluster = PulsarCluster(
        workload, flat_cpu(), token=TOKEN, ports=free_ports(8), clock=lambda: now[0]
    )
    quiet = quiet_layout(cluster)
    busy = cluster.broker_ids[0]
    cluster.step(now[0])
    written = last_update(cluster, quiet)
    assert written == int(now[0] * 1000)
    for _ in range(15):  # steady: no change over 10 %, and not yet 15 minutes
        now[0] += 60
        cluster.step(now[0])
        assert last_update(cluster, quiet) == written
    now[0] += 61  # more than loadBalancerReportUpdateMaxIntervalMinutes since the last write
    cluster.step(now[0])
    assert last_update(cluster, quiet) == int(now[0] * 1000)
    # A broker whose bundle count moves (0 -> 1 bundle with loaded topics: an infinite change)
    # writes at its next check.
    written = last_update(cluster, quiet)
    traffic_bundle = next(
        b for b, o in sorted(cluster.owners.items()) if o == busy and cluster._stats[b]["topics"]
    )
    cluster.owners[traffic_bundle] = quiet
    now[0] += 5
    cluster.step(now[0])
    assert last_update(cluster, quiet) == int(now[0] * 1000) != written


def test_a_quiet_broker_stays_serving_for_an_hour_with_an_old_last_update(workload, db, settings):
    """Through the console: each pass reads the reports and ingests them at the time it read
    them; the quiet broker's lastUpdate is up to 15 minutes old, and it is never lost."""
    from console import selectors
    from console.models import PulsarConnection
    from console.services.connections import token_encrypt
    from console.services.pulsar import pulsar_sync_run
    from console.services.seed import config_seed

    settings.FULCRUM_PULSAR_URL = ""
    settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START = False
    timeout = settings.FULCRUM_BROKER_TIMEOUT_S
    with time_machine.travel(START, tick=False) as clock:
        cluster = PulsarCluster(workload, flat_cpu(), token=TOKEN, start_minute=600)
        quiet = quiet_layout(cluster)
        config_seed()
        PulsarConnection.objects.create(
            name="demo",
            admin_url=f"http://{cluster.broker_ids[0]}",
            token_encrypted=token_encrypt(TOKEN),
            is_attached=True,
        )
        stale_minutes = 0
        with respx.mock(assert_all_called=False) as router:
            router.route().mock(side_effect=answer(cluster))
            for _ in range(60):
                clock.shift(60)
                cluster.step(time.time())
                summary = pulsar_sync_run()
                assert summary["reports"] == len(cluster.broker_ids)
                now = time.time()
                snapshot = selectors.cluster_snapshot_get(now=datetime.now(UTC))
                lost, _ = broker_life(snapshot, SafetyConfig(broker_timeout_s=timeout), now)
                assert quiet not in lost
                assert snapshot.brokers[quiet].reported_at == pytest.approx(now)
                read = summary["brokerReads"][quiet]
                written = datetime.fromisoformat(read["lastUpdate"]).timestamp()
                stale_minutes += now - written > timeout
        # With lastUpdate as the report's time, the quiet broker would have been lost for
        # most of the hour.
        assert stale_minutes >= 40
        assert cluster.owners[next(b for b, o in cluster.owners.items() if o == quiet)] == quiet


# -- TLS: PulsarWebResource.maybeRedirectToBroker picks webServiceUrlTls for https requests ------


@pytest.fixture
def tls_cluster(workload, tmp_path):
    """The demo cluster served on http and https ports (ids keep the http port), the CA's PEM."""
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    ports = free_ports(16)
    cluster = PulsarCluster(workload, flat_cpu(), token=TOKEN, ports=ports[:8], tls_ports=ports[8:])
    cluster.step(0.0)
    servers = serve(cluster, tls=context)
    yield cluster, pem, ca, context
    stop(servers)


def test_over_https_every_broker_is_read_at_the_url_pulsar_redirects_to(tls_cluster):
    cluster, pem, _, _ = tls_cluster
    entry = f"https://127.0.0.1:{cluster.tls_port_of[cluster.broker_ids[2]]}"
    with PulsarAdmin(entry, token=TOKEN, tls_ca_file=str(pem), read_timeout_s=5) as admin:
        seen = observe(admin)
    assert seen.errors == []
    assert set(seen.reports) == set(cluster.broker_ids)
    # Each broker's URL is its TLS one, as Pulsar's redirect named it; the id's (http) port
    # was never asked over https.
    assert seen.broker_urls == {
        b: f"https://127.0.0.1:{cluster.tls_port_of[b]}" for b in cluster.broker_ids
    }
    assert cluster.requests
    assert all(r.is_secure for r in cluster.requests)
    hops = [r for r in cluster.requests if r.path.endswith("/ownedNamespaces")]
    # Each broker's URL came from a redirect to it: the one the service URL is was asked again
    # through another broker.
    assert sum(r.status == 307 for r in hops) == len(cluster.broker_ids)
    # The http port does not speak TLS: the guess Fulcrum made before fails there.
    with (
        PulsarAdmin(
            f"https://{cluster.broker_ids[3]}", token=TOKEN, tls_ca_file=str(pem), read_timeout_s=2
        ) as guessed,
        pytest.raises(PulsarAdminError) as refused,
    ):
        guessed.clusters()
    assert refused.value.status == 0


def test_a_tls_client_certificate_authenticates_without_a_token(
    tls_cluster, tmp_path, caplog, capfd
):
    """AuthenticationProviderTls: the role is the client certificate's CN; a broker that
    requires one refuses the handshake without it (a debug line in the simulator's log, as
    Jetty's, not a traceback on stderr)."""
    caplog.set_level(logging.DEBUG, logger="fulcrum.pulsar_cluster")
    cluster, pem, ca, context = tls_cluster
    context.verify_mode = ssl.CERT_REQUIRED
    ca.configure_trust(context)
    client = ca.issue_cert("fulcrum-admin")
    chain = tmp_path / "client.pem"
    client.private_key_and_cert_chain_pem.write_to_path(str(chain))
    cluster.token = None  # the certificate is the credential
    entry = f"https://127.0.0.1:{cluster.tls_port_of[cluster.broker_ids[0]]}"
    with PulsarAdmin(entry, tls_ca_file=str(pem), tls_cert_file=str(chain)) as admin:
        assert admin.brokers("demo") == sorted(cluster.broker_ids)
    with (
        PulsarAdmin(entry, tls_ca_file=str(pem), read_timeout_s=2) as anonymous,
        pytest.raises(PulsarAdminError) as refused,
    ):
        anonymous.brokers("demo")
    assert refused.value.status == 0
    deadline = time.monotonic() + 5
    while "ended below HTTP" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ended below HTTP" in caplog.text
    assert "Traceback" not in capfd.readouterr().err


# -- the cluster's name: ClustersBase.getClusters lists every cluster of the store --------------


def test_the_local_cluster_is_the_brokers_own_and_never_guessed(workload):
    cluster = PulsarCluster(workload, flat_cpu(), token=TOKEN, ports=free_ports(8))
    cluster.step(0.0)
    with respx.mock(assert_all_called=False) as router:
        router.route().mock(side_effect=answer(cluster))
        with PulsarAdmin(f"http://{cluster.broker_ids[1]}", token=TOKEN) as admin:
            assert admin.clusters() == ["demo-dr", "demo"]  # the remote one first
            seen = observe(admin)
            assert (seen.cluster, seen.cluster_source) == ("demo", "clusterName")
            with pytest.raises(PulsarAdminError) as remote:
                observe(admin, "demo-dr")
            assert remote.value.status == 409
            assert "belong to cluster demo, not demo-dr" in remote.value.reason
            # Without the brokers' clusterName, two listed clusters are not guessed between.
            with pytest.raises(PulsarAdminError) as unsure:
                cluster_name_get(admin, None, None)
            assert unsure.value.status == 409
            assert "lists demo, demo-dr: not guessed" in unsure.value.reason
            cluster.remote_clusters = []
            assert cluster_name_get(admin, None, None) == ("demo", "the only cluster listed")
    # A call about the remote cluster is redirected to it (validateClusterOwnership).
    status, headers, _ = cluster.handle(
        cluster.broker_ids[0], "GET", "/admin/v2/brokers/demo-east", "", AUTH
    )
    assert status == 404
    cluster.remote_clusters = ["demo-east"]
    status, headers, _ = cluster.handle(
        cluster.broker_ids[0], "GET", "/admin/v2/brokers/demo-east", "", AUTH
    )
    assert (status, headers["Location"]) == (
        307,
        "http://remote-cluster.invalid:8080/admin/v2/brokers/demo-east",
    )


# -- the modular leader's destination hint (NamespacesBase.setNamespaceBundleAffinityAsync) -----


@pytest.mark.parametrize(
    ("version", "crossed"), [("3.3.2", True), ("4.0.10", False), ("4.2.1", False)]
)
def test_before_the_fix_two_same_range_hints_cross_wire(workload, version, crossed):
    cluster = PulsarCluster(
        workload, flat_cpu(), token=TOKEN, ports=free_ports(8), pulsar_version=version
    )
    cluster.effective["loadBalancerSheddingEnabled"] = False
    cluster.step(0.0)
    ids = cluster.broker_ids
    first, second = "acme/orders/0x10000000_0x20000000", "acme/payments/0x10000000_0x20000000"
    for bundle in (first, second):
        cluster.owners[bundle] = ids[1]
    leader = cluster.leader
    for bundle, destination in ((first, ids[5]), (second, ids[6])):
        query = f"destinationBroker={destination}"
        assert cluster.handle(leader, "PUT", f"/admin/v2/namespaces/{bundle}/unload", query, AUTH)[
            0
        ] in (204, 307)
        if cluster.owners[bundle] is not None:  # the leader sent it on to the owner
            cluster.handle(ids[1], "PUT", f"/admin/v2/namespaces/{bundle}/unload", "", AUTH)
    cluster.step(0.0)  # the clients' lookups
    if crossed:
        # One hint, the second's: the first bundle's lookup took it, the second got none.
        assert cluster.owners[first] == ids[6]
    else:
        assert (cluster.owners[first], cluster.owners[second]) == (ids[5], ids[6])


@pytest.mark.parametrize(
    "version", ["3.0.17", "3.3.2", "4.0.9", "4.0.10", "4.0.13", "4.1.1", "4.2.0", "4.2.1", "5.0.0"]
)
def test_the_connector_and_the_simulator_agree_on_which_releases_key_by_range(workload, version):
    """Two tables, one each side (the release notes of apache/pulsar#25518): the connector's
    ``affinity_by_range`` and the simulator's ``AFFINITY_BY_NAME``."""
    from console.pulsar.observe import affinity_by_range

    cluster = PulsarCluster(workload, flat_cpu(), ports=free_ports(8), pulsar_version=version)
    keyed_by_range = cluster.affinity_key("acme/orders/0x00000000_0x10000000") == (
        "0x00000000_0x10000000"
    )
    assert affinity_by_range(version, extensible=False) is keyed_by_range
    assert affinity_by_range(version, extensible=True) is False


def queue(connection, bundle: str, source: str, **fields):
    from django.utils import timezone

    from console.models import PulsarMove

    return PulsarMove.objects.create(
        connection=connection,
        bundle=bundle,
        source=source,
        created_at=timezone.now(),
        **fields,
    )


def test_the_executor_keeps_one_destination_unload_per_range_in_flight(pulsar_world):
    from console.models import PulsarMove
    from console.services.pulsar import pulsar_sync_run

    build, clock = pulsar_world
    cluster, connection = build(pulsar_version="3.3.2")
    ids = cluster.broker_ids
    first, second = "acme/orders/0x10000000_0x20000000", "acme/payments/0x10000000_0x20000000"
    a = queue(connection, first, cluster.owners[first], kind="unload", destination=ids[5])
    b = queue(connection, second, cluster.owners[second], kind="unload", destination=ids[6])
    third = "globex/logs/0x10000000_0x20000000"  # a plain unload of the same range: its
    c = queue(connection, third, cluster.owners[third], kind="unload")  # assignment takes it too
    other = "globex/logs/0x20000000_0x30000000"  # another range goes at once
    d = queue(connection, other, cluster.owners[other], kind="unload")
    pulsar_sync_run()
    for move in (a, b, c, d):
        move.refresh_from_db()
    assert (a.state, b.state, c.state, d.state) == ("verifying", "queued", "queued", "verifying")
    assert c.outcome_reason.startswith("waiting: another unload of range 0x10000000_0x20000000")
    assert b.outcome_reason.startswith("waiting: another unload of range")
    assert "apache/pulsar#25518" in b.outcome_reason
    for _ in range(8):
        clock.shift(15)
        cluster.step(time.time())
        pulsar_sync_run()
    for move in (a, b, c, d):
        move.refresh_from_db()
    assert (a.outcome, b.outcome) == ("as-planned", "as-planned")
    assert c.state == d.state == "done"  # sent once the range was free, and verified
    assert (cluster.owners[first], cluster.owners[second]) == (ids[5], ids[6])
    assert PulsarMove.objects.filter(state="done").count() == 4


def test_a_split_pulsar_makes_nothing_of_is_reported_as_a_no_op(pulsar_world):
    from console.services.executor import NO_SPLIT
    from console.services.pulsar import pulsar_sync_run

    build, clock = pulsar_world
    cluster, connection = build()
    bundle = "acme/orders/0x10000000_0x20000000"
    outside = [0x30000000]  # SpecifiedPositionsBundleSplitAlgorithm drops it: no boundary
    move = queue(
        connection,
        bundle,
        cluster.owners[bundle],
        kind="split",
        algorithm="specified_positions_divide",
        boundaries=outside,
    )
    pulsar_sync_run()
    move.refresh_from_db()
    assert move.state == "verifying"  # 204: Pulsar accepted it
    clock.shift(61)
    cluster.step(time.time())
    pulsar_sync_run()
    move.refresh_from_db()
    assert (move.state, move.outcome) == ("done", "no-op")
    assert move.outcome_reason.startswith(NO_SPLIT)


def test_under_the_extensible_manager_the_no_boundary_500_is_a_no_op_at_once(pulsar_world):
    from console.services.executor import NO_SPLIT
    from console.services.pulsar import pulsar_sync_run

    build, _ = pulsar_world
    cluster, connection = build(load_manager="extensible")
    bundle = "acme/orders/0x10000000_0x20000000"
    move = queue(
        connection,
        bundle,
        cluster.owners[bundle],
        kind="split",
        algorithm="specified_positions_divide",
        boundaries=[0x30000000],
    )
    pulsar_sync_run()
    move.refresh_from_db()
    assert (move.state, move.outcome) == ("done", "no-op")
    assert move.outcome_reason.startswith(NO_SPLIT)
    assert "not found under namespace" in move.outcome_reason


# -- transport -----------------------------------------------------------------------------------


def test_a_redirect_other_than_307_or_308_is_an_error_naming_its_status():
    with respx.mock() as router:
        router.get("http://b:8080/admin/v2/clusters").respond(
            302, headers={"Location": "http://login.example/"}
        )
        with PulsarAdmin("http://b:8080") as admin, pytest.raises(PulsarAdminError) as refused:
            admin.clusters()
    assert refused.value.status == 302
    assert refused.value.reason.startswith("HTTP 302 Found to http://login.example/")


def test_a_slow_broker_is_named_and_the_pass_goes_on_without_it(workload):
    cluster = PulsarCluster(workload, flat_cpu(), token=TOKEN, ports=free_ports(8))
    cluster.step(0.0)
    slow = cluster.broker_ids[4]
    respond = answer(cluster)

    def sometimes_slow(request: httpx.Request) -> httpx.Response:
        if request.url.netloc.decode() == slow and request.url.path.endswith("/load-report"):
            time.sleep(2.5)
        return respond(request)

    with respx.mock(assert_all_called=False) as router:
        router.route().mock(side_effect=sometimes_slow)
        with PulsarAdmin(f"http://{cluster.broker_ids[0]}", token=TOKEN, deadline_s=1.0) as admin:
            started = time.monotonic()
            seen = observe(admin)
            waited = time.monotonic() - started
    assert set(seen.reports) == set(cluster.broker_ids) - {slow}
    assert any(
        e.startswith(f"{slow}: load report: no answer within 1.0 s (the deadline)")
        for e in seen.errors
    )
    assert waited < 2.5


def test_under_the_extensible_manager_topic_stats_are_read_once_a_minute_and_usage_kept(workload):
    now = [1000.0]
    cluster = PulsarCluster(
        workload, flat_cpu(), token=TOKEN, ports=free_ports(8), load_manager="extensible"
    )
    cluster.step(0.0)
    broken = cluster.broker_ids[3]
    failing = {"on": False}
    respond = answer(cluster)

    def scrape(request: httpx.Request) -> httpx.Response:
        if (
            failing["on"]
            and request.url.netloc.decode() == broken
            and request.url.path == "/metrics"
        ):
            return httpx.Response(503, text="busy")
        return respond(request)

    cache = ObserveCache(usage_max_age_s=60)
    with respx.mock(assert_all_called=False) as router:
        router.route().mock(side_effect=scrape)
        with PulsarAdmin(f"http://{cluster.broker_ids[0]}", token=TOKEN) as admin:
            first = observe(admin, cache=cache, clock=lambda: now[0])
            now[0] += 15
            second = observe(admin, cache=cache, clock=lambda: now[0])
            topics = [r for r in cluster.requests if r.path == "/admin/v2/broker-stats/topics"]
            assert len(topics) == len(cluster.broker_ids)  # once, not twice within a minute
            assert set(first.reports) == set(second.reports) == set(cluster.broker_ids)
            failing["on"] = True
            now[0] += 15
            kept = observe(admin, cache=cache, clock=lambda: now[0])
            assert broken in kept.reports
            (missing,) = kept.reads[broken].missing
            assert missing.startswith("resource usage: /metrics unreadable (")
            assert "the figures read 15 s ago are used" in missing
            now[0] += 60
            dropped = observe(admin, cache=cache, clock=lambda: now[0])
            assert broken not in dropped.reports
            assert any(e.startswith(f"{broken}: load report") for e in dropped.errors)


# -- authentication ------------------------------------------------------------------------------


def test_a_token_file_is_read_again_when_it_changes(tmp_path):
    path = tmp_path / "token"
    path.write_text("first\n")
    seen = []

    def broker(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.headers.get("authorization") != f"Bearer {path.read_text().strip()}":
            return httpx.Response(401, json={"reason": "Failed to authenticate"})
        return httpx.Response(200, json=["demo"])

    with respx.mock() as router, PulsarAdmin("http://b:8080", auth=TokenFile(str(path))) as admin:
        router.route().mock(side_effect=broker)
        assert admin.clusters() == ["demo"]
        path.write_text("second, rotated\n")
        assert admin.clusters() == ["demo"]
    assert seen == ["Bearer first", "Bearer second, rotated"]
    path.unlink()
    with pytest.raises(AuthError) as gone:
        TokenFile(str(path)).token()
    assert gone.value.field == "token_file"


@pytest.fixture
def issuer(tmp_path):
    """An OAuth2 issuer (respx): its well-known metadata and token endpoint, every token
    request's form kept; tokens expire after 120 s."""
    key = tmp_path / "key.json"
    key.write_text(
        json.dumps(
            {
                "type": "client_credentials",
                "client_id": "fulcrum",
                "client_secret": "sh",
                "issuer_url": "https://ignored.example",
            }
        )
    )
    forms: list[dict[str, list[str]]] = []

    def token(request: httpx.Request) -> httpx.Response:
        forms.append(parse_qs(request.content.decode()))
        return httpx.Response(200, json={"access_token": f"jwt-{len(forms)}", "expires_in": 120})

    with respx.mock(assert_all_called=False) as router:
        router.get("https://auth.example/.well-known/openid-configuration").respond(
            200, json={"token_endpoint": "https://auth.example/oauth/token"}
        )
        router.post("https://auth.example/oauth/token").mock(side_effect=token)
        yield router, key, forms


def test_oauth2_client_credentials_as_pulsar_s_client_sends_them(issuer):
    router, key, forms = issuer
    now = [0.0]
    source = OAuth2ClientCredentials(
        "https://auth.example", "urn:pulsar:demo", str(key), clock=lambda: now[0]
    )
    headers: list[str | None] = []

    def broker(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers.get("authorization"))
        if request.headers.get("authorization") == "Bearer jwt-2" and len(headers) == 3:
            return httpx.Response(401, json={"reason": "expired"})  # revoked early
        return httpx.Response(200, json=["demo"])

    router.get("http://b:8080/admin/v2/clusters").mock(side_effect=broker)
    with PulsarAdmin("http://b:8080", auth=source) as admin:
        admin.clusters()
        now[0] = 60  # still valid: the same token
        admin.clusters()
        now[0] = 110  # within 12 s (a tenth of its 120 s) of expiring: a new one
        admin.clusters()  # answered 401: fetched once more and retried
    assert headers == ["Bearer jwt-1", "Bearer jwt-1", "Bearer jwt-2", "Bearer jwt-3"]
    # TokenClient's form: the secret in the body (client_secret_post), audience as given.
    assert forms[0] == {
        "grant_type": ["client_credentials"],
        "client_id": ["fulcrum"],
        "client_secret": ["sh"],
        "audience": ["urn:pulsar:demo"],
    }
    assert len(forms) == 3
    with pytest.raises(AuthError) as missing:
        OAuth2ClientCredentials("https://auth.example", "a", str(key.parent / "nope.json"))
    assert missing.value.field == "oauth2_key_file"


def test_oauth2_refuses_what_would_leak_its_secret_and_names_the_issuer_s_refusal(issuer):
    import base64

    router, key, _ = issuer
    data = "data:application/json;base64," + base64.b64encode(key.read_bytes()).decode()
    with pytest.raises(AuthError, match="would keep the client secret in Fulcrum's database"):
        OAuth2ClientCredentials("https://auth.example/", "", data)
    with pytest.raises(AuthError, match="must be https"):
        OAuth2ClientCredentials("http://auth.example/", "", str(key))
    with pytest.raises(AuthError, match="is not a URL"):
        OAuth2ClientCredentials("https://[::1", "", str(key))
    source = OAuth2ClientCredentials("https://auth.example/", "", f"file://{key}", scope="admin")
    assert source.token() == "jwt-1"
    router.post("https://auth.example/oauth/token").respond(401, json={"error": "invalid_client"})
    source.invalidate()
    with pytest.raises(AuthError) as refused:
        source.token()
    assert "answered 401" in refused.value.message
    # An issuer whose metadata names an http token endpoint elsewhere: the secret is not sent.
    router.get("https://auth.example/.well-known/openid-configuration").respond(
        200, json={"token_endpoint": "http://auth.example/oauth/token"}
    )
    source.invalidate()
    with pytest.raises(AuthError, match="must be https"):
        source.token()


def test_a_token_source_is_kept_between_passes(db, issuer, tmp_path):
    """One OAuth2 token for many passes: the connection's source is kept while its settings
    stay the same (console.services.connections.connection_auth)."""
    from console.models import PulsarConnection
    from console.services.connections import connection_auth

    _, key, forms = issuer
    connection = PulsarConnection.objects.create(
        name="o",
        admin_url="https://b:8443",
        oauth2_issuer_url="https://auth.example",
        oauth2_key_file=str(key),
    )
    first = connection_auth(connection)
    assert first is connection_auth(PulsarConnection.objects.get(pk=connection.pk))
    assert first is not None
    first.token()
    connection_auth(connection).token()
    assert len(forms) == 1
    connection.oauth2_audience = "urn:other"
    assert connection_auth(connection) is not first


def test_a_connection_authenticates_one_way_and_says_which_field_is_wrong(db, tmp_path):
    from console.errors import ConsoleError
    from console.models import PulsarConnection
    from console.services.connections import admin_for, connection_auth

    token_file = tmp_path / "t"
    token_file.write_text("x")
    connection = PulsarConnection(name="c", admin_url="https://b:8443", token_file=str(token_file))
    assert isinstance(connection_auth(connection), TokenFile)
    connection.oauth2_issuer_url = "https://auth.example"
    with pytest.raises(ConsoleError) as both:
        connection_auth(connection)
    assert (both.value.status, both.value.field) == (409, "oauth2_issuer_url")
    connection.token_file = ""
    connection.oauth2_key_file = str(tmp_path / "absent.json")
    with pytest.raises(ConsoleError) as unreadable:
        connection_auth(connection)
    assert unreadable.value.field == "oauth2_key_file"
    connection.oauth2_issuer_url = connection.oauth2_key_file = ""
    connection.tls_cert_file = str(tmp_path / "absent.pem")
    with pytest.raises(ConsoleError) as certificate:
        admin_for(connection)
    assert certificate.value.field == "tls_cert_file"
