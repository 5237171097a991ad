"""The Pulsar page in Debian's Chromium (Playwright), attached to the simulated Pulsar cluster on
real sockets: the observation shown, control taken through the previewed dialog (Pulsar's
shedding turned off), a move sent and verified appearing in the moves table, and the executor
stopped. Screenshots go to var/screenshots/."""

import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings

from balancer.simulator.layout import DEMO
from balancer.simulator.traces import default_traces_dir, load_cpu_series, load_functions
from balancer.simulator.workload import build_workload
from console.connectors.pulsar_cluster import PulsarCluster, serve, stop
from console.models import AuditEvent, Bundle, PulsarConnection, PulsarMove
from console.services.connections import token_encrypt
from console.services.pulsar import pulsar_sync_run
from console.services.seed import config_seed
from tests.browser import CHROMIUM, LAUNCH_ARGS, login
from tests.console.test_pulsar_cluster import free_ports

SHOTS = settings.VAR_DIR / "screenshots"
TOKEN = "browser-token"


def aside(call):
    """Run ``call`` in a thread of its own and return its result."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result()


@pytest.mark.browser
@override_settings(FULCRUM_PULSAR_URL="", FULCRUM_PULSAR_TAKE_CONTROL_AT_START=False)
class TestPulsarPageInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        traces = default_traces_dir()
        workload = build_workload(DEMO, load_functions(traces))
        cpu = {b.name: load_cpu_series(traces, b.cpu_series) for b in DEMO.brokers}
        self.cluster = PulsarCluster(workload, cpu, token=TOKEN, ports=free_ports(8))
        self.cluster.step(time.time())
        self.servers = serve(self.cluster)
        config_seed()
        self.connection = PulsarConnection.objects.create(
            name="sim",
            admin_url=f"http://{self.cluster.broker_ids[0]}",
            token_encrypted=token_encrypt(TOKEN),
            is_attached=True,
        )
        pulsar_sync_run()
        User.objects.create_superuser("root", password="s3cret-pass")
        SHOTS.mkdir(parents=True, exist_ok=True)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop

    def tearDown(self):
        stop(self.servers)

    def test_take_control_watch_a_move_verified_and_stop_the_executor(self):
        from playwright.sync_api import expect, sync_playwright

        from console.services import bundle_unload

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "root", "s3cret-pass")
            page.goto(f"{self.live_server_url}/pulsar/")
            expect(page.locator("#mode")).to_have_text("observe-only")
            expect(page.locator("#connection")).to_contain_text("ModularLoadManagerImpl")
            expect(page.locator("#connection")).to_contain_text("8 accepted")
            # Take control: the dialog shows what changes in Pulsar, read live; confirmed.
            page.click("#control")
            dialog = page.locator("#control-dialog")
            expect(dialog).to_contain_text("loadBalancerSheddingEnabled")
            expect(dialog.locator("tbody tr td").nth(1)).to_have_text("true")
            page.screenshot(path=str(SHOTS / "pulsar-take-control.png"))
            page.click("#control-confirm")
            expect(page.locator("#mode")).to_have_text("Fulcrum in control")
            assert self.cluster.overrides == {"loadBalancerSheddingEnabled": "false"}
            # A move sent and verified shows up in the table with its outcome.
            row = Bundle.objects.select_related("owner", "namespace").exclude(owner=None).first()
            destination = next(b for b in self.cluster.broker_ids if b != row.owner.name)
            root = User.objects.get(username="root")
            # Services publish through async_to_sync: off Playwright's event-loop thread.
            aside(lambda: bundle_unload(row.name, actor=root, destination=destination, force=True))
            aside(pulsar_sync_run)  # sent
            self.cluster.step(time.time())  # a client's lookup places it
            aside(pulsar_sync_run)  # verified
            assert PulsarMove.objects.get().outcome == "as-planned"
            moved = page.locator(f"#moves tbody tr[data-move='{PulsarMove.objects.get().pk}']")
            expect(moved).to_contain_text("as-planned", timeout=10_000)
            expect(moved).to_contain_text(f"moved as planned: {row.owner.name} -> {destination}")
            page.screenshot(path=str(SHOTS / "pulsar-move-verified.png"), full_page=True)
            # Stop the executor: confirmed, audited, shown.
            page.once("dialog", lambda d: d.accept())
            page.click("#executor-toggle")
            expect(page.locator("#executor")).to_have_text("executor stopped")
            assert AuditEvent.objects.filter(
                action="control", reason__startswith="executor stopped"
            ).exists()
            browser.close()

    def test_how_each_broker_was_read_and_a_dead_man_release_are_shown(self):
        from datetime import timedelta

        from django.utils import timezone
        from playwright.sync_api import expect, sync_playwright

        from console.services.control import control_take
        from console.services.deadman import DeadmanMemory, deadman_check

        aside(
            lambda: control_take(self.connection.pk, actor=None, confirm=True, now=timezone.now())
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "root", "s3cret-pass")
            page.goto(f"{self.live_server_url}/pulsar/")
            expect(page.locator("#mode")).to_have_text("Fulcrum in control")
            facts = page.locator("#connection")
            expect(facts).to_contain_text("the brokers' own clusterName")
            # No dead-man process yet: said as a warning; once one checks, it watches.
            expect(page.locator("#deadman-missing")).to_contain_text("not running")
            memory = DeadmanMemory()
            aside(lambda: deadman_check(timezone.now(), memory))
            page.reload()
            expect(facts).to_contain_text("Dead-man")
            expect(facts).to_contain_text("control goes back to Pulsar")
            expect(facts).to_contain_text("token stored, encrypted")
            reads = page.locator("#broker-reads")
            reads.locator("summary").click()
            expect(reads.locator("tbody tr")).to_have_count(8)
            first = self.cluster.broker_ids[0]
            expect(reads.locator(f"tr[data-broker='{first}']")).to_contain_text(f"http://{first}")
            page.screenshot(path=str(SHOTS / "pulsar-broker-reads.png"), full_page=True)
            # The loop never ticked: past the limit the dead-man hands control back.
            later = timezone.now() + timedelta(hours=1)
            said = aside(lambda: deadman_check(later, memory))
            assert "handed back" in said
            assert self.cluster.effective["loadBalancerSheddingEnabled"] is True
            page.reload()
            expect(page.locator("#mode")).to_have_text("observe-only")
            expect(page.locator("#handed-back")).to_contain_text(
                "Control was handed back to Pulsar by the dead-man"
            )
            page.screenshot(path=str(SHOTS / "pulsar-handed-back.png"), full_page=True)
            # A broker's page says when Fulcrum read its report, and Pulsar's own lastUpdate.
            page.goto(f"{self.live_server_url}/brokers/{first}/")
            expect(page.locator("#pulsar-read")).to_contain_text("lastUpdate")
            expect(page.locator("#pulsar-read")).to_contain_text("information only")
            page.screenshot(path=str(SHOTS / "broker-pulsar-read.png"))
            browser.close()

    def test_two_balancers_are_shown_everywhere_and_an_admin_re_asserts_control(self):
        from django.utils import timezone
        from playwright.sync_api import expect, sync_playwright

        from console.services.control import control_take

        aside(
            lambda: control_take(self.connection.pk, actor=None, confirm=True, now=timezone.now())
        )
        # Pulsar restarted with its broker.conf: its own shedding is on again.
        self.cluster.overrides.pop("loadBalancerSheddingEnabled", None)
        self.cluster.effective["loadBalancerSheddingEnabled"] = True
        aside(pulsar_sync_run)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "root", "s3cret-pass")
            page.goto(f"{self.live_server_url}/")  # every page carries the banner
            expect(page.locator("#pulsar-conflict")).to_contain_text("Two balancers")
            page.goto(f"{self.live_server_url}/pulsar/")
            expect(page.locator("#conflict")).to_contain_text(
                "sends nothing until an admin decides"
            )
            expect(page.locator("#executor")).to_have_text("executor stopped")
            page.screenshot(path=str(SHOTS / "pulsar-two-balancers.png"), full_page=True)
            page.click("#reassert")
            dialog = page.locator("#control-dialog")
            expect(dialog).to_contain_text("Re-assert control of sim")
            expect(dialog.locator("tbody tr td").nth(1)).to_have_text("true")
            page.click("#control-confirm")
            expect(page.locator("#result")).to_contain_text("Control re-asserted")
            expect(page.locator("#executor")).to_have_text("executor running")
            assert self.cluster.overrides == {"loadBalancerSheddingEnabled": "false"}
            page.goto(f"{self.live_server_url}/")
            expect(page.locator("#pulsar-conflict")).to_have_count(0)
            browser.close()

    def test_an_unreachable_broker_is_named_on_the_page_and_its_move_tried_again(self):
        from django.utils import timezone
        from playwright.sync_api import expect, sync_playwright

        from console.services import bundle_unload
        from console.services.control import control_take

        aside(
            lambda: control_take(self.connection.pk, actor=None, confirm=True, now=timezone.now())
        )
        leader = self.connection.__class__.objects.get().observation["leader"]
        row = (
            Bundle.objects.select_related("owner")
            .exclude(owner=None)
            .exclude(owner__name__in=[self.cluster.broker_ids[0], leader])
            .first()
        )
        down = row.owner.name
        destination = next(b for b in self.cluster.broker_ids if b not in (down, leader))
        # The owner's web server goes away: connections to it are refused.
        index = self.cluster.broker_ids.index(down)
        stop([self.servers.pop(index)])
        root = User.objects.get(username="root")
        aside(lambda: bundle_unload(row.name, actor=root, destination=destination, force=True))
        aside(pulsar_sync_run)
        move = PulsarMove.objects.get()
        assert (move.state, move.attempts) == ("queued", 1)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "root", "s3cret-pass")
            page.goto(f"{self.live_server_url}/pulsar/")
            trouble = page.locator("#trouble li[data-kind='failing-calls']")
            expect(trouble).to_contain_text("admin calls failed in the last observation")
            expect(trouble).to_contain_text(f"on {down}")
            expect(trouble).to_contain_text("unreachable")
            moved = page.locator(f"#moves tbody tr[data-move='{move.pk}']")
            expect(moved).to_contain_text("not sent (attempt 1 of 3): ConnectError")
            page.screenshot(path=str(SHOTS / "pulsar-trouble.png"), full_page=True)
            browser.close()
