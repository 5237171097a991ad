"""API: read-only viewsets, operator verbs as actions, and the brokers' ingest and lookup."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action, api_view, permission_classes
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from balancer.registry import ENTRIES
from console import selectors
from console.access import may_act
from console.api.errors import error_body
from console.api.permissions import BrokerAgent, IsBrokerAgent, IsOperator, IsUser, IsUserOrBroker
from console.api.responses.config import (
    CONFIG_CHANGE_ANSWER,
    EVIDENCE_ANSWER,
    ConfigOutput,
    ConfigSavedOutput,
)
from console.api.responses.dashboard import (
    BalanceOutput,
    BrokerHistoryOutput,
    BundleMapOutput,
    DecisionFeedOutput,
    DomainsOutput,
    LoopOutput,
    OwnershipOutput,
    RankingsOutput,
    StrategiesOutput,
)
from console.api.responses.pulsar import CONTROL_ANSWER, ControlPreviewOutput, PulsarStatusOutput
from console.api.responses.reports import (
    ApiRootOutput,
    OpenApiDocumentOutput,
    ReportResultsOutput,
)
from console.api.responses.verbs import (
    BROKER_STATE_ANSWER,
    SPLIT_ANSWER,
    UNDO_ANSWER,
    UNDO_BY_NAME_ANSWER,
    UNLOAD_ANSWER,
    BrokerStateOutput,
    UnloadOutput,
)
from console.api.serializers import (
    AuditEventOutput,
    BundleOutput,
    DecisionOutput,
    LoadReportOutput,
    LookupInput,
    LookupOutput,
    ReportRunInput,
    ReportRunOutput,
    load_report_accepted,
)
from console.errors import ConsoleError
from console.models import AuditEvent, Bundle, Decision, ReportRun
from console.selectors import AUDIT_FILTERS
from console.services import (
    broker_state_preview,
    broker_state_set,
    bundle_last_move_undo,
    bundle_lookup,
    bundle_split,
    bundle_unload,
    bundle_unload_undo,
    load_report_ingest,
    shedding_pause_set,
)
from console.services.config import (
    config_replay,
    config_rollback,
    config_save,
    config_values,
    config_what_if,
    control_evidence,
)
from console.services.control import (
    control_preview,
    control_reassert,
    control_release,
    control_take,
)
from console.services.executor import executor_set
from console.services.ingest import LoadReportInput
from console.services.reports import report_run_cancel, report_run_request


def acting_user(request: Request) -> User:
    """The operator behind a request that passed IsOperator (always a real user)."""
    return cast(User, request.user)


class LoadReportViewSet(viewsets.ViewSet):
    """Brokers post their load reports here, each with its own token."""

    permission_classes = [IsBrokerAgent]

    @extend_schema(request=LoadReportInput, responses={201: LoadReportOutput})
    def create(self, request: Request) -> Response:
        """Check one load report whole and make it the broker's newest: 400 naming the field,
        403 for another broker's report, 413 over the size limit; nothing is written then."""
        agent = cast(BrokerAgent, request.user)
        # Over DATA_UPLOAD_MAX_MEMORY_SIZE, request.body raises RequestDataTooBig: a 413.
        entry = load_report_ingest(request.body, as_broker=agent.broker)
        return Response(load_report_accepted(entry), status=status.HTTP_201_CREATED)


@extend_schema(parameters=[OpenApiParameter("topic", str, required=True)], responses=LookupOutput)
@api_view(["GET"])
@permission_classes([IsUserOrBroker])
def lookup(request: Request) -> Response:
    """Topic -> bundle -> owner. An unowned bundle is placed first only for a broker or an
    operator; for anybody else the owner is null and nothing changes."""
    params = LookupInput(data=request.query_params)
    params.is_valid(raise_exception=True)
    may_place = isinstance(request.user, BrokerAgent) or may_act(request.user)[0]
    return Response(
        LookupOutput(bundle_lookup(params.validated_data["topic"], place=may_place)).data
    )


@extend_schema(responses=OwnershipOutput)
@api_view(["GET"])
@permission_classes([IsUserOrBroker])
def ownership(request: Request) -> Response:
    """Every bundle and its owner (null while unassigned): what brokers serve. A broker's own
    token sees only its bundles and the unowned ones."""
    rows = Bundle.objects.select_related("namespace", "owner")
    user = request.user
    if isinstance(user, BrokerAgent) and user.broker is not None:
        rows = rows.filter(Q(owner__name=user.broker) | Q(owner__isnull=True))
    return Response(
        {"bundles": [{"name": b.name, "owner": b.owner.name if b.owner else None} for b in rows]}
    )


@extend_schema(responses=BalanceOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def balance(request: Request) -> Response:
    """The balance panel: the optimality gauge, the move budget, bundles in cool-down and when
    they are eligible again, oscillations of the last hour, why the latest cycle held."""
    return Response(selectors.balance_status())


@extend_schema(responses=RankingsOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def rankings(request: Request) -> Response:
    """Broker rankings, least loaded first, and the current coefficient of variation."""
    rows = selectors.broker_rankings()
    return Response({"rankings": rows, **selectors.current_imbalance(rows)})


class ConfigInput(serializers.Serializer):
    values = serializers.DictField(help_text="the settings to change (EDITABLE fields)")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)
    what_if = serializers.BooleanField(
        required=False, default=False, help_text="plan a cycle with the draft; nothing is saved"
    )
    replay = serializers.BooleanField(
        required=False,
        default=False,
        help_text="replay the last hour of recorded load with the current config and the draft; "
        "nothing is saved",
    )


class RollbackInput(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)


def _config_state() -> dict[str, Any]:
    return {
        "values": config_values(selectors.balancer_config_get()),
        "versions": selectors.config_versions(),
    }


@extend_schema(methods=["GET"], responses=ConfigOutput)
@extend_schema(methods=["POST"], request=ConfigInput, responses=CONFIG_CHANGE_ANSWER)
@api_view(["GET", "POST"])
@permission_classes([IsUser])
def config(request: Request) -> Response:
    """The balancer config and its versions (GET, everyone); a what-if of a draft, or a save
    as a new version, audited (POST, operators; 400 naming the field at fault)."""
    if request.method == "GET":
        return Response(_config_state())
    allowed, why = may_act(request.user)
    if not allowed:
        return Response(error_body(403, why), status=status.HTTP_403_FORBIDDEN)
    params = ConfigInput(data=request.data)
    params.is_valid(raise_exception=True)
    data = params.validated_data
    if data["replay"]:
        return Response(config_replay(data["values"]))
    if data["what_if"]:
        return Response(config_what_if(data["values"]))
    version = config_save(data["values"], actor=acting_user(request), reason=data.get("reason", ""))
    return Response({**_config_state(), "saved": version.pk if version else None})


@extend_schema(request=RollbackInput, responses=ConfigSavedOutput)
@api_view(["POST"])
@permission_classes([IsOperator])
def config_rollback_view(request: Request, pk: int) -> Response:
    """Save an earlier version's values as a new version (audited)."""
    params = RollbackInput(data=request.data)
    params.is_valid(raise_exception=True)
    version = config_rollback(
        pk, actor=acting_user(request), reason=params.validated_data.get("reason", "")
    )
    return Response({**_config_state(), "saved": version.pk if version else None})


@extend_schema(responses=LoopOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def loop(request: Request) -> Response:
    """The shedding loop's health: last and next tick, paused or not, overdue, strategies."""
    return Response(selectors.loop_health())


@extend_schema(request=None, responses=LoopOutput)
@api_view(["POST"])
@permission_classes([IsOperator])
def loop_pause(request: Request) -> Response:
    """Pause shedding (the loop still ticks: lost brokers, drains, placements). Audited."""
    shedding_pause_set(True, actor=acting_user(request))
    return Response(selectors.loop_health())


@extend_schema(request=None, responses=LoopOutput)
@api_view(["POST"])
@permission_classes([IsOperator])
def loop_resume(request: Request) -> Response:
    """Resume shedding. Audited."""
    shedding_pause_set(False, actor=acting_user(request))
    return Response(selectors.loop_health())


@extend_schema(responses=DecisionFeedOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def decision_feed(request: Request) -> Response:
    """The latest acting decisions, quiet cycles between them collapsed into counts."""
    return Response({"feed": selectors.decision_feed()})


@extend_schema(responses=BundleMapOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def bundle_map(request: Request) -> Response:
    """A page of namespaces' bundles as hash ranges with owner, load and cool-down (the bundle
    map's data; ``?page=``, ``?namespace=`` part of a name; shape in ``selectors.bundle_map``).
    400 naming ``page`` or ``namespace``."""
    page, contains = selectors.page_params(request.query_params, "namespace")
    return Response(selectors.bundle_map(page=page, contains=contains))


@extend_schema(responses=DomainsOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def domains(request: Request) -> Response:
    """Failure domains with their brokers, and the anti-affinity groups' spread and violations
    (shape in ``selectors.domain_layout``)."""
    return Response(selectors.domain_layout())


@extend_schema(responses=StrategiesOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def strategies(request: Request) -> Response:
    """Every shedder, placement and split algorithm: whether the console runs it (and why not),
    and the parameters it reads with unit, default, range and source."""
    return Response({"strategies": [entry.as_dict() for entry in ENTRIES]})


class OperatorActionInput(serializers.Serializer):
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="the operator's reason, audited"
    )
    preview = serializers.BooleanField(
        required=False, default=False, help_text="plan only: nothing is written"
    )


def _overrides_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=60),
        required=False,
        max_length=10,
        help_text="with force: the vetoes the preview showed (its overrides); a forced plan "
        "that would pass another is refused with 409",
    )


class UndoInput(OperatorActionInput):
    force = serializers.BooleanField(
        required=False, default=False, help_text="override a veto (cool-down, grace period...)"
    )
    overrides = _overrides_field()


class UnloadInput(OperatorActionInput):
    expected_owner = serializers.CharField(required=False, allow_blank=True, max_length=200)
    destination = serializers.CharField(required=False, allow_blank=True, max_length=200)
    force = serializers.BooleanField(required=False, default=False)
    overrides = _overrides_field()


class SplitInput(OperatorActionInput):
    algorithm = serializers.CharField(required=False, max_length=100)
    positions = serializers.ListField(child=serializers.CharField(), required=False)
    expected_owner = serializers.CharField(required=False, allow_blank=True, max_length=200)
    force = serializers.BooleanField(required=False, default=False)

    def validate_positions(self, value: list[str]) -> list[int]:
        try:
            return [int(v, 16) for v in value]
        except ValueError:
            raise serializers.ValidationError("positions are hashes such as 0x40000000") from None


class ByNameUnloadInput(UnloadInput):
    bundle = serializers.CharField(max_length=400)


class ByNameSplitInput(SplitInput):
    bundle = serializers.CharField(max_length=400)


class ByNameUndoInput(UndoInput):
    bundle = serializers.CharField(max_length=400)


class BundleViewSet(viewsets.ReadOnlyModelViewSet):
    """Bundles with owners and time-averaged load; ``unload`` for operators."""

    serializer_class = BundleOutput

    def get_queryset(self) -> QuerySet[Bundle]:
        rows = Bundle.objects.select_related("namespace", "owner")
        namespace = self.request.query_params.get("namespace")
        return rows.filter(namespace__name=namespace) if namespace else rows

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        # The live load store's figures for the bundles about to be shown.
        if args and isinstance(args[0], Bundle):
            selectors.bundles_with_loads([args[0]])
        elif args:
            args = (selectors.bundles_with_loads(list(args[0])), *args[1:])
        return super().get_serializer(*args, **kwargs)

    @extend_schema(request=UnloadInput, responses=UNLOAD_ANSWER)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def unload(self, request: Request, pk: Any = None) -> Response:
        """Unload the bundle: 409 when it is no longer owned by ``expected_owner``, or a veto
        refuses it (``force`` overrides cool-down, grace period, rate limit, blacklist). With
        ``preview`` the plan, its vetoes and every destination (eligible or why not), unapplied."""
        return _unload(request, self.get_object().name)

    @extend_schema(request=SplitInput, responses=SPLIT_ANSWER)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def split(self, request: Request, pk: Any = None) -> Response:
        """Split the bundle: 409 when it is no longer owned by ``expected_owner``. With
        ``preview`` the plan and each child's share of the load, unapplied."""
        return _split(request, self.get_object().name)

    @extend_schema(request=ByNameUnloadInput, responses=UNLOAD_ANSWER)
    @action(
        detail=False, methods=["post"], permission_classes=[IsOperator], url_path="by-name/unload"
    )
    def unload_by_name(self, request: Request) -> Response:
        """``unload`` for the bundle named in the body (the bundle map knows names)."""
        return _unload(request, _named(request))

    @extend_schema(request=ByNameSplitInput, responses=SPLIT_ANSWER)
    @action(
        detail=False, methods=["post"], permission_classes=[IsOperator], url_path="by-name/split"
    )
    def split_by_name(self, request: Request) -> Response:
        """``split`` for the bundle named in the body."""
        return _split(request, _named(request))

    @extend_schema(request=ByNameUndoInput, responses=UNDO_BY_NAME_ANSWER)
    @action(
        detail=False, methods=["post"], permission_classes=[IsOperator], url_path="by-name/undo"
    )
    def undo_by_name(self, request: Request) -> Response:
        """Undo the latest unload of the bundle named in the body (the audit's undo, for the
        bundle map's panel); 409 with the reason when there is none or it cannot be undone."""
        return _undo(request, bundle_last_move_undo, _named(request))


def _named(request: Request) -> str:
    name = request.data.get("bundle") if hasattr(request.data, "get") else None
    if not isinstance(name, str) or not name:
        raise serializers.ValidationError({"bundle": ["a bundle name is required"]})
    return name


def _unload(request: Request, name: str) -> Response:
    params = UnloadInput(data=request.data)
    params.is_valid(raise_exception=True)
    data = params.validated_data
    result = bundle_unload(
        name,
        actor=acting_user(request),
        expected_owner=data.get("expected_owner"),
        destination=data.get("destination"),
        force=data.get("force", False),
        overrides=data.get("overrides"),
        note=data.get("reason", ""),
        preview=data["preview"],
    )
    return Response(result if data["preview"] else UnloadOutput(result).data)


def _undo(request: Request, undo: Callable[..., dict[str, Any]], target: str | int) -> Response:
    """``undo(target, ...)`` with the body's ``reason``, ``force`` and ``preview``."""
    params = UndoInput(data=request.data)
    params.is_valid(raise_exception=True)
    data = params.validated_data
    return Response(
        undo(
            target,
            actor=acting_user(request),
            note=data.get("reason", ""),
            force=data.get("force", False),
            overrides=data.get("overrides"),
            preview=data["preview"],
        )
    )


def _split(request: Request, name: str) -> Response:
    params = SplitInput(data=request.data)
    params.is_valid(raise_exception=True)
    data = params.validated_data
    result = bundle_split(
        name,
        actor=acting_user(request),
        algorithm=data.get("algorithm"),
        positions=data.get("positions"),
        expected_owner=data.get("expected_owner"),
        force=data.get("force", False),
        note=data.get("reason", ""),
        preview=data["preview"],
    )
    return Response(result)


class BrokerViewSet(viewsets.GenericViewSet):
    """Broker life cycle for operators: drain (bundles move away, then drained) and activate."""

    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    serializer_class = BrokerStateOutput

    def _state(self, request: Request, name: str, state: str) -> Response:
        params = OperatorActionInput(data=request.data)
        params.is_valid(raise_exception=True)
        if params.validated_data["preview"]:
            return Response(broker_state_preview(name, state))
        broker = broker_state_set(
            name, state, actor=acting_user(request), note=params.validated_data.get("reason", "")
        )
        return Response({"broker": broker.name, "state": broker.state})

    @extend_schema(
        parameters=[OpenApiParameter("range", int, description="seconds: 900, 3600 or 21600")],
        responses=BrokerHistoryOutput,
    )
    @action(detail=True, methods=["get"], permission_classes=[IsUser])
    def history(self, request: Request, name: str = "") -> Response:
        """The broker's load over time (percent of capacity, msg/s, bytes/s) and the moves that
        touched it (shape in ``selectors.broker_history``)."""
        raw = request.query_params.get("range", "3600")
        if not raw.isdigit():
            raise ConsoleError("range is a number of seconds", field="range")
        return Response(selectors.broker_history(name, range_s=int(raw)))

    @extend_schema(request=OperatorActionInput, responses=BROKER_STATE_ANSWER)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def drain(self, request: Request, name: str = "") -> Response:
        """Drain the broker: its bundles move away, then it is drained; 409 for the last serving
        broker. With ``preview`` the plan (each bundle and where it would go), unapplied."""
        return self._state(request, name, "draining")

    @extend_schema(request=OperatorActionInput, responses=BROKER_STATE_ANSWER)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def activate(self, request: Request, name: str = "") -> Response:
        """Return the broker to the active set. With ``preview`` the plan, unapplied."""
        return self._state(request, name, "active")


class Pages(PageNumberPagination):
    """100 rows a page (``page_size`` up to 1,000), with the count and the next page's URL."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class DecisionViewSet(viewsets.ReadOnlyModelViewSet):
    """Every balancer decision with its reason and numbers, newest first, paginated."""

    serializer_class = DecisionOutput
    queryset = Decision.objects.all()
    pagination_class = Pages


@extend_schema(
    parameters=[
        OpenApiParameter(name, str, description=what) for name, what in AUDIT_FILTERS.items()
    ]
)
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Every automatic and manual action, newest first, filtered (as the audit page) and
    paginated."""

    serializer_class = AuditEventOutput
    pagination_class = Pages

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return selectors.audit_events(self.request.query_params)

    @extend_schema(request=UndoInput, responses=UNDO_ANSWER)
    @action(detail=True, methods=["post"], permission_classes=[IsOperator])
    def undo(self, request: Request, pk: str) -> Response:
        """Undo a completed unload: the bundle back to the broker it left, through the same
        vetoes (``force`` overrides one) and preview; audited, linked to the move it reverses.
        409 with the reason when it cannot be undone."""
        try:
            audit_id = int(pk)
        except ValueError:
            raise ConsoleError(f"not an audit row id: {pk!r}", status=404, field="audit") from None
        return _undo(request, bundle_unload_undo, audit_id)


class ReportRunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Spark runs over the history: the load report and the strategy advisor. Creating one
    (operators) queues the job; cancel stops it; ``results/<name>`` reads what it wrote."""

    serializer_class = ReportRunOutput
    queryset = ReportRun.objects.all()

    def get_permissions(self) -> Sequence[Any]:
        if self.action in ("create", "cancel"):
            return [IsOperator()]
        return super().get_permissions()

    @extend_schema(request=ReportRunInput, responses={201: ReportRunOutput})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = ReportRunInput(data=request.data if isinstance(request.data, dict) else {})
        body.is_valid(raise_exception=True)
        run = report_run_request(actor=acting_user(request), kind=body.validated_data["kind"])
        return Response(ReportRunOutput(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ReportRunOutput)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        """Cancel a queued or running run (409 once it ended)."""
        run = report_run_cancel(self.get_object().pk, actor=acting_user(request))
        return Response(ReportRunOutput(run).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("limit", int, description="rows, at most 5,000"),
            OpenApiParameter("newest", bool, description="the last rows instead of the first"),
        ],
        responses=ReportResultsOutput,
    )
    @action(detail=True, methods=["get"], url_path=r"results/(?P<name>[a-z_]+)")
    def results(self, request: Request, pk: Any = None, name: str = "") -> Response:
        """``{"rows": [...], "truncated"}``: the rows of one result of the run, in its order."""
        try:
            limit = int(request.query_params.get("limit", "1000"))
        except ValueError:
            raise serializers.ValidationError({"limit": ["a whole number"]}) from None
        newest = request.query_params.get("newest") in ("1", "true")
        return Response(
            selectors.report_results(self.get_object(), name, limit=limit, newest=newest)
        )


@extend_schema(responses=PulsarStatusOutput)
@api_view(["GET"])
@permission_classes([IsUser])
def pulsar(request: Request) -> Response:
    """The Pulsar connections, the attached one's last observation, its moves in flight and the
    latest verified (shape in ``selectors.pulsar_status``)."""
    return Response(selectors.pulsar_status())


@extend_schema(
    parameters=[OpenApiParameter("window", str, enum=["hour", "day"], description="default hour")],
    responses=EVIDENCE_ANSWER,
)
@api_view(["GET"])
@permission_classes([IsUser])
def pulsar_evidence(request: Request) -> Response:
    """Evidence before control: over the recorded load of the last hour (``?window=hour``, the
    default) or day (``?window=day``), the balance the cluster had (Pulsar's own shedder, while
    Fulcrum observes) and what Fulcrum's current config would have given from the same loads,
    with both move counts (shape in ``services.config.control_evidence``); 400 naming
    ``window`` for another window; until two snapshots are recorded (or while Redis is away
    and this process read none), ``{"unavailable": why}``."""
    try:
        return Response(control_evidence(window=request.query_params.get("window", "hour")))
    except ConsoleError as exc:
        if exc.status != status.HTTP_409_CONFLICT:
            raise
        return Response({"unavailable": exc.message})


class PulsarControlInput(serializers.Serializer):
    action = serializers.ChoiceField(choices=["take", "release", "reassert"])
    confirm = serializers.BooleanField()


@extend_schema(methods=["GET"], responses=ControlPreviewOutput)
@extend_schema(methods=["POST"], request=PulsarControlInput, responses=CONTROL_ANSWER)
@api_view(["GET", "POST"])
@permission_classes([IsOperator])
def pulsar_control(request: Request, pk: int) -> Response:
    """GET (``?action=reassert`` for a re-assert): what taking, releasing or re-asserting
    control would change in Pulsar's dynamic configuration, read live. POST ``{"action":
    "take"|"release"|"reassert", "confirm": true}`` (an admin): do it, audited."""
    if request.method == "GET":
        return Response(control_preview(pk, request.query_params.get("action", "")))
    params = PulsarControlInput(data=request.data)
    params.is_valid(raise_exception=True)
    act = {"take": control_take, "release": control_release, "reassert": control_reassert}[
        params.validated_data["action"]
    ]
    done = act(
        pk,
        actor=acting_user(request),
        confirm=params.validated_data["confirm"],
        now=timezone.now(),
    )
    return Response({**done, **selectors.pulsar_status()})


class PulsarExecutorInput(serializers.Serializer):
    stopped = serializers.BooleanField()


@extend_schema(request=PulsarExecutorInput, responses=PulsarStatusOutput)
@api_view(["POST"])
@permission_classes([IsOperator])
def pulsar_executor(request: Request, pk: int) -> Response:
    """``{"stopped": true}`` stops the executor (queued moves cancelled), false starts it.
    Audited."""
    params = PulsarExecutorInput(data=request.data)
    params.is_valid(raise_exception=True)
    executor_set(
        pk, stopped=params.validated_data["stopped"], actor=acting_user(request), now=timezone.now()
    )
    return Response(selectors.pulsar_status())


class SchemaView(SpectacularAPIView):
    """OpenApi3 schema for this API. Format can be selected via content negotiation.

    - YAML: application/vnd.oai.openapi
    - JSON: application/vnd.oai.openapi+json
    """

    # drf-spectacular's view (its docstring, the description, kept), its answer described as
    # an OpenAPI document.

    @extend_schema(responses={200: OpenApiDocumentOutput})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().get(request, *args, **kwargs)
        return response


_ENDPOINTS: list[dict[str, Any]] = []


@extend_schema(responses={200: ApiRootOutput})
@api_view(["GET"])
@permission_classes([IsUser])
def api_root(request: Request) -> Response:
    """``/api/``: every endpoint of the API from its OpenAPI schema (path, methods, summary: the
    first paragraph of its description), with where its documentation is: ``/api/docs/``
    (Swagger UI, served locally) and ``/api/schema/`` (OpenAPI 3)."""
    if not _ENDPOINTS:
        schema = SchemaGenerator().get_schema(request=None, public=True)
        found = []  # built whole, then kept: two first requests never leave half a list
        for path_, operations in sorted(schema["paths"].items()):
            methods = sorted(m.upper() for m in operations if m != "parameters")
            first: dict[str, Any] = next(iter(operations.values()), {})
            said = first.get("description") or first.get("summary") or ""
            summary = " ".join(said.split("\n\n")[0].split())  # its first paragraph, whole
            found.append({"path": path_, "methods": methods, "summary": summary})
        _ENDPOINTS[:] = found
    return Response({"docs": "/api/docs/", "schema": "/api/schema/", "endpoints": _ENDPOINTS})
