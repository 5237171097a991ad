"""Schemathesis over the whole OpenAPI schema, as an operator, a viewer and a broker: no 5xx and
every response matches its declared schema."""

import json

import pytest
import schemathesis
from django.contrib.auth.models import Group, User
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from console.access import OPERATORS_GROUP
from tests.conftest import owned_and_reported


def load_schema():
    """The schema drf-spectacular serves at /api/schema/, called in-process (WSGI)."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    loaded.app = get_wsgi_application()
    return loaded


schema = load_schema()


@pytest.fixture
def owned(cluster):
    """Owners and a report each, so that every endpoint has something to show. The WSGI app
    keeps the test's database connection open, as Django's test client does."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    owned_and_reported(lambda i: 30.0)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def session_for(username, *, operator):
    """A logged-in session's cookies and CSRF header (made directly: Django's test client would
    reconnect the signal that closes the test's database connection)."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.create_user(username)  # no password: nothing to hash
    if operator:
        user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    csrf = "f" * 32
    return {
        "cookies": {"sessionid": session.session_key, "csrftoken": csrf},
        "headers": {"X-CSRFToken": csrf},
    }


@schema.parametrize()
@hypothesis_settings(
    # Generated cases only (not schemathesis' explicit coverage cases): a bounded run in CI.
    max_examples=25,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_the_api_never_fails_and_matches_its_schema(case, owned, settings):
    broker = {
        "cookies": {},
        "headers": {"Authorization": f"Broker {settings.FULCRUM_BROKER_TOKEN}"},
    }
    serial = User.objects.count()
    for auth in (
        session_for(f"operator-{serial}", operator=True),
        session_for(f"viewer-{serial}", operator=False),
        broker,
    ):
        case.call_and_validate(
            headers=auth["headers"],
            cookies=auth["cookies"],
            checks=[not_a_server_error, response_schema_conformance],
        )
