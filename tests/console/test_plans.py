"""The console applies the cycle's plans exactly once: compare-and-set on owners, a lease for
the tick, the same actions as ``python -m balancer cycle`` on the same snapshot."""

import io
import json
import threading
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from balancer.cli import main as cli
from balancer.wire import safety_document, snapshot_document
from console import loadstore, selectors
from console.access import OPERATORS_GROUP
from console.errors import ConsoleError
from console.leases import TICK as TICK_LOCK
from console.leases import lease_claim
from console.models import AuditEvent, Broker, Bundle, ClusterSample, Decision, Lease, ReportRun
from console.services import shedding_tick_run
from tests.conftest import bundle_load, ingest, report

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def own(owner_of, mib=40):
    brokers = {b.name: b for b in Broker.objects.all()}
    for i, bundle in enumerate(Bundle.objects.order_by("namespace__name", "lower")):
        bundle.owner = brokers[owner_of(i)] if owner_of(i) else None
        bundle_load(bundle.name, **{"msgThroughputIn": mib * 1024 * 1024, "msgThroughputOut": 0})
        bundle.save()


def names_of(broker):
    return [
        b.name
        for b in Bundle.objects.select_related("namespace", "owner")
        if b.owner and b.owner.name == broker
    ]


def report_all(loads, at=NOW):
    """Each broker reports; ``at`` None: now, as the API's own clock sees it."""
    stamp = {} if at is None else {"timestamp": at.timestamp()}
    for name, (cpu, mib) in loads.items():
        ingest(report(name, cpu, bundles=names_of(name), throughput_mib=mib, **stamp))


def test_the_first_tick_declares_no_broker_lost(cluster):
    # Right after `make run`: bundles have owners but no broker has reported yet.
    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    decision = shedding_tick_run(now=NOW)
    assert decision.details["lost"] == []
    assert decision.details["pending"] == ["broker-1", "broker-2", "broker-3"]
    assert not AuditEvent.objects.filter(action="unload").exists()
    assert len(names_of("broker-1")) == 3


def test_a_stale_expected_owner_is_a_409_and_nothing_moves(cluster, operator_client):
    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all(dict.fromkeys(("broker-1", "broker-2", "broker-3"), (20, 0)), at=None)
    bundle = Bundle.objects.select_related("owner").order_by("id").first()
    response = operator_client.post(
        f"/api/bundles/{bundle.pk}/unload/", {"expected_owner": "broker-3"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["error"]["field"] == "expected_owner"
    assert not AuditEvent.objects.exists()
    ok = operator_client.post(
        f"/api/bundles/{bundle.pk}/unload/",
        {"expected_owner": bundle.owner.name, "destination": "broker-2"},
        format="json",
    )
    assert ok.status_code == 200, ok.content
    assert ok.json()["destination"] == "broker-2"


def test_a_veto_is_a_409_with_its_reason_and_force_overrides_it(cluster, operator_client, settings):
    settings.FULCRUM_BUNDLE_COOL_DOWN_S = 3600
    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all(dict.fromkeys(("broker-1", "broker-2", "broker-3"), (20, 0)), at=None)
    bundle = Bundle.objects.order_by("id").first()
    first = operator_client.post(f"/api/bundles/{bundle.pk}/unload/", {}, format="json")
    assert first.status_code == 200
    again = operator_client.post(f"/api/bundles/{bundle.pk}/unload/", {}, format="json")
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["veto"] == "CoolDown"
    assert "cool-down 3600 s" in error["message"]
    forced = operator_client.post(
        f"/api/bundles/{bundle.pk}/unload/", {"force": True}, format="json"
    )
    assert forced.status_code == 200
    assert forced.json()["forced"] is True
    event = AuditEvent.objects.order_by("-id").first()
    assert "forced past CoolDown by the operator" in event.reason


@pytest.mark.django_db(transaction=True)
def test_two_operators_unloading_one_bundle_at_once_move_it_once(cluster):
    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all(dict.fromkeys(("broker-1", "broker-2", "broker-3"), (20, 0)), at=None)
    group = Group.objects.get_or_create(name=OPERATORS_GROUP)[0]
    users = []
    for name in ("ann", "ben"):
        user = User.objects.create_user(name, password="s3cret-pass")
        user.groups.add(group)
        users.append(user)
    bundle = Bundle.objects.select_related("owner").order_by("id").first()
    owner = bundle.owner.name
    barrier = threading.Barrier(2)
    statuses = []

    def unload(user):
        client = APIClient()
        client.force_authenticate(user)
        barrier.wait()
        try:
            response = client.post(
                f"/api/bundles/{bundle.pk}/unload/", {"expected_owner": owner}, format="json"
            )
            statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=unload, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(statuses) == [200, 409]
    assert AuditEvent.objects.filter(action="unload", target=bundle.name).count() == 1


def test_a_tick_that_fails_mid_apply_leaves_no_partial_write(cluster):
    own(lambda i: "broker-1" if i < 6 else "broker-2")
    report_all({"broker-1": (90, 240), "broker-2": (10, 40), "broker-3": (10, 0)})
    before = {b.pk: b.owner_id for b in Bundle.objects.all()}
    real = AuditEvent.objects.bulk_create

    def boom(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("worker died mid-apply")

    with (
        mock.patch.object(AuditEvent.objects, "bulk_create", side_effect=boom),
        pytest.raises(RuntimeError),
    ):
        shedding_tick_run(now=NOW)
    assert {b.pk: b.owner_id for b in Bundle.objects.all()} == before
    assert not ClusterSample.objects.exists()
    assert not Decision.objects.exists()
    assert not AuditEvent.objects.exists()
    # The lease was given back by its holder: the next tick runs.
    assert shedding_tick_run(now=NOW + timedelta(seconds=1)) is not None


def test_a_killed_ticks_lease_expires_after_one_interval(cluster):
    # A worker killed while holding the lease never releases it.
    assert lease_claim(TICK_LOCK, "killed-worker", NOW, 10)
    assert shedding_tick_run(now=NOW + timedelta(seconds=5)) is None
    assert shedding_tick_run(now=NOW + timedelta(seconds=11)) is not None
    # Only the holder releases: a stranger's release leaves the lease alone.
    from console.leases import lease_release

    assert lease_claim(TICK_LOCK, "holder", NOW + timedelta(seconds=30), 10)
    lease_release(TICK_LOCK, "stranger", NOW + timedelta(seconds=31))
    assert Lease.objects.get(name=TICK_LOCK).holder == "holder"
    # A holder renews only while its lease is valid: once expired, it has lost it.
    from console.leases import lease_renew

    assert lease_renew(TICK_LOCK, "holder", NOW + timedelta(seconds=35), 10)
    assert not lease_renew(TICK_LOCK, "holder", NOW + timedelta(seconds=46), 10)
    assert not lease_renew(TICK_LOCK, "stranger", NOW + timedelta(seconds=36), 10)


def test_a_tick_whose_lease_expired_while_planning_applies_nothing(cluster):
    own(lambda i: "broker-1" if i < 6 else "broker-2")
    report_all({"broker-1": (90, 240), "broker-2": (10, 40), "broker-3": (10, 0)})
    from console.services import shedding

    with mock.patch.object(shedding, "lease_renew", return_value=False):
        assert shedding_tick_run(now=NOW) is None
    assert not Decision.objects.exists()
    assert not ClusterSample.objects.exists()


def test_the_tick_skips_what_changed_since_its_snapshot(cluster):
    own(lambda i: "broker-1" if i < 6 else "broker-2")
    report_all({"broker-1": (90, 240), "broker-2": (10, 40), "broker-3": (10, 0)})
    from console.services import shedding

    real = shedding.plan_cycle

    def then_an_operator_moves_one(*args, **kwargs):
        plan = real(*args, **kwargs)
        first = plan.planned()[0]
        Bundle.objects.filter(pk=bundle_pk(first.target)).update(
            owner=Broker.objects.get(name="broker-3")
        )
        return plan

    with mock.patch.object(shedding, "plan_cycle", side_effect=then_an_operator_moves_one):
        decision = shedding_tick_run(now=NOW)
    (stale,) = decision.details["stale"]
    assert "its owner is now broker-3" in stale["reason"]
    moved = AuditEvent.objects.filter(action="unload")
    assert stale["target"] not in {e.target for e in moved}
    assert (
        moved.count() == len([a for a in decision.details["actions"] if a["kind"] == "unload"]) - 1
    )


def bundle_pk(name):
    return next(b.pk for b in Bundle.objects.select_related("namespace") if b.name == name)


def test_a_drain_planned_against_a_state_that_changed_is_refused(cluster, operator):
    from console.services import broker_state_set
    from console.services import brokers as broker_services

    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all(dict.fromkeys(("broker-1", "broker-2", "broker-3"), (20, 0)), at=None)
    real = broker_services.plan_drain

    def then_someone_changes_it(*args, **kwargs):
        plan = real(*args, **kwargs)
        Broker.objects.filter(name="broker-2").update(state="drained")
        return plan

    with (
        mock.patch.object(broker_services, "plan_drain", side_effect=then_someone_changes_it),
        pytest.raises(ConsoleError) as err,
    ):
        broker_state_set("broker-2", "draining", actor=operator)
    assert err.value.status == 409
    assert "its state is now drained" in err.value.message
    assert len(names_of("broker-2")) == 3  # nothing moved


def test_the_move_rate_limit_counts_moves_not_bundles(cluster, operator_client, settings):
    settings.FULCRUM_MAX_MOVES_PER_HOUR = 2
    own(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all(dict.fromkeys(("broker-1", "broker-2", "broker-3"), (20, 0)), at=None)
    first, second = Bundle.objects.order_by("id")[:2]
    url = f"/api/bundles/{first.pk}/unload/"
    assert operator_client.post(url, {}, format="json").status_code == 200
    # The same bundle again (forced past its cool-down): a second move.
    assert operator_client.post(url, {"force": True}, format="json").status_code == 200
    third = operator_client.post(f"/api/bundles/{second.pk}/unload/", {}, format="json")
    assert third.status_code == 409
    assert third.json()["error"]["veto"] == "RateLimited"
    assert "2 moves in the last hour; limit 2 per hour" in third.json()["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("shedder", "NoSuchShedder"), ("placement", "AvgShedder"), ("parameters", {"typo": 1})],
)
def test_a_refused_configuration_never_stops_the_loop(cluster, field, value):
    config = selectors.balancer_config_get()
    setattr(config, field, value)
    config.save()
    own(lambda i: "broker-1")
    decision = shedding_tick_run(now=NOW)
    assert decision.reason == "BadConfig"
    assert decision.summary.startswith("no action: the balancer configuration is refused")
    assert decision.details["error"]["message"]
    assert not AuditEvent.objects.exists()
    # The cadence holds and the lease was released: the next tick runs one interval later.
    assert shedding_tick_run(now=NOW + timedelta(seconds=5)) is None
    assert shedding_tick_run(now=NOW + timedelta(seconds=11)).reason == "BadConfig"
    assert ClusterSample.objects.count() == 2


def test_one_report_run_at_a_time_and_dead_runs_are_failed(cluster, operator, settings):
    from console.leases import lease_claim
    from console.leases import report_run as report_run_lease
    from console.services.reports import (
        REPORT_RUN_LEASE_S,
        report_run_request,
        report_runs_reap,
    )

    with mock.patch("console.celery.app.send_task"):
        run = report_run_request(actor=operator)
        with pytest.raises(ConsoleError) as err:
            report_run_request(actor=operator)
    assert err.value.status == 409
    ReportRun.objects.filter(pk=run.pk).update(created_at=NOW - timedelta(hours=1))
    # While another run runs, a queued one waits its turn (the reports worker runs one task).
    busy = ReportRun.objects.create(
        master="local", kind="advisor", status="running", started_at=NOW - timedelta(minutes=5)
    )
    # Its worker keeps the run's lease (console.reports.submit).
    assert lease_claim(report_run_lease(busy.pk), "a-reports-worker", NOW, REPORT_RUN_LEASE_S)
    assert report_runs_reap(now=NOW) == 0
    ReportRun.objects.filter(pk=busy.pk).update(status="succeeded")
    assert report_runs_reap(now=NOW) == 1
    failed = ReportRun.objects.get(pk=run.pk)
    assert failed.status == ReportRun.Status.FAILED
    assert "no report worker took the run" in failed.reason
    stuck = ReportRun.objects.create(
        master="local", status="running", started_at=NOW - timedelta(hours=2)
    )
    assert report_runs_reap(now=NOW) == 1
    assert "its worker died" in ReportRun.objects.get(pk=stuck.pk).reason


LOADS = st.lists(st.tuples(st.integers(0, 100), st.integers(0, 400)), min_size=3, max_size=3)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    owners=st.lists(
        st.sampled_from(["broker-1", "broker-2", "broker-3", None]), min_size=8, max_size=8
    ),
    loads=LOADS,
    shedder=st.sampled_from(
        [
            "ThresholdShedder",
            "OverloadShedder",
            "UniformLoadShedder",
            "AvgShedder",
            "TransferShedder",
        ]
    ),
    silent=st.sampled_from([None, "broker-1", "broker-3"]),
)
def test_the_console_tick_and_the_cli_cycle_agree(cluster, owners, loads, shedder, silent):
    Decision.objects.all().delete()
    ClusterSample.objects.all().delete()
    Lease.objects.all().delete()  # the previous example's last tick was 30 s later
    loadstore.clear()  # and its reports, at the same times
    config = selectors.balancer_config_get()
    config.shedder, config.state = shedder, {}
    config.parameters = {
        "loadBalancerSheddingGracePeriodMinutes": 0,
        "loadBalancerBundleUnloadMinThroughputThreshold": 1,
    }
    config.save()
    own(lambda i: owners[i])
    at = {"broker-1": NOW, "broker-2": NOW, "broker-3": NOW}
    if silent:
        at[silent] = NOW - timedelta(seconds=300)
    for (cpu, mib), name in zip(loads, ("broker-1", "broker-2", "broker-3"), strict=True):
        ingest(
            report(
                name,
                cpu,
                bundles=names_of(name),
                throughput_mib=mib,
                timestamp=at[name].timestamp(),
            )
        )
    # Several ticks, the state fed back: the hit counters of AvgShedder and TransferShedder
    # get their chance to act, and every tick must still be the CLI's cycle.
    for tick in range(4):
        at_tick = NOW + timedelta(seconds=10 * tick)
        config.refresh_from_db()
        snapshot = selectors.cluster_snapshot_get(now=at_tick)
        cycle = selectors.cycle_config_get(config)
        doc = {
            **snapshot_document(snapshot),
            "config": config.parameters,
            "strategies": {
                "shedder": shedder,
                "placement": cycle.strategies.placement,
                "splitAlgorithm": cycle.strategies.split_algorithm,
            },
            "safety": safety_document(cycle.safety),
            "state": config.state,
        }
        out = io.StringIO()
        assert cli(["cycle"], stdin=io.StringIO(json.dumps(doc)), stdout=out) == 0
        expected = json.loads(out.getvalue())
        decision = shedding_tick_run(now=at_tick)
        assert decision.details["actions"] == expected["actions"]
        assert decision.details["stats"] == expected["stats"]
        assert decision.reason == expected["reason"]
        config.refresh_from_db()
        assert config.state == expected["state"]
