"""The attacks of issue 15 on a real run, one named case each, and the check that catches it.

The attacker has write access to ``.ledger/`` but not the signing key: they append with the
library's harness writer (what ``ledger append`` refuses) or edit the database directly.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from evaluators.views import recorded_view_data
from ledger.journal.codec import decode_entry
from ledger.journal.journal import Journal
from tests.run.minitasks import make_ledger


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


@dataclass
class Run:
    home: Path
    run_id: str
    attempts: dict[str, str]  # agent name -> attempt id

    def report(self, home: Path) -> dict[str, Any]:
        res = ledger(home, "report", self.run_id, "--json")
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One fast run on a mini task: oracle (passes, DIRTY) and noop (fails, CLEAN)."""
    home = make_ledger(tmp_path_factory.mktemp("attacks"), tasks=("fix-sub",))
    res = ledger(home, "run", "--json", "--task", "fix-sub", "--trace", "none",
                 "--agent", "oracle", "--agent", "noop")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    return Run(home, summary["run"], {a["agent"]: a["attempt"] for a in summary["attempts"]})


def _row(report: dict[str, Any], attempt: str) -> dict[str, Any]:
    return next(a for a in report["attempts"] if a["attempt"] == attempt)


def _append(home: Path, run_id: str, items: list[tuple[str, dict[str, Any], str | None]]) -> None:
    with Journal.open(home / "journal.db", harness=True) as j:  # what a raw writer can do
        j.append_many([(kind, data, run_id, task) for kind, data, task in items])


def override_results(r: Run, home: Path) -> None:
    """Later test.result + signal.result + a recomputed view.recorded for the failed noop attempt."""
    aid = r.attempts["noop"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        mine = [e for e in j.entries(run=r.run_id) if e.data.get("attempt") == aid]
    items: list[tuple[str, dict[str, Any], str | None]] = []
    for e in mine:
        if e.kind == "test.result":
            items.append(("test.result", {**e.data, "passed": True, "exit_code": 0,
                                          "counts": {"passed": 2, "failed": 0, "error": 0, "skipped": 0},
                                          "tests": []}, e.task))
        elif e.kind == "signal.result":
            items.append(("signal.result", {**e.data, "passed": True}, e.task))
    assert items
    _append(home, r.run_id, items)
    with Journal.open(home / "journal.db", readonly=True) as j:
        view = recorded_view_data(list(j.entries(run=r.run_id)), r.run_id)
    _append(home, r.run_id, [("view.recorded", view, None)])


def fake_attestation(r: Run, home: Path) -> None:
    """An unsigned attestation saying CLEAN for the DIRTY oracle attempt."""
    aid = r.attempts["oracle"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        real = next(e for e in j.entries(run=r.run_id, kind="attestation") if e.data["attempt"] == aid)
    att = {**real.data["attestation"], "verdict": "CLEAN", "matches": [], "match_count": 0}
    _append(home, r.run_id, [("attestation", {"attempt": aid, "attestation": att, "hash": "00" * 32},
                              real.task)])


@dataclass(frozen=True)
class Attack:
    mutate: Callable[[Run, Path], None]
    agent: str  # whose row must not change


ATTACKS = {
    "appended-result-override": Attack(override_results, "noop"),
    "appended-fake-attestation": Attack(fake_attestation, "oracle"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_appended_results_change_nothing_and_are_reported(run: Run, tmp_path: Path, name: str) -> None:
    """An appended result leaves every view as it was; replay reports it as injected (exit 1)."""
    attack = ATTACKS[name]
    before = run.report(run.home)
    home = tmp_path / "L"
    shutil.copytree(run.home, home)
    attack.mutate(run, home)
    after = run.report(home)
    aid = run.attempts[attack.agent]
    assert _row(after, aid) == _row(before, aid)
    assert after["score"] == before["score"]
    res = ledger(home, "replay", run.run_id)
    assert res.exit_code == 1 and "injected" in res.stdout, res.output
    res = ledger(home, "replay", run.run_id, "--json")
    injected = json.loads(res.stdout)["injected"]
    assert injected and all(f["check"] == "injected" for f in injected)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_plain_verify_reports_appended_results(run: Run, tmp_path: Path, name: str) -> None:
    """Plain `ledger verify` (no target, no --since) exits 1 naming the injected entries."""
    home = tmp_path / "L"
    shutil.copytree(run.home, home)
    assert ledger(home, "verify").exit_code == 0
    ATTACKS[name].mutate(run, home)
    res = ledger(home, "verify")
    assert res.exit_code == 1 and "injected" in res.stderr and "Traceback" not in res.output, res.output
    res = ledger(home, "verify", "--json")
    body = json.loads(res.stdout)
    assert body["ok"] is False and {f["check"] for f in body["findings"]} == {"injected"}


def test_plain_verify_checks_every_attestation_and_view(run: Run) -> None:
    """The untouched run verifies: both attestations and the recorded view are checked."""
    res = ledger(run.home, "verify", "--json")
    assert res.exit_code == 0, res.output
    audit = json.loads(res.stdout)["audit"]
    # the golden and the statistics view
    assert audit["attestations"] == 2 and audit["views"] == 2 and audit["findings"] == []


def test_forged_attestation_in_place_fails_the_audit(run: Run) -> None:
    """An attestation in its rightful place whose signature is forged: the audit names it."""
    from evaluators.audit import audit_runs
    from ledger.journal.codec import encode_entry
    from ledger.journal.keys import load_verifier

    with Journal.open(run.home / "journal.db", readonly=True) as j:
        entries = list(j.entries())
        roots = {s: j.root_at(s) for s in range(1, j.size + 1)}
    pos = next(i for i, e in enumerate(entries) if e.kind == "attestation"
               and e.data["attempt"] == run.attempts["oracle"])
    e = entries[pos]
    forged = json.loads(json.dumps(e.data))
    forged["attestation"]["verdict"] = "CLEAN"
    entries[pos] = encode_entry(seq=e.seq, ts=e.ts, kind=e.kind, data=forged, run=e.run, task=e.task)
    report = audit_runs(entries, public_key=load_verifier(run.home / "keys"), root_at=roots.get)
    assert [(f.check, f.seq) for f in report.findings][:1] == [("attestation-signature", e.seq)]


def _bundle(run: Run, tmp_path: Path) -> tuple[dict[str, Any], str]:
    out = tmp_path / "run.bundle"
    assert ledger(run.home, "export", run.run_id, "-o", str(out)).exit_code == 0
    vkey = ledger(run.home, "keys", "show", "--public").stdout.strip()
    return json.loads(out.read_text()), vkey


def _verify_bundle(tmp_path: Path, bundle: dict[str, Any], vkey: str, *extra: str) -> Result:
    path = tmp_path / "cut.bundle"
    path.write_text(json.dumps(bundle))
    return ledger(tmp_path / "auditor", "verify", "--bundle", str(path), "--vkey", vkey, *extra)


def test_truncated_run_bundle_is_incomplete(run: Run, tmp_path: Path) -> None:
    """A run bundle cut just before the DIRTY attestation fails bundle-incomplete (exit 1)."""
    bundle, vkey = _bundle(run, tmp_path)
    res = _verify_bundle(tmp_path, bundle, vkey)
    assert res.exit_code == 0 and f"the whole run {run.run_id}" in res.stdout, res.output
    decoded = [decode_entry(base64.b64decode(e["bytes"])) for e in bundle["entries"]]
    dirty = next(e for e in decoded if e.kind == "attestation"
                 and e.data["attestation"]["verdict"] == "DIRTY")
    cut = dict(bundle, entries=[e for e in bundle["entries"] if e["seq"] < dirty.seq],
               last_seq=dirty.seq - 1)
    res = _verify_bundle(tmp_path, cut, vkey)
    assert res.exit_code == 1 and "bundle-incomplete" in res.stderr, res.output


def test_relabelled_cut_bundle_says_it_is_a_selection(run: Run, tmp_path: Path) -> None:
    """The same cut relabelled as a contiguous selection (version 1, run=null) verifies only as a
    selection of entries, and says so."""
    bundle, vkey = _bundle(run, tmp_path)
    seqs = [e["seq"] for e in bundle["entries"]]
    assert seqs == list(range(seqs[0], seqs[-1] + 1))  # one run alone in this journal
    cut = dict(bundle, version=1, entries=bundle["entries"][:-3], first_seq=seqs[0],
               last_seq=seqs[-4], run=None)
    res = _verify_bundle(tmp_path, cut, vkey, "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["bundle_kind"] == "selection" and "selected entries" in body["summary"]


def test_attest_show_names_the_counted_attestation(run: Run, tmp_path: Path) -> None:
    """`attest show ATTEMPT` after a fake CLEAN was appended still shows DIRTY; the fake is flagged."""
    home = tmp_path / "L"
    shutil.copytree(run.home, home)
    fake_attestation(run, home)
    aid = run.attempts["oracle"]
    res = ledger(home, "attest", "show", aid, "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["verdict"] == "DIRTY" and body["injected"] is False
    with Journal.open(home / "journal.db", readonly=True) as j:
        fake = [e for e in j.entries(kind="attestation") if e.data["attempt"] == aid][-1]
    res = ledger(home, "attest", "show", aid)
    assert "CLEAN" not in res.stdout
    assert fake.data["attestation"]["verdict"] == "CLEAN"


def test_audit_binds_results_through_the_verified_leaf_hashes(run: Run) -> None:
    """Given the verified leaves, the results digest is checked against them: a wrong leaf is named."""
    from evaluators.audit import audit_runs
    from ledger.journal.keys import load_verifier

    with Journal.open(run.home / "journal.db", readonly=True) as j:
        entries = list(j.entries())
        roots = {s: j.root_at(s) for s in range(1, j.size + 1)}
    leaves = b"".join(e.leaf_hash for e in entries)
    key = load_verifier(run.home / "keys")
    assert audit_runs(entries, public_key=key, root_at=roots.get, leaves=leaves).findings == []
    att = next(e for e in entries if e.kind == "attestation" and e.data["attempt"] == run.attempts["noop"])
    bound = att.data["attestation"]["results"]["seqs"][0]
    wrong = leaves[:32 * bound] + bytes(32) + leaves[32 * bound + 32:]
    report = audit_runs(entries, public_key=key, root_at=roots.get, leaves=wrong)
    assert [(f.check, f.seq) for f in report.findings] == [("results-binding", att.seq)]
