"""Names a package imports when first used (PEP 562), for ``console.selectors`` and
``console.services``: a process that needs one of their modules does not load them all."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``homes`` maps each name to the submodule it
    comes from, imported at the first use of the name and then kept in the package.

    Raises (from the returned function):
        AttributeError: a name ``homes`` does not list.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 (PEP 562's name)
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
