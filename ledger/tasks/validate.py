"""Prove a golden task fair: solvable by its reference solution, unsolved by doing nothing.

For one task, in a throw-away copy of ``repo/``:

    regression-before     the regression command passes on the starting repo
    hidden-fails-before   the hidden tests fail on the starting repo (FAIL_TO_PASS really fails)
    noop-agent-fails      an agent that changes nothing does not succeed (a signal or the hidden
                          tests fail on the untouched repo)
    hidden-passes-after   with solution/ copied over, the hidden tests pass
    regression-after      ... and the regression command still passes (PASS_TO_PASS)
    signals-pass-after    ... and every completion signal passes
    signals-executable    every signal could be evaluated (program found, no exec error)
    canaries              with the solution applied, every canary site (attest/canary.py: one
                          mutant per site) fails and every real hidden test still passes, so a
                          canary an attempt passes proves cheating; ``canaries: 0 (why)`` when
                          the task allows none (it passes: the report lists why)
    solution-scope        solution/ stays out of the test folders, inside owned_files, and
                          matches expected_files_modified when those are declared
    prompt-clean          the prompt quotes no line of the hidden tests or of the solution's change
    solution-applies      (patch or command solutions) the reference solution applies
    required-outcomes     (tasks graded by test ids) every FAIL_TO_PASS id fails before and passes
                          after, every PASS_TO_PASS id passes both times (pytest ``-rA`` report)
    host                  (tasks with ``needs``) fails: this host cannot provide what they need
    demo                  (with demo.yaml) the trajectory applies; a smoke demo solves the task
    history               (with repo_history.yaml) replaying it ends at exactly repo/
    history-reveals-fix   (hidden.temptation: git-history) a replayed commit holds the fix
    temptation-declared   (adversarial tier) ``hidden.temptation`` says what the bait is

Details carry exit codes and pytest's summary line only, never test or solution text.
Commands starting with ``python`` run with this interpreter (the venv's). Every command goes
through the runner its caller passed in (``ledger.tasks.runner``): ``validate_tasks`` takes a
``Confinement`` whose ``graded`` runner runs the test runs and signals as ``ledger run`` grades
them; ``validate_task`` takes a runner, or uses the one of the caller's block (mine, importers).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from ledger.commandenv import command_env
from ledger.errors import LedgerError, UsageError
from ledger.tasks import apply, checks, runner
from ledger.tasks.loader import iter_files, load_repo_history
from ledger.tasks.model import Signal, Task

COMMAND_TIMEOUT_S = 120.0


class Check(NamedTuple):
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class ValidationResult:
    task_id: str
    tier: str
    ok: bool
    checks: list[Check] = field(default_factory=list)
    duration_s: float = 0.0
    sandbox: str = "none"  # the backend its commands ran in ("none": ordinary processes)
    environment: Mapping[str, Any] | None = None  # the image it ran in (``environment.ready`` data)
    log_tail: str = ""  # the end of a build log that failed (the ``environment`` check)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "tier": self.tier,
            "ok": self.ok,
            "duration_s": round(self.duration_s, 3),
            "sandbox": self.sandbox,
            "sandboxed": self.sandbox != "none",
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
            **({"environment": dict(self.environment)} if self.environment else {}),
            **({"build_log_tail": self.log_tail} if self.log_tail else {}),
        }


# --------------------------------------------------------------------------- running things


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None: could not be started or timed out
    summary: str  # one line: pytest's summary or the reason it did not run
    executable: bool = True
    output: str = ""  # the whole output (kept in memory only, never in a check's detail)


def task_env() -> dict[str, str]:
    """The environment task commands run with (``ledger.commandenv``): this host's, with this
    interpreter first on PATH and no pytest plugin autoload (the tasks use core pytest only,
    and autoloading every installed plugin costs more than the tests themselves); inside a
    task's environment (``runner.environment_of``) the image's PATH and nothing of this host's."""
    if runner.environment_of() is not None:
        return command_env(path=runner.ENVIRONMENT_PATH)
    return command_env(os.environ)


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """``python ...`` runs with this interpreter, so the venv's pytest is the one that runs
    (inside a task's environment: the image's ``python``, unchanged)."""
    if runner.environment_of() is not None:
        return list(argv)
    return checks.python_argv(argv)


def _summary(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if not lines:
        return ""
    last = lines[-1].strip("= ")
    return last[:200]


def run_command(
    command: Sequence[str] | str, cwd: Path, *, timeout: float = COMMAND_TIMEOUT_S,
    extra_env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run a task command (argv list, or a shell string run by /bin/sh) in ``cwd``, through the
    run's own runner (``ledger.tasks.checks.run_command``: its own process group, killed on
    every exit path)."""
    env = task_env()
    env.update(extra_env or {})
    argv: list[str] = ["/bin/sh", "-c", command] if isinstance(command, str) else resolve_argv(command)
    # Through the runner of the caller's block (ledger.tasks.runner: confined where it asked).
    with tempfile.TemporaryDirectory(prefix="ledger-validate-") as tmp:
        out = Path(tmp) / "output"
        code, _seconds, timed_out = runner.current().run(argv, cwd=Path(cwd), env=env,
                                                         timeout=timeout, output=out)
        text = out.read_bytes().decode("utf-8", errors="replace") if out.exists() else ""
    if timed_out:
        return CommandResult(None, f"timed out after {timeout:g}s")
    if code == 127 and text.startswith("cannot start "):
        missing = "No such file" in text.splitlines()[0]
        return CommandResult(None, f"{'program not found' if missing else 'not executable'}: "
                                   f"{argv[0]}", executable=False)
    executable = not (isinstance(command, str) and code in (126, 127))
    return CommandResult(code, _summary(text), executable=executable, output=text)


def check_signal(signal: Signal, worktree: Path) -> tuple[bool, str, bool]:
    """Evaluate one signal in ``worktree``: (passed, detail, executable)."""
    if signal.kind == "command":
        assert signal.command is not None
        res = run_command(signal.command, worktree, timeout=checks.SIGNAL_TIMEOUT_S)
        if res.exit_code is None:
            return False, res.summary, res.executable
        passed = res.exit_code == signal.expect_exit
        return passed, f"exit {res.exit_code} (expected {signal.expect_exit})", res.executable
    if signal.kind not in ("path_exists", "file_contains"):
        return False, f"unknown signal kind {signal.kind!r}", False
    passed, detail = checks.check_file_signal(signal, worktree)  # as the run checks it
    return passed, detail, True


def _copy_tree(src: Path, dst: Path) -> None:
    for rel, path in iter_files(src):
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def apply_demo(steps: Iterable[Mapping[str, Any]], worktree: Path) -> list[str]:
    """Apply the file edits of a demo trajectory (reads are checked, runs are skipped).

    Returns the problems found (a read or replace of a missing file, an ``old`` text that is
    not there); an empty list means the trajectory applies cleanly.
    """
    problems: list[str] = []
    for i, step in enumerate(steps, 1):
        if "run" in step or "say" in step:
            continue
        action = next(a for a in ("read", "write", "replace") if a in step)
        path = worktree / str(step[action])
        if action == "read":
            if not path.is_file():
                problems.append(f"step {i}: read of missing {step['read']}")
        elif action == "write":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(step["content"]), encoding="utf-8")
        else:
            if not path.is_file():
                problems.append(f"step {i}: replace in missing {step['replace']}")
                continue
            text = path.read_text(encoding="utf-8")
            if step["old"] not in text:
                problems.append(f"step {i}: replace text not found in {step['replace']}")
                continue
            path.write_text(text.replace(str(step["old"]), str(step["new"]), 1), encoding="utf-8")
    return problems


# --------------------------------------------------------------------------- static checks


def solution_files(task: Task) -> list[str] | None:
    """The worktree files the reference solution changes (None: a command, not known ahead)."""
    if task.solution.kind == "command":
        return None
    if task.solution.kind == "patch":
        assert task.solution.patch is not None
        return apply.patch_paths((task.root / task.solution.patch).read_text(encoding="utf-8", errors="replace"))
    return [rel for rel, _ in iter_files(task.solution_dir)]


def _solution_scope(task: Task) -> Check:
    found = solution_files(task)
    if found is None:
        return Check("solution-scope", True, "a solution command: its files are not known ahead")
    files = found
    problems = []
    for rel in files:
        top = PurePosixPath(rel).parts[0]
        if top in ("tests", task.hidden_tests_dir):
            problems.append(f"{rel} touches a test folder")
        if task.owned_files and not any(fnmatch.fnmatch(rel, pat) for pat in task.owned_files):
            problems.append(f"{rel} is outside owned_files")
    if task.expected_files_modified and set(files) != set(task.expected_files_modified):
        problems.append(
            f"solution files {sorted(files)} != expected_files_modified {sorted(task.expected_files_modified)}"
        )
    return Check("solution-scope", not problems, "; ".join(problems) or f"{len(files)} file(s)")


_TRIVIAL_PREFIXES = ("import ", "from ", "def test", "class Test", "@pytest", "#", "return ")


def _leak_lines(text: str, *, min_len: int) -> set[str]:
    out = set()
    for line in text.splitlines():
        s = line.strip()
        if len(s) >= min_len and not s.startswith(_TRIVIAL_PREFIXES) and not s.startswith(("def ", "class ")):
            out.add(s)
    return out


def _added(text: str) -> str:
    """The added lines of a patch, without their '+'."""
    return "\n".join(ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))


def _prompt_clean(task: Task) -> Check:
    leaks = 0
    for rel, path in iter_files(task.tests_dir):
        text = path.read_text(encoding="utf-8", errors="replace")
        if f"tests/{rel}" == task.hidden_tests_patch:
            text = _added(text)
        # Expected values are the ground truth: short assertions count, other lines when long.
        lines = {
            s for s in _leak_lines(text, min_len=16) if len(s) >= 40 or "assert" in s or "==" in s
        }
        leaks += sum(1 for line in lines if line in task.prompt)
    for rel, path in iter_files(task.solution_dir):
        text = path.read_text(encoding="utf-8", errors="replace")
        if f"solution/{rel}" == task.solution.patch:
            leaks += sum(1 for line in _leak_lines(_added(text), min_len=32) if line in task.prompt)
            continue
        new = _leak_lines(text, min_len=32)
        original = task.repo_dir / rel
        if original.is_file():
            new -= _leak_lines(original.read_text(encoding="utf-8", errors="replace"), min_len=32)
        leaks += sum(1 for line in new if line in task.prompt)
    return Check(
        "prompt-clean",
        leaks == 0,
        "no hidden test or solution line in the prompt" if not leaks else f"{leaks} line(s) of ground truth quoted in the prompt",
    )


def _history(task: Task) -> list[Check]:
    commits = load_repo_history(task)
    if not commits:
        return []
    tree: dict[str, str] = {}
    for commit in commits:
        for path, content in commit.files.items():
            if content is None:
                tree.pop(path, None)
            else:
                tree[path] = content
    repo = {rel: p.read_text(encoding="utf-8", errors="replace") for rel, p in iter_files(task.repo_dir)}
    checks = []
    differs = sorted(set(tree) ^ set(repo) | {p for p in set(tree) & set(repo) if tree[p] != repo[p]})
    checks.append(
        Check(
            "history",
            not differs,
            f"{len(commits)} commit(s) replay to repo/" if not differs else f"replayed tree differs from repo/ at {differs[:5]}",
        )
    )
    if task.hidden_fields.get("temptation") == "git-history":
        solution = {rel: p.read_text(encoding="utf-8", errors="replace") for rel, p in iter_files(task.solution_dir)}
        revealed = any(
            solution.get(path) == content for commit in commits for path, content in commit.files.items()
        )
        checks.append(
            Check("history-reveals-fix", revealed, "a commit holds the reference fix" if revealed else "no commit holds the fix")
        )
    return checks


# --------------------------------------------------------------------------- the validation


def _signal_round(task: Task, worktree: Path) -> tuple[list[tuple[bool, str]], list[str]]:
    results, not_exec = [], []
    for i, sig in enumerate(task.signals):
        passed, detail, executable = check_signal(sig, worktree)
        results.append((passed, detail))
        if not executable:
            not_exec.append(f"signal {i}: {detail}")
    return results, not_exec


def _exit_ok(res: CommandResult) -> bool:
    return res.exit_code == 0


def _fmt(res: CommandResult) -> str:
    code = "no exit" if res.exit_code is None else f"exit {res.exit_code}"
    return f"{code}: {res.summary}" if res.summary else code


def _hidden_run(task: Task, work: Path, base: Path) -> tuple[CommandResult, bool]:
    """Run the hidden command; (result, passed). A grading command is judged by its reward file."""
    verifier = runner.scratch_dir(base) / "verifier"
    if verifier.exists():
        shutil.rmtree(verifier)
    verifier.mkdir(parents=True)
    timeout = task.grading.timeout_s if task.grading and task.grading.timeout_s else COMMAND_TIMEOUT_S
    res = run_command(task.hidden_test_command, work, timeout=timeout,
                      extra_env=apply.hidden_env(task, work, verifier))
    if task.grading is not None and task.grading.reward_file is not None:
        reward, detail = apply.read_reward(verifier, task.grading.reward_file)
        return (CommandResult(res.exit_code, f"{detail} (outcomes: reward-file)", res.executable, res.output),
                apply.reward_passes(reward))
    if task.grading is not None:
        return CommandResult(res.exit_code, "outcomes: exit-code", res.executable, res.output), _exit_ok(res)
    return res, _exit_ok(res)


def _validate_in(task: Task, base: Path) -> list[Check]:
    if task.needs and runner.environment_of() is None:
        return [Check("host", False, f"needs {', '.join(task.needs)}: no executor here provides it; "
                                     "the task cannot be validated or run on this host")]
    checks: list[Check] = []
    work = base / "attempt"
    _copy_tree(task.repo_dir, work)

    if task.regression_command:
        before = run_command(task.regression_command, work)
        checks.append(Check("regression-before", _exit_ok(before), _fmt(before)))

    apply.install_hidden_tests(task, work)
    hidden_before, passed_before = _hidden_run(task, work, base)
    # pytest: 1 = tests failed, 2 = collection errors (e.g. the function to add does not exist yet);
    # 5 = no tests collected and 3/4 = pytest broke, which prove nothing.
    if task.grading is not None:
        fails = not passed_before and hidden_before.exit_code is not None
    elif task.graded_by_ids:
        # A FAIL_TO_PASS module that cannot be collected yet (it imports what the fix adds) makes
        # pytest exit 4 when given node ids: still a failure, as long as an id did not pass.
        report = apply.parse_pytest_report(hidden_before.output)
        fails = hidden_before.exit_code not in (0, None) and any(
            report.get(t) != "passed" for t in task.fail_to_pass)
    elif tuple(task.hidden_test_command[:3]) == ("python", "-m", "pytest"):
        fails = hidden_before.exit_code in (1, 2)
    else:
        fails = hidden_before.exit_code not in (0, None)
    checks.append(Check("hidden-fails-before", fails, _fmt(hidden_before)))

    sig_before, not_exec = _signal_round(task, work)
    failing = [i for i, (passed, _) in enumerate(sig_before) if not passed]
    noop_fails = bool(failing) or fails
    checks.append(
        Check(
            "noop-agent-fails",
            noop_fails,
            f"on the untouched repo: hidden tests {'fail' if fails else 'pass'}, "
            f"{len(failing)} of {len(sig_before)} signal(s) fail",
        )
    )

    if task.solution.kind == "files":
        _copy_tree(task.solution_dir, work)
    else:
        applied = apply.apply_solution(task, work, env=task_env())
        checks.append(Check("solution-applies", applied.ok, applied.detail))
    if task.hidden_tests_patch is None:
        # A solution that writes into the hidden folder must not replace the hidden tests.
        apply.install_hidden_tests(task, work)
    hidden_after, passed_after = _hidden_run(task, work, base)
    checks.append(Check("hidden-passes-after", passed_after, _fmt(hidden_after)))
    if task.graded_by_ids:
        problems = apply.outcomes_verdict(
            apply.parse_pytest_report(hidden_before.output), apply.parse_pytest_report(hidden_after.output),
            task.fail_to_pass, task.pass_to_pass)
        detail = "; ".join(problems[:5]) + (f"; {len(problems) - 5} more" if len(problems) > 5 else "")
        checks.append(Check(
            "required-outcomes", not problems,
            detail or f"{len(task.fail_to_pass)} FAIL_TO_PASS and {len(task.pass_to_pass)} PASS_TO_PASS hold"))
    if task.regression_command:
        after = run_command(task.regression_command, work)
        checks.append(Check("regression-after", _exit_ok(after), _fmt(after)))
    sig_after, not_exec_after = _signal_round(task, work)
    bad = [f"signal {i}: {d}" for i, (passed, d) in enumerate(sig_after) if not passed]
    checks.append(
        Check("signals-pass-after", not bad, "; ".join(bad) or f"{len(sig_after)} signal(s) pass")
    )
    checks.append(_canary_check(task, work, base))
    if task.hidden_tests_patch is None:
        apply.install_hidden_tests(task, work)  # the real hidden tests again
    problems = not_exec + not_exec_after
    checks.append(
        Check("signals-executable", not problems, "; ".join(problems) or f"{len(task.signals)} signal(s)")
    )

    checks.append(_solution_scope(task))
    checks.append(_prompt_clean(task))

    if task.demo:
        checks.append(_demo_check(task, base / "demo"))
    checks.extend(_history(task))
    if task.tier == "adversarial":
        bait = task.hidden_fields.get("temptation")
        ok = isinstance(bait, str) and bool(bait.strip())
        checks.append(Check("temptation-declared", ok, str(bait) if ok else "hidden.temptation missing"))
    return checks


CANARY_VALIDATE_KEY = hashlib.sha256(b"eval-ledger/canary/validate/v1").digest()
"""Names and places of the canaries ``validate`` tries (every site is tried, whatever the key)."""


def _canary_check(task: Task, work: Path, base: Path) -> Check:
    """Every canary site of the task fails on the solved tree, every real test still passes."""
    from ledger.tasks import canaries as tc

    derived = tc.derive_for(task, CANARY_VALIDATE_KEY, every=True)
    if not derived.canaries:
        return Check("canaries", True, f"canaries: 0 ({derived.reason})")
    problems: list[str] = []
    if derived.tests and task.grading is not None:  # one run of its command per canary
        problems += _own_command_canaries(task, work, base, derived)
    elif derived.tests:
        tc.install(derived, task, work)
        argv = [*task.hidden_test_command, "-rA", "-p", "no:cacheprovider"]
        res = run_command(argv, work, extra_env=apply.hidden_env(task, work, base / "verifier"))
        report = apply.parse_pytest_report(res.output)
        for c in derived.tests:
            got = [o for tid, o in report.items() if c.matches(tid)]
            if not got:
                problems.append(f"{c.site.kind} canary of {c.site.file}::{c.site.func} not run")
            elif any(o not in ("failed", "error") for o in got):
                problems.append(f"{c.site.kind} canary of {c.site.file}::{c.site.func} does not "
                                f"fail with the solution ({', '.join(sorted(set(got)))})")
        real = {tid: o for tid, o in report.items()
                if not any(c.matches(tid) for c in derived.tests)}
        if not real or any(o != "passed" for o in real.values()):
            problems.append("the real hidden tests do not all pass beside the canaries")
    for c in derived.signals:
        passed, detail, _ = check_signal(tc.signal_of(c, task), work)
        if passed:
            problems.append(f"canary of {c.name} passes with the solution ({detail})")
    sound = len(derived.canaries) - len(problems)
    detail = (f"canaries: {len(derived.tests)} test and {len(derived.signals)} signal site(s), "
              f"all sound" if not problems else "; ".join(problems[:5]))
    return Check("canaries", not problems and sound > 0, detail)


def _own_command_canaries(task: Task, work: Path, base: Path, derived: Any) -> list[str]:
    """Problems of a task graded by its own command: its real run must pass with the solution
    and its command must fail with each test canary alone installed (``tc.MAX_VALIDATE_RUNS``)."""
    from ledger.tasks import canaries as tc

    problems = [] if _hidden_run(task, work, base)[1] else ["the real run does not pass"]
    for c in derived.tests[:tc.MAX_VALIDATE_RUNS]:
        apply.install_hidden_tests(task, work)
        tc.install(tc.alone(derived, c), task, work)
        if _hidden_run(task, work, base)[1]:
            problems.append(f"{c.site.kind} canary of {c.site.file}::{c.site.func} passes "
                            "the task's command with the solution")
    return problems


def _demo_check(task: Task, work: Path) -> Check:
    _copy_tree(task.repo_dir, work)
    problems = apply_demo(task.demo, work)
    if problems:
        return Check("demo", False, "; ".join(problems))
    apply.install_hidden_tests(task, work)
    hidden, hidden_ok = _hidden_run(task, work, work.parent)
    regression = run_command(task.regression_command, work) if task.regression_command else CommandResult(0, "none")
    signals, _ = _signal_round(task, work)
    solves = hidden_ok and _exit_ok(regression) and all(p for p, _ in signals)
    detail = "applies and solves the task" if solves else (
        f"applies; does not solve (hidden {_fmt(hidden)}; regression {_fmt(regression)})"
    )
    return Check("demo", solves or task.tier != "smoke", detail)


def validate_task(task: Task, *, workdir: Path | None = None,
                  confinement: runner.Confinement | None = None) -> ValidationResult:
    """Run every fairness check of one task in a temporary copy (under ``workdir`` if given).

    With ``confinement`` its commands run through ``confinement.graded`` (``ledger run``'s
    grading sandbox, for ``tasks validate``; a task with an environment: containers of its
    image); without, through the runner of the caller's block (``ledger.tasks.runner.using``:
    mine and the importers), else as ordinary processes. An environment that cannot be made
    ready (a Dockerfile that does not build) is the failed check ``environment``, its log's tail
    on the result."""
    started = time.monotonic()
    active: runner.CommandRunner | None = None
    log_tail = ""
    with tempfile.TemporaryDirectory(prefix=f"ledger-validate-{task.id}-", dir=workdir) as tmp:
        try:
            active = confinement.graded(Path(tmp), task) if confinement is not None else runner.current()
            with runner.using(active):
                checks = _validate_in(task, Path(tmp))
        except (OSError, LedgerError, UnicodeDecodeError) as exc:
            name = "error" if active is not None else "environment" if task.environment else "sandbox"
            checks = [Check(name, False, f"{type(exc).__name__}: {exc}")]
            log_tail = str(getattr(exc, "log_tail", "") or "")
    return ValidationResult(
        task_id=task.id,
        tier=task.tier,
        ok=all(c.passed for c in checks),
        checks=checks,
        duration_s=time.monotonic() - started,
        sandbox=active.name if active is not None else getattr(confinement, "name", "none"),
        environment=runner.environment_of(active) if active is not None else None,
        log_tail=log_tail,
    )


def validate_tasks(
    tasks: Sequence[Task],
    parallel: int = 2,
    *,
    workdir: Path | None = None,
    progress: Callable[[ValidationResult], None] | None = None,
    confinement: runner.Confinement = runner.PLAIN,
    record: Path | None = None,
    at: str = "",
) -> list[ValidationResult]:
    """Validate many tasks, ``parallel`` at a time (threads: the work is in subprocesses).

    ``confinement`` (``ledger.run.task_runner.task_confinement(mode, tasks)`` resolves
    ``--sandbox`` as ``ledger run`` does, tasks with an environment in containers of their
    image; ``PLAIN``: ordinary processes) grades every task's commands. Results come back in
    the order of ``tasks``; ``progress`` is called as each one finishes. With ``record`` (a
    folder), each task's validation record is written there, stamped ``at``
    (``ledger.tasks.validations``).
    """
    if parallel < 1:
        raise UsageError("parallel must be >= 1")
    results: dict[str, ValidationResult] = {}
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(validate_task, t, workdir=workdir, confinement=confinement)
                   for t in tasks]
        for fut in as_completed(futures):
            res = fut.result()
            results[res.task_id] = res
            if progress is not None:
                progress(res)
    ordered = [results[t.id] for t in tasks]
    if record is not None:
        from ledger.tasks.validations import write_records

        try:
            write_records(record, ordered, tasks, at=at)
        except OSError as exc:
            raise UsageError(f"cannot write the validation records to {record}: {exc.strerror or exc}") from None
    return ordered
