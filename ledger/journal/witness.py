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

import json
import os
import re
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
    import hashlib

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
    for the log; return the note with this witness's cosignature line added (and remember it)."""
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
