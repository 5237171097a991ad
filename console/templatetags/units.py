"""Template filters for figures with their units, in the core's words (balancer.explain)."""

from __future__ import annotations

from django import template

from balancer import explain

register = template.Library()


@register.filter
def bytes_per_s(value: float | None) -> str:
    """bytes/s in binary units, as the decisions say them: ``4.0 MiB/s``."""
    return explain.bytes_per_s(float(value or 0.0))


@register.filter
def percent(value: float | None) -> str:
    """A usage fraction (0–1) as the dashboard shows it: ``42.0 %``."""
    return "—" if value is None else f"{float(value) * 100:.1f} %"
