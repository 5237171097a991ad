"""ASGI entry point: HTTP through Django (brokers' load reports through ``ingest_asgi``),
websockets through Channels."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from console.api import ingest_asgi  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402


async def http_app(scope, receive, send):  # type: ignore[no-untyped-def]
    """Brokers' load reports to ``ingest_asgi`` (the hot path), everything else to Django."""
    if ingest_asgi.handles(scope):
        await ingest_asgi.app(scope, receive, send)
    else:
        await django_asgi_app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# Everything loaded so far (Django, the app, the URL conf) lives as long as the process: out of
# the collector's generations, a full collection no longer walks it (it paused a web worker for
# 100-130 ms every few seconds under a thousand load reports a second).
gc.freeze()
