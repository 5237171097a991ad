"""The exact optimum for the quality benchmark: the mixed-integer program solved by HiGHS
(``highspy``, the ``bench`` extra), with a time limit; the bound and the heuristic are the
balancer's (``balancer.optimum``)."""

from __future__ import annotations

import numpy as np

from balancer.optimum import Assignment, heuristic, lower_bound, usage_of

__all__ = ["Assignment", "exact", "heuristic", "lower_bound", "usage_of"]


def exact(
    loads: np.ndarray, background: np.ndarray, caps: np.ndarray, *, time_limit_s: float = 20.0
) -> tuple[Assignment, float] | None:
    """The optimum by HiGHS (the MIP's best assignment and its proven lower bound), or None
    when highspy is not installed."""
    try:
        import highspy
    except ImportError:
        return None
    n, b = len(loads), len(background)
    r = loads.shape[1]
    start = heuristic(loads, background, caps)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", time_limit_s)
    h.setOptionValue("mip_rel_gap", 1e-4)
    inf = highspy.kHighsInf
    # Columns: x[i, j] (n × b binaries), then t.
    count = n * b + 1
    lower = np.zeros(count)
    upper = np.ones(count)
    upper[-1] = inf
    cost = np.zeros(count)
    cost[-1] = 1.0
    h.addVars(count, lower, upper)
    h.changeColsCost(count, np.arange(count, dtype=np.int32), cost)
    h.changeColsIntegrality(
        n * b,
        np.arange(n * b, dtype=np.int32),
        np.full(n * b, highspy.HighsVarType.kInteger, dtype=np.uint8),
    )
    for i in range(n):  # every bundle on exactly one broker
        idx = np.arange(i * b, (i + 1) * b, dtype=np.int32)
        h.addRow(1.0, 1.0, b, idx, np.ones(b))
    for j in range(b):  # background + load ≤ t × capacity, per resource
        idx = np.append(np.arange(j, n * b, b, dtype=np.int32), np.int32(n * b))
        for k in range(r):
            values = np.append(loads[:, k] / caps[j, k], -1.0)
            h.addRow(-inf, -background[j, k] / caps[j, k], n + 1, idx, values)
    solution = highspy.HighsSolution()
    values = np.zeros(count)
    values[start.owner + np.arange(n) * b] = 1.0
    values[-1] = start.peak
    solution.col_value = values.tolist()
    solution.value_valid = True
    h.setSolution(solution)
    h.run()
    info = h.getInfo()
    x = np.asarray(h.getSolution().col_value[: n * b]).reshape(n, b)
    owner = np.argmax(x, axis=1)
    found = Assignment(owner, usage_of(owner, loads, background, caps))
    best = found if found.peak <= start.peak else start
    return best, float(info.mip_dual_bound)
