"""The console's cluster pages in Debian's Chromium (Playwright): the bundle map (one segment per
bundle, an unload with a chosen destination recolours it live in another operator's tab, a split
previewed then applied), the failure-domain layout (drain previewed, refused for the last serving
broker), and a viewer who sees no action and is refused by the server. Screenshots of every page
go to var/screenshots/ (docs/screenshots/ holds the copies the docs show)."""

import os
import re
import shutil

import pytest
import requests
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import Group, User

from balancer.bundles import parse_bundle_name
from console.access import OPERATORS_GROUP
from console.models import AuditEvent, Broker, Bundle, Namespace
from console.services.seed import cluster_seed
from tests.browser import CHROMIUM, DRAWN_AS, LAUNCH_ARGS, WHERE, login
from tests.conftest import MIB, SMALL, report
from tests.console.test_ingest import topics_of

SHOTS = settings.VAR_DIR / "screenshots"


@pytest.mark.browser
class TestClusterPagesInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)
        brokers = list(Broker.objects.order_by("name"))
        for i, bundle in enumerate(Bundle.objects.order_by("namespace__name", "lower")):
            bundle.owner = brokers[i % 3]
            bundle.save()
        Namespace.objects.filter(name__in=["acme/orders", "acme/payments"]).update(
            anti_affinity_group="orders-ha"
        )
        for name, password, operator in (("alice", "s3cret-pass", True), ("bob", "v1ewer-pass", 0)):
            user = User.objects.create_user(name, password=password)
            if operator:
                user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
        for j, broker in enumerate(brokers):
            owned = [
                b.name for b in Bundle.objects.filter(owner=broker).select_related("namespace")
            ]
            stats = {
                name: {
                    "msgRateIn": 100.0 * (k + 1),
                    "msgRateOut": 100.0,
                    "msgThroughputIn": (k + 1) * MIB,
                    "msgThroughputOut": MIB,
                    "topics": 4,
                }
                for k, name in enumerate(owned)
            }
            if broker.name == "broker-2":  # its report carries per-topic stats too
                for name, figures in stats.items():
                    bundle = parse_bundle_name(name)
                    topics = topics_of(bundle.range.lower, bundle.range.upper, 4, bundle.namespace)
                    figures["topicStats"] = [
                        {
                            "topic": t,
                            "msgRateIn": figures["msgRateIn"] * (i + 1) / 10,
                            "msgThroughputIn": figures["msgThroughputIn"] * (i + 1) / 10,
                        }
                        for i, t in enumerate(topics)
                    ]
            response = requests.post(
                f"{self.live_server_url}/api/load-reports/",
                json=report(broker.name, 20 + 10 * j, bundles=owned, stats=stats),
                headers={"Authorization": f"Broker {settings.FULCRUM_BROKER_TOKEN}"},
                timeout=10,
            )
            assert response.status_code == 201, response.text
        SHOTS.mkdir(parents=True, exist_ok=True)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop

    def login(self, browser, user, password):
        return login(browser, self.live_server_url, user, password)

    def click_bundle(self, page, name):
        """A real click where the bundle is drawn; its panel opens."""
        from playwright.sync_api import expect

        where = page.evaluate(WHERE, name)
        page.mouse.move(where["x"], where["y"])
        expect(page.locator("#map-tip")).to_contain_text(name)  # the tooltip names it
        page.mouse.click(where["x"], where["y"])
        expect(page.locator("#panel-title")).to_have_text(name)

    def test_operator_unloads_and_splits_on_the_map_and_drains_on_the_domain_layout(self):
        from playwright.sync_api import expect, sync_playwright

        bundles = Bundle.objects.count()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = self.login(browser, "alice", "s3cret-pass")
            watcher = self.login(browser, "alice", "s3cret-pass")
            # No request fails by design: every 4xx and 5xx the map's pages get is collected.
            failed: list[str] = []
            for tab in (page, watcher):
                tab.on(
                    "response",
                    lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None,
                )
            for tab in (page, watcher):  # through the header's link, as an operator would
                tab.click("header nav a:text('Bundle map')")
                tab.wait_for_url(f"{self.live_server_url}/bundles/")
                tab.wait_for_selector("body[data-live='1']", timeout=10_000)
            # One segment per bundle, with its load.
            expect(page.locator("#bundle-map")).to_have_attribute("data-drawn", str(bundles))
            assert page.locator("#bundle-map").get_attribute("data-bundles") == str(bundles)
            page.screenshot(path=str(SHOTS / "bundle-map.png"), full_page=True)
            # As a person with deuteranopia sees it (Chromium's own simulation), for the docs.
            cdp = page.context.new_cdp_session(page)
            cdp.send("Emulation.setEmulatedVisionDeficiency", {"type": "deuteranopia"})
            page.screenshot(path=str(SHOTS / "bundle-map-deuteranopia.png"), full_page=True)
            cdp.send("Emulation.setEmulatedVisionDeficiency", {"type": "none"})
            # Throughput on its own scale when asked; the owners' key says how it is drawn.
            expect(page.locator("#throughput-key")).to_contain_text("dark bar: throughput")
            page.select_option("#map-colour", "throughput")
            expect(page.locator("#throughput-key")).to_contain_text("throughput 0")
            page.screenshot(path=str(SHOTS / "bundle-map-throughput.png"), full_page=True)
            page.select_option("#map-colour", "owner")

            # Unload with a chosen destination: previewed, confirmed, recoloured live elsewhere.
            row = Bundle.objects.select_related("namespace", "owner").filter(
                owner__name="broker-1"
            )[0]
            name = row.name
            # broker-1 reports no per-topic stats: the algorithms that cut by topics are
            # offered for broker-2's bundles only (below), not for this one.
            self.click_bundle(page, name)
            expect(
                page.locator("#split-algorithm option[value='flow_or_qps_equally_divide']")
            ).to_be_disabled()
            expect(
                page.locator("#split-algorithm option[value='topic_count_equally_divide']")
            ).to_contain_text("not for this bundle: its owner reports no per-topic stats")
            page.click("#panel-close")
            # A double-click resets the zoom and selects nothing.
            where = page.evaluate(WHERE, name)
            page.mouse.dblclick(where["x"], where["y"])
            page.wait_for_timeout(600)
            expect(page.locator("#panel-body")).to_be_hidden()
            self.click_bundle(page, name)
            expect(page.locator("#panel-facts")).to_contain_text("MiB/s")
            options = page.locator("#unload-destination option:not([disabled])")
            expect(options).not_to_have_count(1)  # the destinations arrived
            choices = options.evaluate_all("os => os.map((o) => [o.value, o.textContent])")
            # A broker a placement filter would not choose stays a choice (Pulsar takes any
            # active destination), warned; the clean ones are plain names.
            eligible = [v for v, text in choices if v and "⚠" not in text]
            warned = [text for v, text in choices if v and "⚠" in text]
            assert all(" filter: " in text for text in warned)
            refused = page.locator("#unload-destination option[disabled]").all_text_contents()
            assert any("the bundle's owner" in text for text in refused)
            destination = eligible[0]
            # A warned one is previewed with the filter's refusal as a veto to override.
            assert warned
            page.select_option("#unload-destination", warned[0].split(" — ")[0])
            page.click("#unload-preview")
            expect(page.locator("#plan-actions li.vetoed")).to_contain_text("AntiAffinity")
            expect(page.locator("#plan-override")).to_contain_text(
                "Override the veto: AntiAffinity, as the preview shows"
            )
            page.screenshot(path=str(SHOTS / "bundle-map-warned-destination.png"), full_page=True)
            page.click("#plan-cancel")
            assert watcher.evaluate(DRAWN_AS, [name, "broker-1"])
            page.select_option("#unload-destination", destination)
            page.fill("#unload-reason", "make room on broker-1")
            page.click("#unload-preview")
            expect(page.locator("#plan-actions li")).to_contain_text(
                f"move {name}: broker-1 → {destination}"
            )
            expect(page.locator("#plan-confirm")).to_be_in_viewport()  # no scrolling to confirm
            expect(page.locator("#plan-stats")).to_contain_text("CV")
            page.screenshot(path=str(SHOTS / "bundle-map-unload-preview.png"), full_page=True)
            assert Bundle.objects.get(pk=row.pk).owner.name == "broker-1"  # a preview moves nothing
            page.click("#plan-confirm")
            expect(page.locator("#result")).to_contain_text(f"now on {destination}")
            expect(page.locator("#panel-facts")).to_contain_text(destination)
            watcher.wait_for_function(DRAWN_AS, arg=[name, destination], timeout=10_000)
            assert not watcher.evaluate(DRAWN_AS, [name, "broker-1"])
            where = watcher.evaluate(WHERE, name)
            watcher.mouse.move(where["x"], where["y"])
            expect(watcher.locator("#map-tip")).to_contain_text(f"owner {destination}")
            # Just moved: the tooltip and the panel count down to when it may move again.
            expect(watcher.locator("#map-tip")).to_contain_text("cool-down eligible in")
            expect(page.locator("#panel-facts")).to_contain_text("eligible in")
            event = AuditEvent.objects.filter(target=name, action="unload").get()
            assert event.actor.username == "alice"
            assert event.reason.startswith("Operator's reason: make room on broker-1.")
            assert (event.source, event.destination) == ("broker-1", destination)

            # Again at once: the cool-down vetoes it; the override is explicit.
            page.click("#unload-preview")
            expect(page.locator("#plan-actions li.vetoed")).to_contain_text("CoolDown")
            expect(page.locator("#plan-override")).to_be_visible()
            # The override names what it passes: what the preview lists, nothing else.
            expect(page.locator("#plan-override")).to_contain_text(
                "Override the veto: CoolDown, as the preview shows"
            )
            expect(page.locator("#plan-confirm")).to_be_disabled()
            page.screenshot(path=str(SHOTS / "bundle-map-cool-down.png"), full_page=True)
            page.click("#plan-cancel")

            # Split at the midpoint: preview of the boundaries and each half's load, then two
            # segments with their (estimated) load.
            other = Bundle.objects.select_related("namespace").filter(owner__name="broker-2")[0]
            self.click_bundle(page, other.name)
            # broker-2 reports its topics: topic_count_equally_divide halves them, and each
            # half's load is its own topics'.
            page.select_option("#split-algorithm", "topic_count_equally_divide")
            page.click("#split-preview")
            expect(page.locator("#plan-children thead")).to_contain_text("Share of throughput")
            expect(page.locator("#plan-children")).to_contain_text("its own topics' rates")
            expect(page.locator("#plan-children tbody tr").first).to_contain_text("2")
            page.screenshot(path=str(SHOTS / "bundle-map-split-topics.png"), full_page=True)
            page.click("#plan-cancel")
            page.select_option("#split-algorithm", "range_equally_divide")
            page.click("#split-preview")
            children = page.locator("#plan-children tbody tr")
            expect(children).to_have_count(2)
            # The midpoint, with each half's load from its own topics (none may fall left).
            expect(page.locator("#plan-children")).to_contain_text("its own topics' rates")
            expect(children.nth(1)).to_contain_text(re.compile(r"\d (B|KiB|MiB)/s"))
            page.screenshot(path=str(SHOTS / "bundle-map-split-preview.png"), full_page=True)
            page.click("#plan-confirm")
            expect(page.locator("#result")).to_contain_text("into 2 bundles")
            expect(watcher.locator("#bundle-map")).to_have_attribute(
                "data-drawn", str(bundles + 1), timeout=10_000
            )
            lower, upper = other.lower, other.upper
            middle = lower + (upper - lower) // 2
            for a, b in ((lower, middle), (middle, upper)):
                child = f"{other.namespace.name}/0x{a:08x}_0x{b:08x}"
                found = watcher.evaluate(WHERE, child)
                watcher.mouse.move(found["x"], found["y"])
                tip = watcher.locator("#map-tip")
                expect(tip).to_contain_text(child)
                expect(tip).to_contain_text("owner unassigned")
                expect(tip).to_contain_text("estimated: its share of the bundle it was cut from")
                expect(tip).to_contain_text("MiB/s")
            watcher.screenshot(path=str(SHOTS / "bundle-map-after-split.png"), full_page=True)
            watcher.select_option("#map-view", "treemap")
            watcher.wait_for_selector("#bundle-map g.trace.treemap")
            # The treemap fills its 640 px box (it kept the ranges view's height before).
            drawn = watcher.locator("#bundle-map .main-svg").first.bounding_box()
            assert drawn["height"] == 640, drawn
            watcher.screenshot(path=str(SHOTS / "bundle-map-treemap.png"), full_page=True)
            # A click on a bundle's tile opens its panel and keeps the overview (no drill-down).
            box = watcher.locator("#bundle-map g.slice").nth(3).bounding_box()
            watcher.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            expect(watcher.locator("#panel-body")).to_be_visible()
            level = watcher.evaluate("document.getElementById('bundle-map')._fullData[0].level")
            assert level in (None, "", "undefined"), level
            # The expected refusals only (the cool-down's preview answers 200 with its veto).
            assert failed == [], failed

            # The failure-domain layout. broker-3 gives its bundles to broker-1: the group's two
            # namespaces share brokers (and zone-a) while broker-3 (zone-b) holds neither.
            Bundle.objects.filter(owner__name="broker-3").update(
                owner=Broker.objects.get(name="broker-1")
            )
            page.click("header nav a:text('Failure domains')")
            page.wait_for_url(f"{self.live_server_url}/domains/")
            expect(page.locator("section.domain")).to_have_count(2)
            expect(page.locator("section.domain[data-domain='zone-a'] .broker-card")).to_have_count(
                2
            )
            expect(page.locator("#groups tbody tr[data-group='orders-ha']")).to_contain_text(
                "acme/orders, acme/payments"
            )
            expect(page.locator("#violations")).to_contain_text(
                "broker-1 owns bundles of 2 namespaces of group 'orders-ha' "
                "(acme/orders, acme/payments) while broker-3 owns none"
            )
            expect(page.locator("#violations")).to_contain_text(
                "failure domain 'zone-a' holds 2 namespaces of group 'orders-ha' while 'zone-b' "
                "holds none"
            )
            expect(page.locator("section.domain[data-domain='zone-a']")).to_have_class(
                "domain violated"
            )
            expect(
                page.locator(".broker-card[data-broker='broker-1'] .tag.violated")
            ).to_have_count(1)
            page.screenshot(path=str(SHOTS / "domains.png"), full_page=True)
            page.locator(".broker-card[data-broker='broker-2'] button.drain").click()
            expect(page.locator("#state-dialog")).to_be_visible()
            expect(page.locator("#state-actions li").first).to_contain_text(
                "broker-2: active → draining"
            )
            expect(page.locator("#state-actions")).to_contain_text("move acme/")
            page.screenshot(path=str(SHOTS / "domains-drain-preview.png"), full_page=True)
            page.click("#state-cancel")
            assert Broker.objects.get(name="broker-2").state == "active"

            # The last serving broker: the preview says why, and nothing can confirm it.
            Broker.objects.exclude(name="broker-1").update(state="drained")
            page.reload()
            page.locator(".broker-card[data-broker='broker-1'] button.drain").click()
            expect(page.locator("#state-actions li.vetoed")).to_contain_text(
                "would leave no serving broker"
            )
            expect(page.locator("#state-confirm")).to_be_disabled()
            page.screenshot(path=str(SHOTS / "domains-drain-refused.png"), full_page=True)
            page.click("#state-cancel")
            # Drained by hand with its bundles still on it (the store says so): the card says
            # what is left, not "drained" alone.
            left = Bundle.objects.filter(owner__name="broker-2").count()
            expect(
                page.locator(".broker-card[data-broker='broker-2'] .drain-progress")
            ).to_have_text(f"drained, yet {left} bundles on it, 0 queued, 0 in flight")
            page.locator(".broker-card[data-broker='broker-2'] button.activate").click()
            # One broker serves everything now: no CV of 0.000 that reads "balanced".
            expect(page.locator("#state-stats")).to_contain_text(
                "over the serving brokers (1 now, 2 after): CV — (1 serving broker) →"
            )
            page.screenshot(path=str(SHOTS / "domains-activate-preview.png"), full_page=True)
            page.fill("#state-reason", "back from maintenance")
            page.click("#state-confirm")
            expect(page.locator("#result")).to_contain_text("broker-2 is now active")
            expect(
                page.locator(".broker-card[data-broker='broker-2'] button.drain")
            ).to_be_visible()
            browser.close()
        assert Broker.objects.get(name="broker-2").state == "active"
        assert AuditEvent.objects.filter(
            target="broker-2", reason__startswith="Operator's reason: back from maintenance."
        ).exists()

    def test_a_viewer_sees_no_action_and_the_server_refuses_one(self):
        from playwright.sync_api import expect, sync_playwright

        name = Bundle.objects.select_related("namespace").filter(owner__name="broker-1")[0].name
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = self.login(browser, "bob", "v1ewer-pass")
            page.goto(f"{self.live_server_url}/bundles/")
            expect(page.locator(".banner")).to_contain_text("Read-only")
            self.click_bundle(page, name)
            expect(page.locator("#unload-form")).to_have_count(0)
            expect(page.locator("#split-form")).to_have_count(0)
            status = page.evaluate(
                """async (name) => (await fetch('/api/bundles/by-name/unload/', {method: 'POST',
                  credentials: 'same-origin', headers: {'Content-Type': 'application/json',
                  'X-CSRFToken': document.querySelector('input[name=csrfmiddlewaretoken]').value},
                  body: JSON.stringify({bundle: name})})).status""",
                name,
            )
            assert status == 403
            page.screenshot(path=str(SHOTS / "bundle-map-viewer.png"), full_page=True)
            page.goto(f"{self.live_server_url}/domains/")
            expect(page.locator(".broker-card")).to_have_count(3)
            expect(page.locator(".broker-card button")).to_have_count(0)
            browser.close()
        assert (
            Bundle.objects.get(
                namespace__name=name.rsplit("/", 1)[0],
                lower=int(name.rsplit("/", 1)[1].split("_")[0], 16),
            ).owner.name
            == "broker-1"
        )

    def test_dashboard_decision_audit_and_broker_pages(self):
        from playwright.sync_api import expect, sync_playwright

        from console.models import BalancerConfig
        from console.services import shedding_tick_run

        # Pulsar's ThresholdShedder, for a quiet first cycle on these loads (Fulcrum's would act).
        BalancerConfig.objects.update(
            shedder="ThresholdShedder", placement="LeastLongTermMessageRate"
        )
        name = Bundle.objects.select_related("namespace").filter(owner__name="broker-1")[0].name
        shedding_tick_run()  # a quiet cycle
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = self.login(browser, "alice", "s3cret-pass")
            page.wait_for_selector("body[data-live='1']", timeout=10_000)
            expect(page.locator("header .role")).to_have_text("operator")
            expect(page.locator("#active-shedder")).to_have_text("ThresholdShedder")
            expect(page.locator("#decisions li.quiet")).to_contain_text("1 quiet cycle")
            # The balance panel: the move budget, the cool-down, oscillations.
            expect(page.locator("#balance")).to_contain_text("moves this hour")
            expect(page.locator("#budget")).to_contain_text("0")
            expect(page.locator("#oscillation-count")).to_have_text("0")
            expect(page.locator("#flip-flop-count")).to_have_text("0")
            expect(page.locator("#last-tick")).not_to_have_text("never")
            # Pause, confirmed; the state shows at once and the audit has it.
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("#loop-toggle")
            expect(page.locator("#loop-state")).to_contain_text("shedding paused")
            expect(page.locator("#loop-toggle")).to_have_text("Resume shedding…")
            # An operator's unload arrives live in the decision list, linked to its page.
            requests_session = page.context.request
            token = page.locator("main input[name=csrfmiddlewaretoken]").input_value()
            answer = requests_session.post(
                f"{self.live_server_url}/api/bundles/by-name/unload/",
                data={"bundle": name, "reason": "rebalance by hand"},
                headers={"X-CSRFToken": token, "Referer": self.live_server_url + "/"},
            )
            assert answer.ok, answer.text()
            decision = answer.json()["decision"]
            link = page.locator(f"#decisions li[data-decision='{decision}'] a")
            expect(link).to_contain_text("Operator — 1 unload(s)")
            page.screenshot(path=str(SHOTS / "dashboard.png"), full_page=True)
            link.click()
            page.wait_for_url(f"{self.live_server_url}/decisions/{decision}/")
            expect(page.locator("#actions tbody tr").first).to_contain_text("operator unload of")
            expect(page.locator("#events")).to_contain_text("alice")
            page.screenshot(path=str(SHOTS / "decision.png"), full_page=True)
            # The decision page of the real tick above: the shedder's rule and its figures.
            from console.models import Decision

            tick = Decision.objects.filter(kind="shed").order_by("id").first()
            page.goto(f"{self.live_server_url}/decisions/{tick.pk}/")
            expect(page.locator("h2").filter(has_text="The rule that fired")).to_contain_text(
                "ThresholdShedder"
            )
            expect(page.locator("#rule")).to_contain_text("threshold")
            expect(page.locator("#actions")).to_contain_text("No action")

            # The audit, filtered to alice's unloads; the CSV link carries the same filters.
            page.click("header nav a:text('Audit')")
            expect(page).to_have_title("Audit · Fulcrum")
            page.select_option("select[name=actor]", "alice")
            page.select_option("select[name=action]", "unload")
            page.click("#audit-filters button")
            rows = page.locator("#audit tbody tr")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("Operator's reason: rebalance by hand.")
            expect(page.locator("a.export")).to_have_attribute(
                "href",
                "/audit/export.csv?actor=alice&action=unload&broker=&namespace=&bundle="
                "&since=&until=&q=",
            )
            page.screenshot(path=str(SHOTS / "audit.png"), full_page=True)
            page.fill("input[name=since]", "soon")
            page.click("#audit-filters button")
            expect(page.locator(".result.error")).to_contain_text("not an ISO 8601 time")

            # A broker's page: its bundles, its load, the move as a marker, Drain previewed.
            page.goto(f"{self.live_server_url}/brokers/broker-1/")
            expect(page.locator("#broker-bundles tbody tr")).not_to_have_count(0)
            expect(page.locator("#broker-events")).to_contain_text(name)
            expect(page.locator("#range-note")).to_contain_text("moves touching broker-1")
            page.click("button.drain")
            expect(page.locator("#state-actions li").first).to_contain_text(
                "broker-1: active → draining"
            )
            page.screenshot(path=str(SHOTS / "broker.png"), full_page=True)
            page.click("#state-cancel")
            browser.close()
        assert AuditEvent.objects.filter(
            action="config", reason__endswith="is_shedding_enabled: True → False"
        ).exists()

    def test_config_edit_what_if_save_version_and_rollback(self):
        from datetime import timedelta

        from django.utils import timezone
        from playwright.sync_api import expect, sync_playwright

        from console.models import BalancerConfig
        from console.services import shedding_tick_run

        # Ten minutes of ticks, each recording its snapshot for the replay; shedding paused, so
        # the recorded cluster stays as it is.
        BalancerConfig.objects.update(is_shedding_enabled=False)
        start = timezone.now() - timedelta(minutes=10)
        for k in range(21):
            shedding_tick_run(now=start + timedelta(seconds=30 * k))

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = self.login(browser, "alice", "s3cret-pass")
            page.click("header nav a:text('Config')")
            page.wait_for_url(f"{self.live_server_url}/config/")
            expect(page.locator(".strategy[data-kind='shedder'] .about")).to_contain_text(
                "docs/developers/cycle.md § Fulcrum's own strategy"
            )
            page.select_option("select[name=shedder]", "UniformLoadShedder")
            expect(page.locator("#parameters tr[data-key='maxUnloadPercentage']")).to_contain_text(
                "fraction"
            )
            page.fill("#parameters input[data-key='maxUnloadPercentage']", "2")
            page.click("#what-if")
            expect(page.locator("#result")).to_contain_text("maxUnloadPercentage")  # refused
            page.fill("#parameters input[data-key='maxUnloadPercentage']", "0.5")
            page.click("#what-if")
            expect(page.locator("#compare")).to_contain_text("UniformLoadShedder")
            expect(page.locator("#result")).to_contain_text("nothing was saved or moved")
            page.check("input[name=is_shedding_enabled]")
            page.click("#replay")
            expect(page.locator("#result")).to_contain_text("Replay done")
            expect(page.locator("#replay-span")).to_contain_text("21 snapshots")
            expect(page.locator("#replay-compare")).to_contain_text("median max / mean")
            expect(page.locator("#replay-chart .scatterlayer .trace")).to_have_count(6)
            page.locator("#replay-result").scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "config-replay.png"), full_page=True)
            page.uncheck("input[name=is_shedding_enabled]")
            assert BalancerConfig.objects.get().shedder == "FulcrumShedder"
            # A value the balancer refuses is named on its field before any confirm: no dialog.
            bad = page.locator("#parameters input[data-key='maxUnloadPercentage']")
            bad.fill("7")
            dialogs: list[str] = []

            def refuse(dialog):
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", refuse)
            page.click("#save")
            expect(page.locator("#result")).to_contain_text("Not saved: maxUnloadPercentage")
            expect(bad).to_have_attribute("aria-invalid", "true")
            expect(bad).to_be_focused()
            page.screenshot(path=str(SHOTS / "config-invalid-field.png"), full_page=True)
            assert dialogs == []
            page.remove_listener("dialog", refuse)
            bad.fill("0.5")
            expect(bad).not_to_have_attribute("aria-invalid", "true")
            page.fill("input[name=reason]", "even out msg rates")
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("#save")
            rows = page.locator("#versions tbody tr")
            expect(rows).to_have_count(2)  # the values as found, and this save
            saved, found = (rows.nth(i).get_attribute("data-version") for i in (0, 1))
            expect(page.locator("#result")).to_have_text(f"Saved as version {saved}.")
            expect(rows.first).to_contain_text('shedder: "FulcrumShedder" → "UniformLoadShedder"')
            expect(rows.first).to_contain_text("maxUnloadPercentage: default → 0.5")
            page.screenshot(path=str(SHOTS / "config.png"), full_page=True)
            page.once("dialog", lambda dialog: dialog.accept())
            page.locator(f"#versions tr[data-version='{found}'] button.rollback").click()
            expect(page.locator("#result")).to_contain_text(f"has version {found}'s values")
            expect(page.locator("select[name=shedder]")).to_have_value("FulcrumShedder")
            browser.close()
        assert BalancerConfig.objects.get().shedder == "FulcrumShedder"
        assert BalancerConfig.objects.get().parameters.get("maxUnloadPercentage") is None
