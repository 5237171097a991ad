"""The shedding tick end to end: beat's message through the real Redis to a Celery worker."""

import time

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings

from console.celery import app
from console.models import AuditEvent, Broker, Bundle, ClusterSample, Decision
from console.tasks import shedding_tick
from tests.conftest import bundle_load, ingest, report

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def real_redis():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.ping()  # make test starts it; a missing Redis is a failure, not a skip
    return client


def test_tick_runs_through_redis_and_a_worker(cluster, real_redis):
    brokers = {b.name: b for b in Broker.objects.all()}
    for i, bundle in enumerate(Bundle.objects.order_by("id")):
        bundle.owner = brokers["broker-1" if i < 6 else "broker-2"]
        bundle_load(
            bundle.name,
            **{
                "msgThroughputIn": 50 * 1024 * 1024,
                "msgThroughputOut": 50 * 1024 * 1024,
            },
        )
        bundle.save()
    for name, cpu, mib in (("broker-1", 90, 600), ("broker-2", 10, 200), ("broker-3", 5, 0)):
        owned = [
            b.name
            for b in Bundle.objects.select_related("namespace")
            if b.owner and b.owner.name == name
        ]
        ingest(report(name, cpu, bundles=owned, throughput_mib=mib))

    app.conf.update(broker_url=settings.REDIS_URL, task_always_eager=False)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        shedding_tick.delay()
        deadline = time.monotonic() + 20
        while not Decision.objects.filter(kind="shed").exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    decision = Decision.objects.get(kind="shed")
    assert decision.reason == "Overloaded"
    assert ClusterSample.objects.count() == 1
    unloads = AuditEvent.objects.filter(action="unload", decision=decision)
    assert unloads.count() >= 1
    assert {e.source for e in unloads} == {"broker-1"}
    assert all(e.destination in {"broker-2", "broker-3"} for e in unloads)


def test_a_report_run_never_reaches_the_shedding_worker(cluster, real_redis, operator):
    from console.models import ReportRun
    from console.services.reports import report_run_request

    real_redis.delete("reports")
    app.conf.update(broker_url=settings.REDIS_URL, task_always_eager=False)
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10, queues=["celery"]
    ):
        run = report_run_request(actor=operator)
        started = time.monotonic()
        shedding_tick.delay()
        deadline = started + 20
        while not ClusterSample.objects.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ClusterSample.objects.exists()
        assert time.monotonic() - started < 10
    # The run waits on its own queue for a report worker; the shedding worker never took it.
    assert ReportRun.objects.get(pk=run.pk).status == ReportRun.Status.QUEUED
    assert real_redis.llen("reports") == 1
    real_redis.delete("reports")
