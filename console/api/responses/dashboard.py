"""What the dashboard's endpoints answer: ownership, rankings, the balance panel, the loop, the
decision feed, the bundle map, the failure domains, the strategies, a broker's history
(``console.selectors``' shapes)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.api.responses.common import BROKER_STATES, ScalarField, iso, names
from console.models import AuditEvent, Broker, PulsarMove


class OwnedBundleOutput(serializers.Serializer):
    """A bundle and its owner."""

    name = serializers.CharField()
    owner = serializers.CharField(allow_null=True, help_text="null while unassigned")


class OwnershipOutput(serializers.Serializer):
    """Every bundle and its owner (a broker's token: its own and the unowned ones)."""

    bundles = OwnedBundleOutput(many=True)


class RankingOutput(serializers.Serializer):
    """A broker's row of the rankings, least loaded first (usage in percent of capacity)."""

    name = serializers.CharField()
    state = serializers.ChoiceField(choices=BROKER_STATES)
    failureDomain = serializers.CharField(help_text='"" when none')
    score = serializers.FloatField(help_text="weighted max usage, percent (0–100)")
    cpu = serializers.FloatField(help_text="percent")
    bandwidthIn = serializers.FloatField(help_text="percent")
    bandwidthOut = serializers.FloatField(help_text="percent")
    bundles = serializers.IntegerField(help_text="owned")
    throughput = serializers.FloatField(help_text="bytes/s, in + out")
    msgRate = serializers.FloatField(help_text="msg/s, in + out")
    reportedAt = iso(allow_null=True, help_text="its newest report, ISO 8601 UTC; null: none")
    rank = serializers.IntegerField(help_text="1: least loaded")


class RankingsOutput(serializers.Serializer):
    """The rankings and the spread of the serving brokers' scores (fractions 0–1)."""

    rankings = RankingOutput(many=True)
    cv = serializers.FloatField(help_text="std / mean; 0 below 2 serving brokers")
    mean = serializers.FloatField(help_text="fraction 0–1")
    std = serializers.FloatField(help_text="fraction 0–1")
    serving = serializers.IntegerField(help_text="active brokers reporting in time")


class OptimalityOutput(serializers.Serializer):
    """The optimality gauge: max/mean of broker usage now against the best reachable."""

    at = iso()
    maxOverMean = serializers.FloatField(help_text="now; 1.0: perfectly even")
    optimumMaxOverMean = serializers.FloatField(help_text="the best assignment found")
    ratio = serializers.FloatField(help_text="now ÷ optimum, ≥ 1")
    brokers = serializers.IntegerField()
    bundles = serializers.IntegerField()


class BudgetOutput(serializers.Serializer):
    """The move budget."""

    used = serializers.IntegerField(help_text="moves in the last hour")
    limit = serializers.IntegerField(allow_null=True, help_text="moves an hour; null: no limit")


class CoolingBundleOutput(serializers.Serializer):
    """A bundle in cool-down."""

    bundle = serializers.CharField()
    eligibleAt = iso()
    inS = serializers.FloatField(help_text="seconds until eligible")


class CoolDownOutput(serializers.Serializer):
    """Bundles moved within the cool-down, and the five soonest eligible again."""

    seconds = serializers.FloatField(help_text="the cool-down, s")
    bundles = serializers.IntegerField(help_text="how many wait")
    next = CoolingBundleOutput(many=True)


class BounceOutput(serializers.Serializer):
    """A bundle moved back to a broker it left within the hour before (an oscillation)."""

    id = serializers.IntegerField(help_text="the audit row")
    bundle = serializers.CharField()
    broker = serializers.CharField()
    at = iso()
    leftAt = iso()
    decision = serializers.IntegerField(allow_null=True)


class FlipFlopOutput(serializers.Serializer):
    """A broker that gave, took and gave bundles (or took, gave, took) within an hour."""

    id = serializers.IntegerField(help_text="its last move's audit row")
    broker = serializers.CharField()
    at = iso()
    firstAt = iso()
    pattern = serializers.CharField(help_text='e.g. "gave 2, took 1, gave 1"')
    decision = serializers.IntegerField(allow_null=True)


class QuietSkipOutput(serializers.Serializer):
    """A broker the latest shedding left alone, and why."""

    broker = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    detail = serializers.CharField()


class QuietOutput(serializers.Serializer):
    """The latest shedding decision, when it moved nothing."""

    strategy = serializers.CharField()
    reason = serializers.CharField()
    at = iso()
    skipped = QuietSkipOutput(many=True)


class BalanceOutput(serializers.Serializer):
    """The balance panel (``selectors.balance_status``)."""

    optimality = OptimalityOutput(allow_null=True, help_text="null until measured")
    budget = BudgetOutput()
    coolDown = CoolDownOutput()
    oscillations = BounceOutput(many=True, help_text="the last hour's, newest first")
    flipFlops = FlipFlopOutput(many=True, help_text="the last hour's, newest first")
    quiet = QuietOutput(allow_null=True, help_text="null: the latest shedding moved bundles")


class LoopStrategiesOutput(serializers.Serializer):
    """The configured strategies."""

    shedder = serializers.CharField()
    placement = serializers.CharField()
    split = serializers.CharField()


class LoopOutput(serializers.Serializer):
    """The shedding loop's health (``selectors.loop_health``)."""

    lastTick = iso(allow_null=True, help_text="ISO 8601 UTC; null before the first tick")
    nextTick = iso(allow_null=True, help_text="ISO 8601 UTC; null before the first tick")
    intervalS = serializers.FloatField(help_text="s")
    sheddingEnabled = serializers.BooleanField(help_text="false: paused")
    overdue = serializers.BooleanField(help_text="no tick for 3 intervals")
    strategies = LoopStrategiesOutput()


class FeedItemOutput(serializers.Serializer):
    """A decision that acted (``type`` decision), or a run of quiet cycles (``type`` quiet)."""

    type = serializers.ChoiceField(choices=["decision", "quiet"])
    id = serializers.IntegerField(required=False, help_text="decision")
    at = iso(required=False, help_text="decision: ISO 8601 UTC")
    kind = serializers.CharField(required=False, help_text="decision")
    strategy = serializers.CharField(required=False, help_text="decision")
    reason = serializers.CharField()
    summary = serializers.CharField(required=False, help_text="decision")
    count = serializers.IntegerField(required=False, help_text="quiet: cycles")
    first = iso(required=False, help_text="quiet: ISO 8601 UTC")
    last = iso(required=False, help_text="quiet: ISO 8601 UTC")


class DecisionFeedOutput(serializers.Serializer):
    """The latest acting decisions, newest first, quiet cycles between them as counts."""

    feed = FeedItemOutput(many=True)


class MapBrokerOutput(serializers.Serializer):
    """A broker of the bundle map (its colour is its position)."""

    name = serializers.CharField()
    domain = serializers.CharField(help_text='its failure domain, "" when none')
    state = serializers.ChoiceField(choices=BROKER_STATES)


@extend_schema_field(
    {
        "type": "array",
        "minItems": 9,
        "maxItems": 9,
        "items": {
            "anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}],
            "nullable": True,
        },
        "description": "[lower, upper (hash, integers), owner (null: none), throughput "
        "(bytes/s, short-term), msg rate (msg/s), topics, last move (ISO 8601 UTC or null), "
        'eligible at (ISO 8601 UTC; null: may move now), figures ("reported", "estimated" or '
        '"none")]',
    }
)
class MapBundleField(serializers.Field):
    """A bundle of the map as a row of nine values."""

    def to_representation(self, value: Any) -> Any:
        return value


class MapNamespaceOutput(serializers.Serializer):
    """A namespace's hash space as its bundles, by lower bound."""

    name = serializers.CharField()
    antiAffinityGroup = serializers.CharField(allow_null=True)
    bundles = serializers.ListField(child=MapBundleField())


class MapPageOutput(serializers.Serializer):
    """Which page of whole namespaces this is."""

    number = serializers.IntegerField(help_text="1-based")
    pages = serializers.IntegerField()
    namespaces = serializers.IntegerField(help_text="all that match")
    bundles = serializers.IntegerField(help_text="all that match")
    first = serializers.CharField(allow_null=True, help_text="the page's first namespace")
    last = serializers.CharField(allow_null=True, help_text="the page's last namespace")
    contains = serializers.CharField(help_text="the filter")


class MovingOutput(serializers.Serializer):
    """An unload queued or in flight on an attached Pulsar cluster."""

    state = serializers.ChoiceField(choices=[str(s) for s in PulsarMove.IN_FLIGHT])
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    destination = serializers.CharField(allow_null=True, help_text="null: Pulsar chooses")


class BundleMapOutput(serializers.Serializer):
    """A page of namespaces' bundles as hash ranges (``selectors.bundle_map``)."""

    at = iso()
    brokers = MapBrokerOutput(many=True)
    namespaces = MapNamespaceOutput(many=True)
    page = MapPageOutput()
    moving = serializers.DictField(child=MovingOutput(), help_text="bundle name -> its move")


class DrainOutput(serializers.Serializer):
    """A draining or drained broker's progress (``selectors.drain_progress``)."""

    state = serializers.ChoiceField(
        choices=[Broker.State.DRAINING.value, Broker.State.DRAINED.value]
    )
    since = iso(allow_null=True)
    bundles = serializers.IntegerField(help_text="still owned")
    queued = serializers.IntegerField()
    inFlight = serializers.IntegerField(help_text="sent, being verified")
    failed = serializers.IntegerField(help_text="moves failed or skipped since the drain began")


class DomainBrokerOutput(RankingOutput):
    """A broker's card: its ranking row and its drain."""

    drain = DrainOutput(allow_null=True, help_text="null: active")


class DomainOutput(serializers.Serializer):
    """A failure domain and its brokers, by name."""

    name = serializers.CharField(help_text='"default": brokers without one')
    brokers = DomainBrokerOutput(many=True)


class ViolationOutput(serializers.Serializer):
    """A broker or failure domain holding two or more of a group's namespaces while another
    holds none."""

    broker = serializers.CharField(required=False)
    domain = serializers.CharField(required=False)
    namespaces = names()
    reason = serializers.CharField()


class GroupSpreadOutput(serializers.Serializer):
    """An anti-affinity group's spread (``anti_affinity_spread``)."""

    group = serializers.CharField()
    namespaces = names()
    brokers = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="broker -> the group's namespaces it owns bundles of",
    )
    domains = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="failure domain -> the group's namespaces it holds",
    )
    violations = ViolationOutput(many=True)


class DomainsOutput(serializers.Serializer):
    """Failure domains with their brokers, and the anti-affinity groups' spread."""

    at = iso()
    failureDomainsEnabled = serializers.BooleanField()
    domains = DomainOutput(many=True)
    groups = GroupSpreadOutput(many=True)


class ParameterOutput(serializers.Serializer):
    """A configuration key a strategy reads, in its own unit."""

    key = serializers.CharField()
    unit = serializers.CharField(help_text="%, fraction, s, min, MiB/s, msg/s, count...")
    default = ScalarField()
    minimum = serializers.FloatField(allow_null=True, help_text="null: unbounded")
    maximum = serializers.FloatField(allow_null=True, help_text="null: unbounded")
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source


class StrategyOutput(serializers.Serializer):
    """A registry entry: a shedder, placement or split algorithm."""

    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["shedder", "placement", "split"])
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    summary = serializers.CharField()
    inConsole = serializers.BooleanField(help_text="the console's cycle can run it")
    whyNot = serializers.CharField(help_text='"" when it can')
    parameters = ParameterOutput(many=True)


class StrategiesOutput(serializers.Serializer):
    """Every shedder, placement and split algorithm."""

    strategies = StrategyOutput(many=True)


class BrokerMoveOutput(serializers.Serializer):
    """An audit row that touched the broker."""

    at = iso()
    action = serializers.ChoiceField(choices=AuditEvent.Action.choices)
    target = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    destination = serializers.CharField()
    decision = serializers.IntegerField(allow_null=True)
    actor = serializers.CharField(help_text='"balancer" for automatic actions')


def _series(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text=f"{help_text}; null: a gap in the reports",
    )


class BrokerHistoryOutput(serializers.Serializer):
    """A broker's load over time, a point per bucket, and the moves that touched it."""

    at = serializers.ListField(child=serializers.CharField(), help_text="ISO 8601 UTC")
    cpu = _series("percent of capacity")
    bandwidthIn = _series("percent of capacity")
    bandwidthOut = _series("percent of capacity")
    msgRate = _series("msg/s, in + out")
    throughput = _series("bytes/s, in + out")
    rangeS = serializers.IntegerField(help_text="s")
    moves = BrokerMoveOutput(many=True)
