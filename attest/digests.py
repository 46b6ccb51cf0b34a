"""Normalization and keyed digests shared by the commitment, the redactor and the scan.

Pure: no I/O, no clock, no randomness. Keys are parameters.

Text is normalized into **tokens**: maximal runs of word characters (``\\w+``: letters, digits,
underscore, Unicode-aware), lower-cased. Whitespace, punctuation, quotes and line breaks are
dropped, so reformatting, re-indenting or re-quoting a file does not change its tokens. A line
prefix that tools add when they show a file (``cat -n`` and ``nl``: spaces, digits, a tab; an
agent's file viewer: digits and an arrow; ``grep -n``: ``path:12:``) is dropped too, so showing
a file with line numbers does not hide it. A **window** is ``WINDOW`` consecutive tokens (see
docs/ATTESTATION.md for why 8).

Every digest is HMAC-SHA256 under the commitment subkey over a domain label and length-prefixed
parts, truncated to 128 bits (``DIGEST_SIZE``)::

    HMAC(key, b"eval-ledger/attest/v1/" + label + b"\\x00" + u32be(len(p1)) + p1 + ...)

    window  parts = the window's tokens (UTF-8)
    file    parts = [" ".join(all tokens of the file)]
    path    parts = [form, normalized path]   form: "abs" | "dir" | "rel" | "name"

Redaction markers ``[redacted:<16 hex>]`` carry the first 8 bytes of the digest they replace.
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath
import re
from collections.abc import Iterable, Sequence

from ledger.errors import KeyMaterialError

WINDOW = 8
"""Tokens per window (docs/ATTESTATION.md justifies the choice)."""
MIN_WINDOW = 4
MAX_WINDOW = 64
DIGEST_SIZE = 16
"""Committed digests are HMAC-SHA256 truncated to 128 bits (RFC 2104 allows >= half)."""
MARKER_BYTES = 8
SCHEME = "eval-ledger/attest/v1"
MIN_KEY_SIZE = 16

_PREFIX = b"eval-ledger/attest/v1/"
_LABEL_WINDOW = _PREFIX + b"window\x00"
_LABEL_FILE = _PREFIX + b"file\x00"
_LABEL_PATH = _PREFIX + b"path\x00"
_LABEL_KEY_ID = _PREFIX + b"key-id\x00"

LINE_PREFIX = r"^(?:[^\s:]*[./][^\s:]*[:-](?:\d+[:-])?|[ \t]*\d+(?:\t|\u2192|:|\|))"
TOKEN_RE = re.compile(LINE_PREFIX + r"|(\w+)", re.MULTILINE)
_PREFIX_RE = re.compile(LINE_PREFIX, re.MULTILINE)
_WORD_RE = re.compile(r"\w+")
MARKER_RE = re.compile(r"\[redacted:([0-9a-f]{16})\]")
PATH_FORMS = ("abs", "dir", "rel", "name")

# Tokens that carry no evidence on their own: Python keywords, ubiquitous builtins and test
# boilerplate, shell and pytest output words, English function words. A window needs at least
# MIN_CONTENT distinct tokens outside this set (and not purely numeric, not one character).
COMMON_TOKENS = frozenset((
    "false", "none", "true", "and", "as", "assert", "async", "await", "break", "class",
    "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
    "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield", "match", "case", "self", "cls", "print", "len", "range", "str",
    "int", "float", "bool", "bytes", "list", "dict", "set", "tuple", "object", "super",
    "isinstance", "type", "open", "args", "kwargs", "main", "name", "__name__", "__main__",
    "__init__", "init", "pytest", "test", "tests", "mark", "parametrize", "fixture", "fixtures",
    "raises", "unittest", "testcase", "assertequal", "asserttrue", "assertfalse", "setup",
    "teardown", "conftest", "py", "txt", "md", "json", "yaml", "toml", "cfg", "os", "sys", "re",
    "typing", "path", "pathlib", "annotations", "__future__", "passed", "failed", "error",
    "errors", "skipped", "warnings", "collected", "items", "seconds", "session", "starts",
    "platform", "rootdir", "plugins", "python", "cd", "ls", "cat", "echo", "git", "diff", "the",
    "a", "an", "of", "to", "it", "this", "that", "on", "at", "by", "be", "are", "was", "were",
    "no", "yes", "value", "values", "result", "results", "data", "any", "all", "sorted", "min",
    "max", "sum", "map", "filter", "zip", "enumerate", "iter", "next", "abs", "round", "repr",
    "format", "join", "split", "strip", "append", "extend", "items", "keys", "get", "update",
))
MIN_CONTENT = 2


def check_key(key: object, what: str = "commitment key") -> bytes:
    """Return ``key`` as bytes, or raise KeyMaterialError when it cannot be an HMAC key."""
    if not isinstance(key, bytes | bytearray) or len(key) < MIN_KEY_SIZE:
        raise KeyMaterialError(f"{what} must be at least {MIN_KEY_SIZE} bytes")
    return bytes(key)


def tokens(text: str) -> list[str]:
    """The normalized tokens of ``text``."""
    if _PREFIX_RE.match(text) or ("\n" in text and _PREFIX_RE.search(text)):
        return [t.lower() for t in TOKEN_RE.findall(text) if t]
    if text.isascii():  # same result, one C call: lower() keeps ASCII offsets and word runs
        return _WORD_RE.findall(text.lower())
    return [t.lower() for t in _WORD_RE.findall(text)]


def token_spans(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Tokens of ``text`` with their (start, end) character offsets in ``text``."""
    toks: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in TOKEN_RE.finditer(text):
        if m.group(1) is not None:
            toks.append(m.group(1).lower())
            spans.append(m.span(1))
    return toks, spans


def _lp(part: bytes) -> bytes:
    return len(part).to_bytes(4, "big") + part


def encode_token(token: str) -> bytes:
    """One length-prefixed token, as it enters a window message."""
    return _lp(token.encode("utf-8"))


def window_message(encoded: Sequence[bytes]) -> bytes:
    """The HMAC message of a window given its length-prefixed tokens."""
    return _LABEL_WINDOW + b"".join(encoded)


def mac(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA256 truncated to DIGEST_SIZE."""
    return hmac.digest(key, message, "sha256")[:DIGEST_SIZE]


def window_digest(key: bytes, window: Sequence[str]) -> bytes:
    return mac(key, window_message([encode_token(t) for t in window]))


def file_digest(key: bytes, toks: Sequence[str]) -> bytes:
    """Digest of a whole normalized text (a file or a hidden field)."""
    return mac(key, _LABEL_FILE + _lp(" ".join(toks).encode("utf-8")))


def path_digest(key: bytes, form: str, path: str) -> bytes:
    if form not in PATH_FORMS:
        raise ValueError(f"unknown path form {form!r}")
    return mac(key, _LABEL_PATH + _lp(form.encode("ascii")) + _lp(path.encode("utf-8")))


def key_id(key: bytes) -> str:
    """A public name for an HMAC key that reveals nothing about it (16 hex)."""
    return hmac.digest(key, _LABEL_KEY_ID, "sha256")[:8].hex()


def marker(digest: bytes) -> str:
    return f"[redacted:{digest[:MARKER_BYTES].hex()}]"


def is_content_token(token: str) -> bool:
    return len(token) > 1 and not token.isdigit() and token not in COMMON_TOKENS


def is_trivial(window: Sequence[str]) -> bool:
    """True when the window holds fewer than MIN_CONTENT distinct content tokens."""
    seen: set[str] = set()
    for t in window:
        if is_content_token(t):
            seen.add(t)
            if len(seen) >= MIN_CONTENT:
                return False
    return True


def normalize_path(path: str) -> str:
    """POSIX-normalize a path; leading ``./`` and duplicate or trailing slashes go."""
    if not path:
        return ""
    norm = posixpath.normpath(path.replace("\\", "/"))
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return "" if norm == "." else norm


def path_queries(path: str, *, ancestors: bool) -> list[tuple[str, str]]:
    """Every (form, path) under which a read of ``path`` can match a committed path.

    An absolute path is looked up as itself (``abs``), as a directory and through every ancestor
    directory (``dir``, when ``ancestors``), through each suffix of two or more components (``rel``) and
    through its basename (``name``). A relative path only through its suffixes and basename.
    """
    norm = normalize_path(path)
    if not norm or norm == "/":
        return []
    parts = [p for p in norm.split("/") if p and p != ".."]
    if not parts:
        return []
    out: list[tuple[str, str]] = []
    if norm.startswith("/"):
        out.append(("abs", norm))
        if ancestors:
            for k in range(1, len(parts) + 1):
                out.append(("dir", "/" + "/".join(parts[:k])))
    for k in range(2, len(parts) + 1):
        out.append(("rel", "/".join(parts[-k:])))
    out.append(("name", parts[-1]))
    return out


def last_component(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


_PATH_SPLIT = re.compile(r"[\s'\"`;|&<>(){}\[\]=,:]+")


def path_references(text: str) -> list[str]:
    """Path-like words of a command line or tool input (they contain a slash)."""
    out: list[str] = []
    if "/" not in text:
        return out
    for word in _PATH_SPLIT.split(text):
        if "/" in word and len(word) > 1:
            word = word.rstrip(".")
            if word:
                out.append(word)
    return out


def strings_in(value: object, depth: int = 0) -> Iterable[str]:
    """Every string inside a nested value (list items and map values), bounded depth."""
    if isinstance(value, str):
        yield value
        return
    if depth > 16:
        return
    if isinstance(value, dict):
        items: Iterable[object] = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, list | tuple | dict):
            yield from strings_in(item, depth + 1)


def sha256_hex(label: bytes, data: bytes) -> str:
    return hashlib.sha256(_PREFIX + label + b"\x00" + data).hexdigest()
