"""End to end through the connector: the simulator as a Pulsar cluster (its brokers answering
through respx, no sockets), observed by the console, control taken, full shedding cycles whose
moves the executor sends and verifies, and an operator's unload to a destination verified in the
audit, then undone through Pulsar; the connector never looks a topic up."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
import respx
import time_machine

from balancer.simulator.layout import DEMO
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from console.connectors.pulsar_cluster import PulsarCluster

TOKEN = "e2e-token"
START = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


@pytest.fixture
def world(db, settings):
    """The demo cluster served by respx at 127.0.0.1:18080…18087, the console attached to it."""
    from console.models import PulsarConnection
    from console.services.connections import token_encrypt
    from console.services.seed import config_seed

    settings.FULCRUM_PULSAR_URL = ""
    settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START = False
    traces = default_traces_dir()
    workload = build_workload(DEMO, load_functions(traces))
    cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in DEMO.brokers}
    with time_machine.travel(START, tick=False) as clock:
        cluster = PulsarCluster(workload, cpu, token=TOKEN, start_minute=600)

        def answer(request: httpx.Request) -> httpx.Response:
            status, headers, body = cluster.handle(
                request.url.netloc.decode(),
                request.method,
                request.url.path,
                request.url.query.decode(),
                dict(request.headers),
                request.content,
            )
            return httpx.Response(status, headers=headers, content=body)

        config_seed()
        connection = PulsarConnection.objects.create(
            name="demo",
            admin_url="http://127.0.0.1:18080",
            token_encrypted=token_encrypt(TOKEN),
            is_attached=True,
        )
        with respx.mock(assert_all_called=False) as router:
            router.route().mock(side_effect=answer)
            yield cluster, connection, clock


def minute(cluster, clock, seconds: float = 10.0):
    """Play one trace minute and move the clock on."""
    from console.services.pulsar import pulsar_sync_run

    clock.shift(seconds)
    cluster.step(datetime.now(UTC).timestamp())
    return pulsar_sync_run()


def test_shedding_cycles_run_through_the_connector_and_every_move_is_verified(
    world, django_user_model
):
    from console.models import AuditEvent, Bundle, Decision, PulsarMove
    from console.services import shedding_tick_run
    from console.services.control import control_take

    cluster, connection, clock = world
    first = minute(cluster, clock)
    assert first["owned"] == first["bundles"] > 0
    assert (first["refused"], first["errors"]) == ([], [])
    admin = django_user_model.objects.create_superuser("root", password="s3cret-pass")
    control_take(connection.pk, actor=admin, confirm=True, now=datetime.now(UTC))
    assert cluster.overrides == {"loadBalancerSheddingEnabled": "false"}
    pulsar_shed_before = len(cluster.shed_log)
    for _ in range(12):
        shedding_tick_run()
        minute(cluster, clock)
    sent = list(PulsarMove.objects.all())
    assert sent, "the ticks planned no move"
    done = [m for m in sent if m.state == "done"]
    assert done
    assert {m.outcome for m in done} <= {"as-planned", "elsewhere", "skipped"}
    assert any(m.outcome == "as-planned" for m in done)
    last = {m.bundle: m for m in sorted(done, key=lambda m: m.pk)}
    for move in done:
        if move.outcome != "as-planned":
            continue
        verify = AuditEvent.objects.get(action="verify", target=move.bundle, source=move.source)
        assert verify.decision_id == move.audit.decision_id
        assert verify.destination == move.destination  # where Pulsar put it: where planned
        if last[move.bundle] is move:
            assert cluster.owners[move.bundle] == move.destination
    # The console's owners are Pulsar's: nothing written that Pulsar did not do.
    mine = {b.name: b.owner.name if b.owner else None for b in Bundle.objects.all()}
    theirs = {b: o for b, o in cluster.owners.items() if b in mine}
    assert mine == theirs
    # Pulsar's own shedder stayed off while Fulcrum was in control; no lookup was ever sent.
    assert all(
        r.unloads == () or not r.unloads for r in list(cluster.shed_log)[pulsar_shed_before:]
    )
    assert not [r for r in cluster.requests if r.path.startswith("/lookup/")]
    assert Decision.objects.filter(kind="shed").exists()


def in_control(world, django_user_model):
    """One trace minute observed, control taken by an admin: (cluster, clock, the admin, an
    owned bundle's row)."""
    from console.models import Bundle
    from console.services.control import control_take

    cluster, connection, clock = world
    minute(cluster, clock)
    admin = django_user_model.objects.create_superuser("root", password="s3cret-pass")
    control_take(connection.pk, actor=admin, confirm=True, now=datetime.now(UTC))
    row = Bundle.objects.select_related("owner", "namespace").exclude(owner=None).first()
    return cluster, clock, admin, row


def test_an_operator_s_unload_to_a_destination_is_verified_in_the_audit(world, django_user_model):
    from console.models import AuditEvent, Bundle, PulsarMove
    from console.services import bundle_unload

    cluster, clock, admin, row = in_control(world, django_user_model)
    destination = next(b for b in cluster.broker_ids if b != row.owner.name)
    bundle_unload(row.name, actor=admin, destination=destination, note="e2e", force=True)
    minute(cluster, clock)  # sent: unowned on the cluster, the leader keeps the destination
    assert cluster.owners[row.name] is None
    assert cluster.affinity.get(cluster.affinity_key(row.name)) == destination
    minute(cluster, clock)  # the clients' lookups placed it; observed and verified
    move = PulsarMove.objects.get(bundle=row.name)
    assert (move.state, move.outcome) == ("done", "as-planned")
    verify = AuditEvent.objects.get(action="verify", target=row.name)
    assert verify.destination == destination
    assert verify.reason.startswith(f"unload as-planned: moved as planned: {row.owner.name} ->")
    announced = AuditEvent.objects.get(action="unload", target=row.name)
    assert announced.reason.startswith("Operator's reason: e2e.")
    assert Bundle.objects.get(pk=row.pk).owner.name == destination


def test_an_operator_s_undo_is_sent_to_pulsar_and_linked_to_the_move_it_reverses(
    world, django_user_model
):
    from console.errors import ConsoleError
    from console.models import AuditEvent, Bundle, PulsarMove
    from console.services import bundle_unload
    from console.services.bundles import bundle_unload_undo

    cluster, clock, admin, row = in_control(world, django_user_model)
    source = row.owner.name
    destination = next(b for b in cluster.broker_ids if b != source)
    answer = bundle_unload(row.name, actor=admin, destination=destination, force=True)
    assert answer["inFlight"] is True  # sent to Pulsar, not moved yet
    moved = AuditEvent.objects.get(action="unload", target=row.name)
    # While it moves, its undo waits for it, saying so (not "moved on since").
    with pytest.raises(ConsoleError) as moving:
        bundle_unload_undo(moved.pk, actor=admin, force=True, now=datetime.now(UTC))
    assert (moving.value.status, moving.value.extra["reason"]) == (409, "InFlight")
    assert str(moving.value) == (
        f"{row.name} is still moving on Pulsar (queued: {source} -> {destination}): it can be "
        "undone once Pulsar is seen doing it"
    )
    minute(cluster, clock)
    minute(cluster, clock)
    assert Bundle.objects.get(pk=row.pk).owner.name == destination

    bundle_unload_undo(moved.pk, actor=admin, note="back", force=True, now=datetime.now(UTC))
    undo = AuditEvent.objects.get(action="unload", target=row.name, reverses=moved)
    queued = PulsarMove.objects.get(audit=undo)
    assert (queued.source, queued.destination) == (destination, source)
    assert undo.reason.startswith("Operator's reason: undo of audit row")
    assert "sent to Pulsar by the executor (unload with destination" in undo.reason
    minute(cluster, clock)
    minute(cluster, clock)
    queued.refresh_from_db()
    assert (queued.state, queued.outcome) == ("done", "as-planned")
    assert cluster.owners[row.name] == source
    assert Bundle.objects.get(pk=row.pk).owner.name == source


def test_an_undo_of_a_move_with_a_later_one_in_flight_says_only_the_latest_can_be(
    world, django_user_model
):
    from console.errors import ConsoleError
    from console.models import AuditEvent
    from console.services import bundle_unload
    from console.services.bundles import bundle_unload_undo

    cluster, clock, admin, row = in_control(world, django_user_model)
    first, second = [b for b in cluster.broker_ids if b != row.owner.name][:2]
    bundle_unload(row.name, actor=admin, destination=first, force=True)
    minute(cluster, clock)
    minute(cluster, clock)
    moved = AuditEvent.objects.get(action="unload", target=row.name)
    bundle_unload(row.name, actor=admin, destination=second, force=True)  # in flight now
    with pytest.raises(ConsoleError) as later:
        bundle_unload_undo(moved.pk, actor=admin, force=True, now=datetime.now(UTC))
    assert str(later.value) == (
        f"{row.name} is still moving on Pulsar (queued: {first} -> {second}): a later move "
        "than this one: only its latest move can be undone, once verified"
    )
