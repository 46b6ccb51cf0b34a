"""Key files: creation, modes, loading, refusal of loose or damaged files, subkey derivation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import KeyMaterialError, LedgerError
from ledger.journal.keys import (
    HKDF_SALT,
    KeyRing,
    init_keys,
    load_keys,
    load_verifier,
    new_key_name,
)
from ledger.journal.note import Signer, Verifier, is_valid_key_name, open_note

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "note-vectors.json").read_text("utf-8")
)
LOG = VECTORS["keys"]["ledger_log"]
MASTER = hashlib.sha256(b"test master secret").digest()
SEED = bytes.fromhex(LOG["seed_hex"])
SECRET_STRINGS = (
    MASTER.hex(),
    SEED.hex(),
    LOG["skey_go_xmod"],
    LOG["skey_go_xmod"].split("+", 4)[4],
    base64.b64encode(MASTER).decode(),
)


def fixed_rng(*chunks: bytes) -> Callable[[int], bytes]:
    """An rng that hands out the given byte strings in order."""
    it: Iterator[bytes] = iter(chunks)

    def rng(n: int) -> bytes:
        chunk = next(it)
        assert len(chunk) == n
        return chunk

    return rng


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    return tmp_path / "ledger" / "keys"


@pytest.fixture
def ring(keys_dir: Path) -> KeyRing:
    return init_keys(keys_dir, name=LOG["name"], rng=fixed_rng(MASTER, SEED))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_no_secret(exc: BaseException) -> None:
    texts = []
    current: BaseException | None = exc
    while current is not None:
        texts += [str(current), repr(current)]
        current = current.__cause__ or current.__context__
    for text in texts:
        for secret in SECRET_STRINGS:
            assert secret not in text


# --- init ----------------------------------------------------------------------------------


def test_init_writes_files_with_strict_modes(keys_dir: Path, ring: KeyRing) -> None:
    """init creates a 0700 directory, 0600 secret files and a 0644 public key file."""
    assert _mode(keys_dir) == 0o700
    assert _mode(keys_dir / "master.key") == 0o600
    assert _mode(keys_dir / "signing.key") == 0o600
    assert _mode(keys_dir / "signing.vkey") == 0o644
    assert sorted(p.name for p in keys_dir.iterdir()) == ["master.key", "signing.key", "signing.vkey"]


def test_init_modes_ignore_a_permissive_umask(keys_dir: Path) -> None:
    """Secret files are 0600 even when the process umask is 0."""
    old = os.umask(0)
    try:
        init_keys(keys_dir, name="example.com/umask")
    finally:
        os.umask(old)
    assert _mode(keys_dir / "master.key") == 0o600
    assert _mode(keys_dir / "signing.key") == 0o600
    assert _mode(keys_dir) == 0o700


def test_init_file_contents_are_documented_formats(keys_dir: Path, ring: KeyRing) -> None:
    """master.key is hex + newline; signing.key/.vkey are the C2SP/Go key strings of the vector."""
    assert (keys_dir / "master.key").read_text() == MASTER.hex() + "\n"
    assert (keys_dir / "signing.key").read_text() == LOG["skey_go_xmod"] + "\n"
    assert (keys_dir / "signing.vkey").read_text() == LOG["vkey"] + "\n"
    assert ring.verifier.vkey == LOG["vkey"]
    assert ring.key_name == LOG["name"]


def test_init_refuses_to_overwrite(keys_dir: Path, ring: KeyRing) -> None:
    """A second init fails and leaves every existing file byte-identical."""
    before = {p.name: p.read_bytes() for p in keys_dir.iterdir()}
    with pytest.raises(KeyMaterialError, match="refusing to overwrite") as info:
        init_keys(keys_dir, name="example.com/other")
    assert {p.name: p.read_bytes() for p in keys_dir.iterdir()} == before
    _assert_no_secret(info.value)


def test_init_refuses_when_only_part_of_a_key_set_exists(keys_dir: Path, ring: KeyRing) -> None:
    """Even one leftover key file blocks a non-forced init."""
    (keys_dir / "master.key").unlink()
    (keys_dir / "signing.key").unlink()
    with pytest.raises(KeyMaterialError, match="signing.vkey"):
        init_keys(keys_dir, name="example.com/other")
    assert not (keys_dir / "master.key").exists()


def test_init_force_replaces_all_keys(keys_dir: Path, ring: KeyRing) -> None:
    """force=True writes a fresh key set that loads, with the new name and new secrets."""
    new = init_keys(keys_dir, name="example.com/rotated", force=True)
    loaded = load_keys(keys_dir)
    assert loaded.verifier == new.verifier != ring.verifier
    assert loaded.master_secret != MASTER
    assert _mode(keys_dir / "signing.key") == 0o600
    assert not [p for p in keys_dir.iterdir() if p.name.endswith(".tmp")]


def test_init_refuses_invalid_name_and_creates_nothing(keys_dir: Path) -> None:
    """A key name with a space is refused before anything touches the disk."""
    with pytest.raises(KeyMaterialError, match="invalid key name"):
        init_keys(keys_dir, name="has space")
    assert not keys_dir.exists()


def test_init_refuses_short_randomness(keys_dir: Path) -> None:
    """A broken rng that returns too few bytes is refused, not used."""
    with pytest.raises(KeyMaterialError, match="fewer than 32"):
        init_keys(keys_dir, name="example.com/x", rng=lambda n: b"\x00" * (n - 1))
    assert not (keys_dir / "master.key").exists()


def test_new_key_name_is_a_valid_random_origin() -> None:
    """The default name is eval-ledger/<16 hex> and is a valid C2SP key name."""
    name = new_key_name(rng=lambda n: bytes(range(n)))
    assert name == "eval-ledger/0001020304050607"
    assert is_valid_key_name(name)
    assert new_key_name() != new_key_name()


# --- load ----------------------------------------------------------------------------------


def test_load_round_trip(keys_dir: Path, ring: KeyRing) -> None:
    """load_keys returns the same secrets, signer and name that init wrote."""
    loaded = load_keys(keys_dir)
    assert loaded.master_secret == MASTER
    assert loaded.signer == ring.signer == Signer.from_seed(LOG["name"], SEED)
    assert loaded.key_name == LOG["name"]
    assert load_verifier(keys_dir) == Verifier.from_vkey(LOG["vkey"])


def test_loaded_keys_sign_what_the_public_key_verifies(keys_dir: Path, ring: KeyRing) -> None:
    """A note signed with the loaded key opens with the verifier read from signing.vkey alone."""
    note = load_keys(keys_dir).signer.sign_note("hello\n")
    assert open_note(note, [load_verifier(keys_dir)]).text == "hello\n"


@pytest.mark.parametrize("setup", ["missing-dir", "empty-dir"])
def test_missing_keys_say_how_to_create_them(keys_dir: Path, setup: str) -> None:
    """With no keys, load_keys and load_verifier point at `ledger keys init` and create nothing."""
    if setup == "empty-dir":
        keys_dir.mkdir(parents=True)
    with pytest.raises(KeyMaterialError, match="run `ledger keys init`") as info:
        load_keys(keys_dir)
    assert str(keys_dir) in str(info.value)
    with pytest.raises(KeyMaterialError, match="run `ledger keys init`"):
        load_verifier(keys_dir)
    assert keys_dir.exists() == (setup == "empty-dir")
    if keys_dir.exists():
        assert list(keys_dir.iterdir()) == []


@pytest.mark.parametrize("missing", ["master.key", "signing.key", "signing.vkey"])
def test_incomplete_key_set_names_the_missing_file(keys_dir: Path, ring: KeyRing, missing: str) -> None:
    """A key set with one file gone is refused, naming that file."""
    (keys_dir / missing).unlink()
    with pytest.raises(KeyMaterialError, match=f"incomplete.*{missing}"):
        load_keys(keys_dir)


@pytest.mark.parametrize("fname", ["master.key", "signing.key"])
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_loose_secret_permissions_are_refused(keys_dir: Path, ring: KeyRing, fname: str, mode: int) -> None:
    """A secret file readable or writable by group/others is refused with the chmod fix."""
    path = keys_dir / fname
    path.chmod(mode)
    with pytest.raises(KeyMaterialError) as info:
        load_keys(keys_dir)
    message = str(info.value)
    assert str(path) in message
    assert f"chmod 600 {path}" in message
    assert f"{mode:04o}" in message
    _assert_no_secret(info.value)


def test_public_key_file_may_be_world_readable(keys_dir: Path, ring: KeyRing) -> None:
    """signing.vkey is public: 0644 is fine and load_verifier reads it without the secrets."""
    (keys_dir / "master.key").chmod(0o000)
    (keys_dir / "signing.key").chmod(0o000)
    try:
        assert load_verifier(keys_dir).vkey == LOG["vkey"]
    finally:
        (keys_dir / "master.key").chmod(0o600)
        (keys_dir / "signing.key").chmod(0o600)


CORRUPTIONS: dict[str, tuple[str, bytes]] = {
    "master-short": ("master.key", MASTER.hex()[:-1].encode() + b"\n"),
    "master-uppercase": ("master.key", MASTER.hex().upper().encode() + b"\n"),
    "master-two-newlines": ("master.key", MASTER.hex().encode() + b"\n\n"),
    "master-binary": ("master.key", MASTER),
    "master-huge": ("master.key", b"0" * 10_000),
    "signing-not-skey": ("signing.key", LOG["skey_go_xmod"].replace("PRIVATE+KEY+", "").encode()),
    "signing-bad-base64": ("signing.key", LOG["skey_go_xmod"][:-3].encode() + b"!!!\n"),
    "signing-wrong-id": ("signing.key", LOG["skey_go_xmod"].replace("546f9a9c", "00000000").encode()),
    "signing-non-ascii": ("signing.key", LOG["skey_go_xmod"].encode() + "\u00e9".encode()),
    "vkey-garbage": ("signing.vkey", b"not a key\n"),
    "vkey-of-another-key": ("signing.vkey", VECTORS["keys"]["go_xmod_peterneumann"]["vkey"].encode()),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_damaged_key_files_are_refused_without_leaking(keys_dir: Path, ring: KeyRing, case: str) -> None:
    """Each damaged key file gives a KeyMaterialError naming the file, with no secret in it."""
    fname, content = CORRUPTIONS[case]
    (keys_dir / fname).write_bytes(content)
    with pytest.raises(KeyMaterialError) as info:
        load_keys(keys_dir)
    assert fname in str(info.value)
    _assert_no_secret(info.value)


def test_keyring_repr_hides_secrets(ring: KeyRing) -> None:
    """repr(KeyRing) names the key but shows neither the master secret nor the seed."""
    text = repr(ring)
    assert LOG["name"] in text
    for secret in (MASTER.hex(), SEED.hex(), repr(MASTER), repr(SEED)):
        assert secret not in text


def test_no_error_path_leaks_secrets(keys_dir: Path, ring: KeyRing) -> None:
    """A sweep over every key error path finds no secret material in any message."""
    errors: list[LedgerError] = []

    def collect(action: Callable[[], object]) -> None:
        with pytest.raises(LedgerError) as info:
            action()
        errors.append(info.value)

    collect(lambda: init_keys(keys_dir, name=LOG["name"], rng=fixed_rng(MASTER, SEED)))
    for fname in ("master.key", "signing.key"):
        (keys_dir / fname).chmod(0o666)
        collect(lambda: load_keys(keys_dir))
        (keys_dir / fname).chmod(0o600)
    master_path = keys_dir / "master.key"
    master_path.write_text(MASTER.hex() + "zz\n")
    collect(lambda: load_keys(keys_dir))
    master_path.write_text(MASTER.hex() + "\n")
    signing_path = keys_dir / "signing.key"
    for bad in (LOG["skey_go_xmod"] + "x", "PRIVATE+KEY+" + SEED.hex(), SEED.hex(), LOG["skey_go_xmod"][12:]):
        signing_path.write_text(bad + "\n")
        collect(lambda: load_keys(keys_dir))
    collect(lambda: KeyRing(master_secret=MASTER[:31], signer=ring.signer, key_name=LOG["name"]))
    assert len(errors) == 9
    for error in errors:
        _assert_no_secret(error)


# --- subkeys -------------------------------------------------------------------------------


def _hkdf_reference(master: bytes, label: str) -> bytes:
    """RFC 5869 HKDF-SHA256 with one output block, written out with hmac for an independent check."""
    prk = hmac.new(HKDF_SALT, master, hashlib.sha256).digest()
    return hmac.new(prk, label.encode() + b"\x01", hashlib.sha256).digest()


def test_subkey_matches_rfc5869_hkdf(ring: KeyRing) -> None:
    """subkey(label) is HKDF-SHA256(master, salt=b"eval-ledger/v1", info=label), 32 bytes."""
    for label in ("commitment", "seal", "\u00e9t\u00e9"):
        assert ring.subkey(label) == _hkdf_reference(MASTER, label)
        assert len(ring.subkey(label)) == 32


def test_subkeys_differ_per_label_and_are_deterministic(keys_dir: Path, ring: KeyRing) -> None:
    """Different labels give different keys; the same master and label give the same key."""
    labels = ["commitment", "seal", "commitment2", "Commitment"]
    keys = [ring.subkey(label) for label in labels]
    assert len(set(keys)) == len(labels)
    assert load_keys(keys_dir).subkey("commitment") == keys[0]
    assert MASTER not in keys


def test_subkeys_depend_on_the_master(ring: KeyRing) -> None:
    """Another master secret yields another subkey for the same label."""
    other = KeyRing(master_secret=bytes(32), signer=ring.signer, key_name=ring.key_name)
    assert other.subkey("commitment") != ring.subkey("commitment")


def test_subkey_label_must_be_non_empty(ring: KeyRing) -> None:
    """An empty label is refused: every subkey names its purpose."""
    with pytest.raises(KeyMaterialError, match="label"):
        ring.subkey("")
