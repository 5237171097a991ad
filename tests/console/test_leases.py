"""Leases kept while their work runs (console/leases.py ``lease_kept``): renewed from a
thread, so that a short lease covers long work, and a holder that dies keeps the others out for
at most the lease's time to live."""

from __future__ import annotations

import time

from django.utils import timezone

from console.leases import lease_claim, lease_held, lease_kept


def test_a_kept_lease_outlives_its_time_to_live_while_its_work_runs(transactional_db):
    with lease_kept("work", 0.6) as lease:
        assert lease.held
        for _ in range(4):  # 1.2 s: twice the time to live
            time.sleep(0.3)
            assert not lease_claim("work", "another", timezone.now(), 0.6)
        assert not lease.lost
    # Released at the end: another claims it at once.
    assert not lease_held("work", timezone.now())
    assert lease_claim("work", "another", timezone.now(), 0.6)


def test_a_second_holder_skips_its_work(transactional_db):
    with lease_kept("work", 5.0) as first, lease_kept("work", 5.0) as second:
        assert first.held
        assert not second.held
    assert not lease_held("work", timezone.now())


def test_a_holder_that_dies_keeps_the_others_out_for_its_time_to_live_only(transactional_db):
    """A killed worker neither renews nor releases: stopping the renewal without the release
    is what its death leaves behind."""
    context = lease_kept("work", 0.6)
    lease = context.__enter__()
    assert lease.held
    lease._stop.set()  # the process is gone: no renewal, no release
    died = time.monotonic()
    while not lease_claim("work", "next", timezone.now(), 0.6):
        assert time.monotonic() - died < 1.5
        time.sleep(0.05)
    assert time.monotonic() - died <= 0.6 + 0.3  # its time to live, and a renewal period


def test_every_periodic_job_s_lease_is_at_most_two_of_its_intervals(settings):
    """A worker killed mid-job keeps its lease until it expires: each periodic job's lease (the
    tick, the Pulsar pass, the fold, the flush, the compaction) lasts at most two of its beat
    intervals, so that the next run after a kill comes within two intervals (issue 23)."""
    from console.services.pulsar import sync_lease_s
    from console.services.shedding import TICK_LEASE_S
    from console.tasks import JOB_LEASES_S

    leases = JOB_LEASES_S | {
        "console.tasks.shedding_tick": TICK_LEASE_S,
        "console.tasks.pulsar_sync": sync_lease_s(),
    }
    intervals = {
        entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }
    assert set(leases) <= set(intervals), set(leases) - set(intervals)
    for task, lease in leases.items():
        assert 0 < lease <= 2 * intervals[task], (task, lease, intervals[task])
