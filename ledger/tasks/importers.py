"""Import tasks of other suites as ordinary task folders: SWE-bench instances and Harbor /
Terminal-Bench task folders.

SWE-bench (``import_swebench``): one JSON record per line with ``repo`` ("owner/name"),
``instance_id``, ``base_commit``, ``patch``, ``test_patch``, ``problem_statement``,
``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists, or JSON strings of lists as the published datasets
hold them); ``environment_setup_commit``, ``version`` and ``hints_text`` are kept in ``hidden``
(hints are never given to the agent). The repository comes from a local clone under
``REPOS/<owner>__<name>`` (no network): the starting repo is ``base_commit``, ``test_patch`` the
hidden tests, ``patch`` the solution, the two id lists the required outcomes. An instance is
skipped with its reason when the clone or commit is missing, when its test ids are not pytest
node ids (repositories with their own runners need SWE-bench's per-repo images), or when the
task does not prove fair here: the reference patch must turn every FAIL_TO_PASS id green and keep
every PASS_TO_PASS id green with this interpreter (or ``python``, a virtualenv's interpreter that
has the repository's dependencies).

Harbor (``import_harbor``): a task folder holds ``task.toml``, ``instruction.md``,
``environment/`` (``Dockerfile`` and its build context), ``tests/test.sh`` (writes
``/logs/verifier/reward.txt`` or ``reward.json``) and ``solution/solve.sh``. Terminal-Bench's older
layout holds ``task.yaml`` (``instruction``, ``max_agent_timeout_sec``, ``max_test_timeout_sec``),
``Dockerfile``, ``run-tests.sh``, ``solution.sh`` and ``tests/``. The imported task: the
instruction as the prompt, the build context (without the Dockerfile) as the starting repo,
the tests as hidden tests, the test script as its grading command (with the reward file), the
solve script as a solution command, the agent time limit as ``max_duration_s``, and the
environment folder kept beside them. Container paths in the shell scripts
(``/logs/verifier``, ``/tests``, ``/solution`` and the Dockerfile's ``WORKDIR``) become variables
the harness sets, with the container path as their default, so the scripts still run unchanged
in the container. Then the oracle solution is run on this host: when the task does not prove
fair here, it is marked ``needs: container`` and the reason is reported. A task whose scripts
install software or use the network (``apt-get``, ``pip``, ``uvx``, ``curl``, ...) is marked so
without being tried: they need their container (in the isolation sandbox they could not reach the
network, and without it they would change this machine). The oracle check and the SWE-bench
test runs happen in temporary folders through the ``confinement`` the caller passes
(``ledger.tasks.runner``; the CLI passes the Sandbox port's), else as ordinary processes.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ledger import safefs
from ledger.errors import MalformedInput, TaskError, UsageError
from ledger.tasks import runner
from ledger.tasks.loader import DEFAULT_TEST_COMMAND, load_task
from ledger.tasks.mine import Say, export_tree, git
from ledger.tasks.model import Task
from ledger.tasks.validate import ValidationResult, validate_task

_ID_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PYTEST_ID = re.compile(r"^[^\s:][^:]*\.py(::[^:].*)?$")
SWEBENCH_REQUIRED = ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement",
                     "FAIL_TO_PASS", "PASS_TO_PASS")


@dataclass(frozen=True)
class Imported:
    name: str  # instance id or source folder
    accepted: bool
    reason: str
    task_id: str | None = None
    folder: str | None = None
    needs: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "accepted": self.accepted, "reason": self.reason, "task_id": self.task_id,
                "folder": self.folder, "needs": list(self.needs)}


@dataclass
class ImportReport:
    format: str
    out: str
    results: list[Imported] = field(default_factory=list)

    @property
    def accepted(self) -> list[Imported]:
        return [r for r in self.results if r.accepted]

    def as_dict(self) -> dict[str, Any]:
        return {"format": self.format, "out": self.out, "imported": len(self.accepted),
                "skipped": len(self.results) - len(self.accepted),
                "runnable": sum(1 for r in self.accepted if not r.needs),
                "results": [r.as_dict() for r in self.results]}


def _safe_id(text: str) -> str:
    out = _ID_SAFE.sub("-", text).strip("-.")[:120]
    return out or "task"


def _write_md(folder: Path, meta: Mapping[str, Any], prompt: str) -> None:
    head = yaml.safe_dump(dict(meta), sort_keys=False, allow_unicode=True, width=1000)
    (folder / "task.md").write_text(f"---\n{head}---\n\n{prompt.strip()}\n", encoding="utf-8")


def _failed_checks(result: Any) -> str:
    return "; ".join(f"{c.name} ({c.detail})" for c in result.failed)[:400]


# --------------------------------------------------------------------------- SWE-bench


def read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {type(exc).__name__}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except (ValueError, RecursionError):
            raise MalformedInput(f"{path}: line {n} is not JSON (or is nested too deeply)") from None


def _id_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return list(value)


def _swebench_one(record: Any, repos: Path, out: Path, tier: str, python: str | None,
                  scratch: Path, environment: bool = False) -> Imported:
    if not isinstance(record, dict):
        return Imported("?", False, "not a JSON object")
    name = str(record.get("instance_id") or "?")

    def skip(reason: str) -> Imported:
        return Imported(name, False, reason)

    missing = [k for k in SWEBENCH_REQUIRED if k not in record]
    if missing:
        return skip(f"missing field(s) {', '.join(missing)}")
    for key in ("repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement"):
        if not isinstance(record[key], str) or not record[key].strip():
            return skip(f"field {key} must be a non-empty string")
    f2p, p2p = _id_list(record["FAIL_TO_PASS"]), _id_list(record["PASS_TO_PASS"])
    if f2p is None or p2p is None:
        return skip("FAIL_TO_PASS / PASS_TO_PASS must be lists of test ids (or JSON strings of them)")
    if not f2p:
        return skip("FAIL_TO_PASS is empty")
    odd = [t for t in f2p + p2p if not _PYTEST_ID.match(t)]
    if odd:
        return skip(f"test ids are not pytest node ids (e.g. {odd[0]!r}): this repository's own test runner "
                    "needs the SWE-bench environment image")
    owner_name = record["repo"]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", owner_name):
        return skip(f"repo must be owner/name, got {owner_name!r}")
    clone = repos / owner_name.replace("/", "__")
    if not (clone / ".git").exists():
        return skip(f"no local clone at {clone}")
    base = record["base_commit"]
    if not re.fullmatch(r"[0-9a-f]{7,64}", base):
        return skip("base_commit is not a commit id")
    try:
        base = git(clone, "rev-parse", "--verify", f"{base}^{{commit}}").strip()
    except TaskError:
        return skip(f"base_commit {base[:12]} is not in {clone}")
    task_id = _safe_id(name)
    folder = out / tier / task_id
    if folder.exists():
        return skip(f"{folder} exists already")
    folder.mkdir(parents=True)
    try:
        export_tree(clone, base, folder / "repo")
        links = safefs.links_out(folder / "repo") + safefs.specials(folder / "repo")
        if links:
            raise _Skip(f"the repository holds symlinks (task folders are self-contained): "
                        f"repo/{links[0]}" + (f" and {len(links) - 1} more" if len(links) > 1 else ""))
        (folder / "tests").mkdir()
        (folder / "tests" / "hidden.patch").write_text(record["test_patch"], encoding="utf-8")
        (folder / "solution").mkdir()
        (folder / "solution" / "fix.patch").write_text(record["patch"], encoding="utf-8")
        statement = record["problem_statement"]
        title = next((ln.strip("# ").strip() for ln in statement.splitlines() if ln.strip()), name)
        hidden = {k: record[k] for k in ("environment_setup_commit", "version", "hints_text", "created_at")
                  if isinstance(record.get(k), str)}
        meta: dict[str, Any] = {
            "id": task_id, "title": title[:200], "tier": tier, "max_duration_s": 1800,
            "solution": {"patch": "solution/fix.patch"},
            "hidden_tests": {"patch": "tests/hidden.patch"},
        }
        if python:
            meta["test_command"] = [python, *DEFAULT_TEST_COMMAND[1:]]
        meta["required_outcomes"] = {"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p}
        meta["source"] = {"repo": owner_name, "parent": base, "instance_id": name, "format": "swebench"}
        if hidden:
            meta["hidden"] = hidden
        if environment:
            meta["environment"] = swebench_environment(folder, record.get("python"))
        needs = _prove_swebench(folder, meta, statement, tier, scratch, environment)
        if needs is not None:
            return Imported(name, True, needs, task_id=task_id, folder=str(folder), needs=("container",))
    except _Skip as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return skip(str(exc))
    except (TaskError, OSError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return skip(f"cannot build the task: {exc}")
    except BaseException:  # whatever fails, no half-written task folder stays behind
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Imported(name, True, f"{len(f2p)} FAIL_TO_PASS, {len(p2p)} PASS_TO_PASS", task_id=task_id,
                    folder=str(folder))


_PY_VERSION = re.compile(r"^3\.\d{1,2}$")


def swebench_environment(folder: Path, python: Any = None) -> dict[str, str]:
    """Write ``environment/Dockerfile`` for an imported instance and return its ``environment``:
    the instance's Python (``FROM python:<python>-slim``, the record's ``python`` or 3.11; built
    ``--from`` the base image where that image is absent) and the repository's
    ``requirements*.txt`` at the base commit installed with pip. The build context is ``repo/``
    (the starting code the agent sees anyway), copied to ``/ledger-env`` in the image so
    requirement lines naming local files resolve; the worktree itself is mounted at run time."""
    version = python if isinstance(python, str) and _PY_VERSION.match(python) else "3.11"
    reqs = sorted(p.name for p in (folder / "repo").glob("requirements*.txt") if p.is_file())
    lines = [f"FROM python:{version}-slim", "WORKDIR /app"]
    if reqs:
        lines += ["COPY . /ledger-env/", "WORKDIR /ledger-env"]
        lines += [f"RUN python3 -m pip install --no-cache-dir --break-system-packages -r {r}" for r in reqs]
        lines += ["WORKDIR /app"]
    (folder / "environment").mkdir(exist_ok=True)
    (folder / "environment" / "Dockerfile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"dockerfile": "environment/Dockerfile", "context": "repo", "workdir": "/app"}


def _prove_swebench(folder: Path, meta: dict[str, Any], statement: str, tier: str, scratch: Path,
                    environment: bool) -> str | None:
    """Validate the written task on this host: None when it proves fair here; with an environment,
    the reason it is marked ``needs: container`` when only its environment is missing here; else
    ``_Skip``."""
    _write_md(folder, meta, statement)
    task = load_task(folder, tier=tier)
    with runner.isolated(scratch):
        result = validate_task(task, workdir=scratch)
    if result.ok:
        return None
    failed = {c.name for c in result.failed}
    env = failed & {"hidden-passes-after", "required-outcomes", "solution-applies"}
    if env and environment and "solution-applies" not in failed:
        meta["needs"] = ["container"]
        _write_md(folder, meta, statement)
        inside = in_environment(load_task(folder, tier=tier), scratch)
        if inside is not None and not inside.ok:
            raise _Skip(f"not fair in its environment: {_failed_checks(inside)}")
        return f"needs its container: on this host {_failed_checks(result)}" + _proved(inside)
    raise _Skip(("environment cannot be built here: " if env else "not fair: ") + _failed_checks(result))


def in_environment(task: Task, scratch: Path) -> ValidationResult | None:
    """``task`` validated in containers of its image, when the caller's confinement runs tasks in
    their environment (``runner.confining_now`` has ``in_environment``: an engine works); None
    when it does not (the task is then imported unproven, ``needs: container``)."""
    confinement = runner.confining_now()
    if task.environment is None or not hasattr(confinement, "in_environment"):
        return None
    return validate_task(task, workdir=scratch, confinement=confinement)


def _proved(inside: ValidationResult | None) -> str:
    if inside is None:
        return "; not tried in its environment (no container engine)"
    if inside.ok:
        image = (inside.environment or {}).get("image", "its image")
        return f"; in its environment ({image}) the oracle passes and the noop fails"
    return f"; in its environment too: {_failed_checks(inside)}"


class _Skip(Exception):
    pass


def import_swebench(path: Path, repos: Path, *, out: Path, tier: str = "swebench", python: str | None = None,
                    progress: Say | None = None, environment: bool = False,
                    confinement: runner.Confinement = runner.PLAIN) -> ImportReport:
    """Import every record of a SWE-bench JSONL file against local clones under ``repos``
    (``environment``: each task gets its built environment, ``swebench_environment``)."""
    if not Path(repos).is_dir():
        raise UsageError(f"--repos {repos}: not a folder")
    report = ImportReport(format="swebench", out=str(Path(out) / tier))
    records = list(read_jsonl(path))
    with tempfile.TemporaryDirectory(prefix="ledger-import-") as tmp, runner.confining(confinement):
        for n, (_line, record) in enumerate(records, 1):
            result = _swebench_one(record, Path(repos), Path(out), tier, python, Path(tmp), environment)
            report.results.append(result)
            if progress is not None:
                verdict = "imported" if result.accepted else "skipped"
                progress(f"[{n}/{len(records)}] {result.name} {verdict}: {result.reason}")
    return report


# --------------------------------------------------------------------------- Harbor / Terminal-Bench


_SKIP_ENV = frozenset({"Dockerfile", "docker-compose.yaml", "docker-compose.yml", ".dockerignore"})


def _container_paths(text: str, workdir: str) -> str:
    """Container paths in a shell script become harness variables defaulting to those paths."""
    roots = [("/logs/verifier", "LEDGER_VERIFIER_DIR"), ("/tests", "LEDGER_TESTS_DIR"),
             ("/solution", "LEDGER_SOLUTION_DIR")]
    if workdir not in ("/", "") and workdir not in {r for r, _ in roots}:
        roots.append((workdir.rstrip("/"), "LEDGER_WORKDIR"))
    for root, var in roots:
        pattern = re.compile(r"(?<![\w$}./-])" + re.escape(root) + r"(?=[/\s\"';)|&]|$)", re.MULTILINE)
        text = pattern.sub("${" + var + ":-" + root + "}", text)
    return text


# Commands that change the machine or reach the network: a script using them needs its container,
# so the task is not tried on this host.
_HOST_UNSAFE = re.compile(
    r"(?<![\w./-])(apt-get|apt|yum|dnf|apk|pip3?|uv|uvx|curl|wget|npm|npx|docker|sudo|systemctl|git\s+clone)(?![\w./-])")


def host_unsafe(folder: Path) -> str | None:
    """The first machine-changing or network command in the task's shell scripts, if any."""
    for path in sorted(folder.rglob("*.sh")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            code = line.split("#", 1)[0]
            m = _HOST_UNSAFE.search(code)
            if m:
                return f"{path.relative_to(folder).as_posix()} runs {m.group(1)!r}"
    return None


def _workdir(dockerfile: Path) -> str:
    workdir = "/app"
    if dockerfile.is_file():
        for line in dockerfile.read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"\s*WORKDIR\s+(\S+)", line, re.IGNORECASE)
            if m:
                workdir = m.group(1)
    return workdir


def _copy(src: Path, dst: Path, *, rewrite: str | None = None, skip: frozenset[str] = frozenset()) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if rel.parts[0] in skip or any(p in ("__pycache__", ".git") for p in rel.parts):
            continue
        if path.is_symlink():
            raise _Skip(f"{path} is a symlink (task folders are self-contained)")
        target = dst / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if rewrite is not None and path.suffix == ".sh":
            target.write_text(_container_paths(path.read_text(encoding="utf-8"), rewrite), encoding="utf-8")
        else:
            shutil.copyfile(path, target)


def harbor_folders(root: Path) -> list[Path]:
    """The task folders under ``root`` (``root`` itself when it is one)."""
    def is_task(p: Path) -> bool:
        return (p / "task.toml").is_file() or (p / "task.yaml").is_file()

    if is_task(root):
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and is_task(p))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def _tree_refusal(src: Path) -> str | None:
    """Why the folder is refused before a single file of it is read (a link, a FIFO), or None.

    The folder is data: nothing in it is followed out of it (to the operator's keys, to another task).
    """
    if src.is_symlink():
        return f"{src.name} is a symbolic link (task folders are self-contained)"
    found = safefs.walk(src)
    links = sorted(rel for rel, n in found.nodes.items() if n.kind == safefs.LINK)
    if links:
        return (f"{links[0]} is a symbolic link (task folders are self-contained; links are "
                "refused)" + (f", and {len(links) - 1} more" if len(links) > 1 else ""))
    special = sorted(rel for rel, n in found.nodes.items() if n.kind == safefs.OTHER)
    if special:
        return f"{special[0]} is not a regular file (a FIFO, socket or device)"
    return None


@dataclass(frozen=True)
class _HarborSource:
    """What a Harbor (``task.toml``) or Terminal-Bench (``task.yaml``) folder declares."""

    src: Path
    terminal_bench: bool
    instruction: str
    agent_s: float | None
    test_s: float | None
    test_script: str
    script_src: Path
    solve_script: Path
    env_dir: Path

    @property
    def dockerfile(self) -> Path:
        return self.env_dir / "Dockerfile"


def _read_harbor(src: Path) -> _HarborSource | str:
    """The folder's declarations, or the reason it is skipped."""
    terminal_bench = not (src / "task.toml").is_file()
    try:
        if terminal_bench:
            config = yaml.safe_load((src / "task.yaml").read_text(encoding="utf-8"))
            config = config if isinstance(config, dict) else {}
            instruction = config.get("instruction")
            agent_s, test_s = _number(config.get("max_agent_timeout_sec")), _number(config.get("max_test_timeout_sec"))
            test_script, solve_script, env_dir = "run-tests.sh", src / "solution.sh", src
        else:
            config = tomllib.loads((src / "task.toml").read_text(encoding="utf-8"))
            md = src / "instruction.md"
            instruction = md.read_text(encoding="utf-8") if md.is_file() else None
            agent_s = _number((config.get("agent") or {}).get("timeout_sec"))
            test_s = _number((config.get("verifier") or {}).get("timeout_sec"))
            test_script, solve_script, env_dir = "test.sh", src / "solution" / "solve.sh", src / "environment"
    except (OSError, UnicodeDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        return f"unreadable task configuration: {type(exc).__name__}"
    except RecursionError:
        return "unreadable task configuration: nested too deeply"
    if not isinstance(instruction, str) or not instruction.strip():
        return "no instruction"
    script_src = (src / test_script) if terminal_bench else (src / "tests" / test_script)
    if not script_src.is_file():
        return f"no {script_src.relative_to(src)}"
    if not solve_script.is_file():
        return f"no {solve_script.relative_to(src)}: no oracle solution to prove the task"
    return _HarborSource(src, terminal_bench, instruction, agent_s, test_s, test_script, script_src,
                         solve_script, env_dir)


_TB_TASK_FILES = frozenset({"tests", "solution.sh", "run-tests.sh", "task.yaml", "solution.yaml"})


def _write_harbor_files(hs: _HarborSource, folder: Path, workdir: str) -> None:
    """repo/ (the build context without its container files), environment/ (the whole context),
    tests/ and solution/ with container paths made variables."""
    (folder / "repo").mkdir()
    if hs.env_dir.is_dir():
        task_files = _TB_TASK_FILES if hs.terminal_bench else frozenset()
        _copy(hs.env_dir, folder / "repo", skip=_SKIP_ENV | task_files)
        _copy(hs.env_dir, folder / "environment", skip=task_files)
    (folder / "tests").mkdir()
    if (hs.src / "tests").is_dir():
        _copy(hs.src / "tests", folder / "tests", rewrite=workdir)
    if hs.terminal_bench:
        (folder / "tests" / hs.test_script).write_text(
            _container_paths(hs.script_src.read_text(encoding="utf-8"), workdir), encoding="utf-8")
    (folder / "solution").mkdir()
    if hs.terminal_bench:
        (folder / "solution" / "solve.sh").write_text(
            _container_paths(hs.solve_script.read_text(encoding="utf-8"), workdir), encoding="utf-8")
    else:
        _copy(hs.src / "solution", folder / "solution", rewrite=workdir)


def _harbor_meta(hs: _HarborSource, folder: Path, task_id: str, tier: str) -> dict[str, Any]:
    script_text = (folder / "tests" / hs.test_script).read_text(encoding="utf-8")
    grading: dict[str, Any] = {"command": f'bash "$LEDGER_TESTS_DIR/{hs.test_script}"'}
    if not hs.terminal_bench:
        grading["reward_file"] = "reward.json" if "reward.json" in script_text else "reward.txt"
    if hs.test_s:
        grading["timeout_s"] = hs.test_s
    title = next((ln.strip("# ").strip() for ln in hs.instruction.splitlines() if ln.strip()), hs.src.name)
    meta: dict[str, Any] = {"id": task_id, "title": title[:200], "tier": tier}
    if hs.agent_s:
        meta["max_duration_s"] = hs.agent_s
    meta["solution"] = {"command": 'bash "$LEDGER_SOLUTION_DIR/solve.sh"'}
    meta["grading"] = grading
    meta["source"] = {"repo": str(hs.src.resolve()), "format": "terminal-bench" if hs.terminal_bench else "harbor"}
    if (folder / "environment" / "Dockerfile").is_file():
        meta["environment"] = {"dockerfile": "environment/Dockerfile", "context": "environment"}
    return meta


def _harbor_one(src: Path, out: Path, tier: str, scratch: Path) -> Imported:
    name = src.name
    refused = _tree_refusal(src)
    hs = _read_harbor(src) if refused is None else refused
    if isinstance(hs, str):
        return Imported(name, False, hs)
    workdir = _workdir(hs.dockerfile)
    task_id = _safe_id(name)
    folder = out / tier / task_id
    if folder.exists():
        return Imported(name, False, f"{folder} exists already")
    folder.mkdir(parents=True)
    try:
        _write_harbor_files(hs, folder, workdir)
        meta = _harbor_meta(hs, folder, task_id, tier)
        _write_md(folder, meta, hs.instruction)
        unsafe = host_unsafe(folder)
        if unsafe is None:
            with runner.isolated(scratch, readable=[folder]):
                result = validate_task(load_task(folder, tier=tier), workdir=scratch)
            if result.ok:
                return Imported(name, True, "the oracle solution passes on this host", task_id=task_id,
                                folder=str(folder))
            reason = _failed_checks(result)
        else:
            reason = f"not tried: {unsafe}"
        meta["needs"] = ["container"]
        _write_md(folder, meta, hs.instruction)
        reason += _proved(in_environment(load_task(folder, tier=tier), scratch))
        return Imported(name, True, f"needs its container: on this host {reason}", task_id=task_id,
                        folder=str(folder), needs=("container",))
    except _Skip as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return Imported(name, False, str(exc))
    except (TaskError, OSError, UnicodeDecodeError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return Imported(name, False, f"cannot build the task: {exc}")
    except BaseException:  # whatever fails, no half-written task folder stays behind
        shutil.rmtree(folder, ignore_errors=True)
        raise


def import_harbor(root: Path, *, out: Path, tier: str = "harbor", progress: Say | None = None,
                  confinement: runner.Confinement = runner.PLAIN) -> ImportReport:
    """Import a Harbor or Terminal-Bench task folder, or every task folder under ``root``."""
    if not Path(root).is_dir():
        raise UsageError(f"{root}: not a folder")
    folders = harbor_folders(Path(root))
    if not folders:
        raise UsageError(f"{root}: no task folder (task.toml or task.yaml) found")
    report = ImportReport(format="harbor", out=str(Path(out) / tier))
    with tempfile.TemporaryDirectory(prefix="ledger-import-") as tmp, runner.confining(confinement):
        for n, src in enumerate(folders, 1):
            result = _harbor_one(src, Path(out), tier, Path(tmp))
            report.results.append(result)
            if progress is not None:
                verdict = "imported" if result.accepted else "skipped"
                progress(f"[{n}/{len(folders)}] {result.name} {verdict}: {result.reason}")
    return report

