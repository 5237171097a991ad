"""Never two balancers: while Fulcrum holds control, every observation checks that Pulsar's own
shedding is still off (services.control.control_conflict_check). Found back on — the cluster
restarted with its broker.conf, or another admin — the executor stops before anything is sent,
audited, on every page and in /metrics; an admin re-asserts control (or releases it), or,
with FULCRUM_PULSAR_REASSERT, Fulcrum sets it off again by itself."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

SHEDDING = "loadBalancerSheddingEnabled"


def restarted(cluster) -> None:
    """Pulsar restarted with its broker.conf: the override gone, its shedding on again."""
    cluster.overrides.pop(SHEDDING, None)
    cluster.effective[SHEDDING] = True


def unloads_sent(cluster) -> int:
    return sum(1 for r in cluster.requests if r.method == "PUT" and r.path.endswith("/unload"))


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="s3cret-pass")
    client.force_login(user)
    return client


def test_pulsar_s_shedding_back_on_stops_the_executor_until_an_admin_decides(
    pulsar_world, admin_client
):
    from console import metrics
    from console.errors import ConsoleError
    from console.models import AuditEvent, PulsarConnection, PulsarMove
    from console.services.executor import executor_set
    from console.services.pulsar import pulsar_sync_run

    build, _ = pulsar_world
    cluster, connection = build()
    bundle = next(b for b, o in sorted(cluster.owners.items()) if o and not cluster.is_system(b))
    move = PulsarMove.objects.create(
        connection=connection,
        kind="unload",
        bundle=bundle,
        source=cluster.owners[bundle],
        created_at=datetime.now(UTC),
    )
    connection.refresh_from_db()
    recorded = dict(connection.previous_config)
    restarted(cluster)
    before = unloads_sent(cluster)
    summary = pulsar_sync_run()
    assert summary["conflict"] == f"{SHEDDING}=true: executor stopped until an admin decides"
    assert unloads_sent(cluster) == before  # nothing sent beside Pulsar's own shedder
    move.refresh_from_db()
    assert (move.state, move.outcome) == ("done", "cancelled")
    connection.refresh_from_db()
    assert connection.is_executor_stopped
    assert connection.conflict["keys"] == [SHEDDING]
    assert metrics.PULSAR_CONFLICT._value.get() == 1
    said = AuditEvent.objects.filter(action="control", reason__contains="two balancers")
    assert said.count() == 1
    pulsar_sync_run()  # still on: said once, not at every pass
    assert said.count() == 1
    # Nobody starts the executor beside Pulsar's shedder.
    with pytest.raises(ConsoleError) as refused:
        executor_set(connection.pk, stopped=False, actor=None, now=datetime.now(UTC))
    assert refused.value.status == 409
    # Every page says so.
    page = admin_client.get("/").content.decode()
    assert 'id="pulsar-conflict"' in page
    assert "Two balancers:" in page
    # The admin re-asserts control: previewed, then done.
    preview = admin_client.get(f"/api/pulsar/{connection.pk}/control/?action=reassert").json()
    assert preview["action"] == "reassert"
    assert [(c["key"], c["effective"], c["to"]) for c in preview["changes"]] == [
        (SHEDDING, "true", "false")
    ]
    done = admin_client.post(
        f"/api/pulsar/{connection.pk}/control/",
        {"action": "reassert", "confirm": True},
        content_type="application/json",
    )
    assert done.status_code == 200, done.content
    assert cluster.overrides == {SHEDDING: "false"}
    connection.refresh_from_db()
    assert (connection.mode, connection.is_executor_stopped, connection.conflict) == (
        PulsarConnection.Mode.CONTROL,
        False,
        {},
    )
    assert AuditEvent.objects.filter(reason__startswith="control re-asserted by root").exists()
    assert metrics.PULSAR_CONFLICT._value.get() == 0
    assert 'id="pulsar-conflict"' not in admin_client.get("/").content.decode()
    # What a release restores is still what was there before Fulcrum took control.
    assert connection.previous_config == recorded


def test_with_reassert_on_fulcrum_sets_pulsar_s_shedding_off_again(pulsar_world, settings):
    from console.models import AuditEvent
    from console.services.pulsar import pulsar_sync_run

    settings.FULCRUM_PULSAR_REASSERT = True
    build, _ = pulsar_world
    cluster, connection = build()
    restarted(cluster)
    summary = pulsar_sync_run()
    assert summary["conflict"] == f"{SHEDDING}=true: re-asserted (FULCRUM_PULSAR_REASSERT)"
    assert cluster.overrides == {SHEDDING: "false"}
    assert cluster.effective[SHEDDING] is False
    connection.refresh_from_db()
    assert (connection.is_executor_stopped, connection.conflict) == (False, {})
    reasons = list(
        AuditEvent.objects.filter(action="control").order_by("pk").values_list("reason", flat=True)
    )
    assert any("two balancers" in r for r in reasons)
    assert reasons[-1].startswith("control re-asserted by FULCRUM_PULSAR_REASSERT")


def test_a_release_ends_the_conflict_and_gives_pulsar_back_its_own_values(pulsar_world):
    from console.models import PulsarConnection
    from console.services.control import control_release
    from console.services.pulsar import pulsar_sync_run

    build, _ = pulsar_world
    cluster, connection = build(pulsar_sheds=True)
    restarted(cluster)
    pulsar_sync_run()
    control_release(connection.pk, actor=None, confirm=True, now=datetime.now(UTC))
    connection.refresh_from_db()
    assert (connection.mode, connection.conflict) == (PulsarConnection.Mode.OBSERVE, {})
    assert cluster.overrides == {}
    assert cluster.effective[SHEDDING] is True
