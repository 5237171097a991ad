"""One whole shedding cycle as a pure function: ``plan_cycle(snapshot, config, state, now)``.

The console's tick, the offline simulator, the benchmark and ``python -m balancer cycle`` all run
this function and apply the planned actions of its plan; nothing else assembles a cycle. The steps
run in the order of CLI.md § ``cycle``:

1. the broker life cycle: a broker that reported at least once and then stayed silent past
   ``broker_timeout_s`` is *lost* and its bundles are re-placed; one that never reported is
   *pending* and left alone; a draining broker gives up every bundle, then becomes drained;
2. the shedding strategy with Pulsar's post-strategy guard (``shed_guarded``);
3. Fulcrum's safety vetoes on every unload: ownership, cool-down, Pulsar's grace period, the move
   rate limit, the blacklist;
4. placement of every bundle left without an owner, honouring the destination a strategy chose
   (AvgShedder, TransferShedder) when it passes Pulsar's placement filters, else the configured
   placement through ``place_many``;
5. auto-split, when enabled.

Every action carries its outcome (planned, or vetoed with the veto), the metric that ranked it with
its unit, and an explanation sentence; the plan carries the load statistics before and the
prediction after (Pulsar's UnloadScheduler labels each decision; Cruise Control's
OptimizerResult carries the proposals with the stats before and after).

Operator actions are plans too (``plan_unload``, ``plan_split``, ``plan_drain``,
``plan_activate``), screened by the same vetoes; an operator overrides a veto only with ``force``,
and the action records that.
"""

from __future__ import annotations

from balancer.cycle.apply import (
    LEFT,
    Applied,
    Change,
    Left,
    Move,
    OwnersSink,
    Refused,
    Sink,
    StalePlan,
    Verdict,
    apply_plan,
    apply_to_owners,
)
from balancer.cycle.life import broker_life
from balancer.cycle.model import (
    EXPLAINED_BROKERS,
    EXPLAINED_BROKERS_TOTAL,
    EXPLAINED_PLACEMENTS,
    FULCRUM_SHEDDERS,
    PLACEMENT_METRICS,
    TOPIC_SPLITS,
    Action,
    ActionBase,
    ActionKind,
    BrokerStateAction,
    Candidate,
    CycleConfig,
    CyclePlan,
    LoadStats,
    Metric,
    PlaceAction,
    SplitAction,
    Strategies,
    UnloadAction,
)
from balancer.cycle.operator_plans import (
    plan_activate,
    plan_drain,
    plan_placement,
    plan_split,
    plan_unload,
    unload_destinations,
)
from balancer.cycle.plan import plan_cycle
from balancer.cycle.prediction import predict, reassign
from balancer.cycle.splits import split_child_loads, split_children
from balancer.cycle.vetoes import screen_unloads

__all__ = [
    "EXPLAINED_BROKERS",
    "EXPLAINED_BROKERS_TOTAL",
    "EXPLAINED_PLACEMENTS",
    "FULCRUM_SHEDDERS",
    "LEFT",
    "PLACEMENT_METRICS",
    "TOPIC_SPLITS",
    "Action",
    "ActionBase",
    "ActionKind",
    "Applied",
    "BrokerStateAction",
    "Candidate",
    "Change",
    "CycleConfig",
    "CyclePlan",
    "Left",
    "LoadStats",
    "Metric",
    "Move",
    "OwnersSink",
    "PlaceAction",
    "Refused",
    "Sink",
    "SplitAction",
    "StalePlan",
    "Strategies",
    "UnloadAction",
    "Verdict",
    "apply_plan",
    "apply_to_owners",
    "broker_life",
    "plan_activate",
    "plan_cycle",
    "plan_drain",
    "plan_placement",
    "plan_split",
    "plan_unload",
    "predict",
    "reassign",
    "screen_unloads",
    "split_child_loads",
    "split_children",
    "unload_destinations",
]
