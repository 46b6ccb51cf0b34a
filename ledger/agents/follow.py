"""An attempt's capture parsed while the agent runs: its strace log followed a line at a time and,
where the agent's box reports the agent's file opens itself, those opens merged in.

    follower = TraceFollower(log, opts, keep=box.trace_lines, post=redact, opens=capture)
    ... the agent runs: the thread parses each complete line, and drains ``capture`` each
        time the log has nothing new (every few ms) ...
    events = follower.finish(capture.finish())     the log's tail, then the last opens

``capture`` is the box's record of the command's opens (``ledger.sandbox.fanotify.CommandOpens``,
``Box.capture_opens``: the kernel's, through fanotify mount marks): anything with ``drain()``
giving records with ``ts``, ``path`` (bytes, the path in the box, resolved), ``read`` and
``written``. Both sources go through one ``EventBuilder`` (``ledger.agents.trace``) in the one
thread, so the per-attempt state (paths seen, written, the bounds, the folded reads) is shared
and the events have the same shapes whichever source saw them (``source`` says which:
``"strace"`` or ``"fanotify"``). Each open is stamped when the harness read it from the kernel's
queue, a few ms after it happened; ``fs.read.summary`` comes last, after the last opens.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ledger.agents.contracts import Event
from ledger.agents.trace import SKIP_FAILED, EventBuilder, TraceOptions
from ledger.agents.strace import iter_syscalls

_FOLLOW_CHUNK = 256 * 1024
FOLLOW_POLL_S = 0.005  # how long the follower sleeps when the log has nothing new
OPENS_SOURCE = "fanotify"


def follow_lines(path: Path, done: threading.Event, poll_s: float = FOLLOW_POLL_S,
                 idle: Callable[[], None] | None = None) -> Iterator[str]:
    """The lines of a log that another process is still writing, each once it is complete.

    Once ``done`` is set (the writer has exited), the rest of the file is read to its end,
    a last line without a newline included. Bytes are decoded per line as UTF-8 with
    ``errors="replace"``, the same text ``parse_strace_log`` reads (a newline never splits a
    UTF-8 sequence). ``idle`` is called after each chunk read and before each wait.
    """
    while not path.exists():
        if done.is_set():
            return
        if idle is not None:
            idle()
        done.wait(poll_s)
    with open(path, "rb") as fh:
        rest = b""
        while True:
            # the flag is read before the file: when it was set and a read then finds nothing,
            # everything the writer wrote has been read
            finished = done.is_set()
            chunk = fh.read(_FOLLOW_CHUNK)
            if chunk:
                rest += chunk
                *lines, rest = rest.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace") + "\n"
                if idle is not None:
                    idle()
                continue
            if finished:
                if rest:
                    yield rest.decode("utf-8", "replace")
                return
            if idle is not None:
                idle()
            done.wait(poll_s)


class TraceFollower:
    """Parses an attempt's strace log in a thread while the agent runs (``follow_lines`` into an
    ``EventBuilder``), so that only the log's tail is left to parse once the tracer has exited;
    with ``opens``, the box's reported opens too (module docstring).

    ``keep``: a filter over the log's lines (the box's ``trace_lines`` drops the box's own
    set-up); ``post``: applied to each event in the thread (the caller's redaction). Without
    ``opens`` the events are those ``parse_strace_log`` gives for the finished log, in the same
    order; what a read keeps is decided shortly after the read (``ledger.agents.trace``).
    """

    def __init__(self, path: Path, opts: TraceOptions,
                 keep: Callable[[Iterable[str]], Iterable[str]] | None = None,
                 post: Callable[[Event], Event] | None = None, opens: Any = None) -> None:
        self._path = path
        self._keep = keep
        self._post = post
        self._opens = opens
        self._tail: Sequence[Any] = ()
        self._builder = EventBuilder(opts)
        self._done = threading.Event()
        self._events: list[tuple[float, Event]] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="ledger-trace-follower", daemon=True)
        self._thread.start()

    def _add(self, ts: float, event: Event) -> None:
        self._events.append((ts, self._post(event) if self._post is not None else event))

    def _take(self, records: Iterable[Any]) -> None:
        opened = self._builder.opened
        for rec in records:
            for event in opened(rec.path, read=rec.read, written=rec.written, source=OPENS_SOURCE):
                self._add(rec.ts, event)

    def _idle(self) -> None:
        self._take(self._opens.drain())

    def _work(self) -> None:
        try:
            builder = self._builder
            lines: Iterable[str] = follow_lines(
                self._path, self._done, idle=self._idle if self._opens is not None else None)
            if self._keep is not None:
                lines = self._keep(lines)
            last = 0.0
            for sc in iter_syscalls(iter(lines), skip_failed=SKIP_FAILED):
                last = sc.ts
                for event in builder.events(sc):
                    self._add(sc.ts, event)
            if self._opens is not None:
                self._idle()
                self._take(self._tail)
                last = max([last, *(ts for ts, _e in self._events[-1:])])
            summary = builder.summary()
            if summary is not None:
                self._add(last, summary)
        except BaseException as exc:  # handed to finish(), in the attempt's thread
            self._error = exc

    def finish(self, tail: Sequence[Any] = ()) -> list[tuple[float, Event]]:
        """The events of the whole log, then of ``tail`` (the opens the box's capture had left
        once every process of the box ended); call once the tracer has exited."""
        self._tail = tail
        self._done.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._events

    def abandon(self, timeout: float = 5.0) -> None:
        """Stop following (the attempt is being torn down); the events are dropped."""
        self._done.set()
        self._thread.join(timeout)


__all__ = ["FOLLOW_POLL_S", "OPENS_SOURCE", "TraceFollower", "follow_lines"]
