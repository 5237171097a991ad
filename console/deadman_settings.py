"""The dead-man's process (``manage.py deadman``): ``console.settings`` with only the apps its
models need and no middleware, so that the process loads no admin, API, websockets or services
it does not use (84 MB resident instead of 118)."""

from console import settings as _console
from console.settings import *  # noqa: F403

INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "console"]
MIDDLEWARE = _console.MIDDLEWARE[:0]

# A database that does not answer is found out in seconds, not at TCP's pace.
if "postgresql" in DATABASES["default"]["ENGINE"]:  # noqa: F405
    DATABASES["default"].setdefault("OPTIONS", {})  # noqa: F405
    DATABASES["default"]["OPTIONS"] |= {  # noqa: F405
        "connect_timeout": 5,
        "options": "-c statement_timeout=5000 -c lock_timeout=5000",
    }
