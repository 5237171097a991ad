"""The optimality gauge: the cluster's max/mean of broker usage now against the best any
assignment of the same bundles could reach (``balancer.optimum``), measured on a schedule in the
worker and kept in the live load store for the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from balancer.load_model import LoadModel
from balancer.optimum import heuristic
from console import loadstore, metrics, selectors


def optimality_measure(*, now: datetime | None = None) -> dict[str, Any] | None:
    """Measure and store the gauge: ``{"at" (ISO, UTC), "maxOverMean", "optimumMaxOverMean",
    "ratio" (now ÷ optimum, ≥ 1 up to the heuristic's slack), "brokers", "bundles"}``; None (and
    nothing stored) with fewer than two serving brokers that reported.

    Both sides use Fulcrum's load model (``balancer.load_model``): every serving broker's
    unmovable background plus the load of its bundles, Pulsar's weighted max over the resources
    (the config's weights).
    """
    now = now or timezone.now()
    snapshot = selectors.cluster_snapshot_get(now=now)
    serving = [n for n, b in snapshot.brokers.items() if b.is_active and b.reported_at]
    if len(serving) < 2:
        return None
    weights = selectors.cycle_config_get(selectors.balancer_config_get()).pulsar.weights
    model = LoadModel.of(snapshot, serving, weights)
    current = model.usage()
    mean = float(current.mean())
    best = heuristic(model.bundle_load, model.background, model.weighted_limits())
    optimum = best.max_over_mean
    now_ratio = float(current.max()) / mean if mean > 0 else 0.0
    ratio = now_ratio / optimum if optimum > 0 else 1.0
    out = {
        "at": now.astimezone(UTC).isoformat(),
        "maxOverMean": now_ratio,
        "optimumMaxOverMean": optimum,
        "ratio": ratio,
        "brokers": len(serving),
        "bundles": len(model.rows),
    }
    loadstore.gauge_put("optimality", out)
    metrics.OPTIMALITY.set(ratio)
    return out
