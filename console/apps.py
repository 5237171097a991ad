"""The console app: its ownership signals."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save

from console import loadstore


def _ownership_may_have_changed(sender: Any, **kwargs: Any) -> None:
    loadstore.ownership_changing()


class ConsoleConfig(AppConfig):
    """A saved or deleted bundle, or a deleted broker (its bundles lose their owner), gives the
    ownership a new version, as ``plan_apply`` does for its bulk updates: the ingest's cached
    ownership is then read again. A new broker owns nothing: creating one changes nothing."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.models import Broker, Bundle

        post_save.connect(_ownership_may_have_changed, sender=Bundle, weak=False)
        post_delete.connect(_ownership_may_have_changed, sender=Bundle, weak=False)
        post_delete.connect(_ownership_may_have_changed, sender=Broker, weak=False)
