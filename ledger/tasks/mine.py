"""Mine golden tasks from the fix commits of a local git repository, the SWE-bench way.

For a candidate commit C with parent P:

    starting repo      the tree of P (``repo/``)
    hidden tests       C's changes to test files, as a patch (``tests/hidden.patch``)
    reference solution the rest of C's change, as a patch (``solution/fix.patch``)
    FAIL_TO_PASS       test ids of the changed test modules that fail on P + hidden tests and
                       pass on C; PASS_TO_PASS: those that pass both times
    statement          C's commit message (and ``--statement FILE``), never the diff

A commit is rejected, with its reason, when it is a merge or the root, changes no test module or
nothing but tests, when no test fails before and passes after, when an outcome differs between
``runs`` repeated runs (flaky), or when the finished folder does not validate
(``ledger tasks validate``'s checks). Test runs happen in throw-away copies under a temporary
folder, through the ``confinement`` the caller passes (``ledger.tasks.runner``; the CLI passes
the Sandbox port's: no network, only that folder writable), else as ordinary processes.
With ``environment`` (``--environment DOCKERFILE|requirements.txt``, ``ledger.tasks.environments``)
every test run and the validation happen in containers of that image instead (built once), and
each task gets the ``environment`` folder and field and ``needs: container``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ledger import safefs
from ledger.argv import CommandError, split_command
from ledger.errors import NothingToRun, TaskError, UsageError
from ledger.tasks import apply, runner
from ledger.tasks.loader import DEFAULT_TEST_COMMAND, load_task
from ledger.tasks.validate import COMMAND_TIMEOUT_S, run_command, validate_task

GIT_TIMEOUT_S = 60.0
FLAKY_RUNS = 3
_TEST_DIRS = frozenset({"test", "tests", "testing"})
_ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

Say = Callable[[str], None]  # one progress line (the run's progress view is coordinator.Progress)


@dataclass(frozen=True)
class MineOptions:
    repo: Path
    commits: tuple[str, ...] = ()  # explicit commits (else: history of HEAD, newest first)
    since: str | None = None  # git's --since DATE
    max_tasks: int | None = None  # stop after this many accepted tasks
    tier: str = "mined"
    out: Path = Path(".ledger/golden")  # tasks land in out/<tier>/<task-id>/
    test_command: tuple[str, ...] = DEFAULT_TEST_COMMAND
    statement: str | None = None  # issue text added to every statement
    statement_from: Path | None = None  # a folder of <commit-prefix>.md / pr-<N>.md descriptions
    first_parent: bool = False  # only the first-parent line (skips what merged branches fixed)
    allow_thin: bool = False  # keep tasks whose statement names none of the symbols tested
    runs: int = FLAKY_RUNS
    timeout_s: float = COMMAND_TIMEOUT_S
    validate: bool = True  # run ``ledger tasks validate``'s checks on each folder written
    environment: Path | None = None  # a Dockerfile or requirements.txt: the tasks' environment


@dataclass(frozen=True)
class Mined:
    """The verdict on one examined commit."""

    commit: str
    subject: str
    accepted: bool
    reason: str  # why rejected, or what was accepted
    task_id: str | None = None
    folder: str | None = None
    fail_to_pass: int = 0
    pass_to_pass: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, "subject": self.subject, "accepted": self.accepted,
                "reason": self.reason, "task_id": self.task_id, "folder": self.folder,
                "fail_to_pass": self.fail_to_pass, "pass_to_pass": self.pass_to_pass}


@dataclass
class MineReport:
    repo: str
    tier: str
    out: str
    results: list[Mined] = field(default_factory=list)
    sandboxed: bool = False  # the test runs ran confined (``confinement.isolated``)
    seconds: float = 0.0  # the whole mining
    test_seconds: float = 0.0  # of which spent running tests (and validating)

    @property
    def accepted(self) -> list[Mined]:
        return [r for r in self.results if r.accepted]

    @property
    def rejected(self) -> list[Mined]:
        return [r for r in self.results if not r.accepted]

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "tier": self.tier, "out": self.out,
                "sandboxed": self.sandboxed, "examined": len(self.results), "accepted": len(self.accepted),
                "rejected": len(self.rejected), "seconds": round(self.seconds, 3),
                "test_seconds": round(self.test_seconds, 3),
                "results": [r.as_dict() for r in self.results]}


class _Reject(Exception):
    pass


# --------------------------------------------------------------------------- git


def git(repo: Path, *args: str, binary: bool = False) -> Any:
    env = apply._git_env()
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TaskError(f"git {args[0]} failed: {type(exc).__name__}") from None
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise TaskError(f"git {args[0]} failed in {repo}: {msg[0] if msg else proc.returncode}")
    return proc.stdout if binary else proc.stdout.decode("utf-8", "replace")


def is_test_path(path: str) -> bool:
    """A test file: under a test folder, or named test_*.py / *_test.py / conftest.py."""
    p = PurePosixPath(path)
    name = p.name
    return (any(part in _TEST_DIRS for part in p.parts[:-1]) or name == "conftest.py"
            or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))))


def is_test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


@dataclass(frozen=True)
class CommitInfo:
    commit: str
    parents: tuple[str, ...]
    subject: str
    changed: tuple[str, ...]  # paths changed against the first parent (no renames)


_LOG_FORMAT = "%x00%H %P%x01%s"


def _parse_log(text: str) -> list[CommitInfo]:
    out: list[CommitInfo] = []
    for block in text.split("\0")[1:]:
        head, _, rest = block.partition("\x01")
        subject, _, files = rest.partition("\n")
        ids = head.split()
        out.append(CommitInfo(ids[0], tuple(ids[1:]), subject.strip(),
                              tuple(f for f in files.splitlines() if f.strip())))
    return out


def candidates(opts: MineOptions) -> list[CommitInfo]:
    """The commits to examine with what classifies them, newest first (explicit ones in the
    order given), read with one ``git log`` (the fast path: most commits need nothing more)."""
    common = ["-c", "core.quotePath=false", "log", f"--format={_LOG_FORMAT}", "--name-only", "--no-renames"]
    if opts.commits:
        ids = [git(opts.repo, "rev-parse", "--verify", f"{c}^{{commit}}").strip() for c in opts.commits]
        # Merges list no files here; they are rejected by their parents anyway.
        return _parse_log(git(opts.repo, *common, "--no-walk=unsorted", *ids))
    # Every commit reachable from HEAD, merged branches' too (on a repository that merges pull
    # requests, the fixes are there, not on the first-parent line); --first-parent restores
    # the old walk. Commits that say they fix something, or name an issue, come first.
    args = [*common, "--no-merges", *(["--first-parent"] if opts.first_parent else [])]
    if opts.since:
        args.append(f"--since={opts.since}")
    found = _parse_log(git(opts.repo, *args, "HEAD"))
    return sorted(found, key=lambda c: not _FIX_LIKE.search(c.subject))


_FIX_LIKE = re.compile(r"(?i)\b(fix(e[sd])?|bug|closes?|resolves?|regression)\b|#\d+|\bissue\b")
_DEFINED = re.compile(r"^[ +-]\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def symbols_under_test(fix_patch: str, test_patch: str) -> set[str]:
    """The functions and classes the fix defines or changes (any ``def``/``class`` line of its
    hunks, context included) that the added test lines use: what the statement must name for
    an agent to know what the hidden tests call."""
    defined = {m for m in _DEFINED.findall(fix_patch) if not m.startswith("test")}
    used = {w for line in test_patch.splitlines() if line.startswith("+") and not line.startswith("+++")
            for w in _IDENT.findall(line[1:])}
    return defined & used


def thin_statement(statement: str, symbols: set[str]) -> bool:
    """True when ``symbols`` is known and the statement names none of them."""
    words = set(_IDENT.findall(statement))
    return bool(symbols) and not (symbols & words)


def _statement_from(opts: MineOptions, commit: str, message: str) -> str | None:
    """A description for this commit from ``--statement-from``: ``<commit prefix>.md``, or
    ``pr-<N>.md`` for a commit message that names ``#N``."""
    folder = opts.statement_from
    if folder is None:
        return None
    for f in sorted(folder.glob("*.md")):
        stem = f.stem.lower()
        pr = re.fullmatch(r"pr-(\d+)", stem)
        if (len(stem) >= 7 and commit.startswith(stem)) or (pr and re.search(rf"#{pr.group(1)}\b", message)):
            return f.read_text(encoding="utf-8", errors="replace")
    return None


def _tree_problems(repo: Path, commit: str) -> str | None:
    for line in git(repo, "ls-tree", "-r", "-z", commit).split("\0"):
        if line.startswith("120000 "):
            return "the starting tree holds symlinks (task folders are self-contained)"
        if line.startswith("160000 "):
            return "the starting tree holds git submodules"
    return None


def export_tree(repo: Path, commit: str, dest: Path) -> None:
    """Write the files of ``commit`` into ``dest`` (no .git, nothing else), streamed from
    ``git archive`` so a large repository is never held in memory."""
    dest.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["git", "-C", str(repo), "archive", "--format=tar", commit], env=apply._git_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                tar.extractall(dest, filter="data")
        except tarfile.TarError as exc:
            proc.kill()
            raise TaskError(f"git archive of {commit[:12]} failed: {exc}") from None
        err = proc.stderr.read() if proc.stderr is not None else b""
        if proc.wait(timeout=GIT_TIMEOUT_S) != 0:
            msg = err.decode("utf-8", "replace").strip().splitlines()
            raise TaskError(f"git archive failed in {repo}: {msg[0] if msg else proc.returncode}")


# --------------------------------------------------------------------------- the miner


def _test_argv(opts: MineOptions, targets: Sequence[str]) -> list[str]:
    argv = list(opts.test_command)
    if any("pytest" in a for a in argv) and "-rA" not in argv:
        argv.append("-rA")  # the per-test summary the outcomes are read from
    return [*argv, *targets]


class _Clock:
    def __init__(self) -> None:
        self.test_s = 0.0

    def run(self, argv: Sequence[str], cwd: Path, timeout: float) -> tuple[dict[str, str], str]:
        started = time.monotonic()
        try:
            res = run_command(argv, cwd, timeout=timeout)
        finally:
            self.test_s += time.monotonic() - started
        return apply.parse_pytest_report(res.output), res.summary


def _slug(repo: Path) -> str:
    name = _ID_SAFE.sub("-", repo.resolve().name).strip("-.") or "repo"
    return name[:40]


def _message(repo: Path, commit: str) -> tuple[str, str]:
    text = git(repo, "log", "-1", "--format=%B", commit).strip()
    subject = text.splitlines()[0].strip() if text else commit[:12]
    return subject, text


def _write_task(opts: MineOptions, folder: Path, *, commit: str, parent: str, subject: str,
                message: str, test_patch: bytes, fix_patch: bytes, f2p: list[str], p2p: list[str],
                origin: str) -> None:
    """Write the task folder: built under a hidden temporary name beside ``folder`` and renamed
    into place, so that whatever fails leaves no half-written task behind. ``repo/`` is exported
    from git (the parent commit), never copied from the scratch folders the repository's own
    tests ran in and could write (a planted link to the operator's keys)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.partial-", dir=folder.parent))
    try:
        _fill_task(opts, tmp, folder.name, commit=commit, parent=parent, subject=subject,
                   message=message, test_patch=test_patch, fix_patch=fix_patch, f2p=f2p, p2p=p2p,
                   origin=origin)
        links = safefs.links_out(tmp) + safefs.specials(tmp)
        if links:
            raise TaskError(f"the exported task holds links or special files: {links[:3]}")
        os.chmod(tmp, 0o755)
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fill_task(opts: MineOptions, folder: Path, task_id: str, *, commit: str, parent: str,
               subject: str, message: str, test_patch: bytes, fix_patch: bytes, f2p: list[str],
               p2p: list[str], origin: str) -> None:
    repo_dir = folder / "repo"
    export_tree(opts.repo, parent, repo_dir)
    (folder / "tests").mkdir()
    (folder / "tests" / "hidden.patch").write_bytes(test_patch)
    (folder / "solution").mkdir()
    (folder / "solution" / "fix.patch").write_bytes(fix_patch)
    meta: dict[str, Any] = {
        "id": task_id,
        "title": subject[:200],
        "tier": opts.tier,
        "max_duration_s": 900,
        "solution": {"patch": "solution/fix.patch"},
        "hidden_tests": {"patch": "tests/hidden.patch"},
    }
    meta["test_command"] = list(_test_argv(opts, []))  # stored even when the default: the task says how it is graded
    meta["required_outcomes"] = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
    meta["source"] = {"repo": origin, "commit": commit, "parent": parent}
    if opts.environment is not None:
        from ledger.tasks.environments import write_environment

        meta["environment"] = write_environment(folder, opts.environment)
        meta["needs"] = ["container"]  # its dependencies are in the image, not next to eval-ledger
    statement = message if not opts.statement else f"{opts.statement.strip()}\n\n{message}"
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    (folder / "task.md").write_text(f"---\n{head}---\n\n{statement.strip()}\n", encoding="utf-8")


def examine(opts: MineOptions, info: CommitInfo, clock: _Clock, scratch: Path) -> Mined:
    """Decide one commit; on acceptance the task folder is written under ``opts.out/opts.tier``."""
    repo, commit, subject = opts.repo, info.commit, info.subject

    def reject(reason: str) -> Mined:
        return Mined(commit, subject, False, reason)

    if not info.parents:
        return reject("root commit: no parent to start from")
    if len(info.parents) > 1:
        return reject("merge commit")
    parent = info.parents[0]
    changed = list(info.changed)
    tests = [p for p in changed if is_test_path(p)]
    source = [p for p in changed if not is_test_path(p)]
    if not tests:
        return reject("no test changes: nothing shows the fix")
    if not source:
        return reject("only test changes: no fix to make")
    status = dict(_name_status(repo, parent, commit))
    modules = [p for p in tests if is_test_module(p) and status.get(p) != "D"]
    if not modules:
        return reject("no test module added or changed (only helpers or conftest)")
    problem = _tree_problems(repo, parent)
    if problem:
        return reject(problem)
    subject, message = _message(repo, commit)
    described = _statement_from(opts, commit, message)
    if described:
        message = f"{described.strip()}\n\n{message}"

    test_patch = git(repo, "diff", "--binary", "--full-index", "--no-renames", parent, commit, "--", *tests,
                     binary=True)
    fix_patch = git(repo, "diff", "--binary", "--full-index", "--no-renames", parent, commit, "--", *source,
                    binary=True)
    symbols = symbols_under_test(fix_patch.decode("utf-8", "replace"), test_patch.decode("utf-8", "replace"))
    statement = f"{opts.statement or ''}\n{message}"
    if not opts.allow_thin and thin_statement(statement, symbols):
        return reject(f"statement too thin: it names none of {', '.join(sorted(symbols)[:4])}, which "
                      "the new tests call (--statement-from DIR adds a description; --allow-thin keeps it)")
    base = Path(tempfile.mkdtemp(prefix="mine-", dir=scratch))
    try:
        start = base / "start"
        export_tree(repo, parent, start)
        before, after = base / "before", base / "after"
        shutil.copytree(start, before)
        (base / "tests.patch").write_bytes(test_patch)
        (base / "fix.patch").write_bytes(fix_patch)
        applied = apply.git_apply(base / "tests.patch", before)
        if not applied.ok:
            return reject(f"the test change does not apply to the parent: {applied.detail}")
        shutil.copytree(before, after)
        applied = apply.git_apply(base / "fix.patch", after)
        if not applied.ok:
            return reject(f"the fix does not apply to the parent: {applied.detail}")
        argv = _test_argv(opts, modules)
        runs_before, runs_after = [], []
        out_b, sum_b = clock.run(argv, before, opts.timeout_s)
        out_a, sum_a = clock.run(argv, after, opts.timeout_s)
        runs_before.append(out_b)
        runs_after.append(out_a)
        if not out_a:
            return reject(f"the tests did not run after the fix ({sum_a or 'no output'})")
        f2p = sorted(t for t, o in out_a.items() if o == "passed" and out_b.get(t) != "passed")
        if not f2p:
            return reject("no test fails before and passes after (the tests already pass on the parent)")
        for _ in range(opts.runs - 1):
            runs_before.append(clock.run(argv, before, opts.timeout_s)[0])
            runs_after.append(clock.run(argv, after, opts.timeout_s)[0])
        flaky = sorted({t for runs in (runs_before, runs_after) for r in runs[1:]
                        for t in set(r) | set(runs[0]) if r.get(t) != runs[0].get(t)})
        if flaky:
            return reject(f"flaky over {opts.runs} runs: {', '.join(flaky[:3])}"
                          + (f" and {len(flaky) - 3} more" if len(flaky) > 3 else ""))
        p2p = sorted(t for t, o in out_a.items() if o == "passed" and out_b.get(t) == "passed")
        task_id = f"{_slug(repo)}-{commit[:12]}"
        folder = opts.out / opts.tier / task_id
        if folder.exists():
            return reject(f"{folder} exists already (mined before?)")
        folder.parent.mkdir(parents=True, exist_ok=True)
        _write_task(opts, folder, commit=commit, parent=parent, subject=subject, message=message,
                    test_patch=test_patch, fix_patch=fix_patch, f2p=f2p, p2p=p2p,
                    origin=str(repo.resolve()))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if opts.validate:
        started = time.monotonic()
        try:
            result = validate_task(load_task(folder, tier=opts.tier), workdir=scratch)
        except TaskError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            return reject(f"the task folder does not load: {exc}")
        finally:
            clock.test_s += time.monotonic() - started
        if not result.ok:
            shutil.rmtree(folder, ignore_errors=True)
            return reject("not fair: " + "; ".join(f"{c.name} ({c.detail})" for c in result.failed)[:300])
    return Mined(commit, subject, True, f"{len(f2p)} FAIL_TO_PASS, {len(p2p)} PASS_TO_PASS",
                 task_id=task_id, folder=str(folder), fail_to_pass=len(f2p), pass_to_pass=len(p2p))


def _name_status(repo: Path, parent: str, commit: str) -> list[tuple[str, str]]:
    parts = [p for p in git(repo, "diff-tree", "-r", "--no-commit-id", "--no-renames", "--name-status", "-z",
                            parent, commit).split("\0") if p]
    return [(parts[i + 1], parts[i][0]) for i in range(0, len(parts) - 1, 2)]


@contextlib.contextmanager
def _mining_runner(opts: MineOptions, confinement: runner.Confinement, tmp: Path) -> Iterator[runner.CommandRunner]:
    """The runner the repository's tests run in: ``runner.isolated``, or with ``opts.environment``
    containers of its image (the confinement's ``in_environment``; built once for every commit)."""
    if opts.environment is None:
        with runner.isolated(tmp) as active:
            yield active
        return
    from ledger.tasks.environments import write_environment
    from ledger.tasks.fields import parse_environment

    make = getattr(confinement, "in_environment", None)
    if make is None:
        raise NothingToRun(f"--environment {opts.environment}: the tasks' environment needs a container "
                           "engine, and this command was given none (--sandbox none?)")
    base = tmp / "environment-source"
    meta = write_environment(base, opts.environment)
    env = parse_environment(meta, base, f"--environment {opts.environment}")
    with runner.using(make(tmp, env, base)) as active:
        yield active


def mine(opts: MineOptions, progress: Say | None = None, *,
         confinement: runner.Confinement = runner.PLAIN) -> MineReport:
    """Examine the candidate commits of ``opts.repo`` and write a task folder for each accepted one."""
    repo = Path(opts.repo)
    if not (repo / ".git").exists() and git(repo, "rev-parse", "--is-inside-work-tree").strip() != "true":
        raise UsageError(f"{repo}: not a git repository")
    if opts.max_tasks is not None and opts.max_tasks < 1:
        raise UsageError("--max must be at least 1")
    if opts.runs < 1:
        raise UsageError("runs must be at least 1")
    if not opts.test_command:
        raise UsageError("--test-cmd is empty")
    report = MineReport(repo=str(repo.resolve()), tier=opts.tier, out=str(Path(opts.out) / opts.tier))
    started = time.monotonic()
    clock = _Clock()
    commits = candidates(opts)
    with tempfile.TemporaryDirectory(prefix="ledger-mine-") as tmp, \
            runner.confining(confinement), _mining_runner(opts, confinement, Path(tmp)) as active:
        report.sandboxed = active.confined
        for n, info in enumerate(commits, 1):
            if opts.max_tasks is not None and len(report.accepted) >= opts.max_tasks:
                break
            try:
                result = examine(opts, info, clock, Path(tmp))
            except (TaskError, OSError) as exc:  # one odd commit must not end the mining
                result = Mined(info.commit, info.subject, False, f"cannot package: {exc}")
            report.results.append(result)
            if progress is not None:
                verdict = "accepted" if result.accepted else "rejected"
                progress(f"[{n}/{len(commits)}] {info.commit[:12]} {verdict}: {result.reason}")
    report.seconds = time.monotonic() - started
    report.test_seconds = clock.test_s
    return report


def parse_test_command(text: str) -> tuple[str, ...]:
    try:
        return split_command(text)
    except CommandError as exc:
        raise UsageError(f"--test-cmd: {exc}") from None
