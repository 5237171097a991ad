"""One decision explained: the usage before, predicted and observed after, the rule that fired
with its figures, every action with its veto.
"""

from __future__ import annotations

from typing import Any

from console.models import (
    Decision,
)


def decision_explained(decision: Decision) -> dict[str, Any]:
    """Everything a decision page shows, from the stored plan (``CyclePlan.as_dict``) and the
    decision's audit rows: ``brokers`` [{"name", "before", "after" (predicted), "observed"}]
    (usage fractions; observed at the tick after, None until then), ``before``/``after``
    (mean, std, cv, maxOverMean), ``rule`` (the shedder's reason and its figures), ``actions``,
    ``skipped``, ``lost``, ``pending`` and ``events`` (audit rows with their load after)."""
    details = decision.details or {}
    stats = details.get("stats", {})
    before, after = stats.get("before", {}), stats.get("after", {})
    events = list(decision.auditevent_set.select_related("actor").order_by("id"))
    observed: dict[str, float] = {}
    observed_cv = None
    for event in events:
        for name, value in (event.load_after or {}).items():
            if name == "cv":
                observed_cv = value
            else:
                observed[name] = value
    names = sorted(set(before.get("brokers", {})) | set(after.get("brokers", {})))
    shedding = details.get("shedding") or {}
    brokers = [
        {
            "name": name,
            "before": before.get("brokers", {}).get(name),
            "after": after.get("brokers", {}).get(name),
            "observed": observed.get(name),
        }
        for name in names
    ]
    return {
        "brokers": brokers,
        "before": {k: before.get(k) for k in ("avgUsage", "std", "cv", "maxOverMean", "serving")},
        "after": {k: after.get(k) for k in ("avgUsage", "std", "cv", "maxOverMean", "serving")},
        "observedCv": observed_cv,
        "rule": _rule(details, shedding, decision, brokers),
        "actions": details.get("actions", []),
        "placements": _placements(details.get("actions", [])),
        "unexplainedPlacements": sum(
            1
            for a in details.get("actions", [])
            if a.get("kind") == "place"
            and a.get("destination")
            and not a.get("candidates")
            and a.get("reason") not in ("Operator", "StrategyDestination")
        ),
        "skipped": [
            {
                # As Skip.as_dict stores it ({"broker" or "bundle": name}).
                "kind": "bundle" if "bundle" in entry else "broker",
                "name": entry.get("broker") or entry.get("bundle") or entry.get("name") or "",
                "reason": entry.get("reason", ""),
                "detail": entry.get("detail", ""),
            }
            for entry in shedding.get("skipped", [])
            if isinstance(entry, dict)
        ],
        "stale": details.get("stale", []),
        # Planned but not sent: left to Pulsar or to a move already in flight, in words.
        "left": [
            {"reason": entry["reason"], "bundles": list(entry.get("bundles", []))}
            for key in ("leftToMovesInFlight", "leftToPulsar", "lostLeftToPulsar")
            if isinstance(entry := details.get(key), dict) and entry.get("reason")
        ],
        "waiting": [w for w in details.get("waiting", []) if isinstance(w, dict)],
        "lost": details.get("lost", []),
        "pending": details.get("pending", []),
        "error": details.get("error"),
        "events": [
            {
                "id": e.pk,
                "action": e.action,
                "actor": e.actor_name,
                "target": e.target,
                "source": e.source,
                "destination": e.destination,
                "reason": e.reason,
                "before": e.load_before,
                "after": e.load_after,
            }
            for e in events
        ],
    }


def _placements(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The place actions that list their candidates (``Action.candidates``): ``bundle``,
    ``destination``, ``strategy``, ``metric`` and ``unit`` of the scores, ``scored`` [{"broker",
    "score"}] best first, ``filtered`` [{"broker", "filter", "reason", "detail"}]."""
    out = []
    for action in actions:
        candidates = action.get("candidates") or []
        if action.get("kind") != "place" or not candidates:
            continue
        metric = action.get("metric") or {}
        out.append(
            {
                "bundle": action.get("bundle"),
                "destination": action.get("destination"),
                "strategy": action.get("strategy", ""),
                "metric": metric.get("name", ""),
                "unit": metric.get("unit", ""),
                "scored": [c for c in candidates if "filter" not in c],
                "filtered": [c for c in candidates if "filter" in c],
            }
        )
    return out


# The shedders' per-broker figures that are usage fractions (shown in %, as the chart).
FRACTION_COLUMNS = frozenset({"before", "after", "observed", "usage", "history", "background"})


# The plan's own figures, first in the rule's per-broker table; a shedder's own prediction
# ("predicted") gives way to the plan's "after": one set of numbers per decision.
PLAN_COLUMNS = ("before", "after", "observed")


def _rule(
    details: dict[str, Any],
    shedding: dict[str, Any],
    decision: Decision,
    brokers: list[dict[str, Any]],
) -> dict[str, Any]:
    """The shedder's reason and figures: scalars as ``figures`` [[name, value]], and its first
    per-broker table (a figure whose value maps brokers to figures) as ``perBroker`` {"name",
    "columns", "rows": [{"broker", "cells": [{"value", "fraction"}]}]}, led by the plan's
    before, after (predicted) and observed usage of ``brokers`` (``decision_explained``'s), the
    same figures as the chart and the cards; numbers to 4 significant digits, fractions marked
    (the page shows them in %)."""

    def said(value: Any) -> Any:
        return float(f"{value:.4g}") if isinstance(value, float) else value

    figures, per_broker = [], None
    by_broker: dict[str, dict[str, Any]] = {}  # figure -> broker -> a number
    stats = shedding.get("stats") or {}
    for name, value in stats.items():
        if name == "quarantined":
            continue  # each one is a skip of its own (ImplausibleReading), with its words
        tables = (
            isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values())
        )
        numbers = (
            isinstance(value, dict)
            and value
            and all(isinstance(v, int | float) for v in value.values())
        )
        if tables and per_broker is None:
            columns = sorted({k for v in value.values() for k in v})
            rows = [[b, *(said(v.get(c)) for c in columns)] for b, v in sorted(value.items())]
            per_broker = {"name": name, "columns": columns, "rows": rows}
        elif numbers:
            by_broker[name] = value
        else:
            figures.append([name, said(value)])
    # A figure per broker (FulcrumShedder's "predicted") is a column of the per-broker table
    # when its brokers are the table's; else it stays a figure.
    by_broker.pop("predicted", None)  # the plan's "after" is the prediction shown
    for name, value in by_broker.items():
        if per_broker is not None and set(value) <= {row[0] for row in per_broker["rows"]}:
            per_broker["columns"].append(name)
            for row in per_broker["rows"]:
                row.append(said(value.get(row[0])))
        else:
            figures.append([name, said(value)])
    table = None
    if per_broker is not None:
        plan = {b["name"]: b for b in brokers}
        columns = [*PLAN_COLUMNS, *per_broker["columns"]]
        table = {
            "name": per_broker["name"],
            "columns": columns,
            "rows": [
                {
                    "broker": row[0],
                    "cells": [
                        {"value": v, "fraction": c in FRACTION_COLUMNS}
                        for c, v in zip(
                            columns,
                            [*(plan.get(row[0], {}).get(c) for c in PLAN_COLUMNS), *row[1:]],
                            strict=True,
                        )
                    ],
                }
                for row in per_broker["rows"]
            ],
        }
    return {
        "strategy": details.get("strategy", decision.strategy),
        "reason": shedding.get("reason", details.get("reason", decision.reason)),
        "figures": figures,
        "perBroker": table,
    }
