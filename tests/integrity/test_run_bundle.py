"""A run's bundle holds that run and nothing of any other, and still proves none of its own entries
was left out (issue 24). Two real runs interleave: run A, run B, then an outside note appended
to A; the bundle of A holds none of B's entries, and a bundle with one of A's entries removed, or
one of B's added, fails."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from ledger.journal.bundle import check_run_complete
from ledger.journal.codec import decode_entry
from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


def _run(home: Path, *agents: str) -> str:
    args = ["run", "--json", "--task", "fix-sub", "--trace", "none", "--sandbox", "none"]
    for a in agents:
        args += ["--agent", a]
    res = ledger(home, *args)
    assert res.exit_code == 0, res.output
    return str(json.loads(res.stdout)["run"])


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """Run A (oracle + noop), run B (noop), then an ``ext.note`` filed under A after B."""
    tmp = tmp_path_factory.mktemp("runbundle")
    home = make_ledger(tmp, tasks=("fix-sub",))
    run_a = _run(home, "oracle", "noop")
    run_b = _run(home, "noop")
    res = ledger(home, "append", "ext.note", "--run", run_a, "--data", '{"text": "reviewed"}')
    assert res.exit_code == 0, res.output
    vkey = ledger(home, "keys", "show", "--public").stdout.strip()
    return home, run_a, run_b, vkey


def _export(home: Path, run: str, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{run}.bundle"
    res = ledger(home, "export", run, "-o", str(out))
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def _verify(tmp: Path, bundle: dict[str, Any], vkey: str, *extra: str) -> Result:
    path = tmp / "check.bundle"
    path.write_text(json.dumps(bundle))
    return ledger(tmp / "auditor", "verify", "--bundle", str(path), "--vkey", vkey, *extra)


def _decoded(bundle: dict[str, Any]) -> list[Any]:
    return [decode_entry(base64.b64decode(e["bytes"])) for e in bundle["entries"]]


def test_bundle_of_a_run_holds_none_of_the_run_between(interleaved: tuple[Path, str, str, str],
                                                         tmp_path: Path) -> None:
    """A's bundle: every entry of A (its note after B included), not one byte of B, and it verifies."""
    home, run_a, run_b, vkey = interleaved
    bundle = _export(home, run_a, tmp_path)
    with Journal.open(home / "journal.db", readonly=True) as j:
        mine = [e.seq for e in j.entries(run=run_a)]
        between = [e.seq for e in j.entries(run=run_b)]
    assert between and min(between) < max(mine), "the runs must interleave for this test to bite"
    assert [e["seq"] for e in bundle["entries"]] == mine
    assert {e.run for e in _decoded(bundle)} == {run_a}
    assert run_b not in (tmp_path / f"{run_a}.bundle").read_text()
    res = _verify(tmp_path, bundle, vkey, "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["bundle_kind"] == "run" and body["complete"] is True


def test_run_bundle_missing_one_entry_is_incomplete(interleaved: tuple[Path, str, str, str],
                                                    tmp_path: Path) -> None:
    """Removing one entry from the middle of A (run.started and run.finished kept) fails
    bundle-incomplete: the run.finished digest names every entry of the run."""
    home, run_a, _, vkey = interleaved
    bundle = _export(home, run_a, tmp_path)
    decoded = _decoded(bundle)
    victim = next(i for i, e in enumerate(decoded) if e.kind == "agent.finished")
    cut = dict(bundle, entries=[e for i, e in enumerate(bundle["entries"]) if i != victim])
    check_run_complete([e for i, e in enumerate(decoded) if i != victim], run_a)  # start/end/view kept
    res = _verify(tmp_path, cut, vkey)
    assert res.exit_code == 1 and "bundle-incomplete" in res.stderr, res.output


def test_run_bundle_with_an_entry_of_another_run_is_refused(interleaved: tuple[Path, str, str, str],
                                                            tmp_path: Path) -> None:
    """An entry of run B slipped into A's bundle (with its genuine inclusion proof) fails
    bundle-foreign-entry."""
    home, run_a, run_b, vkey = interleaved
    bundle = _export(home, run_a, tmp_path)
    with Journal.open(home / "journal.db", readonly=True) as j:
        foreign = next(e for e in j.entries(run=run_b) if e.kind == "agent.finished")
        proof = j.inclusion_proof(foreign.seq, bundle["tree_size"])
    item = {"seq": foreign.seq, "bytes": base64.b64encode(foreign.raw).decode("ascii"),
            "proof": [h.hex() for h in proof.hashes]}
    entries = sorted([*bundle["entries"], item], key=lambda e: e["seq"])
    res = _verify(tmp_path, dict(bundle, entries=entries), vkey)
    assert res.exit_code == 1 and "bundle-foreign-entry" in res.stderr, res.output


def test_version2_bundle_without_a_run_is_malformed(interleaved: tuple[Path, str, str, str],
                                                    tmp_path: Path) -> None:
    """A run bundle relabelled run=null claims nothing it can check: exit 2, one line."""
    home, run_a, _, vkey = interleaved
    res = _verify(tmp_path, dict(_export(home, run_a, tmp_path), run=None), vkey)
    assert res.exit_code == 2 and "must name its run" in res.stderr, res.output


def test_contiguous_version1_run_bundle_still_verifies(interleaved: tuple[Path, str, str, str],
                                                       tmp_path: Path) -> None:
    """A bundle in the earlier form (A's first..last entry, B's in between) verifies as run A."""
    home, run_a, _, vkey = interleaved
    v2 = _export(home, run_a, tmp_path)
    size = v2["tree_size"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        mine = [e.seq for e in j.entries(run=run_a)]
        first, last = mine[0], mine[-1]
        items = [{"seq": e.seq, "bytes": base64.b64encode(e.raw).decode("ascii"),
                  "proof": [h.hex() for h in j.inclusion_proof(e.seq, size).hashes]}
                 for e in j.entries(start=first, stop=last + 1)]
    v1 = {k: v for k, v in v2.items() if k != "entries"}
    v1.update(version=1, first_seq=first, last_seq=last, entries=items)
    res = _verify(tmp_path, v1, vkey, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bundle_kind"] == "run"


def test_resume_of_a_finished_run_appends_nothing(tmp_path: Path) -> None:
    """`ledger run --resume` of a finished run with nothing left writes no entry."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    run_id = _run(home, "noop")
    with Journal.open(home / "journal.db", readonly=True) as j:
        before = j.size
    res = ledger(home, "run", "--resume", run_id, "--trace", "none")
    assert res.exit_code == 0, res.output
    assert "nothing left to run" in res.output and "nothing was appended" in res.output
    with Journal.open(home / "journal.db", readonly=True) as j:
        assert j.size == before
