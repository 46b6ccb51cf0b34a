"""The one error hierarchy of eval-ledger.

    LedgerError                      base; carries an exit code for the CLI
    +-- UsageError (ValueError)      bad input from the user: exit 2
    |   +-- NotFound (KeyError-like) unknown or ambiguous id, missing file
    |   +-- MalformedInput           a file, proof, bundle or note that cannot be parsed
    |   +-- CodecError               bytes that are not a canonical entry
    |   +-- KeyMaterialError         missing keys, loose permissions, bad key file
    |   +-- JournalFormatError       not a journal, or an unknown format version
    |   +-- TaskError                a golden task that cannot be loaded
    +-- VerificationError            a check failed: exit 1 (names the check, the seq, expected/computed)
    +-- JournalConflict              a write the journal refused (duplicate seq, concurrent writer lost)
    +-- JournalUnreadable            the journal file became unreadable, or was replaced, while open
    +-- NothingToRun                 no agent could run at all: exit 3
    |   +-- EngineUnavailable        a task needs a container and no engine runs one here
    +-- EngineFailed                 a container engine command failed (build, pull, run): exit 3

Callers catch LedgerError at the CLI boundary only; library code raises the most specific leaf.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base class of every error eval-ledger raises on purpose."""

    exit_code = 1


class UsageError(LedgerError, ValueError):
    """The input was unusable (bad flag, malformed file, unknown id)."""

    exit_code = 2


class NotFound(UsageError):
    """An id, file or prefix that names nothing (or more than one thing)."""


class MalformedInput(UsageError):
    """A file or structure that does not parse: proof, bundle, note, JSON."""


class CodecError(MalformedInput):
    """Bytes that are not a canonical journal entry."""


class KeyMaterialError(UsageError):
    """Key files are missing, malformed, or readable by others."""


class JournalFormatError(UsageError):
    """The file is not a journal, or a journal of an unknown format version."""


class TaskError(UsageError):
    """A golden task that cannot be loaded or executed as written."""


class VerificationError(LedgerError):
    """A verification check failed.

    ``check`` names the check (e.g. ``leaf-hash``, ``node-hash``, ``head-root``,
    ``checkpoint-signature``, ``consistency``); ``seq`` is the first bad sequence
    number when one applies.
    """

    exit_code = 1

    def __init__(
        self,
        check: str,
        message: str,
        *,
        seq: int | None = None,
        expected: str | None = None,
        computed: str | None = None,
    ) -> None:
        self.check = check
        self.seq = seq
        self.expected = expected
        self.computed = computed
        parts = [f"{check}: {message}"]
        if seq is not None:
            parts.append(f"seq={seq}")
        if expected is not None:
            parts.append(f"expected={expected}")
        if computed is not None:
            parts.append(f"computed={computed}")
        super().__init__(" ".join(parts))

    def as_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "message": str(self),
            "seq": self.seq,
            "expected": self.expected,
            "computed": self.computed,
        }


class JournalConflict(LedgerError):
    """The journal refused a write (a second row at an existing seq, a lost race)."""

    exit_code = 1


class JournalUnreadable(LedgerError):
    """The journal file can no longer be read, or was replaced or overwritten while it was open;
    the store stops writing to it."""

    exit_code = 1


class NothingToRun(LedgerError):
    """No agent could run at all."""

    exit_code = 3


class EngineUnavailable(NothingToRun):
    """A task needs a container and no container engine can run one on this machine."""


class EngineFailed(LedgerError):
    """A container engine command failed: a build, a pull, an inspect, a run (the message names it)."""

    exit_code = 3
