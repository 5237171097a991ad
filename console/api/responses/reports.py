"""What the report results and the schema endpoints answer."""

from __future__ import annotations

from rest_framework import serializers

from console.api.responses.common import keyword_field, names


class ReportResultsOutput(serializers.Serializer):
    """The rows one result of a Spark run wrote, in its order (``selectors.report_results``)."""

    rows = serializers.ListField(
        child=serializers.DictField(),
        help_text="one object per row, the result's columns (``console.reports.jobs``: e.g. "
        "cpu_p95 in percent, throughput_p95 in bytes/s, msg_rate_mean in msg/s, usage as "
        "fractions 0–1); Spark leaves out a column that is null",
    )
    truncated = serializers.BooleanField(help_text="more rows were written")


@keyword_field(
    "from",
    serializers.FloatField(required=False, help_text="advisor: the first sample, s since epoch"),
    after="tasks",
)
@keyword_field(
    "to",
    serializers.FloatField(required=False, help_text="advisor: the last sample, s since epoch"),
    after="tasks",
)
class ReportSummaryOutput(serializers.Serializer):
    """What a run wrote (its ``summary.json``); {} until it finished."""

    written = names("the results written", required=False)
    missing = serializers.DictField(
        child=serializers.CharField(), required=False, help_text="report: result -> why not"
    )
    windows = serializers.IntegerField(required=False, help_text="advisor: windows replayed")
    candidates = serializers.IntegerField(required=False, help_text="advisor: configs ranked")
    tasks = serializers.IntegerField(required=False, help_text="advisor: replays run")
    seconds = serializers.FloatField(required=False, help_text="advisor: s it took")


class InfoOutput(serializers.Serializer):
    """The API's title, version and description."""

    title = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField(required=False)


class OpenApiDocumentOutput(serializers.Serializer):
    """This schema: an OpenAPI 3 document (its own schema is OpenAPI's)."""

    openapi = serializers.CharField(help_text="e.g. 3.0.3")
    info = InfoOutput()
    paths = serializers.DictField(
        child=serializers.DictField(), help_text="path -> its operations, by method"
    )
    components = serializers.DictField(help_text="schemas and security schemes")


class EndpointOutput(serializers.Serializer):
    """One endpoint of the API, from its OpenAPI schema."""

    path = serializers.CharField(help_text="e.g. /api/bundles/by-name/unload/")
    methods = names("its HTTP methods, e.g. GET, POST")
    summary = serializers.CharField(help_text="the first line of its description; may be empty")


class ApiRootOutput(serializers.Serializer):
    """``/api/``: every endpoint, and where the API's documentation is."""

    docs = serializers.CharField(help_text="Swagger UI, served locally: /api/docs/")
    schema = serializers.CharField(help_text="this OpenAPI 3 document: /api/schema/")
    endpoints = EndpointOutput(many=True)
