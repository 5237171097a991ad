"""Acting on a Pulsar cluster through the connector, replayed with respx against a small stateful
fake cluster built from PULSAR_ADMIN.md's shapes and semantics: the executor's unloads (with and
without a destination, modular and extensible load manager, a 2.10 broker), splits with each
algorithm, verification by observing (a destination the modular manager lost), refusals, the
cap on moves in flight, stopping the executor, and taking and releasing control."""

from __future__ import annotations

import itertools
import json
import time
from datetime import timedelta
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest
import respx
from django.utils import timezone

from console.pulsar.admin import PulsarAdmin
from tests.console.test_pulsar_connector import local_broker_data

TOKEN = "s3cret-jwt"
B1, B2, B3 = "broker-1:8080", "broker-2:8080", "broker-3:8080"
MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
NS = "public/default"
ALGORITHMS = (
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
)
DYNAMIC = ["loadBalancerSheddingEnabled", "loadBalancerAutoBundleSplitEnabled"]


def name(lower: int, upper: int) -> str:
    return f"{NS}/0x{lower:08x}_0x{upper:08x}"


class Cluster:
    """Three brokers; broker-2 leads. Unload: ML -> unowned with a one-shot affinity on the
    leader, EL -> a transfer; ``lookup`` is a client's lookup (assigns). Splits keep the
    children on the owner. Dynamic config with overrides. Every request recorded."""

    def __init__(self, load_manager: str = MODULAR, version: str = "3.3.2") -> None:
        self.load_manager, self.version = load_manager, version
        self.bounds = [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]
        self.owner: dict[str, str | None] = {
            name(0, 0x40000000): B1,
            name(0x40000000, 0x80000000): B1,
            name(0x80000000, 0xC0000000): B1,
            name(0xC0000000, 0xFFFFFFFF): B2,
        }
        self.affinity: dict[str, str] = {}
        self.defaults = dict.fromkeys(DYNAMIC, "true") | {"loadManagerClassName": load_manager}
        self.overrides: dict[str, str] = {}
        self.requests: list[httpx.Request] = []
        self.refuse_config = False
        self.forget_config = False  # answers 204 and keeps nothing (a broker that lost it)

    def lookup(self, bundle: str, *, lose_affinity: bool = False) -> str:
        """A client's lookup: the affinity first (unless another lookup took it), else the
        broker owning the fewest bundles."""
        hint = self.affinity.pop(bundle, None)
        if hint is None or lose_affinity:
            counts = {b: list(self.owner.values()).count(b) for b in (B1, B2, B3)}
            hint = min((b for b in counts if b != hint), key=lambda b: (counts[b], b))
        self.owner[bundle] = hint
        return hint

    def _redirect(self, broker: str, request: httpx.Request, drop: str = "") -> httpx.Response:
        query = {k: v for k, v in parse_qs(request.url.query.decode()).items() if k != drop}
        query["authoritative"] = ["true"]
        tail = "&".join(f"{k}={v[0]}" for k, v in query.items())
        return httpx.Response(
            307, headers={"Location": f"http://{broker}{request.url.path}?{tail}"}
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return httpx.Response(401, json={"reason": "Authentication required"})
        host = request.url.netloc.decode()
        path = unquote(request.url.path)
        query = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        if path == "/admin/v2/clusters":
            return httpx.Response(200, json=["c1"])
        if path == "/admin/v2/brokers/c1":
            return httpx.Response(200, json=[B1, B2, B3])
        if path == "/admin/v2/brokers/leaderBroker":
            leader = {"serviceUrl": f"http://{B2}"}
            return httpx.Response(200, json=leader | ({"brokerId": B2} if self._v3 else {}))
        if path.endswith("/ownedNamespaces"):
            named = path.split("/")[5]
            if named != host:
                return self._redirect(named, request)
            status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
            mine = [b for b, o in self.owner.items() if o == named]
            mine.append(f"pulsar/c1/{named}/0x00000000_0xffffffff")
            return httpx.Response(200, json=dict.fromkeys(mine, status))
        if path == "/admin/v2/clusters/c1/failureDomains":
            return httpx.Response(200, json={})
        if path == "/admin/v2/tenants":
            return httpx.Response(200, json=["public"])
        if path == "/admin/v2/namespaces/public":
            return httpx.Response(200, json=[NS])
        if path == f"/admin/v2/namespaces/{NS}/bundles":
            bounds = [f"0x{b:08x}" for b in self.bounds]
            return httpx.Response(200, json={"boundaries": bounds, "numBundles": len(bounds) - 1})
        if path == f"/admin/v2/namespaces/{NS}/antiAffinity":
            return httpx.Response(204)
        if path == "/admin/v2/brokers/configuration":
            return httpx.Response(200, json=DYNAMIC)
        if path == "/admin/v2/brokers/configuration/values":
            return httpx.Response(200, json=self.overrides)
        if path == "/admin/v2/brokers/configuration/runtime":
            return httpx.Response(200, json=self.defaults | self.overrides)
        if path.startswith("/admin/v2/brokers/configuration/"):
            return self._config(request, path)
        if path == "/admin/v2/broker-stats/load-report":
            if self.load_manager == EXTENSIBLE:
                return httpx.Response(
                    500, text="--- An unexpected error occurred in the server ---"
                )
            data = local_broker_data(host, [b for b, o in self.owner.items() if o == host])
            data["brokerVersionString"] = self.version
            data["lastUpdate"] = int(time.time() * 1000) + len(self.requests)  # always fresh
            return httpx.Response(200, json=data)
        if path == "/metrics":
            return httpx.Response(200, text=self._metrics())
        if path == "/admin/v2/broker-stats/topics":
            return httpx.Response(200, json=self._topics(host))
        if path.startswith("/lookup/"):
            return httpx.Response(500, text="a test cluster never looks a topic up")
        if path.endswith("/unload"):
            return self._unload(request, host, path, query)
        if path.endswith("/split"):
            return self._split(request, host, path, query)
        return httpx.Response(404, json={"reason": f"no such path {path}"})

    @property
    def _v3(self) -> bool:
        return not self.version.startswith("2.")

    def _config(self, request: httpx.Request, path: str) -> httpx.Response:
        parts = path.split("/")[5:]
        if parts[0] not in DYNAMIC:
            return httpx.Response(412, json={"reason": "Cannot update non-dynamic configuration"})
        if request.method == "DELETE":
            self.overrides.pop(parts[0], None)
            return httpx.Response(204)
        if self.refuse_config and parts[0] == DYNAMIC[-1]:
            return httpx.Response(412, json={"reason": "Invalid dynamic-config value"})
        if not self.forget_config:
            self.overrides[parts[0]] = parts[1]
        return httpx.Response(204)

    def _bundle(self, path: str) -> str:
        return f"{NS}/{path.split('/')[-2]}"

    def _unload(self, request, host, path, query) -> httpx.Response:
        bundle = self._bundle(path)
        if bundle not in self.owner:
            return httpx.Response(412, json={"reason": f"Invalid bundle range {bundle}"})
        destination = query.get("destinationBroker") if self._v3 else None
        if destination and destination not in (B1, B2, B3):
            return httpx.Response(
                409, json={"reason": "Not allowed unload namespace bundle to inactive destination"}
            )
        owner = self.owner[bundle]
        if owner is None:
            return httpx.Response(204)  # nobody owns it: nothing happens
        if self.load_manager == EXTENSIBLE:
            if destination == owner:
                return httpx.Response(500, text="cannot be transfer to same broker")
            self.owner[bundle] = destination
            return httpx.Response(204)
        if destination and host != B2:
            return self._redirect(B2, request)  # the leader takes the affinity first
        if destination:
            self.affinity[bundle] = destination
            return self._redirect(owner, request, drop="destinationBroker")
        if host != owner:
            return self._redirect(owner, request)
        self.owner[bundle] = None
        return httpx.Response(204)

    def _split(self, request, host, path, query) -> httpx.Response:
        bundle = self._bundle(path)
        algorithm = query.get("splitAlgorithmName", "range_equally_divide")
        if algorithm not in ALGORITHMS:
            return httpx.Response(
                412, json={"reason": f"Unsupported split algorithm name {algorithm}"}
            )
        owner = self.owner.get(bundle)
        if owner is None:
            self.lookup(bundle)  # Pulsar's quirk: the ownership check assigns it
            owner = self.owner[bundle]
        if host != owner:
            return self._redirect(owner, request)
        lower, upper = (int(x, 16) for x in path.split("/")[-2].split("_"))
        body = json.loads(request.content or b"[]")
        if algorithm == "specified_positions_divide":
            if not body:
                return httpx.Response(412, json={"reason": "splitBoundaries must not be empty"})
            cuts = sorted(body)
        elif algorithm == "topic_count_equally_divide":
            cuts = [lower + (upper - lower) // 4]  # where the topics' hashes split them
        else:
            cuts = [lower + (upper - lower) // 2]
        points = [lower, *cuts, upper]
        del self.owner[bundle]
        for a, b in itertools.pairwise(points):
            self.owner[name(a, b)] = owner
        self.bounds = sorted(set(self.bounds) | set(cuts))
        return httpx.Response(204)

    def _metrics(self) -> str:
        return (
            "# TYPE pulsar_lb_cpu_usage gauge\n"
            'pulsar_lb_cpu_usage{cluster="c1",broker="broker-1",metric="loadBalancing"} 30.0\n'
            'pulsar_lb_memory_usage{cluster="c1",broker="broker-1",metric="loadBalancing"} 6.0\n'
            'pulsar_lb_directMemory_usage{cluster="c1",broker="broker-1",metric="loadBalancing"}'
            " 14.0\n"
            'pulsar_lb_bandwidth_in_usage{cluster="c1",broker="broker-1",metric="loadBalancing"}'
            " 2.0\n"
            'pulsar_lb_bandwidth_out_usage{cluster="c1",broker="broker-1",metric="loadBalancing"}'
            " 0.0\n"
        )

    def _topics(self, host: str) -> dict:
        out: dict = {}
        for bundle, owner in self.owner.items():
            if owner == host:
                topic = f"persistent://{bundle.rsplit('/', 1)[0]}/t-{bundle[-8:]}"
                figures = {"msgRateIn": 10.0, "msgThroughputIn": 1024.0, "msgRateOut": 5.0}
                out.setdefault(NS, {})[bundle.rsplit("/", 1)[1]] = {"persistent": {topic: figures}}
        return out


@pytest.fixture
def pulsar(db, settings):
    """A fake cluster behind respx, attached (observe-only) and observed once."""
    from console.models import PulsarConnection
    from console.services.connections import token_encrypt
    from console.services.pulsar import pulsar_sync_run
    from console.services.seed import config_seed

    settings.FULCRUM_PULSAR_URL = ""
    settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START = False
    config_seed()
    fake = Cluster()
    with respx.mock(assert_all_called=False) as router:
        router.route().mock(side_effect=lambda request: fake(request))
        connection = PulsarConnection.objects.create(
            name="c1",
            admin_url=f"http://{B1}",
            token_encrypted=token_encrypt(TOKEN),
            is_attached=True,
        )
        fake.connection = connection

        def sync(**kw):
            summary = pulsar_sync_run(**kw)
            connection.refresh_from_db()
            return summary

        fake.sync = sync
        fake.sync()
        yield fake


@pytest.fixture
def admin_user(db):
    from django.contrib.auth.models import User

    return User.objects.create_superuser("root", password="s3cret-pass")


def take_control(pulsar, admin_user):
    from console.services.control import control_take

    control_take(pulsar.connection.pk, actor=admin_user, confirm=True, now=timezone.now())
    pulsar.connection.refresh_from_db()


def moves():
    from console.models import PulsarMove

    return list(PulsarMove.objects.order_by("id"))


def test_taking_control_turns_pulsar_s_shedding_off_and_releasing_restores_it(pulsar, admin_user):
    from console.errors import ConsoleError
    from console.models import AuditEvent, BalancerConfig
    from console.services.control import control_preview, control_release, control_take

    pulsar.overrides["loadBalancerAutoBundleSplitEnabled"] = "false"  # an operator's own choice
    BalancerConfig.objects.update(is_auto_split_enabled=True)  # Fulcrum splits: auto-split off
    preview = control_preview(pulsar.connection.pk)
    assert preview["action"] == "take"
    assert [(c["key"], c["effective"], c["override"], c["to"]) for c in preview["changes"]] == [
        ("loadBalancerSheddingEnabled", "true", None, "false"),
        ("loadBalancerAutoBundleSplitEnabled", "false", "false", "false"),
    ]
    with pytest.raises(ConsoleError) as unconfirmed:
        control_take(pulsar.connection.pk, actor=admin_user, confirm=False, now=timezone.now())
    assert unconfirmed.value.field == "confirm"
    assert pulsar.overrides == {"loadBalancerAutoBundleSplitEnabled": "false"}  # nothing moved
    take_control(pulsar, admin_user)
    assert pulsar.overrides == dict.fromkeys(DYNAMIC, "false")
    assert pulsar.connection.mode == "control"
    assert pulsar.connection.previous_config == {
        "loadBalancerSheddingEnabled": {"effective": "true", "override": None},
        "loadBalancerAutoBundleSplitEnabled": {"effective": "false", "override": "false"},
    }
    taken = AuditEvent.objects.get(action="control", reason__startswith="control taken")
    assert taken.actor == admin_user
    assert "loadBalancerSheddingEnabled true -> false (was no override)" in taken.reason
    # Released: the effective values back, the override Fulcrum introduced removed, the
    # operator's own override kept.
    control_release(pulsar.connection.pk, actor=admin_user, confirm=True, now=timezone.now())
    assert pulsar.overrides == {"loadBalancerAutoBundleSplitEnabled": "false"}
    sets = [r for r in pulsar.requests if r.method in ("POST", "DELETE")]
    assert [f"{r.method} {unquote(r.url.path).rsplit('/configuration/', 1)[1]}" for r in sets] == [
        "POST loadBalancerSheddingEnabled/false",
        "POST loadBalancerAutoBundleSplitEnabled/false",
        "POST loadBalancerSheddingEnabled/true",
        "DELETE loadBalancerSheddingEnabled",
        "POST loadBalancerAutoBundleSplitEnabled/false",
    ]
    pulsar.connection.refresh_from_db()
    assert (pulsar.connection.mode, pulsar.connection.previous_config) == ("observe", {})


def test_a_key_pulsar_refuses_rolls_back_the_others_and_an_operator_cannot_take_control(
    pulsar, admin_user, operator
):
    from console.errors import ConsoleError
    from console.models import BalancerConfig
    from console.services.control import control_take

    BalancerConfig.objects.update(is_auto_split_enabled=True)
    pulsar.refuse_config = True
    with pytest.raises(ConsoleError) as refused:
        control_take(pulsar.connection.pk, actor=admin_user, confirm=True, now=timezone.now())
    assert refused.value.status == 502
    assert "Invalid dynamic-config value" in refused.value.message
    assert pulsar.overrides == {}  # shedding set back and its new override removed
    pulsar.connection.refresh_from_db()
    assert pulsar.connection.mode == "observe"
    pulsar.refuse_config, pulsar.forget_config = False, True
    with pytest.raises(ConsoleError) as forgot:
        control_take(pulsar.connection.pk, actor=admin_user, confirm=True, now=timezone.now())
    assert forgot.value.message.startswith(
        "Pulsar did not keep loadBalancerSheddingEnabled, loadBalancerAutoBundleSplitEnabled=false"
    )
    assert pulsar.overrides == {}
    pulsar.connection.refresh_from_db()
    assert pulsar.connection.mode == "observe"
    with pytest.raises(ConsoleError) as not_admin:
        control_take(pulsar.connection.pk, actor=operator, confirm=True, now=timezone.now())
    assert not_admin.value.status == 403


def test_an_unload_with_a_destination_is_sent_by_the_leader_and_verified_as_planned(
    pulsar, admin_user, operator
):
    from console.models import AuditEvent, Bundle
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle = name(0, 0x40000000)
    bundle_unload(bundle, actor=operator, destination=B3, note="rebalance", force=True)
    (move,) = moves()
    assert (move.kind, move.source, move.destination, move.state) == ("unload", B1, B3, "queued")
    assert Bundle.objects.get(lower=0, namespace__name=NS).owner.name == B1  # Pulsar decides
    announced = AuditEvent.objects.get(action="unload", target=bundle)
    assert "sent to Pulsar by the executor (unload with destination broker-3:8080)" in (
        announced.reason
    )
    pulsar.requests.clear()
    pulsar.sync()
    unloads = [r for r in pulsar.requests if r.url.path.endswith("/unload")]
    # To the leader with the destination, then to the owner without it.
    assert [(r.url.host, "destinationBroker" in str(r.url)) for r in unloads] == [
        ("broker-1", True),
        ("broker-2", True),
        ("broker-1", False),
    ]
    move.refresh_from_db()
    assert move.state == "verifying"  # unowned until a client looks it up
    assert pulsar.owner[bundle] is None
    assert pulsar.lookup(bundle) == B3  # the affinity the leader kept
    pulsar.sync()
    move.refresh_from_db()
    assert (move.state, move.outcome) == ("done", "as-planned")
    assert move.outcome_reason.startswith(f"moved as planned: {B1} -> {B3}")
    verified = AuditEvent.objects.get(action="verify")
    assert (verified.target, verified.destination) == (bundle, B3)
    assert verified.decision_id == announced.decision_id
    assert Bundle.objects.get(lower=0, namespace__name=NS).owner.name == B3
    # Nothing ever looked a topic up.
    assert not any(r.url.path.startswith("/lookup/") for r in pulsar.requests)


def test_a_destination_the_modular_manager_lost_is_found_on_verification(
    pulsar, admin_user, operator
):
    take_control(pulsar, admin_user)
    bundle = name(0x40000000, 0x80000000)
    from console.services import bundle_unload

    bundle_unload(bundle, actor=operator, destination=B3, force=True)
    pulsar.sync()
    assert pulsar.lookup(bundle, lose_affinity=True) == B2  # a concurrent lookup won
    pulsar.sync()
    (move,) = moves()
    assert move.outcome == "elsewhere"
    assert f"Pulsar placed it on {B2}, not on {B3} as planned" in move.outcome_reason


def test_under_the_extensible_manager_a_transfer_is_verified_at_once(pulsar, admin_user, operator):
    from console.services import bundle_unload

    pulsar.load_manager = EXTENSIBLE
    pulsar.defaults["loadManagerClassName"] = EXTENSIBLE
    pulsar.sync()
    assert pulsar.connection.observation["extensible"] is True
    take_control(pulsar, admin_user)
    bundle_unload(name(0, 0x40000000), actor=operator, destination=B3, force=True)
    assert pulsar.sync()["sent"] == 1
    summary = pulsar.sync()
    assert summary["verified"] == 1  # a transfer: owned by the destination at once
    assert summary["reports"] == 3  # made from /metrics and the topic stats
    (move,) = moves()
    assert move.outcome == "as-planned"


def test_a_2_10_cluster_gets_a_plain_unload_said_so(pulsar, admin_user, operator):
    from console.services import bundle_unload

    pulsar.version = "2.10.6"
    pulsar.sync()
    assert pulsar.connection.observation["version"] == "2.10.6"
    assert pulsar.connection.observation["leader"] == B2  # from serviceUrl: no brokerId in 2.10
    take_control(pulsar, admin_user)
    bundle = name(0, 0x40000000)
    bundle_unload(bundle, actor=operator, destination=B3, force=True)
    pulsar.requests.clear()
    pulsar.sync()
    (unload,) = [r for r in pulsar.requests if r.url.path.endswith("/unload")]
    assert "destinationBroker" not in str(unload.url)
    pulsar.lookup(bundle)
    pulsar.sync()
    (move,) = moves()
    assert move.outcome_reason.startswith("destination not supported by this cluster's version")


@pytest.mark.parametrize(
    ("algorithm", "positions", "cut"),
    [
        ("range_equally_divide", None, 0xA0000000),
        ("specified_positions_divide", [0x90000000], 0x90000000),
    ],
)
def test_a_split_is_sent_at_the_planned_cuts_and_verified(
    pulsar, admin_user, operator, algorithm, positions, cut
):
    """Whatever algorithm the operator (or the config) chose, Fulcrum computed the cuts: they are
    sent as they are (specified_positions_divide, the cuts as the body), so the audit says what
    Pulsar did."""
    from console.models import AuditEvent, Bundle
    from console.services import bundle_split

    take_control(pulsar, admin_user)
    bundle = name(0x80000000, 0xC0000000)
    bundle_split(bundle, actor=operator, algorithm=algorithm, positions=positions, force=True)
    announced = AuditEvent.objects.get(action="split", target=bundle)
    assert f"split with specified_positions_divide at 0x{cut:08x}" in announced.reason
    pulsar.requests.clear()
    pulsar.sync()
    (split,) = [r for r in pulsar.requests if r.url.path.endswith("/split")]
    assert parse_qs(split.url.query.decode())["splitAlgorithmName"] == [
        "specified_positions_divide"
    ]
    assert json.loads(split.content) == [cut]
    pulsar.sync()  # observed: verified
    (move,) = moves()
    assert move.outcome == "as-planned"
    assert move.outcome_reason.startswith(f"split as planned into 2 bundles owned by {B1}")
    lowers = set(Bundle.objects.filter(namespace__name=NS).values_list("lower", flat=True))
    assert cut in lowers


def test_moves_the_cluster_overtook_are_skipped_and_never_sent(pulsar, admin_user, operator):
    from console.services import bundle_split, bundle_unload

    take_control(pulsar, admin_user)
    first, second = name(0, 0x40000000), name(0x40000000, 0x80000000)
    bundle_unload(first, actor=operator, destination=B3, force=True)
    bundle_split(second, actor=operator, force=True)
    pulsar.owner[first] = B2  # moved by someone else before the executor ran
    pulsar.owner[second] = None  # unloaded meanwhile: a split would assign it
    pulsar.requests.clear()
    pulsar.sync()
    skipped = {m.bundle: m.outcome_reason for m in moves() if m.outcome == "skipped"}
    assert skipped[first].startswith(f"its owner changed since the plan: now {B2}")
    assert skipped[second].startswith("no broker owns it now; Fulcrum never unloads or splits")
    assert not [r for r in pulsar.requests if r.method == "PUT"]
    assert not any(r.url.path.startswith("/lookup/") for r in pulsar.requests)
    # Pulsar's refusal is kept with its reason.
    bundle_unload(name(0x80000000, 0xC0000000), actor=operator, destination=B3, force=True)
    pulsar.owner.pop(name(0x80000000, 0xC0000000))  # a split elsewhere: 412 on the old range
    pulsar.owner[name(0x80000000, 0xC0000000)] = B1
    original = pulsar._unload
    pulsar._unload = lambda *a: httpx.Response(412, json={"reason": "Invalid bundle range"})
    pulsar.sync()
    pulsar._unload = original
    failed = moves()[-1]
    assert (failed.outcome, failed.outcome_reason) == (
        "failed",
        "Pulsar refused it (HTTP 412): Invalid bundle range",
    )


def test_the_executor_keeps_the_cap_and_stopping_it_cancels_what_is_queued(
    pulsar, admin_user, operator
):
    from console.models import PulsarMove
    from console.services import bundle_unload
    from console.services.executor import executor_set

    take_control(pulsar, admin_user)
    pulsar.connection.max_moves_in_flight = 1
    pulsar.connection.save()
    bundle_unload(name(0, 0x40000000), actor=operator, destination=B3, force=True)
    bundle_unload(name(0x40000000, 0x80000000), actor=operator, destination=B3, force=True)
    pulsar.sync()
    assert [m.state for m in moves()] == ["verifying", "queued"]
    # While moves are in flight the balancer's own plans wait (an operator's do not).
    from console.models import Decision

    bundle_unload(name(0x80000000, 0xC0000000), actor=None, force=True)
    waiting = Decision.objects.order_by("-id").first()
    assert waiting.details["notSent"] == "waiting for 2 move(s) in flight on Pulsar to be verified"
    assert PulsarMove.objects.count() == 2
    executor_set(pulsar.connection.pk, stopped=True, actor=operator, now=timezone.now())
    assert [(m.state, m.outcome) for m in moves()] == [("verifying", ""), ("done", "cancelled")]
    assert "stopped by alice" in moves()[1].outcome_reason
    # Stopped: the operator's next move is refused, and the tick sends nothing.
    from console.errors import ConsoleError

    with pytest.raises(ConsoleError) as refused:
        bundle_unload(name(0x80000000, 0xC0000000), actor=operator, force=True)
    assert refused.value.status == 409
    assert "the executor is stopped" in refused.value.message
    # What was sent is still verified.
    pulsar.lookup(name(0, 0x40000000))
    pulsar.sync(now=timezone.now() + timedelta(seconds=1))
    assert moves()[0].outcome == "as-planned"


def test_the_pulsar_page_and_its_api_refuse_bad_input_by_field_and_role(
    pulsar, client, operator, viewer, admin_user
):
    from console.models import AuditEvent

    client.force_login(viewer)
    page = client.get("/pulsar/")
    assert page.status_code == 200
    assert b'import {pulsar} from "/static/console/pages/pulsar.js"' in page.content
    status = client.get("/api/pulsar/").json()
    (shown,) = status["connections"]
    assert (shown["name"], shown["mode"], shown["token"]) == ("c1", "observe", "stored, encrypted")
    assert "brokerUrls" not in shown["observation"]
    assert shown["observation"]["leader"] == B2
    assert shown["observation"]["lbConfig"] == dict.fromkeys(DYNAMIC, "true")
    assert (
        client.post(
            f"/api/pulsar/{shown['id']}/executor/",
            {"stopped": True},
            content_type="application/json",
        ).status_code
        == 403
    )
    client.force_login(operator)
    url = f"/api/pulsar/{shown['id']}/control/"
    preview = client.get(url).json()
    assert preview["action"] == "take"
    bad = client.post(url, {"action": "take"}, content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "confirm"
    wrong = client.post(url, {"action": "steal", "confirm": True}, content_type="application/json")
    assert wrong.status_code == 400
    assert wrong.json()["error"]["field"] == "action"
    not_admin = client.post(
        url, {"action": "take", "confirm": True}, content_type="application/json"
    )
    assert not_admin.status_code == 403
    assert pulsar.overrides == {}
    unknown = client.post(
        "/api/pulsar/999/executor/", {"stopped": True}, content_type="application/json"
    )
    assert unknown.status_code == 404
    client.force_login(admin_user)
    taken = client.post(url, {"action": "take", "confirm": True}, content_type="application/json")
    assert taken.status_code == 200
    assert taken.json()["connections"][0]["mode"] == "control"
    stop = client.post(
        f"/api/pulsar/{shown['id']}/executor/", {"stopped": True}, content_type="application/json"
    )
    assert stop.json()["connections"][0]["executorStopped"] is True
    assert AuditEvent.objects.filter(action="control").count() == 2


def test_an_admin_adds_a_connection_whose_token_is_stored_encrypted(pulsar, client, admin_user):
    from console.models import AuditEvent, PulsarConnection
    from console.services.connections import connection_token

    client.force_login(admin_user)
    form = {
        "name": "east",
        "admin_url": "https://pulsar-east:8443/",
        "token": "east-secret",
        "token_env": "",
        "tls_ca_file": "",
        "max_moves_in_flight": 2,
    }
    added = client.post("/admin/console/pulsarconnection/add/", form)
    assert added.status_code == 302
    east = PulsarConnection.objects.get(name="east")
    assert east.admin_url == "https://pulsar-east:8443"
    assert "east-secret" not in east.token_encrypted
    assert connection_token(east) == "east-secret"
    assert not east.is_attached
    assert AuditEvent.objects.filter(action="control", target="east").exists()
    # A second attached connection is refused, naming the field; nothing is written.
    again = client.post(
        "/admin/console/pulsarconnection/add/", form | {"name": "west", "is_attached": "on"}
    )
    assert again.status_code == 200
    assert "c1 is attached: detach it first" in again.content.decode()
    assert not PulsarConnection.objects.filter(name="west").exists()
    bad = client.post(
        "/admin/console/pulsarconnection/add/", form | {"name": "x", "admin_url": "pulsar-x:8080"}
    )
    assert "must start with http:// or https://" in bad.content.decode()


def test_what_pulsar_does_on_its_own_is_audited_as_observed(pulsar):
    from console.models import AuditEvent, Bundle

    first, second = name(0, 0x40000000), name(0x80000000, 0xC0000000)
    pulsar.owner[first] = None  # Pulsar's shedder unloaded it
    pulsar.sync()
    pulsar.lookup(first)  # a client's lookup placed it
    pulsar.owner[second] = B3  # an admin's transfer
    pulsar.sync()
    rows = list(AuditEvent.objects.filter(action="observed").order_by("id"))
    assert [(r.target, r.source, r.destination) for r in rows] == [
        (first, B1, ""),
        (first, "", B3),
        (second, B1, B3),
    ]
    assert rows[0].reason.startswith(f"Pulsar unloaded it from {B1} (observed)")
    assert rows[2].reason == f"Pulsar moved it from {B1} to {B3} (observed)"
    # Its cool-down counts from then, as for Fulcrum's own moves.
    assert Bundle.objects.get(namespace__name=NS, lower=0x80000000).last_unloaded_at is not None
    # A split Pulsar made: the parent audited, its children observed.
    admin = PulsarAdmin(f"http://{B1}", token=TOKEN)
    admin.split(name(0, 0x40000000), "range_equally_divide")
    pulsar.sync()
    split = AuditEvent.objects.filter(action="observed").latest("id")
    assert (split.target, split.reason) == (first, "Pulsar split it into 2 bundles (observed)")


def test_an_unload_without_destination_goes_to_the_owner_and_an_unowned_one_does_nothing(pulsar):
    admin = PulsarAdmin(f"http://{B2}", token=TOKEN)
    bundle = name(0, 0x40000000)
    admin.unload(bundle)
    puts = [r for r in pulsar.requests if r.method == "PUT"]
    assert [r.url.host for r in puts] == ["broker-2", "broker-1"]  # 307 to the owner
    assert "destinationBroker" not in str(puts[0].url)
    assert pulsar.owner[bundle] is None
    admin.unload(bundle)  # nobody owns it: 204, nothing happens
    assert pulsar.owner[bundle] is None
    assert pulsar.affinity == {}


def test_attaching_another_cluster_forgets_the_one_shown_before(pulsar, admin_user):
    from console.models import AuditEvent, Broker, Bundle, PulsarConnection
    from console.services.pulsar import pulsar_connection_save

    assert Broker.objects.count() == 3
    east = PulsarConnection.objects.create(name="east", admin_url="http://east:8080")
    east.is_attached = True
    with pytest.raises(Exception, match="c1 is attached: detach it first"):
        pulsar_connection_save(east, token=None, actor=admin_user, changed=["is_attached"])
    pulsar.connection.is_attached = False
    pulsar_connection_save(pulsar.connection, token=None, actor=admin_user, changed=["is_attached"])
    # Detached: the console no longer shows (nor balances) what it does not observe.
    assert (Broker.objects.count(), Bundle.objects.count()) == (0, 0)
    assert AuditEvent.objects.filter(
        action="control", target="c1", reason__startswith="c1 detached: the 3 broker(s)"
    ).exists()
    pulsar.sync()  # nothing attached: nothing observed
    assert Broker.objects.count() == 0
    pulsar_connection_save(east, token=None, actor=admin_user, changed=["is_attached"])
    assert PulsarConnection.objects.get(name="east").is_attached


def test_a_second_move_of_a_bundle_waits_for_the_first(pulsar, admin_user, operator):
    from console.errors import ConsoleError
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle = name(0, 0x40000000)
    bundle_unload(bundle, actor=operator, destination=B3, force=True)
    with pytest.raises(ConsoleError) as refused:
        bundle_unload(bundle, actor=operator, destination=B2, force=True)
    assert refused.value.status == 409
    assert "still in flight on Pulsar" in refused.value.message
    assert len(moves()) == 1


def test_a_lost_answer_is_verified_and_waits_are_bounded(pulsar, admin_user, operator):
    from console.models import PulsarMove
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    first, second = name(0, 0x40000000), name(0x40000000, 0x80000000)
    bundle_unload(first, actor=operator, destination=B3, force=True)
    original = pulsar._unload

    def done_but_lost(request, host, path, query):  # Pulsar unloads it, the answer is a 500
        answer = original(request, host, path, query)
        if answer.status_code != 204:
            return answer  # a redirect hop
        return httpx.Response(500, text="--- An unexpected error occurred in the server ---")

    pulsar._unload = done_but_lost
    pulsar.sync()
    pulsar._unload = original
    (move,) = moves()
    assert move.state == "verifying"
    assert move.outcome_reason.startswith("Pulsar's answer was lost (HTTP 500")
    # Nobody looks it up: after UNOWNED_AFTER_S it is recorded unowned.
    later = timezone.now() + timedelta(seconds=301)
    pulsar.sync(now=later)
    move.refresh_from_db()
    assert move.outcome == "unowned"
    assert "no client has looked it up" in move.outcome_reason
    # Unloaded, then found on its source: failed after STILL_ON_SOURCE_S.
    bundle_unload(second, actor=operator, destination=B3, force=True)
    pulsar._unload = lambda *a: httpx.Response(204)  # accepted, and nothing done
    pulsar.sync()
    pulsar._unload = original
    pulsar.sync(now=timezone.now() + timedelta(seconds=61))
    failed = PulsarMove.objects.get(bundle=second)
    assert failed.outcome == "failed"
    assert failed.outcome_reason.startswith(f"owned by {B1}, its source,")


def test_a_move_stuck_in_sending_is_verified_and_an_old_queued_one_dropped(
    pulsar, admin_user, operator
):
    from console.models import PulsarMove
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    first, second = name(0, 0x40000000), name(0x40000000, 0x80000000)
    bundle_unload(first, actor=operator, destination=B3, force=True)
    long_ago = timezone.now() - timedelta(minutes=10)
    PulsarMove.objects.filter(bundle=first).update(state="sending", sent_at=long_ago)
    bundle_unload(second, actor=operator, destination=B3, force=True)
    PulsarMove.objects.filter(bundle=second).update(created_at=long_ago)
    pulsar.requests.clear()
    pulsar.sync()
    stuck = PulsarMove.objects.get(bundle=first)
    assert stuck.state == "verifying"
    assert stuck.outcome_reason == "the executor stopped while sending it; "
    old = PulsarMove.objects.get(bundle=second)
    assert old.outcome == "skipped"
    assert "longer than 120 s: its plan is stale" in old.outcome_reason
    assert not [r for r in pulsar.requests if r.method == "PUT"]


def test_nothing_is_concluded_of_a_namespace_that_could_not_be_read(pulsar, admin_user, operator):
    from console.models import Namespace
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle_unload(name(0, 0x40000000), actor=operator, destination=B3, force=True)
    pulsar.sync()
    original = pulsar.__class__.__call__

    def no_bundles(self, request):
        if request.url.path == f"/admin/v2/namespaces/{NS}/bundles":
            return httpx.Response(500, text="--- An unexpected error occurred in the server ---")
        return original(self, request)

    pulsar.__class__ = type("Unreadable", (Cluster,), {"__call__": no_bundles})
    pulsar.lookup(name(0, 0x40000000))
    summary = pulsar.sync(now=timezone.now() + timedelta(seconds=400))
    assert summary["errors"]
    (move,) = moves()
    assert move.state == "verifying"  # neither failed nor "split": nothing was read
    assert Namespace.objects.filter(name=NS).exists()  # an unread namespace is not "gone"
    pulsar.__class__ = Cluster
    pulsar.sync()
    move.refresh_from_db()
    assert move.outcome == "as-planned"


def test_a_namespace_pulsar_no_longer_lists_is_forgotten(pulsar):
    from console.models import AuditEvent, Bundle, Namespace

    original = pulsar.__class__.__call__

    def deleted(self, request):
        if request.url.path == "/admin/v2/namespaces/public":
            return httpx.Response(200, json=[])
        return original(self, request)

    pulsar.__class__ = type("Deleted", (Cluster,), {"__call__": deleted})
    pulsar.sync()
    assert not Namespace.objects.filter(name=NS).exists()
    assert Bundle.objects.count() == 0
    assert AuditEvent.objects.filter(action="observed", target=NS).exists()


def test_one_pass_at_a_time_and_control_only_of_the_attached_cluster(pulsar, admin_user):
    from console.errors import ConsoleError
    from console.leases import PULSAR_SYNC as SYNC_LOCK
    from console.leases import lease_claim, lease_release
    from console.models import PulsarConnection
    from console.services.control import control_take
    from console.services.pulsar import sync_lease_s

    assert lease_claim(SYNC_LOCK, "other", timezone.now(), sync_lease_s())
    assert pulsar.sync() is None  # another pass holds the lease
    lease_release(SYNC_LOCK, "other", timezone.now())
    assert pulsar.sync() is not None
    stored = PulsarConnection.objects.create(name="stored", admin_url=f"http://{B1}")
    with pytest.raises(ConsoleError) as refused:
        control_take(stored.pk, actor=admin_user, confirm=True, now=timezone.now())
    assert refused.value.status == 409
    assert "is not attached" in refused.value.message
    assert pulsar.overrides == {}


def test_a_broker_fulcrum_hears_nothing_from_keeps_its_bundles_pulsar_decides(pulsar, admin_user):
    """Reports too old (a network problem between Fulcrum and the brokers): the life cycle calls
    the brokers lost, but Pulsar, which releases a dead broker's bundles itself, gets no unload."""
    from console.models import Decision, PulsarMove
    from console.services import shedding_tick_run

    take_control(pulsar, admin_user)
    decision = shedding_tick_run(now=timezone.now() + timedelta(minutes=10))
    assert decision is not None
    assert PulsarMove.objects.count() == 0
    lost = Decision.objects.get(pk=decision.pk).details["lostLeftToPulsar"]
    assert len(lost["bundles"]) == 4
    assert lost["reason"].startswith("a lost broker's bundles are released by Pulsar itself")


def test_an_admin_sets_one_way_to_authenticate_and_the_form_names_what_is_wrong(
    pulsar, client, admin_user, tmp_path
):
    import json as json_module

    from console.models import PulsarConnection
    from console.pulsar.auth import OAuth2ClientCredentials
    from console.services.connections import connection_auth

    client.force_login(admin_user)
    key = tmp_path / "key.json"
    key.write_text(json_module.dumps({"client_id": "fulcrum", "client_secret": "s"}))
    form = {
        "name": "oauth",
        "admin_url": "https://pulsar-east:8443",
        "oauth2_issuer_url": "https://auth.example/",
        "oauth2_audience": "urn:pulsar:east",
        "oauth2_key_file": str(key),
        "cluster_name": "east",
        "max_moves_in_flight": 2,
    }
    added = client.post("/admin/console/pulsarconnection/add/", form)
    assert added.status_code == 302, added.content.decode()[:2000]
    made = PulsarConnection.objects.get(name="oauth")
    assert isinstance(connection_auth(made), OAuth2ClientCredentials)
    assert made.cluster_name == "east"
    for extra, field, said in (
        ({"token": "also-a-token"}, "oauth2_issuer_url", "one way to authenticate"),
        ({"oauth2_issuer_url": ""}, "oauth2_issuer_url", "needs both the issuer URL"),
        ({"oauth2_key_file": str(tmp_path / "none.json")}, "oauth2_key_file", "cannot be read"),
        ({"tls_key_file": str(key)}, "tls_cert_file", "the key's certificate is missing"),
        ({"token_file": str(tmp_path / "gone")}, "token_file", "cannot be read by the console"),
    ):
        refused = client.post("/admin/console/pulsarconnection/add/", form | {"name": "x"} | extra)
        assert refused.status_code == 200, extra
        errors = refused.context["adminform"].form.errors
        assert field in errors, (extra, errors)
        assert said in " ".join(errors[field]), errors
    assert not PulsarConnection.objects.filter(name="x").exists()
