"""`ledger export --format inspect`: the run read back by Inspect AI's own reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from tests.view.fixtures import RUN, build, write

inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect-ai is in the test extra")


def _ledger(home: Path, *args: str) -> str:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    assert res.exit_code == 0, res.stderr
    return res.stdout


def _with_prompt_and_times() -> list:  # type: ignore[type-arg]
    b = build()
    for i, e in enumerate(b.entries):
        if e.kind == "agent.started":
            b.entries[i] = e._replace(data={**e.data, "prompt": f"Fix {e.task}.", "at": 10**18 + i})
    return b  # type: ignore[return-value]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:  # type: ignore[type-arg]
    home = tmp_path_factory.mktemp("inspect") / "L"
    home.mkdir()
    write(home, _with_prompt_and_times())  # type: ignore[arg-type]
    out = home.parent / "run.eval"
    info = json.loads(_ledger(home, "export", "--format", "inspect", RUN, "-o", str(out), "--json"))
    return home, out, info


def test_read_eval_log_reads_one_sample_per_attempt(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """Inspect reads the file: 12 samples (3 tasks x 2 agents x 2 repeats), ids task/agent, epochs = repeats."""
    _, out, info = exported
    log = inspect_log.read_eval_log(str(out))
    assert log.status == "success" and info["samples"] == 12
    assert len(log.samples) == 12
    assert {(s.id, s.epoch) for s in log.samples} == {
        (f"t{i}/{a}", r) for i in range(3) for a in ("alpha", "beta") for r in (1, 2)}
    assert {s.input for s in log.samples} == {"Fix t0.", "Fix t1.", "Fix t2."}


def test_scores_match_the_report(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """hidden_tests, signals, attestation and golden scores agree with `ledger report --json`."""
    home, out, _ = exported
    report = json.loads(_ledger(home, "report", RUN, "--json"))
    rows = {r["attempt"]: r for r in report["attempts"]}
    log = inspect_log.read_eval_log(str(out))
    for s in log.samples:
        row = rows[s.metadata["attempt"]]
        assert s.scores["hidden_tests"].value == (1.0 if row["hidden"]["passed"] else 0.0)
        assert s.scores["attestation"].value == row["attestation"]
        assert s.scores["signals"].value == row["signals"]["passed"] / row["signals"]["total"]
        assert 0.0 <= s.scores["golden"].value <= 1.0
    golden = {m.name: m for m in log.results.scores}["hidden_tests"].metrics["mean"].value
    assert golden == pytest.approx(report["counts"]["passed"] / report["counts"]["attempts"])


def test_usage_cost_and_ledger_metadata(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """Tokens and cost per sample; the attestation hash, proof and checkpoint sit in metadata."""
    home, out, _ = exported
    log = inspect_log.read_eval_log(str(out))
    s = next(x for x in log.samples if x.id == "t1/beta" and x.epoch == 1)
    usage = s.model_usage["eval-ledger/beta"]
    assert usage.input_tokens == 100 and usage.output_tokens == 50 and usage.total_cost == 0.1
    meta = s.metadata["ledger"]
    with Journal.open(home / "journal.db", readonly=True) as j:
        att = next(e for e in j.entries(run=RUN, kind="attestation")
                   if e.data["attempt"] == s.metadata["attempt"])
    assert meta["attestation_hash"] == att.data["hash"] and meta["attestation_seq"] == att.seq
    assert len(meta["content_digest"]) == 64
    total = log.stats.model_usage["eval-ledger/alpha"]
    assert total.input_tokens == 600 and total.total_cost == pytest.approx(3.0)


def test_messages_and_events_come_from_the_transcript(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """The prompt, the tool call and its result are messages; tool and sandbox events are kept."""
    _, out, _ = exported
    s = next(x for x in inspect_log.read_eval_log(str(out)).samples if x.id == "t0/alpha")
    roles = [m.role for m in s.messages]
    assert roles == ["user", "assistant", "tool"]
    assert s.messages[1].tool_calls[0].function == "bash"
    assert s.messages[2].tool_call_id == s.messages[1].tool_calls[0].id
    kinds = {e.event for e in s.events}
    assert {"tool", "sandbox"} <= kinds
    tool = next(e for e in s.events if e.event == "tool")
    assert tool.result == "ok"
    reads = [e for e in s.events if e.event == "sandbox" and e.action == "read_file"]
    assert reads and reads[0].file == "/wt/src/calc.py"


def test_inspect_lists_the_log(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """Inspect's log listing (what `inspect view` shows) finds the exported file."""
    _, out, _ = exported
    listed = inspect_log.list_eval_logs(str(out.parent), recursive=False)
    assert any(Path(info.name).name == out.name for info in listed)


def test_model_calls_are_inspect_model_events_with_the_real_model(tmp_path: Path) -> None:
    """An HTTP agent's journaled model calls come back from Inspect's reader as `model` events
    (input, output, usage), and the sample and the log name the model that answered, not
    `eval-ledger/<agent>`."""
    from tests.evaluators.builders import RunBuilder, task

    run = "r-20261202T100000Z-mmmmmm"
    b = RunBuilder(run=run)
    b.started([task("t0")], agents=("http-m",))
    call = {"id": "c1", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    b.attempt("t0", agent="http-m", extra=[
        ("model.request", {"step": 1, "model": "qwen2.5-coder", "messages": [
            {"role": "system", "content": "You fix code."}, {"role": "user", "content": "Fix t0."}]}),
        ("model.response", {"step": 1, "try": 1, "status": 200, "latency_s": 0.25,
                            "message": {"content": None, "tool_calls": [call]},
                            "finish_reason": "tool_calls", "model": "qwen2.5-coder-7b",
                            "usage": {"prompt_tokens": 120, "completion_tokens": 7}}),
        ("model.request", {"step": 2, "model": "qwen2.5-coder", "messages": [
            {"role": "tool", "content": "calc.py"}]}),
        ("model.response", {"step": 2, "try": 1, "status": 200, "latency_s": 0.5,
                            "message": {"content": "Done."}, "finish_reason": "stop",
                            "model": "qwen2.5-coder-7b",
                            "usage": {"prompt_tokens": 140, "completion_tokens": 3}}),
    ])
    b.finished()
    home = tmp_path / "L"
    home.mkdir()
    write(home, b)
    out = tmp_path / "run.eval"
    _ledger(home, "export", "--format", "inspect", run, "-o", str(out))
    log = inspect_log.read_eval_log(str(out))
    assert log.eval.model == "qwen2.5-coder-7b"
    s = log.samples[0]
    assert s.output.model == "qwen2.5-coder-7b" and "qwen2.5-coder-7b" in s.model_usage
    turns = [e for e in s.events if e.event == "model"]
    assert [t.model for t in turns] == ["qwen2.5-coder-7b", "qwen2.5-coder-7b"]
    first, second = turns
    assert [m.role for m in first.input] == ["system", "user"] and first.input[1].text == "Fix t0."
    assert first.output.choices[0].message.tool_calls[0].function == "bash"
    assert first.output.choices[0].stop_reason == "tool_calls"
    assert first.output.usage.input_tokens == 120 and second.output.usage.output_tokens == 3
    assert second.output.choices[0].message.text == "Done."
