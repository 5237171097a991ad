"""Fulcrum against a real Apache Pulsar (``make test-pulsar``): the official
``apachepulsar/pulsar`` image, one 3.x and one 4.x release, each with the modular and the
extensible load manager. Two brokers on the host's network (Pulsar standalone with ZooKeeper as
its metadata store, and a second broker joined to its ZooKeeper and bookie), so that per-broker
calls reach each broker's advertised address. Fulcrum attaches, takes control, moves a bundle to
the other broker, splits one, releases control; after each step Pulsar's own view is read with
plain admin calls (not Fulcrum's connector): its dynamic configuration, each broker's owned
bundles, the namespace's bundles.

Skipped, with one line saying why, when no container runtime answers (``docker info``), as on
the machines Fulcrum is built on. Images: ``FULCRUM_PULSAR_IMAGES`` (comma-separated, default
``apachepulsar/pulsar:3.3.9,apachepulsar/pulsar:4.0.10``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from tests.support import free_ports

IMAGES = os.environ.get(
    "FULCRUM_PULSAR_IMAGES", "apachepulsar/pulsar:3.3.9,apachepulsar/pulsar:4.0.10"
).split(",")
MANAGERS = {
    "modular": {},
    "extensible": {
        "loadManagerClassName": (
            "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
        ),
        "loadBalancerLoadSheddingStrategy": (
            "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
        ),
        "loadBalancerSheddingEnabled": "true",
    },
}
NAMESPACE = "fulcrum/real"


def _runtime() -> tuple[str, str]:
    """(the container command, "") or ("", why there is none)."""
    docker = shutil.which("docker") or shutil.which("podman")
    if docker is None:
        return "", "no container runtime: neither docker nor podman is installed"
    done = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no answer"
        return "", f"no container runtime: `{docker} info` failed ({why})"
    return docker, ""


RUNTIME, WHY = _runtime()
pytestmark = pytest.mark.skipif(not RUNTIME, reason=WHY)


def _wait(url: str, seconds: float = 240.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=3).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise AssertionError(f"{url} did not answer within {seconds:.0f} s")


@pytest.fixture(params=[(i, m) for i in IMAGES for m in MANAGERS], ids=lambda p: f"{p[0]}-{p[1]}")
def pulsar(request) -> Iterator[tuple[str, str, str]]:
    """Two brokers of the image and load manager: (first broker's web URL, second's, manager)."""
    image, manager = request.param
    zk, bookie, web_a, web_b, bin_a, bin_b = free_ports(6)
    tag = uuid.uuid4().hex[:8]
    common = {
        "clusterName": "standalone",
        "advertisedAddress": "127.0.0.1",
        "managedLedgerDefaultEnsembleSize": "1",
        "managedLedgerDefaultWriteQuorum": "1",
        "managedLedgerDefaultAckQuorum": "1",
        **MANAGERS[manager],
    }

    def env(values: dict[str, str]) -> list[str]:
        return [arg for k, v in values.items() for arg in ("-e", f"PULSAR_PREFIX_{k}={v}")]

    first = [
        RUNTIME,
        "run",
        "-d",
        "--rm",
        "--network",
        "host",
        "--name",
        f"fulcrum-a-{tag}",
        "-e",
        "PULSAR_STANDALONE_USE_ZOOKEEPER=1",
        *env(common | {"webServicePort": str(web_a), "brokerServicePort": str(bin_a)}),
        image,
        "sh",
        "-c",
        "bin/apply-config-from-env.py conf/standalone.conf && bin/pulsar standalone -nfw -nss "
        f"--zookeeper-port {zk} --bookkeeper-port {bookie}",
    ]
    second = [
        RUNTIME,
        "run",
        "-d",
        "--rm",
        "--network",
        "host",
        "--name",
        f"fulcrum-b-{tag}",
        *env(
            common
            | {
                "webServicePort": str(web_b),
                "brokerServicePort": str(bin_b),
                "metadataStoreUrl": f"zk:127.0.0.1:{zk}",
                "configurationMetadataStoreUrl": f"zk:127.0.0.1:{zk}",
                "bookkeeperMetadataServiceUri": f"metadata-store:zk:127.0.0.1:{zk}/ledgers",
            }
        ),
        image,
        "sh",
        "-c",
        "bin/apply-config-from-env.py conf/broker.conf && bin/pulsar broker",
    ]
    started = []
    try:
        subprocess.run(first, check=True, timeout=600)
        started.append(f"fulcrum-a-{tag}")
        a, b = f"http://127.0.0.1:{web_a}", f"http://127.0.0.1:{web_b}"
        _wait(f"{a}/admin/v2/brokers/health")
        subprocess.run(second, check=True, timeout=600)
        started.append(f"fulcrum-b-{tag}")
        _wait(f"{b}/admin/v2/brokers/health")
        yield a, b, manager
    finally:
        for name in started:
            subprocess.run([RUNTIME, "stop", "-t", "10", name], capture_output=True, timeout=60)


def _owners(base: str, brokers: list[str]) -> dict[str, str]:
    """Pulsar's own view: bundle -> the broker listing it as owned."""
    out = {}
    for broker in brokers:
        owned = httpx.get(
            f"{base}/admin/v2/brokers/standalone/{broker}/ownedNamespaces",
            follow_redirects=True,
            timeout=30,
        ).json()
        out |= {bundle: broker for bundle in owned if bundle.startswith(NAMESPACE + "/")}
    return out


def test_fulcrum_observes_takes_control_moves_splits_and_releases(pulsar, db, settings):
    from console.models import AuditEvent, PulsarConnection, PulsarMove
    from console.services.control import control_release, control_take
    from console.services.executor import moves_queue
    from console.services.pulsar import pulsar_sync_run
    from console.services.seed import config_seed

    a, b, manager = pulsar
    settings.FULCRUM_PULSAR_URL = ""
    settings.FULCRUM_PULSAR_TAKE_CONTROL_AT_START = False
    brokers = sorted(httpx.get(f"{a}/admin/v2/brokers/standalone", timeout=30).json())
    assert len(brokers) == 2
    httpx.put(
        f"{a}/admin/v2/tenants/fulcrum",
        json={"allowedClusters": ["standalone"], "adminRoles": []},
        timeout=30,
    )
    httpx.put(
        f"{a}/admin/v2/namespaces/{NAMESPACE}", json={"bundles": {"numBundles": 4}}, timeout=30
    )
    for i in range(16):  # topics, looked up so that every bundle gets an owner
        httpx.put(f"{a}/admin/v2/persistent/{NAMESPACE}/t-{i}", timeout=30)
        httpx.get(f"{a}/lookup/v2/topic/persistent/{NAMESPACE}/t-{i}", timeout=30)
    config_seed()
    connection = PulsarConnection.objects.create(name="real", admin_url=a, is_attached=True)
    seen = pulsar_sync_run()
    assert seen is not None
    assert seen["cluster"] == "standalone"
    assert seen["reports"] == 2, seen
    assert seen["refused"] == [], seen
    # Take control: Pulsar's own dynamic configuration says shedding is off.
    control_take(connection.pk, actor=None, confirm=True, now=datetime.now(UTC))
    values = httpx.get(f"{a}/admin/v2/brokers/configuration/values", timeout=30).json()
    assert values.get("loadBalancerSheddingEnabled") == "false"
    # Move a bundle to the other broker; Pulsar's ownedNamespaces show it there.
    owners = _owners(a, brokers)
    bundle, source = sorted(owners.items())[0]
    destination = next(x for x in brokers if x != source)
    move = PulsarMove(
        kind="unload",
        bundle=bundle,
        source=source,
        destination=destination,
        created_at=datetime.now(UTC),
    )
    moves_queue(
        connection,
        [
            (
                move,
                AuditEvent(
                    at=datetime.now(UTC), action="unload", target=bundle, reason="make test-pulsar"
                ),
            )
        ],
    )
    pulsar_sync_run()  # sent
    for _ in range(30):
        if manager == "modular":  # the hint is taken by the next lookup of one of its topics
            for i in range(16):
                httpx.get(f"{a}/lookup/v2/topic/persistent/{NAMESPACE}/t-{i}", timeout=30)
        pulsar_sync_run()
        move.refresh_from_db()
        if move.state == "done":
            break
        time.sleep(2)
    assert move.outcome in ("as-planned", "elsewhere"), move.outcome_reason
    now_on = _owners(a, brokers).get(bundle)
    if move.outcome == "as-planned":
        assert now_on == destination  # Pulsar's own view agrees with the verification
    else:
        assert now_on not in (None, source), now_on
    # Split one owned bundle at its middle: Pulsar's bundles of the namespace show the cut.
    before = httpx.get(f"{a}/admin/v2/namespaces/{NAMESPACE}/bundles", timeout=30).json()
    bundle, owner = sorted(_owners(a, brokers).items())[-1]
    lo, hi = (int(x, 16) for x in bundle.rsplit("/", 1)[1].split("_"))
    split = PulsarMove(
        kind="split",
        bundle=bundle,
        source=owner,
        algorithm="range_equally_divide",
        created_at=datetime.now(UTC),
    )
    moves_queue(
        connection,
        [
            (
                split,
                AuditEvent(
                    at=datetime.now(UTC), action="split", target=bundle, reason="make test-pulsar"
                ),
            )
        ],
    )
    pulsar_sync_run()
    after = httpx.get(f"{a}/admin/v2/namespaces/{NAMESPACE}/bundles", timeout=30).json()
    assert after["numBundles"] == before["numBundles"] + 1
    assert f"0x{lo + (hi - lo) // 2:08x}" in after["boundaries"]
    # Release control: Pulsar's configuration as before (the override Fulcrum set removed).
    control_release(connection.pk, actor=None, confirm=True, now=datetime.now(UTC))
    values = httpx.get(f"{a}/admin/v2/brokers/configuration/values", timeout=30).json()
    assert "loadBalancerSheddingEnabled" not in values
    runtime = httpx.get(f"{b}/admin/v2/brokers/configuration/runtime", timeout=30).json()
    assert runtime["loadBalancerSheddingEnabled"] == "true"
