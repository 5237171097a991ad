"""balancer.optimum: the bound and the heuristic the benchmark and the gauge compare against."""

import numpy as np
import pytest

from balancer.optimum import EXHAUSTIVE, heuristic, lower_bound, usage_of

ONE = np.ones((2, 1))


def test_lpt_spreads_the_biggest_first_and_the_bound_is_reached():
    loads = np.asarray([[0.5], [0.3], [0.2]])
    best = heuristic(loads, np.zeros((2, 1)), ONE)
    assert best.peak == pytest.approx(0.5)
    assert lower_bound(loads, np.zeros((2, 1)), ONE) == pytest.approx(0.5)
    assert best.max_over_mean == pytest.approx(1.0)


def test_local_search_moves_and_swaps_off_the_fullest_broker():
    # LPT puts 0.4 and 0.2 apart, then 0.35 beside 0.2, then 0.3 ... ; the search improves it.
    loads = np.asarray([[0.4], [0.35], [0.3], [0.2], [0.15]])
    background = np.asarray([[0.0], [0.05]])
    lpt_only = heuristic(loads, background, ONE, iterations=0)
    searched = heuristic(loads, background, ONE)
    assert searched.peak <= lpt_only.peak
    assert searched.peak == pytest.approx(0.75)  # 0.4 + 0.35 | 0.05 + 0.3 + 0.2 + 0.15 = 0.7
    assert searched.usage.tolist() == pytest.approx(
        usage_of(searched.owner, loads, background, ONE).tolist()
    )


def test_a_swap_when_no_move_helps():
    # b0: 0.5 + 0.1 (LPT), b1: 0.45 + 0.0...; only trading 0.1 for 0.05 lowers the peak.
    loads = np.asarray([[0.5], [0.45], [0.1], [0.05]])
    owner_start = heuristic(loads, np.zeros((2, 1)), ONE, iterations=0)
    best = heuristic(loads, np.zeros((2, 1)), ONE)
    assert best.peak <= owner_start.peak
    assert best.peak == pytest.approx(0.55)


def test_nothing_to_place_and_a_resource_that_does_not_count():
    empty = np.zeros((0, 2))
    background = np.asarray([[0.2, 5.0], [0.1, 1.0]])
    caps = np.asarray([[1.0, np.inf], [1.0, np.inf]])
    assert lower_bound(empty, background, caps) == pytest.approx(0.2)
    best = heuristic(empty, background, caps)
    assert best.peak == pytest.approx(0.2)
    assert heuristic(np.zeros((3, 1)), np.zeros((2, 1)), ONE).max_over_mean == 0.0


def test_local_search_from_a_given_assignment_moves_bundles_off_the_fullest_broker():
    loads = np.asarray([[0.3], [0.3], [0.2], [0.2]])
    start = np.zeros(4, dtype=np.int64)  # everything on broker 0: 1.0 and 0.0
    one_step = heuristic(loads, np.zeros((2, 1)), ONE, start=start, iterations=1)
    assert one_step.peak == pytest.approx(0.7)  # one move: a 0.3 bundle across
    best = heuristic(loads, np.zeros((2, 1)), ONE, start=start)
    assert best.peak == pytest.approx(0.5)
    assert start.tolist() == [0, 0, 0, 0]  # the start is not changed in place


def test_a_swap_from_a_given_assignment_when_no_move_helps():
    # b0: 0.5 + 0.1 = 0.6, b1: 0.45 + 0.05 = 0.5. No move lowers 0.6; trading 0.1 for 0.05 does.
    loads = np.asarray([[0.5], [0.1], [0.45], [0.05]])
    best = heuristic(loads, np.zeros((2, 1)), ONE, start=np.asarray([0, 0, 1, 1]))
    assert best.peak == pytest.approx(0.55)
    owner = best.owner.tolist()
    assert owner[0] == owner[3] != owner[1] == owner[2]  # 0.5 + 0.05 | 0.1 + 0.45


def test_a_fullest_broker_with_no_bundle_has_nothing_to_give():
    """The fullest broker is full of its own background: no move and no swap off it."""
    loads = np.asarray([[0.1], [0.1], [0.1]])
    background = np.asarray([[0.9], [0.0]])
    stays = heuristic(loads, background, ONE, start=np.ones(3, dtype=np.int64))
    assert stays.owner.tolist() == [1, 1, 1]
    assert stays.peak == pytest.approx(0.9)


def test_few_assignments_are_all_tried():
    """Two brokers and three bundles: 8 assignments, the best of them is the answer, even where
    only moving a bundle for two others reaches it (tests/test_quality_harness.py)."""
    loads = np.asarray([[0.3125], [0.1875], [0.1875]])
    background = np.asarray([[0.125], [0.0625]])
    best = heuristic(loads, background, ONE)
    assert best.peak == pytest.approx(0.4375)
    assert EXHAUSTIVE >= 2**3


def test_too_many_assignments_to_try_start_from_lpt():
    """Two brokers and 13 bundles (8,192 assignments, over EXHAUSTIVE): largest first, each onto
    the broker it leaves least full, reaches the bound here before any search step."""
    loads = np.asarray([[0.2]] + [[0.1]] * 12)
    assert 2 ** len(loads) > EXHAUSTIVE
    lpt = heuristic(loads, np.zeros((2, 1)), ONE, iterations=0)
    assert lpt.peak == pytest.approx(0.7)
    assert lpt.peak == pytest.approx(lower_bound(loads, np.zeros((2, 1)), ONE))
    assert lpt.owner[0] == 0  # the largest first, onto the first of two empty brokers
    assert sorted(np.bincount(lpt.owner).tolist()) == [6, 7]
