"""ledger witness serve: c2sp.org/tlog-witness add-checkpoint, exercised by a client written here
from the spec (http.client, the request body built by hand), and publish --witness end to end."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.errors import UsageError
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, init_keys
from ledger.journal.note import Checkpoint, Verifier, open_note, sign_checkpoint
from ledger.journal.witness import Witness, init_witness, load_witness
from ledger.publish.http import Server, check_bind, serve_witness
from ledger.publish.monitor import DirSource, check_log
from ledger.publish.writer import publish
from tests.journal.tamper_cases import seeded_rng
from tests.publish.conftest import ORIGIN, add_filler, invoke


def _post(server: Server, body: bytes, path: str = "/add-checkpoint") -> tuple[int, str, str]:
    """The spec's request: POST <prefix>/add-checkpoint, the body as it describes."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "text/plain"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read().decode("utf-8")
    finally:
        conn.close()


def _body(old: int, proof: list[bytes], note: str) -> bytes:
    lines = [f"old {old}"] + [base64.b64encode(h).decode() for h in proof]
    return ("\n".join(lines) + "\n\n" + note).encode()


def _tree(n: int) -> merkle.MemoryNodes:
    return merkle.MemoryNodes(merkle.leaf_hashes(f"entry {i}".encode() for i in range(n)))


@pytest.fixture
def witness(tmp_path: Path) -> Witness:
    return init_witness(tmp_path / "witness", "witness.test/w1", rng=seeded_rng(11))


@pytest.fixture
def log_keys(tmp_path: Path) -> KeyRing:
    return init_keys(tmp_path / "logkeys", name=ORIGIN, rng=seeded_rng(12))


@pytest.fixture
def server(witness: Witness, log_keys: KeyRing) -> Iterator[Server]:
    s = serve_witness(witness, {ORIGIN: [log_keys.verifier]}).start()
    try:
        yield s
    finally:
        s.close()


def _note(keys: KeyRing, tree: merkle.MemoryNodes, size: int, origin: str = ORIGIN) -> str:
    return sign_checkpoint(Checkpoint(origin, size, tree.root(size)), keys.signer)


def test_witness_status_codes_follow_the_spec(server: Server, witness: Witness, log_keys: KeyRing,
                                               tmp_path: Path) -> None:
    tree = _tree(40)
    # first contact: old 0, empty proof -> 200, one cosignature line that verifies (tlog-cosignature)
    status, ctype, body = _post(server, _body(0, [], _note(log_keys, tree, 10)))
    assert status == 200, body
    assert body.startswith("\u2014 witness.test/w1 ") and body.endswith("\n") and body.count("\n") == 1
    opened = open_note(_note(log_keys, tree, 10) + body, [log_keys.verifier, witness.verifier])
    assert {v.verifier.name for v in opened.verified} == {ORIGIN, "witness.test/w1"}
    # old size not the one it holds: 409, text/x.tlog.size, its size and a newline
    status, ctype, body = _post(server, _body(0, [], _note(log_keys, tree, 20)))
    assert (status, ctype, body) == (409, "text/x.tlog.size", "10\n")
    # a consistent extension with the right proof: 200
    proof = merkle.consistency_proof(10, 20, tree.fetch)
    assert _post(server, _body(10, proof, _note(log_keys, tree, 20)))[0] == 200
    # an inconsistent proof (one hash flipped): 422, and the state is unchanged
    bad = merkle.consistency_proof(20, 30, tree.fetch)
    bad[0] = bytes([bad[0][0] ^ 1]) + bad[0][1:]
    status, _c, body = _post(server, _body(20, bad, _note(log_keys, tree, 30)))
    assert status == 422 and "does not verify" in body
    assert _post(server, _body(0, [], _note(log_keys, tree, 30)))[2] == "20\n"
    # a fork: the right old size with a tree that does not extend it
    fork = _tree(45)
    fork_note = sign_checkpoint(Checkpoint(ORIGIN, 30, merkle.root_from_leaves(
        merkle.leaf_hashes(f"other {i}".encode() for i in range(30)))), log_keys.signer)
    assert _post(server, _body(20, merkle.consistency_proof(20, 30, fork.fetch), fork_note))[0] == 422
    # same size, another root: 409
    other20 = sign_checkpoint(Checkpoint(ORIGIN, 20, b"\x07" * 32), log_keys.signer)
    assert _post(server, _body(20, [], other20))[:2] == (409, "text/x.tlog.size")
    # unknown origin: 404; a signature by another key of the same name: 403
    stranger = init_keys(tmp_path / "stranger", name="other.test/log", rng=seeded_rng(13))
    assert _post(server, _body(0, [], _note(stranger, tree, 5, "other.test/log")))[0] == 404
    impostor = init_keys(tmp_path / "impostor", name=ORIGIN, rng=seeded_rng(14))
    assert _post(server, _body(20, merkle.consistency_proof(20, 25, tree.fetch), _note(impostor, tree, 25)))[0] == 403
    # malformed: no old line, a non-canonical size, a proof line that is no hash, old > size: 400
    note25 = _note(log_keys, tree, 25)
    for body_bytes in (b"garbage", b"old 020\n\n" + note25.encode(), b"old 20\nnot-base64!\n\n" + note25.encode(),
                       _body(30, [], note25), b"old 20\n\n" + b"\xff\xfe", _body(20, [b"\x00" * 32] * 64, note25)):
        assert _post(server, body_bytes)[0] == 400, body_bytes[:30]
    # not the endpoint
    assert _post(server, b"", "/other")[0] == 404


def test_witness_state_survives_a_restart(witness: Witness, log_keys: KeyRing) -> None:
    """State persisted per origin before answering: a new server process-equivalent knows the size."""
    tree = _tree(12)
    first = serve_witness(witness, {ORIGIN: [log_keys.verifier]}).start()
    try:
        assert _post(first, _body(0, [], _note(log_keys, tree, 12)))[0] == 200
    finally:
        first.close()
    state = list((witness.folder / "state").glob("*.json"))
    assert len(state) == 1 and json.loads(state[0].read_text())["size"] == 12
    assert state[0].stat().st_mode & 0o777 == 0o600
    second = serve_witness(load_witness(witness.folder), {ORIGIN: [log_keys.verifier]}).start()
    try:
        assert _post(second, _body(0, [], _note(log_keys, tree, 12)))[:3] == (409, "text/x.tlog.size", "12\n")
    finally:
        second.close()


def test_servers_refuse_a_non_loopback_address_without_the_flag(witness: Witness, log_keys: KeyRing) -> None:
    with pytest.raises(UsageError, match="not a loopback address"):
        check_bind("0.0.0.0", False)
    with pytest.raises(UsageError, match="not a loopback address"):
        serve_witness(witness, {ORIGIN: [log_keys.verifier]}, host="0.0.0.0")
    check_bind("0.0.0.0", True)
    check_bind("127.0.0.1", False)
    check_bind("::1", False)


def test_publish_with_two_witnesses_meets_threshold_2(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    """publish --witness (twice) stores both cosignatures in the published checkpoint; the monitor
    and `ledger verify` accept --witness-threshold 2; a third, absent witness fails the threshold."""
    w1 = init_witness(tmp_path / "w1", "witness.test/one", rng=seeded_rng(21))
    w2 = init_witness(tmp_path / "w2", "witness.test/two", rng=seeded_rng(22))
    s1 = serve_witness(w1, {ORIGIN: [keys.verifier]}).start()
    s2 = serve_witness(w2, {ORIGIN: [keys.verifier]}).start()
    out = tmp_path / "pub"
    try:
        args = ["publish", str(out), "--witness", s1.url, "--witness-vkey", w1.verifier.vkey,
                "--witness", s2.url, "--witness-vkey", w2.verifier.vkey, "--json"]
        code, stdout, err = invoke(ledger, *args)
        assert code == 0, err
        assert json.loads(stdout)["cosigned_by"] == ["witness.test/one", "witness.test/two"]
        # the log grows: the second publish sends the proof from the size each witness holds
        add_filler(ledger, 300)
        code, stdout, err = invoke(ledger, *args)
        assert code == 0, err
    finally:
        s1.close()
        s2.close()
    with Journal.open(ledger) as j:
        size = j.size
    report = check_log(DirSource(out), keys.verifier, witnesses=[w1.verifier, w2.verifier], threshold=2,
                       state_dir=tmp_path / "seen")
    assert report.ok and report.size == size and report.cosigned_by == ["witness.test/one", "witness.test/two"]
    code, _o, err = invoke(ledger, "verify", "--witness", w1.verifier.vkey, "--witness", w2.verifier.vkey,
                           "--witness-threshold", "2", "--no-remember")
    assert code == 0, err
    w3 = init_witness(tmp_path / "w3", "witness.test/three", rng=seeded_rng(23))
    code, _o, err = invoke(tmp_path, "monitor", str(out), "--vkey", keys.verifier.vkey, "--witness",
                           w1.verifier.vkey, "--witness", w3.verifier.vkey, "--witness-threshold", "2",
                           "--no-remember")
    assert code == 1 and "witness-threshold" in err


def test_publish_refuses_a_witness_answer_that_is_not_its_cosignature(ledger: Path, keys: KeyRing,
                                                                      tmp_path: Path) -> None:
    """A witness (or something in its place) that answers 200 with another key's line: refused,
    and nothing is published."""
    w1 = init_witness(tmp_path / "w1", "witness.test/one", rng=seeded_rng(21))
    other = init_witness(tmp_path / "w9", "witness.test/one", rng=seeded_rng(29))

    def fake_submit(url: str, old: int, proof: object, note: str) -> tuple[int, str]:
        from ledger.journal.note import cosignature_line, parse_note

        return 200, cosignature_line(parse_note(note)[0], other.name, other.seed, 1)

    with Journal.open(ledger) as j, pytest.raises(Exception, match="holds no valid cosignature"):
        publish(j, tmp_path / "pub", keys, witnesses=[("http://127.0.0.1:9", w1.verifier)], submit=fake_submit)
    assert not (tmp_path / "pub" / "checkpoint").exists()
    assert isinstance(w1.verifier, Verifier)
