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


@pytest.fixture
def owns_one(cluster):
    """broker-1 owns acme/orders/0x00000000_0x40000000 (``test_ingest.BUNDLE``)."""
    from console.models import Broker, Bundle

    bundle = Bundle.objects.select_related("namespace").get(namespace__name="acme/orders", lower=0)
    bundle.owner = Broker.objects.get(name="broker-1")
    bundle.save()
    return bundle
