"""One set of numbers per decision (issue 24, item 4): the decision page's headline, cards,
chart data and the rule's per-broker table all come from the plan's own figures (before,
predicted after, observed), in the same units; FulcrumShedder's own prediction agrees with the
plan's, move for move, because both are the load model's."""

import json
import re
from html import unescape

import pytest
from django.test import Client

from balancer.cycle import LoadStats
from console.models import Broker, Bundle, Decision
from console.services import shedding_tick_run
from console.templatetags.units import percent
from tests.conftest import MIB, ingest, report


def _rule_table(page: str) -> dict[str, dict[str, str]]:
    """The rule's per-broker table: broker -> column -> cell text."""
    table = re.search(r'<table id="rule-brokers".*?</table>', page, re.S)
    assert table is not None
    head = [unescape(h) for h in re.findall(r"<th>(.*?)</th>", table.group(0))]
    out = {}
    for row in re.findall(r"<tr data-broker=.*?</tr>", table.group(0), re.S):
        cells = [re.sub(r"<.*?>", "", c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
        out[cells[0]] = dict(zip(head[1:], cells[1:], strict=True))
    return out


def test_the_decision_page_shows_the_plans_own_figures_everywhere(fulcrum_cluster, operator):
    brokers = list(Broker.objects.order_by("name"))
    owned: dict[str, list[str]] = {b.name: [] for b in brokers}
    for bundle in Bundle.objects.select_related("namespace").order_by("id"):
        bundle.owner = brokers[0]  # every bundle on broker-1: it is hot, the others idle
        bundle.save()
        owned[brokers[0].name].append(bundle.name)
    load = {
        "msgRateIn": 500.0,
        "msgRateOut": 500.0,
        "msgThroughputIn": MIB,
        "msgThroughputOut": MIB,
    }
    for b, cpu in zip(brokers, (70.0, 10.0, 12.0), strict=True):
        mine = owned[b.name]
        rate = 500.0 * len(mine)
        stats = {n: dict(load) for n in mine}
        doc = report(b.name, cpu, bundles=mine, throughput_mib=2.0 * len(mine), stats=stats)
        ingest(doc | {"msgRateIn": rate, "msgRateOut": rate})
    decision = shedding_tick_run()
    assert isinstance(decision, Decision)
    details = decision.details
    assert [a for a in details["actions"] if a["kind"] == "unload" and a["outcome"] == "planned"]
    after = details["stats"]["after"]["brokers"]
    before = details["stats"]["before"]["brokers"]
    # The shedder's own prediction is the plan's, broker for broker.
    predicted = details["shedding"]["stats"]["predicted"]
    assert predicted == pytest.approx(after, abs=1e-6)
    client = Client()
    client.force_login(operator)
    page = client.get(f"/decisions/{decision.pk}/").content.decode()
    data = json.loads(
        unescape(
            re.search(
                r'id="decision-data" type="application/json">(.*?)</script>', page, re.S
            ).group(1)
        )
    )
    chart = {b["name"]: b for b in data["brokers"]}
    table = _rule_table(page)
    for name in after:
        # The chart's data and the table's cells: the plan's figures, in %.
        assert chart[name]["after"] == after[name]
        assert chart[name]["before"] == before[name]
        assert table[name]["after (predicted)"] == percent(after[name])
        assert table[name]["before"] == percent(before[name])
        assert "predicted" not in table[name]  # no second prediction beside the plan's
    # The cards and the headline say the plan's CV.
    cv_after = LoadStats.of(after).cv
    assert data["after"]["cv"] == pytest.approx(cv_after)
    assert f"{cv_after:.3f}" in page
    assert f"-&gt; {cv_after:.2f} predicted" in page or f"-> {cv_after:.2f} predicted" in page
