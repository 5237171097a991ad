"""``python -m balancer.simulator``."""

from balancer.simulator.run import main

main()
