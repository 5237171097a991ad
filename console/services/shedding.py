"""The shedding tick: a lease, the cadence, one snapshot, the cycle's plan, applied and published.

The tick is ``plan_cycle`` (balancer.cycle) on one snapshot of the store; this module only
decides *when* it runs and hands the plan to ``plan_apply``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from balancer.config import PulsarConfig
from balancer.cycle import CyclePlan, LoadStats, plan_cycle
from balancer.errors import BalancerError
from balancer.load import ResourceWeights
from balancer.shedding.fulcrum import reports_remembered
from balancer.simulator.replay import owner_changes
from balancer.snapshot import ClusterSnapshot
from balancer.wire import snapshot_document
from console import leases, loadstore, metrics, realtime, selectors
from console.leases import lease_claim, lease_release, lease_renew
from console.models import AuditEvent, ClusterSample, Decision
from console.services.apply import plan_apply

log = logging.getLogger(__name__)
# The tick's lease (s): planning renews it before applying; a killed worker's runs out this soon.
TICK_LEASE_S = 6.0


def _fill_load_after(
    snapshot: ClusterSnapshot, plan: CyclePlan, weights: ResourceWeights, now: datetime
) -> None:
    """The "after" figures of earlier actions, measured at this tick: one UPDATE per set of
    brokers the actions' "before" figures name (an UPDATE row by row of thousands of observed
    moves took minutes on PostgreSQL)."""
    usage = snapshot.weighted_usage(weights)
    measured = plan.before.measured_cv
    cv = None if measured is None else round(measured, 4)
    groups: dict[frozenset[str], list[int]] = {}
    for pk, before in AuditEvent.objects.filter(load_after__isnull=True, at__lt=now).values_list(
        "pk", "load_before"
    ):
        named = frozenset(b for b in (before or {}) if b in usage)
        groups.setdefault(named, []).append(pk)
    for named, pks in groups.items():
        figures: dict[str, float | None] = {b: round(usage[b], 4) for b in sorted(named)}
        figures["cv"] = cv
        for at in range(0, len(pks), 5000):
            AuditEvent.objects.filter(pk__in=pks[at : at + 5000]).update(load_after=figures)


def replay_record(snapshot: ClusterSnapshot, now: datetime) -> bool:
    """Record the tick's snapshot for the replays (the config page's, and the Pulsar page's
    evidence before control), at most every ``FULCRUM_REPLAY_SAMPLE_S`` seconds and only up to
    ``FULCRUM_REPLAY_MAX_BUNDLES`` bundles: in the hour's series, kept
    ``FULCRUM_REPLAY_WINDOW_S``; in the day's, one every ``FULCRUM_REPLAY_DAY_SAMPLE_S``, kept
    ``FULCRUM_EVIDENCE_DAY_S``; and how many bundles it shows on another broker than the last
    recorded one did (``owner_changes``: Pulsar's moves, in observe-only), kept a day. True
    when recorded."""
    if len(snapshot.bundles) > settings.FULCRUM_REPLAY_MAX_BUNDLES:
        return False
    at = now.timestamp()
    last = loadstore.replay_sample_last_at()
    if last is not None and at - last < settings.FULCRUM_REPLAY_SAMPLE_S:
        return False
    # The replay applies no split: the bundles' topics are not needed.
    document = snapshot_document(snapshot, topics=False)
    loadstore.replay_sample_add(at, document, settings.FULCRUM_REPLAY_WINDOW_S)
    day = settings.FULCRUM_EVIDENCE_DAY_S
    last_day = loadstore.replay_sample_last_at("day")
    if last_day is None or at - last_day >= settings.FULCRUM_REPLAY_DAY_SAMPLE_S:
        loadstore.replay_sample_add(at, document, day, "day")
    known = loadstore.replay_owners_get()
    moves = owner_changes(known, snapshot)
    loadstore.replay_owners_put(known)
    loadstore.replay_moves_add(at, moves, day)
    return True


def _metrics_record(
    snapshot: ClusterSnapshot,
    plan: CyclePlan,
    weights: ResourceWeights,
    now: datetime,
    duration_s: float,
) -> None:
    """The tick's Prometheus figures (``console.metrics``): never stops the loop."""
    try:
        usage = snapshot.weighted_usage(weights)
        brokers = {
            name: {
                "cpu": b.cpu.percent() / 100,
                "memory": b.memory.percent() / 100,
                "direct_memory": b.direct_memory.percent() / 100,
                "bandwidth_in": b.bandwidth_in.percent() / 100,
                "bandwidth_out": b.bandwidth_out.percent() / 100,
                "weighted": usage.get(name, 0.0),
            }
            for name, b in snapshot.brokers.items()
        }
        ages = {
            name: max(0.0, now.timestamp() - b.reported_at)
            for name, b in snapshot.brokers.items()
            if b.reported_at
        }
        served = [plan.before.brokers[n] for n in plan.before.brokers]
        mean = sum(served) / len(served) if served else 0.0
        metrics.cycle_record(
            duration_s,
            plan.before.cv,
            max(served) / mean if mean > 0 else 0.0,
            brokers,
            ages,
            (
                (
                    str(a.kind),
                    "vetoed" if a.veto is not None and not a.forced else "planned",
                    str(a.reason),
                )
                for a in plan.actions
            ),
        )
    except Exception:
        log.exception("could not record the tick's metrics")


def shedding_tick_run(
    *, now: datetime | None = None, lease_ttl_s: float | None = None
) -> Decision | None:
    """One shedding cycle, cluster-wide: claim the lease, skip unless the configured loop
    interval has passed since the last tick, build one snapshot, plan the cycle, renew the lease,
    and apply the plan with the CV sample, the strategies' state and the "after" figures of
    earlier actions in one transaction.

    The lease lasts ``lease_ttl_s`` (default ``TICK_LEASE_S``, 6 s: longer than planning takes,
    shorter than a loop interval) and is renewed before applying, so a worker killed mid-tick
    holds the next tick back by at most that: the next due tick comes one interval later.

    Returns:
        The decision; None when another tick holds the lease, the tick is not due, or the lease
        was lost before applying.
    """
    now = now or timezone.now()
    config = selectors.balancer_config_get()
    ttl = lease_ttl_s if lease_ttl_s is not None else TICK_LEASE_S
    # Who holds the lease, for operators reading the Lease rows: host, process and a unique token.
    token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    if not lease_claim(leases.TICK, token, now, ttl):
        log.info("another shedding tick holds the lease; skipped")
        return None
    try:
        last = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
        if last is not None and now - last < timedelta(seconds=config.loop_interval_s * 0.9):
            return None  # not due yet: the configured loop interval is longer than beat's
        snapshot = selectors.cluster_snapshot_get(now=now)
        snapshot_s = time.monotonic() - started
        try:
            replay_record(snapshot, now)
        except Exception:  # recording for the replay must never stop the loop
            log.exception("could not record the tick's snapshot for the config page's replay")
        try:
            cycle = selectors.cycle_config_get(config)
            plan = plan_cycle(snapshot, cycle, config.state, now.timestamp())
        except BalancerError as exc:
            # A configuration the cycle refuses (stored before a validation existed, or written
            # around the admin) must not stop the loop: the tick says why and moves nothing.
            log.error("shedding tick refused its configuration: %s", exc.message)
            usage = snapshot.weighted_usage(PulsarConfig().weights)
            spread = LoadStats.of({n: usage[n] for n, b in snapshot.brokers.items() if b.is_active})
            # The sample keeps the cadence (one tick per interval) and the CV chart going.
            ClusterSample.objects.create(
                at=now,
                mean_usage_fraction=spread.avg_usage,
                std_usage_fraction=spread.std,
                cv=spread.measured_cv,
            )
            return Decision.objects.create(
                at=now,
                kind=Decision.Kind.SHED,
                strategy=config.shedder[:100],
                reason="BadConfig",
                summary=f"no action: the balancer configuration is refused — {exc.message}",
                details={"error": exc.as_dict()},
            )
        # Renewed at the time the planning took (the clock moved on since ``now``).
        planned_s = time.monotonic() - started
        renewed_at = now + timedelta(seconds=planned_s)
        if not lease_renew(leases.TICK, token, renewed_at, ttl):
            log.warning("the shedding lease expired before the plan was applied; dropped")
            return None
        with transaction.atomic():
            _fill_load_after(snapshot, plan, cycle.pulsar.weights, now)
            ClusterSample.objects.create(
                at=now,
                mean_usage_fraction=plan.before.avg_usage,
                std_usage_fraction=plan.before.std,
                cv=plan.before.measured_cv,
            )
            decision = plan_apply(
                plan, now=now, actor=None, kind=Decision.Kind.SHED, refuse_stale=False
            )
            _metrics_record(snapshot, plan, cycle.pulsar.weights, now, time.monotonic() - started)
            if "notSent" not in decision.details:
                config.state = plan.state
            else:
                # A plan recorded but not sent to Pulsar leaves the strategies' memory (hit
                # counts, budgets) as it was: nothing happened. What the brokers reported did.
                config.state = reports_remembered(config.state or {}, plan.state)
            config.save(update_fields=["state"])
            realtime.publish(
                realtime.CV_SAMPLED,
                {
                    "at": now.isoformat(),
                    "cv": plan.before.measured_cv,
                    "mean": plan.before.avg_usage,
                },
            )
        log.info(
            "shedding tick: snapshot %.3f s, plan %.3f s, apply %.3f s (%d brokers, %d bundles, "
            "%d actions)",
            snapshot_s,
            planned_s - snapshot_s,
            time.monotonic() - started - planned_s,
            len(snapshot.brokers),
            len(snapshot.bundles),
            len(plan.actions),
        )
        return decision
    finally:
        lease_release(leases.TICK, token, now)
