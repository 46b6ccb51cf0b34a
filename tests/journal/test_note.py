"""C2SP signed notes and tlog checkpoints against the published vectors and tamper cases."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError, MalformedInput, UsageError, VerificationError
from ledger.journal.note import (
    KEY_TYPE_COSIGNATURE_V1,
    KEY_TYPE_ED25519,
    MAX_SIGNATURES,
    Checkpoint,
    NoteSignature,
    Signer,
    Verifier,
    key_id,
    open_checkpoint,
    open_note,
    parse_note,
    parse_signature_line,
    sign_checkpoint,
    split_cosignature,
)

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "vectors" / "note-vectors.json").read_text("utf-8")
)
LOG = VECTORS["keys"]["ledger_log"]
WITNESS = VECTORS["keys"]["ledger_witness"]
LOG_SIGNER = Signer.from_seed(LOG["name"], bytes.fromhex(LOG["seed_hex"]))
LOG_VERIFIER = Verifier.from_vkey(LOG["vkey"])
ROOT8 = bytes.fromhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")
CP8 = Checkpoint(LOG["name"], 8, ROOT8)
NOTE8 = VECTORS["open_ok"][5]["note"]
OTHER_SIGNER = Signer.from_seed(LOG["name"], hashlib.sha256(b"another key, same name").digest())


def _by_id(group: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS[group]]


# --- vector file ---------------------------------------------------------------------------


def test_vector_file_is_the_shared_copy() -> None:
    """The vendored vector file keeps its provenance block."""
    assert "independent_verifier_used" in VECTORS["source"]
    assert NOTE8.startswith("example.com/ledger-test-log\n8\n")


# --- keys ----------------------------------------------------------------------------------


def test_log_key_from_seed_matches_vector() -> None:
    """A seed yields the published public key, key ID, vkey and skey."""
    verifier = LOG_SIGNER.verifier
    assert LOG_SIGNER.public_key.hex() == LOG["public_key_hex"]
    assert verifier.key_id_hex == LOG["key_id_hex"]
    assert verifier.vkey == LOG["vkey"]
    assert LOG_SIGNER.skey == LOG["skey_go_xmod"]


def test_witness_cosignature_key_id_uses_type_0x04() -> None:
    """A type 0x04 verifier derives the cosignature key ID and vkey from the same public key."""
    public = bytes.fromhex(WITNESS["public_key_hex"])
    verifier = Verifier.for_key(WITNESS["name"], public, KEY_TYPE_COSIGNATURE_V1)
    assert verifier.key_id_hex == WITNESS["key_id_cosignature_v1_hex"]
    assert verifier.vkey == WITNESS["vkey_cosignature_v1"]
    assert Verifier.for_key(WITNESS["name"], public).key_id != verifier.key_id


@pytest.mark.parametrize("vector", VECTORS["vkey_derivation_vectors"], ids=lambda v: v["vkey"].split("+")[0])
def test_vkey_derivation(vector: dict[str, Any]) -> None:
    """Each skey derives its published vkey and re-serializes byte-exact."""
    signer = Signer.from_skey(vector["skey"])
    assert signer.verifier.vkey == vector["vkey"]
    assert signer.skey == vector["skey"]
    assert Verifier.from_vkey(vector["vkey"]) == signer.verifier


@pytest.mark.parametrize("vector", VECTORS["vkey_keyid_consistency"], ids=lambda v: v["vkey"].split("+")[0])
def test_vkey_keyid_consistency(vector: dict[str, Any]) -> None:
    """A vkey parses with its type byte, and its key ID is SHA-256(name||LF||type||key)[:4]."""
    verifier = Verifier.from_vkey(vector["vkey"])
    name, hex_id, _ = vector["vkey"].split("+", 2)
    assert verifier.key_type == vector["type"]
    assert verifier.key_id == int(hex_id, 16)
    assert key_id(name, vector["type"], verifier.public_key) == verifier.key_id
    assert verifier.vkey == vector["vkey"]


@pytest.mark.parametrize("vector", VECTORS["vkey_keyid_consistency"], ids=lambda v: v["vkey"].split("+")[0])
def test_vkey_with_wrong_key_id_is_rejected(vector: dict[str, Any]) -> None:
    """A vkey whose key ID does not match its key is malformed."""
    name, hex_id, material = vector["vkey"].split("+", 2)
    wrong = f"{(int(hex_id, 16) ^ 1):08x}"
    with pytest.raises(MalformedInput, match="does not match"):
        Verifier.from_vkey(f"{name}+{wrong}+{material}")


@pytest.mark.parametrize(
    ("vkey", "reason"),
    [
        ("example.com/foo+530d903a", "NAME\\+KEYID"),
        ("example.com/foo+530d903+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "8 hex"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2", "base64"),
        ("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv", "32 bytes"),
        ("example.com/foo+530d903a+AukyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "unsupported"),
        ("example com+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "key name"),
        ("+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", "key name"),
    ],
    ids=["two-fields", "short-id", "bad-base64", "short-key", "type-0x02", "space-in-name", "empty-name"],
)
def test_malformed_vkeys(vkey: str, reason: str) -> None:
    """Malformed verifier keys are refused with a reason."""
    with pytest.raises(MalformedInput, match=reason):
        Verifier.from_vkey(vkey)


def test_verifier_refuses_inconsistent_fields() -> None:
    """A Verifier cannot be built with a key ID that does not belong to its key."""
    with pytest.raises(MalformedInput, match="does not match"):
        Verifier(LOG["name"], 0, bytes.fromhex(LOG["public_key_hex"]))


def test_skey_with_wrong_key_id_is_rejected_without_quoting_secret() -> None:
    """An skey whose key ID does not match is refused and the message holds no seed material."""
    skey = LOG["skey_go_xmod"].replace("546f9a9c", "546f9a9d")
    with pytest.raises(MalformedInput) as info:
        Signer.from_skey(skey)
    material = skey.split("+", 4)[4]
    assert material not in str(info.value)
    assert LOG["seed_hex"] not in str(info.value)


@pytest.mark.parametrize(
    "skey",
    [
        "PRIVATE+KEY+example.com/ledger-test-log+546f9a9c",
        "PUBLIC+KEY+example.com/ledger-test-log+546f9a9c+AcZe9cgdSCG8Ryn0wJA8OCnlW73EEtBHiasSz+5wVdrh",
        "PRIVATE+KEY+example.com/ledger-test-log+546f9a9c+AcZe9cgdSCG8Ryn0wJA8OCnlW73EEtBHiasSz+5wVdr",
        "PRIVATE+KEY+example.com/ledger-test-log+546f9a9c+AsZe9cgdSCG8Ryn0wJA8OCnlW73EEtBHiasSz+5wVdrh",
        "PRIVATE+KEY+example com+546f9a9c+AcZe9cgdSCG8Ryn0wJA8OCnlW73EEtBHiasSz+5wVdrh",
    ],
    ids=["missing-material", "not-private", "bad-base64", "wrong-type-byte", "space-in-name"],
)
def test_malformed_skeys(skey: str) -> None:
    """Malformed signer keys are refused, never echoing the secret part."""
    with pytest.raises(MalformedInput) as info:
        Signer.from_skey(skey)
    assert "cdSCG8Ryn0wJA8OCnlW73" not in str(info.value)


def test_signer_repr_hides_seed() -> None:
    """repr(Signer) shows the name but not the seed."""
    text = repr(LOG_SIGNER)
    assert LOG["name"] in text
    assert LOG["seed_hex"] not in text
    assert repr(bytes.fromhex(LOG["seed_hex"])) not in text


# --- signing -------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", _by_id("sign_vectors"))
def test_sign_vectors_byte_exact(vector: dict[str, Any]) -> None:
    """Signing reproduces the published notes byte for byte (Ed25519 is deterministic)."""
    signer = Signer.from_skey(vector["skey"])
    assert signer.sign_note(vector["text"]) == vector["expect_note"]


def test_sign_checkpoint_from_seed_matches_vector() -> None:
    """sign_checkpoint over the size-8 tree head gives the vector note."""
    assert sign_checkpoint(CP8, LOG_SIGNER) == NOTE8


@pytest.mark.parametrize(
    "text",
    ["", "no newline", "tab\there\n", "carriage\r\n", "nul\x00\n"],
    ids=["empty", "no-final-newline", "tab", "cr", "nul"],
)
def test_sign_refuses_bad_text(text: str) -> None:
    """Text that could not be opened again is refused at signing time."""
    with pytest.raises(MalformedInput):
        LOG_SIGNER.sign_note(text)


@pytest.mark.parametrize(
    "text",
    ["one\n\ntwo\n", "ends with blank\n\n", "\n", "— looks like a signature\n"],
    ids=["inner-blank-line", "trailing-blank-line", "only-newline", "em-dash-text"],
)
def test_awkward_texts_round_trip(text: str) -> None:
    """The split at the LAST blank line recovers any valid text exactly."""
    opened = open_note(LOG_SIGNER.sign_note(text), [LOG_VERIFIER])
    assert opened.text == text
    assert opened.signed_by == (LOG_VERIFIER,)


# --- opening -------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", _by_id("open_ok"))
def test_open_ok_vectors(vector: dict[str, Any]) -> None:
    """Every published good note opens, yields its text, and names the verifying key."""
    verifier = Verifier.from_vkey(vector["vkey"])
    for note in (vector["note"], vector["note"].encode("utf-8")):
        opened = open_note(note, [verifier])
        assert opened.text == vector["expect_text"]
        assert opened.signed_by == (verifier,)
        assert opened.verified[0].timestamp is None
    if "expect_key_id_hex" in vector:
        assert opened.signed_by[0].key_id_hex == vector["expect_key_id_hex"]
    if "expect_verified_count" in vector:
        assert len(opened.verified) == vector["expect_verified_count"]
        assert len(opened.unverified) == vector["expect_unverified_count"]
    if "expect_unverified_count_with_log_key_only" in vector:
        assert len(opened.unverified) == vector["expect_unverified_count_with_log_key_only"]
    if "expect_checkpoint" in vector:
        want = vector["expect_checkpoint"]
        cp = open_checkpoint(vector["note"], verifier, origin=want["origin"])
        assert (cp.origin, cp.size, cp.root.hex()) == (want["origin"], want["size"], want["root_hex"])
        assert cp.body() == vector["expect_text"]


MUST_REJECT: dict[str, type[LedgerError]] = {
    "size-changed": VerificationError,
    "root-bitflip": VerificationError,
    "signature-bitflip": VerificationError,
    "no-known-key": VerificationError,
    "right-name-wrong-keyid": VerificationError,
    "missing-final-newline": MalformedInput,
    "hyphen-instead-of-em-dash": MalformedInput,
    "no-signatures": MalformedInput,
    "cosignature-checked-as-plain-ed25519": VerificationError,
    "control-character-in-text": MalformedInput,
}


def test_every_must_reject_vector_has_an_expectation() -> None:
    """No must_reject vector is silently skipped."""
    assert {v["id"] for v in VECTORS["must_reject"]} == set(MUST_REJECT)


@pytest.mark.parametrize("vector", _by_id("must_reject"))
def test_must_reject_vectors(vector: dict[str, Any]) -> None:
    """Every published bad note is refused with the right error class and check."""
    expected = MUST_REJECT[vector["id"]]
    with pytest.raises(expected) as info:
        open_note(vector["note"], [Verifier.from_vkey(vector["vkey"])])
    if expected is VerificationError:
        assert isinstance(info.value, VerificationError)
        assert info.value.check == "checkpoint-signature"


def _forged_line(name: str, key: int, signature: bytes) -> str:
    return NoteSignature(name, key, signature).line + "\n"


def test_known_key_with_bad_signature_rejects_even_with_another_good_one() -> None:
    """A failing signature from a known key rejects the note, even if another known key verified."""
    witness = Signer.from_seed("example.com/second", bytes.fromhex(WITNESS["seed_hex"]))
    text = CP8.body()
    good = LOG_SIGNER.signature_line(text)
    sig = parse_signature_line(witness.signature_line(text).rstrip("\n"))
    bad = _forged_line(sig.name, sig.key_id, sig.signature[:-1] + bytes([sig.signature[-1] ^ 1]))
    with pytest.raises(VerificationError, match="example.com/second"):
        open_note(text + "\n" + good + bad, [LOG_VERIFIER, witness.verifier])
    assert open_note(text + "\n" + good + bad, [LOG_VERIFIER]).unverified[0].name == sig.name


def test_first_line_for_a_key_decides() -> None:
    """Repeated lines for one (name, key ID) are ignored after the first, as in Go."""
    text = CP8.body()
    good = LOG_SIGNER.signature_line(text)
    other = parse_signature_line(OTHER_SIGNER.signature_line(text).rstrip("\n")).signature
    bad = _forged_line(LOG["name"], LOG_VERIFIER.key_id, other)  # other key's bytes, our ID
    assert open_note(text + "\n" + good + bad, [LOG_VERIFIER]).text == text
    with pytest.raises(VerificationError, match="does not verify"):
        open_note(text + "\n" + bad + good, [LOG_VERIFIER])


def test_multiple_known_signers_all_reported() -> None:
    """Two known keys that both signed are both listed in signed_by, in note order."""
    second = Signer.from_seed("example.com/second", bytes(range(32)))
    text = CP8.body()
    note = text + "\n" + LOG_SIGNER.signature_line(text) + second.signature_line(text)
    opened = open_note(note, [second.verifier, LOG_VERIFIER])
    assert opened.signed_by == (LOG_VERIFIER, second.verifier)
    assert opened.unverified == ()


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda n: n.encode("utf-8").replace(b"\xe2\x80\x94", b"\xe2\x80"), "UTF-8"),
        (lambda n: n.replace("\n\n", "\n"), "blank line"),
        (lambda n: n.replace("\u2014 example.com/ledger-test-log ", "\u2014 example.com/ledger-test-log\u00a0"), "no space|key name"),
        (lambda n: n.replace("\u2014 example.com/ledger-test-log ", "\u2014  "), "key name"),
        (lambda n: n.replace("VG+anPE", "VG+an*E"), "base64"),
        (lambda n: n[: n.index("\u2014")] + "\u2014 x AAAAAA==\n" + n[n.index("\u2014") :], "shorter"),
        (lambda n: n.replace("Uwg=", "Uwh="), "canonical"),
        (lambda n: n + "\n", "blank line|key name|em dash|no signature"),
        (lambda n: n.replace("\n", "\r\n"), "control character"),
    ],
    ids=["invalid-utf8", "no-blank-line", "nbsp-after-name", "empty-name", "bad-base64",
         "short-blob-unknown-key", "noncanonical-base64", "trailing-blank-line", "crlf"],
)
def test_malformed_notes(mutate: Any, reason: str) -> None:
    """Syntax errors are MalformedInput, even on lines from unknown keys."""
    with pytest.raises(MalformedInput, match=reason):
        open_note(mutate(NOTE8), [LOG_VERIFIER])


def test_signature_count_is_capped() -> None:
    """More than MAX_SIGNATURES signature lines are refused before any crypto runs."""
    text = CP8.body()
    line = LOG_SIGNER.signature_line(text)
    filler = "".join(f"\u2014 k{i} AAAAAAA=\n" for i in range(MAX_SIGNATURES))
    with pytest.raises(MalformedInput, match="more than"):
        open_note(text + "\n" + line + filler, [LOG_VERIFIER])
    assert open_note(text + "\n" + line + filler[: filler.index("k99") - 2], [LOG_VERIFIER]).text == text


def test_conflicting_verifiers_are_a_usage_error() -> None:
    """Two different keys under one (name, key ID) cannot both be trusted."""
    clone = object.__new__(Verifier)
    object.__setattr__(clone, "name", LOG_VERIFIER.name)
    object.__setattr__(clone, "key_id", LOG_VERIFIER.key_id)
    object.__setattr__(clone, "public_key", bytes(32))
    object.__setattr__(clone, "key_type", KEY_TYPE_ED25519)
    with pytest.raises(UsageError, match="share name and ID"):
        open_note(NOTE8, [LOG_VERIFIER, clone])


def test_every_single_byte_flip_is_detected() -> None:
    """Flipping any one bit-0 of a signed checkpoint never yields an accepted note."""
    raw = bytearray(NOTE8.encode("utf-8"))
    for index in range(len(raw)):
        mutated = bytearray(raw)
        mutated[index] ^= 0x01
        with pytest.raises((MalformedInput, VerificationError)):
            open_checkpoint(bytes(mutated), LOG_VERIFIER)


# --- cosignatures --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "vector", [pytest.param(v, id=v["id"]) for v in VECTORS["cosignature_vectors"] if "vkey" in v]
)
def test_cosignature_vectors_verify(vector: dict[str, Any]) -> None:
    """Type 0x04 witness cosignatures verify and report their timestamp."""
    witness = Verifier.from_vkey(vector["vkey"])
    assert witness.key_type == KEY_TYPE_COSIGNATURE_V1
    opened = open_note(vector["note"], [witness])
    assert opened.text == vector["expect_checkpoint_text"]
    assert [(s.verifier, s.timestamp) for s in opened.verified] == [(witness, vector["expect_timestamp"])]
    log_line = vector["note"].split("\n\n")[1].split("\n")[0]
    log_key = VECTORS["open_ok"][-1]["vkey"] if "rekor" in vector["id"] else LOG["vkey"]
    both = open_note(vector["note"], [Verifier.from_vkey(log_key), witness])
    assert both.verified[0].verifier.name == parse_signature_line(log_line).name
    assert len(both.verified) == 2


def test_cosignature_signed_message_matches_vector() -> None:
    """The witness signature is over the published cosignature/v1 message, not the bare text."""
    vector = VECTORS["cosignature_vectors"][0]
    line = vector["note"].rstrip("\n").split("\n")[-1]
    timestamp, sig = split_cosignature(parse_signature_line(line).signature)
    assert timestamp == vector["expect_timestamp"]
    message = f"cosignature/v1\ntime {timestamp}\n{vector['expect_checkpoint_text']}"
    assert message == vector["signed_message"]
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    Ed25519PublicKey.from_public_bytes(bytes.fromhex(WITNESS["public_key_hex"])).verify(
        sig, message.encode()
    )


def test_cosignature_framing_only_vector() -> None:
    """The spec's cosignature line parses into key ID, 76-byte blob and timestamp."""
    vector = VECTORS["cosignature_vectors"][1]
    sig = parse_signature_line(vector["line"])
    assert len(sig.blob) == vector["expect_blob_len"]
    assert f"{sig.key_id:08x}" == vector["expect_key_id_hex"]
    assert split_cosignature(sig.signature)[0] == vector["expect_timestamp"]
    assert sig.line == vector["line"]


def test_cosignature_with_changed_timestamp_is_rejected() -> None:
    """Moving the cosignature timestamp breaks its signature."""
    vector = VECTORS["cosignature_vectors"][0]
    text, sigs = parse_note(vector["note"])
    cosig = sigs[1]
    shifted = (vector["expect_timestamp"] + 1).to_bytes(8, "big") + cosig.signature[8:]
    moved = type(cosig)(cosig.name, cosig.key_id, shifted)
    note = text + "\n" + sigs[0].line + "\n" + moved.line + "\n"
    with pytest.raises(VerificationError, match="does not verify"):
        open_note(note, [Verifier.from_vkey(vector["vkey"])])


def test_truncated_cosignature_is_rejected() -> None:
    """A known cosigner's blob of the wrong length fails verification."""
    vector = VECTORS["cosignature_vectors"][0]
    text, sigs = parse_note(vector["note"])
    short = type(sigs[1])(sigs[1].name, sigs[1].key_id, sigs[1].signature[:-1])
    with pytest.raises(VerificationError, match="76|72"):
        open_note(text + "\n" + short.line + "\n", [Verifier.from_vkey(vector["vkey"])])


# --- checkpoints ---------------------------------------------------------------------------


def test_checkpoint_round_trip() -> None:
    """sign -> open returns an equal checkpoint; extensions survive too."""
    cp = Checkpoint(LOG["name"], 1234, bytes(range(32)), ("ext one", "ext-two"))
    assert Checkpoint.parse(cp.body()) == cp
    assert open_checkpoint(sign_checkpoint(cp, LOG_SIGNER), LOG_VERIFIER, origin=LOG["name"]) == cp
    empty = Checkpoint(LOG["name"], 0, hashlib.sha256(b"").digest())
    assert empty.body().split("\n")[1] == "0"
    assert Checkpoint.parse(empty.body()) == empty


def test_checkpoint_body_format() -> None:
    """body() is origin, decimal size, base64 root, each ending in a newline."""
    assert CP8.body() == VECTORS["open_ok"][5]["expect_text"]


def test_forged_checkpoint_signature_is_rejected() -> None:
    """Another key using the log's name cannot forge a checkpoint (key ID differs)."""
    forged = sign_checkpoint(Checkpoint(LOG["name"], 9, ROOT8), OTHER_SIGNER)
    with pytest.raises(VerificationError) as info:
        open_checkpoint(forged, LOG_VERIFIER)
    assert info.value.check == "checkpoint-signature"


def test_checkpoint_from_another_log_key_is_rejected() -> None:
    """A genuine checkpoint from a different key does not open with ours."""
    with pytest.raises(VerificationError, match="no signature from a known key"):
        open_checkpoint(NOTE8, OTHER_SIGNER.verifier)


def test_checkpoint_wrong_origin_is_rejected() -> None:
    """A validly signed checkpoint for another origin fails the origin check."""
    with pytest.raises(VerificationError) as info:
        open_checkpoint(NOTE8, LOG_VERIFIER, origin="example.com/other-log")
    assert info.value.check == "checkpoint-origin"
    assert info.value.computed == LOG["name"]


def test_signed_note_that_is_not_a_checkpoint() -> None:
    """A correctly signed note whose text is not a checkpoint is malformed."""
    with pytest.raises(MalformedInput):
        open_checkpoint(LOG_SIGNER.sign_note("hello\n"), LOG_VERIFIER)


B64_ROOT = base64.b64encode(ROOT8).decode()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (f"o\n01\n{B64_ROOT}\n", "leading zeros"),
        (f"o\n00\n{B64_ROOT}\n", "leading zeros"),
        (f"o\n-1\n{B64_ROOT}\n", "decimal"),
        (f"o\n+1\n{B64_ROOT}\n", "decimal"),
        (f"o\n 1\n{B64_ROOT}\n", "decimal"),
        (f"o\n1.0\n{B64_ROOT}\n", "decimal"),
        (f"o\n\u0661\n{B64_ROOT}\n", "decimal"),
        (f"o\n\n{B64_ROOT}\n", "decimal"),
        (f"o\n{2**63}\n{B64_ROOT}\n", "2\\^63"),
        (f"o\n8\n{base64.b64encode(ROOT8[:31]).decode()}\n", "32 bytes, got 31"),
        (f"o\n8\n{base64.b64encode(ROOT8 + b'x').decode()}\n", "32 bytes, got 33"),
        (f"o\n8\n{B64_ROOT[:-2]}B=\n", "canonical"),
        (f"o\n8\n{B64_ROOT.rstrip('=')}\n", "base64"),
        (f"o\n8\n{B64_ROOT}", "end with a newline"),
        (f"o\n8\n{B64_ROOT}\n\n", "empty extension"),
        (f"o\n8\n{B64_ROOT}\n\next\n", "empty extension"),
        (f"\n8\n{B64_ROOT}\n", "origin"),
        ("o\n8\n", "origin, tree size and root"),
        (f"o\r\n8\n{B64_ROOT}\n", "control character"),
    ],
    ids=["size-01", "size-00", "negative", "plus-sign", "leading-space", "fraction",
         "arabic-digit", "empty-size", "size-overflow", "root-31-bytes", "root-33-bytes",
         "root-noncanonical", "root-unpadded", "missing-final-newline", "trailing-blank-line",
         "blank-line-before-extension", "empty-origin", "two-lines", "crlf"],
)
def test_malformed_checkpoint_bodies(body: str, reason: str) -> None:
    """Strict parsing refuses every non-canonical checkpoint text."""
    with pytest.raises(MalformedInput, match=reason):
        Checkpoint.parse(body)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"origin": "", "size": 1, "root": ROOT8},
        {"origin": "a\nb", "size": 1, "root": ROOT8},
        {"origin": "o", "size": -1, "root": ROOT8},
        {"origin": "o", "size": True, "root": ROOT8},
        {"origin": "o", "size": 1, "root": ROOT8[:31]},
        {"origin": "o", "size": 1, "root": ROOT8, "extensions": ("",)},
        {"origin": "o", "size": 1, "root": ROOT8, "extensions": ("a\nb",)},
    ],
    ids=["empty-origin", "newline-origin", "negative-size", "bool-size", "short-root",
         "empty-extension", "newline-extension"],
)
def test_checkpoint_constructor_validates(kwargs: dict[str, Any]) -> None:
    """A Checkpoint that could not be serialized and parsed back cannot be built."""
    with pytest.raises(MalformedInput):
        Checkpoint(**kwargs)
