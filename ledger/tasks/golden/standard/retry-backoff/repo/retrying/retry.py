"""Retry a call that may fail."""

import time


def retry(func, attempts=3, delay=0.1, backoff=2.0, exceptions=(Exception,), sleep=time.sleep):
    """Call ``func()`` until it succeeds, at most ``attempts`` times; return its result."""
    last = None
    for _ in range(attempts):
        try:
            return func()
        except Exception as exc:
            last = exc
            sleep(delay)
    raise last
