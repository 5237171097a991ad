"""The dead-man's process (``manage.py deadman``): ``console.settings`` with only the apps its
models need and no middleware, so that the process loads no admin, API, websockets or services
it does not use (about 85 MB resident instead of 120)."""

from console import settings as _console
from console.settings import *  # noqa: F403

INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "console"]
MIDDLEWARE = _console.MIDDLEWARE[:0]
