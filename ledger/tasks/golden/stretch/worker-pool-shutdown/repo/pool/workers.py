"""A small thread pool."""

import queue
import threading
from concurrent.futures import Future


class Pool:
    def __init__(self, workers=2):
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._tasks = queue.Queue()
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on a worker; returns a concurrent.futures.Future."""
        fut = Future()
        self._tasks.put((fut, fn, args, kwargs))
        return fut

    def _work(self):
        while not self._stopping:
            try:
                fut, fn, args, kwargs = self._tasks.get(timeout=0.05)
            except queue.Empty:
                continue
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                fut.set_exception(exc)

    def shutdown(self, wait=True):
        """Stop the workers."""
        self._stopping = True
        if wait:
            for t in self._threads:
                t.join()
