"""make test's scheduler (tests/conftest.py) driven as pytest-xdist's controller drives it: the
serial group goes first to one worker whatever its size, WHOLE_FILES stay whole, and the file
that starts the PostgreSQL pass appears once the last test that is not serial has run, not
before (scripts/test-passes)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import SERIAL_FILES, WHOLE_FILES, serial_group_scheduling

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


def _config() -> SimpleNamespace:
    options = {"tx": ["2*popen"], "dist": "loadgroup"}
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


def _scheduled(tmp_path):
    done = tmp_path / "parallel-done"
    scheduler = serial_group_scheduling(_config(), None, parallel_done=str(done))
    workers = [Worker("gw0"), Worker("gw1")]
    collection = _collection()
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    return scheduler, workers, collection, done


def test_the_serial_group_goes_first_to_one_worker(tmp_path):
    _, (first, second), collection, _ = _scheduled(tmp_path)
    serial = [i for i, nodeid in enumerate(collection) if nodeid.split("::")[0] in SERIAL]
    assert first.sent[: len(serial)] == serial
    assert not set(serial) & set(second.sent)


def test_parallel_done_appears_when_only_serial_tests_are_left(tmp_path):
    """Each worker runs what it was sent in order, the serial one stuck on the serial group's
    last test (a stack test of minutes); the scheduler sends more as tests end."""
    scheduler, workers, collection, done = _scheduled(tmp_path)
    last_serial = max(i for i, nodeid in enumerate(collection) if nodeid.split("::")[0] in SERIAL)
    ran: list[int] = []
    while True:
        runnable = [
            (worker, index)
            for worker in workers
            for index in [next((i for i in worker.sent if i not in ran), None)]
            if index is not None and index != last_serial
        ]
        if not runnable:
            break
        worker, index = runnable[0]
        assert not done.exists(), f"created with {collection[index]} still to run"
        scheduler.mark_test_complete(worker, index)
        ran.append(index)
    assert done.exists()
    assert sorted(ran) == [i for i in range(len(collection)) if i != last_serial]
    whole = {i for i, nodeid in enumerate(collection) if nodeid.startswith(WHOLE)}
    assert len([w for w in workers if whole <= set(w.sent)]) == 1
