"""The lean capture path: a strace log -> events -> journal bytes -> scan and attestation.

Reads outside the worktree keep a path, a size, a whole-file digest and the markers of the
committed windows their content matched (computed when captured); interpreter and system files
fold into one ``fs.read.summary``. These tests feed fake strace logs over real files through the
parser with the run's redactor, encode the events as journal entries, and check what is stored
and that the verdict is still re-derived (with and without the secret key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attest.attestation import (
    COMMITMENT_KEY_LABEL,
    SEAL_KEY_LABEL,
    build_attestation,
    verify_attestation,
)
from attest.commitment import build_commitment
from attest.redact import MarkerScanner, Redactor
from attest.scan import ScanPolicy, scan_attempt
from ledger.agents.trace import FOLDED_FILES, FOLDERS, WORKTREE_ENTRIES, TraceOptions, iter_events
from ledger.errors import VerificationError
from ledger.journal.note import Signer
from tests.attest.conftest import (
    ATTEMPT,
    DISTINCTIVE,
    KEY_NAME,
    MATERIAL,
    PUBLIC,
    SOLUTION_PAIRS,
    TASK_ROOT,
    FakeKeys,
    Recorder,
)

KEYS = FakeKeys(bytes(range(32)))
CKEY = KEYS.subkey(COMMITMENT_KEY_LABEL)
PACKAGES = 300
OPENS_EACH = 5


def h(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in text.encode())


def open_line(pid: int, ts: float, path: Path) -> str:
    """One successful read-only ``openat`` as ``strace -f -ttt -y -xx`` prints it."""
    return (f'{pid} {ts:.6f} openat(AT_FDCWD<{h("/")}>, "{h(str(path))}", O_RDONLY|O_CLOEXEC)'
            f" = 3<{h(str(path))}>")


def build(tmp_path: Path) -> dict[str, Any]:
    """A worktree, a fake interpreter with many packages, and a planted copy of the solution."""
    wt = tmp_path / "wt"
    (wt / "textkit").mkdir(parents=True)
    (wt / "textkit" / "pairs.py").write_text("def parse_pairs(text):\n    return {}\n")
    site = tmp_path / "py" / "lib" / "python3.11" / "site-packages"
    mods = []
    for i in range(PACKAGES):
        mod = site / f"pkg{i:03d}" / "core.py"
        mod.parent.mkdir(parents=True)
        mod.write_text(f"# PAYLOAD_{i:03d} library code that must never reach the journal\n"
                       + "def helper():\n    return 42\n" * 20)
        mods.append(mod)
    leak = site / "leaked" / "pairs.py"  # the solution, planted where folding would hide it
    leak.parent.mkdir(parents=True)
    leak.write_text(SOLUTION_PAIRS)
    return {"wt": wt.resolve(), "site": site.resolve(), "mods": [m.resolve() for m in mods],
            "leak": leak.resolve(), "home": (tmp_path / "home").resolve()}


def log_lines(fx: dict[str, Any], *, leak: bool) -> list[str]:
    lines = [open_line(10, 1.0, fx["wt"] / "textkit" / "pairs.py")]
    ts = 2.0
    for _round in range(OPENS_EACH):
        for mod in fx["mods"]:
            ts += 0.0001
            lines.append(open_line(11, ts, mod))
    if leak:
        lines.append(open_line(12, ts + 1, fx["leak"]))
    return lines


def journal(events: list[tuple[float, tuple[str, dict[str, Any]]]], wt: Path,
            redactor: Redactor) -> Recorder:
    """The events as the attempt's journal entries (between agent.started and agent.finished)."""
    rec = Recorder(redact=redactor, commitment=redactor.commitment)
    rec.start()
    for _ts, (kind, data) in events:
        rec.add(kind, data)
    rec.finish()
    return rec


def policy_for(fx: dict[str, Any]) -> ScanPolicy:
    return ScanPolicy.for_attempt(worktree=str(fx["wt"]), home=str(fx["home"]),
                                  interpreter_prefixes=(str(fx["site"].parents[2]),))


@pytest.fixture
def redactor() -> Redactor:
    """The run's redactor for the t-pairs commitment."""
    return Redactor(build_commitment(MATERIAL, key=CKEY, public=PUBLIC, root=TASK_ROOT), CKEY)


def test_interpreter_reads_fold_and_no_outside_content_is_stored(tmp_path: Path,
                                                                 redactor: Redactor) -> None:
    """1,500 opens of 300 package files become one summary entry with digests and counts; the
    entries stay within the per-attempt budget and hold none of the files' text."""
    fx = build(tmp_path)
    opts = TraceOptions(worktree=fx["wt"], home=fx["home"], capture_filter=redactor,
                        evidence=redactor.evidence)
    events = list(iter_events(log_lines(fx, leak=False), opts))
    assert [k for _t, (k, _d) in events] == ["fs.read", "fs.read.summary"]
    summary = events[-1][1][1]
    assert summary["reads"] == PACKAGES * OPENS_EACH
    # the first FOLDED_FILES files one by one, the rest counted by folder (FOLDERS folders, then
    # the rest in their site-packages folder)
    assert len(summary["files"]) == FOLDED_FILES
    first = fx["mods"][0]
    assert summary["files"][0] == [str(first), hashlib.sha256(first.read_bytes()).hexdigest(),
                                   OPENS_EACH]
    rest = fx["mods"][FOLDED_FILES:]
    assert summary["folders"] == sorted(
        [[str(m.parent), 1, OPENS_EACH] for m in rest[:FOLDERS]]
        + [[str(fx["site"]), len(rest) - FOLDERS, OPENS_EACH * (len(rest) - FOLDERS)]])
    rec = journal(events, fx["wt"], redactor)
    stored = b"".join(e.raw for e in rec.entries)
    assert b"PAYLOAD_" not in stored and b"helper" not in stored
    assert len(rec.entries) <= 150 and len(stored) <= 150_000
    result = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                          policy=policy_for(fx), scanner=redactor)
    assert result.verdict == "CLEAN" and result.kinds["fs.read.summary"] == 1


def test_read_of_the_hidden_solution_outside_the_worktree_is_dirty(tmp_path: Path,
                                                                   redactor: Redactor) -> None:
    """Attack: the solution planted in site-packages. Its read is not folded; it keeps only the
    markers of the matched windows (no plaintext, no plain digest), and the verdict DIRTY is
    re-derived from the journal with the public key alone and with the secret key."""
    fx = build(tmp_path)
    opts = TraceOptions(worktree=fx["wt"], home=fx["home"], capture_filter=redactor,
                        evidence=redactor.evidence)
    events = list(iter_events(log_lines(fx, leak=True), opts))
    leaked = [d for _t, (k, d) in events if k == "fs.read" and d["resolved"] == str(fx["leak"])]
    assert len(leaked) == 1
    data = leaked[0]
    assert "content" not in data and "sha256" not in data
    assert data["evidence"].startswith("[redacted:") and data["size"] == len(SOLUTION_PAIRS)
    summary = events[-1][1][1]
    assert str(fx["leak"]) not in {f[0] for f in summary["files"]}

    rec = journal(events, fx["wt"], redactor)
    stored = b"".join(e.raw for e in rec.entries)
    assert not [line for line in DISTINCTIVE if line.encode() in stored]
    pol = policy_for(fx)
    for scanner in (redactor, MarkerScanner(redactor.commitment)):
        result = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                              policy=pol, scanner=scanner)
        assert result.verdict == "DIRTY"
        assert [(m.kind, m.cls) for m in result.matches] == [("fs.read", "content")]

    signer = Signer.from_seed(KEY_NAME, bytes(32))
    result = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                          policy=pol, scanner=redactor)
    att = build_attestation(result, checkpoint_note=rec.checkpoint(signer), signer=signer,
                            seal_key=KEYS.subkey(SEAL_KEY_LABEL), prove=rec.prove)
    for secret in (None, KEYS):
        report = verify_attestation(att, verifier_public_key=signer.public_key,
                                    journal_entries=rec.entries, secret_key=secret)
        assert report.verdict == "DIRTY"


def test_clean_attestation_that_hides_the_evidence_fails_verification(
        tmp_path: Path, redactor: Redactor) -> None:
    """Attack: a CLEAN attestation over a journal whose outside read keeps evidence markers is
    refused by the key-free re-scan (the markers are re-checked against the commitment)."""
    fx = build(tmp_path)
    opts = TraceOptions(worktree=fx["wt"], home=fx["home"], capture_filter=redactor,
                        evidence=redactor.evidence)
    rec = journal(list(iter_events(log_lines(fx, leak=True), opts)), fx["wt"], redactor)
    pol = policy_for(fx)
    honest = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                          policy=pol, scanner=redactor)
    blind = scan_attempt([e for e in rec.entries if "evidence" not in e.data],
                         attempt=ATTEMPT, commitment=redactor.commitment, policy=pol,
                         scanner=redactor)
    assert honest.verdict == "DIRTY" and blind.verdict == "CLEAN"
    forged = type(honest)(**{**honest.__dict__, "matches": (), "verdict": "CLEAN"})
    signer = Signer.from_seed(KEY_NAME, bytes(32))
    att = build_attestation(forged, checkpoint_note=rec.checkpoint(signer), signer=signer,
                            seal_key=KEYS.subkey(SEAL_KEY_LABEL), prove=rec.prove)
    with pytest.raises(VerificationError) as err:
        verify_attestation(att, verifier_public_key=signer.public_key,
                           journal_entries=rec.entries)
    assert err.value.check == "evidence"


def test_events_stream_while_the_log_is_read(tmp_path: Path) -> None:
    """The parser is one streaming pass: the first event comes out after its own line is read,
    long before the end of a large log."""
    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    target = wt / "a.txt"
    target.write_text("x\n")
    consumed = 0
    total = 20_000

    def lines() -> Iterator[str]:
        nonlocal consumed
        yield open_line(1, 1.0, target)
        consumed += 1
        for i in range(total):
            consumed += 1
            yield f"1 {2 + i * 1e-6:.6f} openat(AT_FDCWD</>, \"\\x2f\", O_RDONLY) = -1 ENOENT"

    it = iter_events(lines(), TraceOptions(worktree=wt, home=tmp_path / "home"))
    ts, (kind, data) = next(it)
    assert kind == "fs.read" and data["resolved"] == str(target) and consumed <= 1
    assert list(it) == [] and consumed == total + 1


# --------------------------------------------------------------------------- bounded volume

ORDINARY = 20_000


def _crowd(fx: dict[str, Any]) -> list[str]:
    """20,000 ordinary reads: 10,000 of starting-tree files in the worktree (never written) and
    10,000 of system files in 500 folders of the interpreter's site-packages."""
    lines: list[str] = []
    ts = 1.0
    for i in range(ORDINARY // 2):
        ts += 1e-5
        lines.append(open_line(20, ts, fx["wt"] / "data" / f"d{i // 500:02d}" / f"f{i:05d}.txt"))
    for i in range(ORDINARY // 2):
        ts += 1e-5
        lines.append(open_line(21, ts, fx["site"] / f"lib{i % 500:03d}" / f"m{i:05d}.py"))
    return lines


def _scan(fx: dict[str, Any], redactor: Redactor, lines: list[str]
          ) -> tuple[Any, Recorder, list[tuple[float, tuple[str, dict[str, Any]]]]]:
    opts = TraceOptions(worktree=fx["wt"], home=fx["home"], capture_filter=redactor,
                        evidence=redactor.evidence,
                        path_hit=lambda p: bool(redactor.path_digests([p])))
    events = list(iter_events(lines, opts))
    rec = journal(events, fx["wt"], redactor)
    result = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                          policy=policy_for(fx), scanner=redactor)
    return result, rec, events


def test_twenty_thousand_ordinary_reads_stay_few_entries_and_clean(tmp_path: Path,
                                                                  redactor: Redactor) -> None:
    """20,000 reads of starting-tree and system files: a few dozen entries, a few KB, CLEAN;
    the summary still counts every read and every distinct file."""
    fx = build(tmp_path)
    result, rec, events = _scan(fx, redactor, _crowd(fx))
    assert result.verdict == "CLEAN", result.matches
    stored = b"".join(e.raw for e in rec.entries)
    assert len(rec.entries) <= 80 and len(stored) <= 40_000, (len(rec.entries), len(stored))
    summary = events[-1][1][1]
    assert summary["reads"] == ORDINARY - WORKTREE_ENTRIES  # those have entries of their own
    assert len([1 for _t, (k, _d) in events if k == "fs.read"]) == WORKTREE_ENTRIES
    counted = ORDINARY // 2 - WORKTREE_ENTRIES
    assert summary["worktree"] == {"files": counted, "reads": counted}
    listed = len(summary["files"]) + sum(f[1] for f in summary["folders"])
    assert listed == ORDINARY // 2


def test_a_worktree_file_the_agent_wrote_is_journaled_with_its_content(tmp_path: Path,
                                                                       redactor: Redactor) -> None:
    """Past the first reads, a worktree file the agent wrote (or one under a folder it made)
    still gets its own entry with content when read back: its echo counts for the scan."""
    fx = build(tmp_path)
    made = fx["wt"] / "newdir" / "own.py"
    made.parent.mkdir()
    made.write_text("print('mine')\n")
    lines = _crowd(fx)
    mkdir = (f'30 1.2 mkdir("{h(str(made.parent))}", 0777) = 0')
    lines += [mkdir, open_line(30, 1.3, made)]
    _result, _rec, events = _scan(fx, redactor, lines)
    own = [d for _t, (k, d) in events if k == "fs.read" and d["resolved"] == str(made)]
    assert len(own) == 1 and own[0]["content"] == "print('mine')\n"


@pytest.mark.parametrize("hidden", ["solution-content", "outside-the-allowlist",
                                    "hidden-test-by-name"])
def test_a_read_hidden_among_twenty_thousand_ordinary_reads_is_dirty(
        tmp_path: Path, redactor: Redactor, hidden: str) -> None:
    """Attack: one read that matters in the middle of 20,000 that do not: the planted solution
    in site-packages (content), a file outside the read allowlist (read scope), a file named
    like the hidden test in a system folder (path). Each keeps its own entry (or its own line in
    the summary) and the verdict is DIRTY for that reason."""
    fx = build(tmp_path)
    if hidden == "solution-content":
        target, cls = fx["leak"], "content"
    elif hidden == "outside-the-allowlist":
        target, cls = (tmp_path / "elsewhere" / "notes.txt").resolve(), "read-scope"
        target.parent.mkdir()
        target.write_text("nothing secret, but nowhere an agent was allowed to read\n")
    else:
        target, cls = fx["site"] / "lib499" / "test_pairs_hidden.py", "path"
        target.parent.mkdir(parents=True)
        target.write_text("# same name as the hidden test, other content\n")
    lines = _crowd(fx)
    lines.insert(len(lines) * 3 // 4, open_line(22, 1.15, target))
    result, _rec, events = _scan(fx, redactor, lines)
    assert result.verdict == "DIRTY"
    assert cls in {m.cls for m in result.matches}, result.matches
    if hidden == "hidden-test-by-name":  # listed one by one although past the listed files
        summary = events[-1][1][1]
        assert str(target) in {f[0] for f in summary["files"]}
    else:
        assert [d for _t, (k, d) in events if k == "fs.read" and d["resolved"] == str(target)]
