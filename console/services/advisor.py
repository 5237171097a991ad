"""The strategy advisor's candidates: the current config and a grid of strategies × parameters
around it, each as a cycle config document (CLI.md) for the Spark job
(``console/reports/advisor.py``) and as the config editor's draft for adopting it."""

from __future__ import annotations

from typing import Any, Final

from balancer.names import PlacementName, ShedderName
from balancer.wire import parse_cycle_config, safety_document
from console import selectors
from console.models import BalancerConfig

# The shedders with their Pulsar placement, each with Pulsar's own defaults.
PULSAR_SHEDDERS: Final = (
    ShedderName.OVERLOAD,
    ShedderName.UNIFORM_LOAD,
    ShedderName.AVG,
    ShedderName.TRANSFER,
)
THRESHOLDS_PERCENT: Final = (5, 10, 15, 20)  # loadBalancerBrokerThresholdShedderPercentage
FULCRUM_MIN_GAINS_PERCENT: Final = (1, 2, 3, 5)  # fulcrumMinGainPercentage
# The replay covers the history in windows of this many seconds, one Spark task per window and
# candidate.
WINDOW_S: Final = 3600.0


def _cycle(config: BalancerConfig, changes: dict[str, Any]) -> dict[str, Any]:
    """The cycle config document of ``config`` with the editor's ``changes`` applied."""
    parameters = {**config.parameters, **changes.get("parameters", {})}
    return {
        "strategies": {
            "shedder": changes.get("shedder", config.shedder),
            "placement": changes.get("placement", config.placement),
            "splitAlgorithm": config.split_algorithm,
        },
        "config": parameters,
        "safety": safety_document(selectors.cycle_config_get(config).safety),
    }


def advisor_candidates(config: BalancerConfig | None = None) -> list[dict[str, Any]]:
    """The grid (about 20 configs; none that runs exactly as the current one): the current one;
    FulcrumShedder at four minimum gains, each with the current and half the current hourly
    move budget (without one, no limit and 30 an hour); ThresholdShedder at four thresholds
    and Pulsar's other shedders with LeastLongTermMessageRate; Danube's rebalancer with its
    balanced assignment. Each: ``{"id", "label", "changes"}`` (the editor's draft)."""
    config = config or selectors.balancer_config_get()
    pulsar = selectors.pulsar_config_get(config)
    out: list[dict[str, Any]] = [{"label": "current config", "changes": {}}]
    budget = pulsar.fulcrum_max_moves_per_hour
    # The current hourly budget and half of it; with none (0, the default), none and 30 an hour.
    hourlies = [budget, max(1, budget // 2)] if budget > 0 else [0, 30]
    for gain in FULCRUM_MIN_GAINS_PERCENT:
        for hourly in hourlies:
            limit = f"{hourly} moves/h" if hourly else "no hourly limit"
            out.append(
                {
                    "label": f"FulcrumShedder, min gain {gain} %, {limit}",
                    "changes": {
                        "shedder": ShedderName.FULCRUM,
                        "placement": PlacementName.FULCRUM,
                        "parameters": {
                            "fulcrumMinGainPercentage": gain,
                            "fulcrumMaxMovesPerHour": hourly,
                        },
                    },
                }
            )
    for threshold in THRESHOLDS_PERCENT:
        out.append(
            {
                "label": f"ThresholdShedder, threshold {threshold} %",
                "changes": {
                    "shedder": ShedderName.THRESHOLD,
                    "placement": PlacementName.LEAST_LONG_TERM_MESSAGE_RATE,
                    "parameters": {"loadBalancerBrokerThresholdShedderPercentage": threshold},
                },
            }
        )
    for shedder in PULSAR_SHEDDERS:
        out.append(
            {
                "label": f"{shedder}, Pulsar's defaults",
                "changes": {
                    "shedder": shedder,
                    "placement": PlacementName.LEAST_LONG_TERM_MESSAGE_RATE,
                },
            }
        )
    out.append(
        {
            "label": "Danube's rebalancer, balanced assignment",
            "changes": {"shedder": ShedderName.DANUBE, "placement": PlacementName.DANUBE_BALANCED},
        }
    )
    # A candidate that runs exactly as the current config is left out.
    current = parse_cycle_config(_cycle(config, {}))
    unique = [out[0]] + [
        c for c in out[1:] if parse_cycle_config(_cycle(config, c["changes"])) != current
    ]
    return [{"id": i, **c} for i, c in enumerate(unique)]


def advisor_spec(config: BalancerConfig | None = None) -> dict[str, Any]:
    """The advisor job's input (``console/reports/advisor.py``): the loop interval, the window,
    the current config that measures, and every candidate's cycle config."""
    config = config or selectors.balancer_config_get()
    return {
        "intervalS": config.loop_interval_s,
        "windowS": WINDOW_S,
        "since": None,
        "measure": _cycle(config, {}),
        "candidates": [
            {**c, "cycle": _cycle(config, c["changes"])} for c in advisor_candidates(config)
        ],
    }
