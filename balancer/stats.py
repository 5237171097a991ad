"""Imbalance statistics over broker loads."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Imbalance:
    """Mean, population standard deviation and coefficient of variation of a set of loads."""

    mean: float
    std: float
    cv: float


def imbalance(loads: Iterable[float]) -> Imbalance:
    """CV = population std / mean; 0 when there are fewer than two loads or the mean is 0.

    Source: Danube ``calculate_imbalance`` (DANUBE.md §4: population std, CV 0 when mean 0).
    """
    values = list(loads)
    if len(values) < 2:
        return Imbalance(mean=values[0] if values else 0.0, std=0.0, cv=0.0)
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return Imbalance(mean=mean, std=std, cv=std / mean if mean > 0 else 0.0)
