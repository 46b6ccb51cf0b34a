"""A command as a person writes it, made into an argv: the one parser of that shape, for a task's
commands (``ledger.tasks.fields``), an ``[agents.NAME] command`` of ledger.toml
(``ledger.run.config``, ``ledger.agents.registry``), ``cmd:PROGRAM ...`` and ``--test-cmd``.

A command is a string, split into words the way a POSIX shell splits them (``shlex``), or a list
of strings taken as they are; it is never empty and its program is never ``""``. What is wrong
is a ``CommandError`` that says what, not where: each caller prefixes its own place and raises
its own error class. Pure.
"""

from __future__ import annotations

import shlex
from typing import Any


class CommandError(ValueError):
    """Why a value is not a command (the caller says where it was written)."""


def split_command(value: Any) -> tuple[str, ...]:
    """``value`` (a string or a list of strings) as an argv; ``CommandError`` if it is none."""
    if isinstance(value, str):
        try:
            argv = tuple(shlex.split(value))
        except ValueError as exc:
            raise CommandError(f"cannot split command {value!r}: {exc}") from None
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        argv = tuple(value)
    else:
        raise CommandError("command must be a string or a list of strings")
    if not argv or not argv[0]:
        raise CommandError("empty command")
    return argv


__all__ = ["CommandError", "split_command"]
