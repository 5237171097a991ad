"""Trace-driven cluster simulator: real workload traces -> brokers that report load and serve only
the bundles they own."""
