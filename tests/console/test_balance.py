"""The balance panel (selectors.balance_status, /api/balance/) and the optimality gauge
(services.optimality): measured against the best assignment, the move budget, the cool-down
countdown, oscillations, and why a cycle held."""

import re
from datetime import UTC, datetime, timedelta

import pytest

from console.models import AuditEvent, Broker, Bundle, Decision
from console.selectors import balance_status, bounces, bundle_map, flip_flops
from console.services.optimality import optimality_measure
from tests.conftest import bundle_load, ingest, report

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def owned_and_reported(loads):
    """broker -> (cpu %, bundle indexes it owns); each bundle carries 2,000 msg/s."""
    bundles = list(Bundle.objects.select_related("namespace").order_by("namespace__name", "lower"))
    brokers = {b.name: b for b in Broker.objects.all()}
    for name, (_, indexes) in loads.items():
        for i in indexes:
            bundles[i].owner = brokers[name]
            bundles[i].save()
            bundle_load(bundles[i].name, msgRateIn=1000.0, msgRateOut=1000.0)
    for name, (cpu, indexes) in loads.items():
        names = [bundles[i].name for i in indexes]
        count = len(names)
        ingest(
            report(name, cpu, bundles=names)
            | {
                "msgRateIn": 1000.0 * count,
                "msgRateOut": 1000.0 * count,
                "timestamp": NOW.timestamp(),
            }
        )


def test_the_gauge_compares_max_over_mean_now_with_the_best_assignment(fulcrum_cluster):
    assert optimality_measure(now=NOW) is None  # nobody reported yet
    owned_and_reported({"broker-1": (60, range(6)), "broker-2": (10, [6]), "broker-3": (10, [7])})
    gauge = optimality_measure(now=NOW)
    # 6 bundles on broker-1, one each elsewhere: 60 / 10 / 10 % now; 30 / 30 / 20 % at best.
    assert gauge["maxOverMean"] == pytest.approx(0.6 / (0.8 / 3))
    assert gauge["optimumMaxOverMean"] == pytest.approx(0.3 / (0.8 / 3))
    assert gauge["ratio"] == pytest.approx(2.0)
    assert balance_status(now=NOW)["optimality"] == gauge


def test_budget_cool_down_oscillations_and_why_the_cycle_held(fulcrum_cluster, settings):
    settings.FULCRUM_MAX_MOVES_PER_HOUR = 12
    settings.FULCRUM_BUNDLE_COOL_DOWN_S = 600
    bundle = Bundle.objects.select_related("namespace").order_by("lower")[0]
    bundle.last_unloaded_at = NOW - timedelta(seconds=100)
    bundle.save()
    decision = Decision.objects.create(
        at=NOW - timedelta(minutes=2),
        kind=Decision.Kind.SHED,
        strategy="FulcrumShedder",
        reason="Balanced",
        summary="no action",
        details={
            "actions": [],
            "shedding": {
                "skipped": [
                    {
                        "broker": "broker-1",
                        "reason": "Balanced",
                        "detail": "pinned by its own background",
                    }
                ]
            },
        },
    )
    moves = [
        ("broker-1", "broker-2", 50),
        ("broker-2", "broker-1", 20),
        ("broker-1", "broker-3", 5),
    ]
    for source, destination, minutes in moves:
        AuditEvent.objects.create(
            at=NOW - timedelta(minutes=minutes),
            action=AuditEvent.Action.UNLOAD,
            target=bundle.name,
            source=source,
            destination=destination,
            reason="x",
            decision=decision,
        )
    status = balance_status(now=NOW)
    assert status["budget"] == {"used": 3, "limit": 12}  # FulcrumShedder's own is 30
    cool = status["coolDown"]
    assert cool["seconds"] == 600
    assert cool["bundles"] == 1
    assert cool["next"][0]["bundle"] == bundle.name
    assert cool["next"][0]["inS"] == pytest.approx(500)
    (bounce,) = status["oscillations"]  # back on broker-1, which it left 30 minutes before
    assert (bounce["bundle"], bounce["broker"]) == (bundle.name, "broker-1")
    assert bounce["decision"] == decision.pk
    assert status["quiet"]["skipped"][0]["detail"] == "pinned by its own background"
    # Without a limit of its own and under Pulsar's shedder there is none.
    settings.FULCRUM_MAX_MOVES_PER_HOUR = 0
    from console.models import BalancerConfig

    BalancerConfig.objects.update(shedder="ThresholdShedder")
    assert balance_status(now=NOW)["budget"]["limit"] is None
    assert bounces(since=NOW - timedelta(minutes=10), until=NOW) == []


def test_the_dashboard_and_the_api_show_the_panel(
    fulcrum_cluster, operator_client, client, operator
):
    body = operator_client.get("/api/balance/").json()
    assert set(body) == {"optimality", "budget", "coolDown", "oscillations", "flipFlops", "quiet"}
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert 'id="optimality"' in page
    assert 'id="balance-data"' in page


def test_the_audit_marks_a_move_that_bounced_back(fulcrum_cluster, client, operator):
    for source, destination, minutes in (
        ("broker-1", "broker-2", 30),
        ("broker-2", "broker-1", 10),
    ):
        AuditEvent.objects.create(
            at=NOW - timedelta(minutes=minutes),
            action=AuditEvent.Action.UNLOAD,
            target="acme/orders/0x00000000_0x40000000",
            source=source,
            destination=destination,
            reason="x",
        )
    client.force_login(operator)
    page = client.get("/audit/").content.decode()
    assert page.count("bounced back</span>") == 1


def move(bundle, source, destination, minutes, decision=None):
    return AuditEvent.objects.create(
        at=NOW - timedelta(minutes=minutes),
        action=AuditEvent.Action.UNLOAD,
        target=bundle,
        source=source,
        destination=destination,
        reason="x",
        decision=decision,
    )


def test_a_broker_that_gives_takes_and_gives_again_within_the_hour_flip_flops(fulcrum_cluster):
    a, b, c = (f"acme/orders/0x{i:08x}_0x{i + 1:08x}" for i in range(3))
    move(a, "broker-1", "broker-2", 50)  # broker-1 gives
    move(b, "broker-1", "broker-3", 45)  # ... gives again
    move(c, "broker-3", "broker-1", 30)  # ... takes
    third = move(a, "broker-1", "broker-3", 10)  # ... and gives: a flip-flop
    # broker-3 took, gave, took: a flip-flop too, completed by the same move.
    flips = {f["broker"]: f for f in flip_flops(since=NOW - timedelta(hours=1), until=NOW)}
    assert {b: (f["id"], f["pattern"]) for b, f in flips.items()} == {
        "broker-1": (third.pk, "gave 2, took 1, gave 1"),
        "broker-3": (third.pk, "took 1, gave 1, took 1"),
    }
    assert flips["broker-1"]["firstAt"] == (NOW - timedelta(minutes=50)).isoformat()
    assert len(flip_flops(since=NOW - timedelta(minutes=11), until=NOW)) == 2
    # A window that ends before the third run sees none; nor does one where the first move is
    # more than an hour before the last.
    assert flip_flops(since=NOW - timedelta(hours=1), until=NOW - timedelta(minutes=20)) == []
    assert len(balance_status(now=NOW)["flipFlops"]) == 2
    AuditEvent.objects.filter(pk=third.pk).update(at=NOW + timedelta(minutes=20))
    assert flip_flops(since=NOW - timedelta(hours=1), until=NOW + timedelta(hours=1)) == []


def test_the_audit_marks_the_move_completing_a_flip_flop(fulcrum_cluster, client, operator):
    move("acme/orders/0x00000000_0x40000000", "broker-1", "broker-2", 30)
    move("acme/orders/0x40000000_0x80000000", "broker-2", "broker-3", 20)
    move("acme/orders/0x80000000_0xc0000000", "broker-1", "broker-2", 10)
    client.force_login(operator)
    page = client.get("/audit/").content.decode()
    assert page.count(">flip-flop</span>") == 1
    assert 'title="broker-2: took 1, gave 1, took 1 within the hour"' in page


def test_the_bundle_map_says_when_a_bundle_in_cool_down_may_move_again(fulcrum_cluster, settings):
    from console.models import BalancerConfig

    settings.FULCRUM_BUNDLE_COOL_DOWN_S = 60
    config = BalancerConfig.objects.get()
    config.parameters = config.parameters | {"fulcrumBundleCoolDownMinutes": 10}
    config.save()
    first, second = Bundle.objects.select_related("namespace").order_by("lower")[:2]
    Bundle.objects.filter(pk=first.pk).update(last_unloaded_at=NOW - timedelta(seconds=100))
    Bundle.objects.filter(pk=second.pk).update(last_unloaded_at=NOW - timedelta(hours=1))
    rows = {
        (ns["name"], b[0]): b for ns in bundle_map(now=NOW)["namespaces"] for b in ns["bundles"]
    }
    # FulcrumShedder's own cool-down (10 minutes) is the longest: eligible 500 s from now.
    assert (
        rows[(first.namespace.name, first.lower)][7] == (NOW + timedelta(seconds=500)).isoformat()
    )
    assert rows[(second.namespace.name, second.lower)][7] is None


def test_a_swap_in_one_decision_is_no_step_of_a_flip_flop(fulcrum_cluster):
    decision = Decision.objects.create(
        at=NOW - timedelta(minutes=30),
        kind=Decision.Kind.SHED,
        strategy="FulcrumShedder",
        reason="LoadImbalance",
        summary="swap",
    )
    move("acme/orders/0x00000000_0x40000000", "broker-1", "broker-2", 40)  # broker-1 gives
    move("acme/orders/0x40000000_0x80000000", "broker-1", "broker-2", 30, decision)  # a swap:
    move("acme/orders/0x80000000_0xc0000000", "broker-2", "broker-1", 30, decision)  # one step
    move("acme/orders/0xc0000000_0xffffffff", "broker-1", "broker-3", 10)  # ... and gives again
    assert flip_flops(since=NOW - timedelta(hours=1), until=NOW) == []


def test_an_operators_moves_and_a_drains_are_no_oscillation(fulcrum_cluster, operator):
    """Issue 25, item 4: an operator's undo is deliberate, not "bounced back" nor a flip-flop;
    a drain's moves fill no alert; the balancer moving back what an operator moved is one."""
    bundle = "acme/orders/0x00000000_0x40000000"
    first = move(bundle, "broker-1", "broker-2", 30)  # the balancer's
    undo = move(bundle, "broker-2", "broker-1", 20)  # an operator undoes it
    AuditEvent.objects.filter(pk=undo.pk).update(actor=operator, reverses=first)
    window = {"since": NOW - timedelta(hours=1), "until": NOW}
    assert bounces(**window) == []
    # A drain's moves, the tick's (no actor): " is draining" in the core's words.
    for i, minutes in enumerate((15, 12, 9)):
        row = move(f"acme/payments/0x{i:08x}_0x{i + 1:08x}", "broker-3", "broker-2", minutes)
        AuditEvent.objects.filter(pk=row.pk).update(reason="broker-3 is draining")
    row = move("acme/payments/0x00000000_0x00000001", "broker-2", "broker-3", 5)
    AuditEvent.objects.filter(pk=row.pk).update(reason="broker-2 is draining")
    assert flip_flops(**window) == []
    assert bounces(**window) == []
    # The balancer moving a bundle back where it left within the hour is still one.
    again = move(bundle, "broker-1", "broker-2", 3)
    assert [b["id"] for b in bounces(**window)] == [again.pk]


def test_the_audit_says_one_verb_links_ids_and_offers_undo_only_where_it_can_work(
    fulcrum_cluster, client, operator
):
    from django.utils import timezone

    from console.services import broker_state_set

    now = timezone.now()
    here, there = "broker-1", "broker-2"
    moved_row, gone_row = Bundle.objects.select_related("namespace").order_by("id")[:2]
    Bundle.objects.filter(pk__in=[moved_row.pk, gone_row.pk]).update(
        owner=Broker.objects.get(name=here)
    )

    def row(bundle, source, destination, **kw):
        return AuditEvent.objects.create(
            at=now,
            action="unload",
            target=bundle.name,
            source=source,
            destination=destination,
            reason="x",
            **kw,
        )

    ok = row(moved_row, there, here)  # it is on broker-1, broker-2 is active: may be undone
    stale = row(gone_row, here, there)
    undo = row(moved_row, here, there, actor=operator, reverses=stale)  # it is not on broker-2
    broker_state_set(there, "draining", actor=operator)
    broker_state_set(there, "active", actor=operator)
    client.force_login(operator)
    page = client.get("/audit/").content.decode()
    verbs = re.findall(r'<tr id="audit-\d+">(?:<td>.*?</td>){3}<td>([a-z-]+)</td>', page)
    assert {"activate", "drain", "undo"} <= set(verbs)
    # Ids shown and linked both ways.
    assert f'<a href="/audit/?id={undo.pk}" title="this row alone">#{undo.pk}</a>' in page
    assert f'href="/audit/?id={stale.pk}" title="this move undid audit row #{stale.pk}"' in page
    assert f'href="/audit/?id={undo.pk}" title="undone by audit row #{undo.pk}"' in page
    one = client.get(f"/audit/?id={ok.pk}").content.decode()
    assert one.count('<tr id="audit-') == 1
    for bad in ("x", "²"):  # said on the page, not a failure ("²" is a digit, not a number)
        shown = client.get(f"/audit/?id={bad}")
        assert shown.status_code == 200
        assert "id is an audit row" in shown.content.decode()
    # "undo" is a verb to filter by too: the unloads that reverse another.
    undos = client.get("/audit/?action=undo").content.decode()
    assert re.findall(r'<tr id="audit-(\d+)">', undos) == [str(undo.pk)]
    # Undo offered where it can work; elsewhere disabled, saying why.
    assert f'data-audit="{ok.pk}"' in page
    assert "cannot be undone: the bundle moved on since" in page  # the stale one's bundle
