"""What every agent process gets, and what is kept out of the journal: the ``LEDGER_*``
environment, the credentials found in it, argument substitution, program and harness versions."""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Mapping

from ledger.agents.contracts import AttemptContext

VERSION_TIMEOUT_S = 10.0
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSW(OR)?D|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL",
                          re.IGNORECASE)
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")
_STATE_ENV = ("LEDGER_ATTEMPT",)


def env_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """Values of environment variables whose names say they are credentials."""
    return tuple(sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}))


def base_env(ctx: AttemptContext, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness environment plus the ``LEDGER_*`` variables every agent gets."""
    env = {k: v for k, v in os.environ.items() if k not in _STATE_ENV}
    env.update({
        "LEDGER_WORKTREE": str(ctx.worktree),
        "LEDGER_PROMPT_FILE": str(ctx.prompt_file),
        "LEDGER_TASK_ID": ctx.task_id,
    })
    if extra:
        env.update(extra)
    return env


def safe_name(text: str) -> str:
    return _NAME_OK.sub("-", text).strip("-.") or "agent"


def substitute(arg: str, ctx: AttemptContext) -> str:
    for key, value in (("{prompt_file}", str(ctx.prompt_file)), ("{worktree}", str(ctx.worktree)),
                       ("{task_id}", ctx.task_id), ("{prompt}", ctx.prompt)):
        arg = arg.replace(key, value)
    return arg


_version_lock = threading.Lock()
_versions: dict[tuple[str, ...], str | None] = {}


def program_version(argv: tuple[str, ...], timeout: float = VERSION_TIMEOUT_S) -> str | None:
    """First line of ``argv`` (e.g. ``claude --version``), cached per process; None on failure."""
    with _version_lock:
        if argv in _versions:
            return _versions[argv]
    try:
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
        lines = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip().splitlines()
        version = lines[0].strip()[:200] if proc.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired):
        version = None
    with _version_lock:
        _versions[argv] = version
    return version


def harness_version() -> str:
    try:
        from importlib.metadata import version

        return f"eval-ledger {version('eval-ledger')}"
    except Exception:
        return "eval-ledger (unknown version)"


__all__ = ["VERSION_TIMEOUT_S", "base_env", "env_secrets", "harness_version", "program_version",
           "safe_name", "substitute"]
