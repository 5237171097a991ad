"""Fulcrum held against the contract fixtures of ``tests/contracts/pulsar`` (README there): one
directory per Pulsar line and load manager, one fixture per endpoint and case, each derived field
by field from the Java class that produces the answer, with the class and a commit (or index id)
in its ``_source`` header. Nothing in them was recorded from a live broker.

- The connector replays them: every call Fulcrum makes, answered by the fixture of that line,
  is read as Pulsar means it (the cluster's name, owners, redirects, units, the report's time,
  refusals with their reasons, the no-boundary split).
- The simulated cluster answers the same requests with the same fields: a field the fixture has
  and the simulator lacks, or the other way round, fails (objects whose keys are data — bundle,
  topic, config names — are compared by the fields of their values; an empty map or list on
  either side is a state, not a missing field); statuses and redirect targets must match too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest
import respx

from balancer.simulator.layout import DEMO
from console.connectors.pulsar_cluster import PulsarCluster
from console.pulsar.admin import PulsarAdmin, PulsarAdminError
from console.pulsar.observe import (
    LB_KEYS,
    cluster_name_get,
    extensible_report,
    is_system_bundle,
    parse_metrics,
    report_document,
)
from console.services.executor import NO_BOUNDARY
from tests.support import free_ports

CONTRACTS = Path(__file__).resolve().parents[1] / "contracts" / "pulsar"
# Line -> (the version the simulator reports, its load manager).
LINES = {
    "2.10-modular": ("2.10.6", "modular"),
    "3.x-modular": ("3.3.2", "modular"),
    "3.x-extensible": ("3.3.2", "extensible"),
    "4.x-modular": ("4.0.6", "modular"),
    "4.x-extensible": ("4.0.6", "extensible"),
}
B0, B1 = "broker-0.us-west.example.com:8080", "broker-1.us-west.example.com:8080"
TOKEN = "contract-token"


def fixtures(line: str) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((CONTRACTS / line).glob("*.json"))}


def test_there_is_a_fixture_directory_per_line_and_every_fixture_names_its_source():
    assert sorted(p.name for p in CONTRACTS.iterdir() if p.is_dir()) == sorted(LINES)
    for line in LINES:
        found = fixtures(line)
        assert len(found) >= 30, line
        for name, fixture in found.items():
            source = fixture["_source"]
            assert source["pulsar"] == line.split("-")[0], name
            # A fixture no file was read for says so (a parameter 2.10 lacks, a list not re-read).
            said = source["notes"].lower()
            assert source["files"] or "inferred" in said or "not re-read" in said, name
            for file in source["files"]:
                assert file.get("commit") or file.get("indexId"), (line, name, file)
            assert {"method", "path", "baseUrl"} <= set(fixture["request"]), name
            assert isinstance(fixture["response"]["status"], int), name


# -- the connector replays the fixtures ----------------------------------------------------------


Key = tuple[str, str, str, tuple[tuple[str, str], ...], str]


def _key(method: str, url: str, body: Any = None) -> Key:
    """A request as the replay finds its fixture: method, base URL, path, query (without the
    ``authoritative`` flag Pulsar rewrites at each hop) and JSON body."""
    parts = urlsplit(url)
    query = parse_qs(parts.query, keep_blank_values=True)
    query.pop("authoritative", None)
    pairs = tuple(sorted((k, v[-1]) for k, v in query.items()))
    text = "" if body in (None, b"", "") else json.dumps(body, sort_keys=True)
    return method, f"{parts.scheme}://{parts.netloc}", parts.path, pairs, text


class Replay:
    """A respx side effect answering each request with its fixture; ``skip`` fixtures of
    another state (after a set, a chain's later hop served under a different query)."""

    def __init__(self, found: dict[str, dict[str, Any]], skip: tuple[str, ...] = ()) -> None:
        self.answers: dict[Key, dict[str, Any]] = {}
        self.asked: list[str] = []
        for name, fixture in found.items():
            if name in skip:
                continue
            request = fixture["request"]
            query = f"?{request['query']}" if request.get("query") else ""
            url = request["baseUrl"] + request["path"] + query
            key = _key(request["method"], url, request.get("body"))
            self.answers.setdefault(key, fixture | {"name": name})

    def serve(self, name: str, url: str, method: str = "GET") -> None:
        """Answer ``url`` with fixture ``name`` too (the same class answers it there)."""
        fixture = next(f for f in self.answers.values() if f["name"] == name)
        self.answers[_key(method, url)] = fixture

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        fixture = self.answers.get(_key(request.method, str(request.url), body))
        if fixture is None:
            return httpx.Response(404, json={"reason": f"no fixture for {request.url}"})
        if "AUTH-401" not in fixture["name"] and request.headers.get("authorization") is None:
            fixture = next(f for f in self.answers.values() if f["name"] == "AUTH-401-no-token")
        self.asked.append(fixture["name"])
        response = fixture["response"]
        content = b""
        if "body" in response:
            content = json.dumps(response["body"]).encode()
        elif "text" in response:
            content = response["text"].encode()
        return httpx.Response(response["status"], headers=response.get("headers"), content=content)


@pytest.fixture(params=sorted(LINES))
def replay(request):
    line = request.param
    found = fixtures(line)
    replay = Replay(found, skip=("E16-configuration-values-after-set", "AUTH-401-no-token"))
    replay.answers[("GET", "http://broker-0.us-west.example.com:8080", "/401", (), "")] = found[
        "AUTH-401-no-token"
    ] | {"name": "AUTH-401-no-token"}
    # Any broker answers these the same (BrokersBase, BrokerStatsBase on the broker asked).
    replay.serve("E3-leader-broker", f"http://{B0}/admin/v2/brokers/leaderBroker")
    with respx.mock(assert_all_called=False) as router:
        router.route().mock(side_effect=replay)
        yield line, found, replay


def test_the_connector_reads_every_answer_as_pulsar_means_it(replay):
    line, found, served = replay
    modular = LINES[line][1] == "modular"
    with PulsarAdmin(f"http://{B0}", token=TOKEN) as admin:
        runtime = admin.runtime_config()
        # E1 lists the remote cluster first: the name is the brokers' own (E17).
        assert admin.clusters()[0] == "us-east"
        assert cluster_name_get(admin, None, runtime) == ("us-west", "clusterName")
        assert admin.brokers("us-west") == [B0, B1]
        info = admin.leader()
        assert (info.get("brokerId") or urlsplit(info["serviceUrl"]).netloc) == B0
        assert ("brokerId" in info) == (line != "2.10-modular")
        mine = admin.owned_bundles("us-west", B0)
        theirs = admin.owned_bundles("us-west", B1)  # a 307 to broker-1 on the way
        assert "E4-owned-namespaces-redirect-http" in served.asked
        owned = sorted(b for b in mine if not is_system_bundle(b))
        assert owned == [
            "acme/billing/0x00000000_0x80000000",
            "acme/orders/0x00000000_0x40000000",
            "acme/orders/0x80000000_0xc0000000",
        ]
        assert sorted(b for b in theirs if not is_system_bundle(b)) == [
            "acme/billing/0x80000000_0xffffffff",
            "acme/orders/0x40000000_0x80000000",
        ]
        assert admin.failure_domains("us-west") == {"zone-a": [B0], "zone-b": [B1]}
        assert set(admin.tenants()) == {"acme", "pulsar"}
        assert [n for n in admin.namespaces("pulsar") if not is_system_bundle(n + "/")] == []
        assert admin.bundle_boundaries("acme/orders") == [
            "0x00000000",
            "0x40000000",
            "0x80000000",
            "0xc0000000",
            "0xffffffff",
        ]
        assert admin.anti_affinity_group("acme/orders") == "orders-ha"
        assert admin.anti_affinity_group("acme/billing") is None
        if modular:
            data = admin.load_report(B0)
            doc = report_document(B0, data, list(mine), read_at=1_760_000_000.0)
            assert doc["timestamp"] == 1_760_000_000.0  # read now, not lastUpdate
            assert data["lastUpdate"] / 1000 < doc["timestamp"] - 60
            assert sorted(doc["bundles"]) == owned
            assert set(doc["bundleStats"]) == set(data["lastStats"])  # idle billing absent
            assert doc["bandwidthIn"]["usage"] == pytest.approx(
                data["bandwidthIn"]["usage"] * 1000 / 8  # kbit/s -> bytes/s
            )
            assert doc["cpu"] == data["cpu"]
            default = parse_metrics(B0, found["E14-metrics"]["response"]["text"])
            assert set(default.usage) == {
                "cpu",
                "memory",
                "directMemory",
                "bandwidthIn",
                "bandwidthOut",
            }
            # With pulsar_bundle_* exported, the same usage and nothing more is read: those
            # metrics come from the same bundle stats as lastStats.
            exported = parse_metrics(B0, found["E14-metrics-bundles"]["response"]["text"])
            assert exported.usage == default.usage
            bundles = found["E14-metrics-bundles"]["response"]["text"]
            labelled = {
                line.split('bundle="')[1].split('"')[0]
                for line in bundles.splitlines()
                if line.startswith("pulsar_bundle_")
            }
            assert labelled == set(data["lastStats"])  # the fixture agrees with the source
        else:
            with pytest.raises(PulsarAdminError) as unsupported:
                admin.load_report(B0)
            assert unsupported.value.status == 500
            usage = parse_metrics(B0, found["E14-metrics"]["response"]["text"]).usage
            topics = admin.topic_stats(B1)
            report = extensible_report(B1, usage, topics)
            flows = [
                t["msgRateIn"]
                for ranges in topics.values()
                for domains in ranges.values()
                for each in domains.values()
                for t in each.values()
            ]
            assert report["msgRateIn"] == pytest.approx(sum(flows))
            assert report["cpu"]["usage"] == usage["cpu"]
        names = admin.dynamic_config_names()
        assert {"loadBalancerSheddingEnabled", "loadBalancerAutoBundleSplitEnabled"} <= set(names)
        assert admin.dynamic_overrides() == found["E16-configuration-values"]["response"]["body"]
        admin.set_dynamic_config("loadBalancerSheddingEnabled", "false")  # 200, no body
        admin.delete_dynamic_config("loadBalancerSheddingEnabled")
        with pytest.raises(PulsarAdminError) as static:
            admin.set_dynamic_config("loadBalancerEnabled", "false")
        expected = found["E18-configuration-set-non-dynamic"]["response"]["body"]["reason"]
        assert (static.value.status, static.value.reason) == (412, expected)
        admin.unload("acme/orders/0x00000000_0x40000000")  # asked of its owner: 204
        admin.unload("acme/orders/0xc0000000_0xffffffff")  # nobody owns it: 204, nothing done
        with (
            PulsarAdmin(f"http://{B1}", token=TOKEN) as other,
            pytest.raises(PulsarAdminError) as inactive,
        ):
            other.unload(
                "acme/orders/0x40000000_0x80000000", destination="broker-9.us-west.example.com:8080"
            )
        if line != "2.10-modular":
            assert inactive.value.status == 409
            assert inactive.value.reason == (
                "Not allowed unload namespace bundle to inactive destination broker"
            )
        admin.split("acme/orders/0x00000000_0x40000000", "specified_positions_divide", [989855744])
        with pytest.raises(PulsarAdminError) as unknown:
            admin.split("acme/orders/0x00000000_0x40000000", "unknown_divide", [989855744])
        assert unknown.value.status == 412
        assert unknown.value.reason.startswith("Unsupported namespace bundle split algorithm")
    with PulsarAdmin(f"http://{B0}") as anonymous, pytest.raises(PulsarAdminError) as refused:
        anonymous.request("GET", "/401")
    assert refused.value.status == 401
    assert "Authentication required" in refused.value.reason  # Jetty's page, by its title


def test_a_split_pulsar_finds_no_boundary_for_is_told_apart(replay):
    _, found, _ = replay
    fixture = found["A2-split-no-valid-boundary"]
    answer, positions = fixture["response"], fixture["request"]["body"]
    bundle = "acme/orders/0x00000000_0x40000000"
    with PulsarAdmin(f"http://{B0}", token=TOKEN) as admin:
        if answer["status"] == 204:  # the modular load manager: nothing split, nothing said
            admin.split(bundle, "specified_positions_divide", positions)
            return
        with pytest.raises(PulsarAdminError) as failed:
            admin.split(bundle, "specified_positions_divide", positions)
    assert failed.value.status == 500
    assert NO_BOUNDARY.search(failed.value.reason), failed.value.reason


def test_an_unload_to_a_destination_follows_pulsar_s_hops(replay):
    line, _, served = replay
    if line == "2.10-modular":
        return  # no destinationBroker before 3.0 (A1-unload-destination-ignored)
    modular = LINES[line][1] == "modular"
    entry = B1 if modular else B0
    with PulsarAdmin(f"http://{entry}", token=TOKEN) as admin:
        admin.unload("acme/orders/0x40000000_0x80000000", destination=B0)
    chain = [n for n in served.asked if n.startswith("A1-unload-destination")]
    if modular:
        assert chain == [
            "A1-unload-destination-leader-hop",
            "A1-unload-destination-at-leader",
            "A1-unload-destination-owner",
        ]
    else:
        assert chain == ["A1-unload-destination-owner-hop", "A1-unload-destination-owner"]


def test_over_https_a_broker_s_url_is_the_one_pulsar_redirects_to(replay):
    line, _, served = replay
    tls0 = "https://broker-0.us-west.example.com:8443"
    served.serve(
        "E4-owned-namespaces-broker-1",
        "https://broker-1.us-west.example.com:8443"
        "/admin/v2/brokers/us-west/broker-1.us-west.example.com:8080/ownedNamespaces",
    )
    with PulsarAdmin(tls0, token=TOKEN) as admin:
        try:
            admin.owned_bundles("us-west", B1)
        except PulsarAdminError:
            # 2.10's validateBrokerName keeps the id's (http) port: a real 2.10 broker answers
            # TLS there with nothing Fulcrum can use either.
            assert line == "2.10-modular"
        learned = admin.broker_urls.get(B1)
    if line == "2.10-modular":
        assert learned is None or learned.endswith(":8080")
    else:
        assert learned == "https://broker-1.us-west.example.com:8443"


# -- the simulator answers with the fixtures' fields ---------------------------------------------


def _matches(path: str, pattern: str) -> bool:
    a, b = path.split("."), pattern.split(".")
    return len(a) == len(b) and all(q in ("*", p) for p, q in zip(a, b, strict=True))


def shape(value: Any, maps: list[str]) -> tuple[set[str], set[str]]:
    """(the field paths of ``value``, the paths of its empty maps and lists). Keys of an object
    at a ``maps`` path (``$`` the root, ``*`` any key, ``[]`` any element) are data: written
    ``*``."""
    paths: set[str] = set()
    empty: set[str] = set()

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            is_map = any(_matches(path or "$", m) for m in maps)
            if not node:
                empty.add(path)
            for key, child in node.items():
                step = "*" if is_map else key
                sub = f"{path}.{step}" if path else step
                paths.add(sub)
                walk(child, sub)
        elif isinstance(node, list):
            if not node:
                empty.add(path)
            for child in node:
                paths.add(f"{path}[]")
                walk(child, f"{path}[]")

    walk(value, "")
    return paths, empty


def same_fields(fixture_body: Any, ours: Any, maps: list[str]) -> tuple[set[str], set[str]]:
    """(fields the fixture has and ours lacks, fields ours has and the fixture lacks)."""
    theirs, theirs_empty = shape(fixture_body, maps)
    mine, mine_empty = shape(ours, maps)
    empty = theirs_empty | mine_empty

    def kept(paths: set[str]) -> set[str]:
        return {
            p
            for p in paths
            if not any(p.startswith(e + ".") or p.startswith(e + "[]") for e in empty if e)
        }

    return kept(theirs) - kept(mine), kept(mine) - kept(theirs)


class Simulated:
    """The simulator of one line, its brokers standing for the fixtures' (broker-0, the leader,
    and broker-1), and the same request translated for it."""

    def __init__(self, workload, line: str, **options: Any) -> None:
        version, manager = LINES[line]
        cpu = {b.name: np.full(288, 30.0) for b in DEMO.brokers}
        self.cluster = PulsarCluster(
            workload,
            cpu,
            token=TOKEN,
            ports=free_ports(8),
            pulsar_version=version,
            load_manager=manager,
            **options,
        )
        self.cluster.step(0.0)
        self.ids = self.cluster.broker_ids
        self.names = {
            B0: self.ids[0],
            B1: self.ids[1],
            "broker-9.us-west.example.com:8080": "127.0.0.1:9",
        }

    def bundle(self, owner: str, topics: int = 0) -> str:
        return next(
            b
            for b, o in sorted(self.cluster.owners.items())
            if o == owner
            and not self.cluster.is_system(b)
            and len(self.cluster._stats.get(b, {}).get("topicStats", [])) >= topics
        )

    def ask(
        self,
        broker: str,
        method: str,
        path: str,
        query: str = "",
        body: bytes = b"",
        *,
        is_secure: bool = False,
        token: bool = True,
    ):
        return self.cluster.handle(
            broker,
            method,
            path,
            query,
            {"Authorization": f"Bearer {TOKEN}"} if token else {},
            body,
            is_secure=is_secure,
        )


def _body(answer) -> Any:
    content = answer[2]
    return json.loads(content) if content else None


# Fixtures compared by their JSON fields: name -> the simulator's request (broker, path, query).
def _json_requests(sim: Simulated) -> dict[str, tuple[str, str, str, str]]:
    ids = sim.ids
    return {
        "E1-clusters": (ids[0], "GET", "/admin/v2/clusters", ""),
        "E2-brokers-local": (ids[0], "GET", "/admin/v2/brokers/demo", ""),
        "E3-leader-broker": (ids[1], "GET", "/admin/v2/brokers/leaderBroker", ""),
        "E4-owned-namespaces-self": (
            ids[0],
            "GET",
            f"/admin/v2/brokers/demo/{ids[0]}/ownedNamespaces",
            "",
        ),
        "E4-owned-namespaces-broker-1": (
            ids[1],
            "GET",
            f"/admin/v2/brokers/demo/{ids[1]}/ownedNamespaces",
            "",
        ),
        "E5-failure-domains": (ids[0], "GET", "/admin/v2/clusters/demo/failureDomains", ""),
        "E6-tenants": (ids[0], "GET", "/admin/v2/tenants", ""),
        "E7-namespaces-acme": (ids[0], "GET", "/admin/v2/namespaces/acme", ""),
        "E7-namespaces-pulsar": (ids[0], "GET", "/admin/v2/namespaces/pulsar", ""),
        "E8-bundles-acme-orders": (ids[0], "GET", "/admin/v2/namespaces/acme/orders/bundles", ""),
        "E11-load-report": (ids[0], "GET", "/admin/v2/broker-stats/load-report", ""),
        "E12-broker-stats-topics": (ids[1], "GET", "/admin/v2/broker-stats/topics", ""),
        "E15-configuration-names": (ids[0], "GET", "/admin/v2/brokers/configuration", ""),
        "E16-configuration-values": (ids[0], "GET", "/admin/v2/brokers/configuration/values", ""),
        "E17-configuration-runtime": (ids[0], "GET", "/admin/v2/brokers/configuration/runtime", ""),
        "E18-configuration-set-non-dynamic": (
            ids[0],
            "POST",
            "/admin/v2/brokers/configuration/loadBalancerEnabled/false",
            "",
        ),
    }


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_simulator_answers_with_the_fixtures_fields_and_statuses(workload, line):
    found = fixtures(line)
    sim = Simulated(workload, line)
    differences = {}
    for name, (broker, method, path, query) in _json_requests(sim).items():
        fixture = found[name]
        answer = sim.ask(broker, method, path, query)
        assert answer[0] == fixture["response"]["status"], (name, answer[0])
        if "body" not in fixture["response"]:
            # A text body marked "prefix" is Pulsar's banner, the message and a stack trace
            # whose lines depend on the build: the banner and the exception class must match.
            theirs, ours = fixture["response"]["text"], answer[2].decode()
            assert fixture["response"].get("textMatch") == "prefix", name
            assert "--- An unexpected error occurred in the server ---" in ours, name
            exception = re.search(r"java\.[\w.]+(?:Exception|Error)", theirs)
            assert exception is not None, name
            assert exception.group(0) in ours, (name, ours)
            continue
        lacking, extra = same_fields(fixture["response"]["body"], _body(answer), fixture["maps"])
        if lacking or extra:
            differences[name] = {
                "the simulator lacks": sorted(lacking),
                "only the simulator": sorted(extra),
            }
    assert differences == {}
    # E17 is a map of every setting: the keys Fulcrum reads must be there as in the fixture.
    runtime = found["E17-configuration-runtime"]["response"]["body"]
    ours = _body(sim.ask(sim.ids[0], "GET", "/admin/v2/brokers/configuration/runtime"))
    read = {"clusterName", "loadManagerClassName", *LB_KEYS} & set(runtime)
    assert read <= set(ours), read - set(ours)
    assert {k for k in runtime if "xposeBun" in k} <= set(ours)  # 2.10's spelling on 2.10
    # After a set, the overrides are a map of strings in both.
    sim.ask(sim.ids[0], "POST", "/admin/v2/brokers/configuration/loadBalancerSheddingEnabled/false")
    after = found["E16-configuration-values-after-set"]
    values = _body(sim.ask(sim.ids[0], "GET", "/admin/v2/brokers/configuration/values"))
    assert same_fields(after["response"]["body"], values, after["maps"]) == (set(), set())
    assert values == after["response"]["body"]


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_simulator_s_statuses_redirects_and_refusals_are_the_fixtures(workload, line):
    found = fixtures(line)
    sim = Simulated(workload, line, tls_ports=free_ports(8))
    ids, status = sim.ids, (lambda name: found[name]["response"]["status"])
    modular = LINES[line][1] == "modular"

    def location(answer) -> tuple[str, str, dict[str, list[str]]]:
        parts = urlsplit(answer[1]["Location"])
        return parts.scheme, parts.netloc, parse_qs(parts.query)

    # E2 of the remote cluster: a 307 to its service URL, the path kept.
    remote = sim.ask(ids[0], "GET", "/admin/v2/brokers/demo-dr")
    assert remote[0] == status("E2-brokers-remote-cluster") == 307
    assert urlsplit(remote[1]["Location"]).path == "/admin/v2/brokers/demo-dr"
    # E4 asked of another broker, over http and https.
    path = f"/admin/v2/brokers/demo/{ids[1]}/ownedNamespaces"
    plain = sim.ask(ids[0], "GET", path)
    assert plain[0] == status("E4-owned-namespaces-redirect-http") == 307
    assert location(plain)[:2] == ("http", ids[1])
    secure = sim.ask(ids[0], "GET", path, is_secure=True)
    expected = urlsplit(
        found["E4-owned-namespaces-redirect-https"]["response"]["headers"]["Location"]
    )
    port = expected.netloc.rsplit(":", 1)[1]  # 8443 (its TLS port) from 3.0; 8080 (the id's) before
    assert secure[0] == 307
    assert location(secure)[:2] == (
        "https",
        f"127.0.0.1:{sim.cluster.tls_port_of[ids[1]]}" if port == "8443" else ids[1],
    )
    unknown = sim.ask(ids[0], "GET", "/admin/v2/brokers/demo/127.0.0.1:9/ownedNamespaces")
    assert unknown[0] == status("E4-owned-namespaces-unknown-broker")
    if unknown[0] == 404:
        want = found["E4-owned-namespaces-unknown-broker"]["response"]["body"]["reason"]
        assert _body(unknown)["reason"] == want.replace(
            "broker-9.us-west.example.com:8080", "127.0.0.1:9"
        )
    # E9: the group as raw text under application/json, none as 204.
    group = sim.ask(ids[0], "GET", "/admin/v2/namespaces/acme/orders-east/antiAffinity")
    fixture = found["E9-anti-affinity-acme-orders"]["response"]
    assert (group[0], group[1]["Content-Type"].split(";")[0]) == (
        fixture["status"],
        fixture["headers"]["Content-Type"],
    )
    assert sim.ask(ids[0], "GET", "/admin/v2/namespaces/acme/orders/antiAffinity")[0] == status(
        "E9-anti-affinity-acme-billing"
    )
    # E11 under the extensible manager: the 500 banner.
    if not modular:
        report = sim.ask(ids[0], "GET", "/admin/v2/broker-stats/load-report")
        assert report[0] == status("E11-load-report") == 500
        assert "--- An unexpected error occurred in the server ---" in report[2].decode()
    # E18 / E19 statuses.
    config = "/admin/v2/brokers/configuration/loadBalancerSheddingEnabled"
    assert sim.ask(ids[0], "POST", config + "/false")[0] == status("E18-configuration-set")
    assert sim.ask(ids[0], "DELETE", config)[0] == status("E19-configuration-delete")
    # A1: to the owner 204; through another broker 307 to the owner; unowned 204.
    mine = sim.bundle(ids[0])
    unload = f"/admin/v2/namespaces/{mine}/unload"
    hop = sim.ask(ids[1], "PUT", unload)
    assert hop[0] == status("A1-unload-redirect-to-owner") == 307
    assert location(hop)[1] == ids[0]
    want = parse_qs(
        urlsplit(found["A1-unload-redirect-to-owner"]["response"]["headers"]["Location"]).query
    )
    assert location(hop)[2] == want
    assert sim.ask(ids[0], "PUT", unload)[0] == status("A1-unload-owner") == 204
    assert sim.ask(ids[0], "PUT", unload)[0] == status("A1-unload-unowned") == 204
    # A1 with a destination: the hops of each load manager, their queries as the fixtures'.
    theirs = sim.bundle(ids[1])
    unload = f"/admin/v2/namespaces/{theirs}/unload"
    dest = f"destinationBroker={ids[0]}"
    if line != "2.10-modular":
        inactive = sim.ask(ids[1], "PUT", unload, "destinationBroker=127.0.0.1:9")
        assert inactive[0] == 409
        assert _body(inactive) == found["A1-unload-destination-inactive"]["response"]["body"]
    if line == "2.10-modular":
        assert sim.ask(ids[1], "PUT", unload, dest)[0] == status("A1-unload-destination-ignored")
    elif modular:
        first = sim.ask(ids[1], "PUT", unload, dest)
        assert first[0] == status("A1-unload-destination-leader-hop") == 307
        want = parse_qs(
            urlsplit(
                found["A1-unload-destination-leader-hop"]["response"]["headers"]["Location"]
            ).query
        )
        assert location(first)[1] == ids[0]
        assert set(location(first)[2]) == set(want)
        assert location(first)[2]["authoritative"] == want["authoritative"]
        second = sim.ask(ids[0], "PUT", unload, dest + "&authoritative=false")
        assert second[0] == status("A1-unload-destination-at-leader") == 307
        want = parse_qs(
            urlsplit(
                found["A1-unload-destination-at-leader"]["response"]["headers"]["Location"]
            ).query
        )
        assert location(second)[1:] == (ids[1], want)
        last = sim.ask(ids[1], "PUT", unload, "authoritative=true")
        assert last[0] == status("A1-unload-destination-owner") == 204
    else:
        first = sim.ask(ids[0], "PUT", unload, dest)
        assert first[0] == status("A1-unload-destination-owner-hop") == 307
        want = parse_qs(
            urlsplit(
                found["A1-unload-destination-owner-hop"]["response"]["headers"]["Location"]
            ).query
        )
        assert location(first)[1] == ids[1]
        assert {k: v for k, v in location(first)[2].items() if k != "destinationBroker"} == {
            k: v for k, v in want.items() if k != "destinationBroker"
        }
        last = sim.ask(ids[1], "PUT", unload, dest + "&authoritative=true")
        assert last[0] == status("A1-unload-destination-owner") == 204
    # A2: a split at a position inside 204; outside: no boundary (204 or 500); unsupported 412.
    sim.cluster.step(0.0)
    bundle = sim.bundle(ids[0], topics=2)
    hashes = sorted(sim.cluster._stats[bundle]["topicStats"], key=lambda t: t["topic"])
    from balancer.hashing import topic_hash

    points = sorted(topic_hash(t["topic"]) for t in hashes)
    inside = points[0] + (points[1] - points[0]) // 2 + 1
    split = f"/admin/v2/namespaces/{bundle}/split"
    specified = "unload=false&splitAlgorithmName=specified_positions_divide"
    unsupported = sim.ask(
        ids[0],
        "PUT",
        split,
        "unload=false&splitAlgorithmName=unknown_divide",
        json.dumps([inside]).encode(),
    )
    assert unsupported[0] == status("A2-split-unsupported-algorithm") == 412
    assert _body(unsupported) == found["A2-split-unsupported-algorithm"]["response"]["body"]
    nothing = sim.ask(ids[0], "PUT", split, specified, b"[1]")
    assert nothing[0] == status("A2-split-no-valid-boundary")
    if nothing[0] == 500:
        assert "java.lang.IllegalStateException" in nothing[2].decode()
        assert NO_BOUNDARY.search(nothing[2].decode())
    done = sim.ask(ids[0], "PUT", split, specified, json.dumps([inside]).encode())
    assert done[0] == status("A2-split") == 204
    assert bundle not in sim.cluster.owners
    # No token: 401.
    assert sim.ask(ids[0], "GET", "/admin/v2/clusters", token=False)[0] == status(
        "AUTH-401-no-token"
    )


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_simulator_s_metrics_have_the_fixtures_families_and_labels(workload, line):
    found = fixtures(line)

    def families(text: str) -> dict[str, set[str]]:
        from prometheus_client.parser import text_string_to_metric_families

        out: dict[str, set[str]] = {}
        for family in text_string_to_metric_families(text):
            if family.name.startswith(("pulsar_lb_", "pulsar_bundle_")):  # derived from source
                out[family.name] = {k for s in family.samples for k in s.labels}
        return out

    cases = [("E14-metrics", False)]
    if "E14-metrics-bundles" in found:
        cases.append(("E14-metrics-bundles", True))
    for name, exported in cases:
        sim = Simulated(workload, line, expose_bundle_metrics=exported)
        text = sim.ask(sim.ids[0], "GET", "/metrics")[2].decode()
        assert families(text) == families(found[name]["response"]["text"]), name


def test_the_field_comparison_sees_a_field_missing_or_added_and_ignores_data_keys():
    fixture = {"a": 1, "stats": {"x/1": {"rate": 1.0, "count": 2}}, "list": [{"k": 1}], "m": {}}
    maps = ["stats"]
    same = {"a": 2, "stats": {"y/9": {"rate": 0.0, "count": 0}}, "list": [], "m": {"z": {"q": 1}}}
    assert same_fields(fixture, same, maps) == (set(), set())
    lacking = {"stats": {"y/9": {"rate": 0.0}}, "list": [{"k": 1, "new": 0}], "m": {}}
    assert same_fields(fixture, lacking, maps) == ({"a", "stats.*.count"}, {"list[].new"})
