"""``ledger run``'s pre-flight: start the box an agent would get, once, with a trivial command.

    check_agent_box(sandbox, argv, path_env=, hidden=, harness_code=)  the backend's message
                                 when that box cannot start (the run is refused, exit 3, before
                                 anything is journaled), None when it can

It works through the Sandbox port only (``ledger.sandbox.port``), in throw-away folders, so every
registered backend gets the same pre-flight.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ledger.sandbox.port import AgentRequest, Sandbox

_TIMEOUT_S = 20.0


def check_agent_box(sandbox: Sandbox, argv: Sequence[str], *, path_env: str,
                    hidden: Sequence[str], harness_code: bool = False) -> str | None:
    """Start the agent box of a command line ``argv`` with ``/bin/sh -c :`` (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="ledger-preflight-") as tmp:
        folders = [Path(tmp) / name for name in ("wt", "home", "scratch")]
        for folder in folders:
            folder.mkdir()
        box = sandbox.agent_box(AgentRequest(
            worktree=folders[0], home=folders[1], scratch=folders[2], argv=tuple(argv),
            path_env=path_env, hidden=tuple(hidden), harness_code=harness_code))
        try:
            confined = box.command(["/bin/sh", "-c", ":"],
                                   {"PATH": path_env or os.defpath, "LANG": "C.UTF-8"})
            try:
                proc = subprocess.run(confined.argv, capture_output=True, timeout=_TIMEOUT_S,
                                      stdin=subprocess.DEVNULL, pass_fds=confined.pass_fds,
                                      preexec_fn=confined.preexec, cwd=folders[0], env=confined.env)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{sandbox.name}: could not start the sandbox: {exc}"[:500]
            box.started()
            return box.failure(proc.returncode, proc.stderr.decode("utf-8", "replace"))
        finally:
            box.close()


__all__ = ["check_agent_box"]
