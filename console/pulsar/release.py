"""Putting Pulsar's dynamic configuration back as it was before Fulcrum took control: what a
release restores, doing it, and saying it. No Django: the release of an admin
(``services.control``) and the dead-man's (``services.deadman``) share it, and the dead-man can
do it from memory when the database is down."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.pulsar.admin import PulsarAdmin, PulsarAdminError


def changes_of(previous: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What releasing control restores, from what taking it recorded (a connection's
    ``previous_config``: key -> ``{"effective", "override"}``)."""
    return [
        {"key": k, "effective": v.get("effective"), "override": v.get("override")}
        for k, v in previous.items()
    ]


def restore(admin: PulsarAdmin, changes: list[dict[str, Any]]) -> list[str]:
    """Put each key back: its previous effective value (``true`` when unknown), and no override
    when it had none (E18, then E19). Returns what failed, ``"<key>: <status> <reason>"``."""
    failed = []
    for change in changes:
        key, before = change["key"], change.get("effective") or "true"
        try:
            admin.set_dynamic_config(key, before)
            if change.get("override") is None:
                # The value set above stays in force until a restart, when broker.conf's applies.
                admin.delete_dynamic_config(key)
        except PulsarAdminError as exc:
            failed.append(f"{key}: {exc.status} {exc.reason}")
    return failed


def restored_said(changes: list[dict[str, Any]]) -> str:
    """``loadBalancerSheddingEnabled -> true (override removed); …``"""
    return "; ".join(
        f"{c['key']} -> {c['effective'] or 'true'}"
        + (" (override removed)" if c["override"] is None else "")
        for c in changes
    )
