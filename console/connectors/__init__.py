"""Connectors to clusters: the simulator agent over HTTP (and, later, Pulsar's admin API)."""
