"""Redaction at capture: every committed window of a captured text becomes a marker.

``Redactor(commitment, key)`` is the run's ``CaptureFilter`` (text -> text). For each token
position whose window digest is committed, the tokens of that window are covered; each maximal
covered run of the text (from the first character of its first token to the last character of
its last token) is replaced by one ``[redacted:<16 hex>]`` marker per matched window starting in
the run, in order. So the journal keeps every matched digest (the scan and the echo rule need
them) and no committed window survives: a window of the ground truth that is still readable after
redaction would have been matched. Two runs at most ``GAP_FACTOR * window`` tokens apart are
joined, and a run grows over the commitment's *context* windows (trivial windows of the ground
truth, never evidence) that overlap or touch it; the extra text becomes ``[redacted]`` (no
digest). So the trivial lines of a printed hidden test (a list of numbers, a short last
assertion) do not survive next to its distinctive ones, while the same trivial text elsewhere is
left alone. A text that equals a committed whole
source (normalized) keeps no plaintext at all: it becomes that source's marker followed by the
markers of its windows.

Speed: with a commitment built from material (prefilters present) a text costs one regex pass,
one C-level string hash per token and one tuple hash per window; only prefilter hits pay for an
HMAC. Without the prefilter (a commitment read back from the journal) every window is HMACed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from attest import digests as dg
from attest.commitment import Commitment
from ledger.errors import KeyMaterialError

_ID_CACHE_LIMIT = 1_000_000
GAP_FACTOR = 3
"""Text between two matched runs at most GAP_FACTOR * window tokens apart is redacted too."""
GAP_MARKER = "[redacted]"


class _Run:
    """A covered stretch of tokens and the markers that replace it."""

    __slots__ = ("start", "end", "markers", "extended")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.markers: list[str] = []
        self.extended = False


SECRET_MARKER = "[redacted:key]"
_SECRET_PREFIX = 8  # characters of a form kept in the clear to find candidates (32 bits of hex)


@dataclass(frozen=True)
class SecretPattern:
    """One textual form of a harness secret, findable without holding it: a short prefix, the
    form's length and its SHA-256 (so a worker can redact a key it is never given)."""

    prefix: str
    length: int
    digest: str

    def as_data(self) -> list[Any]:
        return [self.prefix, self.length, self.digest]

    @classmethod
    def from_data(cls, data: Any) -> SecretPattern:
        prefix, length, digest = data
        return cls(str(prefix), int(length), str(digest))


def _b64_forms(raw: bytes) -> set[str]:
    std = base64.b64encode(raw).decode("ascii")
    url = base64.urlsafe_b64encode(raw).decode("ascii")
    return {std, std.rstrip("="), url, url.rstrip("=")}


def secret_patterns(secrets: Iterable[bytes], texts: Iterable[str] = ()) -> tuple[SecretPattern, ...]:
    """Patterns for every textual form of each secret: raw (as latin-1 and as UTF-8 with
    replacement, the way captured output is decoded), hex (lower and upper case), base64 and
    base64url (padded or not), and the given texts (e.g. a key file's line) as they are."""
    forms: set[str] = set(texts)
    for raw in secrets:
        forms |= {raw.decode("latin-1"), raw.decode("utf-8", "replace"), raw.hex(), raw.hex().upper()}
        forms |= _b64_forms(raw)
    out = []
    for form in sorted(forms, key=lambda f: (-len(f), f)):
        if len(form) >= 2 * _SECRET_PREFIX:
            out.append(SecretPattern(form[:_SECRET_PREFIX], len(form),
                                     hashlib.sha256(form.encode("utf-8", "surrogatepass")).hexdigest()))
    return tuple(out)


def scrub_secrets(text: str, patterns: Sequence[SecretPattern]) -> str:
    """``text`` with every occurrence of a secret's form replaced by ``[redacted:key]``."""
    for p in patterns:
        start = text.find(p.prefix)
        while start >= 0:
            cand = text[start:start + p.length]
            if len(cand) == p.length and hashlib.sha256(
                    cand.encode("utf-8", "surrogatepass")).hexdigest() == p.digest:
                text = text[:start] + SECRET_MARKER + text[start + p.length:]
                start = text.find(p.prefix, start + len(SECRET_MARKER))
            else:
                start = text.find(p.prefix, start + 1)
    return text


class Redactor:
    """Match and redact texts against one commitment (needs the commitment key); with
    ``secrets``, first remove every form of the harness's own key bytes (``[redacted:key]``)."""

    def __init__(self, commitment: Commitment, key: bytes,
                 secrets: Sequence[SecretPattern] = ()) -> None:
        self._secrets = tuple(secrets)
        key = dg.check_key(key)
        if dg.key_id(key) != commitment.key_id:
            raise KeyMaterialError("the key given to the redactor is not the commitment's key")
        self.commitment = commitment
        self._key = key
        self._n = commitment.window
        self._windows = commitment.windows
        self._files = commitment.files
        self._paths = commitment.paths
        self._markers = commitment.lookup_marker()
        self._wpre = commitment.window_prefilter
        self._fpre = commitment.file_prefilter
        self._ppre = commitment.path_prefilter
        self._context = commitment.context
        self._cpre = commitment.context_prefilter
        self._tpre = commitment.token_prefilter
        self._wsets = commitment.window_token_sets
        self._flen = commitment.file_lengths
        self._run = b"\x01" * self._n
        self._enc: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"Redactor(commitment={self.commitment.digest[:16]}...)"

    # ------------------------------------------------------------------ token plumbing

    def _token_ids(self, toks: Sequence[str]) -> list[int]:
        """The prefilter fingerprints of ``toks`` (``hash``, as the commitment built them)."""
        return list(map(hash, toks))

    def _encoded(self, toks: Sequence[str]) -> list[bytes]:
        enc = self._enc
        if len(enc) > _ID_CACHE_LIMIT:
            enc.clear()
        out: list[bytes] = []
        for t in toks:
            v = enc.get(t)
            if v is None:
                v = enc[t] = dg.encode_token(t)
            out.append(v)
        return out

    def _window_hits(self, toks: Sequence[str], ids: Sequence[int] | None = None
                     ) -> list[tuple[int, bytes]]:
        """(token index, digest) of every committed window of ``toks``."""
        n = self._n
        count = len(toks) - n + 1
        if count <= 0 or not self._windows:
            return []
        if self._wpre is not None:
            if ids is None:
                ids = self._token_ids(toks)
            if self._tpre is not None and self._run not in bytes(map(self._tpre.__contains__, ids)):
                return []  # no run of n tokens that all occur in secret windows
            shifted = [ids[k:] for k in range(n)]
            if self._wpre.isdisjoint(map(hash, zip(*shifted, strict=False))):
                return []
            pre = self._wpre
            positions = [i for i, fp in enumerate(map(hash, zip(*shifted, strict=False)))
                         if fp in pre]
        else:
            positions = list(range(count))
        enc = self._encoded(toks)
        key, windows = self._key, self._windows
        hits: list[tuple[int, bytes]] = []
        for i in positions:
            d = dg.mac(key, dg.window_message(enc[i : i + n]))
            if d in windows:
                hits.append((i, d))
        return hits

    def _file_hit(self, toks: Sequence[str], ids: Sequence[int] | None = None) -> bytes | None:
        if not self._files or (self._flen is not None and len(toks) not in self._flen):
            return None
        if self._fpre is not None:
            if ids is None:
                ids = self._token_ids(toks)
            if hash(tuple(ids)) not in self._fpre:
                return None
        if dg.is_trivial(toks):
            return None
        d = dg.file_digest(self._key, toks)
        return d if d in self._files else None

    def _marker_digests(self, text: str) -> set[bytes]:
        if "[redacted:" not in text:
            return set()
        out: set[bytes] = set()
        for hx in dg.MARKER_RE.findall(text):
            d = self._markers.get(hx)
            if d is not None:
                out.add(d)
        return out

    # ------------------------------------------------------------------ public API

    def __call__(self, text: str) -> str:
        return self.redact(text)

    def _context_positions(self, toks: Sequence[str]) -> set[int]:
        """Token indices where a committed *context* (trivial) window starts."""
        n = self._n
        count = len(toks) - n + 1
        if count <= 0 or not self._context:
            return set()
        if self._cpre is not None:
            ids = self._token_ids(toks)
            pre = self._cpre
            positions: Iterable[int] = [
                i for i, fp in enumerate(map(hash, zip(*(ids[k:] for k in range(n)), strict=False)))
                if fp in pre]
        else:
            positions = range(count)
        enc = self._encoded(toks)
        key, context = self._key, self._context
        return {i for i in positions if dg.mac(key, dg.window_message(enc[i : i + n])) in context}

    def redact(self, text: str) -> str:
        """``text`` with every committed window (or the whole text, for a file) replaced."""
        if not isinstance(text, str) or not text:
            return text
        if self._secrets:
            text = scrub_secrets(text, self._secrets)
        toks = dg.tokens(text)
        ids = self._token_ids(toks) if self._wpre is not None else None
        hits = self._window_hits(toks, ids)
        whole = self._file_hit(toks, ids)
        if whole is not None:  # all of it is ground truth: keep only the digests
            return dg.marker(whole) + "".join(dg.marker(d) for _, d in hits)
        if not hits:
            return text
        _, spans = dg.token_spans(text)
        n, gap = self._n, GAP_FACTOR * self._n
        real = dict(hits)
        # connected runs of overlapping or touching windows (real and context), in token order
        comps: list[_Run] = []
        for i in sorted(set(real) | self._context_positions(toks)):
            if comps and i <= comps[-1].end + 1:
                run = comps[-1]
                run.end = max(run.end, i + n - 1)
            else:
                run = _Run(i, i + n - 1)
                comps.append(run)
            if i in real:
                run.markers.append(dg.marker(real[i]))
            else:
                run.extended = True
        runs: list[_Run] = []
        for run in comps:
            if not run.markers:
                continue  # context alone is never redacted
            if runs and run.start <= runs[-1].end + 1 + gap:
                runs[-1].end = run.end
                runs[-1].markers.extend(run.markers)
                runs[-1].extended = True
            else:
                runs.append(run)
        pieces: list[str] = []
        pos = 0
        for run in runs:
            pieces.append(text[pos : spans[run.start][0]])
            pieces.append("".join(run.markers) + (GAP_MARKER if run.extended else ""))
            pos = spans[run.end][1]
        pieces.append(text[pos:])
        return "".join(pieces)

    def scan_text(self, text: str) -> list[bytes]:
        """Committed digests found in ``text``: windows, a whole file, and redaction markers."""
        return sorted(self.digests(text))

    def evidence(self, text: str, tokens: Sequence[str] | None = None,
                 token_set: frozenset[int] | None = None) -> str:
        """The markers of every committed digest found in ``text`` (windows, a whole file, markers
        it already holds), sorted by digest, concatenated; "" when none. This is what a read
        outside the worktree keeps instead of its content: the scan and a key-free verifier read
        the digests back from the markers, and no plaintext is kept. ``tokens``: see
        ``digests``."""
        return "".join(dg.marker(d) for d in sorted(self.digests(text, tokens, token_set)))

    def digests(self, text: str, tokens: Sequence[str] | None = None,
                token_set: frozenset[int] | None = None) -> set[bytes]:
        """Committed digests in ``text``. ``tokens``: ``dg.tokens`` of the text when the caller
        has them already (a cached file); ``text`` is then only searched for markers.
        ``token_set``: ``frozenset(map(hash, tokens))``, kept by a caller that sees the same
        text again: a text that cannot hold a window is then passed at once."""
        if not isinstance(text, str):
            return set()
        found = self._marker_digests(text)
        if tokens is None:
            if not text:
                return found
            toks: Sequence[str] = dg.tokens(text)
        else:
            toks = tokens
        if (token_set is None or self._wsets is None
                or any(ws <= token_set for ws in self._wsets)):
            found.update(d for _, d in self._window_hits(toks))
        f = self._file_hit(toks)
        if f is not None:
            found.add(f)
        return found

    def path_digests(self, paths: Iterable[str], *, ancestors: bool = True) -> set[bytes]:
        """Committed path digests reached by any of ``paths`` (see ``digests.path_queries``)."""
        if not self._paths:
            return set()
        found: set[bytes] = set()
        key, pre = self._key, self._ppre
        for path in paths:
            if pre is not None:  # every query ends in a component of the path (see path_queries)
                comps = [c for c in dg.normalize_path(path).split("/") if c and c != ".."]
                if not comps or (pre.isdisjoint(map(hash, comps)) if ancestors
                                 else hash(comps[-1]) not in pre):
                    continue
            for form, p in dg.path_queries(path, ancestors=ancestors):
                if pre is not None and hash(dg.last_component(p)) not in pre:
                    continue
                d = dg.path_digest(key, form, p)
                if d in self._paths:
                    found.add(d)
        return found


class MarkerScanner:
    """The key-free view: only redaction markers count (what a journal-level verifier sees)."""

    def __init__(self, commitment: Commitment) -> None:
        self.commitment = commitment
        self._markers = commitment.lookup_marker()

    def digests(self, text: str) -> set[bytes]:
        if not isinstance(text, str) or "[redacted:" not in text:
            return set()
        out: set[bytes] = set()
        for hx in dg.MARKER_RE.findall(text):
            d = self._markers.get(hx)
            if d is not None:
                out.add(d)
        return out

    def path_digests(self, paths: Iterable[str], *, ancestors: bool = True) -> set[bytes]:
        return set()
