"""The demo's cluster simulator served as an Apache Pulsar cluster: every simulated broker answers,
on its own port, the part of Pulsar's admin REST API that Fulcrum's connector uses
(``console.pulsar.admin``, ``console.pulsar.observe``), with Pulsar's paths, response shapes,
status codes and quirks (``PULSAR_ADMIN.md`` E1–E19, A1–A3, §3, §4). No Django.

    python -m console.connectors.pulsar_cluster [--load-manager modular|extensible] ...

The cluster is ``balancer.simulator.layout.DEMO`` with broker i at ``{host}:{base_port + i}``; the
load is the simulator agent's workload (``balancer.simulator.model``): every ``step`` plays one
trace minute. Between steps the cluster behaves as Pulsar does on its own:

1. clients look up every bundle nobody owns, so it gets an owner: the one-shot destination an
   unload left (modular load manager), else Pulsar's placement (``LeastLongTermMessageRate``
   under the modular load manager, ``LeastResourceUsageWithWeight`` under the extensible one,
   both from ``balancer.placement``);
2. the bundles' load for the minute is computed and folded into the leader's time averages;
3. every ``loadBalancerSheddingIntervalMinutes`` trace minutes, when
   ``loadBalancerSheddingEnabled`` is true, the leader runs Pulsar's own shedder through
   ``balancer.cycle.plan_cycle``: the strategy of ``loadBalancerLoadSheddingStrategy`` whose
   unloads leave bundles unowned (modular), or TransferShedder whose transfers set the new owner
   directly (extensible). Pulsar's grace period counts trace minutes.

Modelled: the modular load manager (default) and the extensible one (``load_manager=
"extensible"``, Pulsar ≥ 3.0); releases before 3.0 (``pulsar_version="2.10.6"``: no ``brokerId``
from the leader, ``destinationBroker`` ignored, no flow_or_qps split); bearer-token auth; 307
hops to the owner, the leader or the named broker; dynamic configuration (E15–E19) with overrides
that stay effective after a delete until a restart; heartbeat bundles (never unloaded or split).
Not modelled: auto-split, broker failures and restarts, namespace isolation policies, TLS,
non-persistent topics' own load, the Pulsar proxy, and the binary protocol.

Tests drive ``PulsarCluster.handle`` and ``PulsarCluster.step`` directly or serve it over HTTP
with ``serve``; ``requests``, ``assignments`` and ``shed_log`` record what happened.
"""

from console.connectors.pulsar_cluster.common import (
    CONFIG,
    EXTENSIBLE,
    MODULAR,
    UNEXPECTED,
    Assignment,
    RequestRecord,
    ShedRecord,
    StepResult,
)
from console.connectors.pulsar_cluster.routes import PulsarCluster
from console.connectors.pulsar_cluster.server import build, main, run, serve, stop

__all__ = [
    "CONFIG",
    "EXTENSIBLE",
    "MODULAR",
    "UNEXPECTED",
    "Assignment",
    "PulsarCluster",
    "RequestRecord",
    "ShedRecord",
    "StepResult",
    "build",
    "main",
    "run",
    "serve",
    "stop",
]
