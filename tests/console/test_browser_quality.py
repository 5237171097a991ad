"""Issue 24 in Chromium: a broker reporting its CPU at 208 % of its limit (the demo's poison
report) — after a tick, its page says which reading was not trusted and by which decision; that
decision's page shows the rule's table led by the plan's before, predicted and observed usage
in %, the same figures its chart draws. Screenshots go to var/screenshots/."""

import shutil
import threading

import pytest
import requests
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection

from console.access import OPERATORS_GROUP
from console.models import Broker, Bundle, Decision
from console.services.seed import cluster_seed
from tests.browser import CHROMIUM, LAUNCH_ARGS, login
from tests.conftest import MIB, SMALL, report

SHOTS = settings.VAR_DIR / "screenshots"


@pytest.mark.browser
class TestQuarantineInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)  # the console's default strategies: Fulcrum's
        self.owned: dict[str, list[str]] = {b.name: [] for b in Broker.objects.all()}
        for i, bundle in enumerate(Bundle.objects.select_related("namespace").order_by("id")):
            owner = "broker-1" if i < 6 else f"broker-{i - 4}"  # 6, 1 and 1
            bundle.owner = Broker.objects.get(name=owner)
            bundle.save()
            self.owned[owner].append(bundle.name)
        user = User.objects.create_user("alice", password="s3cret-pass")
        user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])

    def post_report(self, name, cpu):
        mine = self.owned[name]
        load = {"msgRateIn": 500.0, "msgRateOut": 500.0, "msgThroughputIn": MIB}
        doc = report(name, cpu, bundles=mine, stats={n: dict(load) for n in mine})
        doc |= {"msgRateIn": 500.0 * len(mine), "msgRateOut": 500.0 * len(mine)}
        response = requests.post(
            f"{self.live_server_url}/api/load-reports/",
            json=doc,
            headers={"Authorization": f"Broker {settings.FULCRUM_BROKER_TOKEN}"},
            timeout=10,
        )
        assert response.status_code == 201, response.text

    def tick(self):
        """A shedding tick in its own thread, as the worker runs it."""
        from console.services import shedding_tick_run

        def run():
            shedding_tick_run()
            connection.close()

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()

    def test_the_poison_report_is_named_and_the_decision_shows_one_set_of_numbers(self):
        from playwright.sync_api import expect, sync_playwright

        for name, cpu in (("broker-1", 208.0), ("broker-2", 12.0), ("broker-3", 14.0)):
            self.post_report(name, cpu)
        self.tick()
        decision = Decision.objects.filter(kind="shed").latest("at")
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "alice", "s3cret-pass")
            page.goto(f"{self.live_server_url}/brokers/broker-1/")
            quarantined = page.locator("#quarantined")
            expect(quarantined).to_be_visible()
            expect(quarantined).to_contain_text("208%")
            expect(quarantined).to_contain_text(f"decision #{decision.pk}")
            page.screenshot(path=str(SHOTS / "broker-quarantined.png"), full_page=True)
            quarantined.get_by_role("link").click()
            page.wait_for_url(f"**/decisions/{decision.pk}/")
            expect(page.locator("#skipped")).to_contain_text(
                "broker-1 (broker): ImplausibleReading"
            )
            expect(page.locator("#rule")).not_to_contain_text("quarantined")
            table = page.locator("#rule-brokers")
            expect(table.locator("th").nth(2)).to_have_text("after (predicted)")
            after = decision.details["stats"]["after"]["brokers"]
            for name, value in after.items():
                cell = table.locator(f'tr[data-broker="{name}"] td').nth(2)
                expect(cell).to_have_text(f"{value * 100:.1f} %")
            page.wait_for_function(
                "document.querySelector('#usage-chart .main-svg') !== null", timeout=10_000
            )
            page.screenshot(path=str(SHOTS / "decision-one-set-of-numbers.png"), full_page=True)
            browser.close()


@pytest.mark.browser
class TestEvidenceInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)
        user = User.objects.create_user("alice", password="s3cret-pass")
        user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])

    def test_the_pulsar_page_compares_the_recorded_hour_with_fulcrums_replay(self):
        from datetime import timedelta

        from django.utils import timezone
        from playwright.sync_api import expect, sync_playwright

        from tests.console.test_evidence import _record

        brokers = {b.name: b for b in Broker.objects.all()}
        bundles = list(Bundle.objects.order_by("id"))
        for bundle in bundles:
            bundle.owner = brokers["broker-1"]
            bundle.save()
        start = timezone.now() - timedelta(minutes=5)
        with self.settings(FULCRUM_REPLAY_SAMPLE_S=30, FULCRUM_REPLAY_DAY_SAMPLE_S=300):
            _record(start - timedelta(hours=3))  # the day keeps it, the hour does not
            _record(start)
            bundles[0].owner = brokers["broker-2"]  # another balancer moves one bundle
            bundles[0].save()
            _record(start + timedelta(seconds=30))
            _record(start + timedelta(seconds=60))
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "alice", "s3cret-pass")
            page.goto(f"{self.live_server_url}/pulsar/")
            table = page.locator("#evidence-compare")
            expect(table).to_be_visible(timeout=15_000)
            # No Pulsar cluster attached here: the moves are what the cluster did.
            expect(page.locator("#evidence-observed")).to_have_text(
                "Observed (what the cluster did)"
            )
            moves = table.locator("tr", has_text="moves (per hour)")
            expect(moves.locator("td").first).to_have_text("1 (60.0/h)")
            expect(page.locator("#evidence-say")).to_contain_text("1 move observed")
            expect(page.locator("#evidence-span")).to_contain_text("(1 min)")
            page.wait_for_function(
                "document.querySelector('#evidence-chart .main-svg') !== null", timeout=10_000
            )
            page.locator("#evidence").scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "pulsar-evidence.png"), full_page=True)
            # Over the day: the snapshot of three hours ago too, and the same one move.
            page.select_option("#evidence-window", "day")
            expect(page.locator("#evidence-span")).to_contain_text("(3.0 h)")
            expect(page.locator("#evidence-say")).to_contain_text("Over the last day")
            expect(page.locator("#evidence-say")).to_contain_text("1 move observed")
            expect(moves.locator("td").first).to_contain_text("1 (")
            page.screenshot(path=str(SHOTS / "pulsar-evidence-day.png"), full_page=True)
            browser.close()
