"""Reads: ORM rows -> balancer types, and the rows the pages show.

The names below are imported when first used (PEP 562), not with the package: a process that
needs one selector module (the dead-man's reads of ``console.selectors.pulsar``) does not load
them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.lazy import lazy_names

if TYPE_CHECKING:
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
        deadman_alive,
        deadman_limit_s,
        move_expected_s,
        moves_in_flight,
        moves_late,
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

_HOMES = {
    "AUDIT_FILTERS": "audit",
    "BROKER_RANGES_S": "brokers",
    "BUNDLE_MAP_PAGE_BUNDLES": "bundles",
    "DELIBERATE_WORDS": "dashboard",
    "FLOAT8_ARRAY_OID": "snapshot",
    "FRACTION_COLUMNS": "decisions",
    "HISTORY_POINTS": "brokers",
    "NotCached": "credentials",
    "PLAN_COLUMNS": "decisions",
    "REPORT_RESULTS": "reports",
    "audit_events": "audit",
    "balance_status": "dashboard",
    "balancer_config_get": "config",
    "bounces": "dashboard",
    "broker_history": "brokers",
    "broker_load_from_document": "snapshot",
    "broker_load_get": "snapshot",
    "broker_owned_bundles": "brokers",
    "broker_quarantined": "brokers",
    "broker_rankings": "brokers",
    "bundle_map": "bundles",
    "bundle_rows": "bundles",
    "bundles_with_loads": "bundles",
    "cluster_snapshot_get": "snapshot",
    "config_versions": "config",
    "cool_down_s": "dashboard",
    "credential_broker": "credentials",
    "credential_cache_clear": "credentials",
    "current_imbalance": "brokers",
    "cv_series": "dashboard",
    "cycle_config_get": "config",
    "database_read": "database",
    "deadman_alive": "pulsar",
    "deadman_limit_s": "pulsar",
    "decision_explained": "decisions",
    "decision_feed": "dashboard",
    "domain_layout": "brokers",
    "drain_progress": "brokers",
    "flip_flops": "dashboard",
    "loop_health": "dashboard",
    "move_expected_s": "pulsar",
    "moves_in_flight": "pulsar",
    "moves_late": "pulsar",
    "namespace_rows": "bundles",
    "page_params": "bundles",
    "pulsar_broker_read": "pulsar",
    "pulsar_config_get": "config",
    "pulsar_conflict_get": "pulsar",
    "pulsar_connection_attached": "pulsar",
    "pulsar_status": "pulsar",
    "pulsar_trouble": "pulsar",
    "report_results": "reports",
    "report_runs_running": "reports",
    "undo_blockers": "audit",
}

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
    "deadman_alive",
    "deadman_limit_s",
    "decision_explained",
    "decision_feed",
    "domain_layout",
    "drain_progress",
    "flip_flops",
    "loop_health",
    "move_expected_s",
    "moves_in_flight",
    "moves_late",
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


if not TYPE_CHECKING:  # mypy reads the imports above, and so checks every name used
    __getattr__ = lazy_names(__name__, _HOMES)
