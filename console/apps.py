"""The console app: its ownership signals."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


def _ownership_may_have_changed(sender: Any, **kwargs: Any) -> None:
    from console import loadstore

    loadstore.ownership_changing()


class ConsoleConfig(AppConfig):
    """A saved or deleted bundle or broker (the admin, a test, a cascade) gives the ownership a
    new version, as ``plan_apply`` does for its bulk updates: the ingest's cached ownership is
    then read again."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.models import Broker, Bundle

        for model in (Bundle, Broker):
            post_save.connect(_ownership_may_have_changed, sender=model, weak=False)
            post_delete.connect(_ownership_may_have_changed, sender=model, weak=False)
