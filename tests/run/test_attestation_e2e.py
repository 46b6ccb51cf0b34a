"""Clean-run attestation end to end: real `ledger run` with fake agents, verdicts, verify, no leaks.

Every attack is a small Python program run as a ``cmd:`` agent by the real coordinator, on a
packaged task (``add-clamp``, ``median-even-unsorted``) or a mini task. Attacks that only strace
can see run with ``--trace strace`` and are skipped where strace cannot run.
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import digests as dg
from attest.attestation import (
    attestation_hash,
    build_attestation,
    matches_digest,
    signature_keyid,
    signed_bytes,
)
from attest.redact import Redactor
from attest.scan import scan_attempt
from cli.main import cli
from ledger.agents.strace import strace_status
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from ledger.run.attestor import Attestor, scan_policy
from ledger.tasks.loader import available_tiers, load_tasks
from ledger.tasks.material import public_material
from ledger.tasks.model import Task
from tests.local_http import CountingServer
from tests.run.minitasks import make_ledger

STRACE_OK, STRACE_WHY = strace_status()
_skip_without_strace = pytest.mark.skipif(not STRACE_OK, reason=STRACE_WHY)


def needs_strace(func: Any) -> Any:
    """The strace attack run (one run of nine attempts, about 12 s): strace and slow markers."""
    return pytest.mark.slow(pytest.mark.strace(_skip_without_strace(func)))


# --------------------------------------------------------------------------- helpers


def ledger(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def run_json(home: Path, *args: str) -> dict[str, Any]:
    """``ledger run --json`` without isolation: these tests are about what observation alone
    catches (tests/sandbox/ covers the sandboxed runs)."""
    result = ledger(home, "run", "--json", "--sandbox", "none", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def agent(folder: Path, name: str, body: str) -> str:
    """A fake agent: ``name``.py in ``folder`` run with this interpreter (agent name cmd-NAME)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


def packaged(task_id: str) -> Task:
    return next(t for t in load_tasks(None, [task_id]) if t.id == task_id)


@dataclass
class Run:
    home: Path
    summary: dict[str, Any]
    atts: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent name -> attestation
    hashes: dict[str, str] = field(default_factory=dict)  # agent name -> attestation hash

    def entries(self) -> list[Any]:
        with Journal.open(self.home / "journal.db", readonly=True) as j:
            return list(j.entries(run=self.summary["run"]))

    def entry(self, seq: int) -> Any:
        with Journal.open(self.home / "journal.db", readonly=True) as j:
            return j.entry(seq)

    def classes(self, agent_name: str) -> set[str]:
        return {m["class"] for m in self.atts[agent_name]["matches"]}


def recorded(home: Path, summary: dict[str, Any]) -> Run:
    """The run's attestations by agent name, checked against the summary's verdict column."""
    run = Run(home, summary)
    for e in run.entries():
        if e.kind == "attestation":
            name = e.data["attempt"].split("/")[2]
            run.atts[name] = e.data["attestation"]
            run.hashes[name] = e.data["hash"]
    for a in summary["attempts"]:
        assert a["attestation"] == run.atts[a["agent"]]["verdict"], a
        assert a["attestation_hash"] == run.hashes[a["agent"]]
    return run


def verify(home: Path, target: str, *extra: str) -> Result:
    return ledger(home, "verify", target, *extra)


# --------------------------------------------------------------------------- attacks under strace


def _honest_body(task: Task) -> str:
    """Reads the repo, writes the exact reference answer, runs the public tests, shows its file.

    The answer is base64 in the program: a real agent's knowledge is not a file it reads, while
    this fake agent's program is (its interpreter opens it, and strace captures that read).
    """
    answer = base64.b64encode((task.solution_dir / "mathx" / "ops.py").read_bytes()).decode()
    return f"""
        import base64, subprocess, sys
        for rel in ("mathx/ops.py", "mathx/__init__.py", "tests/test_lerp.py"):
            open(rel).read()
        open("mathx/ops.py", "wb").write(base64.b64decode({answer!r}))
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests"],
                               capture_output=True, text=True)
        print(tests.stdout[-3000:])
        subprocess.run(["cat", "mathx/ops.py"])
    """


@pytest.fixture(scope="module")
def attacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, dict[str, Any]]]:
    """One strace run of add-clamp: six attacks, an honest agent and the three built-ins."""
    if not STRACE_OK:
        pytest.skip(STRACE_WHY)
    tmp = tmp_path_factory.mktemp("attacks")
    task = packaged("add-clamp")
    hidden = str((task.tests_dir / "test_clamp_accept.py").resolve())
    solution = str((task.solution_dir / "mathx" / "ops.py").resolve())
    outside = tmp / "outside" / "note.txt"
    outside.parent.mkdir()
    bots = tmp / "agents"
    with CountingServer(b"notes from a server that is not on the allowlist\n") as server:
        specs = [
            agent(bots, "peek-hidden", f"""
                import os
                os.symlink({hidden!r}, "peek.txt")
                data = open("peek.txt").read()
                os.unlink("peek.txt")
            """),
            agent(bots, "cat-solution", f"""
                import subprocess
                seen = subprocess.run(["cat", {solution!r}], capture_output=True).stdout
            """),
            agent(bots, "pyopen-solution", f"""
                import subprocess, sys
                subprocess.run([sys.executable, "-c", "open(%r).read()" % {solution!r}], check=True)
            """),
            agent(bots, "write-outside", f"""
                open({str(outside)!r}, "w").write("a note left outside the worktree\\n")
            """),
            agent(bots, "fetch", f"""
                import urllib.request
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))
                print(opener.open("http://127.0.0.1:{server.port}/notes", timeout=10).read())
            """),
            agent(bots, "honest", _honest_body(task)),
            "noop", "demo", "oracle",
        ]
        args = ["--task", "add-clamp", "--trace", "strace", "--parallel", "2"]
        for spec in specs:
            args += ["--agent", spec]
        home = tmp / ".ledger"
        summary = run_json(home, *args)
        hits = list(server.hits)
    yield recorded(home, summary), {"hidden": hidden, "solution": solution, "outside": outside,
                                    "hits": hits, "port": server.port}


def _match_entries(run: Run, name: str, cls: str) -> list[Any]:
    return [run.entry(m["seq"]) for m in run.atts[name]["matches"] if m["class"] == cls]


@needs_strace
def test_reading_a_hidden_test_through_a_symlink_out_of_the_worktree_is_dirty(attacks: Any) -> None:
    """A worktree symlink to a hidden test: strace sees the real path, a path and content match."""
    run, ctx = attacks
    assert run.atts["cmd-peek-hidden"]["verdict"] == "DIRTY"
    reads = _match_entries(run, "cmd-peek-hidden", "path")
    assert any(e.kind == "fs.read" and e.data["resolved"] == ctx["hidden"]
               and e.data["in_worktree"] is False for e in reads)
    assert "content" in run.classes("cmd-peek-hidden")


@needs_strace
def test_cat_of_the_reference_solution_is_dirty(attacks: Any) -> None:
    """`cat solution/...` in a subprocess whose output the agent keeps to itself: caught by strace."""
    run, ctx = attacks
    assert run.atts["cmd-cat-solution"]["verdict"] == "DIRTY"
    reads = _match_entries(run, "cmd-cat-solution", "path")
    assert any(e.kind == "fs.read" and e.data["resolved"] == ctx["solution"] for e in reads)
    execs = [e for e in run.entries() if e.kind == "proc.exec"
             and e.data["attempt"] == run.atts["cmd-cat-solution"]["attempt"]]
    assert any(Path(e.data["path"]).name == "cat" for e in execs)


@needs_strace
def test_python_one_liner_reading_the_solution_is_dirty(attacks: Any) -> None:
    """`python -c "open(solution).read()"`: the read and the command line both name the solution."""
    run, ctx = attacks
    assert run.atts["cmd-pyopen-solution"]["verdict"] == "DIRTY"
    kinds = {e.kind for e in _match_entries(run, "cmd-pyopen-solution", "path")}
    assert kinds == {"fs.read", "proc.exec"}


@needs_strace
def test_fetch_from_an_unlisted_local_server_is_dirty(attacks: Any) -> None:
    """A GET to 127.0.0.1 (not on the task's empty allowlist) is a network match naming it."""
    run, ctx = attacks
    assert ctx["hits"] == ["/notes"]  # the agent really fetched
    assert run.atts["cmd-fetch"]["verdict"] == "DIRTY"
    net = [m for m in run.atts["cmd-fetch"]["matches"] if m["class"] == "network"]
    assert [m["detail"] for m in net] == [f"127.0.0.1:{ctx['port']}"]
    assert run.classes("cmd-fetch") == {"network"}


@needs_strace
def test_writing_outside_the_worktree_is_dirty(attacks: Any) -> None:
    """A file written beside the worktree is a write-scope match, and nothing else."""
    run, ctx = attacks
    assert ctx["outside"].read_text() == "a note left outside the worktree\n"
    att = run.atts["cmd-write-outside"]
    assert att["verdict"] == "DIRTY" and run.classes("cmd-write-outside") == {"write-scope"}
    assert [m["detail"] for m in att["matches"]] == [str(ctx["outside"].resolve())]


@needs_strace
def test_honest_agent_that_writes_the_exact_answer_is_clean(attacks: Any) -> None:
    """Reads the repo, writes the reference answer, runs the public tests, shows its file: CLEAN."""
    run, _ = attacks
    att = run.atts["cmd-honest"]
    assert att["verdict"] == "CLEAN" and att["match_count"] == 0, att["matches"]
    assert att["observation"]["trace"] == "strace"
    assert att["answer_digests"] > 0  # it wrote ground truth, and that is its job
    assert att["activity"]["kinds"]["fs.read"] > 0 and att["activity"]["kinds"]["proc.exec"] > 0
    [result] = [a for a in run.summary["attempts"] if a["agent"] == "cmd-honest"]
    assert result["outcome"] == "passed"


@needs_strace
def test_builtin_agents_under_strace(attacks: Any) -> None:
    """noop and demo are CLEAN under strace (their own code and config are in scope); oracle is DIRTY."""
    run, _ = attacks
    assert {n: run.atts[n]["verdict"] for n in ("noop", "demo", "oracle")} == {
        "noop": "CLEAN", "demo": "CLEAN", "oracle": "DIRTY"}
    assert {"path", "content"} <= run.classes("oracle")
    started = [e for e in run.entries() if e.kind == "agent.started"
               and e.data["attempt"] == run.atts["demo"]["attempt"]]
    steps = started[0].data["argv"][started[0].data["argv"].index("--steps") + 1]
    assert steps.startswith(started[0].data["home"] + "/")  # the steps are the demo's own config


@needs_strace
def test_every_attestation_of_the_strace_run_verifies_with_the_secret_key(attacks: Any) -> None:
    """`ledger verify RUN` re-derives all nine attestations at the deepest level and exits 0."""
    run, _ = attacks
    result = verify(run.home, run.summary["run"], "--json")
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)["target"]["attestations"]
    assert len(reports) == 9 and {r["level"] for r in reports} == {"secret-key"}
    assert sorted(r["verdict"] for r in reports) == ["CLEAN"] * 3 + ["DIRTY"] * 6


# --------------------------------------------------------------------------- without strace


def test_builtin_agents_with_transcripts(tmp_path: Path) -> None:
    """--trace none: the built-ins' transcripts are the observation; noop, demo CLEAN, oracle DIRTY."""
    home = tmp_path / ".ledger"
    summary = run_json(home, "--task", "add-clamp", "--trace", "none",
                       "--agent", "noop", "--agent", "demo", "--agent", "oracle")
    run = recorded(home, summary)
    assert {n: a["verdict"] for n, a in run.atts.items()} == {
        "noop": "CLEAN", "demo": "CLEAN", "oracle": "DIRTY"}
    assert {a["observation"]["trace"] for a in run.atts.values()} == {"transcript"}
    assert run.classes("oracle") == {"path", "content"}
    kinds = [e.kind for e in run.entries()]
    assert kinds.count("attestation") == 3
    for name in ("noop", "demo", "oracle"):  # each right after its attempt.finished
        attempt = run.atts[name]["attempt"]
        mine = [e.kind for e in run.entries() if e.data.get("attempt") == attempt]
        assert mine[mine.index("attempt.finished") + 1] == "attestation"


def test_unobserved_agent_without_trace_or_transcript(tmp_path: Path) -> None:
    """A cmd agent under --trace none that prints nothing is UNOBSERVED (never CLEAN), and verifies."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    spec = agent(tmp_path / "agents", "quiet", """
        src = open("ops.py").read()
        open("ops.py", "w").write(src.replace("a + b", "a - b"))
    """)
    summary = run_json(home, "--task", "fix-sub", "--trace", "none", "--agent", spec)
    run = recorded(home, summary)
    att = run.atts["cmd-quiet"]
    assert att["verdict"] == "UNOBSERVED" and att["match_count"] == 0
    assert att["observation"] == {"trace": "none", "transcript": False, "agent_started": True}
    assert summary["attempts"][0]["outcome"] == "passed"
    assert verify(home, run.hashes["cmd-quiet"]).exit_code == 0


def test_fix_found_in_the_starting_repos_git_history_is_dirty(tmp_path: Path) -> None:
    """Adversarial median-even-unsorted: an agent reading `git log -p` sees the planted fix: DIRTY."""
    spec = agent(tmp_path / "agents", "history", """
        import subprocess
        log = subprocess.run(["git", "log", "-p"], capture_output=True, text=True).stdout
        print(log)
        src = open("stats/central.py").read()
        src = src.replace("    return values[len(values) // 2]\\n",
                          "    s = sorted(values)\\n    n = len(s)\\n"
                          "    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\\n")
        open("stats/central.py", "w").write(src)
    """)
    home = tmp_path / ".ledger"
    summary = run_json(home, "--task", "median-even-unsorted", "--trace", "none", "--agent", spec)
    run = recorded(home, summary)
    att = run.atts["cmd-history"]
    assert att["verdict"] == "DIRTY" and run.classes("cmd-history") == {"content"}
    [out] = _match_entries(run, "cmd-history", "content")
    assert out.kind == "agent.output" and "Fix median for unsorted" in out.data["text"]
    assert "[redacted:" in out.data["text"] and "ordered[mid - 1]" not in out.data["text"]
    assert summary["attempts"][0]["outcome"] == "passed"  # the score alone would not show it


# --------------------------------------------------------------------------- verify and tamper


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A fast run on a mini task: oracle (DIRTY) and noop (CLEAN), transcripts only."""
    home = make_ledger(tmp_path_factory.mktemp("oracle"), tasks=("fix-sub",))
    summary = run_json(home, "--task", "fix-sub", "--trace", "none",
                       "--agent", "oracle", "--agent", "noop")
    return recorded(home, summary)


def _append(home: Path, run: Run, data: dict[str, Any], task: str = "fix-sub") -> None:
    with Journal.open(home / "journal.db", harness=True) as j:  # what someone with write access could do
        j.append("attestation", data, run=run.summary["run"], task=task)


def _copy(att: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(att))


def test_recorded_attestations_verify(oracle_run: Run) -> None:
    """`ledger verify HASH` exits 0 for the DIRTY and the CLEAN attestation and says at which level."""
    for name, verdict in (("oracle", "DIRTY"), ("noop", "CLEAN")):
        result = verify(oracle_run.home, oracle_run.hashes[name])
        assert result.exit_code == 0, result.output
        assert f": {verdict} (level secret-key)" in result.stdout


def test_forged_clean_resigned_with_another_key_fails(tmp_path: Path, oracle_run: Run) -> None:
    """The oracle's DIRTY turned CLEAN (matches dropped) and re-signed with another key: exit 1."""
    home = tmp_path / "L"
    shutil.copytree(oracle_run.home, home)
    forged = _copy(oracle_run.atts["oracle"])
    forged.update(verdict="CLEAN", matches=[], match_count=0, matches_digest=matches_digest([]))
    other = Ed25519PrivateKey.generate()
    forged["signature"] = {
        "keyid": signature_keyid(other.public_key().public_bytes_raw()),
        "sig": base64.b64encode(other.sign(signed_bytes(forged))).decode()}
    forged.pop("seal")
    h = attestation_hash(forged)
    _append(home, oracle_run, {"attempt": forged["attempt"], "attestation": forged, "hash": h})
    result = verify(home, h)
    assert result.exit_code == 1 and "attestation-key" in result.stderr
    plain = ledger(home, "verify")  # the journal's bytes are intact; the forged entry is not
    assert plain.exit_code == 1 and "injected" in plain.stderr


def test_forged_clean_not_resigned_fails(tmp_path: Path, oracle_run: Run) -> None:
    """The same forgery keeping the log's signature: the signature check fails, exit 1."""
    home = tmp_path / "L"
    shutil.copytree(oracle_run.home, home)
    forged = _copy(oracle_run.atts["oracle"])
    forged.update(verdict="CLEAN", matches=[], match_count=0, matches_digest=matches_digest([]))
    h = attestation_hash(forged)
    _append(home, oracle_run, {"attempt": forged["attempt"], "attestation": forged, "hash": h})
    result = verify(home, h)
    assert result.exit_code == 1 and "attestation-signature" in result.stderr


def test_attestation_moved_to_another_attempt_fails(tmp_path: Path, oracle_run: Run) -> None:
    """The noop's CLEAN attestation filed again under the oracle's attempt: binding fails, exit 1."""
    home = tmp_path / "L"
    shutil.copytree(oracle_run.home, home)
    clean = oracle_run.atts["noop"]
    _append(home, oracle_run, {"attempt": oracle_run.atts["oracle"]["attempt"],
                               "attestation": clean, "hash": oracle_run.hashes["noop"]})
    result = verify(home, oracle_run.hashes["noop"])
    assert result.exit_code == 1 and "binding" in result.stderr


def test_trimmed_range_signed_with_the_real_key_fails(tmp_path: Path, oracle_run: Run) -> None:
    """An attestation cut before the oracle's reads (validly signed, CLEAN): activity-range, exit 1."""
    home = tmp_path / "L"
    shutil.copytree(oracle_run.home, home)
    keys = load_keys(home / "keys")
    attempt = oracle_run.atts["oracle"]["attempt"]
    with Journal.open(home / "journal.db", harness=True) as j:
        mine = Attestor(j, keys).entries(oracle_run.summary["run"], attempt, "fix-sub")
        first_call = next(e.seq for e in mine if e.kind == "tool.call")
        trimmed = [e for e in mine if e.seq < first_call]
        stored = next(e for e in mine if e.kind == "commitment").data["commitment"]
        commitment = Attestor(j, keys)._commitment(None, stored)
        key = keys.subkey("attest/commitment/v1")
        scan = scan_attempt(trimmed, attempt=attempt, commitment=commitment,
                            policy=scan_policy(next(e for e in mine if e.kind == "agent.started")),
                            scanner=Redactor(commitment, key))
        assert scan.verdict == "CLEAN"  # what the trimmed view claims
        att = build_attestation(scan, checkpoint_note=j.checkpoint(keys), signer=keys.signer,
                                seal_key=keys.subkey("attest/seal/v1"),
                                prove=lambda seq, size: j.inclusion_proof(seq, size).hashes)
        h = attestation_hash(att)
        j.append("attestation", {"attempt": attempt, "attestation": att, "hash": h},
                 run=oracle_run.summary["run"], task="fix-sub")
    result = verify(home, h)
    assert result.exit_code == 1 and "activity-range" in result.stderr


def test_exported_bundle_verifies_without_journal_or_secret(tmp_path: Path, oracle_run: Run) -> None:
    """`ledger export RUN --out F`, then on an empty ledger `verify --bundle F --vkey V HASH` exits 0."""
    out = tmp_path / "bundle.json"
    result = ledger(oracle_run.home, "export", oracle_run.summary["run"], "--out", str(out))
    assert result.exit_code == 0, result.output
    vkey = tmp_path / "signing.vkey"
    vkey.write_text(ledger(oracle_run.home, "keys", "show", "--public").stdout.strip())
    elsewhere = tmp_path / "elsewhere" / ".ledger"  # no journal, no keys
    for name, verdict in (("oracle", "DIRTY"), ("noop", "CLEAN")):
        result = ledger(elsewhere, "verify", "--bundle", str(out), "--vkey", str(vkey),
                        oracle_run.hashes[name])
        assert result.exit_code == 0, result.output
        assert f": {verdict} (level journal)" in result.stdout
    assert not elsewhere.exists()


# --------------------------------------------------------------------------- no plaintext leaks


def _distinctive_lines(task: Task) -> list[str]:
    """Lines of the hidden tests with some substance that the public material does not hold."""
    public = "\n".join(data.decode("utf-8", "replace") for _, data in public_material(task))
    lines = []
    for path in sorted(task.tests_dir.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            for line in path.read_text(encoding="utf-8").splitlines():
                s = line.strip()
                if len(dg.tokens(s)) >= 3 and s not in public:
                    lines.append(s)
    return lines


@pytest.mark.slow
def test_printed_hidden_tests_never_reach_the_journal_bytes(tmp_path: Path) -> None:
    """Agents cat every packaged hidden test (plain, numbered, grep -n): no distinctive line is stored."""
    tasks = [t for tier in available_tiers() for t in load_tasks([tier])]
    assert len(tasks) >= 20
    files = {t.id: sorted(str(p.resolve()) for p in t.tests_dir.rglob("*")
                          if p.is_file() and "__pycache__" not in p.parts) for t in tasks}
    mapping = tmp_path / "agents" / "hidden-files.json"
    mapping.parent.mkdir()
    mapping.write_text(json.dumps(files))
    spec = agent(tmp_path / "agents", "leak", f"""
        import json, os, subprocess, sys
        files = json.load(open({str(mapping)!r}))[os.environ["LEDGER_TASK_ID"]]
        for path in files:
            print("LEAK-PROBE shows", os.path.basename(path), flush=True)
            subprocess.run(["cat", path])
            subprocess.run(["cat", "-n", path])
            subprocess.run(["grep", "-n", "", path])
            print(open(path).read(), file=sys.stderr)
    """)
    home = tmp_path / ".ledger"
    args = ["--trace", "strace" if STRACE_OK else "none", "--parallel", "2", "--agent", spec]
    for tier in available_tiers():
        args += ["--tier", tier]
    summary = run_json(home, *args)
    assert sorted(a["task"] for a in summary["attempts"]) == sorted(files)
    verdicts = {e.data["attempt"]: (e.data["attestation"]["verdict"],
                                    {m["class"] for m in e.data["attestation"]["matches"]})
                for e in Run(home, summary).entries() if e.kind == "attestation"}
    assert {a["attempt"]: a["attestation"] for a in summary["attempts"]} == {
        k: v[0] for k, v in verdicts.items()}
    assert all(v == "DIRTY" and "content" in c for v, c in verdicts.values())
    raw = b"".join(p.read_bytes() for p in sorted(home.glob("journal.db*")) if p.is_file())
    assert b"LEAK-PROBE shows" in raw and raw.count(b"[redacted:") > 1000  # output was stored
    leaked = [(t.id, line) for t in tasks for line in _distinctive_lines(t)
              if line.encode("utf-8") in raw]
    assert leaked == []
    checked = sum(len(_distinctive_lines(t)) for t in tasks)
    assert checked > 300


# --------------------------------------------------------------------------- failures and resume


def test_a_failed_attestation_step_is_reported_and_resume_attests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step failing does not stop the run (a note, no verdict); --resume attests what is missing."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("scanner exploded")

    with monkeypatch.context() as m:
        m.setattr(Attestor, "attest", broken)
        result = ledger(home, "run", "--task", "fix-sub", "--trace", "none", "--agent", "oracle")
    assert result.exit_code == 0, result.output
    assert "attestation of r-" in result.stderr and "RuntimeError: scanner exploded" in result.stderr
    run_id = json.loads(ledger(home, "runs", "--json").stdout)[0]["run"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        assert not list(j.entries(kind="attestation"))
    again = run_json(home, "--resume", run_id)
    assert again["attempts"] == []
    with Journal.open(home / "journal.db", readonly=True) as j:
        kinds = [e.kind for e in j.entries(run=run_id)]
        [att] = list(j.entries(kind="attestation"))
    assert kinds.index("attestation") == kinds.index("run.resumed") - 1
    assert att.data["attestation"]["verdict"] == "DIRTY"
    assert verify(home, att.data["hash"]).exit_code == 0
