"""A small thread pool with a graceful shutdown."""

import queue
import threading
from concurrent.futures import Future

_STOP = object()


class Pool:
    def __init__(self, workers=2):
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._tasks = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for t in self._threads:
            t.start()

    def submit(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on a worker; returns a concurrent.futures.Future."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            fut = Future()
            self._tasks.put((fut, fn, args, kwargs))
            return fut

    def _work(self):
        while True:
            item = self._tasks.get()
            if item is _STOP:
                return
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                fut.set_exception(exc)

    def shutdown(self, wait=True, cancel_pending=False):
        """Accept no more work; run (or cancel) what is queued; optionally wait for the workers."""
        with self._lock:
            first = not self._closed
            self._closed = True
            if cancel_pending:
                drained = []
                while True:
                    try:
                        drained.append(self._tasks.get_nowait())
                    except queue.Empty:
                        break
                for item in drained:
                    if item is not _STOP:
                        item[0].cancel()
            if first or cancel_pending:
                for _ in self._threads:
                    self._tasks.put(_STOP)
        if wait:
            for t in self._threads:
                t.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown(wait=True)
