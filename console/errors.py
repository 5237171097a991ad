"""The console's one error type (besides the balancer's own)."""

from __future__ import annotations

from typing import Any


class ConsoleError(Exception):
    """A refused request: ``status`` 400 (bad input), 404 (unknown), 409 (conflict)."""

    def __init__(
        self, message: str, *, status: int = 400, field: str | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field
        self.extra = extra
