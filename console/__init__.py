"""Fulcrum's console: the Django project (metadata store, services, API, pages, tasks)."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
