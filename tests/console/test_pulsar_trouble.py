"""Trouble with Pulsar made visible and survived (issue 23, item 4): a send that never reached
Pulsar is sent again at the next pass (bounded, after the owner check), a 5xx that left the
bundle on its source too; slow passes, failing admin calls and late moves are on the Pulsar
page and in /metrics with the broker and the call named. The fake cluster is
``test_pulsar_executor``'s (its semantics from PULSAR_ADMIN.md)."""

from __future__ import annotations

import random
import re
import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from console.metrics import exposition
from tests.console import test_pulsar_executor as executor_tests
from tests.console.test_pulsar_executor import B1, B2, B3, moves, name, take_control

# The fake cluster's fixtures, shared with test_pulsar_executor.
pulsar = executor_tests.pulsar
admin_user = executor_tests.admin_user

FIRST = name(0, 0x40000000)


def unload_calls(fake, bundle: str) -> list[httpx.Request]:
    """The unload requests of ``bundle`` that reached the cluster's service URL (B1) with their
    destination: one per send (the leader's and the owner's redirects are hops of the same
    send)."""
    tail = bundle.rsplit("/", 1)[1]
    return [
        r
        for r in fake.requests
        if r.method == "PUT"
        and r.url.path.endswith(f"{tail}/unload")
        and r.url.host == "broker-1"
        and "destinationBroker" in str(r.url)
    ]


def failing(fake, should_fail):
    """Wrap the fake: a request for which ``should_fail(request)`` returns an exception or a
    response gets that (the exception raised before anything reaches the cluster, as a refused
    connection; the response instead of the cluster's, as a proxy's)."""
    real = fake.__class__.__call__

    def call(self, request):
        fault = should_fail(request)
        if isinstance(fault, Exception):
            raise fault
        if isinstance(fault, httpx.Response):
            return fault
        return real(self, request)

    return call


def test_a_send_that_never_reached_pulsar_is_sent_again_at_the_next_pass_and_done_once(
    pulsar, admin_user, operator, monkeypatch
):
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle_unload(FIRST, actor=operator, destination=B3, force=True)
    refused = {"left": 1}

    def once(request):
        if request.url.path.endswith("/unload") and refused["left"]:
            refused["left"] -= 1
            return httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, once))
    pulsar.sync()
    (move,) = moves()
    assert (move.state, move.attempts) == ("queued", 1)
    assert move.outcome_reason.startswith("not sent (attempt 1 of 3): ConnectError")
    assert unload_calls(pulsar, FIRST) == []
    pulsar.sync()  # the next pass: the owner checked again, sent
    move.refresh_from_db()
    assert (move.state, move.attempts) == ("verifying", 2)
    assert pulsar.lookup(FIRST) == B3  # a client's lookup takes the leader's affinity
    pulsar.sync()
    move.refresh_from_db()
    assert move.outcome == "as-planned"
    assert len(unload_calls(pulsar, FIRST)) == 1  # done once


def test_a_send_that_never_reaches_pulsar_fails_after_three_attempts_saying_why(
    pulsar, admin_user, operator, monkeypatch
):
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle_unload(FIRST, actor=operator, destination=B3, force=True)

    def always(request):
        if request.url.path.endswith("/unload"):
            return httpx.ConnectTimeout("timed out connecting", request=request)
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, always))
    for _ in range(3):
        pulsar.sync()
    (move,) = moves()
    assert (move.outcome, move.attempts) == ("failed", 3)
    assert move.outcome_reason.startswith("never reached Pulsar in 3 attempts: ConnectTimeout")
    assert pulsar.owner[FIRST] == B1


def test_a_retry_is_not_sent_once_the_bundle_moved_meanwhile(
    pulsar, admin_user, operator, monkeypatch
):
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle_unload(FIRST, actor=operator, destination=B3, force=True)
    state = {"refuse": True}

    def first_refused(request):
        if request.url.path.endswith("/unload") and state["refuse"]:
            return httpx.ConnectError("Connection refused", request=request)
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, first_refused))
    pulsar.sync()
    state["refuse"] = False
    pulsar.owner[FIRST] = B2  # Pulsar (another admin) moved it before the retry
    pulsar.sync()
    (move,) = moves()
    assert move.outcome == "skipped"
    assert "nothing was sent" in move.outcome_reason
    assert unload_calls(pulsar, FIRST) == []


def test_a_5xx_that_left_the_bundle_on_its_source_is_sent_again_not_failed_after_60_s(
    pulsar, admin_user, operator, monkeypatch
):
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    bundle_unload(FIRST, actor=operator, destination=B3, force=True)
    state = {"fail": True}

    def proxy_503(request):  # answered by something in between; the cluster never saw it
        if request.url.path.endswith("/unload") and state["fail"]:
            state["fail"] = False
            return httpx.Response(503, text="upstream unavailable")
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, proxy_503))
    sent_at = timezone.now()
    pulsar.sync(now=sent_at)
    (move,) = moves()
    assert (move.state, move.last_status) == ("verifying", 503)
    # The next pass, one period later: still on its source after a 5xx -> sent again at once.
    pulsar.sync(now=sent_at + timedelta(seconds=15))
    move.refresh_from_db()
    assert (move.state, move.attempts) == ("verifying", 2)
    assert move.last_status == 200
    assert pulsar.lookup(FIRST) == B3
    pulsar.sync(now=sent_at + timedelta(seconds=30))
    move.refresh_from_db()
    assert move.outcome == "as-planned"
    assert len(unload_calls(pulsar, FIRST)) == 1


def test_failing_calls_slow_passes_and_late_moves_are_on_the_page_and_in_metrics(
    pulsar, admin_user, operator, settings, monkeypatch, client
):
    from console.models import PulsarMove
    from console.selectors import pulsar_trouble
    from console.services import bundle_unload

    take_control(pulsar, admin_user)
    settings.FULCRUM_PULSAR_OBSERVE_S = 0.1
    rng = random.Random(23)

    def flaky_and_slow(request):
        host = request.url.netloc.decode()
        if request.url.path == "/admin/v2/broker-stats/load-report" and host == B3:
            time.sleep(0.15)  # broker-3 answers its load report late
            if rng.random() < 0.6:
                return httpx.Response(503, text="Service Unavailable")
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, flaky_and_slow))
    for _ in range(4):
        pulsar.sync()
    trouble = {t["kind"]: t["text"] for t in pulsar_trouble(pulsar.connection)}
    assert "The last observation took" in trouble["slow"]
    # Where the time went: reading Pulsar (broker-3's late answers), with its calls and bytes.
    read = re.search(r"reading Pulsar ([\d.]+) s: (\d+) calls, ([\d.]+) MB", trouble["slow"])
    assert read is not None, trouble["slow"]
    assert float(read.group(1)) >= 0.15
    assert int(read.group(2)) > 0
    assert "writing the metadata store and the live load" in trouble["slow"]
    assert "E11 load report on broker-3:8080" in trouble["slow"]
    assert "admin calls failed in the last observation" in trouble["failing-calls"]
    assert "E11 load report on broker-3:8080" in trouble["failing-calls"]
    assert "over the last 5 passes" in trouble["failing-calls"]  # the fixture made one
    body = exposition()[0].decode()
    assert (
        'fulcrum_pulsar_admin_calls_total{broker="broker-3:8080",call="E11 load report",'
        'result="5xx"}' in body
    )
    assert 'fulcrum_pulsar_admin_calls_total{broker="broker-1:8080",call="E4 owned bundles"' in body
    assert "fulcrum_pulsar_observation_seconds_count" in body
    # A move queued while the executor is stopped waits: late after two periods.
    from console.services.executor import executor_set

    executor_set(pulsar.connection.pk, stopped=True, actor=admin_user, now=timezone.now())
    executor_set(pulsar.connection.pk, stopped=False, actor=admin_user, now=timezone.now())
    bundle_unload(FIRST, actor=operator, destination=B3, force=True)
    PulsarMove.objects.update(created_at=timezone.now() - timedelta(seconds=5))
    pulsar.connection.refresh_from_db()
    late = [t["text"] for t in pulsar_trouble(pulsar.connection) if t["kind"] == "late-moves"]
    assert len(late) == 1
    assert f"unload of {FIRST}, {B1} -> {B3}) has been queued for 5 s" in late[0]
    # On the Pulsar page's data.
    client.force_login(admin_user)
    shown = client.get("/api/pulsar/").json()["connections"][0]["trouble"]
    assert {t["kind"] for t in shown} >= {"slow", "failing-calls", "late-moves"}


def test_a_pass_that_died_midway_is_shown_running_and_observations_missing(
    pulsar, admin_user, monkeypatch
):
    from console.selectors import pulsar_trouble

    observed = pulsar.connection.observed_at

    def dies(request):
        if request.url.path == "/admin/v2/clusters":
            raise KeyboardInterrupt  # the worker stops mid-pass (as kill -9 would)
        return None

    monkeypatch.setattr(pulsar.__class__, "__call__", failing(pulsar, dies))
    with pytest.raises(KeyboardInterrupt):
        pulsar.sync()
    pulsar.connection.refresh_from_db()
    assert pulsar.connection.observed_at == observed
    assert pulsar.connection.pass_started_at > observed
    later = pulsar.connection.pass_started_at + timedelta(seconds=60)
    (missing,) = [
        t for t in pulsar_trouble(pulsar.connection, later) if t["kind"] == "no-observation"
    ]
    # The last observation started a moment before the pass that died (the fixture's own).
    age = (later - observed).total_seconds()
    said = f"No observation has completed for {age:.0f} s (one is due every 15 s)"
    assert said in missing["text"]
    assert "the pass under way started 60 s ago" in missing["text"]
