"""The balancer config: every change goes through here and is audited (the admin's save)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from console import selectors
from console.models import AuditEvent, BalancerConfig

# The fields an operator may change, in the order the audit names them.
EDITABLE = (
    "shedder",
    "placement",
    "split_algorithm",
    "parameters",
    "is_shedding_enabled",
    "is_auto_split_enabled",
    "loop_interval_s",
)


def balancer_config_update(
    config: BalancerConfig, changes: dict[str, Any], *, actor: User | None
) -> BalancerConfig:
    """Write ``changes`` (already validated against the registry) and audit what changed,
    before and after, in one transaction. Unchanged values write nothing."""
    changed = {
        name: (getattr(config, name), value)
        for name, value in changes.items()
        if name in EDITABLE and getattr(config, name) != value
    }
    if not changed:
        return config
    with transaction.atomic():
        for name, (_, value) in changed.items():
            setattr(config, name, value)
        config.save(update_fields=list(changed))
        AuditEvent.objects.create(
            at=timezone.now(),
            actor=actor,
            action=AuditEvent.Action.CONFIG,
            target="balancer config",
            reason="; ".join(f"{name}: {old!r} → {new!r}" for name, (old, new) in changed.items()),
        )
    return config


def shedding_pause_set(paused: bool, *, actor: User | None) -> BalancerConfig:
    """Pause (or resume) shedding: the loop keeps ticking — lost brokers, drains, placements —
    but unloads nothing for load until resumed. Audited as a config change."""
    config = selectors.balancer_config_get()
    return balancer_config_update(config, {"is_shedding_enabled": not paused}, actor=actor)
