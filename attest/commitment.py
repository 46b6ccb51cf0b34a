"""The ground-truth commitment: keyed digests of hidden tests, solution and hidden fields.

Pure: the material (label, bytes) and the key come in; a ``Commitment`` comes out. File reading
lives in ``ledger/tasks/material.py``.

Material labels say what a source is: ``tests/<rel>`` (a hidden test file), ``solution/<rel>``
(a reference solution file), ``hidden/<field>`` (a hidden frontmatter field), ``extra/<name>``
(operator-added material). Only ``tests/`` and ``solution/`` sources are files with paths.

What is committed (HMAC-SHA256-128 under the commitment subkey, see ``attest.digests``):

- every distinct window of ``window`` tokens of every source, except *trivial* windows (fewer
  than two distinct content tokens) and *public* windows (also found in the public material: the
  starting repo, the prompt, the title, the task summary). Public text is not secret, so a match
  on it proves nothing; this is what keeps an agent that reads the repo and runs the public tests
  CLEAN;
- every whole source (normalized token sequence) unless trivial or equal to a public file;
- separately, as *context*, the distinct trivial windows that are not public. Context digests are
  never evidence (the scan ignores them); the redactor uses them only to extend a redaction that
  a real match started, so the trivial lines around a printed hidden test (a list of numbers
  after its last distinctive line) do not survive either;
- the paths of file sources: absolute (``abs``) when the task root is given, the task's
  ``tests``/``solution`` directories (``dir``), suffixes of two or more components (``rel``:
  ``tests/test_x.py``, ``<task>/tests/test_x.py``) and, for hidden tests, the basename
  (``name``), each unless a public file has the same suffix or the name is generic.

The coverage counts (sources, windows, files, paths, and what was skipped and why) are part of
the committed data, and the commitment digest is SHA-256 over its canonical encoding, so neither
the digests nor the counts can be changed after the fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from attest import digests as dg
from ledger.errors import MalformedInput, UsageError, VerificationError
from ledger.journal.codec import canonical_bytes

FORMAT_VERSION = 1
GENERIC_NAMES = frozenset(
    {"__init__.py", "__main__.py", "conftest.py", "setup.py", "setup.cfg", "pyproject.toml",
     "readme.md", "README.md", "Makefile", "requirements.txt", "pytest.ini", "tox.ini"}
)
FILE_KINDS = ("tests", "solution")
SOURCE_KINDS = ("tests", "solution", "hidden", "extra")
_COVERAGE_KEYS = ("sources", "files", "windows", "paths", "context", "tokens", "public_windows",
                  "trivial_windows", "public_files", "short_sources")
_SETS = ("windows", "files", "paths", "context")
_DATA_KEYS = frozenset({"v", "scheme", "window", "digest_size", "key_id", *_SETS, "coverage",
                        "digest"})


@dataclass(frozen=True)
class Commitment:
    """Committed digests, sealed coverage counts and the digest over both.

    The ``*_prefilter`` fields are in-memory accelerators built from the material: Python's
    own ``hash()`` of tokens and of token tuples (salted per process; fingerprints, never
    plaintext). They are never serialized, are dropped when the commitment is pickled (another
    process salts its hashes differently), and a commitment read back from the journal has
    none. They change speed, not results: a text whose windows miss them costs no HMAC, and one
    with no run of ``window`` tokens that all occur in secret windows (``token_prefilter``) not
    even a tuple hash. Every token of a committed window occurs in a text that holds it
    (``window_token_sets``: each secret window's set of token hashes), and a committed file has
    a length in ``file_lengths``: a text whose set of token hashes contains no window's set (a
    caller may keep that set per file) is passed at once.
    """

    window: int
    key_id: str
    windows: frozenset[bytes]
    files: frozenset[bytes]
    paths: frozenset[bytes]
    context: frozenset[bytes]
    coverage: Mapping[str, Any]
    digest: str
    window_prefilter: frozenset[int] | None = field(default=None, compare=False, repr=False)
    file_prefilter: frozenset[int] | None = field(default=None, compare=False, repr=False)
    path_prefilter: frozenset[int] | None = field(default=None, compare=False, repr=False)
    context_prefilter: frozenset[int] | None = field(default=None, compare=False, repr=False)
    token_prefilter: frozenset[int] | None = field(default=None, compare=False, repr=False)
    window_token_sets: frozenset[frozenset[int]] | None = field(default=None, compare=False,
                                                                repr=False)
    file_lengths: frozenset[int] | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the prefilters: their hashes are only valid in this process."""
        state = dict(self.__dict__)
        for name in ("window_prefilter", "file_prefilter", "path_prefilter", "context_prefilter",
                     "token_prefilter", "window_token_sets", "file_lengths"):
            state[name] = None
        return state

    def as_data(self) -> dict[str, Any]:
        """The map stored in the ``commitment`` entry: digests and counts, never plaintext."""
        body = _body(self.window, self.key_id, self.sets(), self.coverage)
        body["digest"] = self.digest
        return body

    @classmethod
    def from_data(cls, data: Any) -> Commitment:
        """Parse and check a stored commitment map (``commitment-digest`` when it was altered)."""
        if not isinstance(data, Mapping):
            raise MalformedInput("commitment must be a map")
        keys = set(data)
        if keys != _DATA_KEYS:
            raise MalformedInput(
                f"commitment fields wrong: missing={sorted(_DATA_KEYS - keys)} "
                f"extra={sorted(str(k) for k in keys - _DATA_KEYS)}"
            )
        if data["v"] != FORMAT_VERSION or data["scheme"] != dg.SCHEME:
            raise MalformedInput(f"unknown commitment format {data['v']!r}/{data['scheme']!r}")
        if data["digest_size"] != dg.DIGEST_SIZE:
            raise MalformedInput(f"commitment digest size must be {dg.DIGEST_SIZE}")
        window = data["window"]
        if not _is_int(window) or not dg.MIN_WINDOW <= window <= dg.MAX_WINDOW:
            raise MalformedInput(f"commitment window {window!r} is out of range")
        key_id = data["key_id"]
        if not isinstance(key_id, str) or len(key_id) != 16:
            raise MalformedInput("commitment key_id must be 16 hex characters")
        sets = {name: _split_digests(data[name], name) for name in _SETS}
        coverage = data["coverage"]
        if not isinstance(coverage, Mapping):
            raise MalformedInput("commitment coverage must be a map")
        for name in _COVERAGE_KEYS:
            if not _is_int(coverage.get(name)) or coverage[name] < 0:
                raise MalformedInput(f"commitment coverage {name!r} must be a non-negative integer")
        kinds = coverage.get("kinds")
        if not isinstance(kinds, Mapping) or set(kinds) != set(SOURCE_KINDS) or not all(
                _is_int(v) and v >= 0 for v in kinds.values()):
            raise MalformedInput("commitment coverage kinds must count every source kind")
        for name in _SETS:
            if coverage[name] != len(sets[name]):
                raise VerificationError(
                    "commitment-coverage",
                    f"sealed {name} count does not match the committed digests",
                    expected=str(coverage[name]),
                    computed=str(len(sets[name])),
                )
        digest = data["digest"]
        computed = _digest_of(_body(window, key_id, sets, coverage))
        if digest != computed:
            raise VerificationError("commitment-digest", "commitment digest does not match its "
                                    "contents", expected=str(digest), computed=computed)
        return cls(window=window, key_id=key_id, windows=sets["windows"], files=sets["files"],
                   paths=sets["paths"], context=sets["context"], coverage=dict(coverage),
                   digest=computed)

    def sets(self) -> dict[str, frozenset[bytes]]:
        return {"windows": self.windows, "files": self.files, "paths": self.paths,
                "context": self.context}

    def lookup_marker(self) -> dict[str, bytes]:
        """Marker hex (first 8 bytes) to committed digest, over every digest set."""
        out: dict[str, bytes] = {}
        for d in (*self.windows, *self.files, *self.paths):
            out[d[: dg.MARKER_BYTES].hex()] = d
        return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _split_digests(blob: Any, name: str) -> frozenset[bytes]:
    if not isinstance(blob, bytes):
        raise MalformedInput(f"commitment {name} must be binary")
    size = dg.DIGEST_SIZE
    if len(blob) % size:
        raise MalformedInput(f"commitment {name} is not a whole number of {size}-byte digests")
    items = [blob[i : i + size] for i in range(0, len(blob), size)]
    if any(a >= b for a, b in zip(items, items[1:], strict=False)):
        raise MalformedInput(f"commitment {name} digests are not sorted and distinct")
    return frozenset(items)


def _body(window: int, key_id: str, sets: Mapping[str, frozenset[bytes]],
          coverage: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "scheme": dg.SCHEME,
        "window": window,
        "digest_size": dg.DIGEST_SIZE,
        "key_id": key_id,
        "coverage": dict(coverage),
    }
    for name in _SETS:
        body[name] = b"".join(sorted(sets[name]))
    return body


def _digest_of(body: Mapping[str, Any]) -> str:
    return dg.sha256_hex(b"commitment", canonical_bytes(body))


def _source_kind(label: str) -> str:
    kind = label.split("/", 1)[0]
    if kind not in SOURCE_KINDS or "/" not in label or not label.split("/", 1)[1]:
        raise UsageError(
            f"material label {label[:80]!r} must be tests/<path>, solution/<path>, "
            "hidden/<field> or extra/<name>"
        )
    return kind


def _public_index(public: Sequence[tuple[str, bytes]]
                  ) -> tuple[list[list[str]], set[str], set[tuple[str, ...]]]:
    """Tokens of every public text, every suffix of every public path, public file token tuples."""
    texts: list[list[str]] = []
    suffixes: set[str] = set()
    whole: set[tuple[str, ...]] = set()
    for label, content in public:
        toks = dg.tokens(content.decode("utf-8", "replace"))
        texts.append(toks)
        whole.add(tuple(toks))
        if not label.startswith("@"):
            parts = [p for p in dg.normalize_path(label).split("/") if p]
            for k in range(1, len(parts) + 1):
                suffixes.add("/".join(parts[-k:]))
    return texts, suffixes, whole


def _path_forms(label: str, kind: str, root: str | None, public_suffixes: set[str]
                ) -> list[tuple[str, str]]:
    rel = dg.normalize_path(label)  # tests/sub/x.py
    forms: list[tuple[str, str]] = []
    chain = rel.split("/")
    if root is not None:
        root_norm = dg.normalize_path(root)
        forms.append(("abs", f"{root_norm}/{rel}"))
        forms.append(("dir", f"{root_norm}/{kind}"))
        chain = [dg.last_component(root_norm), *chain]
    for k in range(2, len(chain) + 1):
        suffix = "/".join(chain[-k:])
        if suffix not in public_suffixes:
            forms.append(("rel", suffix))
    base = chain[-1]
    if (kind == "tests" and base not in GENERIC_NAMES and base.lower() not in GENERIC_NAMES
            and base not in public_suffixes):
        forms.append(("name", base))
    return forms


def _add_windows(toks: Sequence[str], window: int, cand_windows: set[tuple[str, ...]],
                 cand_context: set[tuple[str, ...]]) -> int:
    """Add every window of ``toks`` to the candidates (trivial ones to the context); return
    how many were trivial."""
    trivial = 0
    for i in range(len(toks) - window + 1):
        w = tuple(toks[i : i + window])
        if dg.is_trivial(w):
            trivial += 1
            cand_context.add(w)
        else:
            cand_windows.add(w)
    return trivial


def _public_windows(public_texts: Iterable[Sequence[str]], window: int,
                    cand_windows: set[tuple[str, ...]], cand_context: set[tuple[str, ...]],
                    ) -> tuple[set[tuple[str, ...]], set[tuple[str, ...]]]:
    """The candidate windows (and context windows) that some public text holds too."""
    public_windows: set[tuple[str, ...]] = set()
    public_context: set[tuple[str, ...]] = set()
    for toks in public_texts:
        if len(toks) >= window:
            shifted = [toks[k:] for k in range(window)]
            public_windows.update(cand_windows.intersection(zip(*shifted, strict=False)))
            public_context.update(cand_context.intersection(zip(*shifted, strict=False)))
    return public_windows, public_context


def build_commitment(
    material: Sequence[tuple[str, bytes]],
    *,
    key: bytes,
    window: int = dg.WINDOW,
    public: Sequence[tuple[str, bytes]] = (),
    root: str | None = None,
) -> Commitment:
    """Commit to ``material`` under ``key``.

    ``public`` is what the agent may see anyway: ``(relative path, bytes)`` of the starting repo,
    plus non-path texts labelled ``@name`` (prompt, title, summary). ``root`` is the absolute,
    resolved task folder (for absolute path digests). Raises UsageError when there is nothing to
    commit (no material, or every window and file is public or trivial).
    """
    key = dg.check_key(key)
    if not _is_int(window) or not dg.MIN_WINDOW <= window <= dg.MAX_WINDOW:
        raise UsageError(f"window must be an integer in {dg.MIN_WINDOW}..{dg.MAX_WINDOW}")
    if not material:
        raise UsageError("no ground-truth material to commit (hidden tests and solution missing)")
    kinds = dict.fromkeys(SOURCE_KINDS, 0)
    cand_windows: set[tuple[str, ...]] = set()
    cand_context: set[tuple[str, ...]] = set()
    cand_files: dict[tuple[str, ...], None] = {}
    path_forms: set[tuple[str, str]] = set()
    total_tokens = trivial = short = 0
    public_texts, public_suffixes, public_whole = _public_index(public)
    seen_labels: set[str] = set()
    has_hidden = False
    for label, content in material:
        if not isinstance(label, str) or not isinstance(content, bytes | bytearray):
            raise UsageError("material items must be (label, bytes)")
        kind = _source_kind(label)
        if label in seen_labels:
            raise UsageError(f"material label {label[:80]!r} appears twice")
        seen_labels.add(label)
        kinds[kind] += 1
        has_hidden = has_hidden or kind == "hidden"
        toks = dg.tokens(bytes(content).decode("utf-8", "replace"))
        total_tokens += len(toks)
        if len(toks) < window:
            short += 1
        trivial += _add_windows(toks, window, cand_windows, cand_context)
        if not dg.is_trivial(toks):
            cand_files[tuple(toks)] = None
        if kind in FILE_KINDS:
            path_forms.update(_path_forms(label, kind, root, public_suffixes))
    if has_hidden and root is not None:
        path_forms.add(("abs", f"{dg.normalize_path(root)}/task.md"))

    public_windows, public_context = _public_windows(public_texts, window, cand_windows, cand_context)
    secret_windows = cand_windows - public_windows
    secret_context = cand_context - public_context
    public_files = [f for f in cand_files if f in public_whole]
    secret_files = [f for f in cand_files if f not in public_whole]

    tid = hash  # prefilter fingerprints: salted per process, in memory only (see Commitment)

    windows = frozenset(dg.window_digest(key, w) for w in secret_windows)
    files = frozenset(dg.file_digest(key, f) for f in secret_files)
    paths = frozenset(dg.path_digest(key, form, p) for form, p in path_forms)
    context = frozenset(dg.window_digest(key, w) for w in secret_context)
    if not windows and not files:
        raise UsageError("the ground truth commits nothing: every window and file is public or "
                         "trivial")
    coverage: dict[str, Any] = {
        "sources": len(material),
        "files": len(files),
        "windows": len(windows),
        "paths": len(paths),
        "context": len(context),
        "tokens": total_tokens,
        "public_windows": len(public_windows),
        "trivial_windows": trivial,
        "public_files": len(public_files),
        "short_sources": short,
        "kinds": kinds,
    }
    kid = dg.key_id(key)
    sets = {"windows": windows, "files": files, "paths": paths, "context": context}
    digest = _digest_of(_body(window, kid, sets, coverage))
    return Commitment(
        window=window,
        key_id=kid,
        windows=windows,
        files=files,
        paths=paths,
        context=context,
        coverage=coverage,
        digest=digest,
        window_prefilter=frozenset(hash(tuple(tid(t) for t in w)) for w in secret_windows),
        file_prefilter=frozenset(hash(tuple(tid(t) for t in f)) for f in secret_files),
        path_prefilter=frozenset(tid(dg.last_component(p)) for _, p in path_forms),
        context_prefilter=frozenset(hash(tuple(tid(t) for t in w)) for w in secret_context),
        token_prefilter=frozenset(tid(t) for w in secret_windows for t in w),
        window_token_sets=frozenset(frozenset(map(tid, w)) for w in secret_windows),
        file_lengths=frozenset(len(f) for f in secret_files),
    )
