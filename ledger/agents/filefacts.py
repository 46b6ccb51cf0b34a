"""What a read of a file outside the worktree learns of it: size, SHA-256 and the tokens of its
text head, computed once per process and file version (never stored as such: the trace keeps the
digest, and only the commitment's markers of what the tokens match)."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from attest import digests as dg

BINARY_PROBE = 8192  # a NUL byte in the first BINARY_PROBE bytes makes a file binary (not scanned)
_HASH_CHUNK = 1024 * 1024
_FACTS_FILES = 100_000  # files whose digest (and tokens) a process keeps
_FACTS_TOKENS = 4_000_000  # tokens it keeps for them, all files together


@dataclass(frozen=True)
class FileFacts:
    """What a read outside the worktree learns of the file (never stored as such).

    ``tokens``: the normalized tokens of its text head (``attest.digests.tokens``; None for a
    binary or unreadable file); ``marker_text``: that head when it holds a redaction marker
    (markers are evidence too), else "".
    """

    size: int | None
    sha256: str | None
    tokens: Sequence[str] | None = None
    token_set: frozenset[int] | None = None  # hash() of the distinct tokens (in memory only)
    marker_text: str = ""
    scan_truncated: bool = False


_facts_lock = threading.Lock()
_facts: dict[tuple[bytes, int, int, int, int, int], FileFacts] = {}
_facts_tokens = 0


def file_facts(path: bytes, scan_limit: int) -> FileFacts:
    """Size and SHA-256 of a regular file (streamed) and the tokens of its text head.

    Cached per process by (path, device, inode, size, mtime, ctime): a worker that runs many
    attempts reads and tokenizes the interpreter's files once (at most ``_FACTS_TOKENS`` tokens
    are kept; tokens are interned). A file that is not regular or cannot be read has no digest.
    """
    global _facts_tokens
    try:
        st = os.stat(path)
    except OSError:
        return FileFacts(None, None)
    if not stat.S_ISREG(st.st_mode):
        return FileFacts(None, None)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _facts_lock:
        cached = _facts.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    head = bytearray()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                h.update(chunk)
                if len(head) < scan_limit:
                    head += chunk[: scan_limit - len(head)]
    except OSError:
        return FileFacts(st.st_size, None)
    if b"\0" in head[:BINARY_PROBE]:
        facts = FileFacts(st.st_size, h.hexdigest())
    else:
        cut = st.st_size > len(head)
        text = bytes(head).decode("utf-8", "ignore" if cut else "replace")
        toks = tuple(map(sys.intern, dg.tokens(text)))
        facts = FileFacts(st.st_size, h.hexdigest(), toks, frozenset(map(hash, toks)),
                          text if "[redacted:" in text else "", cut)
    with _facts_lock:
        n = len(facts.tokens or ())
        if _facts_tokens + n > _FACTS_TOKENS or len(_facts) >= _FACTS_FILES:
            _facts.clear()
            _facts_tokens = 0
        _facts[key] = facts
        _facts_tokens += n
    return facts


__all__ = ["BINARY_PROBE", "FileFacts", "file_facts"]
