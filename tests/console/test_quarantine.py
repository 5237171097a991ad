"""Readings that cannot be true, through the console (issue 24, item 3): a broker reporting its
CPU at 208 % of its limit — the demo's poison report — is named on the decision and on the
broker's page, and does not set the level the shedder balances the others to."""

from django.test import Client

from balancer.load_model import IMPLAUSIBLE_OVER
from console.models import Broker, Bundle, Decision
from console.services import shedding_tick_run
from tests.conftest import ingest, report


def _own_and_report(cpus):
    names = list(cpus)
    owned: dict[str, list[str]] = {n: [] for n in names}
    for i, bundle in enumerate(Bundle.objects.select_related("namespace").order_by("id")):
        owner = names[i % len(names)]
        bundle.owner = Broker.objects.get(name=owner)
        bundle.save()
        owned[owner].append(bundle.name)
    for name, cpu in cpus.items():
        ingest(report(name, cpu, bundles=owned[name], throughput_mib=4.0))


def test_a_cpu_at_208_percent_is_named_and_not_obeyed(fulcrum_cluster, operator):
    _own_and_report({"broker-1": 208.0, "broker-2": 20.0, "broker-3": 40.0})
    decision = shedding_tick_run()
    assert isinstance(decision, Decision)
    shedding = decision.details["shedding"]
    [poison] = shedding["stats"]["quarantined"]
    assert (poison["broker"], poison["resource"], poison["usage"]) == ("broker-1", "cpu", 208.0)
    assert 100 * IMPLAUSIBLE_OVER < 208.0  # over the margin, not merely busy
    assert "208%" in poison["reason"]
    # Named with the decision's skips, in the core's words.
    assert {"broker": "broker-1", "reason": "ImplausibleReading", "detail": poison["reason"]} in (
        shedding["skipped"]
    )
    # Its reading does not set the level: the level is what the trusted readings allow.
    assert shedding["stats"]["level"] < 0.5
    assert shedding["stats"]["brokers"]["broker-1"]["usage"] < 1.0
    client = Client()
    client.force_login(operator)
    page = client.get("/brokers/broker-1/").content.decode()
    assert 'id="quarantined"' in page
    assert "208%" in page
    assert f"decision #{decision.pk}" in page
    assert 'id="quarantined"' not in client.get("/brokers/broker-2/").content.decode()
    shown = client.get(f"/decisions/{decision.pk}/").content.decode()
    assert "ImplausibleReading" in shown
    assert "208%" in shown
