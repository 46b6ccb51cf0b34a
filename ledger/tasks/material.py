"""Read a task's ground truth and public material from disk, for ``attest.commitment``.

``attest`` is pure; this module only turns a ``Task`` into the
``(label, bytes)`` lists that ``build_commitment`` takes.

Ground truth, derived automatically (the operator may add to it, never remove from it):

    tests/<rel>       every file of the hidden tests folder
    solution/<rel>    every file of the reference solution
    hidden/<field>    every hidden frontmatter field (strings as they are, other values as
                      canonical JSON)
    extra/<name>      operator-supplied material

Public material (windows found here are not secret, so they are not committed): every file of
``repo/`` (git metadata excluded: a fix planted in history stays secret), the prompt, the title and
the public task summary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from attest.commitment import Commitment, build_commitment
from ledger.errors import UsageError
from ledger.tasks.model import Task


def _files(folder: Path) -> list[tuple[str, bytes]]:
    from ledger.tasks.loader import iter_files

    if not folder.is_dir():
        return []
    out = []
    for rel, path in iter_files(folder):
        if rel == ".git" or rel.startswith(".git/"):
            continue
        out.append((rel, path.read_bytes()))
    return out


def _field_text(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")


def ground_truth_material(task: Task, extra: Sequence[tuple[str, bytes]] = ()
                          ) -> list[tuple[str, bytes]]:
    """Hidden tests, reference solution, hidden fields, then ``extra`` (labels ``extra/...``)."""
    material = [(f"tests/{rel}", data) for rel, data in _files(task.tests_dir)]
    material += [(f"solution/{rel}", data) for rel, data in _files(task.solution_dir)]
    material += [(f"hidden/{name}", _field_text(value))
                 for name, value in sorted(task.hidden_fields.items())]
    for name, data in extra:
        if not isinstance(name, str) or not name or not isinstance(data, bytes | bytearray):
            raise UsageError("extra ground-truth material must be (name, bytes) pairs")
        label = name if name.startswith("extra/") else f"extra/{name}"
        material.append((label, bytes(data)))
    return material


def public_material(task: Task) -> list[tuple[str, bytes]]:
    """What the agent may see anyway: repo files by relative path, plus ``@`` texts."""
    from ledger.tasks.loader import task_summary

    public = _files(task.repo_dir)
    summary = {k: v for k, v in task_summary(task).items() if k not in ("root", "hash")}
    public.append(("@prompt", task.prompt.encode("utf-8")))
    public.append(("@title", task.title.encode("utf-8")))
    public.append(("@summary", json.dumps(summary, sort_keys=True, default=str).encode("utf-8")))
    return public


def commitment_for_task(task: Task, *, key: bytes, extra: Sequence[tuple[str, bytes]] = (),
                        window: int | None = None) -> Commitment:
    """Read the task and commit to its ground truth (public windows and paths excluded)."""
    kwargs = {} if window is None else {"window": window}
    return build_commitment(
        ground_truth_material(task, extra),
        key=key,
        public=public_material(task),
        root=str(Path(task.root).resolve()),
        **kwargs,
    )
