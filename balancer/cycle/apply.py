"""Applying a plan: one interpreter, many sinks.

``apply_plan(plan, sink)`` walks a plan's planned actions once, in order, and hands each to a
``Sink``, which compares what the plan expected (the owner a bundle had, the state a broker was
in) with what it holds and sets it if it still is (a compare-and-set), else refuses. The walk
itself is the same for every sink: an unload is paired with the placement that follows it (one
move), a refused action skips the bundle's later actions, a stale action refuses the whole plan
or is listed, and the accepted changes come back in the order they were applied, for the caller
to audit and publish. The sinks:

- the console's metadata store (``console.services.apply``: conditional UPDATEs on the bundle and
  broker rows);
- the console's Pulsar executor (the same module: each move becomes a request Pulsar is sent, and
  owners change only when Pulsar is seen doing it);
- an in-memory ownership map (``OwnersSink``: the offline simulator, the replay, the benchmarks).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from balancer.cycle.model import (
    BrokerStateAction,
    CyclePlan,
    PlaceAction,
    SplitAction,
    UnloadAction,
)
from balancer.errors import BalancerError
from balancer.units import Seconds


@dataclass(frozen=True, slots=True)
class Refused:
    """A sink's refusal of one action: what it holds is no longer what the plan expected.

    Attributes:
        reason: why, in words, with what was expected and what was found.
        code: ``StalePlan`` (the owner or state changed) or ``InFlight`` (a move of the bundle
            is still being carried out).
        field: the input field an operator's plan is refused on (``bundle`` or ``broker``).
    """

    reason: str
    code: str = "StalePlan"
    field: str = "bundle"


@dataclass(frozen=True, slots=True)
class Left:
    """A sink leaves the action to someone else (Pulsar places an unowned bundle itself, say):
    neither applied nor stale; the sink records why itself. The bundle's later actions are
    skipped."""


LEFT: Final = Left()

# What a sink says of one action: None (applied), refused, or left to someone else.
Verdict = Refused | Left | None


class Sink(Protocol):
    """What ``apply_plan`` hands each planned action to. Each method compares the plan's
    expectation with what the sink holds and sets it if it still holds (never twice)."""

    def unload(self, action: UnloadAction) -> Verdict:
        """The bundle leaves ``action.source`` (its owner now: nobody)."""

    def place(self, action: PlaceAction, unload: UnloadAction | None) -> Verdict:
        """The bundle goes to ``action.destination``; ``unload`` is the unload applied before it
        in this plan (a move), None for a bundle nobody owned."""

    def split(self, action: SplitAction) -> Verdict:
        """The bundle, owned by ``action.source``, is cut at ``action.boundaries``."""

    def broker_state(self, action: BrokerStateAction) -> Verdict:
        """The broker ``action.target`` goes from state ``action.previous`` to
        ``action.state``."""


@dataclass(frozen=True, slots=True)
class Move:
    """An accepted move: the unload and the placement that chose where the bundle goes. Either
    may be None: a placement of a bundle nobody owned; an unload no broker could take (it stays
    unowned until a lookup places it)."""

    unload: UnloadAction | None
    place: PlaceAction | None

    @property
    def bundle(self) -> str:
        """The bundle moved."""
        either = self.unload or self.place
        assert either is not None
        return either.target


# One accepted change: a move, or a split or broker-state action as planned.
Change = Move | SplitAction | BrokerStateAction


class StalePlan(BalancerError):
    """A plan that must be applied whole met an action its sink refused (``Refused``); nothing
    of it may be kept. ``code`` is the refusal's (``StalePlan``, ``InFlight``)."""

    def __init__(self, refused: Refused) -> None:
        super().__init__(refused.reason, refused.field)
        self.code = refused.code


@dataclass
class Applied:
    """What ``apply_plan`` did.

    Attributes:
        changes: the accepted changes in the order they were applied (moves in the order of
            their placements, then the unloads no broker took).
        stale: ``{"kind", "target", "reason"}`` per refused action (the tick's plans only).
    """

    changes: list[Change] = field(default_factory=list)
    stale: list[dict[str, str]] = field(default_factory=list)


def apply_plan(plan: CyclePlan, sink: Sink, *, refuse_stale: bool = False) -> Applied:
    """Hand every planned action of ``plan`` to ``sink``, in the plan's order.

    Args:
        plan: a cycle's or an operator's plan; its vetoed actions are not applied.
        sink: what holds the owners and states (``Sink``).
        refuse_stale: True (an operator's plan): the first refusal refuses the whole plan;
            False (the tick's): a refused action and the bundle's later actions are skipped,
            and listed in ``Applied.stale``.

    Raises:
        StalePlan: a refusal while ``refuse_stale``; what the sink already set is the caller's
            to roll back (the console applies a plan in one transaction).
    """
    applied = Applied()
    skipped: set[str] = set()
    unloads: dict[str, UnloadAction] = {}  # accepted, waiting for the placement that follows
    for action in plan.planned():
        if action.target in skipped and not isinstance(action, BrokerStateAction):
            continue
        if isinstance(action, UnloadAction):
            verdict = sink.unload(action)
        elif isinstance(action, PlaceAction):
            verdict = sink.place(action, unloads.get(action.target))
        elif isinstance(action, SplitAction):
            verdict = sink.split(action)
        else:
            verdict = sink.broker_state(action)
        if isinstance(verdict, Refused):
            if refuse_stale:
                raise StalePlan(verdict)
            applied.stale.append(
                {"kind": str(action.kind), "target": action.target, "reason": verdict.reason}
            )
            skipped.add(action.target)
        elif isinstance(verdict, Left):
            skipped.add(action.target)
        elif isinstance(action, UnloadAction):
            unloads[action.target] = action
        elif isinstance(action, PlaceAction):
            applied.changes.append(Move(unloads.pop(action.target, None), action))
        else:
            applied.changes.append(action)
    applied.changes += [Move(unload, None) for unload in unloads.values()]
    return applied


class OwnersSink:
    """An in-memory ownership map: bundle -> owner (None: unowned), the offline simulator's, the
    replay's and the benchmarks' metadata store. It holds no bundle boundaries and no broker
    states: splits and broker-state changes are left (not applied).

    Attributes:
        owners: bundle -> owning broker, changed in place.
        recently_unloaded: bundle -> when it was last unloaded (seconds), changed in place.
        now: the time of the plan (seconds).
        unloads: how many unloads were applied.
    """

    def __init__(
        self,
        owners: MutableMapping[str, str | None],
        recently_unloaded: MutableMapping[str, Seconds],
        now: Seconds,
    ) -> None:
        self.owners = owners
        self.recently_unloaded = recently_unloaded
        self.now = now
        self.unloads = 0

    def unload(self, action: UnloadAction) -> Verdict:
        """Unowned, if ``action.source`` still owns it."""
        owner = self.owners.get(action.target)
        if owner != action.source:
            return Refused(_stale_said(action.target, action.source, owner))
        self.owners[action.target] = None
        self.recently_unloaded[action.target] = self.now
        self.unloads += 1
        return None

    def place(self, action: PlaceAction, unload: UnloadAction | None) -> Verdict:
        """Owned by ``action.destination``, if nobody owns it."""
        owner = self.owners.get(action.target)
        if action.destination is None or owner is not None:
            return Refused(_stale_said(action.target, None, owner))
        self.owners[action.target] = action.destination
        return None

    def split(self, action: SplitAction) -> Verdict:
        """Left: the map holds no bundle boundaries."""
        return LEFT

    def broker_state(self, action: BrokerStateAction) -> Verdict:
        """Left: the map holds no broker states."""
        return LEFT


def _stale_said(bundle: str, expected: str | None, owner: str | None) -> str:
    return (
        f"{bundle} changed since the plan was made: expected owner {expected or 'nobody'}, "
        f"its owner is now {owner or 'nobody'}"
    )


def apply_to_owners(
    plan: CyclePlan,
    owners: dict[str, str | None],
    recently_unloaded: dict[str, Seconds],
    now: Seconds,
) -> int:
    """Apply a plan to an in-memory ownership map (``OwnersSink``); returns the number of
    unloads applied. An action whose bundle is not owned as the plan expects is skipped, never
    applied twice."""
    sink = OwnersSink(owners, recently_unloaded, now)
    apply_plan(plan, sink)
    return sink.unloads
