"""Danube's ``load_manager.rebalancing.*`` keys (flattened to the last name) and the presets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from balancer.errors import BalancerError
from balancer.names import PlacementName

ASSIGNMENT_STRATEGIES: Final = (
    PlacementName.DANUBE_FAIR,
    PlacementName.DANUBE_BALANCED,
    PlacementName.DANUBE_WEIGHTED_LOAD,
)


@dataclass(frozen=True, slots=True)
class Preset:
    """An aggressiveness level: CV threshold, check interval (s), moves per hour, cooldown (s)."""

    cv_threshold: float
    check_interval_s: float
    max_moves_per_hour: int
    cooldown_s: float


# Danube document's table (threshold, interval, moves/hour); cooldowns from Danube's code presets.
PRESETS: Final[Mapping[str, Preset]] = {
    "conservative": Preset(0.40, 600, 5, 120),
    "balanced": Preset(0.30, 300, 10, 60),
    "aggressive": Preset(0.20, 120, 20, 30),
}


@dataclass(frozen=True, slots=True)
class DanubeConfig:
    """Rebalancing and assignment settings in core units (seconds, fractions)."""

    is_enabled: bool = True
    aggressiveness: str = "balanced"
    cv_threshold: float = 0.30
    check_interval_s: float = 300.0
    max_moves_per_hour: int = 10
    cooldown_s: float = 60.0
    min_brokers_for_rebalance: int = 2
    min_topic_age_s: float = 300.0
    blacklist_topics: tuple[str, ...] = field(default_factory=tuple)
    assignment_strategy: str = PlacementName.DANUBE_BALANCED
    seed: int = 0

    @classmethod
    def from_keys(cls, keys: Mapping[str, Any], path: str = "config") -> DanubeConfig:
        """Build from Danube keys; the aggressiveness preset sets the threshold, interval, moves
        per hour and cooldown, and explicit keys override it.

        Raises:
            BalancerError: an unknown key or preset, or a value of the wrong type.
        """
        unknown = sorted(set(keys) - set(KEYS))
        if unknown:
            raise BalancerError(
                f"unknown configuration key {unknown[0]!r}; valid keys: {', '.join(sorted(KEYS))}",
                field=f"{path}.{unknown[0]}",
            )
        level = keys.get("aggressiveness", "balanced")
        if level not in PRESETS:
            raise BalancerError(
                f"aggressiveness must be one of {', '.join(PRESETS)}",
                field=f"{path}.aggressiveness",
            )
        preset = PRESETS[level]
        config = cls(
            aggressiveness=level,
            cv_threshold=preset.cv_threshold,
            check_interval_s=preset.check_interval_s,
            max_moves_per_hour=preset.max_moves_per_hour,
            cooldown_s=preset.cooldown_s,
        )
        changes: dict[str, Any] = {}
        for key, value in keys.items():
            if key == "aggressiveness":
                continue
            name, kind = KEYS[key]
            where = f"{path}.{key}"
            if kind is bool:
                if not isinstance(value, bool):
                    raise BalancerError(f"{key} must be true or false", field=where)
            elif kind is tuple:
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise BalancerError(f"{key} must be a list of strings", field=where)
                value = tuple(value)
            elif kind is str:
                if value not in ASSIGNMENT_STRATEGIES:
                    raise BalancerError(
                        f"{key} must be one of {', '.join(ASSIGNMENT_STRATEGIES)}", field=where
                    )
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise BalancerError(f"{key} must be a non-negative number", field=where)
            changes[name] = kind(value) if kind in (int, float) else value
        return replace(config, **changes)


KEYS: Final[Mapping[str, tuple[str, Any]]] = {
    "enabled": ("is_enabled", bool),
    "aggressiveness": ("aggressiveness", str),
    "cv_threshold": ("cv_threshold", float),
    "check_interval_seconds": ("check_interval_s", float),
    "max_moves_per_hour": ("max_moves_per_hour", int),
    "cooldown_seconds": ("cooldown_s", float),
    "min_brokers_for_rebalance": ("min_brokers_for_rebalance", int),
    "min_topic_age_seconds": ("min_topic_age_s", float),
    "blacklist_topics": ("blacklist_topics", tuple),
    "assignment_strategy": ("assignment_strategy", str),
    "seed": ("seed", int),
}
