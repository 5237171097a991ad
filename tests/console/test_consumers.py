import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from console.consumers import ClusterConsumer
from console.realtime import CLUSTER_GROUP, LOAD_REPORTED
from tests.console.conftest import user_created

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db(transaction=True)
@override_settings(CHANNEL_LAYERS=MEMORY)
async def test_logged_in_user_receives_cluster_events():

    user = await user_created("carol", "pw-123456")
    communicator = WebsocketCommunicator(ClusterConsumer.as_asgi(), "/ws/cluster/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    await get_channel_layer().group_send(
        CLUSTER_GROUP, {"type": LOAD_REPORTED, "payload": {"broker": "broker-1", "cv": 0.5}}
    )
    message = await communicator.receive_json_from(timeout=2)
    assert message == {"type": LOAD_REPORTED, "payload": {"broker": "broker-1", "cv": 0.5}}
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
@override_settings(CHANNEL_LAYERS=MEMORY)
async def test_anonymous_websocket_is_refused():
    from django.contrib.auth.models import AnonymousUser

    communicator = WebsocketCommunicator(ClusterConsumer.as_asgi(), "/ws/cluster/")
    communicator.scope["user"] = AnonymousUser()
    connected, code = await communicator.connect()
    assert not connected
    assert code == 4401


async def connected_then_refusing(username: str, error: str):
    """A logged-in dashboard whose server refuses every send with ``RuntimeError(error)`` once
    ``refuse()`` is called (what uvicorn does after the socket closed). Returns (communicator,
    refuse)."""

    user = await user_created(username, "pw-123456")
    consumer = ClusterConsumer.as_asgi()
    refusing = []

    async def served(scope, receive, send):
        async def maybe_refused(message):
            if refusing and message["type"] == "websocket.send":
                raise RuntimeError(error)
            await send(message)

        await consumer(scope, receive, maybe_refused)

    communicator = WebsocketCommunicator(served, "/ws/cluster/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator, lambda: refusing.append(True)


@pytest.mark.django_db(transaction=True)
@override_settings(CHANNEL_LAYERS=MEMORY)
async def test_a_browser_gone_before_its_disconnect_leaves_the_group_quietly():
    """uvicorn refuses a send once the socket closed (RuntimeError); the consumer must neither
    fail with a traceback in the log nor stay in the group."""
    communicator, refuse = await connected_then_refusing(
        "dave",
        "Unexpected ASGI message 'websocket.send', after sending 'websocket.close' or response "
        "already completed.",
    )
    layer = get_channel_layer()
    assert len(layer.groups[CLUSTER_GROUP]) == 1
    refuse()
    await layer.group_send(CLUSTER_GROUP, {"type": LOAD_REPORTED, "payload": {"cv": 0.5}})
    await communicator.wait(timeout=2)  # the consumer ended, and without an exception
    assert not layer.groups.get(CLUSTER_GROUP)


@pytest.mark.django_db(transaction=True)
@override_settings(CHANNEL_LAYERS=MEMORY)
async def test_another_runtime_error_on_send_is_not_swallowed():
    communicator, refuse = await connected_then_refusing("erin", "a bug, not a browser gone")
    refuse()
    await get_channel_layer().group_send(
        CLUSTER_GROUP, {"type": LOAD_REPORTED, "payload": {"cv": 0.5}}
    )
    with pytest.raises(RuntimeError, match="a bug"):
        await communicator.wait(timeout=2)
