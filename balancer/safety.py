"""Safety rules applied to every shedder's unloads before anything moves, and the broker life
cycle (draining, lost brokers). Fulcrum's own layer on top of the reference strategies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from balancer.decisions import Reason, Skip, Unload
from balancer.snapshot import ClusterSnapshot


@dataclass(frozen=True, slots=True)
class SafetyConfig:
    """Limits on what any strategy may move.

    Attributes:
        bundle_cool_down_s: a bundle moved less than this long ago stays (seconds).
        max_moves_per_hour: unloads allowed cluster-wide in any sliding hour (0: no limit).
        blacklist: shell-style patterns of bundle or namespace names that never move.
        broker_timeout_s: a broker that reported once and then stayed silent for longer is lost:
            its bundles are re-placed (seconds).
        is_auto_split_enabled: whether the cycle splits bundles over Pulsar's auto-split limits.
    """

    bundle_cool_down_s: float = 300.0
    max_moves_per_hour: int = 0
    blacklist: tuple[str, ...] = field(default_factory=tuple)
    broker_timeout_s: float = 60.0
    is_auto_split_enabled: bool = False


def matching_pattern(bundle: str, patterns: Iterable[str]) -> str | None:
    """The first pattern (``acme/*``, ``*/payments/*``) matching the bundle or its namespace."""
    namespace = bundle.rsplit("/", 1)[0]
    return next((p for p in patterns if fnmatchcase(bundle, p) or fnmatchcase(namespace, p)), None)


def is_blacklisted(bundle: str, patterns: Iterable[str]) -> bool:
    """Whether the bundle, or its namespace, matches a pattern (``acme/*``, ``*/payments/*``)."""
    return matching_pattern(bundle, patterns) is not None


def screen_unloads(
    unloads: Sequence[Unload],
    snapshot: ClusterSnapshot,
    moves: Mapping[str, float],
    config: SafetyConfig,
) -> tuple[list[Unload], list[Skip]]:
    """Keep the unloads that are safe to apply, in order; say why the others were refused.

    Refused: a bundle the source does not own (never two owners), one already unloaded in this
    batch, a blacklisted one, one moved within ``bundle_cool_down_s`` (``moves``: bundle -> last
    move time, s since epoch), and any beyond ``max_moves_per_hour`` counting the moves of the
    last hour.
    """
    kept: list[Unload] = []
    skipped: list[Skip] = []
    now = snapshot.now
    recent = sum(1 for t in moves.values() if t >= now - 3600)
    seen: set[str] = set()
    for unload in unloads:
        bundle = snapshot.bundles.get(unload.bundle)
        if bundle is None or bundle.owner != unload.source or unload.bundle in seen:
            skipped.append(Skip("bundle", unload.bundle, Reason.NOT_OWNER))
        elif is_blacklisted(unload.bundle, config.blacklist):
            skipped.append(Skip("bundle", unload.bundle, Reason.BLACKLISTED))
        elif moves.get(unload.bundle, float("-inf")) > now - config.bundle_cool_down_s:
            skipped.append(Skip("bundle", unload.bundle, Reason.COOL_DOWN))
        elif config.max_moves_per_hour and recent + len(kept) >= config.max_moves_per_hour:
            skipped.append(Skip("bundle", unload.bundle, Reason.RATE_LIMITED))
        else:
            kept.append(unload)
            seen.add(unload.bundle)
    return kept, skipped


def drain_unloads(snapshot: ClusterSnapshot) -> list[Unload]:
    """Every bundle of a draining broker, to be placed elsewhere (reason Drain)."""
    return [
        Unload(b.name, b.owner, None, Reason.DRAIN, b.short_term.throughput)
        for b in snapshot.bundles.values()
        if b.owner is not None and snapshot.brokers[b.owner].state == "draining"
    ]


def lost_brokers(
    snapshot: ClusterSnapshot, last_report: Mapping[str, float | None], config: SafetyConfig
) -> list[str]:
    """Brokers whose newest load report is older than ``broker_timeout_s`` (or that never reported
    while owning bundles), by name."""
    owners = {b.owner for b in snapshot.bundles.values()}
    lost = []
    for name in snapshot.brokers:
        at = last_report.get(name)
        if (at is None and name in owners) or (
            at is not None and at < snapshot.now - config.broker_timeout_s
        ):
            lost.append(name)
    return lost
