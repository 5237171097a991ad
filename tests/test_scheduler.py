"""make test's scheduler (tests/conftest.py) driven as pytest-xdist's controller drives it: the
serial group goes first to one worker whatever its size, WHOLE_FILES stay whole, and the file
that starts the PostgreSQL pass appears once every test has run but the serial ones and the few
queued behind them, not before (scripts/test-passes); and each worker's Redis database."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import SERIAL_FILES, WHOLE_FILES, serial_group_scheduling, worker_redis_url

SERIAL = sorted(SERIAL_FILES)[:2]
(WHOLE,) = WHOLE_FILES


class Worker:
    """What the scheduler calls on xdist's WorkerController."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def _config(workers: int) -> SimpleNamespace:
    options = {"tx": [f"{workers}*popen"], "dist": "loadgroup"}
    return SimpleNamespace(
        getvalue=options.__getitem__, option=SimpleNamespace(loadscopereorder=True)
    )


def _collection() -> list[str]:
    """A whole file with more tests than the serial group (xdist queues the largest group
    first; every other test is a group of its own)."""
    tests = [f"{path}::test_{i}" for path in SERIAL for i in range(2)]
    tests += [f"{WHOLE}::test_{i}" for i in range(8)]
    for n in range(6):
        tests += [f"tests/console/test_many_{n}.py::test_{i}" for i in range(10)]
    return tests


def _scheduled(tmp_path, workers: int = 2):
    done = tmp_path / "parallel-done"
    config = _config(workers)
    scheduler = serial_group_scheduling(config, None, parallel_done=str(done))
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    collection = _collection()
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return scheduler, nodes, collection, done


def _run(scheduler, workers, collection, done) -> list[int]:
    """Run the tests as xdist's workers do: each in the order it was sent, and only once the
    worker has its next or was told to stop (xdist/remote.py, ``run_one_test``). The serial
    group's last test is the longest (a stack test of minutes): it ends only when nothing else
    can run, and the file must then be there; before, never while a test that is not serial and
    not queued behind the serial group is still to run. Returns the tests in the order run."""
    last_serial = max(i for i, nodeid in enumerate(collection) if _serial(nodeid))
    ran: list[int] = []
    behind: set[int] = set()
    while True:
        startable = []
        for worker in workers:
            left = [i for i in worker.sent if i not in ran]
            if left and (len(left) > 1 or worker.shutting_down):
                startable.append((worker, left[0]))
        others = [(w, i) for w, i in startable if i != last_serial]
        if not others and not startable:
            return ran
        worker, index = others[0] if others else startable[0]
        behind_serial = index in behind
        if index == last_serial and len(workers) > 1:
            assert done.exists(), "not created while the serial group's last test ran"
        elif not _serial(collection[index]) and not behind_serial:
            assert not done.exists(), f"created with {collection[index]} still to run"
        if index == last_serial:  # what was queued behind it, on its worker, runs after it
            behind = set(worker.sent[worker.sent.index(index) + 1 :])
        scheduler.mark_test_complete(worker, index)
        ran.append(index)


def _serial(nodeid: str) -> bool:
    return nodeid.split("::")[0] in SERIAL


def test_the_serial_group_goes_first_to_one_worker(tmp_path):
    _, (first, second), collection, _ = _scheduled(tmp_path)
    serial = [i for i, nodeid in enumerate(collection) if _serial(nodeid)]
    assert first.sent[: len(serial)] == serial
    assert not set(serial) & set(second.sent)


def test_parallel_done_appears_when_only_serial_tests_are_left(tmp_path):
    scheduler, workers, collection, done = _scheduled(tmp_path)
    ran = _run(scheduler, workers, collection, done)
    assert sorted(ran) == list(range(len(collection)))
    assert done.exists()
    whole = {i for i, nodeid in enumerate(collection) if nodeid.startswith(WHOLE)}
    assert len([w for w in workers if whole <= set(w.sent)]) == 1


def test_one_worker_runs_every_test_the_serial_ones_first(tmp_path):
    """Its last serial test starts (a worker starts a test only once it has the next: one is
    sent with it), and the file appears at the end."""
    scheduler, workers, collection, done = _scheduled(tmp_path, workers=1)
    ran = _run(scheduler, workers, collection, done)
    assert sorted(ran) == list(range(len(collection)))
    serial = [i for i, nodeid in enumerate(collection) if _serial(nodeid)]
    assert ran[: len(serial)] == serial
    assert done.exists()


def test_each_worker_has_its_redis_database_up_to_the_server_s_count(monkeypatch):
    """Worker gwN takes the URL's database plus N; beyond the server's databases (16, or what
    make test started it with: FULCRUM_TEST_REDIS_DATABASES) it is refused, saying why."""
    monkeypatch.delenv("FULCRUM_TEST_REDIS_DATABASES", raising=False)
    assert worker_redis_url("redis://127.0.0.1:6391/4", "gw3") == "redis://127.0.0.1:6391/7"
    with pytest.raises(ValueError, match="no Redis database 16 for xdist worker gw12"):
        worker_redis_url("redis://127.0.0.1:6391/4", "gw12")
    monkeypatch.setenv("FULCRUM_TEST_REDIS_DATABASES", "24")
    assert worker_redis_url("redis://127.0.0.1:6391/12", "gw11") == "redis://127.0.0.1:6391/23"
