"""Things the bench executes on agents' answers: corpus checks, the agents' own tests, linters.

    corpus_check(files, corpus, timeout)          the corpus's hidden pytest suites
    run_agent_tests(code, tests, language, ...)   the tests an agent wrote, run on its own code
    static_checks(files, tests, language, tools)  ruff, mypy, pytest (Python); tsc, jest (TS)

Each returns the ``data`` of one journal entry. Every command runs in a ``CheckFolder`` (a fresh
temporary folder holding the answer's files) inside a grading box of the Sandbox port
(``ledger.sandbox.port``; ``Confinement`` says which backend and what it hides, the ledger
folder among it): the folder is the only place it may write, the network is off, as its own
process group with a time limit, with a private HOME and none of the user's secrets in its
environment. A tool that is not installed gives ``None`` and the reason, never a pass; a box that
never started its command is an ``error`` with the backend's message, never a pass.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledger.bench.confine import Confinement, confinement
from ledger.commandenv import command_env
from ledger.sandbox import paths
from ledger.sandbox.port import GradingRequest
from ledger.tasks.checks import run_command
from ledger.textbound import bound_text

OUTPUT_TAIL = 4000
MESSAGE_LIMIT = 500  # bytes of a test failure message
MAX_TESTS = 2000  # per-test outcomes listed (counts are always complete)
DEFAULT_TIMEOUT_S = 300.0
PY_TOOLS = ("ruff", "mypy", "pytest")
TS_TOOLS = ("tsc", "jest")
_RUFF_FINDING = re.compile(r"^[^\s:][^:]*:\d+:\d+: ", re.MULTILINE)
_MYPY_ERROR = re.compile(r":\d+(?::\d+)?: error: ", re.MULTILINE)
_TSC_ERROR = re.compile(r"error TS\d+", re.MULTILINE)


def find_tool(name: str) -> str | None:
    """A program on PATH, or next to this Python (the venv's ``bin``)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def discover_tools() -> dict[str, str | None]:
    """``{tool: path or None}`` for every checker the bench knows."""
    out: dict[str, str | None] = {name: find_tool(name) for name in ("ruff", "mypy", "tsc", "jest")}
    out["pytest"] = sys.executable  # run as ``python -m pytest``; present with this package
    return out


class CheckFolder:
    """A temporary folder holding an answer's files, whose commands run in a grading box of
    ``confine`` (resolved here when not given); removed on exit."""

    def __init__(self, confine: Confinement | None = None) -> None:
        self.confine = confine or confinement()
        self.root = Path(tempfile.mkdtemp(prefix="ledger-bench-check-"))
        self.work = self.root / "work"
        self.home = self.root / "home"
        self.scratch = self.root / "scratch"  # reports and caches: writable, not the answer's
        for folder in (self.work, self.home, self.scratch):
            folder.mkdir()

    def __enter__(self) -> CheckFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def write(self, files: Mapping[str, str]) -> list[str]:
        """Write ``files`` under the work folder; names that would escape it are skipped."""
        written = []
        base = self.work.resolve()
        for name, body in files.items():
            target = (self.work / name).resolve()
            if base not in target.parents:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
            written.append(name)
        (self.work / "pytest.ini").write_text("[pytest]\naddopts =\n", encoding="utf-8")
        return written

    def run(self, argv: list[str], timeout: float, log: str) -> tuple[int, float, bool, str]:
        """``argv`` in a fresh grading box over the folder: (exit code, seconds, timed out,
        output). A box that never ran the command gives exit 125 and the backend's message."""
        out = self.root / f"{log}.log"  # written from outside the box
        # the checkers may load their plugins; NO_COLOR keeps their findings parsable
        env = {**command_env(home=self.home, scratch=self.home, pytest_plugins=True), "NO_COLOR": "1"}
        box = self.confine.sandbox.grading_box(GradingRequest(
            worktree=self.work, home=self.home, scratch=self.scratch, hidden=self.confine.hidden,
            path_env=env["PATH"], programs=tuple(paths.outside_system([argv])), cwd=self.work))
        try:
            cmd = box.command(argv, env)
            code, wall, timed_out = run_command(cmd.argv, cwd=self.work, env=cmd.env,
                                                timeout=timeout, output=out,
                                                pass_fds=cmd.pass_fds, preexec=cmd.preexec)
            try:
                text = out.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            failed = box.failure(code, text)
        finally:
            box.close()
        if failed is not None:
            return 125, wall, False, f"the {self.confine.name} sandbox did not start: {failed}"
        return code, wall, timed_out, text


def parse_junit(path: Path, redact: Callable[[str], str] = str
                ) -> tuple[dict[str, int], list[dict[str, str]]] | None:
    """Per-test outcomes from a pytest JUnit XML report; None when there is no usable report.
    ``redact`` is applied to each failure message kept. (The bench's checks read one; a run's
    grading never does: a report file is forgeable.)"""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    tests: list[dict[str, str]] = []
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        test_id = f"{classname}::{name}" if classname else name
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = child.get("message") or (child.text or "")
                if outcome in ("failed", "error"):
                    break
        counts[outcome] += 1
        if len(tests) < MAX_TESTS:
            line = message.strip().splitlines()[0] if message.strip() else ""
            tests.append({"id": test_id, "outcome": outcome,
                          "message": bound_text(redact(line), MESSAGE_LIMIT)[0]})
    return counts, tests


def _tail(text: str) -> str:
    return text[-OUTPUT_TAIL:]


def _pytest(box: CheckFolder, targets: list[str], timeout: float, log: str,
            no_plugins: bool = False) -> dict[str, Any]:
    report = box.scratch / f"{log}.xml"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
            str(box.work), f"--junitxml={report}"]
    if no_plugins:
        argv += ["-p", "no:hypothesispytest"]
    code, wall, timed_out, output = box.run([*argv, *targets], timeout, log)
    parsed = parse_junit(report)
    counts, tests = parsed if parsed is not None else (
        {"passed": 0, "failed": 0, "error": 0, "skipped": 0}, [])
    if parsed is None and code not in (0, 5):
        counts = {**counts, "error": 1}
    return {"command": ["python", "-m", "pytest", *targets], "exit_code": code,
            "duration_s": round(wall, 6), "timed_out": timed_out, "counts": counts,
            "tests": tests[:200], "output": _tail(output)}


def corpus_check(files: Mapping[str, str], corpus: Any, timeout: float = DEFAULT_TIMEOUT_S,
                 confine: Confinement | None = None) -> dict[str, Any]:
    """Run the corpus's hidden checks against an answer's files (data of ``bench.check``)."""
    expected = list(corpus.files)
    missing = [f for f in expected if f not in files]
    with CheckFolder(confine) as box:
        box.write({name: files[name] for name in expected if name in files})
        checks = []
        for path in corpus.check_paths():
            target = box.work / path.name
            target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
            checks.append(path.name)
        result = _pytest(box, checks, timeout, "corpus", no_plugins=True)
    counts = result["counts"]
    total = counts["passed"] + counts["failed"] + counts["error"]
    return {"corpus_version": corpus.version, "files_expected": expected,
            "files_found": [f for f in expected if f in files], "missing_files": missing,
            "ran": True, "passed": result["exit_code"] == 0 and total > 0 and not missing,
            **result}


def run_agent_tests(code: Mapping[str, str], tests: Mapping[str, str], language: str,
                    timeout: float = DEFAULT_TIMEOUT_S,
                    confine: Confinement | None = None) -> dict[str, Any]:
    """Execute the tests an agent wrote against its own code (data of ``bench.tests``)."""
    test_names = sorted(tests)
    base: dict[str, Any] = {"language": language, "code_files": sorted(code),
                            "test_files": test_names}
    if not tests:
        return {**base, "ran": False, "reason": "the answer names no test files", "counts": None}
    if language == "python":
        with CheckFolder(confine) as box:
            box.write({**code, **tests})
            targets = [n for n in test_names if n.endswith(".py")]
            if not targets:
                return {**base, "ran": False, "reason": "no Python test files", "counts": None}
            return {**base, "ran": True, "reason": "", **_pytest(box, targets, timeout, "tests")}
    if language in ("typescript", "javascript"):
        jest = find_tool("jest")
        if jest is None:
            return {**base, "ran": False, "reason": "jest is not installed", "counts": None}
        with CheckFolder(confine) as box:
            box.write({**code, **tests})
            code_, wall, timed_out, output = box.run([jest, "--ci", "--json", *test_names],
                                                      timeout, "jest")
        return {**base, "ran": True, "reason": "", "exit_code": code_, "duration_s": round(wall, 6),
                "timed_out": timed_out, "counts": _jest_counts(output),
                "command": ["jest", "--ci", "--json", *test_names], "output": _tail(output)}
    return {**base, "ran": False, "reason": f"no test runner for language {language!r}",
            "counts": None}


def _jest_counts(output: str) -> dict[str, int]:
    import json

    start = output.find("{")
    try:
        data = json.loads(output[start:]) if start >= 0 else {}
    except ValueError:
        data = {}
    return {"passed": int(data.get("numPassedTests", 0)), "failed": int(data.get("numFailedTests", 0)),
            "error": int(data.get("numRuntimeErrorTestSuites", 0)),
            "skipped": int(data.get("numPendingTests", 0))}


def static_checks(files: Mapping[str, str], tests: Mapping[str, str], language: str,
                  tools: Mapping[str, str | None] | None = None,
                  timeout: float = DEFAULT_TIMEOUT_S,
                  confine: Confinement | None = None) -> dict[str, Any]:
    """Real checkers for the answer's language (data of ``bench.static``).

    Python: ``ruff check``, ``mypy``, ``pytest`` (on the answer's own tests); TypeScript:
    ``tsc --noEmit`` and ``jest``. Each result is a map, or ``None`` with a reason.
    """
    tools = dict(discover_tools() if tools is None else tools)
    checks: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    if language == "python":
        names = sorted(n for n in files if n.endswith(".py"))
        if not names:
            for t in PY_TOOLS:
                checks[t], reasons[t] = None, "the answer has no Python files"
            return {"language": language, "checks": checks, "reasons": reasons}
        with CheckFolder(confine) as box:
            box.write({**files, **tests})
            ruff = tools.get("ruff")
            if ruff:
                code, wall, timed_out, out = box.run(
                    [ruff, "check", "--no-cache", "--isolated", "--output-format", "concise",
                     *names], timeout, "ruff")
                checks["ruff"] = {"ok": code == 0, "exit_code": code, "timed_out": timed_out,
                                  "findings": len(_RUFF_FINDING.findall(out)),
                                  "duration_s": round(wall, 6), "output": _tail(out)}
            else:
                checks["ruff"], reasons["ruff"] = None, "ruff is not installed"
            mypy = tools.get("mypy")
            if mypy:
                code, wall, timed_out, out = box.run(
                    [mypy, "--ignore-missing-imports", "--no-error-summary", "--no-color-output",
                     "--cache-dir", str(box.scratch / "mypy-cache"), *names], timeout, "mypy")
                checks["mypy"] = {"ok": code == 0, "exit_code": code, "timed_out": timed_out,
                                  "errors": len(_MYPY_ERROR.findall(out)),
                                  "duration_s": round(wall, 6), "output": _tail(out)}
            else:
                checks["mypy"], reasons["mypy"] = None, "mypy is not installed"
            test_targets = sorted(n for n in tests if n.endswith(".py"))
            if not tools.get("pytest"):
                checks["pytest"], reasons["pytest"] = None, "pytest is not installed"
            elif not test_targets:
                checks["pytest"], reasons["pytest"] = None, "the answer has no Python tests"
            else:
                result = _pytest(box, test_targets, timeout, "pytest")
                checks["pytest"] = {"ok": result["exit_code"] == 0, **result}
        return {"language": language, "checks": checks, "reasons": reasons}
    if language in ("typescript", "javascript"):
        names = sorted(n for n in files if n.endswith((".ts", ".tsx", ".js", ".jsx")))
        with CheckFolder(confine) as box:
            box.write({**files, **tests})
            tsc = tools.get("tsc")
            if tsc and language == "typescript":
                code, wall, timed_out, out = box.run(
                    [tsc, "--noEmit", "--strict", "--skipLibCheck", *names], timeout, "tsc")
                checks["tsc"] = {"ok": code == 0, "exit_code": code, "timed_out": timed_out,
                                 "errors": len(_TSC_ERROR.findall(out)),
                                 "duration_s": round(wall, 6), "output": _tail(out)}
            else:
                checks["tsc"] = None
                reasons["tsc"] = ("tsc is not installed" if language == "typescript"
                                  else "JavaScript has no type checker run")
        result = run_agent_tests(files, tests, language, timeout, confine)
        if result.get("ran"):
            checks["jest"] = {"ok": result.get("exit_code") == 0, **result}
        else:
            checks["jest"], reasons["jest"] = None, str(result.get("reason"))
        return {"language": language, "checks": checks, "reasons": reasons}
    return {"language": language, "checks": {}, "reasons": {
        "all": f"no static checkers for language {language!r}"}}


__all__ = ["CheckFolder", "corpus_check", "discover_tools", "find_tool", "parse_junit",
           "run_agent_tests", "static_checks"]
