"""Django admin: the balancer config (validated against the registry), and read-only history."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from balancer.errors import BalancerError
from balancer.registry import console_strategy, parameter_errors
from console.models import AuditEvent, BalancerConfig, Broker, Decision, Namespace


class BalancerConfigForm(forms.ModelForm):
    """Refuses unknown strategy names and parameters, naming the valid ones."""

    class Meta:
        model = BalancerConfig
        fields = [
            "shedder",
            "placement",
            "split_algorithm",
            "parameters",
            "is_shedding_enabled",
            "is_auto_split_enabled",
            "loop_interval_s",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        checks = (
            ("shedder", lambda v: console_strategy("shedder", v, "shedder")),
            ("placement", lambda v: console_strategy("placement", v, "placement")),
            ("split_algorithm", lambda v: console_strategy("split", v, "split_algorithm")),
        )
        for field, canonical in checks:
            try:
                data[field] = canonical(data.get(field, ""))
            except BalancerError as exc:
                self.add_error(field, exc.message)
        interval = data.get("loop_interval_s")
        if interval is not None and interval <= 0:
            self.add_error("loop_interval_s", "the loop interval must be more than 0 seconds")
        parameters = data.get("parameters") or {}
        if not isinstance(parameters, dict):
            self.add_error("parameters", "parameters are an object of Pulsar keys and values")
        else:
            for key, message in parameter_errors(parameters).items():
                self.add_error("parameters", f"{key}: {message}")
        return data


@admin.register(BalancerConfig)
class BalancerConfigAdmin(admin.ModelAdmin):
    form = BalancerConfigForm
    list_display = ["cluster", "shedder", "placement", "split_algorithm", "is_shedding_enabled"]


@admin.register(Broker)
class BrokerAdmin(admin.ModelAdmin):
    list_display = ["name", "failure_domain", "state"]
    fields = ["name", "failure_domain", "state"]
    readonly_fields = ["name"]


@admin.register(Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "anti_affinity_group"]


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["at", "kind", "strategy", "reason", "summary"]
    list_filter = ["kind", "strategy", "reason"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor", "action", "target", "source", "destination", "reason"]
    list_filter = ["action"]
