"""The bundle map page in Chromium at scale, printed as a Markdown table.

    .venv/bin/python -m tests.benchmarks.bundle_map [--namespaces 100] [--bundles 64 128]
        [--brokers 16] [--runs 3]

For each bundle count: a throwaway SQLite database and Redis with ``--namespaces`` namespaces of
that many bundles over ``--brokers`` brokers, every broker's load report ingested (so every
bundle has load), Uvicorn serving ``console.asgi:application``, and Debian's Chromium logged in
(Playwright). Times, per run: the selector alone (``selectors.bundle_map``), the page from
navigation until every bundle is drawn ("interactive": the click handler is attached then),
a click on a segment until its panel shows, and the live refresh (``/api/bundle-map/`` fetched
and redrawn). Prints the medians and the JSON size.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.browser import CHROMIUM, LAUNCH_ARGS, WHERE, login
from tests.support import free_port, redis_server


def seed(namespaces: int, bundles: int, brokers: int) -> None:
    """The cluster, its owners, and one load report per broker with every bundle's stats."""
    from django.contrib.auth.models import Group, User

    from balancer.bundles import initial_boundaries
    from console.access import OPERATORS_GROUP
    from console.models import Broker, Bundle, Cluster, Namespace, Tenant
    from console.services.ingest import load_report_ingest

    cluster = Cluster.objects.create(name="bench")
    tenant = Tenant.objects.create(cluster=cluster, name="t")
    rows = Broker.objects.bulk_create(
        [Broker(cluster=cluster, name=f"broker-{j:02d}") for j in range(brokers)]
    )
    owned: dict[str, dict[str, dict[str, float]]] = {b.name: {} for b in rows}
    points = initial_boundaries(bundles)
    for i in range(namespaces):
        namespace = Namespace.objects.create(tenant=tenant, name=f"t/ns{i:03d}")
        made = Bundle.objects.bulk_create(
            Bundle(namespace=namespace, lower=a, upper=b, owner=rows[(i + k) % brokers])
            for k, (a, b) in enumerate(itertools.pairwise(points))
        )
        for k, bundle in enumerate(made):
            bundle.namespace = namespace
            owned[rows[(i + k) % brokers].name][bundle.name] = {
                "msgRateIn": 10.0 * (k % 7 + 1),
                "msgRateOut": 10.0,
                "msgThroughputIn": 1024.0 * (k % 11 + 1),
                "msgThroughputOut": 1024.0,
                "topics": k % 5 + 1,
            }
    for name, stats in owned.items():
        load_report_ingest(
            json.dumps(
                {
                    "name": name,
                    "cpu": {"usage": 40.0, "limit": 100.0},
                    "bundles": list(stats),
                    "bundleStats": stats,
                }
            ).encode(),
            as_broker=None,
        )
    user = User.objects.create_user("bench", password="bench-pass-1")
    user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])


def measure(port: int, runs: int) -> dict[str, list[float]]:
    """Per run: page to every segment drawn, click to panel, refresh and redraw (s)."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"page": [], "click": [], "refresh": []}
    base = f"http://127.0.0.1:{port}"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        page = login(browser, base, "bench", "bench-pass-1", width=1600)
        for _ in range(runs):
            started = time.perf_counter()
            page.goto(f"{base}/bundles/")
            page.wait_for_function(
                "() => { const c = document.getElementById('bundle-map');"
                " return c && c.dataset.bundles && c.dataset.drawn === c.dataset.bundles; }",
                timeout=60_000,
            )
            out["page"].append(time.perf_counter() - started)
            timing = page.evaluate(
                "() => { const t = performance.getEntriesByType('navigation')[0];"
                " return [t.responseEnd, t.domContentLoadedEventEnd]; }"
            )
            out.setdefault("html", []).append(timing[0] / 1000)
            out.setdefault("dom", []).append(timing[1] / 1000)
            name = page.evaluate(
                "() => { const ns = JSON.parse(document.getElementById('map-data').textContent)"
                ".namespaces[7]; const b = ns.bundles[5]; const h = (n) => '0x' +"
                " n.toString(16).padStart(8, '0'); return `${ns.name}/${h(b[0])}_${h(b[1])}`; }"
            )
            where = page.evaluate(WHERE, name)
            started = time.perf_counter()
            page.mouse.click(where["x"], where["y"])
            page.wait_for_function(
                "(name) => document.getElementById('panel-title').textContent === name", arg=name
            )
            out["click"].append(time.perf_counter() - started)
            started = time.perf_counter()
            page.evaluate(
                "async () => { const r = await fetch('/api/bundle-map/');"
                " const d = await r.json(); window.__d = d; }"
            )
            page.evaluate(
                "() => new Promise((done) => { const c = document.getElementById('bundle-map');"
                " c.once ? c.once('plotly_afterplot', done) : done();"
                " document.getElementById('map-view').dispatchEvent(new Event('change')); })"
            )
            out["refresh"].append(time.perf_counter() - started)
            # The treemap view: each broker's 60 busiest bundles; then, on a click of a broker's
            # "other bundles" tile, every bundle of that broker.
            started = time.perf_counter()
            page.select_option("#map-view", "treemap")
            page.wait_for_selector("#bundle-map g.trace.treemap")
            out.setdefault("treemap", []).append(time.perf_counter() - started)
            slices = page.locator("#bundle-map g.trace.treemap g.slice").count()
            started = time.perf_counter()
            page.evaluate(
                "() => document.getElementById('bundle-map').emit('plotly_treemapclick',"
                " {points: [{id: 'broker-00/other'}]})"
            )
            page.wait_for_function(
                "(before) => document.querySelectorAll('#bundle-map g.trace.treemap g.slice')"
                ".length > before",
                arg=slices,
                timeout=60_000,
            )
            out.setdefault("focus", []).append(time.perf_counter() - started)
            shots = Path(os.environ.get("FULCRUM_VAR_DIR", "var")) / "screenshots"
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "bundle-map-treemap-broker.png"), full_page=True)
            page.select_option("#map-view", "ranges")
        browser.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--bundles", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--brokers", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"{args.namespaces} namespaces; {args.brokers} brokers; {os.cpu_count()} cores; "
        f"Chromium headless; median of {args.runs} runs"
    )
    print()
    print(
        "| bundles | selector (s) | JSON (KB) | page → every bundle drawn (s) | click → panel (s) "
        "| fetch + redraw (s) | HTML received / DOM ready (s) | treemap (s) "
        "| one broker's every bundle (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for bundles in args.bundles:
        row = (
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.benchmarks.bundle_map",
                    "--one",
                    str(args.namespaces),
                    str(bundles),
                    str(args.brokers),
                    str(args.runs),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        print(row)


def one(namespaces: int, bundles: int, brokers: int, runs: int) -> None:
    """One row, in a process of its own (Django is set up once per database)."""
    workdir = Path(tempfile.mkdtemp(prefix="fulcrum-map-"))
    redis_port, web_port = free_port(), free_port()
    redis = redis_server(redis_port, workdir)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FULCRUM_DEMO": "1",
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "FULCRUM_LOG_LEVEL": "WARNING",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from console import selectors

    call_command("migrate", verbosity=0)
    seed(namespaces, bundles, brokers)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        data = selectors.bundle_map()
        times.append(time.perf_counter() - started)
    size = len(json.dumps(data)) / 1024
    web = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "uvicorn"),
            "console.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(web_port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env=env,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", web_port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        got = measure(web_port, runs)
    finally:
        web.terminate()
        web.wait(timeout=20)
        redis.terminate()
        shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"| {namespaces} × {bundles} = {namespaces * bundles:,} | {statistics.median(times):.2f} "
        f"| {size:,.0f} | {statistics.median(got['page']):.2f} "
        f"| {statistics.median(got['click']):.2f} | {statistics.median(got['refresh']):.2f} "
        f"| {statistics.median(got['html']):.2f} / {statistics.median(got['dom']):.2f} "
        f"| {statistics.median(got['treemap']):.2f} | {statistics.median(got['focus']):.2f} |"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        one(*(int(v) for v in sys.argv[2:6]))
    else:
        main()
