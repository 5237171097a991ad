"""The simulator's HTTP loop against a stub console on loopback."""

import json
import logging
import runpy
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import requests

from balancer.bundles import bundles_from_boundaries, initial_boundaries
from balancer.simulator.layout import DEMO
from console.connectors.simulator_agent import ConsoleClient, build, main, run_forever


class StubConsole(BaseHTTPRequestHandler):
    owners: dict = {}
    reports: list = []
    token = "t0ken"
    refuse_lookups = False

    def log_message(self, *args):
        pass

    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.headers.get("Authorization") != f"Broker {self.token}":
            return self._reply(401, {"detail": "no"})
        url = urlparse(self.path)
        if url.path == "/api/ownership/":
            return self._reply(
                200, {"bundles": [{"name": n, "owner": o} for n, o in self.owners.items()]}
            )
        if self.refuse_lookups:
            return self._reply(409, {"error": {"message": "no broker can take it"}})
        topic = parse_qs(url.query)["topic"][0]
        namespace = "/".join(topic.split("://")[1].split("/")[:2])
        bundle = next(
            n for n, o in self.owners.items() if n.startswith(namespace + "/") and o is None
        )
        self.owners[bundle] = DEMO.brokers[len(self.reports) % 8].name
        return self._reply(200, {"topic": topic, "bundle": bundle, "owner": self.owners[bundle]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.reports.append(body)
        if body["name"] == DEMO.brokers[-1].name:
            return self._reply(400, {"error": {"message": "refused for the test", "field": "cpu"}})
        return self._reply(201, {"id": len(self.reports)})


@pytest.fixture
def console():
    StubConsole.owners = {
        b.name: None
        for ns in DEMO.namespaces
        for b in bundles_from_boundaries(ns, initial_boundaries(16))
    }
    StubConsole.reports = []
    StubConsole.refuse_lookups = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubConsole)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(autouse=True)
def agent_log(caplog):
    """The agent's logger as a standalone process has it (a Celery worker started by another
    test in this process may have disabled or detached it)."""
    logger = logging.getLogger("fulcrum.simulator")
    logger.disabled, logger.propagate = False, True
    caplog.set_level(logging.INFO, logger="fulcrum.simulator")


def test_one_step_looks_up_every_bundle_and_reports_every_broker(console, caplog):
    from tests.balancer.simulator.test_simulator import TRACES

    sim = build(DEMO, TRACES, ConsoleClient(console, "t0ken"), scale=100.0, start_minute=0)
    sleeps = []
    run_forever(sim, 2.0, steps=2, sleep=sleeps.append)
    assert all(StubConsole.owners.values())
    assert [r["name"] for r in StubConsole.reports[:8]] == [b.name for b in DEMO.brokers]
    StubConsole.reports[8:] = []
    assert sum(len(r["bundles"]) for r in StubConsole.reports) == 96
    assert "refused" in caplog.text  # a 4xx is logged, not fatal
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 2.0


def test_refused_lookups_never_stop_the_brokers_reports(console, caplog):
    # After a restart every broker may be lost (its last report is old): lookups are refused
    # until the brokers report again, so the reports must go out regardless.
    from tests.balancer.simulator.test_simulator import TRACES

    StubConsole.refuse_lookups = True
    sim = build(DEMO, TRACES, ConsoleClient(console, "t0ken"), scale=100.0, start_minute=0)
    run_forever(sim, 2.0, steps=1, sleep=lambda s: None)
    assert [r["name"] for r in StubConsole.reports] == [b.name for b in DEMO.brokers]
    assert "lookup of persistent://" in caplog.text


def test_an_unreachable_console_is_retried_not_fatal(caplog):
    from tests.balancer.simulator.test_simulator import TRACES

    sim = build(DEMO, TRACES, ConsoleClient("http://127.0.0.1:9", "x", timeout_s=0.5), 1.0, 0)
    calls = []

    def sleep(seconds):
        calls.append(seconds)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_forever(sim, 0.01, sleep=sleep)
    assert "console unreachable" in caplog.text
    assert sim.minute == 0


def test_bad_token_raises_from_the_client(console):
    with pytest.raises(requests.HTTPError):
        ConsoleClient(console, "wrong").ownership()
    with pytest.raises(requests.HTTPError):
        ConsoleClient(console, "wrong").lookup("persistent://acme/orders/x")


def test_main_plays_the_requested_steps(console, monkeypatch):
    main(["--console", console, "--token", "t0ken", "--steps", "1", "--step-seconds", "0"])
    assert len(StubConsole.reports) == 8
    monkeypatch.setattr(
        sys,
        "argv",
        ["sim", "--console", console, "--token", "t0ken", "--steps", "1", "--step-seconds", "0"],
    )
    # Run as `python -m` runs it, not imported already (runpy warns of that as unpredictable).
    monkeypatch.delitem(sys.modules, "console.connectors.simulator_agent")
    runpy.run_module("console.connectors.simulator_agent", run_name="__main__")
    assert len(StubConsole.reports) == 16
