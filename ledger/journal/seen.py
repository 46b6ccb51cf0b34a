"""Remembered checkpoints (trust on first use), as Go's checksum-database client keeps them.

Every ``ledger verify`` (and ``verify --bundle``) remembers the largest signed checkpoint it has
verified, per log origin, in ``$XDG_CONFIG_HOME/eval-ledger/seen/`` (``~/.config/...`` when the
variable is unset; never inside ``.ledger/``), and on every later verify proves the current tree
consistent with it (an RFC 6962 consistency proof from the remembered size). A history that was
rewritten and re-signed with the key beside the journal, or truncated or rolled back, then fails
``remembered-checkpoint`` without anyone passing ``--since``. ``--no-remember`` turns it off.

One file per origin, ``<origin made file-safe>-<12 hex of SHA-256(origin)>.note``, holding the
signed note (mode 0600, written atomically). It is the only thing ``verify`` ever writes.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import MalformedInput, VerificationError
from ledger.journal import merkle
from ledger.journal.note import Checkpoint, Verifier, open_checkpoint

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def seen_dir(env: dict[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/eval-ledger/seen`` (default ``~/.config``)."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "eval-ledger" / "seen"


def seen_path(origin: str, directory: Path | None = None) -> Path:
    safe = _UNSAFE.sub("_", origin).strip("._")[:80] or "log"
    digest = hashlib.sha256(origin.encode("utf-8")).hexdigest()[:12]
    return (directory or seen_dir()) / f"{safe}-{digest}.note"


@dataclass(frozen=True)
class Remembered:
    """What the remembered-checkpoint step did."""

    path: str
    origin: str
    previous_size: int | None  # the remembered checkpoint proved against (None: first use)
    previous_root: str | None
    size: int | None  # the checkpoint now remembered (None: nothing signed to remember)
    proved: bool  # a consistency proof from previous_size held

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "origin": self.origin, "previous_size": self.previous_size,
                "previous_root": self.previous_root, "size": self.size, "proved": self.proved}


def _load(path: Path, verifier: Verifier) -> Checkpoint | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MalformedInput(f"cannot read the remembered checkpoint {path}: {exc.strerror}") from exc
    try:
        return open_checkpoint(text, verifier)
    except (VerificationError, MalformedInput) as exc:
        raise VerificationError(
            "remembered-checkpoint", f"the remembered checkpoint {path} does not verify with this key "
            f"({exc}); if the log's key was rotated on purpose, delete that file") from exc


def _store(path: Path, note: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(note)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def check_and_remember(*, verifier: Verifier, size: int, root: bytes,
                       consistency: Any, latest_note: str | None,
                       directory: Path | None = None, older_ok: bool = False) -> Remembered:
    """Prove the tree (``size``, ``root``) consistent with the remembered checkpoint of the
    verifier's origin, then remember ``latest_note`` (already verified, covering at most
    ``size``) when it is larger.

    ``consistency(old_size)`` returns the RFC 6962 proof hashes from ``old_size`` to ``size``, or
    None when the caller cannot produce one (a bundle that lacks the prefix). Raises
    VerificationError("remembered-checkpoint") when the tree does not extend what was remembered.
    ``older_ok`` (bundles): a tree smaller than the remembered one is an older export, not a
    rollback; nothing is proved or remembered then.
    """
    origin = verifier.name
    path = seen_path(origin, directory)
    old = _load(path, verifier)
    proved = False
    if old is not None:
        if old.size > size and older_ok:
            return Remembered(str(path), origin, old.size, old.root.hex(), old.size, False)
        if old.size > size:
            raise VerificationError(
                "remembered-checkpoint", f"a checkpoint of size {old.size} was verified before ({path}) "
                f"but the log now holds {size} entries: it was truncated or rolled back", seq=size)
        if old.size == size:
            if old.root != root:
                raise VerificationError(
                    "remembered-checkpoint", f"the log's root at size {size} differs from the checkpoint "
                    f"verified before ({path}): the history was rewritten", seq=max(size - 1, 0),
                    expected=old.root.hex(), computed=root.hex())
            proved = True
        elif old.size > 0:
            proof = consistency(old.size)
            if proof is not None:
                try:
                    merkle.verify_consistency(old.size, size, old.root, root, list(proof))
                except VerificationError as exc:
                    raise VerificationError(
                        "remembered-checkpoint", f"the log does not extend the checkpoint of size {old.size} "
                        f"verified before ({path}): the history was rewritten ({exc})",
                        seq=max(old.size - 1, 0)) from exc
                proved = True
        else:
            proved = True
    new_size = old.size if old is not None else None
    if latest_note is not None and (proved or old is None):
        cp = open_checkpoint(latest_note, verifier)
        if old is None or cp.size > old.size:
            _store(path, latest_note)
            new_size = cp.size
    return Remembered(str(path), origin, old.size if old else None, old.root.hex() if old else None,
                      new_size, proved)
