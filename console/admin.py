"""Django admin: the balancer config (validated against the registry), and read-only history."""

from __future__ import annotations

import os
from typing import Any

from django import forms
from django.contrib import admin, messages

from console.errors import ConsoleError
from console.models import (
    AuditEvent,
    BalancerConfig,
    Broker,
    Decision,
    Namespace,
    PulsarConnection,
)
from console.pulsar.auth import AuthError, checked_url, read_key_file
from console.services.brokers import broker_state_set
from console.services.config import EDITABLE, balancer_config_update, config_changes_check
from console.services.connections import auth_ways
from console.services.credentials import credential_revoke, credential_rotate
from console.services.pulsar import pulsar_connection_check, pulsar_connection_save


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


class PulsarConnectionForm(forms.ModelForm):
    """A Pulsar cluster to attach: its admin URL, and one way to authenticate — a token typed
    here (stored encrypted, never shown again) or read from an environment variable, a token
    file, or OAuth2 client credentials — with or without a TLS client certificate; the local
    cluster's name when the brokers' own is not to be trusted alone."""

    token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="A superuser role's JWT, stored encrypted. Leave empty to keep the stored one.",
    )
    clear_token = forms.BooleanField(required=False, help_text="Remove the stored token.")

    class Meta:
        model = PulsarConnection
        fields = [
            "name",
            "admin_url",
            "token_env",
            "token_file",
            "oauth2_issuer_url",
            "oauth2_audience",
            "oauth2_key_file",
            "oauth2_scope",
            "tls_ca_file",
            "tls_cert_file",
            "tls_key_file",
            "cluster_name",
            "is_attached",
            "max_moves_in_flight",
        ]
        labels = {
            "admin_url": "Admin URL",
            "token_env": "Token from the environment variable",
            "token_file": "Token file",
            "oauth2_issuer_url": "OAuth2 issuer URL",
            "oauth2_audience": "OAuth2 audience",
            "oauth2_key_file": "OAuth2 key file",
            "oauth2_scope": "OAuth2 scope",
            "tls_ca_file": "TLS CA bundle",
            "tls_cert_file": "TLS client certificate",
            "tls_key_file": "TLS client key",
            "cluster_name": "Cluster name",
        }
        help_texts = {
            "admin_url": "Any broker's (or a proxy's) web URL, e.g. http://broker-1:8080.",
            "token_env": "Or: the environment variable that holds the token (never stored).",
            "token_file": "Or: a file holding the token, read again whenever it changes.",
            "oauth2_issuer_url": "Or OAuth2 client credentials (Pulsar's AuthenticationOAuth2): "
            "the issuer URL (its /.well-known/openid-configuration names the token endpoint).",
            "oauth2_audience": "The audience the brokers expect (their tokenAudience).",
            "oauth2_key_file": "The key file: JSON with client_id and client_secret (a path or a "
            "file:// URL; never a data: URL, which would keep the secret here).",
            "oauth2_scope": "Optional scope(s), space-separated.",
            "tls_ca_file": "A CA bundle (PEM) for https brokers; empty: the system's.",
            "tls_cert_file": "A TLS client certificate (PEM), for brokers that authenticate by "
            "certificate (AuthenticationProviderTls); alone or with a token.",
            "tls_key_file": "Its private key (PEM); empty when it is in the certificate file.",
            "cluster_name": "The local cluster's name; empty: the one its brokers give "
            "(clusterName). A different name than theirs is refused, never a remote cluster.",
            "is_attached": "The cluster the console observes (one at a time); observe-only first.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            pulsar_connection_check(self.instance, attached=bool(data.get("is_attached")))
        except ConsoleError as exc:
            self.add_error(exc.field or None, exc.message)
        token_env = data.get("token_env") or ""
        has_token = bool(
            data.get("token")
            or (token_env and os.environ.get(token_env))
            or (self.instance.token_encrypted and not data.get("clear_token"))
        )
        oauth2 = bool(data.get("oauth2_issuer_url") or data.get("oauth2_key_file"))
        ways = auth_ways(token=has_token, token_file=data.get("token_file") or "", oauth2=oauth2)
        if len(ways) > 1:
            self.add_error(ways[-1], "one way to authenticate: a token, a token file or OAuth2")
        if oauth2 and not (data.get("oauth2_issuer_url") and data.get("oauth2_key_file")):
            field = "oauth2_key_file" if data.get("oauth2_issuer_url") else "oauth2_issuer_url"
            self.add_error(field, "OAuth2 needs both the issuer URL and the key file")
        if data.get("tls_key_file") and not data.get("tls_cert_file"):
            self.add_error("tls_cert_file", "the key's certificate is missing")
        return data

    def _readable(self, field: str) -> str:
        path = str(self.cleaned_data.get(field) or "").strip()
        if path and not os.access(path, os.R_OK):
            raise forms.ValidationError(f"{path} cannot be read by the console")
        return path

    def clean_token_file(self) -> str:
        return self._readable("token_file")

    def clean_tls_cert_file(self) -> str:
        return self._readable("tls_cert_file")

    def clean_tls_key_file(self) -> str:
        return self._readable("tls_key_file")

    def clean_oauth2_key_file(self) -> str:
        where = str(self.cleaned_data.get("oauth2_key_file") or "").strip()
        if where:
            try:
                read_key_file(where)
            except AuthError as exc:
                raise forms.ValidationError(exc.message) from None
        return where

    def clean_oauth2_issuer_url(self) -> str:
        url = str(self.cleaned_data.get("oauth2_issuer_url") or "").strip()
        if url:
            try:
                checked_url(url, "oauth2_issuer_url")
            except AuthError as exc:
                raise forms.ValidationError(exc.message) from None
        return url

    def clean_cluster_name(self) -> str:
        name = str(self.cleaned_data.get("cluster_name") or "").strip()
        if (
            self.instance.pk
            and self.instance.mode == "control"
            and name != self.instance.cluster_name
        ):
            raise forms.ValidationError(
                "Fulcrum controls this cluster: release control before naming another"
            )
        return name

    def clean_admin_url(self) -> str:
        url = str(self.cleaned_data["admin_url"]).strip()
        if not url.startswith(("http://", "https://")):
            raise forms.ValidationError("must start with http:// or https://")
        if "@" in url.split("/", 3)[2]:
            raise forms.ValidationError("no user or password in the URL: use the token")
        url = url.rstrip("/")
        if self.instance.pk and self.instance.mode == "control" and url != self.instance.admin_url:
            raise forms.ValidationError(
                "Fulcrum controls this cluster: release control before pointing it elsewhere"
            )
        return url

    def clean_token_env(self) -> str:
        name = str(self.cleaned_data.get("token_env") or "").strip()
        if name and not name.startswith("FULCRUM_PULSAR_"):
            raise forms.ValidationError(
                "must be a FULCRUM_PULSAR_… variable (no other secret of the server is sent)"
            )
        return name

    def clean_tls_ca_file(self) -> str:
        return self._readable("tls_ca_file")

    def clean_max_moves_in_flight(self) -> int:
        cap = int(self.cleaned_data["max_moves_in_flight"])
        if not 1 <= cap <= 50:
            raise forms.ValidationError("between 1 and 50 moves")
        return cap


@admin.register(PulsarConnection)
class PulsarConnectionAdmin(admin.ModelAdmin):
    form = PulsarConnectionForm
    list_display = (
        "name",
        "admin_url",
        "is_attached",
        "mode",
        "is_executor_stopped",
        "observed_at",
    )
    readonly_fields = (
        "mode",
        "is_executor_stopped",
        "previous_config",
        "controlled_at",
        "handed_back",
        "observed_at",
    )

    def has_delete_permission(self, request: Any, obj: PulsarConnection | None = None) -> bool:
        """Never while Fulcrum controls it: what to restore in Pulsar would be lost."""
        if obj is not None and obj.mode == PulsarConnection.Mode.CONTROL:
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request: Any, obj: PulsarConnection, form: Any, change: bool) -> None:
        token = form.cleaned_data.get("token") or None
        if form.cleaned_data.get("clear_token"):
            token = ""
        try:
            pulsar_connection_save(
                obj, token=token, actor=request.user, changed=list(form.changed_data)
            )
        except ConsoleError as exc:
            self.message_user(request, exc.message, level=messages.ERROR)
