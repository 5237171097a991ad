"""Maintenance through the Pulsar connector (issue 25, item 1): a rolling restart drains brokers
one after another while the executor still has moves queued to them. A drained broker owns
nothing and has nothing in flight to it; a queued move whose destination began draining after
its plan is planned again, by the same rules, when it is sent.

The cluster is the simulator served as Pulsar (``pulsar_world``: the demo layout, Pulsar 3.3.2's
modular load manager, where an unload's destination is a hint the leader keeps until a client's
lookup — ``ModularLoadManagerImpl``'s ``bundleBrokerAffinityMap``)."""

from __future__ import annotations

import time

import pytest


@pytest.fixture
def operator(db, django_user_model):
    from django.contrib.auth.models import Group

    from console.access import OPERATORS_GROUP

    user = django_user_model.objects.create_user("olga", password="s3cret-pass")
    user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
    return user


def _in_flight_to(broker: str) -> int:
    from console.models import PulsarMove

    return PulsarMove.objects.filter(
        state__in=PulsarMove.IN_FLIGHT, destination=broker, kind="unload"
    ).count()


def test_a_rolling_restart_drains_three_brokers_two_seconds_apart(pulsar_world, operator):
    from console import selectors
    from console.models import AuditEvent, Broker, Bundle, PulsarMove
    from console.services import shedding_tick_run
    from console.services.brokers import broker_state_set
    from console.services.pulsar import pulsar_sync_run

    build, clock = pulsar_world
    cluster, connection = build(pulsar_version="3.3.2")
    leaving = cluster.broker_ids[-3:]  # one failure domain's brokers, say
    began: dict[str, float] = {}
    landed: list[tuple[str, str, float]] = []  # (bundle, broker, when) after its drain began
    declared_early: list[str] = []

    def watch() -> None:
        """A trace minute's lookups, then the connector's pass (observe, verify, send), noting
        every bundle that lands on a broker after its drain began, and any broker declared
        drained while it still owns a bundle or has a move in flight to it."""
        before = dict(cluster.owners)
        cluster.step(time.time())
        for bundle, owner in cluster.owners.items():
            if owner in began and before.get(bundle) != owner:
                landed.append((bundle, owner, time.time()))
        pulsar_sync_run()
        for broker in Broker.objects.filter(name__in=leaving, state="drained"):
            owned = Bundle.objects.filter(owner=broker).count()
            if owned or _in_flight_to(broker.name):
                declared_early.append(f"{broker.name}: {owned} owned")

    for broker in leaving:
        broker_state_set(broker, "draining", actor=operator, note="rolling restart")
        began[broker] = time.time()
        # What the commit's pulsar_sync does at once: the executor sends up to its cap.
        pulsar_sync_run()
        clock.shift(2)
    # Each shows its progress: what is left before it is drained.
    progress = selectors.drain_progress()
    for broker in leaving:
        shown = progress[broker]
        assert shown["state"] == "draining"
        assert shown["bundles"] > 0, shown
        assert shown["queued"] + shown["inFlight"] > 0, shown
    # The map shows a drained broker's bundles as what they are: on their way, not moved.
    moving = selectors.bundle_map()["moving"]
    assert moving
    assert {m["source"] for m in moving.values()} <= set(leaving)
    assert {m["state"] for m in moving.values()} <= {"queued", "sending", "verifying"}
    sent_before = {
        m.pk: m.destination for m in PulsarMove.objects.exclude(sent_at=None) if m.destination
    }
    for _ in range(40):
        clock.shift(10)
        watch()
        shedding_tick_run()
        if all(Broker.objects.get(name=b).state == "drained" for b in leaving):
            break

    # Each reaches drained, with nothing on it, on Pulsar as in Fulcrum's store.
    for broker in leaving:
        row = Broker.objects.get(name=broker)
        assert row.state == "drained", (broker, row.state)
        assert not Bundle.objects.filter(owner=row).exists()
        # Its own heartbeat bundle (pulsar/<cluster>/<broker>) stays: Pulsar never moves one.
        theirs = [b for b, o in cluster.owners.items() if o == broker and not cluster.is_system(b)]
        assert theirs == []
        assert row.state_since is not None
    assert declared_early == []
    done = selectors.drain_progress()
    for broker in leaving:
        assert {k: done[broker][k] for k in ("state", "bundles", "queued", "inFlight")} == {
            "state": "drained",
            "bundles": 0,
            "queued": 0,
            "inFlight": 0,
        }
    # No move was sent to a broker once its drain had begun.
    for move in PulsarMove.objects.exclude(sent_at=None).exclude(destination=""):
        if move.destination in began:
            assert move.sent_at.timestamp() < began[move.destination], (
                f"move {move.pk} of {move.bundle} sent to {move.destination} after its drain"
            )
    # The queued moves to a broker that began draining were planned again, said in the audit.
    replanned = AuditEvent.objects.filter(action="place", reason__startswith="re-planned")
    assert replanned.exists()
    for event in replanned:
        assert event.destination not in leaving or event.at.timestamp() < began[event.destination]
        assert " is draining since the plan, so not to " in event.reason
        # The move's announcing row names where it went, as the executor sent it.
        move = PulsarMove.objects.filter(bundle=event.target).order_by("-id").first()
        assert move.audit.destination == move.destination
    # What landed on a broker after its drain began was already on its way (sent before), and
    # the broker gave it up again: it ends with none.
    sent_to = {(m.bundle, m.destination) for m in PulsarMove.objects.exclude(sent_at=None)}
    for bundle, broker, _ in landed:
        assert (bundle, broker) in sent_to
    assert len(landed) <= connection.max_moves_in_flight * len(leaving)
    assert sent_before  # the first drain's moves were on their way when the next ones began
    took = {b: Broker.objects.get(name=b).state_since.timestamp() - began[b] for b in leaving}
    print(
        f"rolling restart: {PulsarMove.objects.count()} moves, {replanned.count()} re-planned "
        f"when sent, {len(landed)} landed after their broker's drain began (sent before it), "
        f"drained after {', '.join(f'{t:.0f} s' for t in took.values())}"
    )


def test_a_drain_leaves_a_bundle_already_moving_to_its_move(pulsar_world, operator):
    """A bundle of the broker is on its way elsewhere (a tick's or an operator's move, sent or
    queued): draining the broker is not refused for it (the refusal of the whole drain made an
    operator retry until no move of its bundles was in flight). The drain goes ahead without
    it, says so in its decision, and the broker ends drained once that move and the ticks are
    done."""
    from console.models import Broker, Bundle, Decision, PulsarMove
    from console.services import bundle_unload, shedding_tick_run
    from console.services.brokers import broker_state_set
    from console.services.pulsar import pulsar_sync_run

    build, clock = pulsar_world
    cluster, _ = build(pulsar_version="3.3.2")
    broker, elsewhere = cluster.broker_ids[0], cluster.broker_ids[1]
    rows = list(Bundle.objects.filter(owner__name=broker).order_by("id"))
    assert len(rows) >= 2
    moving = rows[0].name
    bundle_unload(moving, actor=operator, destination=elsewhere, force=True)
    assert PulsarMove.objects.filter(bundle=moving, state__in=PulsarMove.IN_FLIGHT).exists()

    assert broker_state_set(broker, "draining", actor=operator).state == "draining"
    drain = Decision.objects.filter(kind="operator").latest("id")
    assert drain.details["leftToMovesInFlight"]["bundles"] == [moving]
    # Not drained yet, counting the moves this drain queues (not only those queued before it).
    assert drain.details["waiting"] == [
        {
            "broker": broker,
            "reason": f"{broker} stays draining: {len(rows)} bundle(s) still on it, "
            f"{len(rows)} move(s) queued and 0 in flight on Pulsar",
        }
    ]
    # Its page says so, with the bundle.
    from django.test import Client

    client = Client()
    client.force_login(operator)
    page = client.get(f"/decisions/{drain.pk}/").content.decode()
    assert "Planned, not sent" in page
    assert (
        f"a move of it is in flight on Pulsar: the ticks move it off a draining broker once "
        f"that move is verified: <code>{moving}</code>" in page
    )
    queued = PulsarMove.objects.filter(state__in=PulsarMove.IN_FLIGHT, source=broker)
    assert {m.bundle for m in queued} == {r.name for r in rows}  # one move each, never two
    for _ in range(30):
        clock.shift(10)
        cluster.step(time.time())
        pulsar_sync_run()
        shedding_tick_run()
        if Broker.objects.get(name=broker).state == "drained":
            break
    assert Broker.objects.get(name=broker).state == "drained"
    assert cluster.owners[moving] == elsewhere
    assert not Bundle.objects.filter(owner__name=broker).exists()
