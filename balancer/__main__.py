"""``python -m balancer``: the JSON command line (CLI.md)."""

from balancer.cli import main

raise SystemExit(main())
