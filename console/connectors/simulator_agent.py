"""The simulator's agent: plays the demo cluster against a live console over HTTP
(``python -m console.connectors.simulator_agent``); it imports no Django, being the brokers' side.

Each step plays one trace minute: fetch bundle ownership, look up one topic of every unowned
bundle (the console places it, as a Pulsar lookup would), then post each broker's load report
for exactly the bundles it owns. An unload therefore changes the load reported next.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import requests

from balancer.simulator.layout import DEMO, Layout
from balancer.simulator.model import BundleMap, background_cpu, broker_report, bundle_stats
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import DEFAULT_SCALE, Workload, build_workload

log = logging.getLogger("fulcrum.simulator")


class ConsoleClient:
    """The console's broker-facing API (broker token)."""

    def __init__(self, base_url: str, token: str, timeout_s: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Broker {token}"
        self.timeout_s = timeout_s

    def ownership(self) -> dict[str, str | None]:
        """Bundle name -> owner (None while unassigned)."""
        response = self.session.get(f"{self.base_url}/api/ownership/", timeout=self.timeout_s)
        response.raise_for_status()
        return {b["name"]: b["owner"] for b in response.json()["bundles"]}

    def lookup(self, topic: str) -> dict[str, Any]:
        """Topic -> bundle -> owner (places the bundle when unowned)."""
        response = self.session.get(
            f"{self.base_url}/api/lookup/", params={"topic": topic}, timeout=self.timeout_s
        )
        response.raise_for_status()
        return dict(response.json())

    def report(self, doc: dict[str, Any]) -> None:
        """Post one load report; a 4xx is logged with the console's reason. A report refused
        for ownership drift (a bundle moved away since ownership was read) is sent again
        without the bundles the console names."""
        response = self.session.post(
            f"{self.base_url}/api/load-reports/", json=doc, timeout=self.timeout_s
        )
        error = _error(response)
        if response.status_code == 400 and error.get("code") == "ownership_drift":
            gone = set(error.get("drift", []))
            doc = {
                **doc,
                "bundles": [b for b in doc.get("bundles", []) if b not in gone],
                "bundleStats": {
                    k: v for k, v in doc.get("bundleStats", {}).items() if k not in gone
                },
            }
            response = self.session.post(
                f"{self.base_url}/api/load-reports/", json=doc, timeout=self.timeout_s
            )
        if response.status_code >= 400:
            log.warning(
                "report of %s refused: %s %s", doc["name"], response.status_code, response.text
            )


def _error(response: requests.Response) -> dict[str, Any]:
    """The console's ``{"error": {...}}`` body, {} when there is none."""
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


@dataclass
class Simulator:
    """State of one simulated cluster between steps."""

    layout: Layout
    workload: Workload
    cpu: dict[str, np.ndarray]
    client: ConsoleClient
    minute: int = 0
    bundle_map: BundleMap | None = field(default=None)

    def step(self, now: float) -> dict[str, Any]:
        """Play one trace minute; returns what was reported (broker -> usage figures)."""
        owners = self.client.ownership()
        if self.bundle_map is None or set(self.bundle_map.bundle_names) != set(owners):
            self.bundle_map = BundleMap.build(self.workload, list(owners))
        for bundle, topic in self.bundle_map.first_topic(self.workload).items():
            if owners.get(bundle) is None:
                # A lookup the console refuses (say no broker can take the bundle yet: all of
                # them are lost until they report again) leaves the bundle unowned; the
                # brokers' reports must still go out, or they never come back.
                try:
                    owners[bundle] = self.client.lookup(topic)["owner"]
                except requests.HTTPError as exc:
                    log.warning("lookup of %s refused: %s", topic, exc)
        stats = bundle_stats(self.workload, self.bundle_map, self.minute, with_topics=True)
        owned: dict[str, list[str]] = {b.name: [] for b in self.layout.brokers}
        for bundle, owner in owners.items():
            if owner in owned:
                owned[owner].append(bundle)
        sent = {}
        for spec in self.layout.brokers:
            doc = broker_report(
                spec, owned[spec.name], stats, background_cpu(self.cpu[spec.name], self.minute), now
            )
            self.client.report(doc)
            sent[spec.name] = {"bundles": len(owned[spec.name]), "cpu": doc["cpu"]["usage"]}
        self.minute += 1
        return sent


def build(
    layout: Layout, traces_dir: Path, client: ConsoleClient, scale: float, start_minute: int
) -> Simulator:
    """Load the traces and set up a simulator at ``start_minute``."""
    workload = build_workload(layout, load_functions(traces_dir), scale=scale)
    cpu = {b.name: load_cpu_series(traces_dir, b.cpu_series) for b in layout.brokers}
    return Simulator(layout, workload, cpu, client, minute=start_minute)


def run_forever(
    sim: Simulator,
    step_s: float,
    steps: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Step every ``step_s`` wall seconds (a trace minute each) until ``steps`` are done or forever.

    A console that is not up yet, or a failed step, is retried at the next step.
    """
    done = 0
    while steps is None or done < steps:
        started = time.monotonic()
        try:
            sent = sim.step(time.time())
            log.info("trace minute %d: %s", sim.minute - 1, sent)
            done += 1
        except requests.RequestException as exc:
            log.warning("console unreachable (%s); retrying", exc)
        sleep(max(0.0, step_s - (time.monotonic() - started)))


def main(argv: list[str] | None = None) -> None:
    """Play the demo cluster against a console."""
    parser = argparse.ArgumentParser(
        prog="python -m console.connectors.simulator_agent", description=__doc__
    )
    parser.add_argument(
        "--console", default=os.environ.get("FULCRUM_CONSOLE_URL", "http://127.0.0.1:8000")
    )
    parser.add_argument(
        "--token", default=os.environ.get("FULCRUM_BROKER_TOKEN", "fulcrum-dev-broker-token")
    )
    parser.add_argument("--traces", type=Path, default=default_traces_dir())
    parser.add_argument(
        "--step-seconds",
        type=float,
        default=float(os.environ.get("FULCRUM_SIM_STEP_S", "2")),
        help="wall seconds per trace minute (default 2)",
    )
    parser.add_argument(
        "--scale", type=float, default=DEFAULT_SCALE, help="messages per invocation"
    )
    parser.add_argument("--start-minute", type=int, default=0)
    parser.add_argument(
        "--steps", type=int, default=None, help="stop after this many trace minutes"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sim = build(
        DEMO, args.traces, ConsoleClient(args.console, args.token), args.scale, args.start_minute
    )
    run_forever(sim, args.step_seconds, args.steps)


if __name__ == "__main__":
    main()
