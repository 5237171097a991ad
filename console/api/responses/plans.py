"""Plans: ``CyclePlan.as_dict`` and its parts, as the verbs' previews and the stored decisions
show them."""

from __future__ import annotations

from rest_framework import serializers

from balancer.cycle import ActionKind
from console.api.responses.common import (
    REASONS,
    AnyOf,
    fractions,
    keyword_field,
    names,
)


class MetricOutput(serializers.Serializer):
    """The figure that ranked an action, in its unit."""

    name = serializers.CharField(help_text="e.g. msgThroughput, msgRate, weightedUsage")
    value = serializers.FloatField(help_text="in ``unit``")
    unit = serializers.CharField(help_text="bytes/s, msg/s, fraction (0–1) or score")


class CandidateOutput(serializers.Serializer):
    """A broker a placement weighed: its score, or the filter that removed it."""

    broker = serializers.CharField()
    score = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="in the place action's metric unit (msg/s, fraction 0–1 or score); null: "
        "over the overload bar; absent when filtered out",
    )
    filter = serializers.CharField(required=False, help_text="the filter that removed it")
    reason = serializers.CharField(required=False)
    detail = serializers.CharField(required=False, help_text="the filter's numbers, in words")


@keyword_field(
    "from",
    serializers.CharField(required=False, allow_null=True, help_text="brokerState: before"),
    after="broker",
)
@keyword_field(
    "to",
    serializers.CharField(required=False, allow_null=True, help_text="brokerState: after"),
    after="broker",
)
class ActionOutput(serializers.Serializer):
    """One action of a plan (``Action.as_dict``): a bundle's unload, place or split, or a
    broker's state change (``broker``, ``from``, ``to``)."""

    kind = serializers.ChoiceField(choices=[str(k) for k in ActionKind])
    bundle = serializers.CharField(required=False, help_text="unload, place, split")
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        required=False, allow_null=True, help_text="the broker the bundle leaves"
    )
    destination = serializers.CharField(
        required=False, allow_null=True, help_text="the broker that takes it"
    )
    broker = serializers.CharField(required=False, help_text="brokerState")
    outcome = serializers.ChoiceField(choices=["planned", "vetoed"])
    reason = serializers.CharField()
    veto = serializers.ChoiceField(
        choices=REASONS, required=False, help_text="why it must not be applied"
    )
    forced = serializers.BooleanField(required=False, help_text="an operator overrode the veto")
    metric = MetricOutput(required=False)
    boundaries = names("split: the cut points, hashes such as 0x40000000", required=False)
    children = names("split: the new bundles", required=False)
    strategy = serializers.CharField(help_text='e.g. the shedder, "lifecycle"')
    explanation = serializers.CharField(help_text="one sentence, numbers with units")
    candidates = CandidateOutput(
        many=True, required=False, help_text="place: scored best first, then filtered"
    )


class LoadStatsOutput(serializers.Serializer):
    """Broker usage (weighted max, fraction 0–1) over the serving brokers and its spread."""

    avgUsage = serializers.FloatField(help_text="fraction 0–1")
    std = serializers.FloatField(help_text="fraction 0–1")
    cv = serializers.FloatField(help_text="std / mean")
    maxOverMean = serializers.FloatField(help_text="1.0: perfectly even")
    serving = serializers.IntegerField(help_text="brokers the figures are over")
    brokers = fractions("broker -> usage, fraction 0–1")


class PlanStatsOutput(serializers.Serializer):
    """Load statistics now and as predicted once the planned actions apply."""

    before = LoadStatsOutput()
    after = LoadStatsOutput()


class SkipOutput(serializers.Serializer):
    """A broker or bundle the shedder left alone, and why."""

    broker = serializers.CharField(required=False)
    bundle = serializers.CharField(required=False)
    reason = serializers.ChoiceField(choices=REASONS)
    detail = serializers.CharField(required=False, help_text="its numbers, in words")


class SheddingOutput(serializers.Serializer):
    """The shedder's own output."""

    reason = serializers.ChoiceField(choices=REASONS)
    skipped = SkipOutput(many=True)
    stats = serializers.DictField(
        help_text="the shedder's own figures, each shedder its keys (usage as fractions 0–1)"
    )


class CyclePlanOutput(serializers.Serializer):
    """A cycle's (or an operator's) whole plan (``CyclePlan.as_dict``)."""

    reason = serializers.CharField(help_text="e.g. Overloaded, Balanced, Drain, Operator")
    strategy = serializers.CharField(help_text='the shedder, or "operator"')
    actions = ActionOutput(many=True, help_text="in application order")
    stats = PlanStatsOutput()
    state = serializers.DictField(help_text="strategy name -> what it remembers")
    lost = names("brokers declared lost")
    pending = names("brokers that never reported")
    shedding = SheddingOutput(required=False, help_text="when the shedder ran")


class StoredPlanOutput(CyclePlanOutput):
    """A decision's plan as stored."""

    notSent = serializers.CharField(
        required=False, help_text="why an attached cluster was not sent it (planned only)"
    )


class PlanErrorOutput(serializers.Serializer):
    """Why the config could not plan (``BalancerError.as_dict``)."""

    message = serializers.CharField()
    field = serializers.CharField(allow_null=True, help_text="the setting at fault, or null")


class BadConfigOutput(serializers.Serializer):
    """A decision the config refused to plan (reason BadConfig)."""

    error = PlanErrorOutput()


DECISION_DETAILS = AnyOf("DecisionDetails", [StoredPlanOutput, BadConfigOutput])
