"""The built-in agents, run as a subprocess so that they are observed exactly like real agents.

    python -P -m ledger.agents.builtin noop
    python -P -m ledger.agents.builtin oracle --task-root TASK_DIR
    python -P -m ledger.agents.builtin demo   --steps STEPS.json
    python -P -m ledger.agents.builtin replay --files FILES.json

The working directory is the worktree. Each prints a JSON-lines transcript on stdout
(``{"type": "tool.call"|"tool.result"|"agent.output"|"usage", ...}``, parsed by
``BuiltinParser``) and exits 0, or 1 when a step failed, or 2 on bad arguments.

* ``noop`` does nothing.
* ``oracle`` applies the task's reference solution: copies every file of ``TASK_DIR/solution/``
  over the worktree, or applies its solution patch, or runs its solution command. It reads the
  ground truth, so its attempts are contaminated by construction.
* ``demo`` re-enacts a demonstration trajectory, a JSON list of steps: ``{"read": PATH}``,
  ``{"run": [ARGV...]}`` (or a shell-words string), ``{"write": PATH, "content": TEXT}``,
  ``{"replace": PATH, "old": TEXT, "new": TEXT}`` (first occurrence), ``{"say": TEXT}``.
* ``replay`` applies a JSON map ``{PATH: CONTENT or null}`` (null deletes the file).

Paths are relative to the worktree and may not leave it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ledger.argv import CommandError, split_command

RUN_TIMEOUT_S = 120
OUTPUT_LIMIT = 64 * 1024


def emit(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"type": kind, **fields}, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class StepError(Exception):
    pass


def inside(root: Path, rel: str) -> Path:
    if not isinstance(rel, str) or not rel or os.path.isabs(rel):
        raise StepError(f"path must be relative to the worktree: {rel!r}")
    target = (root / rel).resolve()
    base = root.resolve()
    if target != base and base not in target.parents:
        raise StepError(f"path leaves the worktree: {rel!r}")
    return target


def do_read(root: Path, rel: str) -> None:
    emit("tool.call", tool="read", input={"path": rel})
    text = inside(root, rel).read_text(encoding="utf-8", errors="replace")
    emit("tool.result", tool="read", output=text, is_error=False)


def do_write(root: Path, rel: str, content: str) -> None:
    emit("tool.call", tool="write", input={"path": rel, "content": content})
    target = inside(root, rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    emit("tool.result", tool="write", output=f"wrote {rel}", is_error=False)


def do_replace(root: Path, rel: str, old: str, new: str) -> None:
    emit("tool.call", tool="edit", input={"path": rel, "old": old, "new": new})
    target = inside(root, rel)
    text = target.read_text(encoding="utf-8")
    if old not in text:
        emit("tool.result", tool="edit", output=f"text to replace not found in {rel}", is_error=True)
        raise StepError(f"replace: text not found in {rel}")
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    emit("tool.result", tool="edit", output=f"edited {rel}", is_error=False)


def do_run(root: Path, argv: list[str] | str) -> bool:
    try:
        args = list(split_command(argv))
    except CommandError as exc:
        raise StepError(f"run: {exc}") from None
    emit("tool.call", tool="bash", input={"argv": args})
    try:
        proc = subprocess.run(args, cwd=root, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=RUN_TIMEOUT_S)
        output = (proc.stdout + proc.stderr)[:OUTPUT_LIMIT].decode("utf-8", "replace")
        code = proc.returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        output, code = str(exc), 127
    emit("tool.result", tool="bash", output=output, is_error=code != 0)
    return code == 0


def run_demo(root: Path, steps: Any) -> int:
    if not isinstance(steps, list):
        raise StepError("demo steps must be a JSON list")
    failed = False
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise StepError(f"step {i}: expected an object, got {type(step).__name__}")
        try:
            if "read" in step:
                do_read(root, step["read"])
            elif "write" in step:
                do_write(root, step["write"], str(step.get("content", "")))
            elif "replace" in step:
                do_replace(root, step["replace"], str(step.get("old", "")), str(step.get("new", "")))
            elif "run" in step:
                do_run(root, step["run"])  # a failing command is information, not a failed step
            elif "say" in step:
                emit("agent.output", text=str(step["say"]))
            else:
                raise StepError(f"step {i}: unknown step {sorted(step)}")
        except (StepError, OSError) as exc:
            emit("agent.output", text=f"demo step {i} failed: {exc}")
            failed = True
    return 1 if failed else 0


def run_oracle(root: Path, task_root: Path) -> int:
    solution = task_root / "solution"
    if not solution.is_dir():
        emit("agent.output", text=f"no solution/ folder in {task_root}")
        return 1
    if (task_root / "task.md").is_file():
        from ledger.tasks.loader import load_task

        task = load_task(task_root)
        if task.solution.kind != "files":
            return _oracle_apply(root, task)
    for src in sorted(p for p in solution.rglob("*") if p.is_file()):
        rel = src.relative_to(solution).as_posix()
        emit("tool.call", tool="read", input={"path": str(src)})
        content = src.read_bytes()
        emit("tool.result", tool="read", output=content.decode("utf-8", "replace"), is_error=False)
        emit("tool.call", tool="write", input={"path": rel})
        target = inside(root, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        emit("tool.result", tool="write", output=f"wrote {rel}", is_error=False)
    return 0


def _oracle_apply(root: Path, task: Any) -> int:
    """A patch or command solution, applied the one way the harness applies it."""
    from ledger.tasks.apply import apply_solution

    sol = task.solution
    if sol.kind == "patch":
        patch = task.root / sol.patch
        emit("tool.call", tool="read", input={"path": str(patch)})
        emit("tool.result", tool="read", output=patch.read_text(encoding="utf-8", errors="replace"),
             is_error=False)
        emit("tool.call", tool="bash", input={"argv": ["git", "apply", str(patch)]})
    else:
        emit("tool.call", tool="bash", input={"argv": ["/bin/sh", "-c", sol.command]})
    applied = apply_solution(task, root)
    emit("tool.result", tool="bash", output=applied.detail, is_error=not applied.ok)
    return 0 if applied.ok else 1


def run_replay(root: Path, files: Any) -> int:
    if not isinstance(files, dict):
        raise StepError("replay files must be a JSON object {path: content or null}")
    failed = False
    for rel, content in sorted(files.items()):
        try:
            if content is None:
                emit("tool.call", tool="delete", input={"path": rel})
                target = inside(root, rel)
                if target.is_file() or target.is_symlink():
                    target.unlink()
                emit("tool.result", tool="delete", output=f"deleted {rel}", is_error=False)
            else:
                do_write(root, rel, str(content))
        except (StepError, OSError) as exc:
            emit("agent.output", text=f"replay of {rel} failed: {exc}")
            failed = True
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ledger.agents.builtin")
    parser.add_argument("agent", choices=["noop", "oracle", "demo", "replay"])
    parser.add_argument("--worktree", default=".")
    parser.add_argument("--task-root")
    parser.add_argument("--steps")
    parser.add_argument("--files")
    args = parser.parse_args(argv)
    root = Path(args.worktree)
    code = 0
    try:
        if args.agent == "oracle":
            if not args.task_root:
                raise StepError("oracle needs --task-root")
            code = run_oracle(root, Path(args.task_root))
        elif args.agent == "demo":
            if not args.steps:
                raise StepError("demo needs --steps FILE")
            code = run_demo(root, json.loads(Path(args.steps).read_text(encoding="utf-8")))
        elif args.agent == "replay":
            if not args.files:
                raise StepError("replay needs --files FILE")
            code = run_replay(root, json.loads(Path(args.files).read_text(encoding="utf-8")))
    except (StepError, OSError, ValueError) as exc:
        emit("agent.output", text=f"{args.agent}: {exc}")
        code = 2
    emit("usage", tokens_in=0, tokens_out=0, cost_usd=0.0, model=None)
    return code


if __name__ == "__main__":
    sys.exit(main())
