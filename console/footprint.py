"""What the long-running processes keep out of memory.

pyarrow treats pandas as optional but imports it (about 40 MB resident) the first time it
converts Python values to an array, only to ask whether they are a pandas object. The Celery
worker writes the Parquet history with pyarrow and never uses pandas (the Spark jobs run in
their own ``spark-submit`` process), so it keeps pandas out: pyarrow then takes it as not
installed. Measured on the demo stack: the worker 240 MB -> 197 MB resident.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class KeptOut(importlib.abc.MetaPathFinder):
    """An import finder refusing ``names`` (and their submodules) with a ModuleNotFoundError
    that says why."""

    def __init__(self, names: Sequence[str], why: str) -> None:
        self.names = frozenset(names)
        self.why = why

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"{fullname} is kept out of this process: {self.why}", name=fullname
            )
        return None


def keep_out(*names: str, why: str) -> bool:
    """Refuse every later import of ``names`` in this process (modules already imported stay).
    Returns False when one of them is imported already (nothing is installed then), True
    otherwise; installing twice is harmless."""
    if any(name in sys.modules for name in names):
        return False
    if not any(isinstance(f, KeptOut) and f.names >= set(names) for f in sys.meta_path):
        sys.meta_path.insert(0, KeptOut(names, why))
    return True


def heap_trim() -> bool:
    """Give the free pages of the C heap back to the system (glibc's ``malloc_trim``), after a
    task that allocated and freed tens of MB (a history flush of 30,000 rows, a compaction):
    freed memory otherwise stays resident in the worker's thread arenas. Whether it ran (False
    where the C library has no ``malloc_trim``)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    trim(0)
    return True
