"""The metadata store: cluster layout, ownership, load reports, config, decisions and audit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from balancer.bundles import Bundle as BundleValue
from balancer.bundles import BundleRange
from balancer.names import PlacementName, ShedderName, SplitAlgorithmName
from balancer.wire import RATE_KEYS as WIRE_RATE_KEYS

# The rate keys of a bundle's averages, in the live load store's column order.
RATE_KEYS = tuple(WIRE_RATE_KEYS)


class Cluster(models.Model):
    """A messaging cluster (the demo has one)."""

    name = models.CharField(max_length=100, unique=True)

    def __str__(self) -> str:
        return self.name


class FailureDomain(models.Model):
    """A group of brokers that fail together (rack, zone)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="failure_domains")
    name = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_domain")]

    def __str__(self) -> str:
        return self.name


class Broker(models.Model):
    """A serving node that owns bundles. Its newest load report lives in the live load store
    (``console.loadstore``); ``LoadReport`` rows are its history."""

    class State(models.TextChoices):
        ACTIVE = "active"
        DRAINING = "draining"
        DRAINED = "drained"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="brokers")
    name = models.CharField(max_length=200, unique=True)
    failure_domain = models.ForeignKey(
        FailureDomain, null=True, blank=True, on_delete=models.SET_NULL, related_name="brokers"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    # When ``state`` last changed (None: never, since the broker appeared): a drain began then.
    state_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Tenant(models.Model):
    """A Pulsar tenant: the owner of namespaces."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="tenants")
    name = models.CharField(max_length=100)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_tenant")]

    def __str__(self) -> str:
        return self.name


class Namespace(models.Model):
    """``tenant/namespace``: the unit of policy; owns a 32-bit hash space cut into bundles."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="namespaces")
    name = models.CharField(max_length=200, unique=True)  # full name, "tenant/ns"
    anti_affinity_group = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Bundle(models.Model):
    """A namespace's hash range ``[lower, upper)`` and its owner, with the leader's time-averaged
    load (short-term: last 10 samples, long-term: last 1000, as Pulsar's TimeAverageMessageData)."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="bundles")
    lower = models.BigIntegerField()
    upper = models.BigIntegerField()
    owner = models.ForeignKey(
        Broker, null=True, blank=True, on_delete=models.SET_NULL, related_name="bundles"
    )
    last_unloaded_at = models.DateTimeField(null=True, blank=True)
    # The live load store's figures for this bundle, when a selector attached them
    # (``selectors.bundles_with_loads``); zeros otherwise. Not a column.
    live: BundleLive | None = None

    class Meta:
        ordering = ["namespace__name", "lower"]
        constraints = [models.UniqueConstraint(fields=["namespace", "lower"], name="uniq_bundle")]

    def __str__(self) -> str:
        return self.name

    @property
    def value(self) -> BundleValue:
        """The balancer's Bundle for this row."""
        return BundleValue(self.namespace.name, BundleRange(self.lower, self.upper))

    @property
    def name(self) -> str:
        """``tenant/ns/0xLOWER_0xUPPER``."""
        return self.value.name

    @property
    def throughput_bytes_per_s(self) -> float:
        """Short-term msgThroughputIn + msgThroughputOut (bytes/s)."""
        rates = self.short_term
        return rates["msgThroughputIn"] + rates["msgThroughputOut"]

    @property
    def short_term(self) -> dict[str, float]:
        """The short-term averages as ``{"msgRateIn", "msgRateOut", "msgThroughputIn",
        "msgThroughputOut"}`` (msg/s, bytes/s)."""
        return dict(zip(RATE_KEYS, self.live.short_term if self.live else _ZEROS, strict=True))

    @property
    def long_term(self) -> dict[str, float]:
        """The long-term averages, as ``short_term``."""
        return dict(zip(RATE_KEYS, self.live.long_term if self.live else _ZEROS, strict=True))

    @property
    def topics(self) -> int:
        return self.live.counts[0] if self.live else 0

    @property
    def producers(self) -> int:
        return self.live.counts[1] if self.live else 0

    @property
    def consumers(self) -> int:
        return self.live.counts[2] if self.live else 0


@dataclass(frozen=True)
class BundleLive:
    """A bundle's figures from the live load store: rates in ``RATE_KEYS`` order (msg/s,
    bytes/s) and (topics, producers, consumers)."""

    short_term: tuple[float, ...]
    long_term: tuple[float, ...]
    counts: tuple[int, int, int]


_ZEROS = (0.0, 0.0, 0.0, 0.0)


class LoadReport(models.Model):
    """One broker's load report: resources as usage/limit, totals over its bundles."""

    broker = models.ForeignKey(Broker, on_delete=models.CASCADE, related_name="reports")
    reported_at = models.DateTimeField(db_index=True)
    cpu_usage = models.FloatField()  # percent of one core, summed over cores
    cpu_limit = models.FloatField()
    memory_usage_mib = models.FloatField()
    memory_limit_mib = models.FloatField()
    direct_memory_usage_mib = models.FloatField(default=0)
    direct_memory_limit_mib = models.FloatField(default=0)
    bandwidth_in_usage_bytes_per_s = models.FloatField()
    bandwidth_in_limit_bytes_per_s = models.FloatField()
    bandwidth_out_usage_bytes_per_s = models.FloatField()
    bandwidth_out_limit_bytes_per_s = models.FloatField()
    msg_rate_in = models.FloatField()  # msg/s
    msg_rate_out = models.FloatField()
    msg_throughput_in_bytes_per_s = models.FloatField()
    msg_throughput_out_bytes_per_s = models.FloatField()
    bundle_count = models.PositiveIntegerField()
    topic_count = models.PositiveIntegerField()
    weighted_usage_fraction = models.FloatField()  # ThresholdShedder's figure, 1.0 = 100 %
    exported = models.BooleanField(default=False, db_index=True)  # written to the Parquet history

    class Meta:
        ordering = ["-reported_at"]
        indexes = [models.Index(fields=["broker", "-reported_at"])]


class ClusterSample(models.Model):
    """The cluster's imbalance at one tick: CV (population std / mean) of broker usage; None
    while fewer than two brokers serve (a CV of 0 would say the cluster is balanced)."""

    at = models.DateTimeField(db_index=True)
    mean_usage_fraction = models.FloatField()
    std_usage_fraction = models.FloatField()
    cv = models.FloatField(null=True)

    class Meta:
        ordering = ["at"]


class BalancerConfig(models.Model):
    """The strategies and their parameters (reference keys and units), and their memory."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="balancer_config"
    )
    # Fulcrum's own strategies by default (balancer.cycle.Strategies); Pulsar's and Danube's
    # are a choice away in the config editor.
    shedder = models.CharField(max_length=100, default=ShedderName.FULCRUM)
    placement = models.CharField(max_length=100, default=PlacementName.FULCRUM)
    split_algorithm = models.CharField(
        max_length=100, default=SplitAlgorithmName.RANGE_EQUALLY_DIVIDE
    )
    parameters = models.JSONField(
        default=dict
    )  # Pulsar keys, e.g. {"loadBalancerBrokerThresholdShedderPercentage": 10}
    is_shedding_enabled = models.BooleanField(default=True)
    is_auto_split_enabled = models.BooleanField(default=False)
    # The shedding loop's period; beat wakes the tick more often and the tick skips until due.
    loop_interval_s = models.FloatField(default=10.0)
    state = models.JSONField(default=dict)  # strategy name -> what it remembers between cycles


class ConfigVersion(models.Model):
    """One saved state of the balancer config: who, when, why, the values (``EDITABLE`` of
    ``console.services.config``) and what changed from the version before ({field: [old, new]})."""

    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )  # None: as found before the first edit, or the balancer itself
    reason = models.TextField(blank=True, default="")
    values = models.JSONField(default=dict)
    changes = models.JSONField(default=dict)

    class Meta:
        ordering = ["-id"]

    @property
    def actor_name(self) -> str:
        return self.actor.get_username() if self.actor else "—"


class Lease(models.Model):
    """A named piece of work that runs once at a time cluster-wide (the shedding tick, a Pulsar
    pass, the fold, the history's flush and compaction, a report run, the dead-man), held by
    ``holder`` until ``locked_until``, claimed by compare-and-set (``console.leases``, where
    every lease's name is)."""

    name = models.CharField(max_length=50, unique=True)
    locked_until = models.DateTimeField()
    holder = models.CharField(max_length=200, blank=True, default="")


class Decision(models.Model):
    """One balancer decision: a shedding cycle, a placement or an operator's plan, stored whole."""

    class Kind(models.TextChoices):
        SHED = "shed"
        PLACE = "place"
        OPERATOR = "operator"

    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    strategy = models.CharField(max_length=100)
    reason = models.CharField(max_length=100)
    summary = models.TextField()
    details = models.JSONField(default=dict)  # the whole plan (balancer.cycle.CyclePlan.as_dict)

    class Meta:
        ordering = ["-at", "-id"]

    @property
    def is_quiet(self) -> bool:
        """A cycle that moved nothing, vetoed nothing and failed nothing (the plan's summary,
        made by the core, is then "no action", perhaps with the shedder's skips)."""
        return is_quiet(self.reason, self.summary)


def is_quiet(reason: str, summary: str) -> bool:
    """``Decision.is_quiet`` from a decision's reason and summary."""
    head = summary.split(";", 1)[0]
    return head == "no action" and "vetoed" not in summary and reason != "BadConfig"


class AuditEvent(models.Model):
    """Every automatic and manual action: when, who, what, why, and the load before and after."""

    class Action(models.TextChoices):
        UNLOAD = "unload"
        PLACE = "place"
        SPLIT = "split"
        DRAIN = "drain"  # a broker to draining, or drained once it is empty
        ACTIVATE = "activate"  # a broker back to active
        CONFIG = "config"
        REPORT = "report"
        BROKER_STATE = "broker-state"
        CREDENTIAL = "credential"
        CONTROL = "control"  # attaching to a Pulsar cluster: control taken or released, executor
        VERIFY = "verify"  # what observing Pulsar found after an action was sent
        OBSERVED = "observed"  # a move Pulsar made on its own (its shedder, a lookup, an admin)

    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )  # None: the balancer itself
    action = models.CharField(max_length=20, choices=Action.choices)
    target = models.CharField(max_length=300)
    source = models.CharField(max_length=200, blank=True, default="")
    destination = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField()  # the core's explanation sentences, with units
    decision = models.ForeignKey(Decision, null=True, blank=True, on_delete=models.SET_NULL)
    load_before = models.JSONField(default=dict)  # broker -> usage fraction, and "cv"
    load_after = models.JSONField(null=True, blank=True)  # filled from the first tick after
    # An operator's undo: the unload this one reverses (the bundle back to the broker it left).
    reverses = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reversed_by"
    )

    class Meta:
        ordering = ["-at", "-id"]
        # The audit page's filters, newest first, over a million rows (issue 26); the tick's
        # "after" figures look for the rows still without them.
        indexes = [
            models.Index(fields=["action", "-at"], name="audit_action_at"),
            models.Index(fields=["source", "-at"], name="audit_source_at"),
            models.Index(fields=["destination", "-at"], name="audit_destination_at"),
            # target LIKE 'tenant/ns/%' (a namespace, a broker): PostgreSQL needs the
            # pattern operator class under a non-C collation; other databases ignore it.
            models.Index(
                fields=["target"], name="audit_target_prefix", opclasses=["varchar_pattern_ops"]
            ),
            models.Index(fields=["target", "-at"], name="audit_target_at"),
            models.Index(
                fields=["at"], name="audit_after_pending", condition=Q(load_after__isnull=True)
            ),
        ]

    @property
    def actor_name(self) -> str:
        """The operator's username, or "balancer" for automatic actions."""
        return self.actor.get_username() if self.actor else "balancer"

    @property
    def verb(self) -> str:
        """What the operation is, one word each: an unload that reverses another is an undo."""
        if self.action == self.Action.UNLOAD and self.reverses_id:
            return "undo"
        return str(self.action)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready line for the websocket and the API."""
        return {
            "id": self.pk,
            "at": self.at.isoformat(),
            "actor": self.actor_name,
            "action": self.action,
            "verb": self.verb,
            "target": self.target,
            "source": self.source,
            "destination": self.destination,
            "reason": self.reason,
            "reverses": self.reverses_id,
        }


class ReportRun(models.Model):
    """One Spark job over the Parquet history: the load report or the strategy advisor. Its
    results are files under ``FULCRUM_REPORTS_DIR/run-<id>/`` (``console.reports``), read by
    ``selectors.report_results``; the row keeps its progress and outcome."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        REPORT = "report"
        ADVISOR = "advisor"

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.REPORT)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    master = models.CharField(max_length=200)
    # Progress: stages (or replay tasks) done of the total, and what runs now.
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=200, blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="")  # why it failed, in a sentence
    summary = models.JSONField(default=dict)  # the job's summary.json: what it wrote
    log_tail = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]


class BrokerCredential(models.Model):
    """A broker's token, stored as its SHA-256 (tokens are 256-bit random, so a fast hash is
    enough); a report or lookup made with it speaks only for ``broker``."""

    broker = models.ForeignKey(Broker, on_delete=models.CASCADE, related_name="credentials")
    token_sha256 = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)  # the token's first characters, to recognise it
    created_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.broker.name} {self.prefix}…"

    @staticmethod
    def digest(token: str) -> str:
        """What is stored of a token: its SHA-256, hex."""
        return hashlib.sha256(token.encode()).hexdigest()


class PulsarConnection(models.Model):
    """A Pulsar cluster Fulcrum attaches to through its admin REST API (``console.pulsar``).

    Several can be stored; the console observes and balances the one ``is_attached`` (at most
    one: the console shows one cluster). Authentication (``console.pulsar.auth``), one of: a
    token stored encrypted (``services.pulsar.token_encrypt``) or read from the environment
    variable ``token_env`` (a ``FULCRUM_PULSAR_…`` name); a ``token_file`` re-read when it
    changes; OAuth2 client credentials (``oauth2_issuer_url``, ``oauth2_audience``,
    ``oauth2_key_file``, ``oauth2_scope``); with or without a TLS client certificate
    (``tls_cert_file``, ``tls_key_file``). ``cluster_name``: the local cluster's name, checked
    against the brokers' own (empty: theirs).
    ``mode`` starts as observe-only; taking control records in ``previous_config`` what it
    changed in Pulsar's dynamic configuration (key -> {"effective", "override"}) so releasing
    control restores it, and ``controlled_at`` when. ``handed_back``: the last time control
    went back to Pulsar without an admin's click (``{"at", "by", "why"}``: the dead-man, or
    ``manage.py pulsar_release``).
    """

    class Mode(models.TextChoices):
        OBSERVE = "observe"
        CONTROL = "control"

    name = models.CharField(max_length=100, unique=True)
    admin_url = models.CharField(max_length=500)  # any broker's (or a proxy's) web URL
    token_encrypted = models.TextField(blank=True, default="")
    token_env = models.CharField(max_length=100, blank=True, default="")
    tls_ca_file = models.CharField(max_length=500, blank=True, default="")
    token_file = models.CharField(max_length=500, blank=True, default="")
    oauth2_issuer_url = models.CharField(max_length=500, blank=True, default="")
    oauth2_audience = models.CharField(max_length=500, blank=True, default="")
    oauth2_key_file = models.CharField(max_length=500, blank=True, default="")
    oauth2_scope = models.CharField(max_length=500, blank=True, default="")
    tls_cert_file = models.CharField(max_length=500, blank=True, default="")
    tls_key_file = models.CharField(max_length=500, blank=True, default="")
    cluster_name = models.CharField(max_length=200, blank=True, default="")
    is_attached = models.BooleanField(default=False)
    mode = models.CharField(max_length=10, choices=Mode.choices, default=Mode.OBSERVE)
    previous_config = models.JSONField(default=dict)
    is_executor_stopped = models.BooleanField(default=False)
    max_moves_in_flight = models.PositiveIntegerField(default=4)
    observed_at = models.DateTimeField(null=True, blank=True)
    observation = models.JSONField(default=dict)  # the last observation's summary
    controlled_at = models.DateTimeField(null=True, blank=True)
    handed_back = models.JSONField(default=dict, blank=True)
    # Pulsar's own balancing found back on while Fulcrum holds control ({"at", "keys", "why"}):
    # the executor is stopped until an admin re-asserts control or releases it.
    conflict = models.JSONField(default=dict, blank=True)
    # When the pass under way started (later than observed_at while one runs): a slow or stuck
    # observation is shown as running, not only as an old "Observed" time.
    pass_started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_attached"],
                condition=models.Q(is_attached=True),
                name="one_attached_pulsar_connection",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.admin_url})"


class PulsarMove(models.Model):
    """One action the executor sends to Pulsar (an unload, with its destination, or a split) and
    what observing the cluster afterwards found.

    ``state``: queued -> sending -> verifying -> done. ``outcome`` (once done): as-planned,
    elsewhere (Pulsar put it on another broker), unowned (no lookup placed it in time), no-op
    (Pulsar accepted a split but found no valid boundary, and split nothing), failed (Pulsar
    refused, or nothing changed), skipped (the cluster had changed before it was sent),
    cancelled (the executor was stopped or control released first).
    """

    class Kind(models.TextChoices):
        UNLOAD = "unload"
        SPLIT = "split"

    class State(models.TextChoices):
        QUEUED = "queued"
        SENDING = "sending"
        VERIFYING = "verifying"
        DONE = "done"

    class Outcome(models.TextChoices):
        AS_PLANNED = "as-planned"
        ELSEWHERE = "elsewhere"
        UNOWNED = "unowned"
        NOOP = "no-op"
        FAILED = "failed"
        SKIPPED = "skipped"
        CANCELLED = "cancelled"

    # Queued, being sent or awaiting verification.
    IN_FLIGHT = (State.QUEUED, State.SENDING, State.VERIFYING)

    connection = models.ForeignKey(PulsarConnection, on_delete=models.CASCADE, related_name="moves")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    bundle = models.CharField(max_length=300)
    source = models.CharField(max_length=200)
    destination = models.CharField(max_length=200, blank=True, default="")
    algorithm = models.CharField(max_length=100, blank=True, default="")
    boundaries = models.JSONField(default=list)  # planned split positions (hash values)
    audit = models.ForeignKey(AuditEvent, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, blank=True, default="")
    outcome_reason = models.TextField(blank=True, default="")
    # Sends tried: a send that never reached Pulsar is tried again, up to MAX_SEND_ATTEMPTS.
    attempts = models.PositiveSmallIntegerField(default=0)
    # The HTTP status of the last send's answer (0: none came; 2xx accepted). A 5xx answered
    # while the bundle stays on its source means Pulsar did nothing: sent again, bounded.
    last_status = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state"]),
            models.Index(fields=["finished_at"], name="pulsarmove_finished_at"),
        ]
        constraints = [
            # One move of a bundle at a time: a second is never queued while one is in flight.
            models.UniqueConstraint(
                fields=["connection", "bundle"],
                condition=~models.Q(state="done"),
                name="one_pulsar_move_in_flight_per_bundle",
            )
        ]

    def summary(self) -> dict[str, Any]:
        """A JSON-ready line for the API and the Pulsar page."""
        return {
            "id": self.pk,
            "kind": self.kind,
            "bundle": self.bundle,
            "source": self.source,
            "destination": self.destination,
            "createdAt": self.created_at.isoformat(),
            "sentAt": self.sent_at.isoformat() if self.sent_at else None,
            "finishedAt": self.finished_at.isoformat() if self.finished_at else None,
            "state": self.state,
            "outcome": self.outcome,
            "outcomeReason": self.outcome_reason,
            "attempts": self.attempts,
        }
