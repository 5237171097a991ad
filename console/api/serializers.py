"""Input and output serializers; no logic."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.api.responses.plans import DECISION_DETAILS
from console.api.responses.reports import ReportSummaryOutput
from console.loadstore import BrokerEntry
from console.models import AuditEvent, Bundle, Decision, ReportRun


class LookupInput(serializers.Serializer):
    topic = serializers.CharField(max_length=500)


class LookupOutput(serializers.Serializer):
    topic = serializers.CharField()
    hash = serializers.CharField()
    bundle = serializers.CharField()
    owner = serializers.CharField(allow_null=True)


class BundleOutput(serializers.ModelSerializer):
    name = serializers.CharField(read_only=True)
    namespace = serializers.CharField(source="namespace.name", read_only=True)
    owner = serializers.CharField(
        source="owner.name", read_only=True, allow_null=True, default=None
    )
    throughput_bytes_per_s = serializers.FloatField(read_only=True)
    # The live load store's figures: time-averaged msg/s and bytes/s, and counts.
    short_term = serializers.DictField(child=serializers.FloatField(), read_only=True)
    long_term = serializers.DictField(child=serializers.FloatField(), read_only=True)
    topics = serializers.IntegerField(read_only=True)
    producers = serializers.IntegerField(read_only=True)
    consumers = serializers.IntegerField(read_only=True)

    class Meta:
        model = Bundle
        fields = [
            "id",
            "name",
            "namespace",
            "lower",
            "upper",
            "owner",
            "last_unloaded_at",
            "short_term",
            "long_term",
            "topics",
            "producers",
            "consumers",
            "throughput_bytes_per_s",
        ]


@extend_schema_field(DECISION_DETAILS)
class DecisionDetailsField(serializers.JSONField):
    """``Decision.details`` as stored: the whole plan, or why the config could not plan."""


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"type": "number", "nullable": True},
        "description": "broker -> usage, fraction 0–1, and cv (std / mean; null: one broker "
        "serving)",
    }
)
class LoadFiguresField(serializers.JSONField):
    """An audit row's load figures as stored (``services.apply._figures``)."""


@extend_schema_field(ReportSummaryOutput)
class ReportSummaryField(serializers.JSONField):
    """A run's summary as stored."""


class DecisionOutput(serializers.ModelSerializer):
    details = DecisionDetailsField(read_only=True)

    class Meta:
        model = Decision
        fields = ["id", "at", "kind", "strategy", "reason", "summary", "details"]


class AuditEventOutput(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", read_only=True)
    load_before = LoadFiguresField(read_only=True)
    load_after = LoadFiguresField(
        read_only=True,
        allow_null=True,
        help_text="as load_before, at the first tick after (fractions 0–1); null: none yet",
    )

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "actor",
            "action",
            "target",
            "source",
            "destination",
            "reason",
            "load_before",
            "load_after",
            "reverses",
        ]


class ReportRunOutput(serializers.ModelSerializer):
    summary = ReportSummaryField(read_only=True)

    class Meta:
        model = ReportRun
        fields = [
            "id",
            "created_at",
            "started_at",
            "finished_at",
            "kind",
            "status",
            "master",
            "done",
            "total",
            "stage",
            "cancel_requested",
            "reason",
            "summary",
            "log_tail",
        ]


class ReportRunInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ReportRun.Kind.values, default=ReportRun.Kind.REPORT)


class LoadReportOutput(serializers.Serializer):
    """An accepted report, for the OpenAPI schema; the body itself is ``load_report_accepted``
    (cheaper than a serializer at a thousand reports a second)."""

    broker = serializers.CharField()
    reported_at = serializers.FloatField(help_text="s since epoch")
    bundles = serializers.IntegerField(help_text="bundle stats folded into the averages")


def load_report_accepted(entry: BrokerEntry) -> dict[str, Any]:
    """The answer to an accepted report (``LoadReportOutput``)."""
    return {
        "broker": entry.report["name"],
        "reported_at": entry.reported_at,
        "bundles": len(entry.bundles),
    }
