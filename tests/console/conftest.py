"""The console's tests run against the tests' own Redis (``make test`` starts it)."""

from datetime import UTC, datetime

import pytest
import respx
import time_machine

from balancer.simulator.layout import DEMO
from balancer.simulator.traces import default_traces_dir, load_functions
from balancer.simulator.workload import build_workload
from console.connectors.pulsar_cluster import PulsarCluster
from tests.conftest import BUNDLE_LOADS
from tests.console.pulsar_world import TOKEN, answer, flat_cpu

START = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _live_load_store():
    """Each test starts with an empty live load store (on the tests' own Redis)."""
    from console import loadstore

    loadstore.clear()
    BUNDLE_LOADS.clear()
    yield
    loadstore.clear()


@pytest.fixture
def owns_one(cluster):
    """broker-1 owns acme/orders/0x00000000_0x40000000 (``test_ingest.BUNDLE``)."""
    from console.models import Broker, Bundle

    bundle = Bundle.objects.select_related("namespace").get(namespace__name="acme/orders", lower=0)
    bundle.owner = Broker.objects.get(name="broker-1")
    bundle.save()
    return bundle


@pytest.fixture(scope="session")
def workload():
    """The demo layout's topics and their rates from the traces (read once)."""
    return build_workload(DEMO, load_functions(default_traces_dir()))


@pytest.fixture
def pulsar_world(workload, db, settings):
    """The demo cluster answering through respx at its ports, the console attached, in control."""
    from console.models import PulsarConnection
    from console.services.connections import token_encrypt
    from console.services.control import control_take
    from console.services.pulsar import pulsar_sync_run
    from console.services.seed import config_seed

    settings.FULCRUM_PULSAR_URL = ""
    settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START = False

    def build(*, pulsar_sheds: bool = False, **options):
        """The cluster (``PulsarCluster``'s ``options``), observed once, control taken;
        ``pulsar_sheds``: Pulsar's own shedding on until then (off: nothing moves but
        Fulcrum's)."""
        cluster = PulsarCluster(workload, flat_cpu(), token=TOKEN, start_minute=600, **options)
        cluster.effective["loadBalancerSheddingEnabled"] = pulsar_sheds
        router.route().mock(side_effect=answer(cluster))
        config_seed()
        connection = PulsarConnection.objects.create(
            name="demo",
            admin_url=f"http://{cluster.broker_ids[0]}",
            token_encrypted=token_encrypt(TOKEN),
            is_attached=True,
        )
        cluster.step(datetime.now(UTC).timestamp())
        pulsar_sync_run()
        control_take(connection.pk, actor=None, confirm=True, now=datetime.now(UTC))
        return cluster, connection

    with (
        time_machine.travel(START, tick=False) as clock,
        respx.mock(assert_all_called=False) as router,
    ):
        yield build, clock


@pytest.fixture(autouse=True)
def _answers_match_the_schema(monkeypatch):
    """Every /api/ answer a test gets from Django's test client matches the OpenAPI schema of
    its operation and status (``tests.console.api_schema.check_answer``): the schema describes
    what the API answers, in every state the tests put it in."""
    from django.test import client

    from tests.console.api_schema import check_answer

    sent = client.Client.request

    def request(self, **kwargs):
        response = sent(self, **kwargs)
        path = kwargs.get("PATH_INFO", "")
        if path.startswith("/api/") and not path.startswith("/api/docs/"):
            check_answer(kwargs.get("REQUEST_METHOD", "GET"), path, response)
        return response

    monkeypatch.setattr(client.Client, "request", request)


async def user_created(username: str, password: str):
    """``User.objects.create_user`` from an async test: in asgiref's thread for sync code, whose
    database connection it then closes (``conn_max_age`` keeps it open otherwise, and PostgreSQL
    then cannot drop the test database at the end: a warning in every make test)."""
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import User
    from django.db import connection

    def create() -> User:
        try:
            return User.objects.create_user(username, password=password)
        finally:
            connection.close()

    return await sync_to_async(create)()
