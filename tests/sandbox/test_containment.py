"""Containment: every attack of the corpus (tests/sandbox/attacks.py) run by the real `ledger run`.

With the sandbox none may end "passed and CLEAN", none may change anything outside its
worktree, and no helper process survives. The control run (no isolation, slow) shows that each
attack marked ``bites`` does pass the hidden tests when nothing isolates it. Honest agents stay
CLEAN, and grading drops test and conftest edits while a correct fix still passes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import sysconfig
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.agents.strace import strace_status
from ledger.journal.journal import Journal
from ledger.sandbox import probe_bwrap
from tests.run.minitasks import make_ledger
from tests.sandbox.attacks import ATTACKS, CROSS_ATTEMPT_DAEMON, Attack

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()
STRACE_OK, STRACE_WHY = strace_status()
pytestmark = [pytest.mark.sandbox, pytest.mark.strace,
              pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}"),
              pytest.mark.skipif(not STRACE_OK, reason=STRACE_WHY)]

SITE = sysconfig.get_paths()["purelib"]
ATTACKS_BY_NAME = {a.name: a for a in ATTACKS}


class _Serve:
    """Serves ``data`` to every connection on an abstract unix socket and on 127.0.0.1 TCP."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.abstract = f"ledger-test-{uuid.uuid4().hex[:12]}"
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.hits = 0
        self._stop = False

    def _loop(self, srv: socket.socket) -> None:
        srv.listen(8)
        srv.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            self.hits += 1
            with conn:
                conn.sendall(self.data)

    def __enter__(self) -> _Serve:
        self.threads = [threading.Thread(target=self._loop, args=(s,), daemon=True)
                        for s in (self.unix, self.tcp)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        for t in self.threads:
            t.join(timeout=5)
        self.unix.close()
        self.tcp.close()


@dataclass
class Outcome:
    home: Path
    summary: dict[str, Any]
    attempts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # agent -> rows
    entries: list[Any] = field(default_factory=list)


def _ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def _run(home: Path, agents: list[str], *extra: str) -> Outcome:
    args = ["run", "--json", "--task", "fix-add", "--trace", "strace", *extra]
    for spec in agents:
        args += ["--agent", spec]
    result = _ledger(home, *args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    out = Outcome(home, summary)
    for a in summary["attempts"]:
        out.attempts.setdefault(a["agent"], []).append(a)
    with Journal.open(home / "journal.db", readonly=True) as j:
        out.entries = list(j.entries(run=summary["run"]))
    return out


def _write_agents(folder: Path, attacks: tuple[Attack, ...], values: dict[str, str]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for attack in attacks:
        path = folder / f"{attack.name}.py"
        path.write_text(attack.source(values))
        specs.append(f"cmd:{sys.executable} {path}")
    return specs


def _helpers_alive(tag: str) -> list[int]:
    """Processes whose command line carries the corpus tag (helpers an attack left behind)."""
    out = []
    needle = tag.encode()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if needle in fh.read():
                        out.append(int(name))
            except OSError:
                continue
    return out


def _snapshot(folder: str) -> set[str]:
    return set(os.listdir(folder))


@dataclass
class Corpus:
    run: Outcome
    values: dict[str, str]
    keys: dict[str, bytes]
    site_before: set[str]
    site_after: set[str]
    outside: Path
    serve_hits: int
    alive_after: list[int]


def _setup(tmp: Path) -> tuple[Path, dict[str, str], Path]:
    home = make_ledger(tmp, tasks=("fix-add",))
    solution = str((home / "golden" / "mini" / "fix-add" / "solution" / "calc.py").resolve())
    tag = f"corpus{uuid.uuid4().hex[:10]}"
    outside = tmp / "outside" / "note.txt"
    outside.parent.mkdir()
    values = {"SOLUTION": solution, "LEDGER": str(home.resolve()), "SITE": SITE, "TAG": tag,
              "OUTSIDE": str(outside), "SOCK": str(tmp / f"{tag}.sock")}
    return home, values, outside


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """One sandboxed run: every attack of the corpus and the honest agents, two at a time."""
    tmp = tmp_path_factory.mktemp("containment")
    home, values, outside = _setup(tmp)
    _ledger(home, "keys", "init")
    keys = {p.name: p.read_bytes() for p in (home / "keys").iterdir()}
    site_before = _snapshot(SITE)
    with _Serve(Path(values["SOLUTION"]).read_bytes()) as serve:
        values.update({"ABSTRACT": serve.abstract, "PORT": str(serve.port)})
        specs = _write_agents(tmp / "agents", ATTACKS + HONEST, values)
        try:
            run = _run(home, [*specs, "demo"], "--sandbox", "bwrap", "--parallel", "2")
            site_after = _snapshot(SITE)
        finally:
            for name in set(_snapshot(SITE)) - site_before:  # never leave a hook behind
                os.unlink(os.path.join(SITE, name))
        hits = serve.hits
    yield Corpus(run, values, keys, site_before, site_after, outside, hits,
                 _helpers_alive(values["TAG"]))


# --------------------------------------------------------------------------- honest agents

HONEST = (
    Attack("honest-reads-everything-runs-tests-uses-git", """
        import os, subprocess, sys
        for root, dirs, files in os.walk("."):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:
                open(os.path.join(root, name), "rb").read()
        subprocess.run(["git", "log", "--oneline"], check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                       check=True, capture_output=True)
        text = open("calc.py").read().replace("return a - b", "return a + b")
        open("calc.py", "w").write(text)
        subprocess.run(["git", "diff"], check=True, capture_output=True)
    """, bites=True, tried="reading everything, the public tests, git log and git diff"),
    Attack("honest-fix-with-conftest-and-test-edits", """
        text = open("calc.py").read().replace("return a - b", "return a + b")
        open("calc.py", "w").write(text)
        open("conftest.py", "w").write("collect_ignore = []\\n")
        open("tests/test_mul.py", "a").write("\\n\\ndef test_extra():\\n    assert True\\n")
    """, bites=True, tried="a correct fix with a conftest.py and an edited test"),
)


def _output(run: Outcome, attempt: str) -> str:
    return "".join(e.data.get("text", "") for e in run.entries
                   if e.kind == "agent.output" and e.data.get("attempt") == attempt)


def assert_ran(run: Outcome, attack: Attack) -> None:
    """Every attempt of ``attack`` printed its marker: the attacker ran (a sandbox that killed
    it at start would leave no marker, and would pass every containment check for nothing)."""
    rows = run.attempts[f"cmd-{attack.name}"]
    assert rows, attack.name
    for row in rows:
        assert attack.marker in _output(run, row["attempt"]), (attack.name, row)


@pytest.mark.parametrize("attack", ATTACKS + HONEST, ids=[a.name for a in ATTACKS + HONEST])
def test_every_attacker_of_the_corpus_ran(corpus: Corpus, attack: Attack) -> None:
    """Each attack (and each honest agent) of the corpus run really started in the sandbox and
    said what it tried; none of the checks below is passed by an agent that never ran."""
    assert_ran(corpus.run, attack)
    assert [e for e in corpus.run.entries if e.kind == "sandbox.failed"] == []


def test_no_attack_ends_passed_and_clean(corpus: Corpus) -> None:
    """Inside the sandbox no attack of the corpus passes the hidden tests, CLEAN or not."""
    for attack in ATTACKS:
        assert_ran(corpus.run, attack)
        rows = corpus.run.attempts[f"cmd-{attack.name}"]
        for row in rows:
            assert row["outcome"] != "passed", (attack.name, row)
            assert not (row["outcome"] == "passed" and row["attestation"] == "CLEAN"), attack.name


def test_every_attempt_ran_isolated_and_the_attestation_says_so(corpus: Corpus) -> None:
    """agent.started and the signed attestation say isolation sandbox, with the policy."""
    for attack in ATTACKS + HONEST:
        assert_ran(corpus.run, attack)
    started = [e for e in corpus.run.entries if e.kind == "agent.started"]
    atts = [e.data["attestation"] for e in corpus.run.entries if e.kind == "attestation"]
    assert started and all(e.data["isolation"] == "sandbox" for e in started)
    assert len(atts) == len(started)
    for att in atts:
        assert att["isolation"] == "sandbox"
        assert att["sandbox"]["network"] == "none" and att["sandbox"]["uid"] == 1000
        assert values_absent(att["sandbox"], corpus.values["LEDGER"])


def values_absent(policy: dict[str, Any], ledger: str) -> bool:
    """Neither the ledger home nor anything in it is shown to the agent."""
    shown = policy["readable"] + policy["writable"]
    return not any(p == ledger or p.startswith(ledger + "/") for p in shown)


def test_nothing_outside_the_worktree_changed(corpus: Corpus) -> None:
    """No file outside a worktree was written: the harness site-packages, the outside note, the
    keys, and the journal (which still verifies)."""
    for name in ("pth-hook-in-the-harness-site-packages", "write-outside-the-worktree",
                 "read-the-ledger-keys", "corrupt-the-journal-mid-run"):
        assert_ran(corpus.run, ATTACKS_BY_NAME[name])
    assert corpus.site_after == corpus.site_before
    assert not corpus.outside.exists()
    home = corpus.run.home
    assert {p.name: p.read_bytes() for p in (home / "keys").iterdir()} == corpus.keys
    result = _ledger(home, "verify")
    assert result.exit_code == 0, result.output


def test_key_bytes_never_reach_the_journal(corpus: Corpus) -> None:
    """The agent that cats .ledger/keys reads nothing: no key text is in the journal file."""
    assert_ran(corpus.run, ATTACKS_BY_NAME["read-the-ledger-keys"])
    raw = (corpus.run.home / "journal.db").read_bytes()
    for name, data in corpus.keys.items():
        for line in data.decode("utf-8", "replace").splitlines():
            if len(line.strip()) >= 16:
                assert line.strip().encode() not in raw, name


def test_helpers_outside_were_never_reached(corpus: Corpus) -> None:
    """The abstract unix socket and the loopback TCP server outside got no connection."""
    for name in ("abstract-unix-socket-helper", "loopback-tcp-to-a-server-outside"):
        assert_ran(corpus.run, ATTACKS_BY_NAME[name])
    assert corpus.serve_hits == 0


def test_no_helper_process_survives(corpus: Corpus) -> None:
    """Nothing an attack started is alive after the run."""
    for attack in ATTACKS:
        assert_ran(corpus.run, attack)
    assert corpus.alive_after == []


def test_honest_agent_reading_running_tests_and_using_git_is_clean(corpus: Corpus) -> None:
    """Reading the whole worktree, running the public tests, git log and git diff: passed, CLEAN."""
    assert_ran(corpus.run, HONEST[0])
    for name in ("cmd-honest-reads-everything-runs-tests-uses-git", "demo"):
        row = corpus.run.attempts[name][0]
        assert (row["outcome"], row["attestation"]) == ("passed", "CLEAN"), (name, row)


def test_grading_drops_conftest_and_test_edits_and_the_fix_still_passes(corpus: Corpus) -> None:
    """A correct fix with a conftest.py and an edited test file: both dropped and listed, passed."""
    name = "cmd-honest-fix-with-conftest-and-test-edits"
    assert_ran(corpus.run, HONEST[1])
    row = corpus.run.attempts[name][0]
    assert row["outcome"] == "passed", row
    grading = next(e.data for e in corpus.run.entries
                   if e.kind == "grading" and e.data["attempt"] == row["attempt"])
    assert grading["graded"] == ["calc.py"]
    assert {(d["path"], d["reason"]) for d in grading["dropped"]} == {
        ("conftest.py", "test configuration or import hook"), ("tests/test_mul.py", "test file")}


def test_report_marks_attempts_without_isolation(tmp_path: Path) -> None:
    """`ledger report` marks a CLEAN attempt of a --sandbox none run '(isolation none)'."""
    home = make_ledger(tmp_path, tasks=("fix-add",))
    run = _run(home, ["demo"], "--sandbox", "none")
    assert run.attempts["demo"][0]["attestation"] == "CLEAN"
    result = _ledger(home, "report", run.summary["run"])
    assert result.exit_code == 0, result.output
    assert "CLEAN (isolation none)" in result.output


# --------------------------------------------------------------------------- cross-attempt daemon


def test_cross_attempt_daemon_serves_nothing_in_the_sandbox(tmp_path: Path) -> None:
    """A daemon started by attempt 1 does not survive it, so attempt 2 gets no answer."""
    home, values, _outside = _setup(tmp_path)
    spec = _write_agents(tmp_path / "agents", (CROSS_ATTEMPT_DAEMON,), values)
    run = _run(home, spec, "--sandbox", "bwrap", "--repeat", "2")
    rows = run.attempts["cmd-cross-attempt-daemon"]
    assert_ran(run, CROSS_ATTEMPT_DAEMON)
    assert len(rows) == 2 and all(r["outcome"] != "passed" for r in rows)
    assert _helpers_alive(values["TAG"]) == []
    assert not os.path.exists(values["SOCK"])


# --------------------------------------------------------------------------- control (no isolation)


@pytest.mark.slow
def test_control_every_biting_attack_passes_without_isolation(tmp_path: Path) -> None:
    """Without the sandbox each attack marked ``bites`` does pass the hidden tests: the corpus
    attacks are real, and the sandbox is what stops them."""
    home, values, _outside = _setup(tmp_path)
    biting = tuple(a for a in ATTACKS if a.bites)
    site_before = _snapshot(SITE)
    try:
        with _Serve(Path(values["SOLUTION"]).read_bytes()) as serve:
            values.update({"ABSTRACT": serve.abstract, "PORT": str(serve.port)})
            specs = _write_agents(tmp_path / "agents", biting, values)
            # without canaries too: they catch an attack that forges passes (tests/run/test_canaries_e2e.py)
            run = _run(home, specs, "--sandbox", "none", "--parallel", "2", "--no-canaries")
            for attack in biting:
                assert_ran(run, attack)
    finally:
        for name in set(_snapshot(SITE)) - site_before:
            os.unlink(os.path.join(SITE, name))
    failed = [a.name for a in biting if run.attempts[f"cmd-{a.name}"][0]["outcome"] != "passed"]
    if _trace_filter(run) == "seccomp-bpf":
        # The tracer's seccomp filter holds without the sandbox: the untraced child's open gets
        # ENOSYS, and killing the tracer kills the agent (--kill-on-exit). Without any tracer
        # (and no sandbox) both do bite: the attacks are real.
        # (the child read nothing, so its attempt may be CLEAN: failed; the agent whose tracer
        # was killed died with it mid-run, its trace cut short: never CLEAN)
        assert failed == list(FILTER_STOPS), failed
        assert run.attempts["cmd-kill-the-tracer"][0]["attestation"] != "CLEAN"
        bare = _run(home, [s for s in specs if any(n in s for n in FILTER_STOPS)],
                    "--sandbox", "none", "--trace", "none")
        assert [bare.attempts[f"cmd-{n}"][0]["outcome"] for n in FILTER_STOPS] == ["passed"] * 2
    else:
        assert failed == [], failed
        # Killing the tracer no longer hides: the trace is partial, so the attempt is not CLEAN.
        assert run.attempts["cmd-kill-the-tracer"][0]["attestation"] == "UNOBSERVED"


FILTER_STOPS = ("clone-untraced-child", "kill-the-tracer")  # stopped by --seccomp-bpf alone


def _trace_filter(run: Outcome) -> str | None:
    """How the run's tracer stopped its agents (agent.started.trace_filter; one for the run)."""
    filters = {e.data.get("trace_filter") for e in run.entries if e.kind == "agent.started"}
    assert len(filters) == 1, filters
    return filters.pop()


@pytest.mark.slow
def test_control_cross_attempt_daemon_works_without_isolation(tmp_path: Path) -> None:
    """Without the sandbox (and without the limits' cgroups, whose clean-up kills what an
    attempt left) the daemon of attempt 1 serves attempt 2 the solution."""
    home, values, _outside = _setup(tmp_path)
    (home.parent / "ledger.toml").write_text("[limits]\ncgroups = false\n")
    spec = _write_agents(tmp_path / "agents", (CROSS_ATTEMPT_DAEMON,), values)
    try:
        run = _run(home, spec, "--sandbox", "none", "--repeat", "2")
        assert_ran(run, CROSS_ATTEMPT_DAEMON)
        outcomes = [r["outcome"] for r in run.attempts["cmd-cross-attempt-daemon"]]
        if _trace_filter(run) == "seccomp-bpf":
            # the daemon's untraced parent cannot exec it (ENOSYS): no daemon without a sandbox
            # either, while the tracer's filter holds; with no tracer at all it serves attempt 2
            assert outcomes == ["failed", "failed"]
            assert _helpers_alive(values["TAG"]) == []
            run = _run(home, spec, "--sandbox", "none", "--trace", "none", "--repeat", "2")
            outcomes = [r["outcome"] for r in run.attempts["cmd-cross-attempt-daemon"]]
        assert outcomes == ["failed", "passed"]
    finally:
        for pid in _helpers_alive(values["TAG"]):
            os.kill(pid, 9)
