"""The Pulsar page's reads: the attached connection, its status and trouble, a conflict with
Pulsar's own balancing, how each broker was read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from django.conf import settings

from console.leases import DEADMAN, lease_held
from console.models import BalancerConfig, ClusterSample, PulsarConnection, PulsarMove

# An unloaded bundle no client has looked up this long after: recorded as unowned.
UNOWNED_AFTER_S: Final = 300.0
# An act call's own timeout (PulsarAdmin's act_timeout_s default) and a margin: a move still
# "sending" after this was left by a worker that died mid-call.
ACT_TIMEOUT_S: Final = 90.0
# The loop interval when no balancer configuration is stored yet (BalancerConfig's default), s.
DEFAULT_LOOP_S: Final = 10.0


def move_expected_s(move: PulsarMove, observe_s: float) -> float:
    """How long a move in flight may wait in its state before it is late (s), by the rules
    that move it on: a queued move is sent at the next pass; a sending one within its call's
    timeout; a verifying one is settled by the first observation after ``UNOWNED_AFTER_S``
    at the latest (an unloaded bundle no client looked up). Each plus two passes."""
    base = {
        PulsarMove.State.QUEUED: 0.0,
        PulsarMove.State.SENDING: ACT_TIMEOUT_S,
        PulsarMove.State.VERIFYING: UNOWNED_AFTER_S,
    }.get(PulsarMove.State(move.state), 0.0)
    return base + 2 * observe_s


def moves_late(connection: PulsarConnection, *, now: datetime, observe_s: float) -> list[str]:
    """The moves in flight that waited longer than ``move_expected_s``, each in words with its
    bundle, brokers, state and times (s), oldest first."""
    late = []
    for move in connection.moves.filter(state__in=PulsarMove.IN_FLIGHT).order_by("id"):
        since = move.sent_at if move.state != PulsarMove.State.QUEUED else move.created_at
        waited = (now - (since or move.created_at)).total_seconds()
        expected = move_expected_s(move, observe_s)
        if waited > expected:
            to = move.destination or ("same broker" if move.kind == "split" else "Pulsar's choice")
            where = f"{move.source} -> {to}"
            late.append(
                f"move #{move.pk} ({move.kind} of {move.bundle}, {where}) has been {move.state} "
                f"for {waited:.0f} s, expected within {expected:.0f} s"
                + (f": {move.outcome_reason.rstrip('; ')}" if move.outcome_reason else "")
            )
    return late


def moves_in_flight(connection: PulsarConnection) -> int:
    """Moves queued, being sent or awaiting verification."""
    return connection.moves.filter(state__in=PulsarMove.IN_FLIGHT).count()


def deadman_limit_s() -> float:
    """The loop's silence after which control goes back to Pulsar (s): ``FULCRUM_DEADMAN_S``,
    else 10 loop intervals — the configured one, or beat's wake-up
    (``FULCRUM_TICK_INTERVAL_S``) when longer, since the tick cannot run more often — and never
    under 3 of beat's intervals (a limit the loop cannot meet would hand control back at
    once)."""
    floor = 3.0 * settings.FULCRUM_TICK_INTERVAL_S
    if settings.FULCRUM_DEADMAN_S is not None:
        return max(float(settings.FULCRUM_DEADMAN_S), floor)
    interval = BalancerConfig.objects.values_list("loop_interval_s", flat=True).first()
    return max(
        10.0 * max(float(interval or DEFAULT_LOOP_S), settings.FULCRUM_TICK_INTERVAL_S), floor
    )


def deadman_alive(now: datetime) -> bool:
    """A dead-man holds its lease now (it checked within its lease's time)."""
    return lease_held(DEADMAN, now)


def pulsar_connection_attached() -> PulsarConnection | None:
    """The attached Pulsar connection (at most one: a database constraint), or None."""
    return PulsarConnection.objects.filter(is_attached=True).first()


def _pulsar_auth(connection: PulsarConnection) -> str:
    """How the connection authenticates, in words (never the secret)."""
    if connection.oauth2_issuer_url or connection.oauth2_key_file:
        said = f"OAuth2 client credentials from {connection.oauth2_issuer_url}"
        if connection.oauth2_audience:
            said += f" (audience {connection.oauth2_audience})"
    elif connection.token_file:
        said = f"token file {connection.token_file} (read again when it changes)"
    elif connection.token_env:
        said = f"token from the environment ({connection.token_env})"
    elif connection.token_encrypted:
        said = "token stored, encrypted"
    else:
        said = "no token"
    if connection.tls_cert_file:
        said += f"; TLS client certificate {connection.tls_cert_file}"
    return said


def pulsar_status(moves: int = 50) -> dict[str, Any]:
    """The Pulsar connections and, for the attached one, its moves in flight and the latest ended.

    Returns:
        ``{"connections": [{"id", "name", "adminUrl", "attached", "mode", "executorStopped",
        "maxMovesInFlight", "token": "environment <VAR>"|"stored, encrypted"|"none", "auth"
        (how it authenticates, in words), "clusterName" (configured, "" from the brokers),
        "tlsCaFile", "observedAt", "observation", "previousConfig", "inFlight", "controlledAt",
        "handedBack" ({"at", "by", "why"} or {})}], "deadman": {"limitS", "lastTickAt",
        "alive"} (the dead-man's limit, the shedding loop's last completed tick, whether a
        dead-man holds its lease), "observeS" (the observation period, s), "moves":
        [PulsarMove.summary(), ...] newest first}``.
    """
    out = []
    attached = None
    for c in PulsarConnection.objects.all():
        token = (
            f"environment {c.token_env}"
            if c.token_env
            else ("stored, encrypted" if c.token_encrypted else "none")
        )
        observation = {k: v for k, v in c.observation.items() if k != "brokerUrls"}
        in_flight = c.moves.filter(state__in=PulsarMove.IN_FLIGHT).count()
        out.append(
            {
                "id": c.pk,
                "name": c.name,
                "adminUrl": c.admin_url,
                "attached": c.is_attached,
                "mode": c.mode,
                "executorStopped": c.is_executor_stopped,
                "maxMovesInFlight": c.max_moves_in_flight,
                "token": token,
                "auth": _pulsar_auth(c),
                "clusterName": c.cluster_name,
                "tlsCaFile": c.tls_ca_file,
                "observedAt": c.observed_at.isoformat() if c.observed_at else None,
                "observation": observation,
                "previousConfig": c.previous_config,
                "inFlight": in_flight,
                "controlledAt": c.controlled_at.isoformat() if c.controlled_at else None,
                "handedBack": c.handed_back,
                "conflict": c.conflict,
                "trouble": pulsar_trouble(c) if c.is_attached else [],
            }
        )
        if c.is_attached:
            attached = c
    rows: list[dict[str, Any]] = []
    if attached is not None:
        flying = list(attached.moves.filter(state__in=PulsarMove.IN_FLIGHT).order_by("-id"))
        ended = list(attached.moves.filter(state=PulsarMove.State.DONE).order_by("-id")[:moves])
        rows = [m.summary() for m in flying + ended]
    last_tick = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    return {
        "connections": out,
        "deadman": {
            "limitS": deadman_limit_s(),
            "lastTickAt": last_tick.isoformat() if last_tick else None,
            "alive": deadman_alive(datetime.now(UTC)),
        },
        "observeS": settings.FULCRUM_PULSAR_OBSERVE_S,
        "moves": rows,
    }


def pulsar_trouble(
    connection: PulsarConnection, now: datetime | None = None
) -> list[dict[str, str]]:
    """What is wrong with observing and acting on the attached cluster, for the Pulsar page:
    ``[{"kind", "text"}]`` with kind "no-observation" (none completed for two periods), "slow"
    (the last pass took longer than its period), "failing-calls" (admin calls failed in the
    last pass), "late-moves" (moves waiting longer than ``move_expected_s``); each
    text names the brokers, calls and seconds."""
    now = now or datetime.now(UTC)
    period = settings.FULCRUM_PULSAR_OBSERVE_S
    o = connection.observation or {}
    trouble: list[dict[str, str]] = []
    calls = o.get("calls") or {}
    rows = [r for r in calls.get("byCall") or [] if isinstance(r, dict)]
    slowest = sorted(rows, key=lambda r: -float(r.get("slowestS", 0)))[:3]
    said_slowest = ", ".join(
        f"{r.get('call')} on {r.get('broker')} {float(r.get('slowestS', 0)):.1f} s" for r in slowest
    )
    running = connection.pass_started_at and (
        connection.observed_at is None or connection.pass_started_at > connection.observed_at
    )
    age = (now - connection.observed_at).total_seconds() if connection.observed_at else None
    if (age is None and running) or (age is not None and age > 2 * period):
        text = (
            f"No observation has completed for {age:.0f} s"
            if age is not None
            else "No observation has completed yet"
        ) + f" (one is due every {period:.0f} s)"
        if running and connection.pass_started_at:
            under_way = (now - connection.pass_started_at).total_seconds()
            text += f"; the pass under way started {under_way:.0f} s ago"
        else:
            text += "; no pass is under way: is a Celery worker consuming the pulsar queue?"
        trouble.append({"kind": "no-observation", "text": text})
    took = o.get("durationS")
    if isinstance(took, (int, float)) and took > period:
        trouble.append(
            {
                "kind": "slow",
                "text": f"The last observation took {took:.1f} s, longer than its {period:.0f} s "
                f"period"
                + (
                    f" (reading Pulsar {float(o['readS']):.1f} s: {int(calls.get('total') or 0)}"
                    f" calls, {float(calls.get('bytes') or 0) / 1e6:.1f} MB; writing the "
                    f"metadata store and the live load {float(o.get('applyS') or 0):.1f} s)"
                    if isinstance(o.get("readS"), (int, float))
                    else ""
                )
                + (f"; slowest calls: {said_slowest}" if said_slowest else ""),
            }
        )
    failed, total = int(calls.get("failed") or 0), int(calls.get("total") or 0)
    window = [w for w in calls.get("window") or [] if isinstance(w, list) and len(w) == 2]
    failed_w, total_w = sum(int(w[1]) for w in window), sum(int(w[0]) for w in window)
    if failed or failed_w:
        failing = [r for r in rows if r.get("failed")][:3]
        named = "; ".join(
            f"{r.get('call')} on {r.get('broker')}: {r.get('failed')} of {r.get('calls')}"
            f" (last {r.get('lastFailure')})"
            for r in failing
        )
        text = f"{failed} of {total} admin calls failed in the last observation"
        if total:
            text += f" ({100 * failed / total:.0f} %)"
        if len(window) > 1 and total_w:
            text += (
                f"; {failed_w} of {total_w} ({100 * failed_w / total_w:.0f} %) over the last "
                f"{len(window)} passes"
            )
        trouble.append({"kind": "failing-calls", "text": text + (f": {named}" if named else "")})
    for late in moves_late(connection, now=now, observe_s=period):
        trouble.append({"kind": "late-moves", "text": late[0].upper() + late[1:]})
    return trouble


def pulsar_conflict_get() -> dict[str, Any] | None:
    """The attached connection's conflict — Pulsar's own balancing found back on while Fulcrum
    holds control (``{"connection", "at", "keys", "why"}``) — or None."""
    row = (
        PulsarConnection.objects.filter(is_attached=True, mode=PulsarConnection.Mode.CONTROL)
        .exclude(conflict={})
        .values("name", "conflict")
        .first()
    )
    return {"connection": row["name"], **row["conflict"]} if row else None


def pulsar_broker_read(name: str) -> dict[str, Any] | None:
    """How the attached Pulsar connection's last pass read broker ``name``'s load: ``{"readAt",
    "lastUpdate" (Pulsar's last metadata-store write of it, information only), "url",
    "missing", "calls"}``; None when no cluster is attached or the broker was not read."""
    connection = PulsarConnection.objects.filter(is_attached=True).only("observation").first()
    if connection is None:
        return None
    read = (connection.observation.get("brokerReads") or {}).get(name)
    return read if isinstance(read, dict) else None
