"""Layouts of any size for the simulated cluster (balancer/simulator/layout.py)."""

import pytest

from balancer.simulator.layout import DEMO, generated_layout


def test_a_generated_layout_has_the_asked_size_spread_over_its_failure_domains():
    layout = generated_layout(200, 250, 200, 5)
    assert len(layout.brokers) == 200
    assert len(layout.namespaces) == 250
    assert layout.bundles_per_namespace == 200
    assert layout.failure_domains == ["zone-a", "zone-b", "zone-c", "zone-d", "zone-e"]
    per_domain = {
        d: sum(b.failure_domain == d for b in layout.brokers) for d in layout.failure_domains
    }
    assert set(per_domain.values()) == {40}
    assert len(layout.tenants) == 25  # ten namespaces to a tenant
    assert layout.namespaces[0] == "tenant-01/ns-0001"
    assert layout.namespaces[-1] == "tenant-25/ns-0250"
    # The demo's CPU series in turn: every broker has a real trace behind it.
    assert {b.cpu_series for b in layout.brokers} == {b.cpu_series for b in DEMO.brokers}
    assert layout.anti_affinity == ()


def test_more_than_26_failure_domains_get_numbers():
    layout = generated_layout(30, 1, 1, 28)
    assert layout.failure_domains[25:] == ["zone-z", "zone-27", "zone-28"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((0, 1, 1, 1), "brokers must be at least 1, not 0"),
        ((2, 1, 0, 1), "bundles_per_namespace must be at least 1"),
        ((2, 1, 1, 3), "3 failure domains need at least as many brokers"),
    ],
)
def test_a_layout_that_cannot_be_is_refused_naming_the_count(args, said):
    with pytest.raises(ValueError, match=said):
        generated_layout(*args)
