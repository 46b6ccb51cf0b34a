"""The channel test outcomes travel from the grading sandbox to the harness.

    channel = ReportChannel()                  a pipe; the write end is passed to the child
    run_command(argv + pytest_args(), env={..., **channel.env()}, pass_fds=channel.pass_fds)
    report = channel.collect()                 the records, bounded, after the process ended

The write end is inherited by the test process (through bubblewrap: an open descriptor, not a
path; nothing inside the sandbox can open it by name), the read end stays with the harness. The
reporter (``reporter_plugin/ledger_grading_reporter.py``, a pytest plugin that imports nothing of
the harness) writes length-prefixed JSON frames. A hostile writer cannot crash or hang the
reader: a frame longer than ``MAX_FRAME`` or not JSON ends the parse (``malformed``), more than
``MAX_BYTES`` in all or ``MAX_RECORDS`` records sets ``overflow`` and the rest is drained and
dropped; reading stops ``DRAIN_S`` after the process ended even if something still holds the
write end. ``python -c`` completion signals run under ``signal_argv``: the same channel carries
one ``end`` record written after the signal's code ran to its end.
"""

from __future__ import annotations

import json
import os
import select
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLUGIN_DIR = str(Path(__file__).resolve().parent / "reporter_plugin")
PLUGIN_NAME = "ledger_grading_reporter"
FD_ENV = "LEDGER_REPORT_FD"
MAX_FRAME = 256 * 1024  # bytes of one record
MAX_BYTES = 16 * 1024 * 1024  # bytes read from one run
MAX_RECORDS = 50_000
MAX_IDS = 20_000  # collected ids kept
DRAIN_S = 2.0  # how long the reader waits for EOF once the process is gone
_OUTCOMES = frozenset({"passed", "failed", "error", "skipped"})
_PY_NAMES = frozenset({"python", "python3"})


def pytest_args() -> list[str]:
    """What the harness adds to a pytest command line: its reporter, and no cache writes."""
    return ["-p", PLUGIN_NAME, "-p", "no:cacheprovider"]


def reporter_env(fd: int) -> dict[str, str]:
    """The environment the reporter needs; no user site-packages (a graded run could write one)."""
    return {FD_ENV: str(fd), "PYTHONPATH": PLUGIN_DIR, "PYTHONNOUSERSITE": "1"}


# The wrapper a ``python -c CODE`` signal runs under: CODE runs as ``-c`` would run it (same
# sys.argv, a fresh __main__), then one end record says how it ended.
_SIGNAL_WRAPPER = r"""
import os as _o, struct as _s, sys as _y
_fd = int(_o.environ.pop("LEDGER_REPORT_FD")); _o.set_inheritable(_fd, False)
_code = _o.environ.pop("LEDGER_SIGNAL_CODE"); _w = _o.write
def _end(status):
    b = ('{"k":"end","exitstatus":%d}' % status).encode()
    try: _w(_fd, _s.pack(">I", len(b)) + b)
    except OSError: pass
import __main__ as _m
_g = {"__name__": "__main__", "__builtins__": __builtins__, "__doc__": None}
try:
    exec(compile(_code, "<string>", "exec"), _g)
except SystemExit as _e:
    _c = _e.code
    _end(0 if _c is None else _c if isinstance(_c, int) else 1)
    raise
except BaseException:
    _end(1)
    raise
_end(0)
"""


def python_c_code(argv: Sequence[str]) -> str | None:
    """The code of a ``python -c CODE ...`` command line; None for any other command."""
    if len(argv) >= 3 and (os.path.basename(argv[0]) in _PY_NAMES
                           or os.path.basename(argv[0]).startswith("python3.")) and argv[1] == "-c":
        return argv[2]
    return None


def signal_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(argv, extra env) running a ``python -c`` signal under the end-record wrapper."""
    code = python_c_code(argv)
    if code is None:
        raise ValueError("not a python -c command")
    return [argv[0], "-c", _SIGNAL_WRAPPER, *argv[3:]], {"LEDGER_SIGNAL_CODE": code,
                                                         "PYTHONNOUSERSITE": "1"}


@dataclass
class Report:
    """What arrived over one run's channel (bounded)."""

    started: bool = False
    ended: bool = False
    exitstatus: int | None = None
    collected: list[str] = field(default_factory=list)
    collect_errors: list[dict[str, str]] = field(default_factory=list)
    tests: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> outcome, reported, message
    duplicates: int = 0
    records: int = 0
    bytes: int = 0
    malformed: str | None = None  # why the parse stopped
    overflow: bool = False
    after_end: int = 0  # records that arrived after the end record
    patched: list[str] = field(default_factory=list)  # pytest internals replaced during the run
    runs: list[dict[str, Any]] = field(default_factory=list)  # a signal series' runs (signal_series)

    def summary(self) -> dict[str, Any]:
        return {"started": self.started, "ended": self.ended, "exitstatus": self.exitstatus,
                "records": self.records, "bytes": self.bytes,
                "collected": len(self.collected), "collect_errors": len(self.collect_errors),
                "duplicates": self.duplicates, "after_end": self.after_end,
                "patched": list(self.patched[:20]),
                "malformed": self.malformed, "overflow": self.overflow}


def _text(value: Any, limit: int = 500) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _take(rep: Report, rec: Any) -> None:
    """Add one decoded record to ``rep``; records of the wrong shape count as malformed."""
    if not isinstance(rec, dict):
        rep.malformed = "a record is not a JSON object"
        return
    kind = rec.get("k")
    if rep.ended:
        rep.after_end += 1
        return
    if kind == "start":
        rep.started = True
    elif kind == "collected":
        ids = rec.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            rep.malformed = "collected ids are not strings"
            return
        room = MAX_IDS - len(rep.collected)
        rep.collected.extend(i[:1000] for i in ids[:max(room, 0)])
        if len(ids) > room:
            rep.overflow = True
    elif kind == "collecterror":
        if len(rep.collect_errors) < 100:
            rep.collect_errors.append({"id": _text(rec.get("id"), 1000),
                                       "message": _text(rec.get("message"))})
    elif kind == "test":
        tid, outcome, said = rec.get("id"), rec.get("outcome"), rec.get("reported")
        if not isinstance(tid, str) or outcome not in _OUTCOMES or said not in _OUTCOMES:
            rep.malformed = "a test record has no id or an unknown outcome"
            return
        if tid in rep.tests:
            rep.duplicates += 1
        if len(rep.tests) >= MAX_IDS and tid not in rep.tests:
            rep.overflow = True
            return
        rep.tests[tid[:1000]] = {"outcome": outcome, "reported": said,
                                 "message": _text(rec.get("message"))}
    elif kind == "patched":
        names = rec.get("names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            rep.malformed = "patched names are not strings"
            return
        rep.patched.extend(n[:200] for n in names[:max(0, 100 - len(rep.patched))])
    elif kind == "run":
        run = _series_run(rec)
        if run is None:
            rep.malformed = "a series run record of the wrong shape"
            return
        if len(rep.runs) < 100:
            rep.runs.append(run)
    elif kind == "end":
        status = rec.get("exitstatus")
        rep.ended = True
        rep.exitstatus = status if isinstance(status, int) and not isinstance(status, bool) else None
    else:
        rep.malformed = "a record of an unknown kind"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _series_run(rec: dict[str, Any]) -> dict[str, Any] | None:
    """A signal series runner's record of one run (``ledger.sandbox.signal_series``)."""
    said = rec.get("said")
    status = said.get("exitstatus") if isinstance(said, dict) else None
    if (not _int(rec.get("turn")) or not (rec.get("exit") is None or _int(rec.get("exit")))
            or not isinstance(rec.get("timed_out"), bool)
            or not isinstance(rec.get("s"), int | float) or isinstance(rec.get("s"), bool)
            or not (said is None or (isinstance(said, dict) and _int(status)))):
        return None
    return {"turn": rec["turn"], "exit": rec["exit"], "timed_out": rec["timed_out"],
            "s": float(rec["s"]), "ended": said is not None, "exitstatus": status,
            "tail": _text(rec.get("tail"), 2000)}


def parse_frames(rep: Report, buf: bytearray, on_record: Any = None) -> None:
    """Take every whole frame off the front of ``buf`` into ``rep`` (in place)."""
    pos = 0
    while rep.malformed is None and not rep.overflow and len(buf) - pos >= 4:
        (size,) = struct.unpack_from(">I", buf, pos)
        if size > MAX_FRAME:
            rep.malformed = f"a frame of {size} bytes (limit {MAX_FRAME})"
            break
        if len(buf) - pos - 4 < size:
            break
        body = bytes(buf[pos + 4:pos + 4 + size])
        pos += 4 + size
        rep.records += 1
        if rep.records > MAX_RECORDS:
            rep.overflow = True
            break
        try:
            rec = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            rep.malformed = "a frame is not JSON"
            break
        _take(rep, rec)
        if on_record is not None and rep.malformed is None:
            on_record(rec)
    del buf[:pos]


class ReportChannel:
    """One run's pipe and the thread that reads it (see the module docstring)."""

    def __init__(self, on_record: Any = None) -> None:
        """``on_record``: called in the reader thread with each record taken (a signal series
        feeds its next job from it)."""
        self._on_record = on_record
        self._read, self._write = os.pipe()  # both close-on-exec; the child gets the write end
        self.report = Report()
        self._done = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._reader, name="grading-report", daemon=True)
        self._thread.start()

    @property
    def fd(self) -> int:
        return self._write

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._write,)

    def env(self) -> dict[str, str]:
        return reporter_env(self._write)

    def _reader(self) -> None:
        rep, buf = self.report, bytearray()
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self._read], [], [], 0.2)
                if not ready:
                    continue
                chunk = os.read(self._read, 65536)
                if not chunk:
                    break
                rep.bytes += len(chunk)
                if rep.malformed is not None or rep.overflow:
                    continue  # drained and dropped
                if rep.bytes > MAX_BYTES:
                    rep.overflow = True
                    continue
                buf += chunk
                parse_frames(rep, buf, self._on_record)
        except OSError:
            pass
        finally:
            if buf and rep.malformed is None and not rep.overflow:
                rep.malformed = "the channel closed inside a frame"
            self._done.set()

    def collect(self, drain_s: float = DRAIN_S) -> Report:
        """The report, once the test process has ended (closes the harness's write end)."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        if not self._done.wait(drain_s):
            self._stop.set()
            self._done.wait(1.0)
            if self.report.malformed is None:
                self.report.malformed = "the channel was still open after the run ended"
        os.close(self._read)
        self._read = -1
        return self.report

    def close(self) -> None:
        """Release the pipe without reading (an error path)."""
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
        self._stop.set()
        self._done.wait(1.0)
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
