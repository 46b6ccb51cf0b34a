import threading

import pytest

from pool import Pool


def _blocked_pool():
    """A one-worker pool whose worker is busy until the returned event is set."""
    p = Pool(1)
    gate, started = threading.Event(), threading.Event()

    def blocker():
        started.set()
        gate.wait(5)
        return "first"

    first = p.submit(blocker)
    assert started.wait(2)
    return p, gate, first


def test_queued_tasks_run_after_shutdown():
    p, gate, first = _blocked_pool()
    rest = [p.submit(lambda n=n: n * 10) for n in range(3)]
    p.shutdown(wait=False)
    gate.set()
    p.shutdown(wait=True)
    assert first.result(timeout=0.5) == "first"
    assert [f.result(timeout=0.5) for f in rest] == [0, 10, 20]


def test_cancel_pending():
    p, gate, first = _blocked_pool()
    rest = [p.submit(lambda: "never") for _ in range(2)]
    p.shutdown(wait=False, cancel_pending=True)
    gate.set()
    p.shutdown(wait=True)
    assert first.result(timeout=0.5) == "first"
    assert all(f.cancelled() for f in rest)


def test_submit_after_shutdown():
    p = Pool(1)
    p.shutdown()
    with pytest.raises(RuntimeError):
        p.submit(int, "1")
    p.shutdown()


def test_wait_joins_workers():
    p = Pool(2)
    p.submit(int, "1").result(timeout=1)
    p.shutdown(wait=True)
    assert not any(t.is_alive() for t in p._threads)


def test_context_manager():
    with Pool(2) as p:
        futs = [p.submit(str, n) for n in range(4)]
    assert [f.result(timeout=0.5) for f in futs] == ["0", "1", "2", "3"]
    with pytest.raises(RuntimeError):
        p.submit(str, 1)
