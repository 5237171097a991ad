"""Shared fixtures: a small seeded cluster, an operator, API clients for operators and brokers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from balancer.simulator.layout import BrokerSpec, Layout

SMALL = Layout(
    cluster="test",
    brokers=(
        BrokerSpec("broker-1", "zone-a", "unused"),
        BrokerSpec("broker-2", "zone-a", "unused"),
        BrokerSpec("broker-3", "zone-b", "unused"),
    ),
    namespaces=("acme/orders", "acme/payments"),
    bundles_per_namespace=4,
)
MIB = 1024 * 1024

# CI replays the same examples every run: a red build is then a bug, never bad luck. Coverage of
# balancer/ never depends on them (the example tests alone reach 100 %).
# No deadline: a test is never timed (speed goals live in the benchmarks), and under
# pytest-xdist a property test runs beside the serial stack tests, whose processes take the
# machine's cores (a 200 ms deadline failed at 449 ms on a loaded machine).
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None)
hypothesis_settings.register_profile("local", deadline=None)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "local")


# Every JVM the tests start lives for seconds on tiny data (a local SparkSession, spark-submit of
# a report run, a standalone master and worker): Java's client compiler alone (C1) and its serial
# collector spend 40 % less CPU on such a run (test_spark_jobs.py: 50 s -> 29 s here) than the
# server compiler, which pays off only on long jobs. Spark's launcher adds SPARK_SUBMIT_OPTS to
# the driver's JVM and SPARK_DAEMON_JAVA_OPTS to a master's and a worker's; the product's own
# runs keep Java's defaults. Set here, the test processes and every stack they start inherit it.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JVM_OPTIONS)

# The console's tests empty the live load store before and after each test: never make run's.
MAKE_RUN_STORE = "redis://127.0.0.1:6390/0"
REDIS_URL = os.environ.get("REDIS_URL", MAKE_RUN_STORE)  # as given, before a worker's own below

# The tests that start make run's stack (or a benchmark's) of several processes, with timing
# checks: two of them at once would each have half the machine. Marked ``serial`` here by their
# file; with ``--dist loadgroup`` (`make test`) they form one group, run one after another on
# one worker while the other workers take the rest (docs/developers/testing.md).
SERIAL_FILES = {
    "tests/test_deadman_stack.py",
    "tests/test_faults_stack.py",
    "tests/test_job_kills.py",
    "tests/test_multi_process_stack.py",
    "tests/test_scale_short.py",
    "tests/test_soak_short.py",
}
# Under --dist loadgroup, a file the scheduler creates once only the serial tests are left to run
# (or none): `make test` then starts its PostgreSQL pass in the CPU they leave idle
# (scripts/test-passes).
PARALLEL_DONE_FILE = os.environ.get("FULCRUM_TEST_PARALLEL_DONE_FILE", "")
# Files whose tests share one module-scoped fixture too dear to start twice (a local Spark
# session, about 9 s of CPU): under --dist loadgroup each is one group, run on one worker.
WHOLE_FILES = {"tests/console/test_spark_jobs.py"}


def worker_redis_url(url: str, worker: str) -> str:
    """``url``'s Redis database for pytest-xdist's worker ``worker`` (gw0, gw1, ...): the URL's
    own number plus the worker's index, so that workers never empty each other's load store,
    queues or channel groups."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    number = int(parts.path.strip("/") or 0) + int(worker.removeprefix("gw"))
    # Redis has 16 databases unless started with more (make test starts its own with one for
    # each worker of each pass, and says how many here).
    databases = int(os.environ.get("FULCRUM_TEST_REDIS_DATABASES", "16"))
    if number >= databases:
        raise ValueError(
            f"{url}: no Redis database {number} for xdist worker {worker} (the server has "
            f"{databases}; start it with --databases and set FULCRUM_TEST_REDIS_DATABASES)"
        )
    return urlunsplit(parts._replace(path=f"/{number}"))


def _worker_redis() -> None:
    """Under pytest-xdist, point this worker at its own Redis database: the settings (read
    before this file by pytest-django) and the environment its subprocesses inherit."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or REDIS_URL == MAKE_RUN_STORE:
        return
    from console.settings import channel_layer_host

    url = worker_redis_url(REDIS_URL, worker)
    os.environ["REDIS_URL"] = url
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        if getattr(settings, name) == REDIS_URL:
            setattr(settings, name, url)
    layer = settings.CHANNEL_LAYERS["default"]
    if layer.get("CONFIG", {}).get("hosts", [{}])[0].get("address") == REDIS_URL:
        layer["CONFIG"]["hosts"] = [channel_layer_host(url)]


_worker_redis()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("::")[0] in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
        elif item.get_closest_marker("serial"):
            raise pytest.UsageError(
                f"{item.nodeid}: a serial test's file goes in SERIAL_FILES (tests/conftest.py), "
                "which the scheduler reads (it never sees the marks)"
            )


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown when it is off (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    return serial_group_scheduling(config, log, parallel_done=PARALLEL_DONE_FILE)


def serial_group_scheduling(config: pytest.Config, log: Any, *, parallel_done: str) -> Any:
    """``--dist loadgroup``'s scheduler: xdist's, with SERIAL_FILES' tests as one more group,
    "serial", sent first, and each of WHOLE_FILES as a group of its own; once only serial tests
    are left to run (and the few queued behind them), it creates the file ``parallel_done`` (if
    given). Known by their file: the scheduler sees node ids, not marks, and pytest 9.2 no
    longer lets xdist 3.8 put an ``xdist_group`` into a node id (pytest-dev/pytest-xdist#1386),
    so that mark groups nothing here."""
    from xdist.scheduler import LoadGroupScheduling

    class SerialGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            if path in SERIAL_FILES:
                return "serial"
            if path in WHOLE_FILES:
                return path
            return super()._split_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # xdist queues the groups largest (most tests) first: the serial one, the longest
            # to run, goes first, so that it starts at once.
            if "serial" in self.workqueue:
                self.workqueue.move_to_end("serial", last=False)
            super()._assign_work_unit(node)

        def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            if parallel_done and not self.workqueue and self._only_serial_left():
                Path(parallel_done).touch()

        def _only_serial_left(self) -> bool:
            """Every test run but the serial ones and those queued behind them: xdist sends a
            worker more once it has 2 tests or fewer left, and a worker starts a test only
            once it has the next (xdist/remote.py), so the serial worker's last test starts
            only with one or two more queued behind it, run minutes later."""
            for work in self.assigned_work.values():
                if not all(work.get("serial", {}).values()):
                    continue
                if not all(done for tests in work.values() for done in tests.values()):
                    return False
            return True

    return SerialGroupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if REDIS_URL == MAKE_RUN_STORE:
        pytest.exit(
            "REDIS_URL names make run's live load store (127.0.0.1:6390, db 0), which these "
            "tests empty: run `make test`, or point REDIS_URL at another Redis or database "
            "number (e.g. redis://127.0.0.1:6390/15)",
            returncode=4,
        )


# Bundle name -> the stats its owner's reports carry (``bundle_load``); emptied for each test.
BUNDLE_LOADS: dict[str, dict] = {}


def bundle_load(name: str, **stats) -> None:
    """Make the owner's next reports carry these stats for bundle ``name`` (msgRateIn, ...,
    msgThroughputOut in msg/s and bytes/s; topics, producers, consumers)."""
    BUNDLE_LOADS[name] = {**BUNDLE_LOADS.get(name, {}), **stats}


def report(name: str, cpu: float, *, bundles=(), throughput_mib: float = 0.0, stats=None, **extra):
    """A valid load report for ``name`` with CPU at ``cpu`` % and the given owned bundles; their
    stats are ``stats`` or what ``bundle_load`` set."""
    half = throughput_mib * MIB / 2
    return {
        "name": name,
        "cpu": {"usage": cpu, "limit": 100},
        "memory": {"usage": 1024, "limit": 8192},
        "bandwidthIn": {"usage": half, "limit": 10_000_000_000},
        "bandwidthOut": {"usage": half, "limit": 10_000_000_000},
        "msgRateIn": 100.0,
        "msgRateOut": 100.0,
        "msgThroughputIn": half,
        "msgThroughputOut": half,
        "bundles": list(bundles),
        "topics": 10,
        "bundleStats": (
            stats if stats is not None else {n: dict(BUNDLE_LOADS.get(n, {})) for n in bundles}
        ),
        **extra,
    }


def ingest(doc, *, as_broker=None):
    """Ingest a load report document as the API would (its JSON body)."""
    import json

    from console.services.ingest import load_report_ingest

    return load_report_ingest(json.dumps(doc).encode(), as_broker=as_broker)


def owned_and_reported(cpu=lambda i: 20.0):
    """Every bundle owned, round-robin over the brokers, and a load report from each broker
    (``cpu(i)`` percent for the i-th); returns the brokers."""
    from console.models import Broker, Bundle

    brokers = list(Broker.objects.all())
    for i, bundle in enumerate(Bundle.objects.all()):
        bundle.owner = brokers[i % len(brokers)]
        bundle.save()
    for i, broker in enumerate(brokers):
        ingest(report(broker.name, cpu(i)))
    return brokers


@pytest.fixture
def cluster(db):
    """The small layout seeded: 3 brokers in 2 domains, 2 namespaces × 4 unowned bundles; its
    balancer runs Pulsar's ThresholdShedder and LeastLongTermMessageRate (the behaviour these
    tests pin down), not the console's default Fulcrum strategies (``fulcrum_cluster``)."""
    from console.selectors import balancer_config_get
    from console.services.seed import cluster_seed

    seeded = cluster_seed(SMALL)
    config = balancer_config_get()
    config.shedder, config.placement = "ThresholdShedder", "LeastLongTermMessageRate"
    config.save(update_fields=["shedder", "placement"])
    return seeded


@pytest.fixture
def fulcrum_cluster(db):
    """The small layout seeded with the console's default strategies (Fulcrum's)."""
    from console.services.seed import cluster_seed

    return cluster_seed(SMALL)


@pytest.fixture
def operator(db):
    from django.contrib.auth.models import Group

    from console.access import OPERATORS_GROUP

    user = User.objects.create_user("alice", password="s3cret-pass")
    user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
    return user


@pytest.fixture
def viewer(db):
    return User.objects.create_user("bob", password="s3cret-pass")


@pytest.fixture
def operator_client(operator):
    client = APIClient()
    client.force_authenticate(operator)
    return client


@pytest.fixture
def broker_client():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Broker {settings.FULCRUM_BROKER_TOKEN}")
    return client
