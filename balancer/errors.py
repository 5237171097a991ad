"""Errors raised by the balancer core. Every one carries a message and, where known, the field."""

from __future__ import annotations

from collections.abc import Iterable


class BalancerError(Exception):
    """Base class: bad input or an impossible request; ``field`` is a JSON path when known."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def as_dict(self) -> dict[str, str | None]:
        """The error as ``{"message": ..., "field": ...}`` (the CLI's and the API's error body)."""
        return {"message": self.message, "field": self.field}


class UnknownStrategy(BalancerError):
    """A strategy or algorithm name that the registry does not know; lists the valid names."""

    def __init__(self, name: str, available: Iterable[str], field: str | None = None) -> None:
        names = ", ".join(available)
        super().__init__(f"unknown name {name!r}; valid names: {names}", field)
        self.name = name


class InvalidBundleRange(BalancerError):
    """A bundle range that is empty, out of the 32-bit hash space, or not a valid bundle name."""


class InvalidSnapshot(BalancerError):
    """A snapshot that contradicts itself (e.g. a bundle owned by an unknown broker)."""


class ImpossibleSplit(BalancerError):
    """A split that cannot be made: boundary outside the range, range too small to cut."""
