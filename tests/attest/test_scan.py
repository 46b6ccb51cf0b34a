"""The activity scan and verdicts (attest.scan), one crafted trajectory per attack."""

from __future__ import annotations

import pytest

from attest.commitment import Commitment
from attest.redact import MarkerScanner, Redactor
from attest.scan import ScanPolicy, scan_attempt
from ledger.errors import MalformedInput, UsageError, VerificationError
from tests.attest.conftest import (
    ATTEMPT,
    HIDDEN_TEST,
    HOME,
    OTHER_ATTEMPT,
    REPO_PAIRS,
    SCRATCH,
    SOLUTION_PAIRS,
    TASK_ROOT,
    WORKTREE,
    Recorder,
    fix_patch,
    honest,
    scan,
)

HIDDEN_PATH = f"{TASK_ROOT}/tests/test_pairs_hidden.py"
SOLUTION_PATH = f"{TASK_ROOT}/solution/textkit/pairs.py"


def _classes(result: object) -> list[tuple[int, str]]:
    return [(m.seq, m.cls) for m in result.matches]  # type: ignore[attr-defined]


def test_honest_agent_is_clean(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Reads the repo, runs the public tests (test names in the output), writes the answer."""
    honest(rec)
    result = scan(rec, redactor, policy)
    assert result.verdict == "CLEAN"
    assert result.matches == ()
    assert result.answer_digests > 0  # its diff equals the reference fix: work, not contamination
    assert result.activity_count == sum(result.kinds.values()) == 14


def test_activity_digest_covers_every_activity_entry(rec: Recorder, redactor: Redactor,
                                                     policy: ScanPolicy) -> None:
    """Count and digest change when an activity entry is left out."""
    honest(rec)
    full = scan(rec, redactor, policy)
    cut = [e for e in rec.entries if e.seq != 6]
    part = scan_attempt(cut, attempt=ATTEMPT, commitment=redactor.commitment, policy=policy,
                        scanner=redactor)
    assert part.activity_count == full.activity_count - 1
    assert part.activity_digest != full.activity_digest


def test_read_hidden_test_outside_worktree(rec: Recorder, redactor: Redactor,
                                           policy: ScanPolicy) -> None:
    """Attack: open the hidden test through its path in the task folder (content unseen)."""
    rec.start()
    e = rec.read(HIDDEN_PATH)
    result = scan(rec, redactor, policy)
    assert result.verdict == "DIRTY"
    assert (e.seq, "path") in _classes(result)
    assert (e.seq, "read-scope") in _classes(result)


def test_read_through_symlink_in_worktree(rec: Recorder, redactor: Redactor,
                                          policy: ScanPolicy) -> None:
    """Attack: a worktree symlink resolving to the hidden test is judged by its target."""
    rec.start()
    e = rec.read("peek.py", resolved=HIDDEN_PATH)
    assert (e.seq, "path") in _classes(scan(rec, redactor, policy))


def test_packaged_task_under_interpreter_prefix_is_still_caught(
        commitment: Commitment, ckey: bytes) -> None:
    """Attack: tasks inside site-packages are read-allowlisted, but their paths are committed."""
    from attest.commitment import build_commitment
    from tests.attest.conftest import MATERIAL, PUBLIC

    root = "/opt/py/lib/python3.11/site-packages/ledger/tasks/golden/smoke/t-pairs"
    com = build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=root)
    red = Redactor(com, ckey)
    rec = Recorder(redact=red, commitment=com)
    rec.start()
    e = rec.read(f"{root}/solution/textkit/pairs.py")
    pol = ScanPolicy.for_attempt(worktree=WORKTREE, interpreter_prefixes=("/opt/py",))
    result = scan(rec, red, pol)
    assert _classes(result) == [(e.seq, "path")]


def test_cat_reference_solution_in_subprocess(rec: Recorder, redactor: Redactor,
                                              policy: ScanPolicy) -> None:
    """Attack: `cat` of the reference solution; its output reaches the agent redacted."""
    rec.start()
    ex = rec.exec(["cat", SOLUTION_PATH])
    rd = rec.read(SOLUTION_PATH, SOLUTION_PAIRS)
    out = rec.output(SOLUTION_PAIRS)
    result = scan(rec, redactor, policy)
    assert result.verdict == "DIRTY"
    got = _classes(result)
    for key in [(ex.seq, "path"), (rd.seq, "path"), (rd.seq, "content"), (out.seq, "content")]:
        assert key in got
    assert "dangling" not in out.data["text"]


def test_python_open_one_liner(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Attack: python -c open(...) of the solution, seen only as a command line (no strace read)."""
    rec.start(trace="transcript")
    call = rec.call("Bash", {"command": f"python -c \"print(open('{SOLUTION_PATH}').read())\""})
    res = rec.result("Bash", SOLUTION_PAIRS)
    result = scan(rec, redactor, policy)
    assert (call.seq, "path") in _classes(result)
    assert (res.seq, "content") in _classes(result)


def test_relative_escape_from_worktree(rec: Recorder, redactor: Redactor,
                                       policy: ScanPolicy) -> None:
    """Attack: ../../ up to the task folder in a command line."""
    rec.start()
    e = rec.exec(["cat", "../../srv/golden/smoke/t-pairs/tests/test_pairs_hidden.py"])
    assert (e.seq, "path") in _classes(scan(rec, redactor, policy))


def test_fix_found_in_git_history(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Attack (adversarial tier): `git log -p` shows the fix planted in the repo's history."""
    rec.start(trace="transcript")
    rec.call("Bash", {"command": "git log -p --all"})
    history = "commit 1a2b\nAuthor: someone\n\n    future fix\n\n" + fix_patch()
    res = rec.result("Bash", history)
    result = scan(rec, redactor, policy)
    assert result.verdict == "DIRTY"
    assert (res.seq, "content") in _classes(result)


def test_fetch_from_local_server(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Attack: HTTP to 127.0.0.1 that is not allowlisted; the response holds the hidden test."""
    rec.start()
    conn = rec.connect("127.0.0.1", 8765)
    resp = rec.add("net.response", {"content": redactor(HIDDEN_TEST), "source": "agent"})
    result = scan(rec, redactor, policy)
    assert (conn.seq, "network") in _classes(result)
    assert (resp.seq, "content") in _classes(result)
    assert next(m for m in result.matches if m.cls == "network").detail == "127.0.0.1:8765"


@pytest.mark.parametrize(("host", "port", "allowed"), [
    ("pypi.org", 443, True), ("pypi.org", 80, False), ("10.1.2.3", 8080, True),
    ("10.2.0.1", 80, False), ("::1", 80, False), ("127.0.0.53", 53, True),
])
def test_network_allowlist(rec: Recorder, redactor: Redactor, policy: ScanPolicy, host: str,
                           port: int, allowed: bool) -> None:
    """host:port, CIDR and DNS entries of the allowlist decide network matches."""
    rec.start()
    rec.connect(host, port)
    assert scan(rec, redactor, policy).verdict == ("CLEAN" if allowed else "DIRTY")


def test_unix_sockets_are_not_network(rec: Recorder, redactor: Redactor,
                                      policy: ScanPolicy) -> None:
    """A unix-domain socket is local IPC, not a network endpoint."""
    rec.start()
    rec.add("net.connect", {"host": "/run/nscd/socket", "port": 0, "family": "unix",
                            "source": "strace"})
    assert scan(rec, redactor, policy).verdict == "CLEAN"


def test_write_outside_worktree(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Attack: writing outside the worktree (here: over the hidden test) is a scope match."""
    rec.start()
    e = rec.write(HIDDEN_PATH)
    rec.write(f"{HOME}/.config/agent.json")
    rec.write("/dev/null")
    rec.write(f"{SCRATCH}/notes.txt")
    result = scan(rec, redactor, policy)
    assert _classes(result) == [(e.seq, "write-scope")]


def test_reads_outside_allowlist(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """Reads of system, interpreter, home and worktree-ancestor paths are allowed; others not."""
    rec.start()
    for p in ("/usr/lib/x.so", "/opt/py/lib/os.py", f"{HOME}/.cache/a", "/tmp", "/", BASE_DIR):
        rec.read(p)
    bad = rec.read("/var/tmp/other-run/solution.py")
    assert _classes(scan(rec, redactor, policy)) == [(bad.seq, "read-scope")]


BASE_DIR = WORKTREE.rsplit("/", 1)[0]


def test_unobserved_is_never_clean(rec: Recorder, redactor: Redactor, policy: ScanPolicy) -> None:
    """trace none and no transcript: UNOBSERVED, even with spotless output."""
    rec.start(trace="none")
    rec.output("all done\n")
    rec.diff(fix_patch())
    assert scan(rec, redactor, policy).verdict == "UNOBSERVED"


def test_unobserved_with_evidence_is_dirty(rec: Recorder, redactor: Redactor,
                                           policy: ScanPolicy) -> None:
    """Evidence beats missing observation: a printed hidden test makes it DIRTY."""
    rec.start(trace="none")
    rec.output(HIDDEN_TEST)
    assert scan(rec, redactor, policy).verdict == "DIRTY"


def test_transcript_counts_as_observation(rec: Recorder, redactor: Redactor,
                                          policy: ScanPolicy) -> None:
    """An agent that gives a transcript (tool calls) is observed without strace."""
    rec.start(trace="none")
    rec.call("Read", {"file_path": "textkit/pairs.py"})
    rec.result("Read", REPO_PAIRS)
    assert scan(rec, redactor, policy).verdict == "CLEAN"


def test_no_agent_started_is_unobserved(rec: Recorder, redactor: Redactor,
                                        policy: ScanPolicy) -> None:
    """An attempt whose agent never started has observed nothing."""
    rec.add("commitment", {"commitment": redactor.commitment.as_data()})
    assert scan(rec, redactor, policy).verdict == "UNOBSERVED"


def test_reading_back_own_work_is_clean(rec: Recorder, redactor: Redactor,
                                        policy: ScanPolicy) -> None:
    """Echo rule: the agent writes the fix, then views and cats its own file."""
    rec.start(trace="transcript")
    rec.call("Write", {"file_path": f"{WORKTREE}/textkit/pairs.py", "content": SOLUTION_PAIRS})
    rec.result("Write", "File written")
    rec.call("Read", {"file_path": "textkit/pairs.py"})
    rec.result("Read", "\n".join(f"{i:6}\u2192{line}"
                                 for i, line in enumerate(SOLUTION_PAIRS.splitlines(), 1)))
    rec.call("Bash", {"command": "cat textkit/pairs.py"})
    rec.result("Bash", SOLUTION_PAIRS)
    rec.read("textkit/pairs.py", SOLUTION_PAIRS)
    rec.output("Done. The new parse_pairs:\n" + SOLUTION_PAIRS)
    result = scan(rec, redactor, policy)
    assert result.verdict == "CLEAN"
    assert result.echoes >= 3


def test_read_first_write_later_is_dirty(rec: Recorder, redactor: Redactor,
                                         policy: ScanPolicy) -> None:
    """Echo rule is ordered: seeing the answer before writing it is not excused by the write."""
    rec.start(trace="transcript")
    rec.call("Bash", {"command": "curl -s $ANSWER_URL"})
    res = rec.result("Bash", SOLUTION_PAIRS)
    rec.call("Write", {"file_path": f"{WORKTREE}/textkit/pairs.py", "content": SOLUTION_PAIRS})
    rec.diff(fix_patch())
    assert (res.seq, "content") in _classes(scan(rec, redactor, policy))


def test_worktree_read_of_planted_file_is_not_contamination(rec: Recorder, redactor: Redactor,
                                                            policy: ScanPolicy) -> None:
    """Reads inside the worktree are the agent's own workspace (their sources are scanned)."""
    rec.start()
    rec.read("textkit/pairs.py", SOLUTION_PAIRS)
    assert scan(rec, redactor, policy).verdict == "CLEAN"


def test_markers_alone_are_evidence(rec: Recorder, redactor: Redactor,
                                    policy: ScanPolicy) -> None:
    """A key-free scan (markers only) still sees the printed hidden test."""
    rec.start()
    out = rec.output(HIDDEN_TEST)
    free = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                        policy=policy, scanner=MarkerScanner(redactor.commitment))
    assert _classes(free) == [(out.seq, "content")]


def test_unredacted_plaintext_is_still_matched(rec: Recorder, redactor: Redactor,
                                               policy: ScanPolicy) -> None:
    """Tool output that escaped redaction is matched from its plaintext windows."""
    rec.start(trace="transcript")
    e = rec.add("tool.result", {"tool": "WebFetch", "output": HIDDEN_TEST, "is_error": False})
    assert (e.seq, "content") in _classes(scan(rec, redactor, policy))


def test_other_attempts_are_ignored(rec: Recorder, redactor: Redactor,
                                    policy: ScanPolicy) -> None:
    """A parallel attempt's dirty read does not touch this attempt."""
    rec.start()
    rec.start(attempt=OTHER_ATTEMPT)
    rec.read(HIDDEN_PATH, HIDDEN_TEST, attempt=OTHER_ATTEMPT)
    rec.read("textkit/pairs.py", REPO_PAIRS)
    assert scan(rec, redactor, policy).verdict == "CLEAN"
    assert scan(rec, redactor, policy, OTHER_ATTEMPT).verdict == "DIRTY"


def test_unknown_kinds_are_ignored(rec: Recorder, redactor: Redactor,
                                   policy: ScanPolicy) -> None:
    """An entry kind the scan does not know is not activity (and is not scanned)."""
    rec.start()
    rec.add("vendor.extension", {"blob": HIDDEN_TEST})
    result = scan(rec, redactor, policy)
    assert result.activity_count == 0
    assert result.verdict == "CLEAN"


def test_commitment_must_match(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
                               ckey: bytes) -> None:
    """Scanning against a commitment other than the journal's is refused."""
    from attest.commitment import build_commitment
    from tests.attest.conftest import MATERIAL

    rec.start()
    other = build_commitment(MATERIAL[:1], key=ckey)
    with pytest.raises(VerificationError) as err:
        scan_attempt(rec.entries, attempt=ATTEMPT, commitment=other, policy=policy,
                     scanner=Redactor(other, ckey))
    assert err.value.check == "commitment"


def test_activity_before_commitment_is_refused(rec: Recorder, redactor: Redactor,
                                               policy: ScanPolicy) -> None:
    """A commitment appended after the agent started could be tailored to it."""
    rec.add("agent.started", {"argv": [], "cwd": WORKTREE, "trace": "strace", "trace_reason": ""})
    rec.add("commitment", {"commitment": redactor.commitment.as_data()})
    with pytest.raises(VerificationError) as err:
        scan(rec, redactor, policy)
    assert err.value.check == "commitment-order"


def test_missing_commitment_is_refused(rec: Recorder, redactor: Redactor,
                                       policy: ScanPolicy) -> None:
    """No commitment, no scan."""
    with pytest.raises(VerificationError):
        scan(rec, redactor, policy)


def test_entries_out_of_order_are_refused(rec: Recorder, redactor: Redactor,
                                          policy: ScanPolicy) -> None:
    """The scan relies on seq order (the echo rule is ordered)."""
    honest(rec)
    shuffled = list(rec.entries)
    shuffled[5], shuffled[6] = shuffled[6], shuffled[5]
    with pytest.raises(MalformedInput):
        scan_attempt(shuffled, attempt=ATTEMPT,
                     commitment=redactor.commitment, policy=policy, scanner=redactor)


def test_policy_round_trip_and_validation(policy: ScanPolicy) -> None:
    """The policy is stored in the attestation and read back exactly; bad data is refused."""
    assert ScanPolicy.from_data(policy.as_data()) == policy
    with pytest.raises(MalformedInput):
        ScanPolicy.from_data({**policy.as_data(), "worktree": "relative/wt"})
    with pytest.raises(MalformedInput):
        ScanPolicy.from_data({"worktree": WORKTREE})


# (name, edit of a valid scope): scopes the policy itself refuses to be built from
_BAD_SCOPES = [
    ("worktree-relative", {"worktree": "relative/wt"}),
    ("read-entry-relative", {"read_allowlist": ["/usr", "lib"]}),
    ("write-entry-relative", {"write_allowlist": ["tmp"]}),
]


@pytest.mark.parametrize("edit", [e for _, e in _BAD_SCOPES], ids=[n for n, _ in _BAD_SCOPES])
def test_scope_check_refuses_what_the_policy_refuses(policy: ScanPolicy, edit: dict[str, object]) -> None:
    """check_data (what verifying an attestation runs) refuses, with the same message, every scope
    whose ScanPolicy cannot be built."""
    data = {**policy.as_data(), **edit}
    with pytest.raises(UsageError) as built:
        ScanPolicy(worktree=data["worktree"], read_allowlist=tuple(data["read_allowlist"]),
                   write_allowlist=tuple(data["write_allowlist"]),
                   network_allowlist=tuple(data["network_allowlist"]), allow_dns=data["allow_dns"])
    with pytest.raises(MalformedInput) as checked:
        ScanPolicy.check_data(data)
    assert str(checked.value) == f"scope: {built.value}"


def _summary(rec: Recorder, paths: list[str]) -> object:
    return rec.add("fs.read.summary", {"files": [[p, "00" * 32, 2] for p in paths],
                                       "reads": 2 * len(paths), "source": "strace"})


def test_folded_reads_in_scope_are_clean(rec: Recorder, redactor: Redactor,
                                         policy: ScanPolicy) -> None:
    """A summary of interpreter and system reads on the allowlist matches nothing."""
    rec.start()
    _summary(rec, ["/usr/lib/x.so", "/opt/py/lib/os.py", "/opt/py/lib/json/__init__.py",
                   "/etc/hosts"])
    result = scan(rec, redactor, policy)
    assert result.matches == () and result.kinds["fs.read.summary"] == 1


def test_folded_read_outside_allowlist_is_read_scope(rec: Recorder, redactor: Redactor,
                                                     policy: ScanPolicy) -> None:
    """Attack: a folded read of a path off the allowlist (beside allowed ones) is a read-scope
    match of the summary entry; the key-free view finds it too."""
    rec.start()
    e = _summary(rec, ["/opt/py/lib/os.py", "/var/tmp/other-run/solution.py",
                       "/opt/py/lib/re.py"])
    assert _classes(scan(rec, redactor, policy)) == [(e.seq, "read-scope")]  # type: ignore[attr-defined]
    free = scan_attempt(rec.entries, attempt=ATTEMPT, commitment=redactor.commitment,
                        policy=policy, scanner=MarkerScanner(redactor.commitment))
    assert _classes(free) == [(e.seq, "read-scope")]  # type: ignore[attr-defined]


def test_folded_read_of_a_committed_path_is_a_path_match(rec: Recorder, redactor: Redactor,
                                                         policy: ScanPolicy) -> None:
    """Attack: the hidden test's path hidden among folded interpreter reads is a path match."""
    rec.start()
    e = _summary(rec, ["/opt/py/lib/os.py", HIDDEN_PATH, "/usr/lib/x.so"])
    assert (e.seq, "path") in _classes(scan(rec, redactor, policy))  # type: ignore[attr-defined]
