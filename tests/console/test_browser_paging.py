"""The broker lists at the size of a production cluster (issue 26, item 4), in Debian's Chromium:
the dashboard's rankings 50 brokers a page with a filter kept in the address, a load report that
moves a broker to another page arriving live, and the failure-domain layout 24 cards a domain,
the brokers that need a look first, the rest on asking."""

import os
import shutil

import pytest
import requests
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import User

from balancer.simulator.layout import BrokerSpec, Layout
from console.models import Broker
from console.services.seed import cluster_seed
from tests.browser import CHROMIUM, LAUNCH_ARGS, fold_reports, login
from tests.conftest import report

SHOTS = settings.VAR_DIR / "screenshots"
BROKERS = 130  # three pages of rankings; 65 brokers a domain, past the 24 cards shown
MANY = Layout(
    cluster="many",
    brokers=tuple(
        BrokerSpec(f"broker-{i:03d}", f"zone-{'ab'[i % 2]}", "unused") for i in range(BROKERS)
    ),
    namespaces=("acme/orders",),
    bundles_per_namespace=4,
)


@pytest.mark.browser
class TestBrokerListsArePaged(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(MANY)
        Broker.objects.filter(name="broker-127").update(state=Broker.State.DRAINING)
        User.objects.create_user("vera", password="v1ewer-pass")
        SHOTS.mkdir(parents=True, exist_ok=True)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop

    def test_rankings_and_domain_cards_come_a_page_at_a_time(self):
        from playwright.sync_api import expect, sync_playwright

        base = self.live_server_url
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, base, "vera", "v1ewer-pass")
            rows = page.locator("#rankings tbody tr[data-broker]")
            # The server's first page, then the browser's: 50 rows of 130, least loaded first
            # (no report yet: every score 0, so by name).
            expect(rows).to_have_count(50)
            expect(page.locator("#rankings-page")).to_have_text("brokers 1–50 of 130; page 1 of 3")
            expect(page.locator("#rankings-previous")).to_be_disabled()
            expect(rows.first).to_contain_text("broker-000")
            page.wait_for_selector("body[data-live='1']", timeout=10_000)
            page.click("#rankings-next")
            page.click("#rankings-next")
            expect(rows).to_have_count(30)
            expect(rows.first).to_contain_text("broker-100")
            expect(page.locator("#rankings-next")).to_be_disabled()
            assert page.url.endswith("/?page=3")
            # A report puts broker-005 last (the busiest): it arrives live on this page.
            answer = requests.post(
                f"{base}/api/load-reports/",
                json=report("broker-005", 90.0),
                headers={"Authorization": f"Broker {settings.FULCRUM_BROKER_TOKEN}"},
                timeout=10,
            )
            assert answer.status_code == 201, answer.text
            fold_reports()
            last = page.locator("#rankings tbody tr").last
            expect(last).to_contain_text("broker-005")
            expect(last.locator("td.score")).to_have_text("90")
            expect(rows).to_have_count(30)
            # A filter, kept by a reload: broker-120..129 are 10 rows, one page.
            page.fill("#rankings-filter", "broker-12")
            expect(rows).to_have_count(10)
            expect(page.locator("#rankings-page")).to_contain_text(
                "brokers 1–10 of 10 whose name, domain or state contains “broker-12” (130 in all)"
            )
            page.reload()
            expect(page.locator("#rankings-filter")).to_have_value("broker-12")
            expect(rows).to_have_count(10)
            page.fill("#rankings-filter", "draining")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("broker-127")
            page.fill("#rankings-filter", "no such broker")
            expect(page.locator("#rankings tbody")).to_contain_text("no broker shown")
            page.fill("#rankings-filter", "")
            page.screenshot(path=str(SHOTS / "dashboard-paged.png"), full_page=True)

            # The failure domains: 24 cards each, the hot and the draining broker first (by name),
            # the rest on asking.
            page.goto(f"{base}/domains/")
            zone_b = page.locator("section.domain[data-domain='zone-b']")
            cards = zone_b.locator("article.broker-card")
            expect(cards).to_have_count(24)
            expect(cards.nth(0)).to_have_attribute("data-broker", "broker-005")  # at 90 %
            expect(cards.nth(1)).to_have_attribute("data-broker", "broker-127")  # draining
            expect(cards.nth(2)).to_have_attribute("data-broker", "broker-001")
            expect(zone_b.locator("p.muted").first).to_have_text("65 brokers, 64 active")
            more = zone_b.locator("button.more")
            expect(more).to_have_text("Show all 65 brokers (41 more)")
            page.screenshot(path=str(SHOTS / "domains-paged.png"), full_page=True)
            more.click()
            expect(cards).to_have_count(65)
            expect(page.locator("section.domain[data-domain='zone-a'] article")).to_have_count(24)
            # Still all after the page's refresh (every 2 s), until asked back.
            page.wait_for_timeout(2500)
            expect(cards).to_have_count(65)
            zone_b.locator("button.more").click()
            expect(cards).to_have_count(24)
            page.fill("#domains-filter", "broker-12")
            expect(zone_b.locator("article.broker-card")).to_have_count(5)  # 121, 123, ..., 129
            expect(page.locator("section.domain[data-domain='zone-a'] article")).to_have_count(5)
            browser.close()
