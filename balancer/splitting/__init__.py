"""Splitting: where to cut a bundle (algorithms) and which bundles must be cut (conditions)."""
