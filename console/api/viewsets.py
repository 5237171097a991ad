"""API: read-only viewsets, operator verbs as actions, and the brokers' ingest and lookup."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from balancer.registry import ENTRIES
from console import selectors
from console.api.permissions import IsBrokerAgent, IsOperator
from console.api.serializers import (
    AuditEventOutput,
    BundleOutput,
    DecisionOutput,
    LoadReportOutput,
    LookupInput,
    LookupOutput,
    ReportRunOutput,
    UnloadOutput,
)
from console.models import AuditEvent, Bundle, Decision, ReportRun
from console.services import (
    broker_state_set,
    bundle_lookup,
    bundle_split,
    bundle_unload,
    load_report_ingest,
)
from console.services.reports import report_run_request


def acting_user(request: Request) -> User:
    """The operator behind a request that passed IsOperator (always a real user)."""
    return cast(User, request.user)


class LoadReportViewSet(viewsets.ViewSet):
    """Brokers post their load reports here (broker token)."""

    permission_classes = [IsBrokerAgent]

    @extend_schema(request=dict, responses={201: LoadReportOutput})
    def create(self, request: Request) -> Response:
        report = load_report_ingest(request.data)
        body = {
            "id": report.pk,
            "broker": report.broker.name,
            "weighted_usage_fraction": report.weighted_usage_fraction,
        }
        return Response(LoadReportOutput(body).data, status=status.HTTP_201_CREATED)


@extend_schema(parameters=[OpenApiParameter("topic", str, required=True)], responses=LookupOutput)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def lookup(request: Request) -> Response:
    """Topic -> bundle -> owner; places the bundle first when nobody owns it."""
    params = LookupInput(data=request.query_params)
    params.is_valid(raise_exception=True)
    return Response(LookupOutput(bundle_lookup(params.validated_data["topic"])).data)


@extend_schema(responses=dict)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def ownership(request: Request) -> Response:
    """Every bundle and its owner (null while unassigned): what brokers serve."""
    rows = Bundle.objects.select_related("namespace", "owner")
    return Response(
        {"bundles": [{"name": b.name, "owner": b.owner.name if b.owner else None} for b in rows]}
    )


@extend_schema(responses=dict)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def rankings(request: Request) -> Response:
    """Broker rankings, least loaded first, and the current coefficient of variation."""
    rows = selectors.broker_rankings()
    return Response({"rankings": rows, **selectors.current_imbalance(rows)})


@extend_schema(responses=dict)
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def strategies(request: Request) -> Response:
    """Every shedder, placement and split algorithm: whether the console runs it (and why not),
    and the parameters it reads with unit, default, range and source."""
    return Response({"strategies": [entry.as_dict() for entry in ENTRIES]})


class UnloadInput(serializers.Serializer):
    expected_owner = serializers.CharField(required=False, allow_blank=True, max_length=200)
    destination = serializers.CharField(required=False, allow_blank=True, max_length=200)
    force = serializers.BooleanField(required=False, default=False)


class SplitInput(serializers.Serializer):
    algorithm = serializers.CharField(required=False)
    positions = serializers.ListField(child=serializers.CharField(), required=False)
    expected_owner = serializers.CharField(required=False, allow_blank=True, max_length=200)
    force = serializers.BooleanField(required=False, default=False)

    def validate_positions(self, value: list[str]) -> list[int]:
        try:
            return [int(v, 16) for v in value]
        except ValueError:
            raise serializers.ValidationError("positions are hashes such as 0x40000000") from None


class BundleViewSet(viewsets.ReadOnlyModelViewSet):
    """Bundles with owners and time-averaged load; ``unload`` for operators."""

    serializer_class = BundleOutput

    def get_queryset(self) -> QuerySet[Bundle]:
        rows = Bundle.objects.select_related("namespace", "owner")
        namespace = self.request.query_params.get("namespace")
        return rows.filter(namespace__name=namespace) if namespace else rows

    @extend_schema(request=UnloadInput, responses=UnloadOutput)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def unload(self, request: Request, pk: Any = None) -> Response:
        """Unload the bundle: 409 when it is no longer owned by ``expected_owner``, or a veto
        refuses it (``force`` overrides cool-down, grace period, rate limit, blacklist)."""
        bundle = self.get_object()
        params = UnloadInput(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        result = bundle_unload(
            bundle.name,
            actor=acting_user(request),
            expected_owner=data.get("expected_owner"),
            destination=data.get("destination"),
            force=data.get("force", False),
        )
        return Response(UnloadOutput(result).data)

    @extend_schema(request=SplitInput, responses=dict)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def split(self, request: Request, pk: Any = None) -> Response:
        """Split the bundle: 409 when it is no longer owned by ``expected_owner``."""
        bundle = self.get_object()
        params = SplitInput(data=request.data)
        params.is_valid(raise_exception=True)
        result = bundle_split(
            bundle.name,
            actor=acting_user(request),
            algorithm=params.validated_data.get("algorithm"),
            positions=params.validated_data.get("positions"),
            expected_owner=params.validated_data.get("expected_owner"),
            force=params.validated_data.get("force", False),
        )
        return Response(result)


class BrokerViewSet(viewsets.GenericViewSet):
    """Broker life cycle for operators: drain (bundles move away, then drained) and activate."""

    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    @extend_schema(request=None, responses=dict)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def drain(self, request: Request, name: str = "") -> Response:
        broker = broker_state_set(name, "draining", actor=acting_user(request))
        return Response({"broker": broker.name, "state": broker.state})

    @extend_schema(request=None, responses=dict)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def activate(self, request: Request, name: str = "") -> Response:
        broker = broker_state_set(name, "active", actor=acting_user(request))
        return Response({"broker": broker.name, "state": broker.state})


class DecisionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every balancer decision with its reason and numbers."""

    serializer_class = DecisionOutput
    queryset = Decision.objects.all()


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Every automatic and manual action."""

    serializer_class = AuditEventOutput
    queryset = AuditEvent.objects.select_related("actor")


class ReportRunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Spark report runs; creating one (operators) queues the job."""

    serializer_class = ReportRunOutput
    queryset = ReportRun.objects.all()

    def get_permissions(self) -> Sequence[Any]:
        if self.action == "create":
            return [IsOperator()]
        return super().get_permissions()

    @extend_schema(request=None, responses={201: ReportRunOutput})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        run = report_run_request(actor=acting_user(request))
        return Response(ReportRunOutput(run).data, status=status.HTTP_201_CREATED)
