"""Load report ingest: validate the whole report, then write it in one transaction."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from balancer.load import LONG_TERM_SAMPLES, SHORT_TERM_SAMPLES, MessageRates, time_average
from balancer.wire import integer, number, obj, parse_broker, parse_rates
from console import realtime, selectors
from console.models import LONG_COLUMNS, SHORT_COLUMNS, Broker, Bundle, LoadReport
from console.services.errors import ConsoleError


def _parse_bundle_stats(doc: dict[str, Any]) -> dict[str, tuple[MessageRates, dict[str, int]]]:
    stats = obj(doc.get("bundleStats", {}), "bundleStats")
    out = {}
    for name, value in stats.items():
        path = f"bundleStats[{name}]"
        body = obj(value, path)
        counts = {k: integer(body, k, path) for k in ("topics", "producers", "consumers")}
        out[name] = (parse_rates(body, path), counts)
    return out


def load_report_ingest(doc: Any) -> LoadReport:
    """Store one broker's load report and fold its bundle stats into the time averages.

    ``doc`` is a CLI.md broker document (``name``, resources as ``{usage, limit}``, msg rates in
    msg/s, throughputs in bytes/s) plus ``timestamp`` (s since epoch, optional) and ``bundleStats``
    (bundle name -> rates and topic/producer/consumer counts). Stats of bundles the console does
    not know are ignored (a report can race a split).

    Raises:
        balancer.errors.BalancerError: a malformed field, named by ``field``; nothing is written.
        ConsoleError: 404 for a broker the console does not know.
    """
    body = dict(obj(doc, ""))
    load = parse_broker(
        {k: v for k, v in body.items() if k not in ("timestamp", "bundleStats")}, ""
    )
    stats = _parse_bundle_stats(body)
    stamp = number(body, "timestamp", "", None) if "timestamp" in body else None
    at = datetime.fromtimestamp(stamp, UTC) if stamp is not None else datetime.now(UTC)
    weights = selectors.pulsar_config_get().weights
    with transaction.atomic():
        try:
            broker = Broker.objects.select_for_update().get(name=load.name)
        except Broker.DoesNotExist:
            raise ConsoleError(f"unknown broker {load.name!r}", status=404, field="name") from None
        report = LoadReport.objects.create(
            broker=broker,
            reported_at=at,
            cpu_usage=load.cpu.usage,
            cpu_limit=load.cpu.limit,
            memory_usage_mib=load.memory.usage,
            memory_limit_mib=load.memory.limit,
            direct_memory_usage_mib=load.direct_memory.usage,
            direct_memory_limit_mib=load.direct_memory.limit,
            bandwidth_in_usage_bytes_per_s=load.bandwidth_in.usage,
            bandwidth_in_limit_bytes_per_s=load.bandwidth_in.limit,
            bandwidth_out_usage_bytes_per_s=load.bandwidth_out.usage,
            bandwidth_out_limit_bytes_per_s=load.bandwidth_out.limit,
            msg_rate_in=load.rates.msg_rate_in,
            msg_rate_out=load.rates.msg_rate_out,
            msg_throughput_in_bytes_per_s=load.rates.msg_throughput_in,
            msg_throughput_out_bytes_per_s=load.rates.msg_throughput_out,
            bundle_count=len(load.bundles),
            topic_count=load.topics,
            weighted_usage_fraction=load.weighted_max_usage(weights),
        )
        broker.latest_report = report
        broker.save(update_fields=["latest_report"])
        by_name = {
            b.name: b
            for b in Bundle.objects.select_related("namespace").filter(
                namespace__name__in={n.rsplit("/", 1)[0] for n in stats}
            )
        }
        changed = []
        for name, (rates, counts) in stats.items():
            bundle = by_name.get(name)
            if bundle is None:
                continue
            short = time_average(
                selectors.rates_from_json(bundle.short_term),
                rates,
                bundle.samples,
                SHORT_TERM_SAMPLES,
            )
            long = time_average(
                selectors.rates_from_json(bundle.long_term),
                rates,
                bundle.samples,
                LONG_TERM_SAMPLES,
            )
            bundle.short_term = selectors.rates_to_json(short)
            bundle.long_term = selectors.rates_to_json(long)
            bundle.samples += 1
            bundle.topics, bundle.producers, bundle.consumers = (
                counts["topics"],
                counts["producers"],
                counts["consumers"],
            )
            changed.append(bundle)
        Bundle.objects.bulk_update(
            changed, [*SHORT_COLUMNS, *LONG_COLUMNS, "samples", "topics", "producers", "consumers"]
        )
        rows = selectors.broker_rankings()
        realtime.publish(
            realtime.LOAD_REPORTED,
            {"broker": broker.name, "rankings": rows, **selectors.current_imbalance(rows)},
        )
    return report
