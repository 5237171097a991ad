"""What the bundles preallocated so far add up to, folded once per placement pass.

A placement pass (``place_many``, a drain) places bundles one at a time and each placement sees
every bundle preallocated before it: Pulsar's filters and selectors add those up on every call
(``ModularLoadManagerImpl.preallocatedBundleToBroker``), which is quadratic in the bundles of
one pass: 1,000 bundles of a drained broker at 200 brokers cost 12 s. The sum over the first k
preallocations is the same at every call, so it is kept on the snapshot and only the new ones
are added — in the same order, so every sum is the same number to the last bit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any, TypeVar

from balancer.snapshot import ClusterSnapshot

T = TypeVar("T")


def running_total(
    snapshot: ClusterSnapshot,
    preallocated: Mapping[str, str],
    key: object,
    start: Callable[[], T],
    add: Callable[[T, str, str], None],
) -> T:
    """``add(total, bundle, broker)`` folded over ``preallocated`` in its order from
    ``start()``, remembered on ``snapshot`` under ``key``: when ``preallocated`` begins with
    the preallocations folded last time (a pass adds one per call, in a copy), only the rest are
    folded; otherwise the total is folded anew. The total returned is shared: read it, never
    change it."""
    memo: dict[str, Any] = snapshot.cached(("preallocated", key), dict)
    folded: list[tuple[str, str]] = memo.setdefault("folded", [])
    grown = len(preallocated) >= len(folded) and (
        list(islice(preallocated.items(), len(folded))) == folded
    )
    if "total" not in memo or not grown:
        folded.clear()
        memo["total"] = start()
    total: T = memo["total"]
    for bundle, broker in islice(preallocated.items(), len(folded), None):
        add(total, bundle, broker)
        folded.append((bundle, broker))
    return total
