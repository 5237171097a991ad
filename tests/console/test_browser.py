"""End to end in Debian's Chromium (Playwright): log in, watch rankings update live, unload a
bundle from its namespace's table through the bundle map, find it in the audit page."""

import os
import shutil

import pytest
import requests
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import Group, User

from console.access import OPERATORS_GROUP
from console.models import Broker, Bundle
from console.services.seed import cluster_seed
from tests.browser import CHROMIUM, LAUNCH_ARGS, fold_reports
from tests.conftest import SMALL, report


@pytest.mark.browser
class TestConsoleInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)
        brokers = list(Broker.objects.all())
        for i, bundle in enumerate(Bundle.objects.all()):
            bundle.owner = brokers[i % 3]
            bundle.save()
        user = User.objects.create_user("alice", password="s3cret-pass")
        user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])

    def post_report(self, name, cpu):
        response = requests.post(
            f"{self.live_server_url}/api/load-reports/",
            json=report(name, cpu),
            headers={"Authorization": f"Broker {settings.FULCRUM_BROKER_TOKEN}"},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        fold_reports()  # the batch that folds them publishes the new rankings

    def test_login_live_rankings_unload_and_audit(self):
        from playwright.sync_api import expect, sync_playwright

        for name in ("broker-1", "broker-2", "broker-3"):
            self.post_report(name, 10)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = browser.new_context().new_page()
            page.goto(f"{self.live_server_url}/")
            page.fill("#id_username", "alice")
            page.fill("#id_password", "s3cret-pass")
            page.click("button[type=submit]")
            expect(page.locator("h1")).to_have_text("Cluster")
            page.wait_for_selector("body[data-live='1']", timeout=10_000)

            # A new load report reaches the page over the websocket, without reloading it.
            self.post_report("broker-2", 73.5)
            row = page.locator("#rankings tr[data-broker='broker-2'] td.score")
            expect(row).to_have_text("73.5", timeout=10_000)
            expect(page.locator("#rankings tbody tr").last).to_have_attribute(
                "data-broker", "broker-2"
            )
            # Its rank changed: the row slides to its place and is marked for two seconds.
            expect(page.locator("#rankings tr[data-broker='broker-2']")).to_have_class("reranked")

            # The namespace's table links each bundle to its panel on the bundle map; an unload
            # previewed and confirmed there changes the table's owner cell live.
            page.goto(f"{self.live_server_url}/namespaces/acme/orders/bundles/")
            page.wait_for_selector("body[data-live='1']", timeout=10_000)
            link = page.locator("a.on-map").first
            name = link.evaluate("(a) => a.closest('tr').dataset.bundle")
            on_map = page.context.new_page()
            on_map.goto(self.live_server_url + link.get_attribute("href"))
            expect(on_map.locator("#panel-title")).to_have_text(name)
            expect(on_map.locator("#unload-destination option")).not_to_have_count(1)
            on_map.click("#unload-preview")
            expect(on_map.locator("#plan-actions li.planned")).to_contain_text(f"move {name}")
            on_map.click("#plan-confirm")
            expect(on_map.locator("#result")).to_contain_text("Unloaded", timeout=10_000)
            expect(page.locator(f"tr[data-bundle='{name}']")).to_have_class("changed")

            page.goto(f"{self.live_server_url}/audit/")
            first = page.locator("#audit tbody tr").filter(has_text="unload").first
            expect(first).to_contain_text("alice")
            expect(first).to_contain_text(name)
            expect(first).to_contain_text("operator unload")
            page.screenshot(path=str(settings.VAR_DIR / "browser-audit.png"), full_page=True)
            browser.close()
