"""Files the commands write (``-o/--output``): a bad path is one line and exit 2, checked before
any work is done, and a write that fails leaves no stray temporary file."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import UsageError


def output_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a file to write: its folder must exist and it must not be a folder."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"-o {p}: is a folder; name a file to write")
    if not p.parent.is_dir():
        raise UsageError(f"-o {p}: the folder {p.parent} does not exist")
    return p


def output_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder to write files into (made if missing; its parent must exist)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"-o {p}: is a file; name a folder")
    if not p.exists() and not p.parent.is_dir():
        raise UsageError(f"-o {p}: the folder {p.parent} does not exist")
    return p


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it, renamed into place; the
    temporary file is removed whatever fails, and an OS error is one line (exit 2)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
