"""Users and roles without the Django admin (issue 25, item 6): ``manage.py fulcrum_user``."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from console.access import is_operator, role_of
from console.errors import ConsoleError
from console.models import AuditEvent
from console.services.users import user_role_set, users_list


def test_a_user_is_made_with_a_role_and_its_role_changed(db):
    out = io.StringIO()
    call_command("fulcrum_user", "olga", "--role", "operator", stdout=out)
    said = out.getvalue().splitlines()
    assert said[0] == "olga: operator"
    password = said[1].removeprefix("password (shown once): ")
    user = User.objects.get(username="olga")
    assert user.check_password(password)
    assert (role_of(user), is_operator(user)) == ("operator", True)
    call_command("fulcrum_user", "olga", "--role", "viewer", stdout=io.StringIO())
    user.refresh_from_db()
    assert (role_of(user), is_operator(user)) == ("viewer", False)
    assert user.check_password(password)  # a role change keeps the password
    call_command("fulcrum_user", "olga", "--role", "admin", stdout=io.StringIO())
    assert role_of(User.objects.get(username="olga")) == "admin"
    rows = AuditEvent.objects.filter(target="user olga").order_by("id")
    reasons = list(rows.values_list("reason", flat=True))
    assert reasons == [
        "user olga: role none -> operator (created)",
        "user olga: role operator -> viewer",
        "user olga: role viewer -> admin",
    ]
    assert [u["role"] for u in users_list() if u["name"] == "olga"] == ["admin"]


def test_a_password_from_stdin_and_bad_input_named_by_field(db, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("correct horse battery staple\n"))
    out = io.StringIO()
    call_command("fulcrum_user", "ivan", "--role", "viewer", "--password-stdin", stdout=out)
    assert "shown once" not in out.getvalue()
    assert User.objects.get(username="ivan").check_password("correct horse battery staple")
    with pytest.raises(ConsoleError) as err:
        user_role_set("ivan", "root")
    assert err.value.field == "role"
    for bad in ("   ", "olga\x00", "two words", "a/b"):
        with pytest.raises(ConsoleError) as err:
            user_role_set(bad, "viewer")
        assert err.value.field == "name"
    monkeypatch.setattr("sys.stdin", io.StringIO("123\n"))
    with pytest.raises(CommandError, match="password"):
        call_command("fulcrum_user", "ivan", "--role", "viewer", "--password-stdin")
    # Nothing was written by a refused call: the role and the password are as they were.
    user = User.objects.get(username="ivan")
    assert role_of(user) == "viewer"
    assert user.check_password("correct horse battery staple")


def test_the_users_page_is_an_admin_s_and_names_the_field_at_fault(client, viewer):
    """Issue 25, item 6: a users page for admins (403, a page with the navigation, for
    anyone else)."""
    client.force_login(viewer)
    refused = client.get("/users/")
    assert refused.status_code == 403
    assert "the users page is an admin" in refused.content.decode()
    assert "<nav>" in refused.content.decode()
    admin = User.objects.create_superuser("root", password="s3cret-pass")
    client.force_login(admin)
    page = client.get("/users/")
    assert page.status_code == 200
    assert 'data-user="root"' in page.content.decode()
    # Its last login as every time of the console is written: date, time (the column says UTC).
    when = User.objects.get(username="root").last_login  # set by the login above
    assert f">{when:%Y-%m-%d %H:%M:%S}</time>" in page.content.decode()
    made = client.post("/users/", {"name": "pat", "role": "operator"})
    assert made.status_code == 200
    assert "pat is now operator." in made.content.decode()
    assert 'id="made-password"' in made.content.decode()
    assert role_of(User.objects.get(username="pat")) == "operator"
    bad = client.post("/users/", {"name": "pat", "role": "viewer", "password": "123"})
    assert bad.status_code == 400
    body = bad.content.decode()
    assert 'name="password" type="password"' in body
    assert 'class="invalid" aria-invalid="true"' in body
    assert role_of(User.objects.get(username="pat")) == "operator"  # nothing written


def test_a_refusal_is_one_line_in_the_log_and_an_error_keeps_its_traceback():
    """The console handler's filter: Django logs a 403 or 404 with its exception; the line says
    enough, the traceback is noise in an operator's log (an error of ours keeps its own)."""
    import logging
    import sys

    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from console.settings import _refusal_said

    def logged(error: Exception) -> logging.LogRecord:
        try:
            raise error
        except Exception:
            return logging.LogRecord(
                "django.request", logging.WARNING, __file__, 1, "Forbidden", None, sys.exc_info()
            )

    for refusal in (PermissionDenied("the users page is an admin's"), Http404("no such page")):
        record = logged(refusal)
        assert _refusal_said(record)
        assert record.exc_info is None
    error = logged(ValueError("a bug"))
    assert _refusal_said(error)
    assert error.exc_info is not None
