"""Django admin: the balancer config (validated against the registry), and read-only history."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages

from console.models import AuditEvent, BalancerConfig, Broker, Decision, Namespace
from console.services.brokers import broker_state_set
from console.services.config import EDITABLE, balancer_config_update, config_changes_check
from console.services.credentials import credential_revoke, credential_rotate
from console.services.errors import ConsoleError


def _superusers_only(request: Any) -> bool:
    """The Django admin is for superusers; operators work in the console (its config page, its
    actions), where every change is previewed, versioned and audited."""
    return bool(request.user.is_active and request.user.is_superuser)


admin.site.has_permission = _superusers_only  # type: ignore[method-assign]


class BalancerConfigForm(forms.ModelForm):
    """Refuses unknown strategy names and parameters, naming the valid ones."""

    class Meta:
        model = BalancerConfig
        fields = list(EDITABLE)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in EDITABLE:  # each field on its own: every error shows at once
            if name not in data:
                continue
            try:
                data.update(config_changes_check({name: data[name]}))
            except ConsoleError as exc:
                self.add_error(name, exc.message)
        return data


@admin.register(BalancerConfig)
class BalancerConfigAdmin(admin.ModelAdmin):
    """Edits go through ``balancer_config_update``: validated, written and audited at once."""

    form = BalancerConfigForm
    list_display = ["cluster", "shedder", "placement", "split_algorithm", "is_shedding_enabled"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def save_model(self, request: Any, obj: BalancerConfig, form: Any, change: bool) -> None:
        stored = BalancerConfig.objects.get(pk=obj.pk)
        balancer_config_update(
            stored,
            {name: form.cleaned_data[name] for name in EDITABLE},
            actor=request.user,
            reason="edited in the Django admin",
        )


@admin.register(Broker)
class BrokerAdmin(admin.ModelAdmin):
    """A broker's state changes only by the drain and activate actions (the services, audited);
    nothing here can add, rename or delete a broker."""

    list_display = ["name", "failure_domain", "state"]
    fields = ["name", "failure_domain", "state"]
    readonly_fields = ["name", "failure_domain", "state"]
    actions = ["drain", "activate", "rotate_token", "revoke_tokens"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    @admin.action(description="Drain the selected brokers (their bundles move away)")
    def drain(self, request: Any, queryset: Any) -> None:
        self._set_state(request, queryset, Broker.State.DRAINING)

    @admin.action(description="Activate the selected brokers")
    def activate(self, request: Any, queryset: Any) -> None:
        self._set_state(request, queryset, Broker.State.ACTIVE)

    @admin.action(description="Issue a new token for the selected brokers (shown once)")
    def rotate_token(self, request: Any, queryset: Any) -> None:
        for broker in queryset:
            _, token = credential_rotate(broker.name, actor=request.user)
            self.message_user(
                request,
                f"{broker.name}: new token {token} — copy it now, it is not shown again; "
                "earlier tokens are revoked",
                level=messages.WARNING,
            )

    @admin.action(description="Revoke every token of the selected brokers")
    def revoke_tokens(self, request: Any, queryset: Any) -> None:
        for broker in queryset:
            count = credential_revoke(broker.name, actor=request.user)
            self.message_user(request, f"{broker.name}: {count} token(s) revoked")

    def _set_state(self, request: Any, queryset: Any, state: str) -> None:
        for broker in queryset:
            try:
                broker_state_set(broker.name, state, actor=request.user)
                self.message_user(request, f"{broker.name}: {state}")
            except ConsoleError as exc:
                self.message_user(request, f"{broker.name}: {exc.message}", level=messages.ERROR)


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
