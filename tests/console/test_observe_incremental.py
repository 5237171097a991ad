"""At the size of a production cluster (issue 26) a pass does not re-read every namespace: the
observation reads the boundaries and anti-affinity group (E8, E9) of the namespaces it must —
new ones, one whose owned bundles are not the ranges it holds (a split), one with a range no
broker lists — and the longest unread others up to ``NAMESPACE_READS_PER_PASS``. Against the
simulated cluster (its own routes, through respx), with more namespaces than that budget."""

from __future__ import annotations

import math
import time

import pytest
import respx

from balancer.simulator.layout import generated_layout
from balancer.simulator.traces import default_traces_dir
from console.connectors.pulsar_cluster.server import build
from console.pulsar.admin import PulsarAdmin
from console.pulsar.observe import NAMESPACE_READS_PER_PASS, ObserveCache, observe
from tests.console.pulsar_world import TOKEN, answer

NAMESPACES = 100  # over the budget: a whole refresh takes two passes


@pytest.fixture
def world():
    cluster = build(default_traces_dir(), layout=generated_layout(4, NAMESPACES, 2, 2), token=TOKEN)
    cluster.step(time.time())  # every bundle placed
    with respx.mock(assert_all_called=False) as router:
        route = router.route().mock(side_effect=answer(cluster))
        with PulsarAdmin(f"http://{cluster.broker_ids[0]}", token=TOKEN) as admin:
            yield cluster, admin, route


def _boundary_reads(route, since: int) -> list[str]:
    return [
        str(call.request.url.path)
        for call in route.calls[since:]
        if str(call.request.url.path).endswith("/bundles")
    ]


def test_a_pass_reads_every_namespace_first_then_only_its_budget_in_rotation(world):
    _, admin, route = world
    cache = ObserveCache()
    first = observe(admin, cache=cache)
    listed = {n for n in first.namespaces if not n.startswith("pulsar/")}
    assert len(listed) >= NAMESPACES
    assert len(_boundary_reads(route, 0)) == len(first.namespaces)
    read_in: list[set[str]] = []
    for _ in range(3):
        mark = len(route.calls)
        seen = observe(admin, cache=cache)
        reads = _boundary_reads(route, mark)
        assert len(reads) == NAMESPACE_READS_PER_PASS
        read_in.append(
            {r.removeprefix("/admin/v2/namespaces/").removesuffix("/bundles") for r in reads}
        )
        # Every namespace is still in the observation, from the cache where not re-read.
        assert seen.namespaces.keys() == first.namespaces.keys()
        assert seen.owners == first.owners
    # The oldest first: over ceil(n / budget) passes, every namespace is read again.
    passes = math.ceil(len(first.namespaces) / NAMESPACE_READS_PER_PASS)
    assert set().union(*read_in[:passes]) == set(first.namespaces)


def test_a_split_or_an_unowned_bundle_makes_its_namespace_read_in_the_same_pass(world):
    cluster, admin, route = world
    cache = ObserveCache()
    observe(admin, cache=cache)
    observe(admin, cache=cache)  # the rotation has started: the next pass reads only 64
    namespace = sorted(n for n in cache.namespaces if n.startswith("tenant-"))[-1]
    bundle = next(b for b in sorted(cluster.owners) if b.startswith(namespace + "/"))
    admin.split(bundle, "range_equally_divide")
    seen = observe(admin, cache=cache)
    assert len(seen.namespaces[namespace][0]) == 4  # 2 bundles, one split in two: 4 boundaries
    assert {b for b in seen.owners if b.startswith(namespace + "/")} == {
        b for b, o in cluster.owners.items() if b.startswith(namespace + "/") and o
    }
    # An unload leaves a range nobody lists until a lookup: its namespace is read again.
    other = sorted(n for n in cache.namespaces if n.startswith("tenant-"))[0]
    victim = next(b for b in sorted(cluster.owners) if b.startswith(other + "/"))
    admin.unload(victim)
    mark = len(route.calls)
    seen = observe(admin, cache=cache)
    assert f"/admin/v2/namespaces/{other}/bundles" in _boundary_reads(route, mark)
    assert victim in seen.unowned()


def test_the_simulator_s_owner_index_follows_every_change(world):
    cluster, admin, _ = world
    for bundle in sorted(cluster.owners)[:5]:
        if not cluster.is_system(bundle):
            admin.unload(bundle)
    admin.split(
        next(b for b in sorted(cluster.owners) if b.startswith("tenant-")),
        "range_equally_divide",
        unload=True,
    )
    cluster.step(time.time())
    scanned: dict[str | None, set[str]] = {}
    for bundle, owner in cluster.owners.items():
        scanned.setdefault(owner, set()).add(bundle)
    assert {o: b for o, b in cluster.owners.by_owner.items() if b} == scanned
