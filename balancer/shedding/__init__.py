"""Shedding strategies: which bundles leave which brokers this cycle."""
