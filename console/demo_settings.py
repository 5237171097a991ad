"""The demo profile (``make run``, the tests): ``console.settings`` with FULCRUM_DEMO=1."""

import os

os.environ.setdefault("FULCRUM_DEMO", "1")

from console.settings import *  # noqa: F403
