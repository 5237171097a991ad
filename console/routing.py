"""Websocket URL routes."""

from django.urls import path

from console.consumers import ClusterConsumer

websocket_urlpatterns = [path("ws/cluster/", ClusterConsumer.as_asgi())]
