"""Reads: ORM rows -> balancer types, and the rows the pages show."""

from __future__ import annotations

from console.selectors.audit import AUDIT_FILTERS, audit_events, undo_blockers
from console.selectors.brokers import (
    BROKER_RANGES_S,
    HISTORY_POINTS,
    broker_history,
    broker_owned_bundles,
    broker_quarantined,
    broker_rankings,
    current_imbalance,
    domain_layout,
    drain_progress,
)
from console.selectors.bundles import (
    BUNDLE_MAP_PAGE_BUNDLES,
    bundle_map,
    bundle_rows,
    bundles_with_loads,
    namespace_rows,
    page_params,
)
from console.selectors.config import (
    balancer_config_get,
    config_versions,
    cycle_config_get,
    pulsar_config_get,
)
from console.selectors.credentials import NotCached, credential_broker, credential_cache_clear
from console.selectors.dashboard import (
    DELIBERATE_WORDS,
    balance_status,
    bounces,
    cool_down_s,
    cv_series,
    decision_feed,
    flip_flops,
    loop_health,
)
from console.selectors.database import database_read
from console.selectors.decisions import FRACTION_COLUMNS, PLAN_COLUMNS, decision_explained
from console.selectors.pulsar import (
    pulsar_broker_read,
    pulsar_conflict_get,
    pulsar_connection_attached,
    pulsar_status,
    pulsar_trouble,
)
from console.selectors.reports import REPORT_RESULTS, report_results, report_runs_running
from console.selectors.snapshot import (
    FLOAT8_ARRAY_OID,
    broker_load_from_document,
    broker_load_get,
    cluster_snapshot_get,
)

__all__ = [
    "AUDIT_FILTERS",
    "BROKER_RANGES_S",
    "BUNDLE_MAP_PAGE_BUNDLES",
    "DELIBERATE_WORDS",
    "FLOAT8_ARRAY_OID",
    "FRACTION_COLUMNS",
    "HISTORY_POINTS",
    "PLAN_COLUMNS",
    "REPORT_RESULTS",
    "NotCached",
    "audit_events",
    "balance_status",
    "balancer_config_get",
    "bounces",
    "broker_history",
    "broker_load_from_document",
    "broker_load_get",
    "broker_owned_bundles",
    "broker_quarantined",
    "broker_rankings",
    "bundle_map",
    "bundle_rows",
    "bundles_with_loads",
    "cluster_snapshot_get",
    "config_versions",
    "cool_down_s",
    "credential_broker",
    "credential_cache_clear",
    "current_imbalance",
    "cv_series",
    "cycle_config_get",
    "database_read",
    "decision_explained",
    "decision_feed",
    "domain_layout",
    "drain_progress",
    "flip_flops",
    "loop_health",
    "namespace_rows",
    "page_params",
    "pulsar_broker_read",
    "pulsar_config_get",
    "pulsar_conflict_get",
    "pulsar_connection_attached",
    "pulsar_status",
    "pulsar_trouble",
    "report_results",
    "report_runs_running",
    "undo_blockers",
]
