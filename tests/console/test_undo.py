"""Undo of a completed unload (services.bundles.bundle_unload_undo, the API, the audit page in
Chromium): the bundle back to the broker it left through the same vetoes and preview, linked
to the move it reverses; and every refusal with its reason."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta

import pytest
from channels.testing import ChannelsLiveServerTestCase
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.utils import timezone

from tests.browser import CHROMIUM, LAUNCH_ARGS, login
from tests.conftest import SMALL, ingest, report

SHOTS = settings.VAR_DIR / "screenshots"


def moved(operator) -> tuple[str, int]:
    """broker-1 owns every bundle; the operator moves the first to broker-2 (audited)."""
    from console.models import Broker, Bundle
    from console.services import bundle_unload

    Bundle.objects.update(owner=Broker.objects.get(name="broker-1"))
    bundles = list(Bundle.objects.select_related("namespace").order_by("namespace__name", "lower"))
    for name, cpu in (("broker-1", 60), ("broker-2", 20), ("broker-3", 20)):
        owned = [b.name for b in bundles] if name == "broker-1" else []
        ingest(report(name, cpu, bundles=owned))
    done = bundle_unload(bundles[0].name, actor=operator, destination="broker-2", force=True)
    return bundles[0].name, done["audit"]


def test_an_undo_moves_the_bundle_back_through_the_vetoes_and_links_the_move(cluster, operator):
    from console.errors import ConsoleError
    from console.models import AuditEvent, Bundle
    from console.services import bundle_unload_undo

    bundle, audit = moved(operator)
    preview = bundle_unload_undo(audit, actor=operator, preview=True)
    assert preview["preview"] is True
    assert preview["reverses"] == audit
    assert preview["vetoed"]  # just moved: its cool-down holds it
    assert preview["overridable"]
    # broker-1 holds the namespace's other bundles: the even-distribution filter would not
    # choose it either. The preview shows both vetoes, and the override takes those two.
    shown = [(a["kind"], a["veto"]) for a in preview["plan"]["actions"] if a["outcome"] == "vetoed"]
    assert shown == [("unload", "CoolDown"), ("place", "NotLeastBundlesOfNamespace")]
    assert preview["overrides"] == ["CoolDown", "NotLeastBundlesOfNamespace"]
    with pytest.raises(ConsoleError) as unseen:
        bundle_unload_undo(audit, actor=operator, force=True, overrides=["CoolDown"])
    assert (unseen.value.status, unseen.value.field) == (409, "overrides")
    assert "NotLeastBundlesOfNamespace, which the preview did not show" in unseen.value.message
    assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-2"
    with pytest.raises(ConsoleError) as vetoed:
        bundle_unload_undo(audit, actor=operator)
    assert vetoed.value.status == 409
    undone = bundle_unload_undo(
        audit, actor=operator, force=True, overrides=preview["overrides"], note="wrong broker"
    )
    assert (undone["source"], undone["destination"]) == ("broker-2", "broker-1")
    assert undone["inFlight"] is False  # no Pulsar attached: moved in the store, done
    assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-1"
    back = AuditEvent.objects.get(pk=undone["audit"])
    assert back.reverses_id == audit
    assert back.reason.startswith(
        f"Operator's reason: undo of audit row {audit} (its move broker-1 -> broker-2): wrong "
        "broker."
    )
    assert "forced past" in back.reason
    with pytest.raises(ConsoleError) as again:
        bundle_unload_undo(audit, actor=operator, force=True)
    assert (again.value.status, again.value.message) == (
        409,
        f"the move was undone already (audit row {back.pk})",
    )
    assert bundle  # the bundle's name came back


def test_undo_refusals_say_why(cluster, operator, viewer, settings):
    from console.errors import ConsoleError
    from console.models import AuditEvent, Broker, Bundle
    from console.services import bundle_unload_undo

    _, audit = moved(operator)

    def refused(audit_id, status, words, actor=operator):
        with pytest.raises(ConsoleError) as caught:
            bundle_unload_undo(audit_id, actor=actor, force=True)
        assert caught.value.status == status
        assert words in caught.value.message
        return caught.value

    refused(audit, 403, "", actor=viewer)
    refused(999_999, 404, "unknown audit row")
    config = AuditEvent.objects.create(
        at=timezone.now(), action=AuditEvent.Action.CONFIG, target="config", reason="saved"
    )
    assert refused(config.pk, 400, "not an unload").field == "audit"
    # The broker it left, draining: it takes no bundle.
    Broker.objects.filter(name="broker-1").update(state=Broker.State.DRAINING)
    refused(audit, 409, "the broker it left, broker-1, is draining")
    Broker.objects.filter(name="broker-1").update(state=Broker.State.ACTIVE)
    # Moved on since: only its latest move can be undone.
    Bundle.objects.filter(namespace__name="acme/orders", lower=0).update(
        owner=Broker.objects.get(name="broker-3")
    )
    refused(audit, 409, "has moved on since: it is on broker-3, not broker-2")
    Bundle.objects.filter(namespace__name="acme/orders", lower=0).update(
        owner=Broker.objects.get(name="broker-2")
    )
    # Past the window.
    settings.FULCRUM_UNDO_WINDOW_S = 60
    AuditEvent.objects.filter(pk=audit).update(at=timezone.now() - timedelta(minutes=90))
    refused(audit, 409, "is 1 h 30 min old, past the undo window of 1 min")
    settings.FULCRUM_UNDO_WINDOW_S = 3600
    AuditEvent.objects.filter(pk=audit).update(at=timezone.now())
    # The broker it left, gone.
    AuditEvent.objects.filter(pk=audit).update(source="broker-9")
    refused(audit, 409, "the broker it left, broker-9, is gone")
    assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-2"


def test_the_api_undo_previews_and_refuses_by_field(cluster, operator, operator_client, viewer):
    from rest_framework.test import APIClient

    _, audit = moved(operator)
    preview = operator_client.post(f"/api/audit/{audit}/undo/", {"preview": True}, format="json")
    assert preview.status_code == 200
    assert preview.json()["reverses"] == audit
    bad = operator_client.post(f"/api/audit/{audit}/undo/", {"force": "maybe"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "force"
    viewing = APIClient()
    viewing.force_authenticate(viewer)
    assert viewing.post(f"/api/audit/{audit}/undo/", {}, format="json").status_code == 403
    done = operator_client.post(f"/api/audit/{audit}/undo/", {"force": True}, format="json")
    assert done.status_code == 200
    listed = operator_client.get(f"/api/audit/{done.json()['audit']}/").json()
    assert listed["reverses"] == audit


def test_the_bundle_panel_s_undo_reverses_the_bundle_s_latest_unload(
    cluster, operator, operator_client
):
    from console.models import AuditEvent, Bundle

    bundle, audit = moved(operator)
    url = "/api/bundles/by-name/undo/"
    preview = operator_client.post(url, {"bundle": bundle, "preview": True}, format="json")
    assert preview.status_code == 200
    assert (preview.json()["reverses"], preview.json()["vetoed"]) == (audit, True)
    assert preview.json()["undoes"]["source"] == "broker-1"
    other = Bundle.objects.exclude(namespace__name="acme/orders", lower=0).first().name
    # Asked of a bundle never moved, the preview answers (the map asks of every bundle it
    # shows: no failed request by design); confirmed, it is refused.
    said = f"{other} has no unload within the undo window (1 h): nothing to undo"
    never = operator_client.post(url, {"bundle": other, "preview": True}, format="json")
    assert never.status_code == 200
    assert never.json() == {"preview": True, "undoable": False, "bundle": other, "why": said}
    refused = operator_client.post(url, {"bundle": other}, format="json")
    assert refused.status_code == 409
    assert refused.json()["error"] == {"code": "conflict", "message": said, "field": "bundle"}
    nowhere = {"bundle": "acme/orders/0x00000000_0x00000001"}
    unknown = operator_client.post(url, nowhere, format="json")
    assert unknown.status_code == 404
    assert operator_client.post(url, {"force": True}, format="json").status_code == 400
    done = operator_client.post(url, {"bundle": bundle, "force": True}, format="json")
    assert done.status_code == 200
    assert AuditEvent.objects.get(pk=done.json()["audit"]).reverses_id == audit
    assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-1"
    # The undo is now the bundle's latest unload: undoing it again is undoing the undo.
    again = operator_client.post(url, {"bundle": bundle, "preview": True}, format="json")
    assert again.json()["reverses"] == done.json()["audit"]
    # An unload that left the bundle to the next lookup moved it to no broker: nothing to undo.
    nowhere = AuditEvent.objects.create(
        at=timezone.now(), action=AuditEvent.Action.UNLOAD, target=bundle, source="broker-1"
    )
    left = operator_client.post(url, {"bundle": bundle, "preview": True}, format="json")
    assert (left.status_code, left.json()["error"]["field"]) == (409, "bundle")
    assert f"audit row {nowhere.pk}) left it to the next lookup" in left.json()["error"]["message"]


@pytest.mark.browser
class TestUndoInBrowser(ChannelsLiveServerTestCase):
    serve_static = True

    def setUp(self):
        from console.access import OPERATORS_GROUP
        from console.services.seed import cluster_seed

        assert shutil.which(CHROMIUM), "make test installs Debian's chromium"
        cluster_seed(SMALL)
        self.user = User.objects.create_user("alice", password="s3cret-pass")
        self.user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
        SHOTS.mkdir(parents=True, exist_ok=True)
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs a loop

    def test_undo_from_the_audit_page_previewed_overridden_and_linked(self):
        from playwright.sync_api import expect, sync_playwright

        from console.models import AuditEvent, Bundle

        bundle, audit = moved(self.user)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "alice", "s3cret-pass")
            page.goto(f"{self.live_server_url}/audit/?action=unload")
            page.click(f"button.undo[data-audit='{audit}']")
            dialog = page.locator("#undo-dialog")
            expect(dialog).to_be_visible()
            expect(dialog.locator("#undo-title")).to_contain_text(f"{bundle} back to broker-1")
            expect(dialog.locator("#undo-summary")).to_contain_text("Vetoed")
            expect(page.locator("#undo-confirm")).to_be_disabled()
            page.check("#undo-force")
            page.fill("#undo-reason", "sent to the wrong broker")
            page.screenshot(path=str(SHOTS / "audit-undo-preview.png"))
            page.click("#undo-confirm")
            expect(page.locator("#result")).to_contain_text("Undone:", timeout=10_000)
            back = AuditEvent.objects.get(reverses_id=audit)
            page.wait_for_load_state("networkidle")
            page.goto(f"{self.live_server_url}/audit/?action=unload")
            expect(page.locator("#audit")).to_contain_text(f"undone by #{back.pk}")
            expect(page.locator("#audit")).to_contain_text(f"undoes #{audit}")
            expect(page.locator(f"button.undo[data-audit='{audit}']")).to_have_count(0)
            page.screenshot(path=str(SHOTS / "audit-undone.png"), full_page=True)
            browser.close()
        assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-1"

    def test_undo_from_the_bundle_map_s_panel(self):
        from playwright.sync_api import expect, sync_playwright

        from console.models import AuditEvent, Bundle

        bundle, audit = moved(self.user)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
            page = login(browser, self.live_server_url, "alice", "s3cret-pass")
            page.goto(f"{self.live_server_url}/bundles/?bundle={bundle}")
            form = page.locator("#undo-form")
            expect(form).to_be_visible()
            expect(form.locator("#undo-last")).to_contain_text(
                "took it from broker-1 to broker-2; undoing it sends it back to broker-1"
            )
            page.fill("#undo-reason", "back where it was")
            page.click("#undo-preview")
            expect(page.locator("#plan")).to_be_visible()
            # Both vetoes the override would pass, shown before it is ticked (issue 25, item 3).
            expect(page.locator("#plan-summary")).to_contain_text("2 vetoed")
            expect(page.locator("#plan-override")).to_contain_text(
                "Override the veto: CoolDown and NotLeastBundlesOfNamespace, as the preview shows"
            )
            expect(page.locator("#plan-confirm")).to_be_disabled()
            page.check("#plan-force")
            page.screenshot(path=str(SHOTS / "bundle-panel-undo-preview.png"))
            page.click("#plan-confirm")
            expect(page.locator("#result")).to_contain_text(
                f"Undid audit row #{audit}", timeout=10_000
            )
            # Seen on its new owner, the bundle's last move is the undo: offered in turn.
            expect(page.locator("#undo-last")).to_contain_text(
                "took it from broker-2 to broker-1", timeout=10_000
            )
            page.screenshot(path=str(SHOTS / "bundle-panel-undone.png"))
            browser.close()
        back = AuditEvent.objects.get(reverses_id=audit)
        assert back.actor == self.user
        assert "back where it was" in back.reason
        assert Bundle.objects.get(namespace__name="acme/orders", lower=0).owner.name == "broker-1"
