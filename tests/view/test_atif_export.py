"""`ledger export --format atif`: each attempt a Harbor ATIF trajectory, validated by a reference.

The validator is the `atif` package from PyPI (test extra): pydantic models of ATIF written from
Harbor's RFC 0001 (`extra="forbid"` on every object, sequential step ids, tool-call references,
agent-only fields). Harbor's own package (`harbor`, which ships its trajectory models) is not
installable from this project's registry, so it is not the reference here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.view.fixtures import RUN, build, write

atif = pytest.importorskip("atif", reason="atif (ATIF pydantic models) is in the test extra")


def _invoke(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--ledger", str(home), *args])


def _load(folder: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/agent/trajectory.json"))]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:  # type: ignore[type-arg]
    home = tmp_path_factory.mktemp("atif") / "L"
    home.mkdir()
    b = build()
    for i, e in enumerate(b.entries):
        if e.kind == "agent.started":
            b.entries[i] = e._replace(data={**e.data, "prompt": f"Fix {e.task}.", "at": 10**18 + i})
    write(home, b)
    out = home.parent / "traj"
    res = _invoke(home, "export", "--format", "atif", RUN, "-o", str(out), "--json")
    assert res.exit_code == 0, res.stderr
    return home, out, json.loads(res.stdout)


def test_every_attempt_is_one_valid_atif_trajectory(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """12 attempts, 12 `<trial>/agent/trajectory.json` files, each one the reference models accept."""
    home, out, info = exported
    docs = _load(out)
    assert info["trajectories"] == 12 and len(docs) == 12
    report = json.loads(_invoke(home, "report", RUN, "--json").stdout)
    assert {d["session_id"] for d in docs} == {r["attempt"] for r in report["attempts"]}
    for d in docs:
        t = atif.Trajectory.model_validate(d)
        assert t.schema_version == "ATIF-v1.6"
        assert t.agent.name in ("alpha", "beta")
        assert t.steps[0].source == "user" and t.steps[0].message.startswith("Fix t")
        call = next(s for s in t.steps if s.tool_calls)
        assert call.tool_calls[0].function_name == "bash"
        assert call.tool_calls[0].arguments["input"].startswith("command=cat </script>")
        assert call.observation.results[0].source_call_id == call.tool_calls[0].tool_call_id
        assert call.observation.results[0].content == "ok"
        assert all(s.timestamp for s in t.steps)


def test_provenance_is_in_extra(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """Attestation hash and verdict, checkpoint and attempt id agree with `ledger report --json`."""
    home, out, _ = exported
    rows = {r["attempt"]: r for r in json.loads(_invoke(home, "report", RUN, "--json").stdout)["attempts"]}
    for d in _load(out):
        p = d["extra"]["eval_ledger"]
        row = rows[p["attempt"]]
        assert p["attempt"] == d["session_id"] and p["run"] == RUN and p["task"] == row["task"]
        assert p["attestation_verdict"] == ("CLEAN" if row["passed"] else "DIRTY")
        assert len(p["attestation_hash"]) == 64 and p["verify"] == f"ledger verify {p['attestation_hash']}"
        assert p["checkpoint"] and p["attestation_proof"]["tree_size"] > p["attestation_seq"]
        assert d["final_metrics"]["total_cost_usd"] == row["cost_usd"]


def test_an_invalid_document_is_refused_by_the_validator(exported: tuple[Path, Path, dict]) -> None:  # type: ignore[type-arg]
    """The reference validator bites: a step id out of order or an unknown field is refused."""
    from pydantic import ValidationError

    _, out, _ = exported
    d = _load(out)[0]
    bad = json.loads(json.dumps(d))
    bad["steps"][1]["step_id"] = 7
    with pytest.raises(ValidationError):
        atif.Trajectory.model_validate(bad)
    bad = json.loads(json.dumps(d))
    bad["provenance"] = {}
    with pytest.raises(ValidationError):
        atif.Trajectory.model_validate(bad)


def test_http_agent_model_turns_are_agent_steps_with_tokens(tmp_path: Path) -> None:
    """An HTTP agent's journaled model calls become agent steps with the answering model, tool
    calls (the journaled ids and JSON arguments) and prompt/completion tokens per step."""
    from tests.evaluators.builders import RunBuilder, task

    run = "r-20261202T100000Z-aaaaaa"
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
        ("tool.call", {"tool": "bash", "input": {"command": "ls"}}),
        ("tool.result", {"tool": "bash", "output": "calc.py", "is_error": False}),
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
    out = tmp_path / "traj"
    res = _invoke(home, "export", "--format", "atif", run, "-o", str(out))
    assert res.exit_code == 0, res.stderr
    assert "1 ATIF trajectory file(s)" in res.stdout
    (doc,) = _load(out)
    t = atif.Trajectory.model_validate(doc)
    assert t.agent.model_name == "qwen2.5-coder-7b"
    agent_steps = [s for s in t.steps if s.metrics is not None]
    assert [(s.metrics.prompt_tokens, s.metrics.completion_tokens) for s in agent_steps] == [
        (120, 7), (140, 3)]
    first, second = agent_steps
    assert first.model_name == "qwen2.5-coder-7b"
    assert first.tool_calls[0].tool_call_id == "c1" and first.tool_calls[0].arguments == {"command": "ls"}
    assert first.observation.results[0].source_call_id == "c1"
    assert first.observation.results[0].content == "calc.py"
    assert second.message == "Done." and second.extra["finish_reason"] == "stop"
    # the journaled tool.call is the model turn's call, not a second step
    assert sum(len(s.tool_calls or []) for s in t.steps) == 1
    assert t.final_metrics.total_steps == len(t.steps)


@pytest.mark.parametrize("case", ["missing-parent", "a-file"])
def test_a_bad_output_path_is_one_line_exit_2(exported: tuple[Path, Path, dict], tmp_path: Path,
                                              case: str) -> None:  # type: ignore[type-arg]
    home, _, _ = exported
    if case == "a-file":
        target = tmp_path / "f.json"
        target.write_text("{}")
    else:
        target = tmp_path / "no" / "such" / "dir"
    res = _invoke(home, "export", "--format", "atif", RUN, "-o", str(target))
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert str(target) in res.stderr
    assert list(tmp_path.iterdir()) == ([target] if case == "a-file" else [])


def test_a_cli_agents_output_is_its_last_step_and_an_old_journal_without_prompt_validates(
        tmp_path: Path) -> None:
    """A CLI agent (no model calls journaled): its stdout is an agent step marked
    `agent_output`, no model is invented, and a journal from before prompts were recorded (no
    `agent.started.prompt`) still gives a valid trajectory that starts with the agent's steps."""
    from tests.evaluators.builders import RunBuilder, task

    run = "r-20261202T110000Z-cccccc"
    b = RunBuilder(run=run)
    b.started([task("t0")], agents=("cli-x",))
    b.attempt("t0", agent="cli-x", extra=[
        ("tool.call", {"tool": "edit", "input": "src/calc.py"}),
        ("tool.result", {"tool": "edit", "output": "edited", "is_error": True}),
        ("agent.output", {"stream": "stdout", "text": "All tests pass now."})])
    b.finished()
    home = tmp_path / "L"
    home.mkdir()
    write(home, b)
    out = tmp_path / "traj"
    res = _invoke(home, "export", "--format", "atif", run, "-o", str(out))
    assert res.exit_code == 0, res.stderr
    (doc,) = _load(out)
    t = atif.Trajectory.model_validate(doc)
    assert t.agent.name == "cli-x" and t.agent.model_name is None
    assert t.steps[0].source == "agent" and t.steps[0].tool_calls[0].function_name == "edit"
    assert t.steps[0].observation.results[0].extra["is_error"] is True
    assert t.steps[-1].message == "All tests pass now."
    assert t.steps[-1].extra["agent_output"] == "stdout"
