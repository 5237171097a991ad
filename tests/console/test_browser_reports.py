"""The history page in Debian's Chromium (Playwright): a load report and a strategy advisor run
through spark-submit on a small recorded history, their charts drawn, the advisor's ranking
adopted into the config editor as a draft, and a queued run cancelled from the page.
Screenshots go to var/screenshots/."""

import os
import shutil
from datetime import UTC, datetime, timedelta

import pytest
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.test import override_settings

from console.access import OPERATORS_GROUP
from console.models import AuditEvent, Broker, Bundle, ReportRun
from console.services.seed import cluster_seed
from tests.browser import CHROMIUM, LAUNCH_ARGS, login
from tests.conftest import SMALL, bundle_load, ingest, report

SHOTS = settings.VAR_DIR / "screenshots"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def recorded_history() -> None:
    """Twenty minutes of a small cluster: broker-1 owns most bundles and runs hot; a snapshot
    recorded every minute, every report folded, two moves audited; flushed to Parquet."""
    from console import selectors
    from console.services.history import history_flush
    from console.services.ingest import load_reports_fold
    from console.services.shedding import replay_record

    brokers = list(Broker.objects.order_by("name"))
    bundles = list(Bundle.objects.select_related("namespace").order_by("namespace__name", "lower"))
    for i, bundle in enumerate(bundles):
        bundle.owner = brokers[0] if i < 6 else brokers[1 + i % 2]
        bundle.save()
        bundle_load(
            bundle.name,
            msgRateIn=2000.0 * (i + 1),
            msgRateOut=1000.0,
            msgThroughputIn=(i + 1) * 1024 * 1024,
            msgThroughputOut=1024 * 1024,
            topics=4,
        )
    for minute in range(20):
        now = T0 + timedelta(minutes=minute)
        for broker, cpu in zip(brokers, (80, 25, 15), strict=True):
            owned = [b.name for b in bundles if b.owner_id == broker.pk]
            ingest(report(broker.name, cpu, bundles=owned) | {"timestamp": now.timestamp()})
        load_reports_fold()
        assert replay_record(selectors.cluster_snapshot_get(now=now), now)
    for minute, bundle in ((5, bundles[0]), (12, bundles[1])):
        AuditEvent.objects.create(
            at=T0 + timedelta(minutes=minute),
            action=AuditEvent.Action.UNLOAD,
            target=bundle.name,
            source="broker-1",
            destination="broker-3",
            reason="FulcrumShedder LoadImbalance",
        )
    history_flush()


@pytest.mark.browser
@pytest.mark.spark
class TestHistoryPageInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    @classmethod
    def setUpClass(cls):
        # The live server is another process: it must know the run's folders before it starts.
        import tempfile
        from pathlib import Path

        cls.root = Path(tempfile.mkdtemp(prefix="fulcrum-history-"))
        cls.saved = {k: os.environ.get(k) for k in ("FULCRUM_HISTORY_DIR", "FULCRUM_REPORTS_DIR")}
        os.environ["FULCRUM_HISTORY_DIR"] = str(cls.root / "history")
        os.environ["FULCRUM_REPORTS_DIR"] = str(cls.root / "runs")
        cls.overridden = override_settings(
            FULCRUM_HISTORY_DIR=cls.root / "history", FULCRUM_REPORTS_DIR=cls.root / "runs"
        )
        cls.overridden.enable()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.overridden.disable()
        for key, value in cls.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)
        user = User.objects.create_user("alice", password="s3cret-pass")
        user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
        SHOTS.mkdir(parents=True, exist_ok=True)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop

    def test_report_and_advisor_charts_adopt_and_cancel(self):
        from playwright.sync_api import expect, sync_playwright

        from console.reports.submit import report_run_execute
        from console.selectors import report_results
        from console.services.advisor import advisor_candidates

        root = self.root
        with override_settings(FULCRUM_REPLAY_WINDOW_S=10 * 365 * 86400):
            recorded_history()
            for kind in (ReportRun.Kind.REPORT, ReportRun.Kind.ADVISOR):
                run = report_run_execute(ReportRun.objects.create(master="local[2]", kind=kind).pk)
                assert run.status == ReportRun.Status.SUCCEEDED, (run.reason, run.log_tail)
                if kind == ReportRun.Kind.REPORT:
                    assert len(run.summary["written"]) == 5, run.summary
                    hot = report_results(run, "hot_bundles")["rows"]
                    assert hot, sorted((root / "history").rglob("*.parquet"))
            queued = ReportRun.objects.create(master="local[2]", kind=ReportRun.Kind.REPORT)
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS
                )
                page = login(browser, self.live_server_url, "alice", "s3cret-pass")
                page.goto(f"{self.live_server_url}/reports/")
                # The report's charts: load with the moves, CV per minute, hot bundles, namespaces.
                for chart in ("#load-chart", "#cv-chart", "#hot-chart", "#namespace-chart"):
                    expect(page.locator(f"{chart} .main-svg").first).to_be_visible()
                expect(page.locator("#hot-bundles tbody tr").first).to_contain_text("acme/")
                expect(page.locator("#move-summary")).to_contain_text("2 move(s)")
                expect(page.locator("#move-effects tbody tr")).to_have_count(2)
                # The advisor: every config ranked, the front drawn, the current one marked.
                expect(page.locator("#pareto-chart .main-svg").first).to_be_visible()
                count = len(advisor_candidates())
                expect(page.locator("#ranking tbody tr")).to_have_count(count)
                expect(page.locator("#advisor-summary")).to_contain_text(
                    f"{count} configs replayed"
                )
                page.screenshot(path=str(SHOTS / "history-report-and-advisor.png"), full_page=True)
                # Cancel the queued run from the page: confirmed, then shown cancelled.
                page.once("dialog", lambda dialog: dialog.accept())
                page.click(f"button.cancel[data-run='{queued.pk}']")
                # The run's change arrives live and the page shows it cancelled.
                expect(page.locator(f"#runs tr[data-run='{queued.pk}'] .status")).to_have_text(
                    "cancelled", timeout=10_000
                )
                queued.refresh_from_db()
                assert queued.status == ReportRun.Status.CANCELLED
                assert AuditEvent.objects.filter(target=f"report run {queued.pk}").exists()
                # Adopt the best config that is not the current one: a draft in the editor.
                adopt = page.locator("#ranking a.adopt").first
                label = adopt.locator("xpath=ancestor::tr/td[2]").inner_text()
                adopt.click()
                page.wait_for_url("**/config/?advisor=*")
                expect(page.locator("#result")).to_contain_text("Draft from the strategy advisor")
                expect(page.locator("#result")).to_contain_text(label)
                expect(page.locator("#dirty")).to_contain_text("not saved")
                page.screenshot(path=str(SHOTS / "config-adopt-from-advisor.png"), full_page=True)
                browser.close()
