"""The outcome channel: the harness's reporter over an inherited pipe, its framing and bounds, the
python -c end record, and the pure verdict rule (evaluators/grading.py) that decides from them.

A hostile writer on the channel must not crash or hang the reader: each case below is one way
to write badly, and the reader must come back with a bounded, flagged report.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evaluators.grading import signal_verdict, suite_verdict
from ledger.sandbox.outcomes import (
    MAX_FRAME,
    PLUGIN_DIR,
    ReportChannel,
    pytest_args,
    signal_argv,
)


def frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def run_writer(code: str, *, timeout: float = 30) -> tuple[int, object]:
    """Run ``code`` (Python) with the channel's write end as ``FD``; (exit code, report)."""
    ch = ReportChannel()
    env = {**os.environ, **ch.env()}
    proc = subprocess.Popen([sys.executable, "-c", f"FD = {ch.fd}\n" + code], env=env,
                            pass_fds=ch.pass_fds)
    code_ = proc.wait(timeout=timeout)
    return code_, ch.collect(drain_s=1.0)


# --------------------------------------------------------------------------- framing


def test_well_formed_records_arrive_in_order() -> None:
    code, rep = run_writer(textwrap.dedent("""
        import json, os, struct
        def f(o):
            b = json.dumps(o).encode(); os.write(FD, struct.pack('>I', len(b)) + b)
        f({"k": "start"}); f({"k": "collected", "ids": ["a::t1", "a::t2"]})
        f({"k": "test", "id": "a::t1", "outcome": "passed", "reported": "passed", "message": ""})
        f({"k": "test", "id": "a::t2", "outcome": "failed", "reported": "failed", "message": "x"})
        f({"k": "end", "exitstatus": 1})
    """))
    assert code == 0
    assert rep.started and rep.ended and rep.exitstatus == 1
    assert rep.collected == ["a::t1", "a::t2"]
    assert rep.tests["a::t2"]["outcome"] == "failed" and rep.malformed is None


def test_an_oversized_frame_is_refused_without_reading_it() -> None:
    """A length prefix of 4 GiB is not allocated or waited for: the parse stops, flagged."""
    t0 = time.monotonic()
    _code, rep = run_writer("import os, struct; os.write(FD, struct.pack('>I', 0xFFFFFFF0) + b'x' * 100)")
    assert rep.malformed and str(MAX_FRAME) in rep.malformed
    assert time.monotonic() - t0 < 20 and not rep.ended


def test_garbage_that_is_not_json_is_flagged() -> None:
    _code, rep = run_writer("import os, struct; os.write(FD, struct.pack('>I', 5) + b'\\xff{{{{')")
    assert rep.malformed == "a frame is not JSON"


def test_a_deeply_nested_record_does_not_crash_the_reader() -> None:
    _code, rep = run_writer(
        "import os, struct; b = b'[' * 100000 + b']' * 100000; "
        "os.write(FD, struct.pack('>I', len(b)) + b)")
    assert rep.malformed is not None and not rep.ended


def test_a_flood_is_drained_and_dropped_not_buffered() -> None:
    """64 MiB of frames: the writer is never blocked (the reader drains) and the report says
    overflow; the records after the bound are not kept."""
    code, rep = run_writer(textwrap.dedent("""
        import os, struct, json
        b = json.dumps({"k": "collected", "ids": ["x" * 900] * 200}).encode()
        chunk = (struct.pack('>I', len(b)) + b) * 64
        for _ in range(64 * 1024 * 1024 // len(chunk)):
            os.write(FD, chunk)
    """), timeout=120)
    assert code == 0 and rep.overflow
    assert rep.bytes > 16 * 1024 * 1024 and len(rep.collected) <= 20_000


def test_a_frame_cut_short_by_the_writer_is_flagged() -> None:
    _code, rep = run_writer("import os, struct; os.write(FD, struct.pack('>I', 100) + b'{\"k\"')")
    assert rep.malformed == "the channel closed inside a frame"


def test_a_writer_that_keeps_the_channel_open_does_not_hang_the_reader() -> None:
    """A daemon that outlives the test process and holds the write end: collect returns after
    its drain time, flagged."""
    ch = ReportChannel()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              pass_fds=ch.pass_fds)
    try:
        t0 = time.monotonic()
        rep = ch.collect(drain_s=0.5)
        assert time.monotonic() - t0 < 5
        assert rep.malformed == "the channel was still open after the run ended"
    finally:
        holder.kill()
        holder.wait()


def test_records_after_the_end_record_are_counted_not_taken() -> None:
    _code, rep = run_writer(textwrap.dedent("""
        import os, struct, json
        def f(o):
            b = json.dumps(o).encode(); os.write(FD, struct.pack('>I', len(b)) + b)
        f({"k": "start"}); f({"k": "end", "exitstatus": 1})
        f({"k": "test", "id": "a::t", "outcome": "passed", "reported": "passed"})
        f({"k": "end", "exitstatus": 0})
    """))
    assert rep.exitstatus == 1 and rep.after_end == 2 and not rep.tests


# --------------------------------------------------------------------------- the real reporter


def _pytest_run(tmp_path: Path, test_body: str, *extra: str) -> tuple[int, object]:
    (tmp_path / "test_x.py").write_text(textwrap.dedent(test_body))
    ch = ReportChannel()
    env = {"PATH": os.environ["PATH"], "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **ch.env()}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "test_x.py", *pytest_args(),
                           *extra], cwd=tmp_path, env=env, pass_fds=ch.pass_fds,
                          capture_output=True, timeout=120)
    return proc.returncode, ch.collect()


def test_the_reporter_reports_every_outcome_and_its_end(tmp_path: Path) -> None:
    code, rep = _pytest_run(tmp_path, """
        import pytest
        def test_ok(): assert 1
        def test_bad(): assert 0, "nope"
        @pytest.mark.skip
        def test_skip(): pass
        @pytest.fixture
        def broken(): raise RuntimeError("fixture")
        def test_err(broken): pass
        @pytest.mark.xfail
        def test_xf(): assert 0
    """)
    assert code == 1 and rep.started and rep.ended and rep.exitstatus == 1
    got = {t.split("::")[1]: r["outcome"] for t, r in rep.tests.items()}
    assert got == {"test_ok": "passed", "test_bad": "failed", "test_skip": "skipped",
                   "test_err": "error", "test_xf": "skipped"}
    assert all(r["outcome"] == r["reported"] for r in rep.tests.values())
    assert "nope" in rep.tests["test_x.py::test_bad"]["message"]


def test_the_reporter_is_not_inherited_by_programs_the_tests_start(tmp_path: Path) -> None:
    """The descriptor is close-on-exec once the reporter has it: a subprocess of a test holds
    no descriptor beyond its standard three, and the variable naming it is gone."""
    code, rep = _pytest_run(tmp_path, """
        import os, subprocess, sys
        def test_child():
            assert "LEDGER_REPORT_FD" not in os.environ
            out = subprocess.run([sys.executable, "-c", "import os; print(len(os.listdir('/proc/self/fd')))"],
                                 capture_output=True, text=True, close_fds=False).stdout
            assert int(out) == 4  # 0, 1, 2 and the listing's own
    """)
    assert rep.ended and code == 0 and rep.tests["test_x.py::test_child"]["outcome"] == "passed"


def test_pytest_reports_rewritten_in_process_are_seen_as_forged(tmp_path: Path) -> None:
    """A test module that rewrites pytest's reports to passed (the SWE-bench conftest cheat):
    the reporter's own view of each test's exception disagrees, and says so."""
    code, rep = _pytest_run(tmp_path, """
        import _pytest.reports as R
        _orig = R.TestReport.from_item_and_call.__func__
        def forged(cls, item, call):
            rep = _orig(cls, item, call)
            rep.outcome = "passed"; rep.longrepr = None
            return rep
        R.TestReport.from_item_and_call = classmethod(forged)
        def test_a(): assert 0
        def test_b(): assert 0
    """)
    assert code == 0 and rep.ended and rep.exitstatus == 0
    assert {r["outcome"] for r in rep.tests.values()} == {"failed"}
    assert {r["reported"] for r in rep.tests.values()} == {"passed"}
    v = suite_verdict(exit_code=code, timed_out=False, report=rep.summary(),
                      tests={t: (r["outcome"], r["reported"]) for t, r in rep.tests.items()},
                      expected=list(rep.tests))
    assert not v.passed and "outcome-forged" in {r for r, _ in v.anomalies}


@pytest.mark.parametrize("patch", [
    # swallow every exception a test raises: pytest and the reporter both see a pass
    "import _pytest.runner as R\n_o = R.CallInfo.from_call.__func__\n"
    "def f(cls, func, when, reraise=None):\n"
    "    c = _o(cls, func, when, reraise)\n    c.excinfo = None\n    return c\n"
    "R.CallInfo.from_call = classmethod(f)\n",
    # never run a test body at all
    "import _pytest.python as P\nP.Function.runtest = lambda self: None\n",
    # rewrite the reporter's own view of an outcome
    "import sys\nsys.modules['ledger_grading_reporter']._phase_outcome = lambda call: ('passed', '')\n",
])
def test_replacing_the_runner_in_process_is_reported(tmp_path: Path, patch: str) -> None:
    """Graded code that replaces what runs a test (so that its exception is never seen) makes
    every test pass by pytest's and the reporter's own account; the replaced names are reported,
    and the suite fails with runner-patched."""
    code, rep = _pytest_run(tmp_path, patch + "def test_a():\n    assert 0\n")
    assert rep.ended and rep.tests["test_x.py::test_a"]["outcome"] == "passed"
    assert rep.patched, rep
    v = suite_verdict(exit_code=code, timed_out=False, report=rep.summary(),
                      tests={t: (r["outcome"], r["reported"]) for t, r in rep.tests.items()},
                      expected=["test_x.py::test_a"])
    assert not v.passed and "runner-patched" in {r for r, _ in v.anomalies}


def test_an_honest_run_reports_nothing_replaced(tmp_path: Path) -> None:
    code, rep = _pytest_run(tmp_path, """
        def test_uses_monkeypatch(monkeypatch):
            import os
            monkeypatch.setattr(os, "getcwd", lambda: "/x")
            assert os.getcwd() == "/x"
    """)
    assert code == 0 and rep.ended and rep.patched == []


def test_the_plugin_imports_nothing_of_the_harness() -> None:
    text = (Path(PLUGIN_DIR) / "ledger_grading_reporter.py").read_text()
    assert "import ledger" not in text and "from ledger" not in text
    assert sorted(os.listdir(PLUGIN_DIR)) == ["ledger_grading_reporter.py"] or all(
        n in ("ledger_grading_reporter.py", "__pycache__") for n in os.listdir(PLUGIN_DIR))


def _signal(code_text: str) -> tuple[int, object]:
    argv, env_extra = signal_argv([sys.executable, "-c", code_text])
    ch = ReportChannel()
    proc = subprocess.run(argv, env={**os.environ, **env_extra, **ch.env()},
                          pass_fds=ch.pass_fds, timeout=60)
    return proc.returncode, ch.collect()


@pytest.mark.parametrize("text, exit_code, status", [
    ("assert 1 + 1 == 2", 0, 0),
    ("assert 1 + 1 == 3", 1, 1),
    ("import sys; sys.exit(3)", 3, 3),
    ("import sys; assert sys.argv[0] == '-c' and __name__ == '__main__'", 0, 0),
])
def test_python_c_signals_end_with_their_status(text: str, exit_code: int, status: int) -> None:
    code, rep = _signal(text)
    assert code == exit_code and rep.ended and rep.exitstatus == status


def test_a_python_c_signal_cut_short_by_os_exit_has_no_end_record() -> None:
    """The signal-only cheat: exit 0 under -c before the check runs. Exit code 0, no end record:
    the signal fails with no-end-record."""
    code, rep = _signal("import os; os._exit(0)\nassert False")
    assert code == 0 and not rep.ended
    v = signal_verdict(exit_code=code, expect_exit=0, timed_out=False, ended=rep.ended,
                       exitstatus=rep.exitstatus)
    assert not v.passed and v.anomalies[0][0] == "no-end-record"


def test_a_python_c_signal_whose_atexit_forces_exit_0_disagrees() -> None:
    code, rep = _signal("import atexit, os; atexit.register(lambda: os._exit(0))\nassert False")
    assert code == 0 and rep.ended and rep.exitstatus == 1
    v = signal_verdict(exit_code=code, expect_exit=0, timed_out=False, ended=True,
                       exitstatus=rep.exitstatus)
    assert not v.passed and v.anomalies[0][0] == "exit-code-disagrees"


# --------------------------------------------------------------------------- the verdict rule

ENDED = {"started": True, "ended": True, "exitstatus": 0, "collect_errors": 0}
OK = {"a::t1": ("passed", "passed"), "a::t2": ("passed", "passed")}


def reasons(**kw: object) -> tuple[bool, set[str]]:
    args = {"exit_code": 0, "timed_out": False, "report": ENDED, "tests": OK,
            "expected": ["a::t1", "a::t2"], **kw}
    v = suite_verdict(**args)  # type: ignore[arg-type]
    return v.passed, {r for r, _ in v.anomalies}


def test_an_honest_suite_passes() -> None:
    assert reasons() == (True, set())


def test_exit_code_alone_never_passes() -> None:
    assert reasons(report={"started": False, "ended": False}) == (False, {"no-end-record"})


def test_a_timeout_is_a_failure_not_an_anomaly() -> None:
    assert reasons(exit_code=124, timed_out=True,
                   report={"started": True, "ended": False}) == (False, set())


@pytest.mark.parametrize("kw, reason", [
    ({"exit_code": 1}, "exit-code-disagrees"),
    ({"report": {**ENDED, "exitstatus": 1}}, "exit-code-disagrees"),
    ({"tests": {"a::t1": ("failed", "passed"), "a::t2": ("passed", "passed")}}, "outcome-forged"),
    ({"tests": {}}, "zero-collected"),
    ({"tests": {"a::t1": ("passed", "passed")}}, "missing-id"),
    ({"tests": {**OK, "a::t3": ("passed", "passed")}}, "unknown-id"),
    ({"report": {**ENDED, "malformed": "a frame is not JSON"}}, "channel-malformed"),
    ({"report": {**ENDED, "after_end": 1}}, "channel-malformed"),
    ({"expected": []}, "zero-collected"),
])
def test_each_anomaly_fails_the_suite(kw: dict[str, object], reason: str) -> None:
    passed, found = reasons(**kw)
    assert not passed and reason in found


def test_missing_ids_beside_a_collection_error_are_a_plain_failure() -> None:
    passed, found = reasons(report={**ENDED, "exitstatus": 2, "collect_errors": 1}, exit_code=2,
                            tests={})
    assert not passed and found == set()


def test_a_skipped_hidden_test_does_not_pass_the_hidden_suite() -> None:
    assert reasons(tests={"a::t1": ("passed", "passed"), "a::t2": ("skipped", "skipped")})[0] is False
    assert reasons(tests={"a::t1": ("passed", "passed"), "a::t2": ("skipped", "skipped")},
                   required="reported")[0] is True
