"""Prometheus metrics (console/metrics.py): after an ingest, a tick and an operator's unload,
``/metrics`` carries Fulcrum's figures with the right names, types and labels (parsed with
prometheus-client's own parser); the scrape token; and multiprocess mode across processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ingest, report
from tests.console.test_balancing import names_of, own_all


@pytest.fixture(autouse=True)
def public_metrics(settings):
    """These tests read /metrics without a token (``test_the_scrape_token`` closes it)."""
    settings.FULCRUM_METRICS_PUBLIC = True


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def test_metrics_after_an_ingest_a_tick_and_an_unload(cluster, operator, client):
    from console.errors import ConsoleError
    from console.models import Bundle
    from console.services import bundle_unload, shedding_tick_run

    # The hot cluster of test_balancing: the tick unloads three bundles from broker-1.
    own_all(lambda i: "broker-1" if i < 6 else ("broker-2" if i < 7 else "broker-3"))
    for name, cpu, mib in (("broker-1", 95, 480), ("broker-2", 10, 80), ("broker-3", 12, 80)):
        ingest(report(name, cpu, bundles=names_of(name), throughput_mib=mib))
    with pytest.raises(ConsoleError):
        ingest({"name": "broker-2", "cpu": "busy"})
    before = scrape(client)
    accepted = {
        s.labels["result"]: s.value
        for s in before["fulcrum_load_reports"].samples
        if s.name.endswith("_total")
    }
    assert accepted["accepted"] >= 3
    assert accepted["refused"] >= 1
    shedding_tick_run()
    owned = Bundle.objects.select_related("namespace").filter(owner__name="broker-1").first()
    bundle_unload(owned.name, actor=operator, destination="broker-3", force=True)
    families = scrape(client)
    usage = families["fulcrum_broker_usage_ratio"]
    assert usage.type == "gauge"
    seen = {(s.labels["broker"], s.labels["resource"]): s.value for s in usage.samples}
    assert seen[("broker-1", "cpu")] == pytest.approx(0.95)
    assert {r for _, r in seen} == {
        "cpu",
        "memory",
        "direct_memory",
        "bandwidth_in",
        "bandwidth_out",
        "weighted",
    }
    assert families["fulcrum_cluster_usage_cv"].type == "gauge"
    assert families["fulcrum_cluster_usage_cv"].samples[0].value > 0
    assert families["fulcrum_cluster_max_over_mean_ratio"].samples[0].value > 1
    cycle = families["fulcrum_cycle_duration_seconds"]
    assert cycle.type == "histogram"
    count = next(s for s in cycle.samples if s.name.endswith("_count"))
    assert count.value >= 1
    actions = families["fulcrum_cycle_actions"]
    assert actions.type == "counter"
    kinds = {
        (s.labels["kind"], s.labels["outcome"])
        for s in actions.samples
        if s.name.endswith("_total")
    }
    assert ("unload", "planned") in kinds
    ages = families["fulcrum_load_report_age_seconds"]
    assert {s.labels["broker"] for s in ages.samples} >= {"broker-1", "broker-2", "broker-3"}
    moves = {
        s.labels["actor"]: s.value
        for s in families["fulcrum_moves"].samples
        if s.name.endswith("_total")
    }
    assert moves["operator"] >= 1
    assert moves["balancer"] >= 1
    for name in (
        "fulcrum_optimality_ratio",
        "fulcrum_history_report_duration_seconds",
        "fulcrum_pulsar_moves",
    ):
        assert name in families  # defined, even before a first value


def test_the_scrape_token(client, settings, db):
    # Neither a token nor public: closed, saying how to open it.
    settings.FULCRUM_METRICS_TOKEN = ""
    settings.FULCRUM_METRICS_PUBLIC = False
    closed = client.get("/metrics")
    assert closed.status_code == 403
    assert "FULCRUM_METRICS_TOKEN" in closed.content.decode()
    settings.FULCRUM_METRICS_PUBLIC = True
    scrape(client)
    settings.FULCRUM_METRICS_TOKEN = "scrape-me"
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    scrape(client, HTTP_AUTHORIZATION="Bearer scrape-me")


def test_multiprocess_mode_gathers_every_process(tmp_path):
    """Two processes write (a worker's gauge and counter), a third serves them all."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    write = (
        "import sys; from console import metrics; "
        "metrics.MOVES.labels(actor='balancer').inc(2); metrics.CLUSTER_CV.set(float(sys.argv[1]))"
    )
    for value in ("0.5", "0.25"):
        subprocess.run([sys.executable, "-c", write, value], env=env, check=True)
    read = "from console import metrics; print(metrics.exposition()[0].decode())"
    text = subprocess.run(
        [sys.executable, "-c", read], env=env, check=True, capture_output=True, text=True
    ).stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    moves = [s for s in families["fulcrum_moves"].samples if s.name == "fulcrum_moves_total"]
    assert moves[0].value == 4  # summed over the processes
    assert families["fulcrum_cluster_usage_cv"].samples[0].value == 0.25  # the most recent


def test_the_grafana_dashboard_reads_only_metrics_fulcrum_exports():
    """Every series the dashboard queries is one console.metrics defines (or its histogram
    buckets); the JSON is a dashboard Grafana imports (panels with Prometheus targets)."""
    import json
    import re
    from pathlib import Path

    from prometheus_client import REGISTRY

    from console import metrics  # noqa: F401  (registers the metrics)

    dashboard = json.loads(Path("deploy/grafana/fulcrum-dashboard.json").read_text())
    assert dashboard["uid"] == "fulcrum-balancer"
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    exported = {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("fulcrum_")
        for suffix in suffixes[family.type]
    }
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            queried |= set(re.findall(r"\bfulcrum_[a-z_]+", target["expr"]))
    assert queried
    assert queried <= exported, queried - exported
    assert {
        "fulcrum_cluster_usage_cv",
        "fulcrum_moves_total",
        "fulcrum_cycle_actions_total",
    } <= queried
