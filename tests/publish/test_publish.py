"""ledger publish / monitor: the C2SP tlog-tiles layout, round trips, incremental publishing,
selective disclosure, large entries, and every fault named in issue 25."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger.errors import MalformedInput, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.keys import KeyRing, init_keys
from ledger.publish import layout, writer
from ledger.publish.monitor import DirSource, check_log
from ledger.publish.writer import Policy, publish
from tests.journal.tamper_cases import seeded_rng
from tests.publish.conftest import ORIGIN, RUN_A, RUN_B, add_filler, add_run, invoke, snapshot

# --------------------------------------------------------------------------- the spec's examples


def test_tile_paths_follow_the_spec_examples() -> None:
    """c2sp.org/tlog-tiles: index 1234067 is x001/x234/067; .p/<W> only for partial tiles."""
    assert layout.encode_index(1234067) == "x001/x234/067"
    assert layout.encode_index(0) == "000"
    assert layout.encode_index(1000) == "x001/000"
    assert layout.tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert layout.tile_path(2, 5, 17) == "tile/2/005.p/17"
    assert layout.bundle_path(1234067, 3) == "tile/entries/x001/x234/067.p/3"
    with pytest.raises(MalformedInput, match="tile level must be"):
        layout.tile_path(64, 0)


def test_tree_of_70000_has_the_tiles_the_spec_lists() -> None:
    """The spec: 70,000 leaves are 273 full level-0 tiles, a partial of 112, one full level-1
    tile, a partial level-1 of 17 and a partial level-2 of 1; 256 leaves a full level-0 tile and a
    partial level-1 tile of width 1."""
    leaves = b"".join(merkle.leaf_hashes(str(i).encode() for i in range(70_000)))
    tiles = layout.tiles_between(0, 70_000, leaves, lambda *a: pytest.fail("nothing to fetch"))
    by_level: dict[int, list[int]] = {}
    for t in tiles:
        by_level.setdefault(t.level, []).append(t.width)
    assert by_level[0] == [256] * 273 + [112]
    assert by_level[1] == [256, 17]
    assert by_level[2] == [1]
    small = layout.tiles_between(0, 256, leaves[:256 * 32], lambda *a: b"")
    assert [(t.level, t.width) for t in small] == [(0, 256), (1, 1)]
    assert small[1].data == layout.hash_up(small[0].data, 8)


def test_entry_bundles_are_uint16_length_prefixed() -> None:
    """Each entry: its length as a big-endian uint16, then its bytes."""
    bundle = layout.encode_bundle([b"abc", b"", b"\x01" * 300])
    assert bundle[:5] == b"\x00\x03abc" and bundle[5:7] == b"\x00\x00" and bundle[7:9] == b"\x01\x2c"
    assert layout.split_bundle(bundle, 3, "b") == [b"abc", b"", b"\x01" * 300]
    with pytest.raises(VerificationError, match="truncated"):
        layout.split_bundle(bundle[:-1], 3, "b")
    with pytest.raises(VerificationError, match="after its 2 entries"):
        layout.split_bundle(bundle, 2, "b")
    with pytest.raises(Exception, match="at most 65535"):
        layout.encode_bundle([b"x" * 65_536])


# --------------------------------------------------------------------------- round trips


def _check(out: Path, keys: KeyRing, state: Path, **kw: object):  # type: ignore[no-untyped-def]
    return check_log(DirSource(out), keys.verifier, state_dir=state, **kw)  # type: ignore[arg-type]


def test_publish_then_monitor_round_trip(journal: Journal, keys: KeyRing, tmp_path: Path) -> None:
    """Every entry published; the monitor recomputes the signed root, replays both views, names
    both runs and views as new the first time and nothing the second time."""
    out, state = tmp_path / "pub", tmp_path / "seen"
    result = publish(journal, out, keys)
    size, root = journal.head()
    assert (result.old_size, result.size, result.root) == (0, size, root.hex())
    assert result.written[-1] == "checkpoint"
    first = _check(out, keys, state)
    assert first.ok, first.findings
    assert (first.size, first.root, first.previous_size) == (size, root.hex(), None)
    assert [r["run"] for r in first.new_runs] == [RUN_A, RUN_B]
    assert [v["run"] for v in first.new_views] == [RUN_A, RUN_B]
    recorded = [e.data["view"]["score"] for e in journal.entries(kind="view.recorded")]
    assert [v["score"] for v in first.new_views] == recorded and all(isinstance(x, float) for x in recorded)
    assert [(r["run"], r["reproduced"]) for r in first.replayed] == [(RUN_A, True), (RUN_B, True)]
    again = _check(out, keys, state)
    assert again.ok and again.previous_size == size and again.new_runs == [] and again.new_views == []


def test_monitor_reports_new_runs_since_the_checkpoint_it_remembered(ledger: Path, keys: KeyRing,
                                                                     tmp_path: Path) -> None:
    out, state = tmp_path / "pub", tmp_path / "seen"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
    _check(out, keys, state)
    run_c = "r-20261201T120000Z-cccccc"
    add_run(ledger, run_c, {"t1": True})
    with Journal.open(ledger) as j:
        publish(j, out, keys)
    later = _check(out, keys, state)
    assert later.ok
    assert [r["run"] for r in later.new_runs] == [run_c]
    assert [v["run"] for v in later.new_views] == [run_c]


def test_round_trip_with_withheld_kinds(journal: Journal, keys: KeyRing, tmp_path: Path) -> None:
    """Withheld entries are markers naming their leaf hash: their bytes are nowhere in the
    directory, the tree still verifies, the run with withheld entries is reported not replayed
    (with what is missing), the run with all its entries replays."""
    out, state = tmp_path / "pub", tmp_path / "seen"
    result = publish(journal, out, keys, policy=Policy(withhold=("ext.note",)))
    assert result.withheld == 3
    blob = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"private transcript" not in blob
    report = _check(out, keys, state)
    assert report.ok, report.findings
    assert report.withheld == 3
    assert [(r["run"], r["reproduced"]) for r in report.replayed] == [(RUN_B, True)]
    assert report.not_replayed == [{"run": RUN_A, "reason": "entries of the run are withheld",
                                    "withheld_kinds": {"ext.note": 3}}]


def test_withheld_kinds_a_view_reads_leave_it_not_replayed(journal: Journal, keys: KeyRing, tmp_path: Path) -> None:
    """--public keeps only views and run entries: the golden view of a run whose diffs and test
    results are withheld cannot be replayed, and the report says why instead of failing."""
    out, state = tmp_path / "pub", tmp_path / "seen"
    publish(journal, out, keys, policy=Policy(public=("run.*", "view.recorded", "attestation")))
    report = _check(out, keys, state)
    assert report.ok and report.replayed == []
    assert {r["run"] for r in report.not_replayed} == {RUN_A, RUN_B}
    assert "diff" in report.not_replayed[0]["withheld_kinds"]
    assert [r["run"] for r in report.new_runs] == [RUN_A, RUN_B]


def test_policy_from_ledger_toml(ledger: Path, tmp_path: Path) -> None:
    (ledger.parent / "ledger.toml").write_text('[publish]\nwithhold = ["ext.*"]\n', encoding="utf-8")
    code, out, err = invoke(ledger, "publish", str(tmp_path / "pub"), "--json")
    assert code == 0, err
    assert json.loads(out)["withheld"] == 603 and json.loads(out)["policy"]["withhold"] == ["ext.*"]
    assert writer.make_policy("a.b", None).withheld("c") and not writer.make_policy("a.*", None).withheld("a.b")
    with pytest.raises(UsageError):
        writer.make_policy("a", "b")


def test_large_entry_is_published_beside_the_bundles(home: Path, keys: KeyRing, tmp_path: Path) -> None:
    """An entry over 65,535 bytes: its slot is a marker with its leaf hash and size, its bytes at
    large/<leaf hash>; Go-compatible tiles unchanged; a swapped large file is caught."""
    with Journal.open(home / "journal.db", create=True, harness=True) as j:
        j.append("ext.small", {"x": 1})
        big = j.append("ext.big", {"blob": "z" * 100_000})
        j.append("ext.small", {"x": 2})
        out, state = tmp_path / "pub", tmp_path / "seen"
        result = publish(j, out, keys)
    assert result.large == 1
    leaf = big.leaf_hash
    assert len(big.raw) > 65_535 and (out / "large" / leaf.hex()).read_bytes() == big.raw
    bundle = layout.split_bundle((out / "tile/entries/000.p/3").read_bytes(), 3, "b")
    assert bundle[1] == layout.large_marker(leaf, len(big.raw))
    assert _check(out, keys, state).ok
    (out / "large" / leaf.hex()).write_bytes(b"\x81\xa1x\x01" + b"z" * 70_000)
    with pytest.raises(VerificationError, match="entry-bundle: large/"):
        _check(out, keys, tmp_path / "seen2")


# --------------------------------------------------------------------------- incremental


def test_incremental_publish_writes_only_new_files_and_never_changes_a_full_tile(
        ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    out = tmp_path / "pub"
    with Journal.open(ledger) as j:
        old_size = j.size
        publish(j, out, keys)
    before = snapshot(out)
    add_filler(ledger, 700)
    with Journal.open(ledger) as j:
        result = publish(j, out, keys)
        size = j.size
    after = snapshot(out)
    # every file published before is untouched (same inode, mtime and bytes) but the checkpoint
    for rel, st in before.items():
        if rel != "checkpoint":
            assert after[rel] == st, rel
    assert result.written[-1] == "checkpoint"
    expected = set()
    for level in range(3):
        old_c, new_c = layout.level_count(old_size, level), layout.level_count(size, level)
        expected |= {layout.tile_path(level, t) for t in range(old_c >> 8, new_c >> 8)}
        if new_c % 256 and new_c != old_c:
            expected.add(layout.tile_path(level, new_c >> 8, new_c % 256))
    expected |= {layout.bundle_path(t) for t in range(old_size >> 8, size >> 8)}
    expected.add(layout.bundle_path(size >> 8, size % 256))
    assert set(result.written) - {"checkpoint"} == expected
    assert set(after) - set(before) == expected
    # nothing new: nothing written
    with Journal.open(ledger) as j:
        assert publish(j, out, keys).written == []


def test_interrupted_publish_leaves_a_consistent_directory_and_the_next_completes_it(
        ledger: Path, keys: KeyRing, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, state = tmp_path / "pub", tmp_path / "seen"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
        first_size = j.size
    add_filler(ledger, 1000)
    real_put = writer._Out.put
    calls = {"n": 0}

    def dying_put(self: writer._Out, rel: str, data: bytes, *, sync: bool = False) -> None:
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # the operator's Ctrl-C half-way through the tiles
        real_put(self, rel, data, sync=sync)

    monkeypatch.setattr(writer._Out, "put", dying_put)
    with Journal.open(ledger) as j, pytest.raises(KeyboardInterrupt):
        publish(j, out, keys)
    monkeypatch.setattr(writer._Out, "put", real_put)
    half = _check(out, keys, state)
    assert half.ok and half.size == first_size  # the old checkpoint still matches what is there
    assert calls["n"] == 4 and not list(out.rglob("*.tmp.*"))  # no file is left half-written
    with Journal.open(ledger) as j:
        done = publish(j, out, keys)
        assert done.size == j.size
    full = _check(out, keys, state)
    assert full.ok and full.size == done.size and full.previous_size == first_size


def test_publish_refuses_a_journal_that_rewrote_what_it_published(home: Path, keys: KeyRing, tmp_path: Path) -> None:
    out = tmp_path / "pub"
    add_filler(home, 300)
    with Journal.open(home) as j:
        publish(j, out, keys)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copytree(home / "keys", other / "keys")
    with Journal.open(other / "journal.db", create=True, harness=True) as j:
        j.append_many([("ext.filler", {"i": -i}, None, None) for i in range(400)])
        with pytest.raises(VerificationError, match="published-checkpoint: the journal does not extend"):
            publish(j, out, keys)
    small = tmp_path / "small"
    small.mkdir()
    shutil.copytree(home / "keys", small / "keys")
    with Journal.open(small / "journal.db", create=True, harness=True) as j:
        j.append("ext.x", {})
        with pytest.raises(VerificationError, match="truncated or rolled back"):
            publish(j, out, keys)


# --------------------------------------------------------------------------- the monitor's faults


@pytest.fixture
def published(ledger: Path, keys: KeyRing, tmp_path: Path) -> Path:
    add_filler(ledger, 65_536 + 300 - 620)  # two tile levels, and a full level-1 tile
    out = tmp_path / "pub"
    with Journal.open(ledger) as j:
        publish(j, out, keys)
    return out


def test_a_truncated_tile_is_named(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    tile = published / "tile/0/005"
    tile.write_bytes(tile.read_bytes()[:-7])
    with pytest.raises(VerificationError, match=r"tile-size: tile/0/005 holds 8185 bytes, 8192 expected .*truncated"):
        _check(published, keys, tmp_path / "seen")


def test_a_tile_whose_hashes_disagree_is_named(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    tile = published / "tile/1/000"
    data = bytearray(tile.read_bytes())
    data[40] ^= 1
    tile.write_bytes(bytes(data))
    with pytest.raises(VerificationError, match=r"tile-hash: tile/1/000: hash 1 disagrees with the tiles below"):
        _check(published, keys, tmp_path / "seen")


def test_a_level0_tile_that_does_not_hash_to_the_root(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    tile = published / "tile/0/002"
    data = bytearray(tile.read_bytes())
    data[0] ^= 1
    tile.write_bytes(bytes(data))
    with pytest.raises(VerificationError, match="tile-hash: the level-0 tiles do not hash to the checkpoint's root"):
        _check(published, keys, tmp_path / "seen")


def test_an_entry_bundle_that_does_not_match_its_tile(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    """One byte of one entry changed, its length kept: the bundle no longer matches the tile."""
    path = published / "tile/entries/001"
    slots = layout.split_bundle(path.read_bytes(), 256, "b")
    slots[7] = slots[7][:-1] + bytes([slots[7][-1] ^ 1])
    path.write_bytes(layout.encode_bundle(slots))
    with pytest.raises(VerificationError, match=r"entry-bundle: tile/entries/001: entry 263 does not hash to its "
                                                r"leaf in tile/0/001"):
        _check(published, keys, tmp_path / "seen")
    code, _out, err = invoke(tmp_path, "monitor", str(published), "--vkey", keys.verifier.vkey,
                             "--state", str(tmp_path / "seen"))
    assert code == 1 and err.count("\n") == 1 and err.startswith("error: entry-bundle:")


def test_a_missing_bundle_and_a_truncated_bundle(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    path = published / "tile/entries/003"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(VerificationError, match="entry-bundle: .*tile/entries/003.*truncated"):
        _check(published, keys, tmp_path / "seen")
    path.unlink()
    with pytest.raises(VerificationError, match="tile/entries/003 is missing"):
        _check(published, keys, tmp_path / "seen")


def test_a_rewritten_journal_is_caught_by_the_monitor(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    """The operator re-signs a rewritten history with the same key: the monitor that saw the old
    one proves the new one inconsistent with it (exit 1)."""
    state = tmp_path / "seen"
    with Journal.open(ledger) as j:
        publish(j, tmp_path / "pub", keys)
    assert _check(tmp_path / "pub", keys, state).ok
    forged = tmp_path / "forged"
    forged.mkdir()
    shutil.copytree(ledger / "keys", forged / "keys")
    with Journal.open(ledger) as src, Journal.open(forged / "journal.db", create=True, harness=True) as j:
        items = [(e.kind, e.data, e.run, e.task) for e in src.entries()]
        items[5] = ("ext.note", {"i": 0, "secret": "rewritten"}, RUN_A, None)
        j.append_many(items)
        j.append("ext.more", {})
        publish(j, tmp_path / "pub2", keys)
    with pytest.raises(VerificationError, match="remembered-checkpoint: the log does not extend"):
        _check(tmp_path / "pub2", keys, state)
    code, _o, err = invoke(tmp_path, "monitor", str(tmp_path / "pub2"), "--vkey", keys.verifier.vkey,
                           "--state", str(state))
    assert code == 1 and "history was rewritten" in err


def test_a_checkpoint_older_than_the_monitors_is_a_rollback(ledger: Path, keys: KeyRing, tmp_path: Path) -> None:
    state = tmp_path / "seen"
    with Journal.open(ledger) as j:
        publish(j, tmp_path / "old", keys)
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    add_filler(ledger, 50)
    with Journal.open(ledger) as j:
        publish(j, tmp_path / "new", keys)
    assert _check(tmp_path / "new", keys, state).ok
    with pytest.raises(VerificationError, match="remembered-checkpoint: .*truncated or rolled back"):
        _check(tmp_path / "old", keys, state)


def test_a_checkpoint_signed_by_another_key_is_refused(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    impostor = init_keys(tmp_path / "imp", name=ORIGIN, rng=seeded_rng(99))
    with pytest.raises(VerificationError, match="checkpoint-signature"):
        _check(published, impostor, tmp_path / "seen")


def test_a_recorded_view_that_does_not_replay_is_a_finding(home: Path, keys: KeyRing, tmp_path: Path) -> None:
    import copy

    from evaluators.views import recorded_view_data

    add_run(home, RUN_A, {"t1": True, "t2": False}, record=False)
    with Journal.open(home, harness=True) as j:
        data = copy.deepcopy(recorded_view_data(j.entries(run=RUN_A), RUN_A))
        data["view"]["components"]["task_success"] = 1.0
        j.append("view.recorded", data, run=RUN_A)
        publish(j, tmp_path / "pub", keys)
    report = _check(tmp_path / "pub", keys, tmp_path / "seen")
    assert [f["check"] for f in report.findings] == ["view-replay"]
    code, out, err = invoke(tmp_path, "monitor", str(tmp_path / "pub"), "--vkey", keys.verifier.vkey,
                            "--no-remember")
    assert code == 1 and "DOES NOT REPRODUCE" in out and err.startswith("error: view-replay:")


def test_an_injected_entry_is_a_finding(home: Path, keys: KeyRing, tmp_path: Path) -> None:
    """A second test.result for a suite that already has one (evaluators/structure.py)."""
    add_run(home, RUN_A, {"t1": True})
    with Journal.open(home, harness=True) as j:
        first = next(e for e in j.entries(run=RUN_A) if e.kind == "test.result")
        j.append("test.result", dict(first.data), run=RUN_A, task=first.task)
        publish(j, tmp_path / "pub", keys)
    report = _check(tmp_path / "pub", keys, tmp_path / "seen")
    assert "injected" in [f["check"] for f in report.findings], report.findings


def test_monitor_json_and_follow(published: Path, keys: KeyRing, tmp_path: Path) -> None:
    code, out, err = invoke(tmp_path, "monitor", str(published), "--vkey", keys.verifier.vkey, "--json",
                            "--state", str(tmp_path / "s"), "--follow", "--interval", "0.1", "--max-checks", "2")
    assert code == 0, err
    docs = [json.loads(chunk) for chunk in out.replace("}\n{", "}\x00{").split("\x00")]
    assert len(docs) == 2 and docs[0]["previous_size"] is None and docs[1]["previous_size"] == docs[0]["size"]
    code, _o, err = invoke(tmp_path, "monitor", str(published), "--vkey", keys.verifier.vkey, "--interval", "0")
    assert code == 2


def test_cli_publish_serve_and_witness_errors_are_one_line(ledger: Path, tmp_path: Path) -> None:
    """Usage errors: exit 2 and one line on stderr, nothing written."""
    cases = [
        (["publish", str(tmp_path / "p"), "--witness", "http://127.0.0.1:9"], "give one key per witness"),
        (["publish", str(tmp_path / "p"), "--public", "a", "--withhold", "b"], "not both"),
        (["serve", str(tmp_path / "p")], "no published log"),
        (["monitor", str(tmp_path / "nowhere"), "--vkey", "x+00000000+AQ=="], "public key must be 32 bytes"),
    ]
    for args, message in cases:
        code, _out, err = invoke(ledger, *args)
        assert code == 2 and err.count("\n") == 1 and message in err, (args, err)
    assert not (tmp_path / "p").exists()
    code, out, err = invoke(ledger, "publish", str(tmp_path / "p"))
    assert code == 0 and out.startswith("published example.test/ledger to ") and "0 -> 657 entries, 8 file(s) written" in out
    code, _out, err = invoke(ledger, "serve", str(tmp_path / "p"), "--host", "0.0.0.0")
    assert code == 2 and "not a loopback address" in err
    code, _out, err = invoke(ledger, "witness", "serve", "--log-vkey", "x+00000000+AQ==")
    assert code == 2 and err.count("\n") == 1
