"""The cycle's snapshot built from the metadata store (``selectors.cluster_snapshot_get``).

    .venv/bin/python -m tests.benchmarks.snapshot_db [--brokers 1000] [--bundles 1000000]

Creates a throwaway SQLite database in a temporary directory (or uses DATABASE_URL when set,
which it must be free to fill), migrates it, inserts the brokers and the bundles with owners,
puts one report per broker with its bundles' averages in the live load store (the Redis at
REDIS_URL, under the prefix FULCRUM_LOAD_STORE_PREFIX, default ``fulcrum-bench:``), then times
building the snapshot (median of three), then one whole ThresholdShedder cycle on it, and
prints the peak resident memory. A database that already holds exactly that many brokers and
bundles is reused as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--bundles", type=int, default=100_000)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="fulcrum-bench-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.demo_settings")
    os.environ.setdefault("FULCRUM_LOAD_STORE_PREFIX", "fulcrum-bench:")
    import django

    django.setup()
    from django.core.management import call_command

    from console.models import Broker, Bundle

    call_command("migrate", verbosity=0)
    if Broker.objects.count() == args.brokers and Bundle.objects.count() == args.bundles:
        print(f"reusing the {args.brokers:,} brokers and {args.bundles:,} bundles in the database")
    else:
        fill(args.brokers, args.bundles)
    time_snapshot(args.brokers, args.bundles)


def fill(broker_count: int, bundle_count: int) -> None:
    """Brokers, 100 namespaces and bundles spread over the brokers (ownership: the database)."""
    from console.models import Broker, Bundle, Cluster, Namespace, Tenant

    cluster = Cluster.objects.create(name="bench")
    tenant = Tenant.objects.create(cluster=cluster, name="t")
    namespaces = Namespace.objects.bulk_create(
        [Namespace(tenant=tenant, name=f"t/ns{i}") for i in range(100)]
    )
    brokers = Broker.objects.bulk_create(
        [Broker(cluster=cluster, name=f"broker-{j:05d}") for j in range(broker_count)]
    )
    per_namespace = bundle_count // len(namespaces)
    width = (1 << 32) // per_namespace
    started = time.perf_counter()
    batch = []
    for n, namespace in enumerate(namespaces):
        for k in range(per_namespace):
            upper = 0xFFFFFFFF if k == per_namespace - 1 else (k + 1) * width
            batch.append(
                Bundle(
                    namespace=namespace,
                    lower=k * width,
                    upper=upper,
                    owner=brokers[(n * per_namespace + k) % len(brokers)],
                )
            )
            if len(batch) >= 50_000:
                Bundle.objects.bulk_create(batch, batch_size=10_000)
                batch = []
    Bundle.objects.bulk_create(batch, batch_size=10_000)
    print(f"inserted {bundle_count:,} bundles in {time.perf_counter() - started:.0f} s")


def fill_live_store(now: float) -> None:
    """One report per broker in the live load store (broker 0 hot), with every owned bundle's
    averages, as ingest leaves them."""
    import numpy as np

    from console import loadstore
    from console.models import Broker, Bundle

    started = time.perf_counter()
    rows = np.asarray(
        Bundle.objects.order_by("owner_id").values_list(
            "owner_id", "namespace_id", "lower", "upper"
        ),
        dtype=np.int64,
    )
    names = dict(Broker.objects.values_list("pk", "name"))
    starts = np.searchsorted(rows[:, 0], [*sorted(names), max(names) + 1])
    entries = []
    for j, pk in enumerate(sorted(names)):
        mine = rows[starts[j] : starts[j + 1]]
        records = np.zeros(len(mine), dtype=loadstore.BUNDLE_RECORD)
        records["namespace"], records["lower"], records["upper"] = (
            mine[:, 1],
            mine[:, 2],
            mine[:, 3],
        )
        records["short"] = records["long"] = (10.0, 5.0, 1e4, 5e3)
        records["samples"], records["counts"] = 10, (3, 1, 1)
        report = {
            "cpu": {"usage": 95.0 if j == 0 else 30.0, "limit": 100.0},
            "memory": {"usage": 1.0, "limit": 8.0},
            "bandwidthIn": {"usage": 1.0, "limit": 9.0},
            "bandwidthOut": {"usage": 1.0, "limit": 9.0},
            "msgRateIn": 1.0,
            "msgRateOut": 1.0,
            "topics": 1,
            "reportedAt": now,
        }
        entries.append((names[pk], loadstore.BrokerEntry(report, records)))

    async def put_all() -> None:
        async with loadstore.own_async_client():
            version = await loadstore.ownership_version()
            for name, entry in entries:
                await loadstore.entry_put(
                    name, lambda _, e=entry: e, reported_at=now, ownership=version
                )

    asyncio.run(put_all())
    loadstore.history_trim([i for i, _, _ in loadstore.history_read(10 * len(names))])
    print(f"filled the live load store in {time.perf_counter() - started:.0f} s")


def time_snapshot(broker_count: int, bundle_count: int) -> None:
    """Print the snapshot's build time (median of 3) and one cycle's on it."""
    from datetime import UTC, datetime

    from django.utils import timezone

    from balancer.config import PulsarConfig
    from balancer.cycle import CycleConfig, plan_cycle
    from console import loadstore, selectors
    from console.models import Broker

    now = timezone.now()
    first = Broker.objects.order_by("pk").values_list("name", flat=True).first()
    if first is None or loadstore.entry_get(first) is None:
        fill_live_store(now.timestamp())
    else:  # the brokers' report time, so that nobody is lost
        now = datetime.fromtimestamp(loadstore.entry_get(first).reported_at, UTC)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        snapshot = selectors.cluster_snapshot_get(now=now)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    # The bench's bundles are small: no minimum throughput, so that the hot broker sheds.
    pulsar = PulsarConfig.from_keys({"loadBalancerBundleUnloadMinThroughputThreshold": 0})
    plan = plan_cycle(snapshot, CycleConfig(pulsar=pulsar), {}, now.timestamp())
    cycle = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"snapshot of {broker_count:,} brokers × {bundle_count:,} bundles from the store: "
        f"{statistics.median(times):.2f} s (median of 3; {', '.join(f'{t:.2f}' for t in times)}); "
        f"then one ThresholdShedder cycle: {cycle:.2f} s ({len(plan.actions)} actions); "
        f"peak RSS {peak:,.0f} MB"
    )


if __name__ == "__main__":
    main()
