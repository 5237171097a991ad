"""The error shape and the fields the answers share: describe only, never serialize."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.serializers import PolymorphicProxySerializerExtension
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from balancer.decisions import Reason
from console.api.errors import CODES
from console.models import Broker

# Choice sets that several answers share, each named once in the schema (settings.py,
# SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]).
BROKER_STATES = list(Broker.State.values)
REASONS = [str(r) for r in Reason]
CONTROL_ACTIONS = ["take", "release", "reassert"]

# A refused request's ``code``: by status (``CODES``), "error" for a status without one, and the
# few a service names itself (``ConsoleError(..., code=...)``).
ERROR_CODES = sorted({*CODES.values(), "error", "ownership_drift"})


@extend_schema_field(
    {
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        ],
        "description": "a message, or a list's or a map's messages by index or key",
    }
)
class FieldMessageField(serializers.Field):
    """One message about a field: text, or (a list or a map) messages by index or key."""

    def to_representation(self, value: Any) -> Any:
        return value


class ErrorDetailOutput(serializers.Serializer):
    """What was refused and why; an error may add figures of its own (``veto``, ``plan``...)."""

    code = serializers.ChoiceField(choices=ERROR_CODES, help_text="one word to branch on")
    message = serializers.CharField(help_text="the reason, in a sentence")
    field = serializers.CharField(allow_null=True, help_text="the input at fault, or null")
    fields = serializers.DictField(  # type: ignore[assignment]  # a field, not Serializer.fields
        child=serializers.ListField(child=FieldMessageField()),
        required=False,
        help_text="a validation error: every field at fault with its messages",
    )
    veto = serializers.CharField(required=False, help_text="the veto that refused the action")
    reason = serializers.CharField(required=False, help_text="e.g. StalePlan")
    drift = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="ownership_drift: the bundles the reporting broker does not own",
    )


class ErrorOutput(serializers.Serializer):
    """Every refused request, 4xx or 5xx: ``{"error": {"code", "message", "field"}}``."""

    error = ErrorDetailOutput()


@extend_schema_field(
    {
        "oneOf": [{"type": "number"}, {"type": "boolean"}, {"type": "string"}],
        "description": "a number, true/false or a name, in the key's own unit",
    }
)
class ScalarField(serializers.Field):
    """A number, a boolean or a string (a Pulsar or Danube key's value)."""

    def to_representation(self, value: Any) -> Any:
        return value


S = TypeVar("S", bound=type[serializers.Serializer])


def keyword_field(name: str, field: serializers.Field, *, after: str) -> Callable[[S], S]:
    """Declare a field whose name is a Python keyword (``from``), after the field ``after``
    (the class body cannot name it; the metaclass' ``_declared_fields`` can hold it)."""

    def declare(cls: S) -> S:
        fields = list(cls._declared_fields.items())
        at = [n for n, _ in fields].index(after) + 1
        cls._declared_fields = dict([*fields[:at], (name, field), *fields[at:]])
        return cls

    return declare


def iso(help_text: str = "ISO 8601, UTC", **kwargs: Any) -> serializers.CharField:
    """A time as ISO 8601 text."""
    return serializers.CharField(help_text=help_text, **kwargs)


def names(help_text: str = "", **kwargs: Any) -> serializers.ListField:
    """A list of names."""
    return serializers.ListField(child=serializers.CharField(), help_text=help_text, **kwargs)


def fractions(help_text: str, **kwargs: Any) -> serializers.DictField:
    """Broker (or key) -> a fraction 0–1."""
    return serializers.DictField(child=serializers.FloatField(), help_text=help_text, **kwargs)


class AnyOf(PolymorphicProxySerializer):
    """An answer of one of ``answers``' shapes, without a discriminator: ``anyOf`` (a preview
    and the applied action may share fields, so ``oneOf``'s "exactly one" would not hold)."""

    def __init__(self, component_name: str, answers: list[type[serializers.Serializer]]) -> None:
        super().__init__(
            component_name=component_name, serializers=answers, resource_type_field_name=None
        )


class AnyOfExtension(PolymorphicProxySerializerExtension):
    """``AnyOf``'s schema: drf-spectacular's ``oneOf`` of the shapes, as ``anyOf``."""

    target_class = "console.api.responses.common.AnyOf"
    priority = 1

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = super().map_serializer(auto_schema, direction)
        return {"anyOf": schema.pop("oneOf"), **schema}
