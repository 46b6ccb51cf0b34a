"""`ledger attest show` and the verdict column of `ledger run`, through click's CliRunner."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from attest.attestation import attestation_hash, verify_attestation
from cli.main import cli
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from tests.run.minitasks import make_ledger


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One fast run on a mini task: oracle (DIRTY) and noop (CLEAN), printed as text."""
    home = make_ledger(tmp_path_factory.mktemp("attest"), tasks=("fix-sub",))
    result = ledger(home, "run", "--task", "fix-sub", "--trace", "none",
                    "--agent", "oracle", "--agent", "noop")
    assert result.exit_code == 0, result.output
    with Journal.open(home / "journal.db", readonly=True) as j:
        atts = {e.data["attempt"].split("/")[2]: e for e in j.entries(kind="attestation")}
    return {"home": home, "output": result.output, "atts": atts}


def test_run_summary_shows_a_verdict_per_attempt(run: dict[str, Any]) -> None:
    """The text summary has an attestation column (DIRTY with its match count) and a show hint."""
    lines = run["output"].splitlines()
    header = next(line for line in lines if line.startswith("task "))
    assert header.split() == ["task", "agent", "rep", "outcome", "hidden", "signals",
                              "regression", "attestation", "agent", "s", "cost", "$"]
    row = {line.split()[1]: line for line in lines if line.startswith("fix-sub ")}
    dirty = run["atts"]["oracle"].data["attestation"]["match_count"]
    assert f"DIRTY ({dirty})" in row["oracle"] and " CLEAN " in row["noop"]
    assert "fix-sub oracle #1: passed, DIRTY" in run["output"]  # the progress line
    assert f"  ledger attest show {run['atts']['oracle'].data['hash'][:16]}" in lines


def test_run_json_carries_verdict_and_hash(tmp_path: Path) -> None:
    """`ledger run --json`: every attempt names its verdict and the hash of its attestation entry."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    result = ledger(home, "run", "--json", "--task", "fix-sub", "--trace", "none", "--agent", "noop")
    assert result.exit_code == 0, result.output
    [attempt] = json.loads(result.stdout)["attempts"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        [entry] = list(j.entries(kind="attestation"))
    assert attempt["attestation"] == "CLEAN" and attempt["attestation_matches"] == 0
    assert attempt["attestation_hash"] == entry.data["hash"] == attestation_hash(
        entry.data["attestation"])


def test_show_by_hash_prefix_and_attempt(run: dict[str, Any]) -> None:
    """A full hash, a 10-digit prefix and the attempt id all show the same attestation."""
    entry = run["atts"]["oracle"]
    h = entry.data["hash"]
    outs = [ledger(run["home"], "attest", "show", t) for t in (h, h[:10].upper(), entry.data["attempt"])]
    assert [o.exit_code for o in outs] == [0, 0, 0]
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
    text = outs[0].stdout
    assert text.splitlines()[0] == f"attestation {h}"
    assert f"  attempt      {entry.data['attempt']}" in text
    assert "  verdict      DIRTY (" in text and "  matches:" in text
    assert text.rstrip().endswith(f"check it: ledger verify {h}")


def test_show_json(run: dict[str, Any]) -> None:
    """--json gives the summary: verdict, matches with seq and class, where the entry is."""
    entry = run["atts"]["oracle"]
    out = ledger(run["home"], "attest", "show", entry.data["hash"], "--json")
    assert out.exit_code == 0
    view = json.loads(out.stdout)
    assert view["hash"] == view["recorded_hash"] == entry.data["hash"]
    assert view["seq"] == entry.seq and view["verdict"] == "DIRTY"
    assert view["match_count"] == len(view["matches"]) > 0
    assert "path" in {m["class"] for m in view["matches"]}  # it read solution/ by path
    assert view["scope"]["worktree"].endswith("/wt")
    clean = json.loads(ledger(run["home"], "attest", "show", run["atts"]["noop"].data["hash"],
                              "--json").stdout)
    assert clean["verdict"] == "CLEAN" and clean["matches"] == []


def test_show_dsse_envelope_verifies_with_the_public_key(run: dict[str, Any]) -> None:
    """--dsse prints an in-toto Statement v1 envelope that verifies with the log's public key."""
    out = ledger(run["home"], "attest", "show", "--dsse", run["atts"]["oracle"].data["hash"])
    assert out.exit_code == 0
    env = json.loads(out.stdout)
    assert env["payloadType"] == "application/vnd.in-toto+json"
    stmt = json.loads(base64.b64decode(env["payload"]))
    assert stmt["predicate"]["verdict"] == "DIRTY"
    report = verify_attestation(env, verifier_public_key=load_keys(run["home"] / "keys").verifier)
    assert report.level == "public-key" and report.verdict == "DIRTY"


@pytest.mark.parametrize("target, needle", [
    ("0" * 64, "no attestation with hash"),
    ("r-nope/fix-sub/noop/1/1", "no attestation with attempt"),
    ("abc", "at least 6 hex digits"),
    ("not-a-hash", "neither an attestation hash nor an attempt id"),
    ("", "name an attestation"),
])
def test_show_bad_targets_exit_2(run: dict[str, Any], target: str, needle: str) -> None:
    """Unknown or malformed HASH: one line on stderr, exit 2."""
    out = ledger(run["home"], "attest", "show", target)
    assert out.exit_code == 2 and needle in out.stderr and "Traceback" not in out.stderr


def test_show_without_journal_exits_2(tmp_path: Path) -> None:
    """No journal yet: exit 2, saying so; nothing is created."""
    out = ledger(tmp_path / "L", "attest", "show", "a" * 64)
    assert out.exit_code == 2 and "no journal" in out.stderr
    assert not (tmp_path / "L").exists()


def test_ambiguous_prefix_and_malformed_entry(tmp_path: Path, run: dict[str, Any]) -> None:
    """Two attestations sharing a prefix: ambiguous, exit 2; an entry without a map: exit 2."""
    import shutil

    home = tmp_path / "L"
    shutil.copytree(run["home"], home)
    h = run["atts"]["noop"].data["hash"]
    twin = h[:12] + ("0" if h[12] != "0" else "1") + h[13:]
    with Journal.open(home / "journal.db", harness=True) as j:
        j.append("attestation", {"attempt": "x/y/z/1/1", "attestation": "not a map", "hash": twin})
    out = ledger(home, "attest", "show", h[:12])
    assert out.exit_code == 2 and "ambiguous" in out.stderr
    assert ledger(home, "attest", "show", h[:13]).exit_code == 0
    out = ledger(home, "attest", "show", twin)
    assert out.exit_code == 2 and "holds no attestation map" in out.stderr


def test_help_texts() -> None:
    """`ledger attest` and `ledger attest show` have help text."""
    runner = CliRunner()
    assert "Clean-run attestations" in runner.invoke(cli, ["attest", "--help"]).output
    out = runner.invoke(cli, ["attest", "show", "--help"]).output
    assert "HASH" in out and "--dsse" in out and "--json" in out
