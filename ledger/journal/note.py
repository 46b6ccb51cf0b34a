"""C2SP signed notes and tlog checkpoints, signed with Ed25519.

Pure: no I/O, no clock, no randomness. Keys come in as bytes or strings.

Signed note (c2sp.org/signed-note)::

    <text: one or more lines, each ending in "\\n">
    <blank line>
    — <key name> <base64(4-byte big-endian key ID || signature)>
    ...one or more signature lines...

The text is everything up to and including the newline before the LAST blank line. The whole
note is UTF-8 and holds no control character below U+0020 other than newline. Key names are
non-empty and contain neither whitespace nor ``+``.

Key ID = SHA-256(name || 0x0A || type || public key)[:4], big-endian. Type 0x01 is a plain
Ed25519 signature over the text. Type 0x04 is an Ed25519 witness cosignature
(c2sp.org/tlog-cosignature v1): the signature blob is a big-endian u64 timestamp then the
Ed25519 signature over ``"cosignature/v1\\ntime <ts>\\n" + text``. We verify both types (a
checkpoint may carry witness cosignatures), and produce both (``cosignature_line``, for
``ledger witness cosign``).

Verifier key (vkey): ``<name>+<8 hex key ID>+<base64(type || 32-byte public key)>``.
Signer key (skey, Go ``x/mod/sumdb/note`` convention, not part of C2SP):
``PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x01 || 32-byte Ed25519 seed)>``.

Opening follows the spec and Go's ``note.Open``: signatures from unknown keys (name and key ID
do not both match) are ignored; a known key whose signature fails rejects the whole note; at
least one known signature must verify. Only the first line for a given (name, key ID) counts.
Stricter than Go in one respect: base64 must be canonical (padding bits zero), so a note has one
encoding per signature.

Checkpoint (c2sp.org/tlog-checkpoint) text::

    <origin>
    <tree size, decimal, no leading zeros>
    <base64 of the 32-byte RFC 6962 root>
    [<non-empty extension line>...]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledger.errors import MalformedInput, UsageError, VerificationError

KEY_TYPE_ED25519 = 0x01
KEY_TYPE_COSIGNATURE_V1 = 0x04
SUPPORTED_KEY_TYPES = frozenset({KEY_TYPE_ED25519, KEY_TYPE_COSIGNATURE_V1})

SIGNATURE_PREFIX = "\u2014 "  # EM DASH, SPACE
COSIGNATURE_V1_HEADER = "cosignature/v1\n"
MAX_SIGNATURES = 100  # the spec demands at least 16; Go's note.Open allows 100
MAX_NOTE_BYTES = 1 << 20
MAX_TREE_SIZE = (1 << 63) - 1  # Go's tlog uses int64 sizes
MAX_TIMESTAMP = (1 << 63) - 1
HASH_SIZE = 32
_ED25519_KEY_SIZE = 32
_ED25519_SIG_SIZE = 64

_HEX8 = re.compile(r"[0-9a-fA-F]{8}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


# ---------------------------------------------------------------------------------------------
# small validators


_BAD_TEXT_CHAR = re.compile("[\x00-\x09\x0b-\x1f\ud800-\udfff]")


def _check_text_chars(text: str, what: str) -> None:
    """Refuse control characters other than newline (and lone surrogates, which are not UTF-8)."""
    bad = _BAD_TEXT_CHAR.search(text)
    if bad is not None:
        raise MalformedInput(f"{what} contains control character U+{ord(bad.group()):04X} at offset "
                             f"{bad.start()}")


def is_valid_key_name(name: str) -> bool:
    """A key name is non-empty and holds no whitespace, no ``+`` and no control character."""
    if not name or "+" in name:
        return False
    return all(not char.isspace() and ord(char) >= 0x20 for char in name)


def _require_key_name(name: str) -> None:
    if not is_valid_key_name(name):
        raise MalformedInput(
            f"invalid key name {name!r}: it must be non-empty, without spaces or '+'"
        )


def key_id(name: str, key_type: int, public_key: bytes) -> int:
    """SHA-256(name || 0x0A || type || public key)[:4] as a big-endian integer."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([key_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _b64decode_or_none(value: str) -> bytes | None:
    if not value.isascii():
        return None
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, ValueError):
        return None


def _b64decode_strict(value: str, what: str) -> bytes:
    decoded = _b64decode_or_none(value)
    if decoded is None:
        raise MalformedInput(f"{what} is not valid base64")
    return decoded


def _ed25519_verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
    if len(signature) != _ED25519_SIG_SIZE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# keys


@dataclass(frozen=True)
class Verifier:
    """A public key that can check note signatures: (name, key ID) names it on the wire."""

    name: str
    key_id: int
    public_key: bytes
    key_type: int = KEY_TYPE_ED25519

    def __post_init__(self) -> None:
        _require_key_name(self.name)
        if self.key_type not in SUPPORTED_KEY_TYPES:
            raise MalformedInput(f"unsupported signature type 0x{self.key_type:02x}")
        if len(self.public_key) != _ED25519_KEY_SIZE:
            raise MalformedInput(
                f"Ed25519 public key must be {_ED25519_KEY_SIZE} bytes, got {len(self.public_key)}"
            )
        computed = key_id(self.name, self.key_type, self.public_key)
        if self.key_id != computed:
            raise MalformedInput(
                f"key ID {self.key_id:08x} of {self.name!r} does not match its public key "
                f"(computed {computed:08x})"
            )

    @classmethod
    def for_key(
        cls, name: str, public_key: bytes, key_type: int = KEY_TYPE_ED25519
    ) -> Verifier:
        """The verifier for a raw public key; the key ID is derived as C2SP recommends."""
        _require_key_name(name)
        return cls(name, key_id(name, key_type, public_key), bytes(public_key), key_type)

    @classmethod
    def from_vkey(cls, vkey: str) -> Verifier:
        """Parse ``name+hex8+base64(type || key)``; the key ID must match the key."""
        vkey = vkey.strip()
        parts = vkey.split("+", 2)
        if len(parts) != 3:
            raise MalformedInput("verifier key must look like NAME+KEYID+BASE64KEY")
        name, hex_id, b64 = parts
        _require_key_name(name)
        if not _HEX8.fullmatch(hex_id):
            raise MalformedInput(f"verifier key ID {hex_id!r} is not 8 hex digits")
        raw = _b64decode_strict(b64, "verifier key material")
        if len(raw) < 1:
            raise MalformedInput("verifier key material is empty")
        key_type, public_key = raw[0], raw[1:]
        if key_type not in SUPPORTED_KEY_TYPES:
            raise MalformedInput(
                f"verifier key {name!r} has unsupported signature type 0x{key_type:02x}"
            )
        return cls(name, int(hex_id, 16), public_key, key_type)

    @property
    def vkey(self) -> str:
        """The C2SP verifier key string."""
        material = base64.b64encode(bytes([self.key_type]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{material}"

    @property
    def key_id_hex(self) -> str:
        return f"{self.key_id:08x}"

    def verify(self, text: str, signature: bytes) -> int | None:
        """Check ``signature`` (the bytes after the key ID) over ``text``.

        Returns the cosignature timestamp for type 0x04 keys, ``None`` for plain Ed25519 keys;
        raises VerificationError when the signature does not verify.
        """
        body = text.encode("utf-8")
        timestamp: int | None = None
        if self.key_type == KEY_TYPE_COSIGNATURE_V1:
            timestamp, signature = split_cosignature(signature)
            message = f"{COSIGNATURE_V1_HEADER}time {timestamp}\n".encode("ascii") + body
        else:
            message = body
        if not _ed25519_verify(self.public_key, signature, message):
            raise VerificationError(
                "checkpoint-signature",
                f"signature by known key {self.name}+{self.key_id_hex} does not verify",
            )
        return timestamp


def split_cosignature(signature: bytes) -> tuple[int, bytes]:
    """Split a tlog-cosignature/v1 blob (after the key ID) into (timestamp, Ed25519 signature)."""
    if len(signature) != 8 + _ED25519_SIG_SIZE:
        raise VerificationError(
            "checkpoint-signature",
            f"cosignature must be {8 + _ED25519_SIG_SIZE} bytes after the key ID, "
            f"got {len(signature)}",
        )
    timestamp = int.from_bytes(signature[:8], "big")
    if timestamp > MAX_TIMESTAMP:
        raise VerificationError("checkpoint-signature", "cosignature timestamp exceeds 2^63-1")
    return timestamp, signature[8:]


@dataclass(frozen=True)
class Signer:
    """An Ed25519 signing key (type 0x01). The seed never appears in repr or messages."""

    name: str
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        _require_key_name(self.name)
        if len(self.seed) != _ED25519_KEY_SIZE:
            raise MalformedInput(f"Ed25519 seed must be {_ED25519_KEY_SIZE} bytes")

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Signer:
        return cls(name, bytes(seed))

    @classmethod
    def from_skey(cls, skey: str) -> Signer:
        """Parse ``PRIVATE+KEY+name+hex8+base64(0x01 || seed)``; the key ID must match."""
        parts = skey.strip().split("+", 4)
        if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
            raise MalformedInput("signer key must look like PRIVATE+KEY+NAME+KEYID+BASE64SEED")
        _, _, name, hex_id, b64 = parts
        if not is_valid_key_name(name):
            # not quoted: in a damaged key file this field could hold secret material
            raise MalformedInput("signer key name is empty or contains spaces or '+'")
        if not _HEX8.fullmatch(hex_id):
            raise MalformedInput("signer key ID is not 8 hex digits")
        raw = _b64decode_or_none(b64)
        if raw is None:
            # raised outside any except block, so no chained exception holds the secret text
            raise MalformedInput("signer key material is not valid base64")
        if len(raw) != 1 + _ED25519_KEY_SIZE or raw[0] != KEY_TYPE_ED25519:
            raise MalformedInput("signer key material must be 0x01 followed by a 32-byte seed")
        signer = cls(name, raw[1:])
        if signer.verifier.key_id != int(hex_id, 16):
            raise MalformedInput(f"signer key ID {hex_id} does not match the key of {name!r}")
        return signer

    @property
    def skey(self) -> str:
        """The Go ``x/mod/sumdb/note`` private key string. Secret: store it 0600."""
        material = base64.b64encode(bytes([KEY_TYPE_ED25519]) + self.seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id_hex}+{material}"

    @property
    def public_key(self) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes_raw()

    @property
    def verifier(self) -> Verifier:
        return Verifier.for_key(self.name, self.public_key, KEY_TYPE_ED25519)

    def signature_line(self, text: str) -> str:
        """The ``— name base64(keyid || sig)`` line (with newline) for ``text``."""
        _check_note_text(text)
        sig = Ed25519PrivateKey.from_private_bytes(self.seed).sign(text.encode("utf-8"))
        blob = self.verifier.key_id.to_bytes(4, "big") + sig
        return f"{SIGNATURE_PREFIX}{self.name} {base64.b64encode(blob).decode('ascii')}\n"

    def sign_note(self, text: str) -> str:
        """Return the whole signed note: text, blank line, one signature line."""
        return text + "\n" + self.signature_line(text)


def cosignature_line(text: str, name: str, seed: bytes, timestamp: int) -> str:
    """A c2sp.org/tlog-cosignature v1 (Ed25519) signature line, with newline, for checkpoint
    ``text``: key ID = SHA-256(name || 0x0A || 0x04 || public key)[:4]; blob = key ID || u64
    big-endian ``timestamp`` || Ed25519 over ``"cosignature/v1\ntime <timestamp>\n" + text``."""
    _check_note_text(text)
    _require_key_name(name)
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise MalformedInput("cosignature timestamp must be between 0 and 2^63-1")
    if len(seed) != _ED25519_KEY_SIZE:
        raise MalformedInput(f"Ed25519 seed must be {_ED25519_KEY_SIZE} bytes")
    priv = Ed25519PrivateKey.from_private_bytes(seed)
    public = priv.public_key().public_bytes_raw()
    message = f"{COSIGNATURE_V1_HEADER}time {timestamp}\n".encode("ascii") + text.encode("utf-8")
    blob = (key_id(name, KEY_TYPE_COSIGNATURE_V1, public).to_bytes(4, "big")
            + timestamp.to_bytes(8, "big") + priv.sign(message))
    return f"{SIGNATURE_PREFIX}{name} {base64.b64encode(blob).decode('ascii')}\n"


def merge_signatures(note: str, other: str) -> str:
    """``note`` with the signature lines of ``other`` (a note over the same text) added, each
    (name, key ID) once, in order: ``note``'s lines first."""
    text, sigs = parse_note(note)
    other_text, other_sigs = parse_note(other)
    if other_text != text:
        raise MalformedInput("the two notes sign different texts")
    merged = list(sigs)
    seen = {(s.name, s.key_id) for s in sigs}
    for s in other_sigs:
        if (s.name, s.key_id) not in seen:
            seen.add((s.name, s.key_id))
            merged.append(s)
    return text + "\n" + "".join(s.line + "\n" for s in merged)


# ---------------------------------------------------------------------------------------------
# notes


@dataclass(frozen=True)
class NoteSignature:
    """One signature line as parsed: name, key ID and the bytes after the key ID."""

    name: str
    key_id: int
    signature: bytes

    @property
    def blob(self) -> bytes:
        """The decoded base64 payload: key ID (4 bytes) then the signature."""
        return self.key_id.to_bytes(4, "big") + self.signature

    @property
    def line(self) -> str:
        return f"{SIGNATURE_PREFIX}{self.name} {base64.b64encode(self.blob).decode('ascii')}"


@dataclass(frozen=True)
class VerifiedSignature:
    verifier: Verifier
    timestamp: int | None = None  # cosignature time (POSIX seconds) for type 0x04 keys


@dataclass(frozen=True)
class OpenedNote:
    """A note whose text is vouched for by at least one known key."""

    text: str
    verified: tuple[VerifiedSignature, ...]
    unverified: tuple[NoteSignature, ...] = ()  # from keys the caller did not supply

    @property
    def signed_by(self) -> tuple[Verifier, ...]:
        return tuple(item.verifier for item in self.verified)


def _check_note_text(text: str) -> None:
    if not text or not text.endswith("\n"):
        raise MalformedInput("note text must be non-empty and end with a newline")
    _check_text_chars(text, "note text")


def parse_signature_line(line: str) -> NoteSignature:
    """Parse one ``— name base64(keyid || sig)`` line (without its newline)."""
    if not line.startswith(SIGNATURE_PREFIX):
        raise MalformedInput("signature line does not start with an em dash (U+2014) and a space")
    name, sep, b64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not sep:
        raise MalformedInput("signature line has no space between key name and signature")
    _require_key_name(name)
    blob = _b64decode_strict(b64, f"signature of {name!r}")
    if base64.b64encode(blob).decode("ascii") != b64:
        # RFC 4648 3.5: stray padding bits would let one signature have many encodings
        raise MalformedInput(f"signature of {name!r} is not canonical base64")
    if len(blob) < 5:
        raise MalformedInput(f"signature of {name!r} is shorter than a key ID plus one byte")
    return NoteSignature(name, int.from_bytes(blob[:4], "big"), blob[4:])


def parse_note(note: str | bytes) -> tuple[str, tuple[NoteSignature, ...]]:
    """Split a signed note into its text and its signature lines; syntax only, no crypto."""
    if isinstance(note, bytes | bytearray | memoryview):
        raw = bytes(note)
        if len(raw) > MAX_NOTE_BYTES:
            raise MalformedInput(f"note is larger than {MAX_NOTE_BYTES} bytes")
        try:
            note = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedInput(f"note is not valid UTF-8 (byte {exc.start})") from None
    elif len(note) > MAX_NOTE_BYTES:
        raise MalformedInput(f"note is larger than {MAX_NOTE_BYTES} characters")
    _check_text_chars(note, "note")
    split = note.rfind("\n\n")
    if split < 0:
        raise MalformedInput("note has no blank line before its signatures")
    text, sig_block = note[: split + 1], note[split + 2 :]
    if not sig_block:
        raise MalformedInput("note has no signature lines")
    if not sig_block.endswith("\n"):
        raise MalformedInput("note does not end with a newline")
    lines = sig_block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedInput(f"note has more than {MAX_SIGNATURES} signatures")
    return text, tuple(parse_signature_line(line) for line in lines)


def open_note(note: str | bytes, verifiers: Sequence[Verifier]) -> OpenedNote:
    """Verify a signed note against known keys and return its text.

    Raises MalformedInput for syntax errors and VerificationError(check="checkpoint-signature")
    when a known key's signature fails or when no known key signed.
    """
    known: dict[tuple[str, int], Verifier] = {}
    for verifier in verifiers:
        slot = (verifier.name, verifier.key_id)
        if slot in known and known[slot] != verifier:
            raise UsageError(f"two different verifier keys share name and ID {verifier.vkey}")
        known[slot] = verifier
    text, signatures = parse_note(note)
    verified: list[VerifiedSignature] = []
    unverified: list[NoteSignature] = []
    seen: set[tuple[str, int]] = set()
    for sig in signatures:
        slot = (sig.name, sig.key_id)
        if slot in seen:
            continue  # the first line for a key decides; repeats are dropped (as Go does)
        seen.add(slot)
        match = known.get(slot)
        if match is None:
            unverified.append(sig)
            continue
        timestamp = match.verify(text, sig.signature)
        verified.append(VerifiedSignature(match, timestamp))
    if not verified:
        wanted = ", ".join(f"{v.name}+{v.key_id_hex}" for v in known.values()) or "none"
        present = ", ".join(f"{s.name}+{s.key_id:08x}" for s in unverified) or "none"
        raise VerificationError(
            "checkpoint-signature",
            "no signature from a known key",
            expected=wanted,
            computed=present,
        )
    return OpenedNote(text, tuple(verified), tuple(unverified))


# ---------------------------------------------------------------------------------------------
# checkpoints


@dataclass(frozen=True)
class Checkpoint:
    """A signed tree head body: origin, tree size, RFC 6962 root, optional extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise MalformedInput("checkpoint origin must be one non-empty line")
        _check_text_chars(self.origin, "checkpoint origin")
        if isinstance(self.size, bool) or not 0 <= self.size <= MAX_TREE_SIZE:
            raise MalformedInput(f"checkpoint tree size {self.size!r} is out of range")
        if len(self.root) != HASH_SIZE:
            raise MalformedInput(
                f"checkpoint root must be {HASH_SIZE} bytes, got {len(self.root)}"
            )
        for line in self.extensions:
            if not line or "\n" in line:
                raise MalformedInput("checkpoint extension lines must be non-empty single lines")
            _check_text_chars(line, "checkpoint extension line")

    def body(self) -> str:
        """The note text: ``origin\\nsize\\nbase64(root)\\n`` plus extension lines."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode("ascii")]
        lines.extend(self.extensions)
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, body: str) -> Checkpoint:
        """Strictly parse a checkpoint note text."""
        if not body.endswith("\n"):
            raise MalformedInput("checkpoint text must end with a newline")
        _check_text_chars(body, "checkpoint text")
        lines = body[:-1].split("\n")
        if len(lines) < 3:
            raise MalformedInput("checkpoint text needs origin, tree size and root lines")
        origin, size_text, root_text, *extensions = lines
        if not origin:
            raise MalformedInput("checkpoint origin line is empty")
        if not _DECIMAL.fullmatch(size_text):
            raise MalformedInput(
                f"checkpoint tree size {size_text[:40]!r} is not a decimal without leading zeros"
            )
        size = int(size_text)
        if size > MAX_TREE_SIZE:
            raise MalformedInput("checkpoint tree size exceeds 2^63-1")
        root = _b64decode_strict(root_text, "checkpoint root")
        if len(root) != HASH_SIZE:
            raise MalformedInput(f"checkpoint root must be {HASH_SIZE} bytes, got {len(root)}")
        if base64.b64encode(root).decode("ascii") != root_text:
            raise MalformedInput("checkpoint root is not canonical base64")
        if any(not line for line in extensions):
            raise MalformedInput("checkpoint has an empty extension line")
        return cls(origin, size, root, tuple(extensions))


def sign_checkpoint(cp: Checkpoint, signer: Signer) -> str:
    """The checkpoint as a signed note (the log's key name SHOULD equal the origin)."""
    return signer.sign_note(cp.body())


def open_checkpoint(note: str | bytes, verifier: Verifier, *, origin: str | None = None) -> Checkpoint:
    """Verify a signed checkpoint with ``verifier`` and parse its body.

    ``origin``, when given, must equal the checkpoint's origin line (check ``checkpoint-origin``).
    """
    opened = open_note(note, [verifier])
    checkpoint = Checkpoint.parse(opened.text)
    if origin is not None and checkpoint.origin != origin:
        raise VerificationError(
            "checkpoint-origin",
            "checkpoint is for another log",
            expected=origin,
            computed=checkpoint.origin,
        )
    return checkpoint
