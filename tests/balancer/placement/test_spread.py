"""anti_affinity_spread: where a group's namespaces are, and where the spread breaks the rule."""

from balancer.config import PulsarConfig
from balancer.placement.filters import anti_affinity_spread
from tests.balancer.test_cycle import _three_domains


def test_two_namespaces_of_a_group_on_one_broker_while_another_holds_none_is_a_violation():
    snap = _three_domains({"t/a": "HA", "t/b": "ha", "t/c": "other"})
    ha, other = anti_affinity_spread(snap, PulsarConfig(), ["b1", "b2", "b3"])
    assert ha["group"] == "HA"
    assert ha["namespaces"] == ["t/a", "t/b"]
    assert ha["brokers"] == {"b1": ["t/a", "t/b"]}
    assert ha["domains"] == {"d1": 2, "d2": 0}
    (violation,) = ha["violations"]
    assert violation["broker"] == "b1"
    assert violation["reason"] == (
        "b1 owns bundles of 2 namespaces of group 'HA' (t/a, t/b) while b2 owns none"
    )
    assert other["violations"] == []
    assert other["brokers"] == {"b3": ["t/c"]}


def test_with_failure_domains_a_domain_holding_two_while_another_holds_none_is_a_violation():
    snap = _three_domains({"t/a": "ha", "t/b": "ha"})
    on = PulsarConfig(is_failure_domains_enabled=True)
    (ha,) = anti_affinity_spread(snap, on, ["b1", "b2", "b3"])
    kinds = [("broker" in v, "domain" in v) for v in ha["violations"]]
    assert kinds == [(True, False), (False, True)]
    assert ha["violations"][1]["reason"] == (
        "failure domain 'd1' holds 2 namespaces of group 'ha' while 'd2' holds none"
    )
    # Every serving broker holds one already: nothing is free, nothing is a violation.
    (full,) = anti_affinity_spread(snap, on, ["b1"])
    assert full["violations"] == []
    assert anti_affinity_spread(_three_domains(), on, ["b1"]) == []
