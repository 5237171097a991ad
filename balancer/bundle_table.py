"""BundleTable: a snapshot's bundles as columns, one row per bundle; a ``BundleLoad`` is built only
when one is read, so a million bundles cost a few arrays instead of a million objects."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import overload

import numpy as np

from balancer.load import BundleLoad, MessageRates

# The order of the rate columns: msgRateIn, msgRateOut (msg/s), msgThroughputIn, Out (bytes/s).
RATE_FIELDS = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
# The order of the count columns.
COUNT_FIELDS = ("topics", "producers", "consumers")


class BundleTable(Mapping[str, BundleLoad]):
    """Bundle name -> ``BundleLoad``, stored as columns.

    Columns, one row per bundle:
        namespace: int64 index into ``namespaces``.
        lower, upper: int64 hash range (only read when names are canonical).
        owner: int64 index into ``owners``, -1 for an unowned bundle.
        short_term, long_term: (n, 4) float64 time-averaged rates in ``RATE_FIELDS`` order
            (msg/s, msg/s, bytes/s, bytes/s).
        counts: (n, 3) int64 topics, producers, consumers.

    Names are either given (``names``, any strings) or canonical, ``{namespace}/0x{lower:08x}_0x
    {upper:08x}``, formatted when read; canonical rows are kept sorted by (namespace, lower), so
    that a name is found by binary search instead of a million-entry dict.
    """

    __slots__ = (
        "_index",
        "_keys",
        "_loads",
        "_names",
        "_namespace_index",
        "counts",
        "long_term",
        "lower",
        "namespace",
        "namespaces",
        "owner",
        "owners",
        "short_term",
        "upper",
    )

    def __init__(
        self,
        *,
        namespaces: Sequence[str],
        namespace: np.ndarray,
        owners: Sequence[str],
        owner: np.ndarray,
        short_term: np.ndarray,
        long_term: np.ndarray,
        counts: np.ndarray,
        lower: np.ndarray | None = None,
        upper: np.ndarray | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        count = len(namespace)
        if names is None and (lower is None or upper is None):
            raise ValueError("a table without names needs lower and upper")
        zeros = np.zeros(count, dtype=np.int64)
        columns = [
            np.asarray(namespace, dtype=np.int64),
            zeros if lower is None else np.asarray(lower, dtype=np.int64),
            zeros if upper is None else np.asarray(upper, dtype=np.int64),
            np.asarray(owner, dtype=np.int64),
            np.asarray(short_term, dtype=np.float64).reshape(count, len(RATE_FIELDS)),
            np.asarray(long_term, dtype=np.float64).reshape(count, len(RATE_FIELDS)),
            np.asarray(counts, dtype=np.int64).reshape(count, len(COUNT_FIELDS)),
        ]
        if names is None:
            order = np.lexsort((columns[1], columns[0]))
            if count and np.any(order != np.arange(count)):
                columns = [c[order] for c in columns]
        (
            self.namespace,
            self.lower,
            self.upper,
            self.owner,
            self.short_term,
            self.long_term,
            self.counts,
        ) = columns
        self.namespaces = tuple(namespaces)
        self.owners = tuple(owners)
        self._names = None if names is None else list(names)
        self._index: dict[str, int] | None = None
        self._keys: np.ndarray | None = None
        self._namespace_index: dict[str, int] | None = None
        self._loads: dict[int, BundleLoad] = {}

    @classmethod
    def from_loads(cls, loads: Iterable[BundleLoad]) -> BundleTable:
        """The table of ``BundleLoad`` values (names kept as given, in the given order)."""
        names: list[str] = []
        namespace_ids: dict[str, int] = {}
        owner_ids: dict[str, int] = {}
        namespace: list[int] = []
        owner: list[int] = []
        short: list[float] = []
        long: list[float] = []
        counts: list[int] = []
        for load in loads:
            names.append(load.name)
            ns = load.name.rsplit("/", 1)[0]
            namespace.append(namespace_ids.setdefault(ns, len(namespace_ids)))
            owner.append(
                -1 if load.owner is None else owner_ids.setdefault(load.owner, len(owner_ids))
            )
            s, lt = load.short_term, load.long_term
            short += (s.msg_rate_in, s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out)
            long += (lt.msg_rate_in, lt.msg_rate_out, lt.msg_throughput_in, lt.msg_throughput_out)
            counts += (load.topics, load.producers, load.consumers)
        return cls(
            namespaces=list(namespace_ids),
            namespace=np.asarray(namespace, dtype=np.int64),
            owners=list(owner_ids),
            owner=np.asarray(owner, dtype=np.int64),
            short_term=np.asarray(short, dtype=np.float64),
            long_term=np.asarray(long, dtype=np.float64),
            counts=np.asarray(counts, dtype=np.int64),
            names=names,
        )

    # -- rows -----------------------------------------------------------------------------------

    def name(self, row: int) -> str:
        """The name of row ``row``."""
        if self._names is not None:
            return self._names[row]
        lower, upper = int(self.lower[row]), int(self.upper[row])
        return f"{self.namespaces[int(self.namespace[row])]}/0x{lower:08x}_0x{upper:08x}"

    def names_at(self, rows: np.ndarray | Sequence[int]) -> list[str]:
        """The names of ``rows``, in that order."""
        if self._names is not None:
            given = self._names
            return [given[i] for i in np.asarray(rows, dtype=np.int64).tolist()]
        rows = np.asarray(rows, dtype=np.int64)
        namespaces = self.namespaces
        return [
            f"{namespaces[n]}/0x{lo:08x}_0x{hi:08x}"
            for n, lo, hi in zip(
                self.namespace[rows].tolist(),
                self.lower[rows].tolist(),
                self.upper[rows].tolist(),
                strict=True,
            )
        ]

    def row(self, name: str) -> int | None:
        """The row of bundle ``name``, None when the table has no such bundle."""
        if self._index is None:
            self._index = {} if self._names is None else {n: i for i, n in enumerate(self._names)}
        found = self._index.get(name)
        if found is not None or self._names is not None:
            return found
        found = self._search(name)
        if found is not None:
            self._index[name] = found
        return found

    def _sorted_keys(self) -> np.ndarray:
        """namespace << 32 | lower of every row, ascending (canonical rows are sorted)."""
        if self._keys is None:
            self._keys = np.left_shift(self.namespace, 32) | self.lower
            self._namespace_index = {n: i for i, n in enumerate(self.namespaces)}
        return self._keys

    def _search(self, name: str) -> int | None:
        """Binary search of a canonical name on (namespace, lower)."""
        self._sorted_keys()
        namespace, _, hash_range = name.rpartition("/")
        ns = self._namespace_index.get(namespace)  # type: ignore[union-attr]
        try:
            lower = int(hash_range[2:10], 16)
        except ValueError:
            return None
        if ns is None:
            return None
        key = (ns << 32) | lower
        keys = self._sorted_keys()
        row = int(np.searchsorted(keys, key))
        if row < len(keys) and int(keys[row]) == key and self.name(row) == name:
            return row
        return None

    def rows_of(self, namespace: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """The rows of many canonical bundles at once (namespace indexes and hash ranges), -1
        for a bundle the table does not have.

        Raises:
            ValueError: the table's names are given, not canonical.
        """
        if self._names is not None:
            raise ValueError("rows_of needs a table of canonical names")
        keys = self._sorted_keys()
        wanted = np.left_shift(np.asarray(namespace, dtype=np.int64), 32) | np.asarray(
            lower, dtype=np.int64
        )
        at = np.searchsorted(keys, wanted)
        clipped = np.minimum(at, max(len(keys) - 1, 0))
        if not len(keys):
            return np.full(len(wanted), -1, dtype=np.int64)
        found = (
            (at < len(keys))
            & (keys[clipped] == wanted)
            & (self.upper[clipped] == np.asarray(upper, dtype=np.int64))
            & (np.asarray(namespace) >= 0)
        )
        return np.where(found, clipped, -1)

    def owner_name(self, row: int) -> str | None:
        """The owner of row ``row``, None when unowned."""
        code = int(self.owner[row])
        return None if code < 0 else self.owners[code]

    def load(self, row: int) -> BundleLoad:
        """Row ``row`` as a ``BundleLoad`` (built once, then remembered)."""
        found = self._loads.get(row)
        if found is not None:
            return found
        s = self.short_term[row].tolist()
        lt = self.long_term[row].tolist()
        topics, producers, consumers = self.counts[row].tolist()
        found = BundleLoad(
            self.name(row),
            self.owner_name(row),
            MessageRates(*s),
            MessageRates(*lt),
            topics,
            producers,
            consumers,
        )
        self._loads[row] = found
        return found

    @property
    def has_names(self) -> bool:
        """Whether the names were given (else they are canonical, formatted when read)."""
        return self._names is not None

    def name_order_keys(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """Sort keys (least significant first, as ``np.lexsort`` takes them) that order ``rows``
        by bundle name."""
        if self._names is not None:
            given = self._names
            rank = np.empty(len(given), dtype=np.int64)
            rank[sorted(range(len(given)), key=given.__getitem__)] = np.arange(len(given))
            return (rank[rows],)
        # "ns/" sorts before "ns-x/" and "ns1/" exactly as the whole names do; the fixed-width hex
        # ranges sort as their numbers.
        # Within a namespace bundles do not overlap, so (namespace, lower) orders them whole:
        # one int64 key.
        ranked = sorted(range(len(self.namespaces)), key=lambda i: self.namespaces[i] + "/")
        rank = np.empty(len(self.namespaces), dtype=np.int64)
        rank[ranked] = np.arange(len(ranked))
        return (np.left_shift(rank[self.namespace[rows]], 32) | self.lower[rows],)

    def with_owners(self, owner: np.ndarray, owners: Sequence[str]) -> BundleTable:
        """The same bundles with another owner column (indexes into ``owners``)."""
        table = BundleTable.__new__(BundleTable)
        for slot in BundleTable.__slots__:
            setattr(table, slot, getattr(self, slot))
        table.owner = np.asarray(owner, dtype=np.int64)
        table.owners = tuple(owners)
        table._loads = {}
        return table

    # -- Mapping --------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> BundleLoad:
        row = self.row(name)
        if row is None:
            raise KeyError(name)
        return self.load(row)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.row(name) is not None

    def __iter__(self) -> Iterator[str]:
        if self._names is not None:
            return iter(self._names)
        return iter(self.names_at(np.arange(len(self.namespace))))

    def __len__(self) -> int:
        return len(self.namespace)

    def __repr__(self) -> str:
        return f"BundleTable({len(self)} bundles)"


class BundleNames(Sequence[str]):
    """Some rows of a ``BundleTable`` as a sequence of names (a broker's bundles), formatted when
    read. Compares equal to any sequence of the same names."""

    __slots__ = ("rows", "table")

    def __init__(self, table: BundleTable, rows: np.ndarray) -> None:
        self.table = table
        self.rows = np.asarray(rows, dtype=np.int64)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple(self.table.names_at(self.rows[index]))
        return self.table.name(int(self.rows[index]))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self.table.names_at(self.rows))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        row = self.table.row(name)
        return row is not None and bool(np.any(self.rows == row))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))
