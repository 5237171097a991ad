"""Fulcrum's own safety limits on top of the reference strategies; the cycle
(``balancer.cycle``) applies them to every unload as vetoes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from balancer.config import PulsarConfig


@dataclass(frozen=True, slots=True)
class SafetyConfig:
    """Limits on what any strategy may move.

    Attributes:
        bundle_cool_down_s: a bundle moved less than this long ago stays (seconds).
        max_moves_per_hour: unloads allowed cluster-wide in any sliding hour (0: no limit).
        blacklist: shell-style patterns of bundle or namespace names that never move.
        broker_timeout_s: a broker that reported once and then stayed silent for longer is lost:
            its bundles are re-placed (seconds).
        is_auto_split_enabled: whether the cycle splits bundles over Pulsar's auto-split limits.
    """

    bundle_cool_down_s: float = 300.0
    max_moves_per_hour: int = 0
    blacklist: tuple[str, ...] = field(default_factory=tuple)
    broker_timeout_s: float = 60.0
    is_auto_split_enabled: bool = False


def matching_pattern(bundle: str, patterns: Iterable[str]) -> str | None:
    """The first pattern (``acme/*``, ``*/payments/*``) matching the bundle or its namespace."""
    namespace = bundle.rsplit("/", 1)[0]
    return next((p for p in patterns if fnmatchcase(bundle, p) or fnmatchcase(namespace, p)), None)


def cool_down_s(pulsar: PulsarConfig, safety: SafetyConfig | None, *, fulcrum: bool) -> float:
    """How long (seconds) a moved bundle is left alone: the longest of Fulcrum's cool-down
    (``safety``), Pulsar's grace period and, under FulcrumShedder (``fulcrum``), its own
    (``fulcrumBundleCoolDownMinutes``)."""
    return max(
        safety.bundle_cool_down_s if safety is not None else 0.0,
        pulsar.grace_period_s,
        pulsar.fulcrum_cool_down_s if fulcrum else 0.0,
    )
