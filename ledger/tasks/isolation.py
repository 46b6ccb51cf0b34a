"""Run the test commands of ``mine`` and the importers in the isolation sandbox when this host has
one (``ledger.sandbox``, bubblewrap): no network, the system and the interpreter read-only, only
the throw-away folder of the check writable, its own HOME and TMPDIR. Without bubblewrap they run
as ordinary processes, as ``ledger tasks validate`` runs them.

    with isolated(root):        # every validate.run_command inside runs sandboxed under root
        validate_task(task)

The switch is a context variable, so parallel validations in other threads are unaffected.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# (writable root, extra read-only paths) while inside ``isolated``.
_ROOT: contextvars.ContextVar[tuple[Path, tuple[str, ...]] | None] = contextvars.ContextVar(
    "ledger_tasks_sandbox", default=None)


@functools.cache
def available() -> bool:
    """Whether bubblewrap works on this host (probed once per process)."""
    from ledger.sandbox import sandbox_status

    return sandbox_status("auto").mode == "bwrap"


@contextlib.contextmanager
def isolated(root: Path, *, readable: Sequence[Path] = (), enabled: bool = True) -> Iterator[bool]:
    """Within the block, task commands run sandboxed with ``root`` (a fresh folder) writable and
    ``readable`` (e.g. the task folder whose solution script runs) read-only. Yields whether they
    really are (``enabled`` and bubblewrap works)."""
    on = enabled and available()
    token = _ROOT.set((Path(root).resolve(), tuple(str(Path(p).resolve()) for p in readable)) if on else None)
    try:
        yield on
    finally:
        _ROOT.reset(token)


def wrap(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, env) to run ``argv`` in ``cwd``: sandboxed when inside ``isolated``, else unchanged."""
    current = _ROOT.get()
    if current is None:
        return list(argv), dict(env)
    root, extra = current
    from ledger.sandbox import bwrap_command
    from ledger.sandbox.policy import PolicyRequest, build_policy
    from ledger.sandbox.setup import interpreter_paths, path_dirs, sandbox_env

    home, tmp = root / ".home", root / ".tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    path_env = env.get("PATH", os.defpath)
    program = argv[0] if argv and argv[0].startswith("/") else None
    policy = build_policy(PolicyRequest(
        cwd=cwd, writable=[root], path_env=path_env,
        programs=[program] if program and not program.startswith(("/usr/", "/bin/", "/sbin/", "/lib")) else [],
        readable=[*interpreter_paths(), *path_dirs(path_env, []), *extra], network="none", purpose="grading",
    ))
    return bwrap_command(policy, list(argv)), sandbox_env(env, home=home, scratch=tmp)
