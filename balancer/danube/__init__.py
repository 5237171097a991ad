"""Danube's load manager: rankings (fair, balanced, weighted_load), round-robin placement and the
CV rebalancer, per DANUBE.md and the Danube document where it states a rule (spec README §2)."""
