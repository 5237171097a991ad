"""A read from an async caller (the websocket, the ASGI ingest path) on Django's sync ORM."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections

from console.errors import ConsoleError

T = TypeVar("T")


async def database_read(read: Callable[..., T], *args: Any) -> T:
    """``read(*args)`` on Django's sync thread, for the asyncio hot path (outside Django's request
    cycle, which would otherwise recycle the connection): a connection the database dropped is
    closed, so that the next read reconnects, and the call is refused.

    Raises:
        ConsoleError: 503 the metadata store is unreachable.
    """
    try:
        return await sync_to_async(read)(*args)
    except (OperationalError, InterfaceError) as exc:
        await sync_to_async(close_old_connections)()
        raise ConsoleError(
            f"the metadata store is unavailable, retry later: {exc}", status=503
        ) from None
