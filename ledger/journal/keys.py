"""Key material on disk: the master secret, the Ed25519 signing key, the public verifier key.

Layout of a keys directory (mode 0700)::

    master.key     0600  64 lowercase hex characters (32 random bytes) and a newline
    signing.key    0600  the signer key string PRIVATE+KEY+<name>+<keyid>+<base64(0x01||seed)>
                         (Go x/mod/sumdb/note convention) and a newline
    signing.vkey   0644  the C2SP verifier key <name>+<keyid>+<base64(0x01||pubkey)> and a newline

The master secret is never used directly: ``KeyRing.subkey(label)`` derives one 32-byte key per
purpose with HKDF-SHA256. Secret files are refused when group or others may read them, and no
error message ever quotes secret bytes. ``load_verifier`` reads only the public file and never
creates anything, so ``verify`` cannot mint keys.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ledger.errors import KeyMaterialError, MalformedInput
from ledger.journal.note import Signer, Verifier, is_valid_key_name

MASTER_FILE = "master.key"
SIGNING_FILE = "signing.key"
VKEY_FILE = "signing.vkey"
SECRET_FILES = (MASTER_FILE, SIGNING_FILE)
ALL_FILES = (MASTER_FILE, SIGNING_FILE, VKEY_FILE)
HKDF_SALT = b"eval-ledger/v1"
SECRET_SIZE = 32
_MAX_KEY_FILE = 4096
_MASTER_LINE = re.compile(r"[0-9a-f]{64}\n?")


@dataclass
class KeyRing:
    """Loaded key material. ``repr`` shows the key name and key ID, never a secret."""

    master_secret: bytes = field(repr=False)
    signer: Signer
    key_name: str

    def __post_init__(self) -> None:
        if len(self.master_secret) != SECRET_SIZE:
            raise KeyMaterialError(f"master secret must be {SECRET_SIZE} bytes")

    def subkey(self, label: str) -> bytes:
        """HKDF-SHA256(master, salt=b"eval-ledger/v1", info=label): 32 bytes, one per purpose."""
        if not label:
            raise KeyMaterialError("subkey label must be non-empty")
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=HKDF_SALT, info=label.encode("utf-8"))
        return hkdf.derive(self.master_secret)

    @property
    def verifier(self) -> Verifier:
        return self.signer.verifier


def new_key_name(rng: Callable[[int], bytes] = os.urandom) -> str:
    """A fresh default key name (also the checkpoint origin): ``eval-ledger/<16 hex>``."""
    return f"eval-ledger/{rng(8).hex()}"


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_file(path: Path, data: str, mode: int, *, replace: bool) -> None:
    """Write ``data`` to a temp file with ``mode`` from the start, fsync, then move into place.

    Without ``replace`` the final step is a hard link, which fails if ``path`` exists, so two
    concurrent ``init_keys`` calls cannot both win.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed it; make it exact
            os.write(fd, data.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise KeyMaterialError(
                    f"{path} appeared while keys were being created; refusing to overwrite it"
                ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def init_keys(
    keys_dir: Path,
    *,
    name: str,
    rng: Callable[[int], bytes] = os.urandom,
    force: bool = False,
) -> KeyRing:
    """Create a master secret and a signing key named ``name`` in ``keys_dir``.

    Refuses to touch existing key files unless ``force`` (which replaces all three).
    """
    keys_dir = Path(keys_dir)
    if not is_valid_key_name(name):
        raise KeyMaterialError(
            f"invalid key name {name!r}: it must be non-empty, without spaces or '+'"
        )
    existing = [fname for fname in ALL_FILES if (keys_dir / fname).exists()]
    if existing and not force:
        raise KeyMaterialError(
            f"keys already exist in {keys_dir} ({', '.join(existing)}); refusing to overwrite "
            "them (replacing keys means old checkpoints no longer verify with the new key)"
        )
    master = rng(SECRET_SIZE)
    seed = rng(SECRET_SIZE)
    if len(master) != SECRET_SIZE or len(seed) != SECRET_SIZE:
        raise KeyMaterialError(f"random source returned fewer than {SECRET_SIZE} bytes")
    signer = Signer.from_seed(name, seed)
    try:
        keys_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(keys_dir, 0o700)
        _write_file(keys_dir / MASTER_FILE, master.hex() + "\n", 0o600, replace=force)
        _write_file(keys_dir / SIGNING_FILE, signer.skey + "\n", 0o600, replace=force)
        _write_file(keys_dir / VKEY_FILE, signer.verifier.vkey + "\n", 0o644, replace=force)
    except OSError as exc:
        raise KeyMaterialError(f"cannot write keys in {keys_dir}: {exc.strerror}") from None
    _fsync_dir(keys_dir)
    return KeyRing(master_secret=master, signer=signer, key_name=name)


def _read_small(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_KEY_FILE + 1)
    except OSError as exc:
        raise KeyMaterialError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > _MAX_KEY_FILE:
        raise KeyMaterialError(f"{path} is too large to be a key file")
    if not raw.isascii():
        # checked up front: a UnicodeDecodeError would carry the secret bytes along
        raise KeyMaterialError(f"{path} is malformed: not ASCII text")
    return raw.decode("ascii")


def _check_secret_mode(path: Path) -> None:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise KeyMaterialError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyMaterialError(f"{path} is not a regular file")
    loose = st.st_mode & 0o077
    if loose:
        raise KeyMaterialError(
            f"{path} is readable or writable by group/others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"fix it with `chmod 600 {path}`"
        )


def load_keys(keys_dir: Path) -> KeyRing:
    """Load the key ring; refuses missing, malformed or loosely permitted secret files."""
    keys_dir = Path(keys_dir)
    present = [fname for fname in ALL_FILES if (keys_dir / fname).exists()]
    if not present:
        raise KeyMaterialError(f"no keys in {keys_dir}: run `ledger keys init`")
    missing = [fname for fname in ALL_FILES if fname not in present]
    if missing:
        raise KeyMaterialError(
            f"incomplete keys in {keys_dir}: {', '.join(missing)} missing; restore it from a "
            "backup, or create a new key set with `ledger keys init --force`"
        )
    for fname in SECRET_FILES:
        _check_secret_mode(keys_dir / fname)

    master_path = keys_dir / MASTER_FILE
    master_text = _read_small(master_path)
    if not _MASTER_LINE.fullmatch(master_text):
        raise KeyMaterialError(
            f"{master_path} is malformed: expected 64 lowercase hex characters and a newline"
        )
    master = bytes.fromhex(master_text[:64])

    signing_path = keys_dir / SIGNING_FILE
    signer, problem = _parse_skey(_read_small(signing_path))
    if signer is None:
        raise KeyMaterialError(f"{signing_path} is malformed: {problem}")

    vkey_path = keys_dir / VKEY_FILE
    verifier = _parse_vkey_file(vkey_path)
    if verifier != signer.verifier:
        raise KeyMaterialError(
            f"{vkey_path} ({verifier.name}+{verifier.key_id_hex}) does not match {signing_path} "
            f"({signer.name}+{signer.verifier.key_id_hex})"
        )
    return KeyRing(master_secret=master, signer=signer, key_name=signer.name)


def load_or_init_keys(keys_dir: Path) -> KeyRing:
    """The keys a run or bench signs with: loaded, or made under a fresh name when the folder has
    none of the key files yet (a partial set is loaded, and refused with the reason)."""
    if not any((Path(keys_dir) / name).exists() for name in ALL_FILES):
        return init_keys(Path(keys_dir), name=new_key_name())
    return load_keys(Path(keys_dir))


def _parse_skey(text: str) -> tuple[Signer | None, str]:
    """Parse a signer key; the error text comes from note.py, which never quotes secrets."""
    try:
        return Signer.from_skey(text), ""
    except MalformedInput as exc:
        return None, str(exc)


def _parse_vkey_file(path: Path) -> Verifier:
    try:
        return Verifier.from_vkey(_read_small(path))
    except MalformedInput as exc:
        raise KeyMaterialError(f"{path} is malformed: {exc}") from None


def load_verifier(keys_dir: Path) -> Verifier:
    """Read only the public verifier key; never creates or reads a secret."""
    path = Path(keys_dir) / VKEY_FILE
    if not path.exists():
        raise KeyMaterialError(f"no verifier key in {keys_dir}: run `ledger keys init`")
    return _parse_vkey_file(path)
