"""The balancer config: every change is checked against the registry, saved as a new version
(who, when, why, what changed) and audited. What-if plans a cycle with a draft, writing nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from balancer.cycle import CyclePlan, plan_cycle
from balancer.errors import BalancerError
from balancer.registry import console_strategy, parameter_errors
from balancer.simulator.replay import ReplayPoint, recorded, replay, summary
from balancer.snapshot import ClusterSnapshot
from balancer.wire import parse_snapshot
from console import loadstore, selectors
from console.access import actor_check
from console.errors import ConsoleError
from console.models import AuditEvent, BalancerConfig, Bundle, ConfigVersion, PulsarConnection
from console.services.apply import operator_reason

# The fields an operator may change, in the order the audit names them.
EDITABLE = (
    "shedder",
    "placement",
    "split_algorithm",
    "parameters",
    "is_shedding_enabled",
    "is_auto_split_enabled",
    "loop_interval_s",
)
_KINDS = {"shedder": "shedder", "placement": "placement", "split_algorithm": "split"}


def config_values(config: BalancerConfig) -> dict[str, Any]:
    """The editable values of ``config``, by field."""
    return {name: getattr(config, name) for name in EDITABLE}


def config_changes_check(changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` (a subset of ``EDITABLE``) checked and made canonical: strategy names as the
    registry spells them and runnable by the console, parameters known and in range, the loop
    interval a positive number of seconds, the flags booleans.

    Raises:
        ConsoleError: 400 naming the first field at fault (``parameters.KEY`` for a parameter).
    """
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ConsoleError(f"{unknown[0]} is not a setting of the balancer", field=unknown[0])
    out = dict(changes)
    for field, kind in _KINDS.items():
        if field in out:
            if not isinstance(out[field], str):
                raise ConsoleError(f"{field} is a strategy's name", field=field)
            try:
                out[field] = console_strategy(kind, out[field], field)
            except BalancerError as exc:
                raise ConsoleError(exc.message, field=field) from None
    if "parameters" in out:
        parameters = out["parameters"]
        if not isinstance(parameters, dict):
            raise ConsoleError(
                "parameters are an object of Pulsar keys and values", field="parameters"
            )
        errors = parameter_errors(parameters)
        if errors:
            key = sorted(errors)[0]
            said = errors[key] if errors[key].startswith(key) else f"{key}: {errors[key]}"
            raise ConsoleError(said, field=f"parameters.{key}")
    for flag in ("is_shedding_enabled", "is_auto_split_enabled"):
        if flag in out and not isinstance(out[flag], bool):
            raise ConsoleError(f"{flag} is true or false", field=flag)
    if "loop_interval_s" in out:
        interval = out["loop_interval_s"]
        if (
            isinstance(interval, bool)
            or not isinstance(interval, int | float)
            or not 0 < interval <= 3600
        ):
            raise ConsoleError(
                "the loop interval is more than 0 and at most 3,600 seconds",
                field="loop_interval_s",
            )
        out["loop_interval_s"] = float(interval)
    return out


def balancer_config_update(
    config: BalancerConfig, changes: dict[str, Any], *, actor: User | None, reason: str = ""
) -> BalancerConfig:
    """Write ``changes`` (already checked by ``config_changes_check``) in one transaction: the
    config, a new ``ConfigVersion`` (the first edit also records the values as found) and an
    audit row naming each change, before and after. Unchanged values write nothing."""
    changed = {
        name: (getattr(config, name), value)
        for name, value in changes.items()
        if name in EDITABLE and getattr(config, name) != value
    }
    if not changed:
        return config
    now = timezone.now()
    with transaction.atomic():
        if not ConfigVersion.objects.exists():
            ConfigVersion.objects.create(
                at=now, reason="as found before the first edit", values=config_values(config)
            )
        for name, (_, value) in changed.items():
            setattr(config, name, value)
        config.save(update_fields=list(changed))
        ConfigVersion.objects.create(
            at=now,
            actor=actor,
            reason=reason,
            values=config_values(config),
            changes={name: [old, new] for name, (old, new) in changed.items()},
        )
        said = "; ".join(f"{name}: {old!r} → {new!r}" for name, (old, new) in changed.items())
        AuditEvent.objects.create(
            at=now,
            actor=actor,
            action=AuditEvent.Action.CONFIG,
            target="balancer config",
            reason=operator_reason(reason, said),
        )
    return config


def config_save(
    changes: dict[str, Any], *, actor: User | None, reason: str = ""
) -> ConfigVersion | None:
    """Check and save an operator's edit as a new version; None when nothing changed.

    Raises:
        ConsoleError: 400 naming the field at fault; nothing is written then.
    """
    actor_check(actor)
    checked = config_changes_check(changes)
    config = selectors.balancer_config_get()
    before = ConfigVersion.objects.order_by("-id").values_list("id", flat=True).first()
    balancer_config_update(config, checked, actor=actor, reason=reason)
    latest = ConfigVersion.objects.order_by("-id").first()
    return latest if latest is not None and latest.pk != before else None


def config_rollback(
    version_id: int, *, actor: User | None, reason: str = ""
) -> ConfigVersion | None:
    """Save the values of an earlier version as a new version (history is never rewritten).

    Raises:
        ConsoleError: 404 no such version; 400 when its values no longer pass the checks (a
            strategy since removed).
    """
    actor_check(actor)
    version = ConfigVersion.objects.filter(pk=version_id).first()
    if version is None:
        raise ConsoleError(f"no config version {version_id}", status=404, field="version")
    said = f"rollback to version {version.pk}" + (f": {reason}" if reason else "")
    return config_save(dict(version.values), actor=actor, reason=said)


def shedding_pause_set(paused: bool, *, actor: User | None) -> BalancerConfig:
    """Pause (or resume) shedding: the loop keeps ticking — lost brokers, drains, placements —
    but unloads nothing for load until resumed. Saved as a version and audited."""
    config_save(
        {"is_shedding_enabled": not paused}, actor=actor, reason="paused" if paused else "resumed"
    )
    return selectors.balancer_config_get()


def _plan_summary(plan: CyclePlan) -> dict[str, Any]:
    return {
        "reason": plan.reason,
        "strategy": plan.strategy,
        "summary": plan.summary(),
        "actions": [a.as_dict() for a in plan.actions],
        "before": plan.before.as_dict(),
        "after": plan.after.as_dict(),
    }


def _draft(config: BalancerConfig, checked: dict[str, Any]) -> BalancerConfig:
    """An unsaved config: ``config`` with the checked ``changes`` applied."""
    return BalancerConfig(
        **{
            **{f.name: getattr(config, f.name) for f in BalancerConfig._meta.concrete_fields},
            **checked,
        }
    )


def _points(points: tuple[ReplayPoint, ...] | list[ReplayPoint]) -> dict[str, list[Any]]:
    """Points as the chart's columns: ``at`` (ISO 8601, UTC), ``cv``, ``maxOverMean``; both None
    at a point without load (no broker serving or reporting any: its 0 would read as balanced,
    and ``replay.summary`` leaves it out too)."""
    return {
        "at": [datetime.fromtimestamp(p.at, UTC).isoformat() for p in points],
        "cv": [p.cv if p.max_over_mean > 0 else None for p in points],
        "maxOverMean": [p.max_over_mean if p.max_over_mean > 0 else None for p in points],
    }


def _samples(now: datetime, window_s: float, series: str) -> list[ClusterSnapshot]:
    """The snapshots the ticks recorded in ``series`` (``loadstore.REPLAY_SERIES``) over the
    last ``window_s`` seconds, oldest first (one that no longer parses is left out)."""
    samples = []
    for document in loadstore.replay_samples(now.timestamp() - window_s, series):
        try:
            samples.append(parse_snapshot(document))
        except BalancerError:
            continue  # a sample from before a change of its shape: left out
    return samples


def _enough(samples: list[ClusterSnapshot], every_s: float) -> list[ClusterSnapshot]:
    """``samples``, when there are two at least.

    Raises:
        ConsoleError: 409 saying how often the tick records one, or that it records none for a
            cluster over ``FULCRUM_REPLAY_MAX_BUNDLES`` bundles.
    """
    if len(samples) < 2:
        bundles, limit = Bundle.objects.count(), settings.FULCRUM_REPLAY_MAX_BUNDLES
        if bundles > limit:
            raise ConsoleError(
                f"the cluster has {bundles:,} bundles, over FULCRUM_REPLAY_MAX_BUNDLES "
                f"({limit:,}): the shedding tick records no load for replays at this size (a "
                "replay runs within one request, about 1 s per 100 bundles over an hour); "
                f"{len(samples)} snapshot(s) recorded",
                status=409,
            )
        raise ConsoleError(
            f"not enough load recorded to replay yet: {len(samples)} snapshot(s); the shedding "
            f"tick records one every {every_s:g} s",
            status=409,
        )
    return samples


def _recorded_samples(now: datetime) -> list[ClusterSnapshot]:
    """The hour's snapshots: over the last ``FULCRUM_REPLAY_WINDOW_S``, oldest first.

    Raises:
        ConsoleError: 409 when fewer than two are recorded yet.
    """
    samples = _samples(now, settings.FULCRUM_REPLAY_WINDOW_S, "hour")
    return _enough(samples, settings.FULCRUM_REPLAY_SAMPLE_S)


def _day_samples(now: datetime) -> list[ClusterSnapshot]:
    """The day's snapshots (one every ``FULCRUM_REPLAY_DAY_SAMPLE_S``) over the last
    ``FULCRUM_EVIDENCE_DAY_S``, then the hour's newest when it is newer: the day ends where
    the hour does.

    Raises:
        ConsoleError: 409 when fewer than two are recorded yet.
    """
    day = _samples(now, settings.FULCRUM_EVIDENCE_DAY_S, "day")
    last = loadstore.replay_sample_last_at()  # the hour's newest alone, not the whole hour
    if last is not None and (not day or last > day[-1].now):
        day += _samples(now, now.timestamp() - last, "hour")[-1:]
    return _enough(day, settings.FULCRUM_REPLAY_DAY_SAMPLE_S)


# The windows of the evidence before control, each a series of recorded snapshots.
EVIDENCE_WINDOWS = ("hour", "day")


def control_evidence(*, window: str = "hour", now: datetime | None = None) -> dict[str, Any]:
    """Evidence before control (issue 24, item 6): over the load the ticks recorded in the last
    hour (``window`` "hour": a snapshot every ``FULCRUM_REPLAY_SAMPLE_S`` over
    ``FULCRUM_REPLAY_WINDOW_S``) or day ("day": one every ``FULCRUM_REPLAY_DAY_SAMPLE_S`` over
    ``FULCRUM_EVIDENCE_DAY_S``), the balance the cluster had — in observe-only, what Pulsar's
    own shedder made of it — next to what Fulcrum's current config would have given from the
    same loads (``config_replay``'s replay, from the recorded ownership; over the day, a cycle
    per recorded snapshot at the least), with both move counts: the bundles the recorder saw
    on another broker (every ``FULCRUM_REPLAY_SAMPLE_S``, whichever window) and the replay's.
    Writes nothing.

    Returns:
        ``{"window", "samples", "from", "to" (ISO 8601 UTC), "hours", "attached" (a Pulsar
        cluster), "inControl" (Fulcrum holds its control), "observed", "fulcrum"}``:
        ``observed`` the recorded CV and max/mean (summary and points) with ``moves`` and
        ``movesPerHour``; ``fulcrum`` the replay's summary, moves and points
        (``ReplayResult.as_dict``), with ``strategy``.

    Raises:
        ConsoleError: 400 (field ``window``) for a window other than "hour" or "day"; 409 when
            fewer than two snapshots are recorded in it yet.
    """
    if window not in EVIDENCE_WINDOWS:
        raise ConsoleError(
            f"window must be one of {', '.join(EVIDENCE_WINDOWS)}, not {str(window)[:40]!r}",
            field="window",
        )
    now = now or timezone.now()
    config = selectors.balancer_config_get()
    samples = _day_samples(now) if window == "day" else _recorded_samples(now)
    weights = selectors.cycle_config_get(config).pulsar.weights
    hours = max(samples[-1].now - samples[0].now, 1.0) / 3600
    points = recorded(samples, weights)
    moves = loadstore.replay_moves_between(samples[0].now, samples[-1].now)
    attached = PulsarConnection.objects.filter(is_attached=True).only("mode").first()
    every = settings.FULCRUM_REPLAY_DAY_SAMPLE_S if window == "day" else None
    fulcrum = _replayed(samples, config, weights, every)
    return {
        "window": window,
        "samples": len(samples),
        "from": datetime.fromtimestamp(samples[0].now, UTC).isoformat(),
        "to": datetime.fromtimestamp(samples[-1].now, UTC).isoformat(),
        "hours": hours,
        "attached": attached is not None,
        "inControl": attached is not None and attached.mode == PulsarConnection.Mode.CONTROL,
        "observed": {
            **summary(points),
            "moves": moves,
            "movesPerHour": moves / hours,
            **_points(points),
        },
        "fulcrum": {**fulcrum, "strategy": f"{config.shedder} + {config.placement}"},
    }


def config_replay(changes: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    """Replay the recorded load of the last ``FULCRUM_REPLAY_WINDOW_S`` seconds through the
    offline simulator (``balancer.simulator.replay``) with the current config and with the
    draft, each from the same recorded ownership and fresh strategy state, at its own loop
    interval; writes nothing.

    Returns:
        ``{"samples", "from", "to" (ISO 8601 UTC), "recorded", "current", "draft"}``;
        ``recorded`` is the CV and max/mean the cluster really had (its summary and points);
        each config has its summary (``cvMedian``, ``maxOverMeanMedian``, ``maxOverMeanP95``),
        ``moves``, ``movesPerHour``, ``placements``, ``splitsPlanned``, ``vetoed``,
        ``oscillations``, ``cycles``, ``intervalS`` and its points (chart columns).

    Raises:
        ConsoleError: 400 naming the draft's field at fault; 409 when fewer than two snapshots
            are recorded yet (the tick records one every ``FULCRUM_REPLAY_SAMPLE_S`` s).
    """
    checked = config_changes_check(changes)
    now = now or timezone.now()
    config = selectors.balancer_config_get()
    samples = _recorded_samples(now)
    out: dict[str, Any] = {
        "samples": len(samples),
        "from": datetime.fromtimestamp(samples[0].now, UTC).isoformat(),
        "to": datetime.fromtimestamp(samples[-1].now, UTC).isoformat(),
    }
    # Every series by the current config's resource weights: measured alike.
    weights = selectors.cycle_config_get(config).pulsar.weights
    points = recorded(samples, weights)
    out["recorded"] = {**summary(points), **_points(points)}
    for name, row in (("current", config), ("draft", _draft(config, checked))):
        out[name] = _replayed(samples, row, weights)
    return out


def _replayed(
    samples: list[ClusterSnapshot],
    row: BalancerConfig,
    weights: Any,
    least_interval_s: float | None = None,
) -> dict[str, Any]:
    """``samples`` replayed under config ``row`` at its loop interval (or every
    ``least_interval_s`` seconds when that is longer: a day of samples 5 minutes apart is
    replayed a cycle per sample): the replay's summary (``ReplayResult.as_dict``) with its
    points as the chart's columns.

    Raises:
        ConsoleError: 400 naming the field when the config cannot run.
    """
    cycle = selectors.cycle_config_get(row)
    try:
        interval = max(row.loop_interval_s, least_interval_s or 0.0)
        result = replay(samples, cycle, {}, interval, weights=weights)
    except BalancerError as exc:
        raise ConsoleError(exc.message, field=exc.field or "parameters") from None
    doc = result.as_dict()
    del doc["points"]
    return {**doc, **_points(result.points)}


def config_what_if(changes: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    """The cycle over the current snapshot with the current config and with the draft
    (``changes`` applied), writing nothing: ``{"current", "draft"}``, each the plan's reason,
    strategy, one-line summary, actions, and statistics before and predicted after.

    Raises:
        ConsoleError: 400 naming the draft's field at fault.
    """
    checked = config_changes_check(changes)
    now = now or timezone.now()
    config = selectors.balancer_config_get()
    draft = _draft(config, checked)
    snapshot = selectors.cluster_snapshot_get(now=now)
    out = {}
    for name, row in (("current", config), ("draft", draft)):
        try:
            plan = plan_cycle(
                snapshot, selectors.cycle_config_get(row), config.state, now.timestamp()
            )
        except BalancerError as exc:
            raise ConsoleError(exc.message, field=exc.field or "parameters") from None
        out[name] = _plan_summary(plan)
    return out
