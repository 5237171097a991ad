"""Read the real traces: Azure Functions invocations per minute, NAB EC2 CPU series."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

AZURE_1350 = Path("azure-functions-2019/1350/1350_inv.csv")
NAB_AWS = Path("nab/realAWSCloudwatch")


@dataclass(frozen=True)
class FunctionTrace:
    """Invocations per minute: ``counts[function, minute]`` (int), function ids in file order."""

    functions: tuple[str, ...]
    counts: np.ndarray


def load_functions(traces_dir: Path) -> FunctionTrace:
    """Load the 1350-function Azure sample (1440 minutes).

    Raises:
        FileNotFoundError: the trace file is missing.
        ValueError: a row is not an id followed by whole invocation counts.
    """
    with open(traces_dir / AZURE_1350, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        first = header.index("minute_1")
        ids, rows = [], []
        for line_no, row in enumerate(reader, start=2):
            try:
                rows.append([int(v) for v in row[first:]])
            except ValueError:
                raise ValueError(
                    f"{AZURE_1350}:{line_no}: invocation counts must be integers"
                ) from None
            ids.append(row[0])
    return FunctionTrace(tuple(ids), np.asarray(rows, dtype=np.int64))


def load_cpu_series(traces_dir: Path, name: str) -> np.ndarray:
    """A NAB series' values (percent, one per 5 minutes), in file order."""
    with open(traces_dir / NAB_AWS / f"{name}.csv", newline="") as handle:
        return np.asarray([float(row["value"]) for row in csv.DictReader(handle)], dtype=np.float64)


def default_traces_dir() -> Path:
    """``FULCRUM_TRACES_DIR``, else the traces shipped in the repository's ``data/traces``."""
    return Path(
        os.environ.get(
            "FULCRUM_TRACES_DIR", Path(__file__).resolve().parents[2] / "data" / "traces"
        )
    )
