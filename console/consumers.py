"""Websocket consumers: join, leave, forward. No ORM here."""

from __future__ import annotations

from typing import Any

from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.realtime import CLUSTER_GROUP


class ClusterConsumer(AsyncJsonWebsocketConsumer):
    """Pushes cluster events (rankings, CV, decisions, bundle moves) to logged-in users."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(CLUSTER_GROUP, self.channel_name)
        await self.accept()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """Frames from the browser are ignored, not decoded: the feed only pushes, and a
        hostile frame (a 100,000-deep JSON) must not cost a traceback or the connection."""

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(CLUSTER_GROUP, self.channel_name)

    async def _forward(self, event: dict[str, Any]) -> None:
        try:
            await self.send_json({"type": event["type"], "payload": event["payload"]})
        except (OSError, RuntimeError) as exc:
            # The browser left between a group message and its websocket.disconnect: the server
            # refuses the send (uvicorn with this RuntimeError, OSError as the ASGI spec asks),
            # and Channels would not call disconnect() after the error (django/channels#1466).
            # Leave the group now and end quietly; any other RuntimeError is a bug: raised.
            if isinstance(exc, RuntimeError) and "after sending 'websocket.close'" not in str(exc):
                raise
            await self.channel_layer.group_discard(CLUSTER_GROUP, self.channel_name)
            raise StopConsumer from None

    async def balancer_load_reported(self, event: dict[str, Any]) -> None:
        """Rankings and CV after a load report."""
        await self._forward(event)

    async def balancer_decision_made(self, event: dict[str, Any]) -> None:
        """A shedding cycle or a placement."""
        await self._forward(event)

    async def balancer_bundle_moved(self, event: dict[str, Any]) -> None:
        """An unload or a placement changed a bundle's owner."""
        await self._forward(event)

    async def balancer_cv_sampled(self, event: dict[str, Any]) -> None:
        """A new point of the CV-over-time chart."""
        await self._forward(event)

    async def balancer_report_changed(self, event: dict[str, Any]) -> None:
        """A Spark report run changed status."""
        await self._forward(event)
