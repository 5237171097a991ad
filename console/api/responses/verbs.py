"""The operator verbs' answers: previews and the applied unload, split, undo and broker state
(``services.bundles``, ``services.brokers``)."""

from __future__ import annotations

from rest_framework import serializers

from console.api.responses.common import BROKER_STATES, AnyOf, iso, names
from console.api.responses.plans import CyclePlanOutput
from console.models import Broker


class PreviewOutput(serializers.Serializer):
    """An operator's action planned, applied to nothing."""

    preview = serializers.BooleanField(help_text="true")
    plan = CyclePlanOutput()
    summary = serializers.CharField(help_text="the plan in one line")
    vetoed = serializers.BooleanField()
    overridable = serializers.BooleanField(help_text="``force`` would override every veto")
    overrides = names("the vetoes ``force`` would pass; send them back with it")


class DestinationOutput(serializers.Serializer):
    """A broker as an unload's destination."""

    broker = serializers.CharField()
    eligible = serializers.BooleanField()
    why = serializers.CharField(allow_null=True, help_text="what refuses it; null: eligible")
    warning = serializers.CharField(
        allow_null=True, help_text="the placement filter that would not choose it"
    )


class SplitChoiceOutput(serializers.Serializer):
    """A split algorithm the console offers, for this bundle."""

    name = serializers.CharField()
    allowed = serializers.BooleanField()
    why = serializers.CharField(allow_null=True, help_text="why not; null: allowed")


class UnloadPreviewOutput(PreviewOutput):
    """An unload planned: the plan, every broker as a destination, the split algorithms."""

    bundle = serializers.CharField()
    owner = serializers.CharField(allow_null=True)
    destinations = DestinationOutput(many=True)
    throughput = serializers.FloatField(help_text="bytes/s, short-term")
    splits = SplitChoiceOutput(many=True)


class ChildLoadOutput(serializers.Serializer):
    """A split's child with its share of the bundle's short-term load."""

    bundle = serializers.CharField()
    fraction = serializers.FloatField(help_text="share, 0–1")
    throughput = serializers.FloatField(help_text="bytes/s")
    msgRate = serializers.FloatField(help_text="msg/s")
    topics = serializers.IntegerField()
    measured = serializers.BooleanField(help_text="from per-topic stats, not the hash range")


class SplitPreviewOutput(PreviewOutput):
    """A split planned: the plan and each child's share of the load."""

    bundle = serializers.CharField()
    owner = serializers.CharField(allow_null=True)
    algorithm = serializers.CharField()
    children = ChildLoadOutput(many=True)


class SplitOutput(serializers.Serializer):
    """A split applied."""

    bundle = serializers.CharField()
    boundaries = names("the cut points, hashes such as 0x40000000")
    children = names("the new bundles, unowned until placed")
    explanation = serializers.CharField()


class UndoneMoveOutput(serializers.Serializer):
    """The move an undo reverses."""

    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    destination = serializers.CharField()
    at = iso("ISO 8601")


class UndoPreviewOutput(UnloadPreviewOutput):
    """An undo planned: the unload back, and the audit row it would reverse."""

    reverses = serializers.IntegerField(help_text="the audit row")
    undoes = UndoneMoveOutput()


class UnloadOutput(serializers.Serializer):
    """An operator's applied unload: the bundle, from and to which broker, forced past a veto
    or not, why, and its audit row and decision."""

    bundle = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    destination = serializers.CharField(allow_null=True)
    forced = serializers.BooleanField()
    explanation = serializers.CharField()
    audit = serializers.IntegerField(allow_null=True)
    decision = serializers.IntegerField()
    inFlight = serializers.BooleanField(
        help_text="sent to an attached Pulsar cluster: the bundle is on its way, verified by "
        "observing; false: moved in the metadata store"
    )


class UndoOutput(UnloadOutput):
    """An undo applied: the unload back, linked to the audit row it reverses."""

    reverses = serializers.IntegerField(help_text="the audit row")
    undoes = UndoneMoveOutput()


class NotUndoableOutput(serializers.Serializer):
    """A preview of undoing a bundle with no unload in the undo window."""

    preview = serializers.BooleanField(help_text="true")
    undoable = serializers.BooleanField(help_text="false")
    bundle = serializers.CharField()
    why = serializers.CharField()


class BrokerStateOutput(serializers.Serializer):
    """A broker's state once drained or activated."""

    broker = serializers.CharField()
    state = serializers.ChoiceField(choices=BROKER_STATES)


class BrokerStatePreviewOutput(serializers.Serializer):
    """A drain or activation planned: each bundle and where it would go, the vetoes."""

    preview = serializers.BooleanField(help_text="true")
    broker = serializers.CharField()
    state = serializers.ChoiceField(
        choices=[Broker.State.DRAINING.value, Broker.State.ACTIVE.value]
    )
    plan = CyclePlanOutput()
    summary = serializers.CharField()
    vetoed = serializers.BooleanField()


UNLOAD_ANSWER = AnyOf("UnloadAnswer", [UnloadPreviewOutput, UnloadOutput])
SPLIT_ANSWER = AnyOf("SplitAnswer", [SplitPreviewOutput, SplitOutput])
UNDO_ANSWER = AnyOf("UndoAnswer", [UndoPreviewOutput, UndoOutput])
UNDO_BY_NAME_ANSWER = AnyOf("UndoByNameAnswer", [UndoPreviewOutput, UndoOutput, NotUndoableOutput])
BROKER_STATE_ANSWER = AnyOf("BrokerStateAnswer", [BrokerStatePreviewOutput, BrokerStateOutput])
