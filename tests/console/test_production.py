"""The production profile: required settings, `check --deploy` clean, JSON errors without
tracebacks, login throttling."""

import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User

PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "console.settings",
    "FULCRUM_DEMO": "0",
    "DJANGO_SECRET_KEY": "k8#Qm2vX9!pL4zR7tW1yB6nC3dF5gH0jK2sA8eU4iO7qZ1xV9m",
    "DJANGO_ALLOWED_HOSTS": "fulcrum.example.org",
    "FULCRUM_HTTPS": "1",
}


def manage(*args, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FULCRUM_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_deploy_is_clean_in_the_production_profile():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION.items() if k != "DJANGO_SECRET_KEY"}
    result = manage("check", **env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY is required outside demo mode" in result.stderr


def test_an_unexpected_api_error_is_json_without_a_traceback(operator_client, monkeypatch):
    from console import selectors

    def boom():
        raise RuntimeError("secret internals")

    monkeypatch.setattr(selectors, "broker_rankings", boom)
    operator_client.raise_request_exception = False
    response = operator_client.get("/api/rankings/")
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["message"].startswith("internal error")
    assert "secret internals" not in response.content.decode()
    assert "Traceback" not in response.content.decode()


def test_an_unknown_api_path_is_a_json_404(operator_client):
    response = operator_client.get("/api/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"]["message"]


@pytest.mark.django_db
def test_repeated_wrong_passwords_lock_the_login(client, settings):
    User.objects.create_user("carol", password="right-password-1")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "carol", "password": "wrong"})
    locked = client.post("/login/", {"username": "carol", "password": "right-password-1"})
    assert locked.status_code == 429
    assert not locked.wsgi_request.user.is_authenticated
    # A page, not a bare line: how long, until when, and the way back.
    page = locked.content.decode()
    assert f"After {settings.AXES_FAILURE_LIMIT} failed attempts" in page
    assert "for 15 minutes, until <time" in page
    assert "(about 15 min from now)" in page
    assert 'href="/login/"' in page


@pytest.mark.django_db
def test_not_found_and_not_allowed_are_pages_with_the_navigation(client, viewer):
    client.force_login(viewer)
    missing = client.get("/no-such-page/")
    assert missing.status_code == 404
    body = missing.content.decode()
    assert "There is no page at <code>/no-such-page/</code>" in body
    assert "<nav>" in body
    assert 'href="/"' in body
