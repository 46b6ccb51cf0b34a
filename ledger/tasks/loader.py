"""Load golden tasks from disk: one folder per task, validated completely at load time.

    <tier>/<task-id>/
        task.md             YAML frontmatter + the prompt (markdown body)
        repo/               starting code; its own tests under repo/tests/ are PASS_TO_PASS
        tests/              hidden FAIL_TO_PASS tests (enter the worktree as tests_hidden/ later)
        solution/           files that, copied over repo/, solve the task
        demo.yaml           optional: a demonstration trajectory for the built-in demo agent
        repo_history.yaml   optional: git commits replayed into the worktree before the agent runs

Nothing passes by default: a completion signal that cannot be executed, an unknown frontmatter
key, a missing folder or a malformed YAML file is a ``TaskError`` that names the file.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.resources
import re
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ledger.errors import MalformedInput, NotFound, NothingToRun, TaskError
from ledger.tasks.fields import (
    REWARD_FILES,
    HistoryCommit,
    _command,
    _exact_keys,
    _load_yaml,
    _number,
    _outcomes,
    _plain,
    _rel_path,
    _str_list,
    _task_file,
    parse_demo,
    parse_environment,
    parse_grading,
    parse_history,
    parse_needs,
    parse_required_outcomes,
    parse_signal,
    parse_solution,
    parse_source,
)
from ledger.tasks.model import TIERS, Task

__all__ = ["DEFAULT_TEST_COMMAND", "HISTORY_FILE", "REWARD_FILES", "HistoryCommit", "available_tiers",
           "iter_files", "load_repo_history", "load_task", "load_tasks", "load_tier", "packaged_root",
           "refuse_unrunnable", "task_hash", "task_summary", "tier_source"]

TASK_FILE = "task.md"
DEMO_FILE = "demo.yaml"
HISTORY_FILE = "repo_history.yaml"

# Build and tool caches that appear when someone runs the tests in a task folder; they are not
# part of the task (not hashed, not copied).
IGNORED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_FRONTMATTER_END = re.compile(r"^---[ \t]*$", re.MULTILINE)

# Frontmatter keys and whether a task must give them. ``description`` is Bernstein's name for
# the prompt (used when the markdown body is empty).
_KEYS: dict[str, bool] = {
    "id": False,
    "title": True,
    "tier": False,
    "description": False,
    "max_duration_s": False,
    "max_cost_usd": False,
    "max_tokens": False,
    "limits": False,
    "completion_signals": False,
    "owned_files": False,
    "expected_files_modified": False,
    "network_allowlist": False,
    "role": False,
    "expected_test_outcomes": False,
    "hidden": False,
    "hidden_tests_dir": False,
    "regression_command": False,
    "hidden_test_command": False,
    "solution": False,
    "hidden_tests": False,
    "grading": False,
    "test_command": False,
    "required_outcomes": False,
    "source": False,
    "needs": False,
    "environment": False,
}

# The runner test ids are appended to when a task is graded by required per-test outcomes.
DEFAULT_TEST_COMMAND = ("python", "-m", "pytest", "-rA", "-p", "no:cacheprovider")

# --------------------------------------------------------------------------- files and hash


def _ignored(rel: PurePosixPath) -> bool:
    return any(part in IGNORED_NAMES for part in rel.parts) or rel.name.endswith(IGNORED_SUFFIXES)


def iter_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """Yield (posix relative path, absolute path) of every file under ``folder``, sorted.

    Caches (``__pycache__``, ``*.pyc``, ...) are skipped; a symlink is a TaskError, because a
    task folder must be self-contained.
    """
    found: list[tuple[str, Path]] = []
    for path in folder.rglob("*"):
        rel = PurePosixPath(path.relative_to(folder).as_posix())
        if _ignored(rel):
            continue
        if path.is_symlink():
            raise TaskError(f"{path}: symlinks are not allowed in a task folder")
        if path.is_file():
            found.append((rel.as_posix(), path))
    found.sort(key=lambda item: item[0].encode("utf-8"))
    return iter(found)


def task_hash(folder: Path) -> str:
    """Hex SHA-256 over every file of the folder: sorted (path, bytes), each length-prefixed.

    For each file in UTF-8 byte order of its relative path: 8-byte big-endian length of the path,
    the path, 8-byte big-endian length of the content, the content.
    """
    digest = hashlib.sha256()
    for rel, path in iter_files(folder):
        name = rel.encode("utf-8")
        data = path.read_bytes()
        digest.update(len(name).to_bytes(8, "big"))
        digest.update(name)
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def load_repo_history(task: Task) -> tuple[HistoryCommit, ...]:
    """The commits to replay into a fresh worktree before the agent starts (empty if none).

    Replay them in order (write each file, delete those mapped to null, commit with the
    message); afterwards the working tree equals ``repo/`` (``ledger tasks validate`` checks it).
    """
    path = task.root / HISTORY_FILE
    if not path.is_file():
        return ()
    return parse_history(_load_yaml(path.read_text(encoding="utf-8"), path), path)




# --------------------------------------------------------------------------- task.md


def split_frontmatter(text: str, where: Path) -> tuple[dict[str, Any], str]:
    """Split ``task.md`` into (frontmatter map, markdown body)."""
    text = text.removeprefix("\ufeff")
    first, _, rest = text.partition("\n")
    if first.rstrip() != "---":
        raise TaskError(f"{where}: missing YAML frontmatter (the file must start with a '---' line)")
    end = _FRONTMATTER_END.search(rest)
    if end is None:
        raise TaskError(f"{where}: frontmatter is not closed by a '---' line")
    meta = _load_yaml(rest[: end.start()], where, line_offset=1)
    if not isinstance(meta, dict):
        raise TaskError(f"{where}: frontmatter must be a YAML map, got {type(meta).__name__}")
    bad = [k for k in meta if not isinstance(k, str)]
    if bad:
        raise TaskError(f"{where}: frontmatter keys must be strings: {bad!r}")
    return meta, rest[end.end() :].strip("\n")


def _test_fields(meta: dict[str, Any], folder: Path, md: Path, hidden_dir: str) -> dict[str, Any]:
    """The hidden-test, grading, solution, outcome, source and needs fields (they constrain each other)."""
    out: dict[str, Any] = {}
    out["solution"] = parse_solution(meta.get("solution"), folder, f"{md}: solution")
    if "hidden_tests" in meta:
        spec = _exact_keys(meta["hidden_tests"], {"patch"}, {"patch"}, f"{md}: hidden_tests")
        out["hidden_tests_patch"] = _task_file(folder, spec["patch"], f"{md}: hidden_tests.patch", "tests")
    if "source" in meta:
        out["source"] = parse_source(meta["source"], f"{md}: source")
    if "needs" in meta:
        out["needs"] = parse_needs(meta["needs"], f"{md}: needs")
    grading = parse_grading(meta["grading"], f"{md}: grading") if "grading" in meta else None
    graded_by_ids = "required_outcomes" in meta
    if grading is not None and graded_by_ids:
        raise TaskError(f"{md}: grading and required_outcomes exclude each other (one decides the verdict)")
    if "test_command" in meta and not graded_by_ids:
        raise TaskError(f"{md}: test_command is only used with required_outcomes")
    derived = grading is not None or graded_by_ids
    for key in ("hidden_test_command",) + (("regression_command",) if graded_by_ids else ()):
        if key in meta and derived:
            raise TaskError(f"{md}: {key} is derived from {'grading' if grading else 'required_outcomes'}; drop it")
    out["regression_command"] = (
        _command(meta["regression_command"], f"{md}: regression_command")
        if "regression_command" in meta
        else () if derived else ("python", "-m", "pytest", "-q", "tests")
    )
    if graded_by_ids:
        f2p, p2p = parse_required_outcomes(meta["required_outcomes"], f"{md}: required_outcomes")
        test_command = (
            _command(meta["test_command"], f"{md}: test_command") if "test_command" in meta else DEFAULT_TEST_COMMAND
        )
        out.update(fail_to_pass=f2p, pass_to_pass=p2p, test_command=test_command)
        out["hidden_test_command"] = (*test_command, *f2p, *p2p)
    elif grading is not None:
        out["grading"] = grading
        out["hidden_test_command"] = ("/bin/sh", "-c", grading.command)
    else:
        out["hidden_test_command"] = (
            _command(meta["hidden_test_command"], f"{md}: hidden_test_command")
            if "hidden_test_command" in meta
            else ("python", "-m", "pytest", "-q", hidden_dir)
        )
    return out


def _check_keys(meta: dict[str, Any], md: Path) -> None:
    unknown = sorted(set(meta) - set(_KEYS))
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(_KEYS), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TaskError(f"{md}: unknown frontmatter key(s): {', '.join(hints)}")
    missing = [k for k, required in _KEYS.items() if required and k not in meta]
    if missing:
        raise TaskError(f"{md}: missing frontmatter key(s): {', '.join(missing)}")


def _identity(meta: dict[str, Any], body: str, folder: Path, md: Path, tier: str | None) -> dict[str, Any]:
    """id, title, tier and prompt: who the task is and what the agent is asked."""
    task_id = meta.get("id", folder.name)
    if not isinstance(task_id, str) or not _ID_RE.match(task_id):
        raise TaskError(f"{md}: id must match {_ID_RE.pattern}, got {task_id!r}")
    if task_id != folder.name:
        raise TaskError(f"{md}: id {task_id!r} differs from the folder name {folder.name!r}")
    title = meta["title"]
    if not isinstance(title, str) or not title.strip():
        raise TaskError(f"{md}: title must be a non-empty string")
    declared = meta.get("tier")
    if declared is not None and (not isinstance(declared, str) or not _ID_RE.match(declared)):
        raise TaskError(f"{md}: tier must be a simple name, got {declared!r}")
    if tier is not None and declared is not None and declared != tier:
        raise TaskError(f"{md}: tier {declared!r} but the task lives in tier {tier!r}")
    # A task lives in <tier>/<task-id>/: without an explicit tier, the parent folder names it.
    resolved_tier = tier or declared or folder.resolve().parent.name
    if not _ID_RE.match(resolved_tier):
        raise TaskError(f"{md}: no tier (set 'tier' in the frontmatter)")
    description = meta.get("description")
    if description is not None and not isinstance(description, str):
        raise TaskError(f"{md}: description must be a string")
    prompt = body.strip() or (description or "").strip()
    if not prompt:
        raise TaskError(f"{md}: the prompt (markdown body) is empty")
    return {"id": task_id, "title": title.strip(), "tier": resolved_tier, "prompt": prompt}


def _check_folders(folder: Path) -> None:
    for sub in ("repo", "tests", "solution"):
        if not (folder / sub).is_dir():
            raise TaskError(f"{folder}: missing {sub}/ folder")
    if not any(True for _ in iter_files(folder / "tests")):
        raise TaskError(f"{folder}: tests/ has no hidden tests")
    if not any(True for _ in iter_files(folder / "solution")):
        raise TaskError(f"{folder}: solution/ is empty")


def _hidden_dir(meta: dict[str, Any], md: Path) -> str:
    hidden_dir = meta.get("hidden_tests_dir", "tests_hidden")
    _rel_path(hidden_dir, f"{md}: hidden_tests_dir")
    if "/" in hidden_dir or hidden_dir in ("tests", "."):
        raise TaskError(f"{md}: hidden_tests_dir must be one new folder name, got {hidden_dir!r}")
    return hidden_dir


def _scope_fields(meta: dict[str, Any], md: Path) -> dict[str, Any]:
    """Signals, hidden fields, role, budgets and limits, files and endpoints the task names."""
    raw_signals = meta.get("completion_signals") or []
    if not isinstance(raw_signals, list):
        raise TaskError(f"{md}: completion_signals must be a list")
    hidden = meta.get("hidden") or {}
    if not isinstance(hidden, dict) or not all(isinstance(k, str) for k in hidden):
        raise TaskError(f"{md}: hidden must be a map with string keys")
    if not _plain(hidden):
        # Never echo the values: they are ground truth.
        raise TaskError(f"{md}: hidden values must be strings, numbers, booleans, null, lists or maps")
    role = meta.get("role")
    if role is not None and not isinstance(role, str):
        raise TaskError(f"{md}: role must be a string")
    out: dict[str, Any] = {
        "signals": tuple(parse_signal(raw, f"{md}: completion_signals[{i}]") for i, raw in enumerate(raw_signals)),
        "hidden_fields": dict(hidden),
        "role": role,
        "owned_files": _str_list(meta.get("owned_files"), f"{md}: owned_files", paths=True),
        "expected_files_modified": _str_list(
            meta.get("expected_files_modified"), f"{md}: expected_files_modified", paths=True),
        "network_allowlist": _str_list(meta.get("network_allowlist"), f"{md}: network_allowlist"),
        "expected_test_outcomes": _outcomes(meta.get("expected_test_outcomes"), f"{md}: expected_test_outcomes"),
    }
    for key, integer in (("max_duration_s", False), ("max_cost_usd", False), ("max_tokens", True)):
        if key in meta:
            out[key] = _number(meta[key], f"{md}: {key}", integer=integer, positive=key != "max_cost_usd")
    if "limits" in meta:
        from ledger.limits import parse_limits

        try:
            out["limits"] = parse_limits(meta["limits"], f"{md}: limits")
        except MalformedInput as exc:
            raise TaskError(str(exc)) from None
    return out


def load_task(folder: Path, *, tier: str | None = None) -> Task:
    """Load and validate one task folder (``tier`` defaults to the frontmatter, then the parent dir)."""
    folder = Path(folder)
    md = folder / TASK_FILE
    if not md.is_file():
        raise TaskError(f"{folder}: not a task folder (no {TASK_FILE})")
    try:
        text = md.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{md}: not UTF-8 text: {exc}") from None
    meta, body = split_frontmatter(text, md)
    _check_keys(meta, md)
    identity = _identity(meta, body, folder, md, tier)
    _check_folders(folder)
    hidden_dir = _hidden_dir(meta, md)
    kwargs = {**_scope_fields(meta, md), **_test_fields(meta, folder, md, hidden_dir)}
    if "environment" in meta:
        kwargs["environment"] = parse_environment(meta["environment"], folder, f"{md}: environment")
    demo: tuple[dict[str, Any], ...] = ()
    demo_path = folder / DEMO_FILE
    if demo_path.is_file():
        demo = parse_demo(_load_yaml(demo_path.read_text(encoding="utf-8"), demo_path), demo_path, hidden_dir)
    history_path = folder / HISTORY_FILE
    if history_path.is_file():
        parse_history(_load_yaml(history_path.read_text(encoding="utf-8"), history_path), history_path)
    return Task(**identity, root=folder.resolve(), hash=task_hash(folder), hidden_tests_dir=hidden_dir,
                demo=demo, **kwargs)


# --------------------------------------------------------------------------- tiers


def packaged_root() -> Path:
    """The folder of the packaged tiers (``ledger/tasks/golden`` inside the installed package)."""
    root = importlib.resources.files("ledger.tasks") / "golden"
    if not isinstance(root, Path) or not root.is_dir():
        raise TaskError(f"packaged golden tasks not found on the file system ({root})")
    return root


def _task_dirs(tier_dir: Path) -> list[Path]:
    if not tier_dir.is_dir():
        return []
    return sorted(
        (p for p in tier_dir.iterdir() if p.is_dir() and p.name not in IGNORED_NAMES and not p.name.startswith(".")),
        key=lambda p: p.name,
    )


def tier_source(tier: str, *, overrides: Path | None = None) -> Path:
    """The folder a tier is loaded from: the operator's override when non-empty, else packaged."""
    if overrides is not None and _task_dirs(Path(overrides) / tier):
        return Path(overrides) / tier
    return packaged_root() / tier


def available_tiers(*, overrides: Path | None = None) -> list[str]:
    """The standard tiers, then any extra tier folders the operator added, sorted."""
    extra: list[str] = []
    if overrides is not None and Path(overrides).is_dir():
        extra = sorted(
            p.name
            for p in Path(overrides).iterdir()
            if p.name not in TIERS and _ID_RE.match(p.name) and _task_dirs(p)
        )
    return [*TIERS, *extra]


def load_tier(tier: str, *, overrides: Path | None = None) -> list[Task]:
    """Every task of one tier, sorted by id. Operator tasks in ``<overrides>/<tier>/`` replace
    the packaged tier when that folder exists and holds at least one task folder."""
    known = available_tiers(overrides=overrides)
    if tier not in known:
        raise NotFound(f"unknown tier {tier!r}; tiers: {', '.join(known)}")
    source = tier_source(tier, overrides=overrides)
    return [load_task(folder, tier=tier) for folder in _task_dirs(source)]


def load_tasks(
    tiers: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    *,
    overrides: Path | None = None,
) -> list[Task]:
    """Tasks of the given tiers (default: all), optionally only the given ids, in tier then id order.

    An unknown id is a NotFound that lists the closest task ids; a task id that appears in two
    tiers is a TaskError.
    """
    selected = list(dict.fromkeys(tiers)) if tiers else available_tiers(overrides=overrides)
    tasks: list[Task] = []
    seen: dict[str, Task] = {}
    for tier in selected:
        for task in load_tier(tier, overrides=overrides):
            if task.id in seen:
                raise TaskError(
                    f"task id {task.id!r} appears twice: {seen[task.id].root} and {task.root}"
                )
            seen[task.id] = task
            tasks.append(task)
    if not ids:
        return tasks
    wanted = list(dict.fromkeys(ids))
    missing = [i for i in wanted if i not in seen]
    if missing:
        parts = []
        for name in missing:
            close = difflib.get_close_matches(name, list(seen), n=3, cutoff=0.5)
            parts.append(f"{name!r}" + (f" (close: {', '.join(close)})" if close else ""))
        scope = f" in tier(s) {', '.join(selected)}" if tiers else ""
        raise NotFound(f"unknown task id {'; '.join(parts)}{scope}")
    keep = set(wanted)
    return [t for t in tasks if t.id in keep]


def refuse_unrunnable(tasks: Sequence[Task]) -> None:
    """Refuse a run holding tasks this host cannot run (``needs: container``).

    All of them: NothingToRun (exit 3). Some: a TaskError (exit 2) naming them, so the run can be
    narrowed with ``--task``; nothing is half-run.
    """
    blocked = [t for t in tasks if t.needs]
    if not blocked:
        return
    names = ", ".join(f"{t.id} (needs {', '.join(t.needs)})" for t in blocked[:5])
    more = f" and {len(blocked) - 5} more" if len(blocked) > 5 else ""
    why = ("no container executor exists yet (the engine layer does: docs/ENVIRONMENTS.md; "
           "`python -m ledger.sandbox.container probe` says whether this machine runs containers)")
    if len(blocked) == len(tasks):
        raise NothingToRun(f"nothing can run on this host: {names}{more}; {why}")
    raise TaskError(f"{len(blocked)} selected task(s) cannot run on this host: {names}{more}; {why}; "
                    "leave them out with --task")


def task_summary(task: Task) -> dict[str, Any]:
    """What may be shown about a task to anyone: never hidden fields, tests or solution."""
    return {
        "id": task.id,
        "title": task.title,
        "tier": task.tier,
        "hash": task.hash,
        "root": str(task.root),
        **task.budgets(),
        "signals": [s.as_dict() for s in task.signals],
        "owned_files": list(task.owned_files),
        "expected_files_modified": list(task.expected_files_modified),
        "network_allowlist": list(task.network_allowlist),
        "role": task.role,
        "regression_command": list(task.regression_command),
        # With required outcomes the hidden command lists hidden test ids: show the runner only.
        "hidden_test_command": list(task.test_command if task.graded_by_ids else task.hidden_test_command),
        "graded_by": "test-ids" if task.graded_by_ids else "reward-file" if task.grading and task.grading.reward_file
        else "command",
        "solution_kind": task.solution.kind,
        "needs": list(task.needs),
        "has_demo": bool(task.demo),
        "has_history": (task.root / HISTORY_FILE).is_file(),
        # only when there is one: the summary of a task without an environment is as it was
        **({"environment": task.environment.as_dict()} if task.environment else {}),
    }
