"""The dashboard's reads: the decision feed, the loop's health, the balance panel (budget,
cool-down, oscillations, flip-flops), the CV over time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Case, Q, When

from balancer.cycle import CycleConfig
from balancer.safety import cool_down_s as safety_cool_down_s
from balancer.shedding.fulcrum import NAME as FULCRUM
from console import loadstore
from console.models import (
    AuditEvent,
    BalancerConfig,
    Bundle,
    ClusterSample,
    Decision,
    is_quiet,
)
from console.selectors.config import balancer_config_get, cycle_config_get


def decision_feed(*, limit: int = 10, scan: int = 1000) -> list[dict[str, Any]]:
    """The dashboard's latest decisions, newest first: each that acted (or vetoed, or failed)
    as ``{"type": "decision", "id", "at", "kind", "strategy", "reason", "summary"}``, and each
    run of quiet cycles between them as one ``{"type": "quiet", "count", "first", "last",
    "reason"}`` (times ISO 8601, UTC), so that no-op ticks never push actions out. At most
    ``limit`` items from the newest ``scan`` decisions."""
    feed: list[dict[str, Any]] = []
    rows = Decision.objects.values_list("id", "at", "kind", "strategy", "reason", "summary")
    for pk, at, kind, strategy, reason, summary in rows[:scan]:
        when = at.astimezone(UTC).isoformat()
        if is_quiet(reason, summary):
            if feed and feed[-1]["type"] == "quiet":
                feed[-1]["count"] += 1
                feed[-1]["first"] = when
                continue
            if len(feed) == limit:
                break
            feed.append(
                {"type": "quiet", "count": 1, "first": when, "last": when, "reason": reason}
            )
            continue
        if len(feed) == limit:
            break
        feed.append(
            {
                "type": "decision",
                "id": pk,
                "at": when,
                "kind": kind,
                "strategy": strategy,
                "reason": reason,
                "summary": summary,
            }
        )
    return feed


def loop_health(*, now: datetime | None = None) -> dict[str, Any]:
    """The shedding loop as an operator checks it: ``{"lastTick", "nextTick"}`` (ISO, UTC, or
    None before the first tick), ``intervalS`` (s), ``sheddingEnabled`` (False: paused — the
    life cycle and placement still run), ``overdue`` (no tick for 3 intervals: is a Celery
    worker and beat running?), ``strategies`` {shedder, placement, split}."""
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    last = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    interval = max(config.loop_interval_s, 1.0)
    return {
        "lastTick": last.astimezone(UTC).isoformat() if last else None,
        "nextTick": (last + timedelta(seconds=interval)).astimezone(UTC).isoformat()
        if last
        else None,
        "intervalS": interval,
        "sheddingEnabled": config.is_shedding_enabled,
        "overdue": last is None or (now - last).total_seconds() > 3 * interval,
        "strategies": {
            "shedder": config.shedder,
            "placement": config.placement,
            "split": config.split_algorithm,
        },
    }


# The words the cycle gives a move it makes because a broker is draining or lost
# (``balancer.cycle._life_cycle_unloads``): the cluster's or an operator's doing, not a change
# of the balancer's mind.
DELIBERATE_WORDS = (" is draining", " sent no load report for ")


def _moves(
    since: datetime, until: datetime
) -> list[tuple[int, str, str, str, datetime, Any, bool]]:
    """Every move (unload) from an hour before ``since`` to ``until``, oldest first: (audit id,
    bundle, source, destination, at, decision id, deliberate). *Deliberate*: an operator's
    (an unload, an undo, a drain's moves) or one a drain or a lost broker made the balancer
    make — never an oscillation of the balancer's."""
    deliberate = Q(actor__isnull=False) | Q(reverses__isnull=False)
    for words in DELIBERATE_WORDS:
        deliberate |= Q(reason__contains=words)
    rows = (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.UNLOAD,
            at__gte=since - timedelta(hours=1),
            at__lte=until,
        )
        .annotate(deliberate=Case(When(deliberate, then=True), default=False))
        .order_by("at", "id")
        .values_list("id", "target", "source", "destination", "at", "decision_id", "deliberate")
    )
    return list(rows)


def bounces(*, since: datetime, until: datetime | None = None) -> list[dict[str, Any]]:
    """Oscillations: moves of a bundle back to a broker it left within the hour before, among
    the moves from ``since`` to ``until`` (newest first): ``{"id", "bundle", "broker", "at"
    (ISO, UTC), "leftAt", "decision"}``. Only the balancer's own moves are oscillations: an
    operator's move back (an undo, a drain) is deliberate (``_moves``), though a balancer's
    move that undoes an operator's is one."""
    until = until or datetime.now(UTC)
    left: dict[str, list[tuple[str, datetime]]] = {}
    out = []
    for pk, bundle, source, destination, at, decision, deliberate in _moves(since, until):
        earlier = [
            t
            for broker, t in left.get(bundle, ())
            if broker == destination and at - t <= timedelta(hours=1)
        ]
        if destination and earlier and at >= since and not deliberate:
            out.append(
                {
                    "id": pk,
                    "bundle": bundle,
                    "broker": destination,
                    "at": at.astimezone(UTC).isoformat(),
                    "leftAt": earlier[-1].astimezone(UTC).isoformat(),
                    "decision": decision,
                }
            )
        if source:
            left.setdefault(bundle, []).append((source, at))
    return out[::-1]


def flip_flops(*, since: datetime, until: datetime | None = None) -> list[dict[str, Any]]:
    """Brokers flip-flopping: within one hour a broker gave bundles away, then received, then
    gave again (or received, gave, received): the balancer changed its mind about it twice (its
    own moves only: ``_moves``' deliberate ones are left out). The
    moves of one decision are one step per broker, by their balance (a swap, one bundle each
    way, is no step). One entry per decision completing such a pattern from ``since`` to
    ``until`` (newest first): ``{"id" (its last move's audit id), "broker", "at" (ISO, UTC),
    "firstAt" (the pattern's first step), "pattern" (e.g. "gave 2, took 1, gave 1"),
    "decision"}``."""
    until = until or datetime.now(UTC)
    # The moves grouped by decision (a move without one is a group of its own), in order.
    groups: list[tuple[Any, int, datetime, dict[str, int]]] = []
    keys: dict[Any, int] = {}
    for pk, _, source, destination, at, decision, deliberate in _moves(since, until):
        if deliberate:  # an operator's or a drain's: not the balancer changing its mind
            continue
        key = decision if decision is not None else ("move", pk)
        if key not in keys:
            keys[key] = len(groups)
            groups.append((decision, pk, at, {}))
        index = keys[key]
        decision_id, _, first_at, net = groups[index]
        groups[index] = (decision_id, pk, first_at, net)
        if source:
            net[source] = net.get(source, 0) + 1
        if destination:
            net[destination] = net.get(destination, 0) - 1
    # broker -> its steps in the window: (at, "gave" | "took", how many)
    seen: dict[str, list[tuple[datetime, str, int]]] = {}
    out = []
    for decision, last_pk, at, net in groups:
        for broker, balance in sorted(net.items()):
            if balance == 0:
                continue
            step = (at, "gave" if balance > 0 else "took", abs(balance))
            recent = [m for m in seen.get(broker, ()) if at - m[0] <= timedelta(hours=1)]
            recent.append(step)
            seen[broker] = recent
            runs: list[list[Any]] = []  # [way, count, first at]
            for t, way, count in recent:
                if runs and runs[-1][0] == way:
                    runs[-1][1] += count
                else:
                    runs.append([way, count, t])
            # A flip-flop is completed by the step that starts a third run.
            if len(runs) >= 3 and runs[-1][2] == at and at >= since:
                last = runs[-3:]
                out.append(
                    {
                        "id": last_pk,
                        "broker": broker,
                        "at": at.astimezone(UTC).isoformat(),
                        "firstAt": last[0][2].astimezone(UTC).isoformat(),
                        "pattern": ", ".join(f"{w} {n}" for w, n, _ in last),
                        "decision": decision,
                    }
                )
    return out[::-1]


def cool_down_s(config: BalancerConfig, cycle: CycleConfig) -> float:
    """How long (seconds) the balancer leaves a moved bundle alone under ``config``
    (``balancer.safety.cool_down_s``)."""
    return safety_cool_down_s(cycle.pulsar, cycle.safety, fulcrum=config.shedder == FULCRUM)


def balance_status(*, now: datetime | None = None) -> dict[str, Any]:
    """The dashboard's balance panel.

    Returns:
        ``optimality``: the gauge (``services.optimality``: "maxOverMean",
        "optimumMaxOverMean", "ratio", "at"), None until the worker measured it;
        ``budget``: {"used" (moves in the last hour), "limit" (the least of
        FULCRUM_MAX_MOVES_PER_HOUR when set and, under FulcrumShedder, its
        fulcrumMaxMovesPerHour when set (> 0); None: no limit)};
        ``coolDown``: {"seconds" (the longest of Fulcrum's cool-down, Pulsar's grace period and,
        under FulcrumShedder, its own), "bundles" (how many wait), "next": the five soonest
        eligible [{"bundle", "eligibleAt" (ISO, UTC), "inS"}]};
        ``oscillations``: ``bounces`` of the last hour; ``flipFlops``: ``flip_flops`` of the
        last hour;
        ``quiet``: when the latest shedding decision moved nothing, its strategy, reason and
        the brokers it left alone with why ([{"broker", "reason", "detail"}]), else None.
    """
    now = now or datetime.now(UTC)
    config = balancer_config_get()
    cycle = cycle_config_get(config)
    fulcrum = config.shedder == FULCRUM
    used = AuditEvent.objects.filter(
        action=AuditEvent.Action.UNLOAD, at__gte=now - timedelta(hours=1)
    ).count()
    limits = [settings.FULCRUM_MAX_MOVES_PER_HOUR] if settings.FULCRUM_MAX_MOVES_PER_HOUR else []
    if fulcrum and cycle.pulsar.fulcrum_max_moves_per_hour > 0:
        limits.append(cycle.pulsar.fulcrum_max_moves_per_hour)
    cool = cool_down_s(config, cycle)
    waiting: list[tuple[datetime, str, int, int]] = sorted(
        (at + timedelta(seconds=cool), name, lower, upper)
        for name, lower, upper, at in Bundle.objects.filter(
            last_unloaded_at__gt=now - timedelta(seconds=cool)
        ).values_list("namespace__name", "lower", "upper", "last_unloaded_at")
        if at is not None
    )
    latest = Decision.objects.filter(kind=Decision.Kind.SHED).order_by("-at").first()
    quiet = None
    if latest is not None and not any(
        a.get("kind") == "unload" and a.get("outcome") == "planned"
        for a in (latest.details or {}).get("actions", [])
    ):
        skipped = ((latest.details or {}).get("shedding") or {}).get("skipped", [])
        quiet = {
            "strategy": latest.strategy,
            "reason": latest.reason,
            "at": latest.at.astimezone(UTC).isoformat(),
            "skipped": [
                {
                    "broker": s.get("broker"),
                    "reason": s.get("reason"),
                    "detail": s.get("detail", ""),
                }
                for s in skipped
                if isinstance(s, dict) and s.get("broker")
            ][:5],
        }
    return {
        "optimality": loadstore.gauge_get("optimality"),
        "budget": {"used": used, "limit": min(limits) if limits else None},
        "coolDown": {
            "seconds": cool,
            "bundles": len(waiting),
            "next": [
                {
                    "bundle": f"{name}/0x{lower:08x}_0x{upper:08x}",
                    "eligibleAt": at.astimezone(UTC).isoformat(),
                    "inS": max(0.0, (at - now).total_seconds()),
                }
                for at, name, lower, upper in waiting[:5]
            ],
        },
        "oscillations": bounces(since=now - timedelta(hours=1), until=now),
        "flipFlops": flip_flops(since=now - timedelta(hours=1), until=now),
        "quiet": quiet,
    }


def cv_series(*, limit: int = 360) -> dict[str, list[Any]]:
    """The last ``limit`` CV samples for the dashboard's plot: ``at`` (ISO 8601, UTC) and ``cv``
    (population standard deviation / mean of broker usage). Where two samples are more than 3
    loop intervals apart (the console was stopped) a null goes between them, so the line breaks
    there instead of drawing a trend nobody measured."""
    samples = list(ClusterSample.objects.order_by("-at")[:limit])[::-1]
    gap = timedelta(seconds=3 * max(balancer_config_get().loop_interval_s, 1.0))
    at: list[str] = []
    cv: list[float | None] = []
    for before, sample in zip([None, *samples], samples, strict=False):
        if before is not None and sample.at - before.at > gap:
            at.append((before.at + (sample.at - before.at) / 2).isoformat())
            cv.append(None)
        at.append(sample.at.isoformat())
        cv.append(sample.cv)
    return {"at": at, "cv": cv}
