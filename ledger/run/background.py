"""One call run in a thread while the attempt waits on a child process.

An attempt spends most of its time waiting on children (git, the public tests, the agent, the
hidden tests). Work that does not depend on a child's result (copying the agent's ``.git``,
working out the agent's sandbox and the grading tree while the public tests run) runs beside it
here, so the harness adds less time between children. The attempt's
thread always ``wait``s (or takes the ``result``) before it goes on to what depends on the work
or cleans up, so nothing runs past the attempt.

Only work that waits itself (files, children) or runs while the attempt's thread waits on a
child gains from this: two threads of Python code take turns, they do not run at once. The
worker lowers the interpreter's switch interval (``executors/local.py``) so that the attempt's
thread gets it back within 0.2 ms.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Background:
    """``fn(*args, **kwargs)`` started in a daemon thread; ``result()`` waits for it."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None

        def work() -> None:
            try:
                self._value = fn(*args, **kwargs)
            except BaseException as exc:  # handed to result(), in the attempt's thread
                self._error = exc

        self._thread = threading.Thread(target=work, name="ledger-attempt-background", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait until the call has returned or raised (what it raised is kept for result)."""
        self._thread.join()

    def result(self) -> Any:
        """What the call returned, once it has; what it raised is raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value
