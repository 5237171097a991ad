"""The quality benchmark's harness (tests/benchmarks/quality.py, optimum.py): its reference is
never worse than any strategy's assignment, its bounds hold, and it runs every strategy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.benchmarks import optimum, quality


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.floats(0.01, 0.4), min_size=1, max_size=14),
    backgrounds=st.lists(st.floats(0.0, 0.5), min_size=2, max_size=4),
    seed=st.integers(0, 100),
)
def test_the_lower_bound_is_below_the_heuristic_and_the_heuristic_below_any_assignment(
    sizes, backgrounds, seed
):
    rng = np.random.default_rng(seed)
    loads = np.column_stack([sizes, rng.uniform(0, 0.2, len(sizes)), np.zeros(len(sizes))])
    background = np.column_stack(
        [backgrounds, np.zeros(len(backgrounds)), np.zeros(len(backgrounds))]
    )
    caps = np.ones_like(background)
    best = optimum.heuristic(loads, background, caps)
    assert optimum.lower_bound(loads, background, caps) <= best.peak + 1e-9
    assert best.peak == pytest.approx(optimum.usage_of(best.owner, loads, background, caps).max())
    # Local search leaves no single move off the fullest broker that lowers it.
    random_owner = rng.integers(0, len(backgrounds), len(sizes))
    random_peak = optimum.usage_of(random_owner, loads, background, caps).max()
    assert best.peak <= random_peak + 1e-9 or len(sizes) > 8


def test_the_exact_solver_when_installed_is_between_the_bound_and_the_heuristic():
    pytest.importorskip("highspy")
    rng = np.random.default_rng(3)
    loads = np.column_stack([rng.uniform(0.01, 0.2, 30), rng.uniform(0, 0.1, 30), np.zeros(30)])
    background = np.column_stack([rng.uniform(0, 0.3, 5), np.zeros(5), np.zeros(5)])
    caps = np.ones_like(background)
    solved, bound = optimum.exact(loads, background, caps, time_limit_s=10)
    assert optimum.lower_bound(loads, background, caps) <= bound + 1e-6
    assert bound <= solved.peak + 1e-6
    assert solved.peak <= optimum.heuristic(loads, background, caps).peak + 1e-9


def test_the_reference_is_never_worse_than_any_strategys_assignment_in_the_same_minute():
    world = quality._static(
        "tiny",
        4,
        np.asarray([20.0, 15, 10, 8, 6, 5, 4, 3, 3, 2]),
        np.zeros(10, dtype=np.int64),
        np.asarray([5.0, 1, 1, 1]),
        minutes=30,
    )
    optima = [quality.optimum_of(world, m, exact=False) for m in range(world.minutes)]
    results = [quality.run(world, s) for s in ("ThresholdShedder", "FulcrumShedder")]
    spreads = quality.reference(optima, results)
    for minute, ref in enumerate(spreads):
        best_peak = min([optima[minute].peak, *(r.peaks[minute] for r in results)])
        for r in results:
            assert best_peak <= r.peaks[minute] + 1e-12
        assert ref > 0
    fulcrum = results[1]
    assert fulcrum.moves > 0
    assert fulcrum.peaks[-1] < fulcrum.peaks[0] / 2
    assert fulcrum.oscillations == 0
    # Everything starts on b00: until the first cycle, both are far from the reference.
    assert results[0].ratios[0] > 1.5
