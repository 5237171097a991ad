"""What the simulated Pulsar cluster's parts share: its broker.conf (``CONFIG``), the logs'
records, and the shapes of its answers. No Django."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from balancer.config import PULSAR_KEYS
from balancer.cycle import LEFT, OwnersSink, PlaceAction, UnloadAction, Verdict
from balancer.names import ShedderName, SplitAlgorithmName
from console.pulsar.observe import EXTENSIBLE_CLASS, KBIT_TO_BYTES, MODULAR_CLASS, version_key

MODULAR: Final = MODULAR_CLASS
# The releases whose ModularLoadManagerImpl keys an unload's destination (the bundle affinity) by
# the full bundle name, apache/pulsar#25518 (release notes of 4.0.10 and 4.2.1; not 3.0.17):
# [from, to) version ranges. The simulator's own table: the connector's is checked against it.
AFFINITY_BY_NAME: Final = (((4, 0, 10), (4, 1)), ((4, 2, 1), (99,)))
# Shown by E15 as dynamic (Pulsar's ServiceConfiguration marks it so); the simulator cannot switch
# load managers at runtime, so E18 refuses any other value.
LISTED_DYNAMIC: Final = ("loadManagerClassName",)
EXTENSIBLE: Final = EXTENSIBLE_CLASS
UNEXPECTED: Final = "--- An unexpected error occurred in the server ---"
CORES: Final = 8  # LocalBrokerData's cpu: percent of one core summed over the cores
DIRECT_MEMORY_MIB: Final = (64.0, 1024.0)  # (usage, limit): a constant; its weight is 0
KBIT_PER_BYTE: Final = 1 / KBIT_TO_BYTES  # Pulsar reports bandwidth in kbit/s
SERVICE_PORT: Final = 6650  # broker i's binary-protocol port is 6650 + i
ML_SHEDDERS: Final = (
    ShedderName.THRESHOLD,
    ShedderName.OVERLOAD,
    ShedderName.UNIFORM_LOAD,
    ShedderName.AVG,
)
ALL_SPLITS: Final = ",".join(SplitAlgorithmName)
# broker.conf values (Pulsar ServiceConfiguration defaults) and whether E18 may change them.
# loadManagerClassName is dynamic in Pulsar's code, but switching it at runtime is not supported
# (the extensible load manager cannot be enabled that way): refused here.
CONFIG: Final[Mapping[str, tuple[bool | int | float | str, bool]]] = {
    "loadBalancerEnabled": (True, False),
    # Pulsar's default is false; a cluster that defines failure domains turns it on, as this one
    # does, so that its placement spreads anti-affinity groups across them.
    "failureDomainsEnabled": (True, False),
    "loadManagerClassName": (MODULAR, False),
    "loadBalancerLoadPlacementStrategy": (
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        False,
    ),
    "lowerBoundarySheddingEnabled": (False, False),
    "loadBalancerSplitIntervalMinutes": (1, False),
    "loadBalancerSheddingEnabled": (True, True),
    "loadBalancerAutoBundleSplitEnabled": (True, True),
    "loadBalancerAutoUnloadSplitBundlesEnabled": (True, True),
    "loadBalancerSheddingIntervalMinutes": (1, True),
    "loadBalancerSheddingGracePeriodMinutes": (30, True),
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": (10, True),
    "loadBalancerLoadSheddingStrategy": (
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder",
        True,
    ),
    "loadBalancerBrokerThresholdShedderPercentage": (10, True),
    "loadBalancerBrokerOverloadedThresholdPercentage": (85, True),
    "loadBalancerHistoryResourcePercentage": (0.9, True),
    "loadBalancerBundleUnloadMinThroughputThreshold": (10.0, True),
    "loadBalancerCPUResourceWeight": (1.0, True),
    "loadBalancerMemoryResourceWeight": (0.0, True),
    "loadBalancerDirectMemoryResourceWeight": (0.0, True),
    "loadBalancerBandwidthInResourceWeight": (1.0, True),
    "loadBalancerBandwidthOutResourceWeight": (1.0, True),
    "loadBalancerDistributeBundlesEvenlyEnabled": (True, True),
    "loadBalancerBrokerMaxTopics": (50_000, True),
    "loadBalancerMsgRateDifferenceShedderThreshold": (50.0, True),
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": (4.0, True),
    "maxUnloadPercentage": (0.2, True),
    "minUnloadMessage": (1000.0, True),
    "minUnloadMessageThroughput": (1048576.0, True),
    "maxUnloadBundleNumPerShedding": (-1, True),
    "loadBalancerAvgShedderLowThreshold": (15.0, True),
    "loadBalancerAvgShedderHighThreshold": (40.0, True),
    "loadBalancerAvgShedderHitCountLowThreshold": (8, True),
    "loadBalancerAvgShedderHitCountHighThreshold": (2, True),
    "loadBalancerBrokerLoadTargetStd": (0.25, True),
    "loadBalancerSheddingConditionHitCountThreshold": (3, True),
    "loadBalancerTransferEnabled": (True, True),
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": (3, True),
    "loadBalanceSheddingDelayInSeconds": (180, True),
    "loadBalancerBrokerLoadDataTTLInSeconds": (1800, True),
    "loadBalancerSheddingBundlesWithPoliciesEnabled": (False, True),
    "loadBalancerNamespaceBundleMaxTopics": (1000, True),
    "loadBalancerNamespaceBundleMaxSessions": (1000, True),
    "loadBalancerNamespaceBundleMaxMsgRate": (30_000, True),
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": (100, True),
    "loadBalancerNamespaceMaximumBundles": (128, True),
    "flowOrQpsDifferenceThresholdPercentage": (10, True),
    "namespaceBundleUnloadingTimeoutMs": (60_000, True),
    # ModularLoadManagerImpl.needBrokerDataUpdate: the broker writes its LocalBrokerData (and
    # lastUpdate moves) when a figure changed by more than this percentage, or after this long.
    "loadBalancerReportUpdateThresholdPercentage": (10, True),
    "loadBalancerReportUpdateMaxIntervalMinutes": (15, True),
    # pulsar_bundle_* in /metrics (ModularLoadManagerImpl.updateLocalBrokerData): off by default.
    "exposeBundlesMetricsInPrometheus": (False, False),
    "supportedNamespaceBundleSplitAlgorithms": (ALL_SPLITS, True),
    "defaultNamespaceBundleSplitAlgorithm": (SplitAlgorithmName.RANGE_EQUALLY_DIVIDE, True),
}
ALL_BUNDLES_KEY: Final = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"  # -1: all
_RANGE = re.compile(r"^0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})$")

Response = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request a broker answered: its id, the method, the raw path and query, the status,
    and whether it came over https."""

    broker: str
    method: str
    path: str
    query: str
    status: int
    is_secure: bool = False


@dataclass(frozen=True, slots=True)
class Assignment:
    """A bundle given an owner: trace minute, bundle, broker, and why — ``client`` (a simulated
    client's lookup), ``lookup`` (E10), ``split`` (A2 on an unowned bundle), ``transfer`` (an
    extensible unload with a destination), ``shedder`` (TransferShedder); ``affinity`` when the
    one-shot destination of an unload chose the broker."""

    minute: int
    bundle: str
    broker: str
    cause: str
    affinity: bool = False


@dataclass(frozen=True, slots=True)
class ShedRecord:
    """What Pulsar's own shedder did at one trace minute: strategy, the plan's reason, and each
    move as (bundle, source, destination or None: left unowned)."""

    minute: int
    strategy: str
    reason: str
    unloads: tuple[tuple[str, str, str | None], ...]


class LoadManagerSink(OwnersSink):
    """Pulsar's load manager applying a plan of its own (``balancer.cycle.apply_plan``) to the
    simulated cluster's ownership map.

    Shedding (``shedder`` set): the unloads of that shedder are applied, each bundle left unowned
    until a lookup (ModularLoadManagerImpl) or, with ``transfer`` (ExtensibleLoadManagerImpl), owned
    by the destination its placement planned; Pulsar's shedder places no bundle nobody owned, and
    neither splits nor changes a broker's state (left). A lookup's placement (``shedder`` None):
    each unowned bundle goes to the broker the placement chose.

    Attributes:
        owned: called with (bundle, broker) for every bundle given an owner, after the map is set.
        moves: bundle -> (source, destination or None: left unowned) per unload applied, in the
            plan's order.
        placed: bundle -> broker per placement applied.
    """

    def __init__(
        self,
        owners: MutableMapping[str, str | None],
        recently_unloaded: MutableMapping[str, float],
        now: float,
        owned: Callable[[str, str], None],
        *,
        shedder: str | None = None,
        transfer: bool = False,
    ) -> None:
        super().__init__(owners, recently_unloaded, now)
        self.owned = owned
        self.shedder = shedder
        self.transfer = transfer
        self.moves: dict[str, tuple[str, str | None]] = {}
        self.placed: dict[str, str] = {}

    def unload(self, action: UnloadAction) -> Verdict:
        """Applied if it is the shedder's and its source still owns the bundle."""
        if action.strategy != self.shedder or action.source is None:
            return LEFT
        verdict = super().unload(action)
        if verdict is None:
            self.moves[action.target] = (action.source, None)
        return verdict

    def place(self, action: PlaceAction, unload: UnloadAction | None) -> Verdict:
        """A lookup's placement, or the destination of the shedder's unload with ``transfer``."""
        if self.shedder is not None and (unload is None or not self.transfer):
            return LEFT
        verdict = super().place(action, unload)
        if verdict is None and action.destination is not None:
            self.owned(action.target, action.destination)
            self.placed[action.target] = action.destination
            if unload is not None and unload.source is not None:
                self.moves[action.target] = (unload.source, action.destination)
        return verdict


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step: the trace minute played, bundles owned and unowned after it, bundles the
    clients' lookups placed, and the shedder's record when it ran."""

    minute: int
    owned: int
    unowned: int
    placed: int
    shed: ShedRecord | None


def _version(text: str) -> tuple[int, ...]:
    """``3.3.2`` (or ``3.1.0-SNAPSHOT``) -> (3, 3, 2); no number -> (0,)."""
    return version_key(text) or (0,)


def _string(value: bool | int | float | str) -> str:
    """A configuration value as Pulsar's REST answers it: booleans lower-case."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _core_keys(values: Mapping[str, bool | int | float | str]) -> dict[str, Any]:
    """The values the balancer's ``PulsarConfig`` reads. A negative bundle count in the load
    report means "all" in Pulsar (ServiceConfiguration): the core takes it as a large count."""
    keys = {k: v for k, v in values.items() if k in PULSAR_KEYS}
    top = keys.get(ALL_BUNDLES_KEY)
    if isinstance(top, int) and top < 0:
        keys[ALL_BUNDLES_KEY] = 1 << 30
    return keys


def _json(status: int, body: Any) -> Response:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def _reason(status: int, reason: str) -> Response:
    """A RestException: ``{"reason": ...}`` (Pulsar RestException)."""
    return _json(status, {"reason": reason})


def _text(status: int, text: str, kind: str = "text/plain") -> Response:
    return status, {"Content-Type": f"{kind}; charset=utf-8"}, text.encode()


def _unexpected(exception: str, message: str) -> Response:
    """An unmapped server exception: 500 ``text/plain`` with Pulsar's banner and a trace."""
    body = (
        f"{UNEXPECTED}\n\nMessage: {message}\n\nStacktrace:\n\n{exception}: {message}\n"
        "\tat org.apache.pulsar.broker.admin.impl.NamespacesBase (simulated)\n"
    )
    return _text(500, body)


NO_CONTENT: Final[Response] = (204, {}, b"")


@dataclass(frozen=True, slots=True)
class _Request:
    me: str
    method: str
    path: str
    query: str
    params: dict[str, str]
    body: bytes
    is_secure: bool = False  # came in over https


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
