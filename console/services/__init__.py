"""Writes: every change to the store goes through a service, atomically and audited."""

from console.services.balancing import (
    broker_state_set,
    bundle_lookup,
    bundle_split,
    bundle_unload,
    shedding_tick_run,
)
from console.services.errors import ConsoleError
from console.services.ingest import load_report_ingest

__all__ = [
    "ConsoleError",
    "broker_state_set",
    "bundle_lookup",
    "bundle_split",
    "bundle_unload",
    "load_report_ingest",
    "shedding_tick_run",
]
