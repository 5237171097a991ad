"""The cycle's snapshot built from the metadata store (``selectors.cluster_snapshot_get``).

    .venv/bin/python -m tests.benchmarks.snapshot_db [--brokers 1000] [--bundles 1000000]

Creates a throwaway SQLite database in a temporary directory (or uses DATABASE_URL when set,
which it must be free to fill), migrates it, inserts the brokers, one load report each and the
bundles with owners and time-averaged rates, then times building the snapshot (median of
three), then one whole ThresholdShedder cycle on it, and prints the peak resident memory. A
database that already holds exactly that many brokers and bundles is reused as it is.
"""

from __future__ import annotations

import argparse
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
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
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
    """Brokers with one load report each, 100 namespaces, bundles spread over the brokers."""
    from django.utils import timezone

    from console.models import Broker, Bundle, Cluster, LoadReport, Namespace, Tenant

    cluster = Cluster.objects.create(name="bench")
    tenant = Tenant.objects.create(cluster=cluster, name="t")
    namespaces = Namespace.objects.bulk_create(
        [Namespace(tenant=tenant, name=f"t/ns{i}") for i in range(100)]
    )
    brokers = Broker.objects.bulk_create(
        [Broker(cluster=cluster, name=f"broker-{j:05d}") for j in range(broker_count)]
    )
    now = timezone.now()
    reports = LoadReport.objects.bulk_create(
        [
            LoadReport(
                broker=b,
                reported_at=now,
                cpu_usage=95 if j == 0 else 30,  # one hot broker, for the cycle
                cpu_limit=100,
                memory_usage_mib=1,
                memory_limit_mib=8,
                bandwidth_in_usage_bytes_per_s=1,
                bandwidth_in_limit_bytes_per_s=9,
                bandwidth_out_usage_bytes_per_s=1,
                bandwidth_out_limit_bytes_per_s=9,
                msg_rate_in=1,
                msg_rate_out=1,
                msg_throughput_in_bytes_per_s=1,
                msg_throughput_out_bytes_per_s=1,
                bundle_count=1,
                topic_count=1,
                weighted_usage_fraction=0.3,
            )
            for j, b in enumerate(brokers)
        ],
        batch_size=5000,
    )
    for broker, report in zip(brokers, reports, strict=True):
        broker.latest_report = report
    Broker.objects.bulk_update(brokers, ["latest_report"], batch_size=5000)
    per_namespace = bundle_count // len(namespaces)
    width = (1 << 32) // per_namespace
    rates = {"msgRateIn": 10.0, "msgRateOut": 5.0, "msgThroughputIn": 1e4, "msgThroughputOut": 5e3}
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
                    short_term=rates,
                    long_term=rates,
                    samples=10,
                    topics=3,
                )
            )
            if len(batch) >= 50_000:
                Bundle.objects.bulk_create(batch, batch_size=10_000)
                batch = []
    Bundle.objects.bulk_create(batch, batch_size=10_000)
    print(f"inserted {bundle_count:,} bundles in {time.perf_counter() - started:.0f} s")


def time_snapshot(broker_count: int, bundle_count: int) -> None:
    """Print the snapshot's build time (median of 3) and one cycle's on it."""
    from balancer.config import PulsarConfig
    from balancer.cycle import CycleConfig, plan_cycle
    from console import selectors
    from console.models import LoadReport

    # The brokers' report time, so that a reused database has no lost broker.
    now = LoadReport.objects.latest("reported_at").reported_at
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
