"""What the Pulsar endpoints answer: the connections and moves (``selectors.pulsar_status``),
and taking, releasing or re-asserting control (``services.control``)."""

from __future__ import annotations

from rest_framework import serializers

from console.api.responses.common import CONTROL_ACTIONS, AnyOf, iso, names
from console.models import PulsarConnection, PulsarMove


class KeyBeforeOutput(serializers.Serializer):
    """A key of Pulsar's dynamic configuration as it was before Fulcrum took control."""

    effective = serializers.CharField(allow_null=True, help_text="its value then")
    override = serializers.CharField(allow_null=True, help_text="its override then; null: none")


class HandedBackOutput(serializers.Serializer):
    """Control handed back to Pulsar without an admin's click; every key absent: never."""

    at = iso("ISO 8601", required=False)
    by = serializers.CharField(required=False, help_text="the dead-man, manage.py...")
    why = serializers.CharField(required=False)


class ConflictOutput(serializers.Serializer):
    """Pulsar's own balancing found back on while Fulcrum holds control; every key absent:
    none."""

    at = iso("ISO 8601", required=False)
    keys = names("the keys found back on", required=False)
    why = serializers.CharField(required=False)


class TroubleOutput(serializers.Serializer):
    """What is wrong with observing or acting on the attached cluster."""

    kind = serializers.ChoiceField(
        choices=["no-observation", "slow", "failing-calls", "late-moves"]
    )
    text = serializers.CharField(help_text="names the brokers, calls and seconds")


class ConnectionOutput(serializers.Serializer):
    """A Pulsar connection (the secret never)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    adminUrl = serializers.CharField()
    attached = serializers.BooleanField()
    mode = serializers.ChoiceField(choices=PulsarConnection.Mode.values)
    executorStopped = serializers.BooleanField()
    maxMovesInFlight = serializers.IntegerField()
    token = serializers.CharField(help_text='"environment <VAR>", "stored, encrypted" or "none"')
    auth = serializers.CharField(help_text="how it authenticates, in words")
    clusterName = serializers.CharField(help_text='configured; "": the brokers\' own')
    tlsCaFile = serializers.CharField()
    observedAt = iso("ISO 8601; null: never", allow_null=True)
    observation = serializers.DictField(
        help_text="the last observation's summary as the Pulsar pass keeps it "
        "(``services.pulsar``: brokers, bundles, reports, leader, load manager, calls, "
        "durationS in s...); {} before the first"
    )
    previousConfig = serializers.DictField(
        child=KeyBeforeOutput(), help_text="key -> what releasing control restores"
    )
    inFlight = serializers.IntegerField(help_text="moves queued, sent or being verified")
    controlledAt = iso("ISO 8601; null: never", allow_null=True)
    handedBack = HandedBackOutput()
    conflict = ConflictOutput()
    trouble = TroubleOutput(many=True, help_text="the attached connection's; [] otherwise")


class DeadmanOutput(serializers.Serializer):
    """The dead-man: control goes back to Pulsar when the loop falls silent this long."""

    limitS = serializers.FloatField(help_text="s")
    lastTickAt = iso("the loop's last completed tick, ISO 8601; null: none", allow_null=True)
    alive = serializers.BooleanField(help_text="a dead-man holds its lease")


class MoveOutput(serializers.Serializer):
    """An action the executor sends to Pulsar (``PulsarMove.summary``)."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=PulsarMove.Kind.values)
    bundle = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    destination = serializers.CharField(help_text='"": Pulsar chooses')
    createdAt = iso("ISO 8601")
    sentAt = iso("ISO 8601; null: not yet", allow_null=True)
    finishedAt = iso("ISO 8601; null: not yet", allow_null=True)
    state = serializers.ChoiceField(choices=PulsarMove.State.values)
    outcome = serializers.ChoiceField(
        choices=["", *PulsarMove.Outcome.values], help_text='"" until done'
    )
    outcomeReason = serializers.CharField()
    attempts = serializers.IntegerField()


class PulsarStatusOutput(serializers.Serializer):
    """The Pulsar connections, the dead-man, and the attached one's moves in flight and the
    latest ended, newest first."""

    connections = ConnectionOutput(many=True)
    deadman = DeadmanOutput()
    observeS = serializers.FloatField(help_text="the observation period, s")
    moves = MoveOutput(many=True)


class ControlChangeOutput(serializers.Serializer):
    """A key of Pulsar's dynamic configuration that taking or releasing control changes."""

    key = serializers.CharField()
    effective = serializers.CharField(allow_null=True, help_text="its value now")
    override = serializers.CharField(allow_null=True, help_text="its override now; null: none")
    to = serializers.CharField(required=False, help_text="preview and take: what it becomes")
    how = serializers.CharField(required=False, help_text="preview and take: how, in words")


class ControlPreviewOutput(serializers.Serializer):
    """What taking, releasing or re-asserting control would change, read live."""

    connection = serializers.CharField()
    mode = serializers.ChoiceField(choices=PulsarConnection.Mode.values)
    action = serializers.ChoiceField(choices=CONTROL_ACTIONS)
    changes = ControlChangeOutput(many=True)
    inFlight = serializers.IntegerField(help_text="moves queued, sent or being verified")
    conflict = ConflictOutput()


class ControlChangedOutput(PulsarStatusOutput):
    """Control taken or released (the keys changed), and the Pulsar status after."""

    connection = serializers.CharField()
    mode = serializers.ChoiceField(choices=PulsarConnection.Mode.values)
    changes = ControlChangeOutput(many=True)


class ControlReassertedOutput(PulsarStatusOutput):
    """Control re-asserted (the keys set off again), and the Pulsar status after."""

    connection = serializers.CharField()
    mode = serializers.ChoiceField(choices=PulsarConnection.Mode.values)
    reasserted = names("the keys set off again")


CONTROL_ANSWER = AnyOf("ControlAnswer", [ControlChangedOutput, ControlReassertedOutput])
