from datetime import UTC, datetime, timedelta

import pytest

from balancer.hashing import topic_hash
from console.errors import ConsoleError
from console.leases import TICK as TICK_LOCK
from console.leases import lease_claim
from console.models import AuditEvent, Broker, Bundle, ClusterSample, Decision
from console.services import bundle_lookup, bundle_unload, shedding_tick_run
from tests.conftest import MIB, bundle_load, ingest, report

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_lookup_places_an_unowned_bundle_and_records_it(cluster):
    result = bundle_lookup("persistent://acme/orders/invoices", now=NOW, place=True)
    assert result["owner"] in {"broker-1", "broker-2", "broker-3"}
    bundle = next(
        b for b in Bundle.objects.select_related("namespace") if b.name == result["bundle"]
    )
    assert bundle.owner.name == result["owner"]
    decision = Decision.objects.get(kind=Decision.Kind.PLACE)
    assert decision.strategy == "LeastLongTermMessageRate"
    assert decision.details["actions"][0]["destination"] == result["owner"]
    assert decision.details["actions"][0]["metric"]["unit"] == "msg/s"
    event = AuditEvent.objects.get(action=AuditEvent.Action.PLACE)
    assert event.actor is None
    assert event.destination == result["owner"]
    # A second lookup finds the same owner without placing again.
    assert (
        bundle_lookup("persistent://acme/orders/invoices", now=NOW, place=True)["owner"]
        == result["owner"]
    )
    assert Decision.objects.count() == 1


def test_lookup_spreads_a_namespace_evenly(cluster):
    owners = [
        bundle_lookup(f"persistent://acme/orders/t{i}", now=NOW, place=True)["owner"]
        for i in range(200)
    ]
    per_broker = dict.fromkeys(owners, 0)
    for b in Bundle.objects.filter(namespace__name="acme/orders"):
        per_broker[b.owner.name] += 1
    assert sorted(per_broker.values()) == [1, 1, 2]


@pytest.mark.parametrize(
    ("topic", "status"), [("nonsense", 400), ("persistent://acme/unknown/x", 404)]
)
def test_lookup_refuses_bad_topics(cluster, topic, status):
    with pytest.raises(ConsoleError) as err:
        bundle_lookup(topic, place=True)
    assert err.value.status == status


def own_all(owner_of):
    """Give every bundle an owner: owner_of(index) -> broker name."""
    brokers = {b.name: b for b in Broker.objects.all()}
    for i, bundle in enumerate(Bundle.objects.order_by("namespace__name", "lower")):
        bundle.owner = brokers[owner_of(i)]
        bundle_load(
            bundle.name,
            **{
                "msgThroughputIn": 40 * 1024 * 1024,
                "msgThroughputOut": 40 * 1024 * 1024,
            },
        )
        bundle.save()


def report_all(loads):
    """Each broker reports its owned bundles at NOW: broker -> (cpu %, throughput MiB/s)."""
    for name, (cpu, mib) in loads.items():
        ingest(
            report(name, cpu, bundles=names_of(name), throughput_mib=mib, timestamp=NOW.timestamp())
        )


def names_of(broker):
    return [
        b.name
        for b in Bundle.objects.select_related("namespace")
        if b.owner and b.owner.name == broker
    ]


def test_tick_unloads_from_the_hot_broker_places_and_audits(cluster):
    own_all(lambda i: "broker-1" if i < 6 else ("broker-2" if i < 7 else "broker-3"))
    ingest(report("broker-1", 90, bundles=names_of("broker-1"), throughput_mib=480))
    ingest(report("broker-2", 10, bundles=names_of("broker-2"), throughput_mib=80))
    ingest(report("broker-3", 10, bundles=names_of("broker-3"), throughput_mib=80))

    decision = shedding_tick_run(now=NOW)

    assert decision.kind == Decision.Kind.SHED
    assert decision.reason == "Overloaded"
    assert decision.strategy == "ThresholdShedder"
    assert decision.details["shedding"]["stats"]["avgUsage"] == pytest.approx(0.3667, abs=1e-3)
    assert decision.details["stats"]["before"]["avgUsage"] == pytest.approx(0.3667, abs=1e-3)
    assert decision.details["stats"]["after"]["cv"] < decision.details["stats"]["before"]["cv"]
    unloads = AuditEvent.objects.filter(action=AuditEvent.Action.UNLOAD)
    # fraction 0.9 - 0.367 - 0.1 + 0.05 = 0.483 of 480 MiB/s = 232 MiB/s: three 80 MiB/s bundles.
    assert unloads.count() == 3
    for event in unloads:
        assert event.source == "broker-1"
        assert event.destination in {"broker-2", "broker-3"}
        assert event.load_before["broker-1"] == pytest.approx(0.9)
        assert "ThresholdShedder Overloaded" in event.reason
        assert "80.0 MiB/s" in event.reason  # the bundle's throughput, in its unit
    assert len(names_of("broker-1")) == 3
    assert ClusterSample.objects.count() == 1
    # The load after is measured at the next tick.
    shedding_tick_run(now=NOW + timedelta(seconds=10))
    assert all(e.load_after is not None for e in AuditEvent.objects.filter(at=NOW))


def test_tick_keeps_strategy_state_between_cycles(cluster):
    own_all(lambda i: "broker-1")
    ingest(report("broker-1", 30, bundles=names_of("broker-1")))
    ingest(report("broker-2", 30))
    shedding_tick_run(now=NOW)
    from console.selectors import balancer_config_get

    state = balancer_config_get().state["ThresholdShedder"]["brokerAvgResourceUsage"]
    assert state["broker-1"] == pytest.approx(0.3)


def test_only_one_tick_runs_at_a_time(cluster):
    assert lease_claim(TICK_LOCK, "another-worker", NOW, 60)
    assert shedding_tick_run(now=NOW + timedelta(seconds=5)) is None
    assert Decision.objects.count() == 0


def test_operator_unload_moves_the_bundle_and_is_audited(cluster, operator):
    own_all(lambda i: "broker-1" if i % 2 else "broker-2")
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name)))
    target = names_of("broker-1")[0]
    result = bundle_unload(target, actor=operator, now=NOW)
    assert result["source"] == "broker-1"
    assert result["destination"] == "broker-3"  # owns no bundle of the namespace yet
    event = AuditEvent.objects.get(action=AuditEvent.Action.UNLOAD)
    assert event.actor == operator
    assert event.reason.startswith(f"operator unload of {target} from broker-1; throughput")
    assert "placed: LeastLongTermMessageRate chose broker-3" in event.reason
    assert event.destination == "broker-3"
    assert target in names_of("broker-3")
    # One decision holds the plan whole: the unload followed by its placement.
    decision = Decision.objects.get(kind=Decision.Kind.OPERATOR)
    assert [a["kind"] for a in decision.details["actions"]] == ["unload", "place"]
    assert AuditEvent.objects.count() == 1  # one row per move


def test_unload_of_an_unowned_or_unknown_bundle_is_refused(cluster, operator):
    name = Bundle.objects.select_related("namespace").first().name
    with pytest.raises(ConsoleError) as err:
        bundle_unload(name, actor=operator)
    assert err.value.status == 409
    with pytest.raises(ConsoleError) as err:
        bundle_unload("acme/orders/0x00000000_0x00000001", actor=operator)
    assert err.value.status == 404
    assert AuditEvent.objects.count() == 0


def test_an_unloaded_bundle_never_goes_back_to_the_broker_it_left(cluster, operator):
    # broker-1 owns one bundle of acme/orders: once it is unloaded, broker-1 owns the fewest and
    # even distribution alone would send the bundle straight back.
    own_all(lambda i: ["broker-1", "broker-2", "broker-2", "broker-3"][i % 4])
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name)))
    target = next(n for n in names_of("broker-1") if n.startswith("acme/orders/"))
    result = bundle_unload(target, actor=operator, now=NOW)
    assert result["destination"] == "broker-3"
    decision = Decision.objects.get(kind=Decision.Kind.OPERATOR)
    assert [a["destination"] for a in decision.details["actions"]] == ["broker-3", "broker-3"]


def test_placement_strategy_is_read_from_the_config_and_its_state_persists(cluster):
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    config.placement = "LeastResourceUsageWithWeight"
    config.save()
    for name, cpu in (("broker-1", 10), ("broker-2", 50), ("broker-3", 90)):
        ingest(report(name, cpu))
    bundle_lookup("persistent://acme/orders/x", now=NOW, place=True)
    decision = Decision.objects.get(kind=Decision.Kind.PLACE)
    assert decision.strategy == "LeastResourceUsageWithWeight"
    history = balancer_config_get().state["LeastResourceUsageWithWeight"]
    assert set(history["brokerAvgResourceUsageWithWeight"]) == {"broker-1", "broker-2", "broker-3"}


def test_a_silent_broker_loses_its_bundles_to_the_others(cluster):
    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    stale = NOW - timedelta(seconds=120)
    ingest(report("broker-1", 20, bundles=names_of("broker-1"), timestamp=stale.timestamp()))
    for name in ("broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name), timestamp=NOW.timestamp()))
    lost_bundles = names_of("broker-1")
    shedding_tick_run(now=NOW)
    assert names_of("broker-1") == []
    events = AuditEvent.objects.filter(action="unload", source="broker-1")
    assert {e.target for e in events} == set(lost_bundles)
    assert all("sent no load report" in e.reason for e in events)
    assert all(e.destination in {"broker-2", "broker-3"} for e in events)


def test_draining_moves_every_bundle_then_the_broker_is_drained(cluster, operator):
    from console.services import broker_state_set

    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name), timestamp=NOW.timestamp()))
    broker = broker_state_set("broker-2", "draining", actor=operator, now=NOW)
    # The drain is one plan: every bundle moves away, then the broker is drained.
    assert names_of("broker-2") == []
    assert broker.state == "drained"
    assert AuditEvent.objects.filter(action="drain", reason__contains="drain complete").count() == 1
    moves = AuditEvent.objects.filter(action="unload", source="broker-2")
    assert moves.count() == 3
    assert all(e.destination in {"broker-1", "broker-3"} for e in moves)


def test_with_one_broker_serving_the_audit_and_decision_show_no_cv_of_zero(
    cluster, operator, client
):
    """Issue 25, item 2: two of three brokers drained, one carries everything; its CV (0)
    would read "perfectly balanced" in the audit's load columns and the decision page."""
    from console.models import Decision
    from console.services import broker_state_set, shedding_tick_run

    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name), timestamp=NOW.timestamp()))
    broker_state_set("broker-2", "draining", actor=operator, now=NOW)
    broker_state_set("broker-3", "draining", actor=operator, now=NOW)
    later = (NOW + timedelta(seconds=20)).timestamp()
    ingest(report("broker-1", 60, bundles=names_of("broker-1"), timestamp=later))
    tick = shedding_tick_run(now=NOW + timedelta(seconds=30))
    assert tick is not None
    moved = AuditEvent.objects.filter(action="unload", source="broker-3").first()
    assert moved.load_after["cv"] is None  # measured at the tick: one broker serving
    client.force_login(operator)
    audit = client.get("/audit/?broker=broker-3").content.decode()
    assert "no CV (fewer than two brokers serving)" in audit
    page = client.get(f"/decisions/{tick.pk}/").content.decode()
    assert "— (1 serving broker)" in page
    assert Decision.objects.get(pk=tick.pk).details["stats"]["before"]["serving"] == 1
    # Nor does the dashboard's CV chart: the tick's sample has none (a gap, not a 0).
    assert ClusterSample.objects.get(at=NOW + timedelta(seconds=30)).cv is None
    assert client.get("/").context["cv_series"]["cv"][-1] is None


def test_draining_the_last_active_broker_is_refused(cluster, operator):
    from console.services import broker_state_set

    broker_state_set("broker-1", "draining", actor=operator)
    broker_state_set("broker-2", "draining", actor=operator)
    with pytest.raises(ConsoleError) as err:
        broker_state_set("broker-3", "draining", actor=operator)
    assert err.value.status == 409
    assert broker_state_set("broker-1", "active", actor=operator).state == "active"


def test_safety_rules_refuse_unloads_and_say_why(cluster, settings):
    settings.FULCRUM_BLACKLIST = ["acme/*"]
    own_all(lambda i: "broker-1" if i < 6 else ("broker-2" if i < 7 else "broker-3"))
    report_all({"broker-1": (90, 480), "broker-2": (10, 80), "broker-3": (10, 80)})
    decision = shedding_tick_run(now=NOW)
    assert AuditEvent.objects.filter(action="unload").count() == 0
    vetoed = [a for a in decision.details["actions"] if a["outcome"] == "vetoed"]
    assert vetoed
    assert {a["veto"] for a in vetoed} == {"Blacklisted"}
    assert all("matches the blacklist pattern 'acme/*'" in a["explanation"] for a in vetoed)
    assert f"{len(vetoed)} vetoed" in decision.summary


def test_operator_split_cuts_the_bundle_and_leaves_the_children_for_placement(cluster, operator):
    from console.services import bundle_split

    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name)))
    result = bundle_split("acme/orders/0x00000000_0x40000000", actor=operator, now=NOW)
    assert result["boundaries"] == ["0x20000000"]
    assert set(result["children"]) == {
        "acme/orders/0x00000000_0x20000000",
        "acme/orders/0x20000000_0x40000000",
    }
    # Pulsar assigns split bundles at their next lookup: the children are unowned until then.
    assert bundle_lookup("persistent://acme/orders/x", now=NOW, place=True)["owner"] is not None
    lowers = list(
        Bundle.objects.filter(namespace__name="acme/orders").values_list("lower", flat=True)
    )
    assert sorted(lowers) == [0, 0x20000000, 0x40000000, 0x80000000, 0xC0000000]
    event = AuditEvent.objects.get(action="split")
    assert event.actor == operator
    assert "range_equally_divide cuts at 0x20000000" in event.reason


def test_split_refusals_name_the_reason(cluster, operator):
    from console.services import bundle_split

    with pytest.raises(ConsoleError) as err:
        bundle_split(
            "acme/orders/0x00000000_0x40000000",
            actor=operator,
            algorithm="flow_or_qps_equally_divide",
        )
    assert "per-topic" in err.value.message
    with pytest.raises(ConsoleError) as err:
        bundle_split(
            "acme/orders/0x00000000_0x40000000",
            actor=operator,
            algorithm="specified_positions_divide",
        )
    assert err.value.field == "positions"
    with pytest.raises(ConsoleError) as err:  # the bundle has no topics: nothing to divide
        bundle_split(
            "acme/orders/0x00000000_0x40000000",
            actor=operator,
            algorithm="specified_positions_divide",
            positions=[0x10000000],
        )
    assert err.value.status == 409
    assert AuditEvent.objects.count() == 0


def test_auto_split_runs_in_the_tick_when_enabled(cluster):
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    config.is_auto_split_enabled = True
    config.save()
    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    hot = Bundle.objects.select_related("namespace").get(namespace__name="acme/orders", lower=0)
    bundle_load(hot.name, topics=5, msgRateIn=40_000)
    hot.save()
    for name in ("broker-1", "broker-2", "broker-3"):
        ingest(report(name, 20, bundles=names_of(name), timestamp=NOW.timestamp()))
    shedding_tick_run(now=NOW)
    event = AuditEvent.objects.get(action="split")
    assert event.actor is None
    assert event.reason.startswith(
        "auto-split: MsgRate 40,000.0 msg/s above the limit 30,000.0 msg/s"
    )
    assert Bundle.objects.filter(namespace__name="acme/orders").count() == 5


def test_the_tick_runs_at_the_configured_loop_interval(cluster):
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    config.loop_interval_s = 60
    config.save()
    ingest(report("broker-1", 20))
    ingest(report("broker-2", 20))
    shedding_tick_run(now=NOW)
    assert shedding_tick_run(now=NOW + timedelta(seconds=30)) is None
    assert ClusterSample.objects.count() == 1
    shedding_tick_run(now=NOW + timedelta(seconds=60))
    assert ClusterSample.objects.count() == 2


def test_anti_affinity_guard_keeps_a_bundle_that_cannot_spread_better(cluster):
    from console.models import Namespace

    Namespace.objects.filter(name__in=["acme/orders", "acme/payments"]).update(
        anti_affinity_group="pay"
    )
    # Every broker already owns bundles of both group namespaces: moving one cannot help.
    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    report_all({"broker-1": (90, 480), "broker-2": (10, 80), "broker-3": (10, 80)})
    decision = shedding_tick_run(now=NOW)
    skipped = decision.details["shedding"]["skipped"]
    assert skipped
    assert {s["reason"] for s in skipped} == {"AntiAffinity"}
    assert decision.reason == "AntiAffinity"
    assert AuditEvent.objects.filter(action="unload").count() == 0


def test_ticks_record_the_load_and_a_replay_compares_the_config_with_a_draft(cluster, settings):
    from console import loadstore
    from console.models import BalancerConfig
    from console.services.config import config_replay

    settings.FULCRUM_REPLAY_SAMPLE_S = 30
    # What happened: nothing moved (shedding paused); the loop ticks every 30 s.
    BalancerConfig.objects.update(is_shedding_enabled=False, loop_interval_s=30)
    own_all(lambda i: "broker-1" if i < 6 else ("broker-2" if i < 7 else "broker-3"))
    loads = {"broker-1": (90, 480), "broker-2": (10, 80), "broker-3": (10, 80)}
    for step in range(9):  # beat every 15 s: one in two is due and records its snapshot
        at = NOW + timedelta(seconds=15 * step)
        for name, (cpu, mib) in loads.items():
            ingest(
                report(
                    name, cpu, bundles=names_of(name), throughput_mib=mib, timestamp=at.timestamp()
                )
            )
        shedding_tick_run(now=at)
    documents = loadstore.replay_samples(0)
    assert [d["now"] for d in documents] == [
        (NOW + timedelta(seconds=30 * k)).timestamp() for k in range(5)
    ]
    with pytest.raises(ConsoleError) as err:
        config_replay({"shedder": "Nope"}, now=NOW + timedelta(minutes=2))
    assert err.value.field == "shedder"
    answer = config_replay({"is_shedding_enabled": True}, now=NOW + timedelta(minutes=2))
    assert answer["samples"] == 5
    assert answer["from"] == NOW.isoformat()
    # The current config (shedding paused) replays exactly what was recorded ...
    assert answer["current"]["moves"] == 0
    assert answer["current"]["cv"] == answer["recorded"]["cv"]
    assert answer["current"]["at"] == answer["recorded"]["at"]
    # ... the draft sheds the hot broker at its own loop interval, and the CV falls.
    draft = answer["draft"]
    assert draft["moves"] > 0
    assert draft["intervalS"] == 30
    assert draft["cycles"] == 5
    assert draft["cv"][-1] < draft["cv"][0]
    assert draft["cvMedian"] < answer["recorded"]["cvMedian"]
    # Nothing was written: the ownership is as it was.
    assert len(names_of("broker-1")) == 6
    # An hour later nothing is left to replay.
    with pytest.raises(ConsoleError) as err:
        config_replay({}, now=NOW + timedelta(hours=2))
    assert err.value.status == 409


def test_a_snapshot_too_large_or_too_soon_is_not_recorded(cluster, settings):
    from console import loadstore, selectors
    from console.services.shedding import replay_record

    snapshot = selectors.cluster_snapshot_get(now=NOW)
    settings.FULCRUM_REPLAY_MAX_BUNDLES = len(snapshot.bundles) - 1
    assert replay_record(snapshot, NOW) is False
    settings.FULCRUM_REPLAY_MAX_BUNDLES = len(snapshot.bundles)
    assert replay_record(snapshot, NOW) is True
    assert replay_record(snapshot, NOW + timedelta(seconds=1)) is False
    loadstore.client().zadd(loadstore._replay_key(), {b"not zlib": NOW.timestamp() + 2})
    assert len(loadstore.replay_samples(0)) == 1  # the broken entry is left out


def test_with_per_topic_stats_operators_split_by_topic_count_and_see_each_halfs_load(
    cluster, operator
):
    from console.services import bundle_split
    from tests.console.test_ingest import topics_of

    own_all(lambda i: ["broker-1", "broker-2", "broker-3"][i % 3])
    name = "acme/orders/0x00000000_0x40000000"
    topics = sorted(topics_of(0, 0x40000000, 6), key=topic_hash)
    listed = [
        {"topic": t, "msgRateIn": 100.0 * (i + 1), "msgThroughputIn": MIB * (i + 1)}
        for i, t in enumerate(topics)
    ]
    bundle_load(name, topics=6, topicStats=listed)
    for broker in ("broker-1", "broker-2", "broker-3"):
        ingest(report(broker, 20, bundles=names_of(broker)))
    preview = bundle_split(
        name, actor=operator, algorithm="topic_count_equally_divide", preview=True, now=NOW
    )
    hashes = [topic_hash(t) for t in topics]
    cut = hashes[2] + (hashes[3] - hashes[2]) // 2
    assert preview["plan"]["actions"][0]["boundaries"] == [f"0x{cut:08x}"]
    left, right = preview["children"]
    assert (left["topics"], right["topics"]) == (3, 3)
    assert (left["msgRate"], right["msgRate"]) == (600.0, 1500.0)
    assert left["measured"] is True
    assert AuditEvent.objects.count() == 0  # a preview writes nothing
    done = bundle_split(name, actor=operator, algorithm="topic_count_equally_divide", now=NOW)
    assert done["boundaries"] == [f"0x{cut:08x}"]
    assert "topic_count_equally_divide cuts at" in AuditEvent.objects.get(action="split").reason


def test_the_console_runs_fulcrums_strategies_by_default(fulcrum_cluster):
    from console.selectors import balancer_config_get

    config = balancer_config_get()
    assert (config.shedder, config.placement) == ("FulcrumShedder", "FulcrumPlacement")
    own_all(lambda i: "broker-1" if i < 6 else ("broker-2" if i < 7 else "broker-3"))
    for bundle in Bundle.objects.select_related("namespace"):
        bundle_load(bundle.name, msgRateIn=1000.0, msgRateOut=1000.0)
    # CPU follows the messages: 2,000 msg/s per bundle, 0.5 % CPU per 100 msg/s, and broker-1
    # has 30 % of its own.
    for name, cpu in (("broker-1", 90), ("broker-2", 10), ("broker-3", 10)):
        count = len(names_of(name))
        doc = report(name, cpu, bundles=names_of(name), throughput_mib=80 * count)
        ingest(doc | {"msgRateIn": 1000.0 * count, "msgRateOut": 1000.0 * count})
    decision = shedding_tick_run(now=NOW)
    assert decision.strategy == "FulcrumShedder"
    assert decision.details["shedding"]["stats"]["brokers"]["broker-1"]["background"] == (
        pytest.approx(0.3)
    )
    unloads = AuditEvent.objects.filter(action=AuditEvent.Action.UNLOAD)
    assert unloads.exists()
    for event in unloads:
        assert event.source == "broker-1"
        assert "FulcrumShedder" in event.reason
        assert "predicted gain" in event.reason
    # The destinations are Fulcrum's own (the even-distribution heuristic does not apply).
    places = [a for a in decision.details["actions"] if a["kind"] == "place"]
    assert all(a["reason"] == "StrategyDestination" for a in places)
    assert decision.details["stats"]["after"]["cv"] < decision.details["stats"]["before"]["cv"]
