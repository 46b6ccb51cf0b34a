"""`ledger run` / `ledger runs` end to end on small operator tasks: journal, outcomes, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal import merkle
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from tests.doc_tables import documented_fields
from tests.run.minitasks import make_ledger

ROOT = Path(__file__).resolve().parents[2]
VOCAB = ROOT / "docs" / "VOCABULARY.md"


def ledger(args: list[str], home: Path) -> Any:
    result = CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)
    return result


def run_json(home: Path, *args: str) -> dict[str, Any]:
    result = ledger(["run", "--trace", "none", "--json", *args], home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def entries(home: Path, run: str | None = None) -> list[Any]:
    with Journal.open(home / "journal.db", harness=True) as j:
        return list(j.entries(run=run))


def verify(home: Path) -> None:
    with Journal.open(home / "journal.db", harness=True) as j:
        j.verify(verifier=load_keys(home / "keys").verifier)


def outcomes(summary: dict[str, Any]) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    return {(a["task"], a["agent"], a["repeat"]): (a["outcome"], a["hidden_passed"],
                                                  tuple(sorted(a["hidden_counts"].items())),
                                                  a["regression_passed"], tuple(a["signals"]))
            for a in summary["attempts"]}


def _agent_script(tmp: Path, name: str, body: str) -> str:
    path = tmp / name
    path.write_text(textwrap.dedent(body))
    return f"cmd:{sys.executable} {path}"


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    return make_ledger(tmp_path, tasks=("fix-add", "fix-sub"))


# --------------------------------------------------------------------------- vocabulary


def _vocabulary() -> dict[str, set[str]]:
    """kind -> top-level data fields, parsed from the tables of docs/VOCABULARY.md."""
    out = documented_fields(VOCAB)
    out["test.baseline"] = (out["test.result"] - {"test.result"}) | {"attempt"}
    for kind, fields in out.items():  # the capture time of worker-captured entries (conventions)
        if "attempt" in fields and kind not in ("attempt.started", "attestation"):
            fields.add("at")
    return out


# Fields of diff ``files`` items: VOCABULARY.md lists path/status/added/removed; ``content`` (the
# final text of the file, redacted and bounded, for replay:RUN) is the documented addition.
DIFF_FILE_FIELDS = {"path", "status", "added", "removed", "content"}


def check_vocabulary(items: list[Any]) -> None:
    vocab = _vocabulary()
    for e in items:
        assert e.kind in vocab, f"kind {e.kind} is not in VOCABULARY.md"
        extra = set(e.data) - vocab[e.kind]
        assert not extra, f"{e.kind} has undocumented fields {extra}"
        if e.kind.startswith(("attempt.", "agent.", "fs.", "proc.", "net.", "tool.", "test.", "signal.")) \
                or e.kind in ("commitment", "diff", "judge.verdict"):
            assert isinstance(e.data.get("attempt"), str) and e.task is not None
        if e.kind == "diff":
            for f in e.data["files"]:
                assert set(f) <= DIFF_FILE_FIELDS
        if e.kind == "run.started":
            assert set(e.data["config"]) == {"tiers", "task_ids", "agents", "repeat", "parallel",
                                             "timeout_s", "trace", "executor", "sandbox"}
            for t in e.data["tasks"]:
                assert set(t) == {"id", "title", "tier", "hash", "max_duration_s", "max_cost_usd",
                                  "max_tokens", "owned_files", "expected_files_modified"}
            for a in e.data["agents"]:
                assert set(a) == {"name", "spec", "kind", "version"}
        if e.kind == "attempt.started":
            assert set(e.data) == vocab["attempt.started"]
            assert e.data["archive"] is None  # the local executor runs the task folder in place
        if e.kind == "agent.finished":  # every field; a partial trace's reason only when known
            assert vocab["agent.finished"] - set(e.data) <= {"trace_partial_reason"}
            assert "trace_partial_reason" not in e.data or e.data["trace_partial"] is True


# --------------------------------------------------------------------------- tests


def test_run_oracle_and_noop_records_everything_and_verifies(home: Path) -> None:
    """Two agents x two tasks: oracle passes, noop fails; entries follow VOCABULARY.md; the journal verifies."""
    summary = run_json(home, "--tier", "mini", "--agent", "oracle", "--agent", "noop")
    assert summary["status"] == "finished"
    got = {k: v[0] for k, v in outcomes(summary).items()}
    assert got == {("fix-add", "oracle", 1): "passed", ("fix-add", "noop", 1): "failed",
                   ("fix-sub", "oracle", 1): "passed", ("fix-sub", "noop", 1): "failed"}
    run_id = summary["run"]
    assert re.fullmatch(r"r-\d{8}T\d{6}Z-[0-9a-f]{6}", run_id)
    items = entries(home, run_id)
    check_vocabulary(items)
    kinds = [e.kind for e in items]
    assert kinds[0] == "run.started" and kinds[-1] == "view.recorded"
    assert kinds[-3] == "run.finished" and kinds.count("attempt.finished") == 4
    assert kinds[-2:] == ["view.recorded", "view.recorded"]  # the golden and statistics views
    assert kinds.count("judge.verdict") == 4
    finished = next(e for e in items if e.kind == "run.finished")
    before = [e for e in items if e.seq < finished.seq]
    digest = merkle.RunDigest()
    for e in before:
        digest.add(e.leaf_hash)
    assert finished.data == {"status": "finished", "attempts": 4, "completed": 4,
                             "entries": {"count": len(before), "digest": digest.as_data()["digest"]}}
    started = items[0].data
    assert started["config"]["agents"] == ["oracle", "noop"]
    assert [t["id"] for t in started["tasks"]] == ["fix-add", "fix-sub"]
    assert (home / "checkpoints" / f"{len(entries(home))}.note").exists()
    assert summary["checkpoint"].startswith(load_keys(home / "keys").key_name)
    verify(home)
    runs = json.loads(ledger(["runs", "--json"], home).stdout)
    assert runs[0]["run"] == run_id and runs[0]["state"] == "finished"
    assert runs[0]["tiers"] == ["mini"] and runs[0]["agents"] == ["oracle", "noop"]


def test_default_run_creates_keys_uses_demo_and_prints_a_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ledger run` with no flags: keys created, smoke tier, demo agent announced, summary with next steps."""
    from ledger.agents import detect_cli_agents

    if detect_cli_agents():
        pytest.skip("an agent CLI is on PATH here; the default would use it")
    home = make_ledger(tmp_path, "smoke", tasks=("fix-sub",))
    assert not (home / "keys").exists()
    result = CliRunner().invoke(cli, ["--ledger", str(home), "run"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "no agent CLI on PATH; using the built-in demo agent" in out
    assert re.search(r"\[1/1\] fix-sub demo #1: passed", out)
    assert re.search(r"run r-\S+: finished", out)
    assert "ledger report r-" in out and "ledger verify r-" in out
    assert "checkpoint (tree size" in out and "\u2014 " in out  # the signed note's signature line
    assert (home / "keys" / "master.key").exists()
    assert os.stat(home / "keys" / "master.key").st_mode & 0o077 == 0
    verify(home)


def test_missing_agent_program_is_an_error_before_anything_runs(home: Path) -> None:
    """An agent that cannot run: exit 3 when none can, exit 2 when others could; nothing journaled."""
    result = ledger(["run", "--tier", "mini", "--agent", "cmd:/nonexistent/agent-x"], home)
    assert result.exit_code == 3
    assert "no agent can run" in result.stderr and "/nonexistent/agent-x" in result.stderr
    result = ledger(["run", "--tier", "mini", "--agent", "noop", "--agent", "cmd:/nonexistent/agent-x"], home)
    assert result.exit_code == 2 and "agent cannot run" in result.stderr
    assert not (home / "journal.db").exists() or entries(home) == []


def test_unknown_task_and_tier_are_usage_errors(home: Path) -> None:
    """Selecting what does not exist exits 2 with a clear message."""
    result = ledger(["run", "--task", "no-such-task", "--agent", "noop"], home)
    assert result.exit_code == 2 and "no-such-task" in result.stderr
    result = ledger(["run", "--tier", "nope", "--agent", "noop"], home)
    assert result.exit_code == 2 and "unknown tier" in result.stderr


def test_parallel_two_gives_the_same_outcomes_as_serial(tmp_path: Path) -> None:
    """--parallel 2 and --parallel 1 produce the same per-attempt outcomes."""
    home = make_ledger(tmp_path, tasks=("fix-add", "fix-sub"))
    args = ["--tier", "mini", "--agent", "oracle", "--agent", "demo", "--agent", "noop"]
    serial = run_json(home, *args, "--parallel", "1")
    par = run_json(home, *args, "--parallel", "2")
    assert outcomes(serial) == outcomes(par)
    assert len(outcomes(par)) == 6
    assert {v[0] for v in outcomes(par).values()} == {"passed", "failed"}
    verify(home)


def test_repeat_makes_a_matrix_and_timeout_overrides_budgets(home: Path) -> None:
    """--repeat 2 runs each slot twice; --timeout is recorded and used as every attempt's budget."""
    summary = run_json(home, "--task", "fix-sub", "--agent", "noop", "--repeat", "2", "--timeout", "7")
    assert sorted((a["task"], a["repeat"]) for a in summary["attempts"]) == [("fix-sub", 1), ("fix-sub", 2)]
    started = entries(home, summary["run"])[0]
    assert started.data["config"]["timeout_s"] == 7.0 and started.data["config"]["repeat"] == 2


def test_no_save_leaves_no_journal(home: Path) -> None:
    """--no-save runs against a temporary journal and says so."""
    result = ledger(["run", "--task", "fix-sub", "--agent", "noop", "--trace", "none", "--no-save"], home)
    assert result.exit_code == 0, result.output
    assert "discarded" in result.output
    assert not (home / "journal.db").exists()


def test_replay_reenacts_a_recorded_run(home: Path) -> None:
    """replay:RUN re-applies the file edits the oracle made, and passes like it did."""
    first = run_json(home, "--tier", "mini", "--agent", "oracle")
    again = run_json(home, "--tier", "mini", "--agent", f"replay:{first['run'][:14]}")
    assert {a["task"]: a["outcome"] for a in again["attempts"]} == {"fix-add": "passed", "fix-sub": "passed"}
    assert again["attempts"][0]["agent"].startswith("replay-")


def test_named_agent_from_ledger_toml(home: Path, tmp_path: Path) -> None:
    """[agents.NAME] in ledger.toml makes --agent NAME run that command."""
    script = tmp_path / "fixer.py"
    script.write_text("open('ops.py', 'w').write('def sub(a, b):\\n    return a - b\\n')\n")
    (home.parent / "ledger.toml").write_text(
        f'[agents.fixer]\ncommand = ["{sys.executable}", "{script}"]\n[run]\ntrace = "none"\n')
    summary = run_json(home, "--task", "fix-sub", "--agent", "fixer")
    assert [(a["agent"], a["outcome"]) for a in summary["attempts"]] == [("fixer", "passed")]


def test_runs_lists_newest_first_and_resolves_prefixes(home: Path) -> None:
    """`ledger runs` shows runs newest first; an empty ledger says how to start."""
    assert "no runs yet" in ledger(["runs"], home).output
    a = run_json(home, "--task", "fix-sub", "--agent", "noop")["run"]
    b = run_json(home, "--task", "fix-sub", "--agent", "noop")["run"]
    listed = [r["run"] for r in json.loads(ledger(["runs", "--json"], home).stdout)]
    assert listed == [b, a]
    text = ledger(["runs"], home).output
    assert text.splitlines()[0].split() == ["run", "started", "tiers", "agents", "state"]


# --------------------------------------------------------------------------- interruption


HANG_AGENT = """
    import os, sys, time
    flag = os.path.join({flags!r}, os.environ["LEDGER_TASK_ID"])
    if os.path.exists(flag + ".hang"):
        open(flag + ".started", "w").close()
        time.sleep(120)
"""


def _start_run(home: Path, spec: str) -> subprocess.Popen[str]:
    """The run as its own process group, like a command started from a terminal."""
    return subprocess.Popen(
        [sys.executable, "-c", "from cli.main import main; main()", "--ledger", str(home), "run",
         "--tier", "mini", "--agent", spec, "--trace", "none", "--parallel", "1",
         "--sandbox", "none"],  # the agent signals the test through a folder outside its worktree
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _interrupted_run(tmp_path: Path, how: int) -> tuple[Path, str, Path, str]:
    home = make_ledger(tmp_path, tasks=("fix-add", "fix-mul", "fix-sub"))
    flags = tmp_path / "flags"
    flags.mkdir()
    (flags / "fix-mul.hang").touch()
    spec = _agent_script(tmp_path, "hang.py", HANG_AGENT.format(flags=str(flags)))
    proc = _start_run(home, spec)
    _wait_for(flags / "fix-mul.started")
    time.sleep(0.3)
    if how == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
    else:
        os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if how == signal.SIGINT else -9)
    verify(home)
    run_id = entries(home)[0].run
    (flags / "fix-mul.hang").unlink()
    (tmp_path / "run.out").write_text(out + err)
    return home, run_id, flags, spec


def _resume_and_check(home: Path, run_id: str) -> None:
    before = entries(home, run_id)
    add_tries = [e for e in before if e.kind == "attempt.started" and e.task == "fix-add"]
    assert len(add_tries) == 1
    summary = run_json(home, "--resume", run_id[:12])
    assert summary["resumed"] is True and summary["status"] == "finished"
    assert sorted((a["task"], a["try"]) for a in summary["attempts"]) == [("fix-mul", 2), ("fix-sub", 1)]
    items = entries(home, run_id)
    resumed = [e for e in items if e.kind == "run.resumed"]
    assert len(resumed) == 1
    assert resumed[0].data["remaining"] == [f"{run_id}/fix-mul/cmd-hang/1/2", f"{run_id}/fix-sub/cmd-hang/1/1"]
    assert [e for e in items if e.kind == "attempt.started" and e.task == "fix-add"] == add_tries
    statuses = {e.data["attempt"]: e.data["status"] for e in items if e.kind == "attempt.finished"}
    assert statuses[f"{run_id}/fix-mul/cmd-hang/1/1"] == "interrupted"
    assert statuses[f"{run_id}/fix-mul/cmd-hang/1/2"] == "completed"
    check_vocabulary(items)
    verify(home)
    runs = json.loads(ledger(["runs", "--json"], home).stdout)
    assert runs[0]["state"] == "finished"


@pytest.mark.slow
def test_ctrl_c_leaves_a_verifying_journal_and_resume_runs_only_unfinished(tmp_path: Path) -> None:
    """Ctrl-C mid-run: running attempt marked interrupted, run.finished interrupted; --resume finishes the rest."""
    home, run_id, _flags, _spec = _interrupted_run(tmp_path, signal.SIGINT)
    items = entries(home, run_id)
    fin = [e for e in items if e.kind == "attempt.finished"]
    assert [(e.task, e.data["status"]) for e in fin] == [("fix-add", "completed"), ("fix-mul", "interrupted")]
    assert next(e for e in items if e.kind == "run.finished").data["status"] == "interrupted"
    assert json.loads(ledger(["runs", "--json"], home).stdout)[0]["state"] == "interrupted"
    printed = (tmp_path / "run.out").read_text()
    assert f"ledger run --resume {run_id}" in printed  # what to type next
    row = next(line for line in printed.splitlines() if line.startswith("fix-mul "))
    assert "interrupted" in row and "CLEAN" not in row  # never a clean verdict for it
    _resume_and_check(home, run_id)


@pytest.mark.slow
def test_killed_coordinator_leaves_a_verifying_journal_and_resume_finishes(tmp_path: Path) -> None:
    """SIGKILL of the coordinator: the journal verifies; resume marks the lost try interrupted and reruns it."""
    home, run_id, flags, _spec = _interrupted_run(tmp_path, signal.SIGKILL)
    items = entries(home, run_id)
    assert not any(e.kind == "run.finished" for e in items)
    assert [e.data["status"] for e in items if e.kind == "attempt.finished"] == ["completed"]
    _resume_and_check(home, run_id)


def test_resume_refuses_a_changed_task(home: Path) -> None:
    """A task edited after the run started cannot be resumed into the same run."""
    summary = run_json(home, "--task", "fix-sub", "--agent", "noop")
    (home / "golden" / "mini" / "fix-sub" / "repo" / "ops.py").write_text("changed\n")
    result = ledger(["run", "--resume", summary["run"], "--trace", "none"], home)
    assert result.exit_code == 2 and "changed since run" in result.stderr


def test_resume_of_a_finished_run_runs_nothing(home: Path) -> None:
    """Resuming a complete run runs nothing and appends nothing (no run.resumed, no second
    run.finished): the run's entries, and so its bundle, stay what they were."""
    first = run_json(home, "--task", "fix-sub", "--agent", "noop")
    before = [e.seq for e in entries(home, first["run"])]
    again = run_json(home, "--resume", first["run"])
    assert again["attempts"] == [] and again["status"] == "finished"
    assert [e.seq for e in entries(home, first["run"])] == before


@pytest.mark.strace
def test_strace_records_reads_outside_the_worktree(home: Path, tmp_path: Path) -> None:
    """With --trace strace an agent reading the hidden tests by absolute path shows as fs.read outside the worktree."""
    from ledger.agents.strace import strace_status

    if not strace_status()[0]:
        pytest.skip(strace_status()[1])
    hidden = home / "golden" / "mini" / "fix-sub" / "tests" / "check_sub_hidden.py"
    spec = _agent_script(tmp_path, "peek.py", f"open({str(hidden.resolve())!r}).read()\n"
                         "for i in range(60):\n    open(f'note{i}.txt', 'w').write('x')\n")
    result = ledger(["run", "--task", "fix-sub", "--agent", spec, "--trace", "strace", "--json",
                     "--sandbox", "none"], home)
    assert result.exit_code == 0, result.output
    items = entries(home)
    started = next(e for e in items if e.kind == "agent.started")
    assert started.data["trace"] == "strace"
    reads = [e for e in items if e.kind == "fs.read" and e.data["resolved"] == str(hidden.resolve())]
    assert reads and reads[0].data["in_worktree"] is False and reads[0].data["source"] == "strace"
    check_vocabulary(items)
    # the trace (60 worktree writes and more) arrives as one burst after the agent exits:
    # appended in a few commits, not one each
    with Journal.open(home / "journal.db", harness=True) as j:
        heads = len(j.store.all_heads())
    assert len(items) > 50 and heads < len(items) / 4, (heads, len(items))


@pytest.mark.parametrize("text,needle", [
    ("[run\nparallel = 2\n", "invalid TOML"),
    ("[run]\nparalel = 2\n", "unknown [run] key(s) 'paralel' (did you mean 'parallel'?)"),
    ("[run]\ntrace = 'loud'\n", "trace must be one of"),
    ("[run]\nparallel = 0\n", "expected a positive integer"),
    ("[agents.x]\ncommand = 3\n", "command must be a string or a list"),
    ("[agents.x]\ncommand = 'a'\nshell = true\n", "unknown key(s) 'shell'"),
    ("[agents.x]\ncomand = 'a'\n", "unknown key(s) 'comand' (did you mean 'command'?)"),
    ("[extra]\n", "unknown table(s) 'extra'"),
    ("[agent.x]\ncommand = 'a'\n", "unknown table(s) 'agent' (did you mean 'agents'?)"),
])
def test_bad_ledger_toml_is_a_clear_usage_error(home: Path, text: str, needle: str) -> None:
    """A malformed ledger.toml stops the run before anything starts, naming the file and the problem."""
    (home.parent / "ledger.toml").write_text(text)
    result = ledger(["run", "--task", "fix-sub", "--agent", "noop", "--trace", "none"], home)
    assert result.exit_code == 2
    assert needle in result.stderr and "ledger.toml" in result.stderr
    assert not (home / "journal.db").exists()


def test_compare_prints_the_delta_against_the_previous_run_of_the_same_tasks(home: Path) -> None:
    """`run --compare`: none the first time; then the delta against the earlier run of the set."""
    first = run_json(home, "--tier", "mini", "--agent", "oracle", "--compare")
    assert first["compare"] is None
    run_json(home, "--task", "fix-add", "--agent", "noop")  # another task set: skipped
    second = run_json(home, "--tier", "mini", "--agent", "noop", "--compare")
    d = second["compare"]
    assert d["run_a"] == first["run"] and d["run_b"] == second["run"]
    assert d["components"]["task_success"]["delta"] == -1.0
    assert sorted(d["tasks"]["newly_failing"]) == ["fix-add", "fix-sub"]
    text = ledger(["run", "--trace", "none", "--tier", "mini", "--agent", "noop", "--compare"], home)
    assert "compare with the previous run of the same task set:" in text.stdout
    assert "no task changed from passing to failing or back" in text.stdout


def test_live_progress_has_a_line_per_running_attempt_with_its_tokens() -> None:
    """On a terminal each running attempt has its own live line (task, agent, phase, tokens so
    far), gone when it finishes; without a terminal, a plain line when it starts."""
    import io

    from rich.console import Console

    from cli.run_cmds import BarProgress, LineProgress
    from ledger.run.summary import AttemptResult

    aid = "r-20261202T000000Z-aaaaaa/fix-sub/http-m/1/1"
    bar = BarProgress()
    bar.console = Console(file=io.StringIO(), force_terminal=True, width=120)
    bar.bar.live.console = bar.console
    bar.start("r-20261202T000000Z-aaaaaa", 2)
    bar.phase(aid, "agent")
    bar.usage(aid, 1234, None)
    shown = Console(file=io.StringIO(), width=120, record=True)
    shown.print(bar.bar.get_renderable())
    text = shown.export_text()
    assert "fix-sub http-m #1" in text and "agent" in text and "1234 tokens" in text
    bar.finished(AttemptResult(aid, "fix-sub", "http-m", 1, 1, status="completed"))
    assert aid not in bar.rows
    bar.stop()
    lines = LineProgress()
    lines.phase(aid, "workspace")
    lines.phase(aid, "agent")
    assert lines.started == {aid}


def test_model_responses_add_up_to_the_tokens_so_far() -> None:
    """Each journaled model.response adds its usage (total, or prompt + completion)."""
    from ledger.run.summary import AttemptResult

    r = AttemptResult("a", "t", "http-m", 1, 1)
    r.absorb("model.response", {"usage": {"total_tokens": 100}})
    r.absorb("model.response", {"usage": {"prompt_tokens": 30, "completion_tokens": 5}})
    r.absorb("model.response", {"usage": None})
    assert r.tokens_so_far == 135


def test_demo_agent_says_which_tasks_it_has_no_demonstration_for() -> None:
    """`--agent demo` on tasks without a demonstration names them (it would fail them silently)."""
    from types import SimpleNamespace

    from ledger.run.plan import _demo_note

    notes: list[str] = []
    tasks = [SimpleNamespace(id="add-clamp", demo=[{"write": "x"}]),
             SimpleNamespace(id="fix-parser", demo=()), SimpleNamespace(id="lru-cache", demo=())]
    _demo_note(tasks, notes)  # type: ignore[arg-type]
    assert notes == ["note: the demo agent has a demonstration for 1 of 3 task(s); on the others "
                     "(fix-parser, lru-cache) it does nothing and fails them: name a real agent "
                     "with --agent (docs/agents.md)"]
    notes.clear()
    _demo_note(tasks[:1], notes)  # type: ignore[arg-type]
    assert notes == []
