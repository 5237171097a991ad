"""The live path heals itself: the websocket layer survives a Redis restart, and a task whose
worker died mid-run runs again."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from console.settings import channel_layer_host
from tests.console.conftest import user_created
from tests.support import free_port, redis_server


@pytest.fixture
def private_redis(tmp_path, settings):
    port = free_port()
    process = redis_server(port, tmp_path)
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [channel_layer_host(f"redis://127.0.0.1:{port}/0")]},
        }
    }
    channel_layers.backends.clear()
    state = {"process": process, "port": port, "dir": tmp_path}
    yield state
    state["process"].terminate()
    state["process"].wait(timeout=10)
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
async def test_a_redis_restart_during_a_websocket_session_needs_no_second_try(private_redis):

    from console.consumers import ClusterConsumer
    from console.realtime import CLUSTER_GROUP

    application = ClusterConsumer.as_asgi()

    user = await user_created("dora", "s3cret-pass")

    async def session():
        communicator = WebsocketCommunicator(application, "/ws/cluster/")
        communicator.scope["user"] = user
        connected, detail = await communicator.connect(timeout=5)
        return communicator, connected, detail

    first, connected, _ = await session()
    assert connected
    layer = channel_layers["default"]
    await layer.group_send(CLUSTER_GROUP, {"type": "balancer.decision_made", "payload": {"n": 1}})
    assert (await first.receive_json_from(timeout=5))["payload"] == {"n": 1}
    # Redis restarts (0.2 s down); the pooled connections are now stale.
    private_redis["process"].terminate()
    private_redis["process"].wait(timeout=10)
    time.sleep(0.2)
    private_redis["process"] = redis_server(private_redis["port"], private_redis["dir"])
    await first.disconnect()
    started = time.monotonic()
    second, connected, _ = await session()
    assert connected, f"the first reconnect after the restart was refused: {_}"
    await layer.group_send(CLUSTER_GROUP, {"type": "balancer.decision_made", "payload": {"n": 2}})
    assert (await second.receive_json_from(timeout=5))["payload"] == {"n": 2}
    assert time.monotonic() - started < 5
    await second.disconnect()


def test_a_task_whose_worker_died_mid_run_runs_again(tmp_path):
    port = free_port()
    redis = redis_server(port, tmp_path)
    url = f"redis://127.0.0.1:{port}/0"
    env = {
        **os.environ,
        "FULCRUM_DEMO": "1",
        "REDIS_URL": url,
        "FULCRUM_TASK_VISIBILITY_S": "2",
        "DATABASE_URL": f"sqlite:///{tmp_path}/worker.sqlite3",
    }
    celery = str(Path(sys.executable).parent / "celery")
    command = [
        celery,
        "-A",
        "console",
        "worker",
        "-I",
        "tests.console.crash_tasks",
        "-Q",
        "crashq",
        "--pool=solo",
        "--without-gossip",
        "--without-mingle",
        "--loglevel=WARNING",
    ]
    marker = tmp_path / "marker"
    workers = []
    try:
        from celery import Celery
        from django.conf import settings

        # A client of its own: the console's app may hold connections to the tests' Redis.
        client = Celery(
            broker=url,
            broker_transport_options={
                **settings.CELERY_BROKER_TRANSPORT_OPTIONS,
                "visibility_timeout": 2,
            },
        )
        client.send_task("tests.console.crash_tasks.crash_once", args=[str(marker)], queue="crashq")
        first = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        workers.append(first)
        assert first.wait(timeout=60) != 0  # killed by the task
        assert marker.read_text() == "crashed"
        workers.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and marker.read_text() != "ran again":
            time.sleep(0.5)
        assert marker.read_text() == "ran again"
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=20)
        redis.terminate()
        redis.wait(timeout=10)
