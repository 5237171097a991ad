"""Fulcrum's Prometheus metrics (prometheus-client), one home: their definitions and the few
``*_record`` functions the services call, and the exposition ``/metrics`` serves.

Names follow Prometheus' conventions: base units (seconds, ratios 0–1), ``_total`` counters,
one unit per name. Across processes (uvicorn workers, Celery workers) prometheus-client's
multiprocess mode is used when ``PROMETHEUS_MULTIPROC_DIR`` is set before it is imported (``make
run`` sets it and empties the folder at start); gauges then keep the most recent value written
by any process (``mostrecent``). Without it (tests, one process) the default registry serves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

RESOURCES: Final = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")

BROKER_USAGE: Final = Gauge(
    "fulcrum_broker_usage_ratio",
    "A broker's usage of a resource (0-1 of its limit; weighted: the shedder's weighted maximum)",
    ["broker", "resource"],
    multiprocess_mode="mostrecent",
)
CLUSTER_CV: Final = Gauge(
    "fulcrum_cluster_usage_cv",
    "Coefficient of variation of the brokers' weighted usage at the last tick",
    multiprocess_mode="mostrecent",
)
CLUSTER_MAX_OVER_MEAN: Final = Gauge(
    "fulcrum_cluster_max_over_mean_ratio",
    "The busiest broker's weighted usage over the mean, at the last tick",
    multiprocess_mode="mostrecent",
)
OPTIMALITY: Final = Gauge(
    "fulcrum_optimality_ratio",
    "Max/mean of broker usage now over the best assignment of the same bundles (1 = optimal)",
    multiprocess_mode="mostrecent",
)
CYCLE_DURATION: Final = Histogram(
    "fulcrum_cycle_duration_seconds",
    "Wall time of one shedding cycle: snapshot, plan and apply",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CYCLE_ACTIONS: Final = Counter(
    "fulcrum_cycle_actions_total",
    "Actions of the balancer's plans, by kind (unload, place, split, brokerState), outcome "
    "(planned, vetoed) and reason",
    ["kind", "outcome", "reason"],
)
MOVES: Final = Counter(
    "fulcrum_moves_total",
    "Bundles moved (unloads and splits applied or sent to Pulsar), by actor (balancer, operator)",
    ["actor"],
)
LOAD_REPORTS: Final = Counter(
    "fulcrum_load_reports_total",
    "Load reports received, by result (accepted, refused)",
    ["result"],
)
LOAD_REPORT_AGE: Final = Gauge(
    "fulcrum_load_report_age_seconds",
    "Age of each broker's newest load report at the last tick",
    ["broker"],
    multiprocess_mode="mostrecent",
)
HISTORY_REPORT_DURATION: Final = Histogram(
    "fulcrum_history_report_duration_seconds",
    "Wall time of a Spark run over the history (the load report or the advisor), by kind",
    ["kind"],
    buckets=(5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0),
)
PULSAR_MOVES: Final = Counter(
    "fulcrum_pulsar_moves_total",
    "Moves sent to a Pulsar cluster, by what verifying them found (as-planned, elsewhere, "
    "unowned, failed, skipped, cancelled)",
    ["outcome"],
)

PULSAR_CONTROL: Final = Gauge(
    "fulcrum_pulsar_in_control",
    "1 while Fulcrum controls the attached Pulsar cluster (Pulsar's own shedding off), else 0; "
    "written by the dead-man at each check",
    multiprocess_mode="mostrecent",
)
PULSAR_CONFLICT: Final = Gauge(
    "fulcrum_pulsar_conflict",
    "1 while Pulsar's own shedding (or auto-split) is found on although Fulcrum holds control: "
    "two balancers; Fulcrum's executor is stopped",
    multiprocess_mode="mostrecent",
)
PULSAR_CALLS: Final = Counter(
    "fulcrum_pulsar_admin_calls_total",
    "Admin calls made to the attached Pulsar cluster, by the broker (host:port) that answered "
    "or failed, the call (PULSAR_ADMIN.md's number and name) and the result (ok, 4xx, 5xx, "
    "timeout, no answer, unreachable)",
    ["broker", "call", "result"],
)
PULSAR_CALL_SECONDS: Final = Histogram(
    "fulcrum_pulsar_admin_call_seconds",
    "Wall time of one admin call to Pulsar (redirects included), by call",
    ["call"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 90.0),
)
PULSAR_OBSERVATION_SECONDS: Final = Histogram(
    "fulcrum_pulsar_observation_seconds",
    "Wall time of one Pulsar pass (observe, verify, send); longer than FULCRUM_PULSAR_OBSERVE_S "
    "means observations fall behind",
    buckets=(0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0),
)
PULSAR_OBSERVED: Final = Gauge(
    "fulcrum_pulsar_last_observation_timestamp_seconds",
    "When the last Pulsar pass completed (Unix time): alert when older than two periods",
    multiprocess_mode="max",
)
PULSAR_MOVES_LATE: Final = Gauge(
    "fulcrum_pulsar_moves_late",
    "Moves in flight that waited longer than expected in their state (queued, sending, "
    "verifying), at the last Pulsar pass",
    multiprocess_mode="mostrecent",
)
DEADMAN_SILENCE: Final = Gauge(
    "fulcrum_deadman_silence_seconds",
    "Seconds since the shedding loop last completed a tick (or since control was taken), as "
    "the dead-man saw it at its last check",
    multiprocess_mode="mostrecent",
)
DEADMAN_LIMIT: Final = Gauge(
    "fulcrum_deadman_limit_seconds",
    "The silence after which the dead-man gives control back to Pulsar (FULCRUM_DEADMAN_S)",
    multiprocess_mode="mostrecent",
)
DEADMAN_CHECKED: Final = Gauge(
    "fulcrum_deadman_last_check_timestamp_seconds",
    "When the dead-man last checked (Unix time): a stale value means no dead-man runs",
    multiprocess_mode="max",
)
DEADMAN_RELEASES: Final = Counter(
    "fulcrum_deadman_releases_total",
    "Control given back to Pulsar by the dead-man, by result (released, failed: Pulsar refused "
    "or could not be reached, tried again at the next check)",
    ["result"],
)


def cycle_record(
    duration_s: float,
    cv: float,
    max_over_mean: float,
    brokers: Mapping[str, Mapping[str, float]],
    report_ages_s: Mapping[str, float],
    actions: Iterable[tuple[str, str, str]],
) -> None:
    """One tick: its duration (s), the cluster's CV and max/mean, each broker's usage per
    resource (0-1, ``RESOURCES`` and ``weighted``), each broker's report age (s), and every
    action of the plan as (kind, outcome, reason)."""
    CYCLE_DURATION.observe(duration_s)
    CLUSTER_CV.set(cv)
    CLUSTER_MAX_OVER_MEAN.set(max_over_mean)
    for broker, usage in brokers.items():
        for resource, value in usage.items():
            BROKER_USAGE.labels(broker=broker, resource=resource).set(value)
    for broker, age in report_ages_s.items():
        LOAD_REPORT_AGE.labels(broker=broker).set(age)
    for kind, outcome, reason in actions:
        CYCLE_ACTIONS.labels(kind=kind, outcome=outcome, reason=reason).inc()


def exposition() -> tuple[bytes, str]:
    """The metrics of every process (multiprocess mode) or of this one: (body, content type)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
