"""Placement: choose the broker for an unassigned bundle (filters, then a selection strategy)."""
