"""The harness's own pytest reporter: every outcome travels to the harness over an inherited pipe.

Loaded explicitly by the harness (``-p ledger_grading_reporter``, this folder on PYTHONPATH, read
only in the grading sandbox); never found by pytest on its own. ``LEDGER_REPORT_FD`` names the
write end of a pipe that the harness reads from outside the sandbox. Each record is one frame:
a 4-byte big-endian length, then that many bytes of UTF-8 JSON (an object with a ``k`` key):

    {"k": "start", "pytest": "8.3.2"}                      pytest_configure
    {"k": "collected", "ids": [...]}                        pytest_collection_finish (chunks)
    {"k": "collecterror", "id": ..., "message": ...}        a module that failed to collect
    {"k": "test", "id": ..., "outcome": ..., "reported": ..., "message": ...}
    {"k": "patched", "names": [...]}                        pytest's runner was replaced
    {"k": "end", "exitstatus": N, "failed": N, "collected": N}   pytest_unconfigure, last

Under the harness's grading capture (``LEDGER_TRACE_MARK``, taken out of the environment when
this module is imported), the end of collection is marked in the trace: two failed opens of
``/proc/self/ledger-mark-<nonce>-collected`` / ``-warmed`` around a read of every collected file
into ``linecache`` (ledger/run/attempt/gradetrace.py says why).

``outcome`` is worked out here from each phase's exception (``call.excinfo``), ``reported`` is
what pytest's report says; they differ when something rewrote pytest's reports. The reporter
takes its references to ``os.write`` and ``json.dumps`` when it is imported (before any graded
code), marks the descriptor close-on-exec (programs the tests start do not inherit it), and
bounds what it writes. It notes the identity of the pytest and pluggy internals that run a test
and make its report (and of its own functions) when pytest is configured, before any graded code
is imported, and reports any that were replaced since (``patched``) after each test and at the
end. Graded code in the same interpreter can still write to the descriptor:
that residual is documented in docs/ATTESTATION.md. This file imports nothing of the harness and
runs on any Python 3.8+ with pytest 7+.
"""

import json as _json
import os as _os
import struct as _struct
from contextlib import suppress as _suppress

_write = _os.write
_dumps = _json.dumps
_pack = _struct.pack
MAX_MESSAGE = 500  # characters of a failure message
IDS_PER_FRAME = 256
PHASES = ("setup", "call", "teardown")

# (module, class or None, attribute): what runs a test and turns its exception into a report
WATCHED = (
    ("_pytest.runner", "CallInfo", "from_call"),
    ("_pytest.runner", None, "call_and_report"),
    ("_pytest.runner", None, "call_runtest_hook"),
    ("_pytest.runner", None, "runtestprotocol"),
    ("_pytest.runner", None, "check_interactive_exception"),
    ("_pytest.reports", "TestReport", "from_item_and_call"),
    ("_pytest.reports", "BaseReport", "passed"),
    ("_pytest.reports", "BaseReport", "failed"),
    ("_pytest.python", "Function", "runtest"),
    ("_pytest.python", None, "pytest_pyfunc_call"),
    ("_pytest.main", "Session", "perform_collect"),
    ("pluggy._callers", None, "_multicall"),
    ("pluggy._hooks", "HookCaller", "__call__"),
    ("pluggy._manager", "PluginManager", "_hookexec"),
)

_fd = None
_mark = _os.environ.pop("LEDGER_TRACE_MARK", None)  # taken before any graded code is imported
_session = None
_seen = {}  # watched name -> the object it held when pytest was configured
_reported_patched = set()
_items = {}  # nodeid -> {"outcome": ..., "reported": ..., "message": ...}


def _open():
    global _fd
    text = _os.environ.pop("LEDGER_REPORT_FD", None)
    if text is None or not text.isdigit():
        return
    _fd = int(text)
    try:
        _os.set_inheritable(_fd, False)
    except OSError:
        _fd = None


def _send(record):
    if _fd is None:
        return
    body = _dumps(record, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    data = _pack(">I", len(body)) + body
    try:
        while data:
            n = _write(_fd, data)
            data = data[n:]
    except OSError:
        pass


def _message(excinfo):
    try:
        text = excinfo.exconly()
    except Exception:  # an exception whose str() raises
        text = type(excinfo.value).__name__
    return text.strip().splitlines()[0][:MAX_MESSAGE] if text.strip() else ""


def _lookup(module, cls, attr):
    import sys
    mod = sys.modules.get(module)
    holder = getattr(mod, cls, None) if cls is not None else mod
    if holder is None:
        return None
    return vars(holder).get(attr)


def _name(module, cls, attr):
    return ".".join(p for p in (module, cls, attr) if p)


_OWN = ("_send", "_open", "_message", "_phase_outcome", "_combine", "_check", "_lookup",
        "pytest_runtest_makereport", "pytest_runtest_logfinish", "pytest_unconfigure",
        "pytest_collection_finish", "pytest_collectreport", "_trace_mark", "_collected_mark")


def _snapshot():
    _seen.clear()
    for module, cls, attr in WATCHED:
        _seen[_name(module, cls, attr)] = _lookup(module, cls, attr)
    g = globals()
    for name in _OWN:
        _seen[__name__ + "." + name] = g.get(name)


def _check():
    changed = []
    g = globals()
    for module, cls, attr in WATCHED:
        name = _name(module, cls, attr)
        if _lookup(module, cls, attr) is not _seen.get(name):
            changed.append(name)
    for name in _OWN:
        if g.get(name) is not _seen.get(__name__ + "." + name):
            changed.append(__name__ + "." + name)
    new = [n for n in changed if n not in _reported_patched]
    if new:
        _reported_patched.update(new)
        _send({"k": "patched", "names": new})


def pytest_configure(config):
    _open()
    _snapshot()
    try:
        import pytest
        version = pytest.__version__
    except Exception:
        version = "?"
    _send({"k": "start", "pytest": version})


def pytest_sessionstart(session):
    global _session
    _session = session


def pytest_collectreport(report):
    if report.failed:
        _send({"k": "collecterror", "id": report.nodeid,
               "message": str(report.longrepr).strip().splitlines()[-1][:MAX_MESSAGE]
               if str(report.longrepr).strip() else ""})


def pytest_collection_finish(session):
    ids = [item.nodeid for item in session.items]
    for i in range(0, len(ids), IDS_PER_FRAME):
        _send({"k": "collected", "ids": ids[i:i + IDS_PER_FRAME]})
    if not ids:
        _send({"k": "collected", "ids": []})
    _collected_mark(session)


def _trace_mark(what):
    """A failed open the harness's tracer sees (ledger/run/attempt/gradetrace.py): nothing else."""
    with _suppress(OSError):
        _os.close(_os.open(f"/proc/self/ledger-mark-{_mark}-{what}", _os.O_RDONLY))


def _collected_mark(session):
    """Collection is over: read every collected file into linecache (pytest's own tracebacks
    and locations then never open a test file again) between two marks."""
    if not _mark or not all(c in "0123456789abcdef" for c in _mark):
        return
    _trace_mark("collected")
    import linecache
    for path in sorted({str(getattr(item, "path", None) or item.fspath) for item in session.items}):
        with _suppress(Exception):
            linecache.getlines(path)
    _trace_mark("warmed")


def _phase_outcome(call):
    """This phase's outcome from its exception alone: passed, skipped or failed."""
    if call.excinfo is None:
        return "passed", ""
    import _pytest.outcomes as outcomes
    if call.excinfo.errisinstance(outcomes.Skipped):
        return "skipped", ""
    return "failed", _message(call.excinfo)


def _combine(state, phase, outcome):
    """Fold one phase into the test's outcome: a failed setup/teardown is an error."""
    if outcome == "failed":
        return "failed" if phase == "call" else "error"
    if outcome == "skipped" and state == "passed":
        return "skipped"
    return state


try:
    import pytest as _pytest_mod
    _hookwrapper = _pytest_mod.hookimpl(hookwrapper=True, tryfirst=True)
except Exception:  # pragma: no cover - pytest is what loads this module
    def _hookwrapper(f):
        return f


@_hookwrapper
def pytest_runtest_makereport(item, call):
    result = yield
    try:
        report = result.get_result()
    except BaseException:
        report = None
    rec = _items.setdefault(item.nodeid, {"outcome": "passed", "reported": "passed",
                                          "message": ""})
    mine, message = _phase_outcome(call)
    said = getattr(report, "outcome", "failed") if report is not None else "failed"
    if mine != said and hasattr(report, "wasxfail") and said != "passed":
        mine = said  # xfail: a failure pytest turned into a skip, as the test asked
    elif mine == "passed" and said == "failed" and hasattr(report, "wasxfail"):
        mine = said  # a strict xfail that passed
    rec["outcome"] = _combine(rec["outcome"], call.when, mine)
    rec["reported"] = _combine(rec["reported"], call.when, said)
    if message and not rec["message"]:
        rec["message"] = message


def pytest_runtest_logfinish(nodeid, location):
    _check()
    rec = _items.pop(nodeid, None)
    if rec is not None:
        _send({"k": "test", "id": nodeid, **rec})


def pytest_unconfigure(config):
    _check()
    session = _session
    status = getattr(session, "exitstatus", None)
    try:
        status = int(status)
    except (TypeError, ValueError):
        status = None
    _send({"k": "end", "exitstatus": status,
           "failed": int(getattr(session, "testsfailed", 0) or 0),
           "collected": int(getattr(session, "testscollected", 0) or 0)})
