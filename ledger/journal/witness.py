"""A witness: its own Ed25519 key, and cosignatures (c2sp.org/tlog-cosignature v1) of checkpoints
it has checked to be consistent with the last one it cosigned for the same log.

A witness folder (``$XDG_CONFIG_HOME/eval-ledger/witness/`` unless given; mode 0700)::

    witness.key    0600  {"name": ..., "seed": "<64 hex>"}
    witness.vkey   0644  the C2SP verifier key, type 0x04: <name>+<key id>+<base64(0x04 || key)>
    state/<origin>-<hash>.json  {"origin", "size", "root"} of the last checkpoint cosigned

On a log's cosigned notes: ``ledger checkpoint --add-cosignature FILE`` keeps them in
``<ledger>/cosigned/<size>.note`` (the log's own signature re-checked, signature lines merged),
and ``ledger verify --witness VKEY`` requires valid cosignatures on the latest checkpoint.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.errors import KeyMaterialError, MalformedInput, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.note import (
    KEY_TYPE_COSIGNATURE_V1,
    Checkpoint,
    Verifier,
    cosignature_line,
    is_valid_key_name,
    open_checkpoint,
    open_note,
    parse_note,
)

KEY_FILE = "witness.key"
VKEY_FILE = "witness.vkey"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def witness_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "eval-ledger" / "witness"


def _write_private(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


@dataclass(frozen=True)
class Witness:
    name: str
    seed: bytes
    folder: Path

    @property
    def verifier(self) -> Verifier:
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes_raw()
        return Verifier.for_key(self.name, public, KEY_TYPE_COSIGNATURE_V1)


def init_witness(folder: Path, name: str, rng: Callable[[int], bytes] = os.urandom) -> Witness:
    """Create the witness key (refused when one exists)."""
    if not is_valid_key_name(name):
        raise UsageError(f"invalid witness name {name!r}: non-empty, no spaces or '+'")
    if (folder / KEY_FILE).exists():
        raise UsageError(f"a witness key exists already in {folder}")
    w = Witness(name, rng(32), folder)
    _write_private(folder / KEY_FILE, json.dumps({"name": name, "seed": w.seed.hex()}) + "\n", 0o600)
    _write_private(folder / VKEY_FILE, w.verifier.vkey + "\n", 0o644)
    return w


def load_witness(folder: Path) -> Witness:
    path = folder / KEY_FILE
    try:
        st = path.stat()
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KeyMaterialError(f"no witness key in {folder}: run `ledger witness init`") from None
    if st.st_mode & 0o077:
        raise KeyMaterialError(f"{path} is readable by others (mode {st.st_mode & 0o777:o}); chmod 600 it")
    try:
        obj = json.loads(raw)
        name, seed = str(obj["name"]), bytes.fromhex(obj["seed"])
    except (ValueError, KeyError, TypeError) as exc:
        raise KeyMaterialError(f"{path} is not a witness key file") from exc
    if len(seed) != 32 or not is_valid_key_name(name):
        raise KeyMaterialError(f"{path} is not a witness key file")
    return Witness(name, seed, folder)


def _state_path(w: Witness, origin: str) -> Path:
    safe = _UNSAFE.sub("_", origin).strip("._")[:80] or "log"
    return w.folder / "state" / f"{safe}-{hashlib.sha256(origin.encode()).hexdigest()[:12]}.json"


def _parse_proof(proof: Mapping[str, Any]) -> tuple[int, int, list[bytes]]:
    try:
        old, new = int(proof["old_size"]), int(proof["new_size"])
        hashes = [bytes.fromhex(h) for h in proof["hashes"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedInput("the consistency proof must be `ledger proof consistency OLD NEW --json` "
                             "output (old_size, new_size, hashes)") from exc
    return old, new, hashes


def cosign(w: Witness, note: str, log_verifier: Verifier, *, proof: Mapping[str, Any] | None = None,
           now: Callable[[], float] = time.time) -> tuple[str, Checkpoint]:
    """Check the log's signature and consistency with the last checkpoint this witness cosigned
    for the log; return the note with this witness's cosignature line added (and remember it).
    The state is read and written under the same lock as ``add_checkpoint``'s."""
    with _StateLock(w.folder):
        return _cosign_locked(w, note, log_verifier, proof, now)


def _cosign_locked(w: Witness, note: str, log_verifier: Verifier, proof: Mapping[str, Any] | None,
                   now: Callable[[], float]) -> tuple[str, Checkpoint]:
    cp = open_checkpoint(note, log_verifier)
    state_path = _state_path(w, cp.origin)
    if state_path.exists():
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            old_size, old_root = int(state["size"]), bytes.fromhex(state["root"])
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedInput(f"witness state {state_path} is damaged") from exc
        if cp.size < old_size:
            raise VerificationError("witness-consistency", f"this witness cosigned size {old_size} of "
                                    f"{cp.origin} already; size {cp.size} would be a rollback")
        if cp.size == old_size and cp.root != old_root:
            raise VerificationError("witness-consistency", f"a different root at size {cp.size} than the "
                                    "one this witness cosigned: a split view")
        if cp.size > old_size and old_size > 0:
            if proof is None:
                raise UsageError(f"this witness cosigned size {old_size} of {cp.origin}: give --proof with "
                                 f"`ledger proof consistency {old_size} {cp.size} --json`")
            p_old, p_new, hashes = _parse_proof(proof)
            if (p_old, p_new) != (old_size, cp.size):
                raise UsageError(f"the proof is from {p_old} to {p_new}; {old_size} to {cp.size} is needed")
            try:
                merkle.verify_consistency(old_size, cp.size, old_root, cp.root, hashes)
            except VerificationError as exc:
                raise VerificationError("witness-consistency", f"not consistent with size {old_size} "
                                        f"cosigned before: {exc}") from exc
    text, _sigs = parse_note(note)
    line = cosignature_line(text, w.name, w.seed, int(now()))
    cosigned = note + line
    open_note(cosigned, [log_verifier, w.verifier])  # what is handed out verifies
    _write_private(state_path, json.dumps({"origin": cp.origin, "size": cp.size,
                                           "root": cp.root.hex()}) + "\n", 0o600)
    return cosigned, cp


def check_witnesses(note: str, log_verifier: Verifier, witnesses: Sequence[Verifier],
                    threshold: int) -> list[str]:
    """The names of the witnesses whose cosignature on ``note`` verifies; raise
    VerificationError("witness-cosignature") when a named witness's line is forged, or
    ("witness-threshold") when fewer than ``threshold`` cosigned."""
    try:
        opened = open_note(note, [log_verifier, *witnesses])
    except VerificationError as exc:
        raise VerificationError("witness-cosignature", f"a signature on the latest checkpoint does "
                                f"not verify: {exc}") from exc
    signed = {(v.name, v.key_id) for v in opened.signed_by}
    if (log_verifier.name, log_verifier.key_id) not in signed:
        raise VerificationError("witness-cosignature", "the cosigned note lacks the log's own signature")
    got = [w.name for w in witnesses if (w.name, w.key_id) in signed]
    if len(got) < threshold:
        missing = [w.name for w in witnesses if (w.name, w.key_id) not in signed]
        raise VerificationError("witness-threshold", f"{len(got)} of the named witnesses cosigned the "
                                f"latest checkpoint, {threshold} required (missing: {', '.join(missing)})")
    return got


# ---------------------------------------------------------------------------------------------
# c2sp.org/tlog-witness: POST <prefix>/add-checkpoint

MAX_PROOF_LINES = 63
MAX_REQUEST_BYTES = 1 << 20
SIZE_CONTENT_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class WitnessAnswer:
    """An add-checkpoint response: HTTP status, content type and body (and what it means)."""

    status: int
    content_type: str
    body: str
    origin: str | None = None
    size: int | None = None  # the size cosigned (200) or held (409)


def _answer(status: int, message: str, origin: str | None = None) -> WitnessAnswer:
    return WitnessAnswer(status, "text/plain; charset=utf-8", message.rstrip("\n") + "\n", origin)


def parse_add_checkpoint(body: bytes) -> tuple[int, list[bytes], str]:
    """Split a request body into (old size, consistency proof, checkpoint note); MalformedInput
    for anything the spec's grammar does not allow."""
    if len(body) > MAX_REQUEST_BYTES:
        raise MalformedInput(f"request body is larger than {MAX_REQUEST_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedInput("request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise MalformedInput("request has no empty line before the checkpoint")
    lines = head.split("\n")
    first = lines[0]
    if not first.startswith("old ") or not re.fullmatch(r"0|[1-9][0-9]{0,18}", first[4:]):
        raise MalformedInput("the first line must be `old <size>` (decimal, no leading zeros)")
    old = int(first[4:])
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise MalformedInput(f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof = []
    for i, line in enumerate(lines[1:]):
        try:
            h = base64.b64decode(line.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            raise MalformedInput(f"proof line {i + 1} is not base64") from None
        if len(h) != 32 or base64.b64encode(h).decode("ascii") != line:
            raise MalformedInput(f"proof line {i + 1} is not one canonical base64 SHA-256 hash")
        proof.append(h)
    return old, proof, note


class _StateLock:
    """The check of the old size and the write of the new state as one step, across threads
    (a lock) and processes (flock on state/.lock)."""

    _lock = threading.Lock()

    def __init__(self, folder: Path) -> None:
        self.path = folder / "state" / ".lock"

    def __enter__(self) -> _StateLock:
        self._lock.acquire()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing drops the flock
        self._lock.release()


def _read_state(path: Path) -> tuple[int, bytes] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        return int(state["size"]), bytes.fromhex(state["root"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedInput(f"witness state {path} is damaged") from exc


def add_checkpoint(w: Witness, logs: Mapping[str, Sequence[Verifier]], body: bytes, *,
                   now: Callable[[], float] = time.time) -> WitnessAnswer:
    """Answer one tlog-witness add-checkpoint request, in the spec's order of checks: 400
    malformed (or old size above the checkpoint's), 404 unknown origin, 403 no trusted signature,
    409 (``text/x.tlog.size``) old size not the one cosigned last (or the same size with another
    root), 422 consistency proof that does not verify, else 200 with this witness's cosignature
    line, after the new state is persisted."""
    try:
        old, proof, note = parse_add_checkpoint(body)
        text, _sigs = parse_note(note)
        cp = Checkpoint.parse(text)
    except MalformedInput as exc:
        return _answer(400, f"malformed request: {exc}")
    trusted = logs.get(cp.origin)
    if not trusted:
        return _answer(404, f"unknown log origin {cp.origin!r}", cp.origin)
    try:
        open_note(note, list(trusted))
    except (VerificationError, MalformedInput, UsageError) as exc:
        return _answer(403, f"no trusted signature on the checkpoint: {exc}", cp.origin)
    if old > cp.size:
        return _answer(400, f"old size {old} is larger than the checkpoint's size {cp.size}", cp.origin)
    path = _state_path(w, cp.origin)
    with _StateLock(w.folder):
        try:
            state = _read_state(path)
        except MalformedInput as exc:
            return _answer(500, str(exc), cp.origin)
        held, held_root = state if state is not None else (0, merkle.EMPTY_ROOT)
        if old != held:
            return WitnessAnswer(409, SIZE_CONTENT_TYPE, f"{held}\n", cp.origin, held)
        if old == cp.size:
            if state is not None and cp.root != held_root:
                return WitnessAnswer(409, SIZE_CONTENT_TYPE, f"{held}\n", cp.origin, held)
            if proof:
                return _answer(422, "a consistency proof between equal sizes must be empty", cp.origin)
        elif old == 0:
            if proof:
                return _answer(422, "the consistency proof must be empty when the old size is 0", cp.origin)
        else:
            try:
                merkle.verify_consistency(old, cp.size, held_root, cp.root, proof)
            except VerificationError as exc:
                return _answer(422, f"the consistency proof from size {old} does not verify: {exc}", cp.origin)
        line = cosignature_line(text, w.name, w.seed, int(now()))
        _write_private(path, json.dumps({"origin": cp.origin, "size": cp.size, "root": cp.root.hex()}) + "\n",
                       0o600)
    return WitnessAnswer(200, "text/plain; charset=utf-8", line, cp.origin, cp.size)
