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


@register.filter
def quantity(value: float | None, unit: str) -> str:
    """A figure in its unit's words, as the core says it (bytes/s, msg/s, fraction as %)."""
    return "—" if value is None else explain.quantity(float(value), unit)


@register.filter
def cv_text(value: float | None) -> str:
    """A CV as the console writes it: three decimals, or "no CV (fewer than two brokers
    serving)" for a CV recorded as None — whose 0 would say nothing of balance."""
    if value is None:
        return "no CV (fewer than two brokers serving)"
    return f"CV {value:.3f}"
