"""The console's tests run against the tests' own Redis (``make test`` starts it)."""

import pytest

from tests.conftest import BUNDLE_LOADS


@pytest.fixture(autouse=True)
def _live_load_store():
    """Each test starts with an empty live load store (on the tests' own Redis)."""
    from console import loadstore

    loadstore.clear()
    BUNDLE_LOADS.clear()
    yield
    loadstore.clear()
