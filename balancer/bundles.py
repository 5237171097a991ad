"""Bundle ranges of a namespace: names, initial boundaries, topic -> bundle lookup, splitting.

A namespace's bundles are a sorted boundary list ``p0 = 0 < p1 < ... < pN = 0xffffffff``;
bundle k is ``[p_k, p_{k+1})`` and the last bundle is closed ``[p_{N-1}, 0xffffffff]``
(PULSAR.md §11).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from balancer.errors import ImpossibleSplit, InvalidBundleRange
from balancer.hashing import format_hash, topic_hash
from balancer.units import HASH_MAX, HASH_MIN, HASH_SPACE, HashPoint

_BUNDLE_NAME = re.compile(r"^(?P<ns>.+)/0x(?P<lower>[0-9a-fA-F]{8})_0x(?P<upper>[0-9a-fA-F]{8})$")


@dataclass(frozen=True, slots=True, order=True)
class BundleRange:
    """A slice ``[lower, upper)`` of the hash space (closed at 0xffffffff for the last bundle)."""

    lower: HashPoint
    upper: HashPoint

    def __post_init__(self) -> None:
        if not (HASH_MIN <= self.lower < self.upper <= HASH_MAX):
            raise InvalidBundleRange(
                f"bundle range {format_hash(self.lower)}_{format_hash(self.upper)} is not "
                f"a non-empty range inside 0x00000000..0xffffffff"
            )

    @property
    def label(self) -> str:
        """``0xLOWER_0xUPPER``, the range part of a bundle name."""
        return f"{format_hash(self.lower)}_{format_hash(self.upper)}"

    def contains(self, point: HashPoint) -> bool:
        """Whether ``point`` falls in this range (the upper bound counts only at 0xffffffff)."""
        return self.lower <= point < self.upper or (point == self.upper == HASH_MAX)

    @property
    def can_split(self) -> bool:
        """Pulsar's ``canSplitBundle``: the range must hold at least two hash points."""
        return self.upper - self.lower > 1


@dataclass(frozen=True, slots=True, order=True)
class Bundle:
    """A namespace's bundle: ``tenant/namespace/0xLOWER_0xUPPER``."""

    namespace: str
    range: BundleRange

    @property
    def name(self) -> str:
        """The bundle's full name as Pulsar writes it."""
        return f"{self.namespace}/{self.range.label}"

    def __str__(self) -> str:
        return self.name


def parse_bundle_name(name: str) -> Bundle:
    """Parse ``namespace/0xLOWER_0xUPPER`` into a Bundle.

    Raises:
        InvalidBundleRange: the name has no valid hash range.
    """
    match = _BUNDLE_NAME.match(name)
    if match is None:
        raise InvalidBundleRange(
            f"{name!r} is not a bundle name of the form namespace/0xLOWER_0xUPPER"
        )
    return Bundle(match["ns"], BundleRange(int(match["lower"], 16), int(match["upper"], 16)))


def initial_boundaries(count: int) -> list[HashPoint]:
    """Boundaries of a namespace created with ``count`` bundles.

    step = floor(2^32 / count); boundaries 0, step, ..., (count-1)·step, then 0xffffffff.
    ``count=4`` -> 0x00000000, 0x40000000, 0x80000000, 0xc0000000, 0xffffffff.

    Raises:
        InvalidBundleRange: ``count`` < 1 or so large that two boundaries would coincide.

    Source: Pulsar PoliciesUtil / ``defaultNumberOfNamespaceBundles`` (PULSAR.md §11).
    """
    if count < 1:
        raise InvalidBundleRange(f"bundle count must be at least 1, got {count}")
    step = HASH_SPACE // count
    if step < 2 and count > 1:
        raise InvalidBundleRange(f"bundle count {count} is too large for the 32-bit hash space")
    return [k * step for k in range(count)] + [HASH_MAX]


def validate_boundaries(boundaries: Sequence[HashPoint]) -> None:
    """Check that boundaries partition the hash space exactly.

    Raises:
        InvalidBundleRange: fewer than two, not starting at 0 / ending at 0xffffffff, or not
            strictly increasing.
    """
    if len(boundaries) < 2 or boundaries[0] != HASH_MIN or boundaries[-1] != HASH_MAX:
        raise InvalidBundleRange("boundaries must start at 0x00000000 and end at 0xffffffff")
    for a, b in itertools.pairwise(boundaries):
        if not a < b:
            raise InvalidBundleRange(
                f"boundaries must be strictly increasing: {format_hash(a)} then {format_hash(b)}"
            )


def bundles_from_boundaries(namespace: str, boundaries: Sequence[HashPoint]) -> list[Bundle]:
    """The bundles of ``namespace`` for a validated boundary list, in hash order."""
    validate_boundaries(boundaries)
    return [Bundle(namespace, BundleRange(a, b)) for a, b in itertools.pairwise(boundaries)]


def bundle_index_for(boundaries: Sequence[HashPoint], point: HashPoint) -> int:
    """Index of the bundle holding ``point``: binary search; a hash equal to a boundary belongs to
    the bundle that starts there; 0xffffffff belongs to the last bundle (PULSAR.md §11)."""
    if not HASH_MIN <= point <= HASH_MAX:
        raise InvalidBundleRange(f"hash {point} is outside the 32-bit hash space")
    index = bisect.bisect_right(boundaries, point) - 1
    return min(index, len(boundaries) - 2)


def bundle_for_topic(namespace: str, boundaries: Sequence[HashPoint], topic: str) -> Bundle:
    """The bundle of ``namespace`` that ``topic`` (its full name) hashes into."""
    index = bundle_index_for(boundaries, topic_hash(topic))
    return Bundle(namespace, BundleRange(boundaries[index], boundaries[index + 1]))


def split_boundaries(
    boundaries: Sequence[HashPoint], bundle: BundleRange, cuts: Iterable[HashPoint]
) -> list[HashPoint]:
    """Replace ``bundle`` in a namespace's boundary list by its children cut at ``cuts``.

    Raises:
        ImpossibleSplit: the bundle is not one of the namespace's bundles, it cannot be split, no
            cut was given, or a cut is not strictly inside the range.

    Source: Pulsar NamespaceBundleFactory.splitBundles / canSplitBundle (PULSAR.md §10.5).
    """
    points = sorted(set(cuts))
    if not bundle.can_split:
        raise ImpossibleSplit(f"bundle {bundle.label} is too small to split")
    if not points:
        raise ImpossibleSplit(f"no boundary to split bundle {bundle.label} at")
    for point in points:
        if not bundle.lower < point < bundle.upper:
            raise ImpossibleSplit(
                f"boundary {format_hash(point)} is not strictly inside bundle {bundle.label}"
            )
    index = bisect.bisect_left(boundaries, bundle.lower)
    if (
        index + 1 >= len(boundaries)
        or boundaries[index] != bundle.lower
        or boundaries[index + 1] != bundle.upper
    ):
        raise ImpossibleSplit(f"bundle {bundle.label} is not a bundle of this namespace")
    return [*boundaries[: index + 1], *points, *boundaries[index + 1 :]]


def range_equally_divide(bundle: BundleRange) -> HashPoint:
    """Midpoint boundary ``lower + (upper - lower) // 2``.

    (0x00000000, 0x80000000) -> 0x40000000; (0x00000000, 0xffffffff) -> 0x7fffffff.

    Source: Pulsar RangeEquallyDivideBundleSplitAlgorithm (PULSAR.md §10.1), the default.
    """
    return bundle.lower + (bundle.upper - bundle.lower) // 2


def namespace_of_topic(topic: str) -> str:
    """``persistent://tenant/ns/name`` -> ``tenant/ns`` (also ``non-persistent://``, and
    ``tenant/ns/name`` without a domain).

    Raises:
        InvalidBundleRange: the name has no tenant/namespace part.
    """
    rest = topic.split("://", 1)[1] if "://" in topic else topic
    parts = rest.split("/")
    if len(parts) < 3 or not all(parts[:3]):
        raise InvalidBundleRange(
            f"{topic!r} is not a topic name of the form persistent://tenant/ns/topic"
        )
    return f"{parts[0]}/{parts[1]}"


def namespace_of_bundle(name: str) -> str:
    """``tenant/ns/0xLOWER_0xUPPER`` -> ``tenant/ns`` (everything before the last ``/``)."""
    return name.rsplit("/", 1)[0]
