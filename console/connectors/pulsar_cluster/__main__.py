"""``python -m console.connectors.pulsar_cluster``: serve the demo cluster as Pulsar."""

from console.connectors.pulsar_cluster.server import main

main()
