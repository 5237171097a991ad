"""The balancer's config as stored, and as the cycle and Pulsar's tunables take it; its versions."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.conf import settings

from balancer.config import PulsarConfig
from balancer.cycle import CycleConfig, Strategies
from balancer.danube.config import DanubeConfig
from balancer.registry import split_keys
from balancer.safety import SafetyConfig
from console.models import (
    BalancerConfig,
    Cluster,
    ConfigVersion,
)


def balancer_config_get() -> BalancerConfig:
    """The cluster's balancer config row (created with defaults on first use)."""
    cluster, _ = Cluster.objects.get_or_create(name="default")
    config, _ = BalancerConfig.objects.get_or_create(cluster=cluster)
    return config


def pulsar_config_get(config: BalancerConfig | None = None) -> PulsarConfig:
    """The stored parameters as the balancer's frozen config."""
    config = config or balancer_config_get()
    pulsar, _ = split_keys(config.parameters)
    return PulsarConfig.from_keys(pulsar)


def cycle_config_get(config: BalancerConfig | None = None) -> CycleConfig:
    """The cycle's whole configuration: the stored strategies and Pulsar parameters, and
    Fulcrum's safety limits from the settings (FULCRUM_BUNDLE_COOL_DOWN_S, ...)."""
    config = config or balancer_config_get()
    _, danube = split_keys(config.parameters)
    return CycleConfig(
        strategies=Strategies(config.shedder, config.placement, config.split_algorithm),
        pulsar=pulsar_config_get(config),
        danube=DanubeConfig.from_keys(danube),
        safety=SafetyConfig(
            bundle_cool_down_s=settings.FULCRUM_BUNDLE_COOL_DOWN_S,
            max_moves_per_hour=settings.FULCRUM_MAX_MOVES_PER_HOUR,
            blacklist=tuple(settings.FULCRUM_BLACKLIST),
            broker_timeout_s=settings.FULCRUM_BROKER_TIMEOUT_S,
            is_auto_split_enabled=config.is_auto_split_enabled,
        ),
        is_shedding_enabled=config.is_shedding_enabled,
    )


def config_versions(*, limit: int = 50) -> list[dict[str, Any]]:
    """The config's saved versions, newest first: ``{"id", "at" (ISO, UTC), "actor", "reason",
    "values", "changes" {field: [old, new]}}``."""
    rows = ConfigVersion.objects.select_related("actor").order_by("-id")[:limit]
    return [
        {
            "id": v.pk,
            "at": v.at.astimezone(UTC).isoformat(),
            "actor": v.actor_name,
            "reason": v.reason,
            "values": v.values,
            "changes": v.changes,
        }
        for v in rows
    ]
