"""The field parsers of the task format: each turns one frontmatter value (or a side file such
as ``demo.yaml`` and ``repo_history.yaml``) into its typed form, or raises a ``TaskError`` naming
the file and the field. ``loader.load_task`` composes them; nothing here reads a task folder
except ``_task_file``'s existence check and ``parse_environment``'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ledger.argv import CommandError, split_command
from ledger.errors import TaskError
from ledger.tasks.model import NEEDS, Environment, Grading, Signal, Solution

REWARD_FILES = ("reward.txt", "reward.json")

_SIGNAL_FORMS = (
    "{command: [argv...] or 'shell string', expect_exit: 0}, {path_exists: PATH} or "
    "{file_contains: {path: PATH, pattern: REGEX}}"
)
_DEMO_ACTIONS = {
    "read": frozenset({"read"}),
    "run": frozenset({"run"}),
    "write": frozenset({"write", "content"}),
    "replace": frozenset({"replace", "old", "new"}),
    "say": frozenset({"say"}),  # text the demo agent prints as its own output
}
_OUTCOMES = {
    True: "pass",
    False: "fail",
    "pass": "pass",
    "passed": "pass",
    "fail": "fail",
    "failed": "fail",
    "skip": "skip",
    "skipped": "skip",
}



@dataclass(frozen=True)
class HistoryCommit:
    """One commit of ``repo_history.yaml``: files to write (content) or delete (None)."""

    message: str
    files: Mapping[str, str | None]



# --------------------------------------------------------------------------- YAML


# libyaml's parser when PyYAML was built with it (the wheels are): the same documents and errors,
# parsed about five times faster than by the pure-Python one (a task.md is read per attempt)
_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeBase):  # type: ignore[misc]
    """SafeLoader that refuses duplicate mapping keys (a silent override hides typos)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(text: str, where: Path, *, line_offset: int = 0) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1 + line_offset})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TaskError(f"{where}: invalid YAML{at}: {problem}") from None
    except RecursionError:  # the pure-Python loader (no libyaml) on a deeply nested document
        raise TaskError(f"{where}: invalid YAML: nested too deeply") from None


# --------------------------------------------------------------------------- field parsing


def _rel_path(value: Any, where: str) -> str:
    """A path relative to the worktree that cannot climb out of it."""
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{where}: expected a relative path, got {value!r}")
    posix = PurePosixPath(value)
    if posix.is_absolute() or ".." in posix.parts or "\\" in value:
        raise TaskError(f"{where}: path must stay inside the worktree: {value!r}")
    return value


def _str_list(value: Any, where: str, *, paths: bool = False) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise TaskError(f"{where}: expected a list of strings")
    if paths:
        return tuple(_rel_path(v, where) for v in value)
    return tuple(value)


def _number(value: Any, where: str, *, integer: bool = False, positive: bool = True) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise TaskError(f"{where}: expected {'an integer' if integer else 'a number'}, got {value!r}")
    number: float | int = value if integer else float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise TaskError(f"{where}: out of range: {value!r}")
    return number


def _command(value: Any, where: str) -> tuple[str, ...]:
    try:
        return split_command(value)
    except CommandError as exc:
        raise TaskError(f"{where}: {exc}") from None


def parse_signal(raw: Any, where: str) -> Signal:
    """One completion signal; anything that is not an executable form is a TaskError."""
    if isinstance(raw, str) or not isinstance(raw, dict):
        raise TaskError(f"{where}: not an executable signal: {raw!r}; write one of {_SIGNAL_FORMS}")
    keys = set(raw)
    if "command" in keys:
        extra = keys - {"command", "expect_exit"}
        if extra:
            raise TaskError(f"{where}: unknown signal keys {sorted(extra)} in {raw!r}")
        cmd = raw["command"]
        if isinstance(cmd, str):
            if not cmd.strip():
                raise TaskError(f"{where}: empty command in {raw!r}")
            command: tuple[str, ...] | str = cmd
        elif isinstance(cmd, list) and cmd and all(isinstance(v, str) and v for v in cmd):
            command = tuple(cmd)
        else:
            raise TaskError(f"{where}: command must be a non-empty argv list or a shell string: {raw!r}")
        expect = raw.get("expect_exit", 0)
        if isinstance(expect, bool) or not isinstance(expect, int) or not 0 <= expect <= 255:
            raise TaskError(f"{where}: expect_exit must be an integer 0..255: {raw!r}")
        return Signal(kind="command", command=command, expect_exit=expect)
    if keys == {"path_exists"}:
        return Signal(kind="path_exists", path=_rel_path(raw["path_exists"], where))
    if keys == {"file_contains"}:
        spec = raw["file_contains"]
        if not isinstance(spec, dict) or set(spec) != {"path", "pattern"}:
            raise TaskError(f"{where}: file_contains needs exactly {{path, pattern}}: {raw!r}")
        pattern = spec["pattern"]
        if not isinstance(pattern, str) or not pattern:
            raise TaskError(f"{where}: file_contains pattern must be a non-empty string: {raw!r}")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TaskError(f"{where}: bad regex {pattern!r}: {exc}") from None
        return Signal(kind="file_contains", path=_rel_path(spec["path"], where), pattern=pattern)
    raise TaskError(f"{where}: not an executable signal: {raw!r}; write one of {_SIGNAL_FORMS}")


def _plain(value: Any) -> bool:
    """JSON-like data only (what the journal can encode): no dates, no binary, str map keys."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _outcomes(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskError(f"{where}: expected a map of test (or command) to pass/fail")
    out: dict[str, str] = {}
    for key, outcome in value.items():
        norm = _OUTCOMES.get(outcome.lower() if isinstance(outcome, str) else outcome)
        if not isinstance(key, str) or norm is None:
            raise TaskError(f"{where}: {key!r}: expected true/false or pass/fail/skip, got {outcome!r}")
        out[key] = norm
    return out


def parse_demo(raw: Any, where: Path, hidden_dir: str) -> tuple[dict[str, Any], ...]:
    """Validate a demo trajectory: read/run/write/replace/say steps, paths inside the worktree."""
    if not isinstance(raw, list) or not raw:
        raise TaskError(f"{where}: a demo is a non-empty list of steps")
    steps: list[dict[str, Any]] = []
    for i, step in enumerate(raw):
        at = f"{where}: step {i + 1}"
        if not isinstance(step, dict):
            raise TaskError(f"{at}: expected a map, got {step!r}")
        actions = [a for a in _DEMO_ACTIONS if a in step]
        if len(actions) != 1:
            raise TaskError(f"{at}: needs exactly one of {sorted(_DEMO_ACTIONS)}")
        action = actions[0]
        if set(step) != _DEMO_ACTIONS[action]:
            raise TaskError(f"{at}: {action} takes keys {sorted(_DEMO_ACTIONS[action])}, got {sorted(step)}")
        if action == "run":
            steps.append({"run": list(_command(step["run"], at))})
            continue
        if action == "say":
            if not isinstance(step["say"], str):
                raise TaskError(f"{at}: say takes a string")
            steps.append({"say": step["say"]})
            continue
        path = _rel_path(step[action], at)
        if PurePosixPath(path).parts[0] == hidden_dir:
            raise TaskError(f"{at}: a demo must not touch the hidden tests ({path})")
        for key in ("content", "old", "new"):
            if key in step and not isinstance(step[key], str):
                raise TaskError(f"{at}: {key} must be a string")
        if action == "replace" and not step["old"]:
            raise TaskError(f"{at}: replace needs a non-empty 'old'")
        steps.append(dict(step))
    return tuple(steps)


def parse_history(raw: Any, where: Path) -> tuple[HistoryCommit, ...]:
    """Validate ``repo_history.yaml``: a list of {message, files: {path: content or null}}."""
    if not isinstance(raw, list) or not raw:
        raise TaskError(f"{where}: repo history is a non-empty list of commits")
    commits: list[HistoryCommit] = []
    for i, commit in enumerate(raw):
        at = f"{where}: commit {i + 1}"
        if not isinstance(commit, dict) or set(commit) != {"message", "files"}:
            raise TaskError(f"{at}: a commit is {{message, files}}")
        message, files = commit["message"], commit["files"]
        if not isinstance(message, str) or not message.strip():
            raise TaskError(f"{at}: message must be a non-empty string")
        if not isinstance(files, dict) or not files:
            raise TaskError(f"{at}: files must be a non-empty map of path to content (or null)")
        for path, content in files.items():
            _rel_path(path, at)
            if content is not None and not isinstance(content, str):
                raise TaskError(f"{at}: {path}: content must be a string or null")
        commits.append(HistoryCommit(message=message, files=dict(files)))
    return tuple(commits)



def _task_file(folder: Path, value: Any, where: str, under: str) -> str:
    """A file of the task folder under ``under/`` (so it is committed as ground truth)."""
    rel = _rel_path(value, where)
    if PurePosixPath(rel).parts[0] != under or len(PurePosixPath(rel).parts) < 2:
        raise TaskError(f"{where}: must name a file under {under}/, got {value!r}")
    if not (folder / rel).is_file():
        raise TaskError(f"{where}: {rel} does not exist")
    return rel


def _exact_keys(raw: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TaskError(f"{where}: expected a map with keys {sorted(allowed)}")
    extra = sorted(set(raw) - allowed)
    if extra:
        raise TaskError(f"{where}: unknown key(s) {extra}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(raw))
    if missing:
        raise TaskError(f"{where}: missing key(s) {missing}")
    return raw


def _shell(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{where}: expected a non-empty shell command string")
    return value


def parse_solution(raw: Any, folder: Path, where: str) -> Solution:
    """``solution: {patch: solution/X.patch}`` or ``{command: 'sh string'}``; absent: files."""
    if raw is None:
        return Solution()
    spec = _exact_keys(raw, {"patch", "command"}, set(), where)
    if len(spec) != 1:
        raise TaskError(f"{where}: give exactly one of patch or command")
    if "patch" in spec:
        return Solution(kind="patch", patch=_task_file(folder, spec["patch"], f"{where}.patch", "solution"))
    return Solution(kind="command", command=_shell(spec["command"], f"{where}.command"))


def parse_grading(raw: Any, where: str) -> Grading:
    """``grading: {command, reward_file?, timeout_s?}``."""
    spec = _exact_keys(raw, {"command", "reward_file", "timeout_s"}, {"command"}, where)
    reward = spec.get("reward_file")
    if reward is not None and reward not in REWARD_FILES:
        raise TaskError(f"{where}.reward_file: must be one of {', '.join(REWARD_FILES)}, got {reward!r}")
    timeout = spec.get("timeout_s")
    return Grading(
        command=_shell(spec["command"], f"{where}.command"),
        reward_file=reward,
        timeout_s=None if timeout is None else float(_number(timeout, f"{where}.timeout_s")),
    )


def _test_ids(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise TaskError(f"{where}: expected a list of test ids (path/to/test_file.py::test_name)")
    ids = tuple(value)
    dup = sorted({v for v in ids if ids.count(v) > 1})
    if dup:
        raise TaskError(f"{where}: duplicate test id(s) {dup[:3]}")
    for v in ids:
        if v.startswith(("-", "/")) or "::" not in v and not v.endswith(".py"):
            raise TaskError(f"{where}: {v!r} is not a test id (path/to/test_file.py::test_name)")
    return ids


def parse_required_outcomes(raw: Any, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``required_outcomes: {FAIL_TO_PASS: [ids], PASS_TO_PASS: [ids]}`` (SWE-bench's names)."""
    spec = _exact_keys(raw, {"FAIL_TO_PASS", "PASS_TO_PASS"}, {"FAIL_TO_PASS"}, where)
    f2p = _test_ids(spec["FAIL_TO_PASS"], f"{where}.FAIL_TO_PASS")
    p2p = _test_ids(spec.get("PASS_TO_PASS"), f"{where}.PASS_TO_PASS")
    if not f2p:
        raise TaskError(f"{where}.FAIL_TO_PASS: at least one test must go from failing to passing")
    both = sorted(set(f2p) & set(p2p))
    if both:
        raise TaskError(f"{where}: test id(s) in both FAIL_TO_PASS and PASS_TO_PASS: {both[:3]}")
    return f2p, p2p


def parse_source(raw: Any, where: str) -> dict[str, str]:
    """``source: {repo, commit, parent}``: where a mined or imported task came from."""
    spec = _exact_keys(raw, {"repo", "commit", "parent", "instance_id", "format"}, {"repo"}, where)
    out: dict[str, str] = {}
    for key, value in spec.items():
        if not isinstance(value, str) or not value.strip():
            raise TaskError(f"{where}.{key}: expected a non-empty string")
        if key in ("commit", "parent") and not re.fullmatch(r"[0-9a-f]{7,64}", value):
            raise TaskError(f"{where}.{key}: expected a git commit id (hex), got {value!r}")
        out[key] = value
    return out


def parse_needs(raw: Any, where: str) -> tuple[str, ...]:
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TaskError(f"{where}: expected a name or a list of names from {list(NEEDS)}")
    bad = [n for n in names if n not in NEEDS]
    if bad:
        raise TaskError(f"{where}: unknown need(s) {bad}; known: {list(NEEDS)}")
    return tuple(dict.fromkeys(names))


# An image reference: [registry[:port]/]name[:tag][@sha256:64 hex] (lower-case path components).
_IMAGE_RE = re.compile(
    r"^(?:[a-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
_WORKDIR_RE = re.compile(r"^\s*WORKDIR\s+(\S+)", re.IGNORECASE | re.MULTILINE)


def dockerfile_workdir(text: str, default: str = "/app") -> str:
    """The last absolute ``WORKDIR`` of a Dockerfile (where its files are), else ``default``."""
    found = [w for w in _WORKDIR_RE.findall(text) if w.startswith("/")]
    return found[-1] if found else default


def parse_environment(raw: Any, folder: Path, where: str) -> Environment:
    """``environment: {image: REF}`` or ``{dockerfile: PATH, context?: DIR}``, ``workdir?`` either way."""
    spec = _exact_keys(raw, {"image", "dockerfile", "context", "workdir"}, set(), where)
    if ("image" in spec) == ("dockerfile" in spec):
        raise TaskError(f"{where}: give exactly one of image or dockerfile")
    workdir = spec.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not workdir.startswith("/")
                                or ".." in PurePosixPath(workdir).parts or workdir == "/"):
        raise TaskError(f"{where}.workdir: expected an absolute container path below /, got {workdir!r}")
    if "image" in spec:
        if "context" in spec:
            raise TaskError(f"{where}: context is only used with dockerfile")
        image = spec["image"]
        if not isinstance(image, str) or not _IMAGE_RE.match(image):
            raise TaskError(f"{where}.image: not an image reference (name[:tag] or name@sha256:<64 hex>): "
                            f"{image!r}")
        return Environment(image=image, workdir=workdir or "/app")
    dockerfile = _rel_path(spec["dockerfile"], f"{where}.dockerfile")
    if not (folder / dockerfile).is_file():
        raise TaskError(f"{where}.dockerfile: {dockerfile} does not exist in the task folder")
    context = _rel_path(spec.get("context", str(PurePosixPath(dockerfile).parent)), f"{where}.context")
    parts = PurePosixPath(context).parts
    if not parts or parts[0] in ("tests", "solution"):
        raise TaskError(f"{where}.context: {context} would put hidden ground truth into the image")
    if not (folder / context).is_dir():
        raise TaskError(f"{where}.context: {context} is not a folder of the task")
    text = (folder / dockerfile).read_text(encoding="utf-8", errors="replace")
    return Environment(dockerfile=dockerfile, context=context, workdir=workdir or dockerfile_workdir(text))
