"""Retry a call that may fail."""

import time


def retry(func, attempts=3, delay=0.1, backoff=2.0, exceptions=(Exception,), sleep=time.sleep):
    """Call ``func()`` until it succeeds, at most ``attempts`` times; return its result."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    wait = delay
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except exceptions:
            if attempt == attempts:
                raise
        sleep(wait)
        wait *= backoff
    raise AssertionError("unreachable")
