"""Evidence before control (issue 24, item 6): over the load the ticks recorded, the balance the
cluster had while another balancer (Pulsar's own shedder, in observe-only) moved its bundles,
next to what Fulcrum's current config would have given from the same loads, with both move
counts — served by ``/api/pulsar/evidence/`` for the Pulsar page."""

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from console import selectors
from console.errors import ConsoleError
from console.models import Broker, Bundle
from console.services.config import control_evidence
from console.services.shedding import replay_record
from tests.conftest import MIB, ingest, report

# Recorded a few minutes ago: the API replays the hour before its own clock's now.
NOW = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
LOAD = {"msgRateIn": 500.0, "msgRateOut": 500.0, "msgThroughputIn": MIB, "msgThroughputOut": MIB}


def _owned() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {b.name: [] for b in Broker.objects.all()}
    for bundle in Bundle.objects.select_related("namespace", "owner"):
        if bundle.owner:
            out[bundle.owner.name].append(bundle.name)
    return out


def _record(at: datetime) -> None:
    """Every broker reports what it owns (broker-1 hot), and the tick's recorder keeps it."""
    for name, mine in _owned().items():
        rate = 500.0 * len(mine)
        doc = report(
            name,
            10.0 + 10.0 * len(mine),
            bundles=mine,
            stats={n: dict(LOAD) for n in mine},
            timestamp=at.timestamp(),
        )
        ingest(doc | {"msgRateIn": rate, "msgRateOut": rate})
    assert replay_record(selectors.cluster_snapshot_get(now=at), at)


def test_the_hour_observed_next_to_fulcrums_replay(fulcrum_cluster, viewer, settings):
    settings.FULCRUM_REPLAY_SAMPLE_S = 30
    client = APIClient()
    client.force_authenticate(viewer)
    # Nothing recorded yet: an answer that says why, not a page that fails.
    answer = client.get("/api/pulsar/evidence/")
    assert answer.status_code == 200
    assert "not enough load recorded" in answer.json()["unavailable"]
    # Over the size the ticks record for replays, the answer says so (it would never come).
    settings.FULCRUM_REPLAY_MAX_BUNDLES = 5
    too_large = client.get("/api/pulsar/evidence/").json()["unavailable"]
    assert too_large.startswith("the cluster has 8 bundles, over FULCRUM_REPLAY_MAX_BUNDLES (5)")
    settings.FULCRUM_REPLAY_MAX_BUNDLES = 1000
    brokers = {b.name: b for b in Broker.objects.all()}
    bundles = list(Bundle.objects.order_by("id"))
    for bundle in bundles:
        bundle.owner = brokers["broker-1"]
        bundle.save()
    _record(NOW)
    # Another balancer moves two bundles, one a step: the recorder sees the owners change.
    for step, (bundle, to) in enumerate(((bundles[0], "broker-2"), (bundles[1], "broker-3"))):
        bundle.owner = brokers[to]
        bundle.save()
        _record(NOW + timedelta(seconds=30 * (step + 1)))
    evidence = control_evidence(now=NOW + timedelta(minutes=2))
    assert evidence["samples"] == 3
    assert evidence["hours"] == pytest.approx(60 / 3600)
    assert (evidence["attached"], evidence["inControl"]) == (False, False)
    observed = evidence["observed"]
    assert observed["moves"] == 2
    assert observed["movesPerHour"] == pytest.approx(120)
    assert len(observed["at"]) == 3
    # Fulcrum's config replayed from the first recorded owners: it moves more, and the cluster
    # ends better balanced than the other balancer left it.
    fulcrum = evidence["fulcrum"]
    assert fulcrum["strategy"] == "FulcrumShedder + FulcrumPlacement"
    assert fulcrum["moves"] > observed["moves"]
    assert fulcrum["maxOverMean"][-1] < observed["maxOverMean"][-1]
    served = client.get("/api/pulsar/evidence/")
    assert served.status_code == 200
    assert served.json()["observed"]["moves"] == 2
    # Nothing was written: the owners are the other balancer's.
    assert Bundle.objects.filter(owner__name="broker-1").count() == len(bundles) - 2
    with pytest.raises(ConsoleError) as err:
        control_evidence(now=NOW + timedelta(hours=3))
    assert err.value.status == 409


def test_the_day_is_sampled_sparser_and_its_moves_counted_at_every_record(
    fulcrum_cluster, viewer, settings
):
    settings.FULCRUM_REPLAY_SAMPLE_S = 30
    settings.FULCRUM_REPLAY_DAY_SAMPLE_S = 300
    brokers = {b.name: b for b in Broker.objects.all()}
    bundles = list(Bundle.objects.order_by("id"))
    for bundle in bundles:
        bundle.owner = brokers["broker-1"]
        bundle.save()
    start = NOW - timedelta(hours=3)

    def move(bundle, to):
        bundle.owner = brokers[to]
        bundle.save()

    _record(start)  # both series
    move(bundles[0], "broker-2")
    _record(start + timedelta(seconds=30))  # the hour's only: 30 s after the day's last
    _record(start + timedelta(seconds=400))  # both
    _record(NOW - timedelta(minutes=50))  # both
    move(bundles[1], "broker-3")
    _record(NOW - timedelta(minutes=20))  # both
    _record(NOW - timedelta(minutes=19, seconds=30))  # the hour's only

    day = control_evidence(window="day", now=NOW)
    assert day["window"] == "day"
    # The day's four, then the hour's newest: the day ends where the hour does.
    assert day["samples"] == 5
    assert day["hours"] == pytest.approx((3 * 3600 - 19.5 * 60) / 3600)
    # Both moves, though the first happened between two of the day's snapshots: the recorder
    # counts what changed at every record (every 30 s), whichever series keeps the snapshot.
    assert day["observed"]["moves"] == 2
    assert day["fulcrum"]["intervalS"] >= settings.FULCRUM_REPLAY_DAY_SAMPLE_S
    hour = control_evidence(window="hour", now=NOW)
    assert hour["samples"] == 3  # what the hour keeps: its last hour
    assert hour["observed"]["moves"] == 1

    client = APIClient()
    client.force_authenticate(viewer)
    served = client.get("/api/pulsar/evidence/?window=day")
    assert served.status_code == 200, served.content
    assert served.json()["window"] == "day"
    wrong = client.get("/api/pulsar/evidence/?window=week")
    assert wrong.status_code == 400
    assert "window" in wrong.content.decode()
    with pytest.raises(ConsoleError) as err:
        control_evidence(window="week", now=NOW)
    assert (err.value.status, err.value.field) == (400, "window")
