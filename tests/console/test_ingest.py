import pytest
from rest_framework.test import APIClient

from console.models import Bundle, LoadReport
from tests.conftest import report


def test_valid_load_report_is_stored_with_its_weighted_usage(cluster, broker_client):
    response = broker_client.post("/api/load-reports/", report("broker-1", 42.0), format="json")
    assert response.status_code == 201, response.content
    stored = LoadReport.objects.get()
    assert stored.broker.name == "broker-1"
    assert stored.weighted_usage_fraction == pytest.approx(0.42)
    assert stored.broker.latest_report_id == stored.pk


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["cpu"].update(limit="lots"), "cpu.limit"),
        (lambda d: d["cpu"].pop("usage"), "cpu.usage"),
        (lambda d: d.update(msgRateIn=-1), "msgRateIn"),
        (lambda d: d.pop("name"), "name"),
        (lambda d: d.update(bundles="all"), "bundles"),
        (lambda d: d.update(state="sleeping"), "state"),
        (
            lambda d: d.update(
                bundleStats={"acme/orders/0x00000000_0x40000000": {"msgRateIn": "x"}}
            ),
            "bundleStats[acme/orders/0x00000000_0x40000000].msgRateIn",
        ),
        (lambda d: d.update(timestamp="yesterday"), "timestamp"),
    ],
)
def test_malformed_load_report_is_rejected_naming_the_field_and_writes_nothing(
    cluster, broker_client, mutate, field
):
    doc = report("broker-1", 42.0)
    mutate(doc)
    response = broker_client.post("/api/load-reports/", doc, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == field
    assert LoadReport.objects.count() == 0


def test_unknown_broker_is_404_and_writes_nothing(cluster, broker_client):
    response = broker_client.post("/api/load-reports/", report("ghost", 1.0), format="json")
    assert response.status_code == 404
    assert response.json()["error"]["field"] == "name"
    assert LoadReport.objects.count() == 0


def test_load_reports_need_the_broker_token(cluster, operator_client):
    assert APIClient().post(
        "/api/load-reports/", report("broker-1", 1.0), format="json"
    ).status_code in (401, 403)
    assert (
        operator_client.post(
            "/api/load-reports/", report("broker-1", 1.0), format="json"
        ).status_code
        == 403
    )
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Broker wrong")
    assert bad.post("/api/load-reports/", report("broker-1", 1.0), format="json").status_code == 401


def test_bundle_stats_fold_into_short_and_long_term_averages(cluster, broker_client):
    name = "acme/orders/0x00000000_0x40000000"
    for rate in (100.0, 300.0):
        stats = {name: {"msgRateIn": rate, "msgThroughputIn": rate * 1000, "topics": 3}}
        doc = report("broker-1", 10, bundles=[name], stats=stats)
        assert broker_client.post("/api/load-reports/", doc, format="json").status_code == 201
    bundle = next(b for b in Bundle.objects.select_related("namespace") if b.name == name)
    assert bundle.short_term["msgRateIn"] == pytest.approx(200.0)
    assert bundle.long_term["msgThroughputIn"] == pytest.approx(200_000.0)
    assert bundle.samples == 2
    assert bundle.topics == 3


def test_stats_of_unknown_bundles_are_ignored(cluster, broker_client):
    doc = report("broker-1", 10, stats={"acme/orders/0x00000000_0x00000100": {"msgRateIn": 1}})
    assert broker_client.post("/api/load-reports/", doc, format="json").status_code == 201
