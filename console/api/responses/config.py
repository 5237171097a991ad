"""What the config endpoints answer: the config and its versions, a what-if, a replay, and the
evidence before control (``console.services.config``' shapes)."""

from __future__ import annotations

from rest_framework import serializers

from console.api.responses.common import AnyOf, ScalarField, iso, keyword_field
from console.api.responses.plans import ActionOutput, LoadStatsOutput


class ConfigValuesOutput(serializers.Serializer):
    """The balancer config's editable values (``services.config.EDITABLE``)."""

    shedder = serializers.CharField()
    placement = serializers.CharField()
    split_algorithm = serializers.CharField()
    parameters = serializers.DictField(
        child=ScalarField(), help_text="Pulsar or Danube key -> value, in the key's unit"
    )
    is_shedding_enabled = serializers.BooleanField()
    is_auto_split_enabled = serializers.BooleanField()
    loop_interval_s = serializers.FloatField(help_text="s")


class ConfigVersionValuesOutput(ConfigValuesOutput):
    """A version's values as saved (a version older than a setting lacks it)."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for field in fields.values():
            field.required = False
        return fields


class ConfigVersionOutput(serializers.Serializer):
    """A saved version of the config."""

    id = serializers.IntegerField()
    at = iso()
    actor = serializers.CharField(help_text='"—": as found before the first edit')
    reason = serializers.CharField()
    values = ConfigVersionValuesOutput()
    changes = serializers.DictField(
        child=serializers.ListField(child=serializers.JSONField(), min_length=2, max_length=2),
        help_text="field -> [old, new] (each a value of that field)",
    )


class ConfigOutput(serializers.Serializer):
    """The balancer config and its versions, newest first."""

    values = ConfigValuesOutput()
    versions = ConfigVersionOutput(many=True)


class ConfigSavedOutput(ConfigOutput):
    """The config after a save or a rollback."""

    saved = serializers.IntegerField(allow_null=True, help_text="the new version; null: unchanged")


class PlanSummaryOutput(serializers.Serializer):
    """A cycle planned with one config over the current snapshot."""

    reason = serializers.CharField()
    strategy = serializers.CharField()
    summary = serializers.CharField(help_text="the plan in one line")
    actions = ActionOutput(many=True)
    before = LoadStatsOutput()
    after = LoadStatsOutput(help_text="predicted")


class WhatIfOutput(serializers.Serializer):
    """The cycle with the current config and with the draft; nothing saved."""

    current = PlanSummaryOutput()
    draft = PlanSummaryOutput()


class SummaryOutput(serializers.Serializer):
    """The medians and p95 of broker usage's spread over a series of points; null when no point
    had load."""

    cvMedian = serializers.FloatField(allow_null=True, help_text="std / mean")
    maxOverMeanMedian = serializers.FloatField(allow_null=True, help_text="1.0: even")
    maxOverMeanP95 = serializers.FloatField(allow_null=True, help_text="nearest rank")


class PointsOutput(SummaryOutput):
    """A summary and its points as chart columns, one entry per point."""

    at = serializers.ListField(child=serializers.CharField(), help_text="ISO 8601 UTC")
    cv = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="std / mean; null: no load"
    )
    maxOverMean = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="1.0: even; null: no load"
    )


class ReplayedOutput(PointsOutput):
    """One config replayed over recorded load (``ReplayResult.as_dict``)."""

    intervalS = serializers.FloatField(help_text="s between ticks")
    cycles = serializers.IntegerField()
    moves = serializers.IntegerField(help_text="unloads applied")
    movesPerHour = serializers.FloatField(help_text="moves/h")
    placements = serializers.IntegerField(help_text="bundles placed that had no owner")
    splitsPlanned = serializers.IntegerField(help_text="counted, not applied")
    vetoed = serializers.IntegerField()
    oscillations = serializers.IntegerField(help_text="moves back within the hour")


@keyword_field("from", iso(), after="samples")
class ReplayOutput(serializers.Serializer):
    """The last hour's recorded load replayed with the current config and with the draft."""

    samples = serializers.IntegerField()
    to = iso()
    recorded = PointsOutput(help_text="what the cluster really had")
    current = ReplayedOutput()
    draft = ReplayedOutput()


class ObservedOutput(PointsOutput):
    """The balance the cluster had, and the moves the recorder saw."""

    moves = serializers.IntegerField(help_text="bundles seen on another broker")
    movesPerHour = serializers.FloatField(help_text="moves/h")


class EvidenceReplayedOutput(ReplayedOutput):
    """What Fulcrum's current config would have given from the same loads."""

    strategy = serializers.CharField(help_text='"shedder + placement"')


@keyword_field("from", iso(), after="samples")
class EvidenceOutput(serializers.Serializer):
    """Evidence before control: the balance observed against Fulcrum's replay."""

    window = serializers.ChoiceField(choices=["hour", "day"])
    samples = serializers.IntegerField()
    to = iso()
    hours = serializers.FloatField(help_text="h the samples span")
    attached = serializers.BooleanField(help_text="a Pulsar cluster is attached")
    inControl = serializers.BooleanField(help_text="Fulcrum holds its control")
    observed = ObservedOutput()
    fulcrum = EvidenceReplayedOutput()


class EvidenceUnavailableOutput(serializers.Serializer):
    """No evidence yet: fewer than two snapshots recorded in the window."""

    unavailable = serializers.CharField(help_text="why")


CONFIG_CHANGE_ANSWER = AnyOf("ConfigChangeAnswer", [ConfigSavedOutput, ReplayOutput, WhatIfOutput])
EVIDENCE_ANSWER = AnyOf("EvidenceAnswer", [EvidenceOutput, EvidenceUnavailableOutput])
