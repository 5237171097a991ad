"""Invariants over random snapshots and operation sequences (Hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from balancer import bundles as b
from balancer.config import PulsarConfig
from balancer.load import BrokerLoad, BundleLoad, MessageRates, ResourceUsage, TopicLoad
from balancer.placement.place import place
from balancer.registry import SHEDDERS, config_class
from balancer.snapshot import ClusterSnapshot, NamespacePolicy
from balancer.splitting.algorithms import flow_or_qps_equally_divide, topic_count_equally_divide

HASH = st.integers(min_value=0, max_value=0xFFFFFFFF)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.integers(1, 64), st.lists(st.tuples(st.integers(0, 10_000), HASH), max_size=30), HASH)
def test_bundle_ranges_always_partition_the_hash_space(count, splits, probe):
    boundaries = b.initial_boundaries(count)
    for pick, cut in splits:
        index = pick % (len(boundaries) - 1)
        lower, upper = boundaries[index], boundaries[index + 1]
        if upper - lower > 1:
            point = lower + 1 + cut % (upper - lower - 1)
            boundaries = b.split_boundaries(boundaries, b.BundleRange(lower, upper), [point])
    b.validate_boundaries(boundaries)
    ranges = b.bundles_from_boundaries("t/ns", boundaries)
    holders = [r for r in ranges if r.range.contains(probe)]
    assert len(holders) == 1
    assert holders[0] == ranges[b.bundle_index_for(boundaries, probe)]


@FAST
@given(st.data())
def test_split_boundaries_lie_strictly_inside_the_range(data):
    lower = data.draw(st.integers(0, 0xFFFFFFF0))
    upper = data.draw(st.integers(lower + 2, 0xFFFFFFFF))
    rng = b.BundleRange(lower, upper)
    hashes = data.draw(st.lists(st.integers(lower, upper - 1), min_size=2, max_size=40))
    rates = data.draw(st.lists(st.floats(0, 5000), min_size=len(hashes), max_size=len(hashes)))
    topics = [
        TopicLoad(f"t{i}", h, r, r * 1000)
        for i, (h, r) in enumerate(zip(hashes, rates, strict=True))
    ]
    config = PulsarConfig.from_keys({"loadBalancerNamespaceBundleMaxMsgRate": 1000})
    assert lower < b.range_equally_divide(rng) < upper
    for cut in topic_count_equally_divide(rng, topics, None, config) or []:
        # Between two topic hashes of the range: inside unless every topic sits on the lower bound.
        assert lower <= cut < upper
        if len(set(hashes)) > 1:
            assert min(hashes) <= cut <= max(hashes)
    for cut in flow_or_qps_equally_divide(rng, topics, None, config) or []:
        assert lower < cut <= upper


@st.composite
def snapshots(draw):
    n = draw(st.integers(2, 6))
    names = [f"b{i}" for i in range(n)]
    bundle_names = [f"ns{k % 3}/0x{k:08x}_0x{k + 1:08x}" for k in range(draw(st.integers(1, 20)))]
    owners = {bn: draw(st.sampled_from([*names, None])) for bn in bundle_names}
    now = 10_000.0
    recent = {bn: now - draw(st.integers(0, 4000)) for bn in bundle_names if draw(st.booleans())}
    brokers = {}
    for name in names:
        owned = tuple(bn for bn, o in owners.items() if o == name)
        brokers[name] = BrokerLoad(
            name,
            failure_domain=draw(st.sampled_from(["", "d1", "d2"])),
            state=draw(st.sampled_from(["active", "active", "active", "draining"])),
            cpu=ResourceUsage(draw(st.floats(0, 120)), 100),
            rates=MessageRates(
                draw(st.floats(0, 1e5)),
                draw(st.floats(0, 1e5)),
                draw(st.floats(0, 5e8)),
                draw(st.floats(0, 5e8)),
            ),
            bundles=owned,
        )
    loads = {
        bn: BundleLoad(
            bn,
            owners[bn],
            short_term=MessageRates(draw(st.floats(0, 5e4)), 0, draw(st.floats(0, 2e8)), 0),
            long_term=MessageRates(draw(st.floats(0, 5e4)), 0, draw(st.floats(0, 2e8)), 0),
        )
        for bn in bundle_names
    }
    groups = {
        f"ns{k}": NamespacePolicy(f"ns{k}", draw(st.sampled_from([None, "g"]))) for k in range(3)
    }
    return ClusterSnapshot(now, brokers, loads, groups, recent)


@FAST
@given(snapshots(), st.sampled_from(sorted(SHEDDERS)))
def test_no_shedder_unloads_a_bundle_from_a_non_owner_or_in_the_grace_period(snapshot, name):
    config = config_class(name)()
    decision = SHEDDERS[name](snapshot, config, {})
    grace = getattr(config, "grace_period_s", 0)
    for unload in decision.unloads:
        if name == "danube":
            continue  # moves topics, not bundles
        assert snapshot.bundles[unload.bundle].owner == unload.source
        assert unload.bundle in snapshot.brokers[unload.source].bundles
        unloaded_at = snapshot.recently_unloaded.get(unload.bundle)
        assert unloaded_at is None or unloaded_at < snapshot.now - grace
    assert len({u.bundle for u in decision.unloads}) == len(decision.unloads)


@FAST
@given(snapshots(), st.booleans())
def test_placement_never_breaks_anti_affinity_when_a_satisfying_broker_exists(snapshot, domains):
    config = PulsarConfig.from_keys({"failureDomainsEnabled": domains})
    new = "ns0/0xf0000000_0xffffffff"
    snapshot = ClusterSnapshot(
        snapshot.now,
        snapshot.brokers,
        {**snapshot.bundles, new: BundleLoad(new)},
        {**snapshot.namespaces, "ns0": NamespacePolicy("ns0", "g")},
    )
    members = {ns for ns, p in snapshot.namespaces.items() if p.anti_affinity_group == "g"}

    def count(broker):
        return len(
            {n.rsplit("/", 1)[0] for n, load in snapshot.bundles.items() if load.owner == broker}
            & members
        )

    placement = place(snapshot, new, config, {})
    active = [n for n, br in snapshot.brokers.items() if br.is_active]
    if placement.broker is None:
        assert not active
        return
    assert snapshot.brokers[placement.broker].is_active
    # Pulsar re-selects over every broker when the choice is overloaded (PULSAR.md §1 step 8).
    if placement.reason == "ReselectedOverloaded":
        return
    if domains:
        # The group is spread over failure domains first: the chosen broker's domain holds the
        # fewest of the group's namespaces.
        totals: dict[str, int] = {}
        for n in active:
            domain = snapshot.brokers[n].failure_domain
            totals[domain] = totals.get(domain, 0) + count(n)
        chosen_domain = snapshot.brokers[placement.broker].failure_domain
        assert totals[chosen_domain] == min(totals.values())
        candidates = [
            n for n in active if totals[snapshot.brokers[n].failure_domain] == totals[chosen_domain]
        ]
    else:
        candidates = active
    if any(count(n) == 0 for n in candidates):
        assert count(placement.broker) == 0


@FAST
@given(
    st.lists(st.floats(0, 1e9), min_size=1, max_size=40),
    st.floats(0, 5e9),
    st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_running_sum_selection_equals_the_greedy_loop(throughputs, minimum, recent_flags):
    from balancer.decisions import Reason
    from balancer.shedding.common import select_bundles_by_throughput

    names = [f"t/ns/{i:03d}" for i in range(len(throughputs))]
    loads = {
        n: BundleLoad(n, "a", short_term=MessageRates(0, 0, t, 0))
        for n, t in zip(names, throughputs, strict=True)
    }
    recent = {n: 990.0 for n, flag in zip(names, recent_flags, strict=False) if flag}
    snap = ClusterSnapshot(1000.0, {"a": BrokerLoad("a", bundles=tuple(names))}, loads, {}, recent)
    unloads, _ = select_bundles_by_throughput(
        snap, snap.brokers["a"], minimum, 60.0, Reason.OVERLOADED
    )
    # The reference: Pulsar's loop, literally.
    eligible = sorted(((-t, n) for n, t in zip(names, throughputs, strict=True) if n not in recent))
    expected, taken = [], 0.0
    for negative, name in eligible:
        if taken < minimum or not expected:
            expected.append(name)
            taken += -negative
    assert [u.bundle for u in unloads] == expected


@FAST
@given(
    snapshots(),
    st.integers(0, 3),
    st.booleans(),
    st.sampled_from(["LeastLongTermMessageRate", "LeastResourceUsageWithWeight"]),
)
def test_batch_placement_decides_as_placing_one_by_one(snapshot, seed, even, strategy):
    from balancer.placement.batch import place_many

    config = PulsarConfig.from_keys(
        {
            "seed": seed,
            "loadBalancerDistributeBundlesEvenlyEnabled": even,
            "loadBalancerBrokerMaxTopics": 3,
        }
    )
    bundles = list(snapshot.bundles)[:8]
    bundles += bundles[:2]  # a bundle placed twice replaces its earlier preallocation
    sources = {b: snapshot.bundles[b].owner for b in bundles if snapshot.bundles[b].owner}
    batch, batch_state = place_many(
        snapshot, bundles, config, {}, strategy=strategy, sources=sources
    )
    state: dict = {}
    active = [n for n, br in snapshot.brokers.items() if br.is_active]
    for bundle, placed in zip(bundles, batch, strict=True):
        others = [n for n in active if n != sources.get(bundle)]
        single = place(snapshot, bundle, config, state, others or list(snapshot.brokers), strategy)
        state = single.state
        assert (placed.broker, placed.reason) == (single.broker, single.reason)
    assert batch_state.get("preallocated", {}) == state.get("preallocated", {})
