"""The dead-man (console/services/deadman.py, ``manage.py deadman``) and ``manage.py
pulsar_release``: while Fulcrum controls the simulated Pulsar cluster and the shedding loop stops
completing ticks, control goes back to Pulsar exactly as a release does — Pulsar's shedding on
again and the override Fulcrum introduced removed — audited, on the connection and in /metrics;
also when the database cannot be read, and by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError

from console.selectors.pulsar import deadman_limit_s
from console.services.deadman import DeadmanMemory, deadman_check

SHEDDING = "loadBalancerSheddingEnabled"


def tick(at: datetime) -> None:
    """A tick of the shedding loop completed at ``at`` (what the loop records)."""
    from console.models import ClusterSample

    ClusterSample.objects.create(at=at, mean_usage_fraction=0.5, std_usage_fraction=0.1, cv=0.2)


def counted(result: str) -> float:
    from console import metrics

    return metrics.DEADMAN_RELEASES.labels(result=result)._value.get()


@pytest.fixture(autouse=True)
def _beat_every_second(settings):
    """Beat wakes the tick every second here: the limits below are not raised to its floor."""
    settings.FULCRUM_TICK_INTERVAL_S = 1.0


def test_the_limit_is_ten_loop_intervals_unless_set_and_never_under_three_of_beat_s(db, settings):
    from console.models import BalancerConfig
    from console.services.seed import config_seed

    config_seed()
    settings.FULCRUM_DEADMAN_S = None
    config = BalancerConfig.objects.get()
    assert deadman_limit_s() == 10 * config.loop_interval_s
    # A loop interval shorter than beat's wake-up: the tick cannot run more often than beat.
    config.loop_interval_s = 0.4
    config.save()
    settings.FULCRUM_TICK_INTERVAL_S = 5.0
    assert deadman_limit_s() == 50.0
    settings.FULCRUM_DEADMAN_S = 42
    assert deadman_limit_s() == 42
    settings.FULCRUM_DEADMAN_S = 1  # a limit the loop cannot meet: three of beat's intervals
    assert deadman_limit_s() == 15.0


def test_when_the_loop_stops_control_goes_back_to_pulsar(pulsar_world, settings):
    from console import metrics
    from console.models import AuditEvent, PulsarConnection, PulsarMove

    settings.FULCRUM_DEADMAN_S = 60
    build, clock = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    assert (cluster.effective[SHEDDING], cluster.overrides) == (False, {SHEDDING: "false"})
    start = datetime.now(UTC)
    tick(start)
    memory = DeadmanMemory()
    released = counted("released")
    bundle = next(b for b, o in sorted(cluster.owners.items()) if o and not cluster.is_system(b))
    queued = PulsarMove.objects.create(
        connection=connection,
        kind="unload",
        bundle=bundle,
        source=cluster.owners[bundle],
        created_at=datetime.now(UTC),
    )
    # Ticking: nothing to do, however long control has been held.
    for seconds in (30, 59):
        said = deadman_check(start + timedelta(seconds=seconds), memory)
        assert said.endswith(f"the loop's last tick {seconds} s ago")
    tick(start + timedelta(seconds=50))
    assert "last tick 50 s ago" in deadman_check(start + timedelta(seconds=100), memory)
    assert metrics.PULSAR_CONTROL._value.get() == 1
    assert metrics.DEADMAN_SILENCE._value.get() == 50
    # Silent past the limit: released as a release does.
    said = deadman_check(start + timedelta(seconds=111), memory)
    assert said.startswith("demo handed back to Pulsar: the shedding loop completed no tick")
    assert (cluster.effective[SHEDDING], cluster.overrides) == (True, {})
    connection.refresh_from_db()
    assert connection.mode == PulsarConnection.Mode.OBSERVE
    assert connection.handed_back["by"] == "the dead-man"
    assert "no tick for 61 s (limit 60 s" in connection.handed_back["why"]
    event = AuditEvent.objects.filter(action="control").latest("pk")
    assert event.reason.startswith("control handed back to Pulsar by the dead-man: the shedding")
    assert f"{SHEDDING} -> true (override removed)" in event.reason
    assert counted("released") == released + 1
    assert metrics.PULSAR_CONTROL._value.get() == 0
    # A move queued before the release is never sent: the next Pulsar pass cancels it.
    from console.services.pulsar import pulsar_sync_run

    assert PulsarMove.objects.get(pk=queued.pk).state == "queued"
    pulsar_sync_run()
    move = PulsarMove.objects.get(pk=queued.pk)
    assert (move.state, move.outcome) == ("done", "cancelled")
    assert move.outcome_reason == "Fulcrum no longer controls demo"
    assert cluster.owners[queued.bundle] == queued.source
    # Observe-only now: the next checks have nothing to watch, and Pulsar's shedder runs again.
    assert deadman_check(start + timedelta(seconds=200), memory).startswith("no Pulsar cluster")
    clock.shift(120)
    before = len(cluster.shed_log)
    for _ in range(3):
        cluster.step(0.0)
    assert len(cluster.shed_log) > before


def test_control_taken_and_never_ticked_counts_from_the_take(pulsar_world, settings):
    settings.FULCRUM_DEADMAN_S = 30
    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    connection.refresh_from_db()
    assert connection.controlled_at is not None
    memory = DeadmanMemory()
    taken = connection.controlled_at
    assert "last tick 20 s ago" in deadman_check(taken + timedelta(seconds=20), memory)
    assert "handed back" in deadman_check(taken + timedelta(seconds=31), memory)
    assert cluster.effective[SHEDDING] is True


def test_a_release_pulsar_refuses_is_tried_again_and_undone_if_the_loop_comes_back(
    pulsar_world, settings
):
    from console.models import AuditEvent, PulsarConnection

    settings.FULCRUM_DEADMAN_S = 10
    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    connection.refresh_from_db()
    memory = DeadmanMemory()
    failed = counted("failed")
    down = cluster.token
    cluster.token = "rotated-by-someone"  # Pulsar now refuses Fulcrum's token
    later = connection.controlled_at + timedelta(seconds=11)
    said = deadman_check(later, memory)
    assert "release failed" in said
    assert "tried again at the next check" in said
    assert counted("failed") == failed + 1
    connection.refresh_from_db()
    assert connection.mode == PulsarConnection.Mode.CONTROL
    assert connection.is_executor_stopped  # stopped first: nothing is sent meanwhile
    assert connection.handed_back["releasing"] is True
    # The loop ticks again before Pulsar accepts: the executor the dead-man stopped runs again.
    tick(later + timedelta(seconds=2))
    said = deadman_check(later + timedelta(seconds=3), memory)
    assert said == "demo: the loop ticks again, executor started again"
    connection.refresh_from_db()
    assert (connection.mode, connection.is_executor_stopped, connection.handed_back) == (
        PulsarConnection.Mode.CONTROL,
        False,
        {},
    )
    assert AuditEvent.objects.filter(reason__startswith="the shedding loop ticks again").exists()
    # Silent again, Pulsar answering again: released.
    cluster.token = down
    assert "handed back" in deadman_check(later + timedelta(seconds=20), memory)
    assert cluster.effective[SHEDDING] is True


def test_one_dead_man_acts_at_a_time_and_its_lease_is_its_heartbeat(pulsar_world, settings):
    from console.selectors.pulsar import deadman_alive

    settings.FULCRUM_DEADMAN_S = 10
    settings.FULCRUM_DEADMAN_CHECK_S = 5
    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    connection.refresh_from_db()
    start = connection.controlled_at
    first, second = DeadmanMemory(), DeadmanMemory()
    assert not deadman_alive(start)
    assert "under control" in deadman_check(start + timedelta(seconds=1), first)
    assert deadman_alive(start + timedelta(seconds=2))
    assert "another dead-man holds the lease" in deadman_check(start + timedelta(seconds=2), second)
    released = counted("released")
    assert "handed back" in deadman_check(start + timedelta(seconds=11), first)
    assert counted("released") == released + 1
    assert cluster.effective[SHEDDING] is True
    # The first stops checking: its lease runs out (three checks) and the second takes over.
    assert not deadman_alive(start + timedelta(seconds=27))
    assert "nothing to watch" in deadman_check(start + timedelta(seconds=27), second)


def test_without_the_database_pulsar_is_restored_from_memory_and_recorded_later(
    pulsar_world, settings, monkeypatch
):
    from console.models import AuditEvent, ClusterSample, Lease, PulsarConnection

    settings.FULCRUM_DEADMAN_S = 20
    settings.FULCRUM_DEADMAN_WITHOUT_DATABASE = True
    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    connection.refresh_from_db()
    memory = DeadmanMemory()
    start = connection.controlled_at
    deadman_check(start + timedelta(seconds=5), memory)  # read while the database answered

    class Unreachable:
        """A model manager whose database is down: every query fails."""

        def __getattr__(self, name):
            raise OperationalError("could not connect to server: Connection refused")

    for model in (PulsarConnection, ClusterSample, AuditEvent, Lease):
        monkeypatch.setattr(model, "objects", Unreachable())
    said = deadman_check(start + timedelta(seconds=15), memory)
    assert said.startswith("database unreadable; demo's loop silent for 15 s")
    said = deadman_check(start + timedelta(seconds=25), memory)
    assert said.startswith("demo handed back to Pulsar (database unreadable)")
    assert cluster.overrides == {}
    assert cluster.effective[SHEDDING] is True
    assert "already released" in deadman_check(start + timedelta(seconds=30), memory)
    monkeypatch.undo()
    said = deadman_check(start + timedelta(seconds=40), memory)
    assert said.startswith("no Pulsar cluster under Fulcrum's control")
    connection.refresh_from_db()
    assert connection.mode == PulsarConnection.Mode.OBSERVE
    assert connection.handed_back["by"] == "the dead-man"
    event = AuditEvent.objects.filter(action="control").latest("pk")
    assert "(recorded once the database answered again)" in event.reason
    assert "the database could not be read" in event.reason


def test_by_default_a_dead_man_without_the_database_waits_for_it(
    pulsar_world, settings, monkeypatch
):
    """Cut off alone from the database, a dead-man cannot tell a dead loop from its own
    partition: by default it gives nothing back (FULCRUM_DEADMAN_WITHOUT_DATABASE off)."""
    from console.models import PulsarConnection

    settings.FULCRUM_DEADMAN_S = 20
    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    connection.refresh_from_db()
    memory = DeadmanMemory()
    start = connection.controlled_at
    deadman_check(start + timedelta(seconds=5), memory)

    class Unreachable:
        def __getattr__(self, name):
            raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(PulsarConnection, "objects", Unreachable())
    said = deadman_check(start + timedelta(seconds=60), memory)
    assert said.endswith("waiting for it (FULCRUM_DEADMAN_WITHOUT_DATABASE off)")
    assert cluster.overrides == {SHEDDING: "false"}


def test_pulsar_release_by_hand_restores_pulsar_and_says_what_it_did(pulsar_world, capsys):
    from console.models import PulsarConnection

    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    call_command("pulsar_release", "--yes", "--reason", "console down for an upgrade")
    out = capsys.readouterr().out
    assert f"{SHEDDING} = true (its override removed)" in out
    assert "control released" in out
    assert (cluster.effective[SHEDDING], cluster.overrides) == (True, {})
    connection.refresh_from_db()
    assert connection.mode == PulsarConnection.Mode.OBSERVE
    assert connection.handed_back["by"] == "manage.py pulsar_release"
    assert connection.handed_back["why"].endswith(": console down for an upgrade")
    with pytest.raises(CommandError, match="no Pulsar connection is under Fulcrum's control"):
        call_command("pulsar_release", "--yes")


def test_the_deadman_command_checks_once(transactional_db, caplog):
    import logging
    import signal

    caplog.set_level(logging.INFO, logger="console.deadman")
    before = signal.getsignal(signal.SIGTERM)
    call_command("deadman", "--once")
    assert "nothing to watch" in caplog.text
    # Its SIGTERM handler does not outlive it (a process forked later must still stop).
    assert signal.getsignal(signal.SIGTERM) is before
