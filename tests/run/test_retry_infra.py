"""`ledger run --resume RUN --retry infra`: only the attempts that failed for infra reasons run
again (under a new try), nothing else; they are excluded from the statistics until then."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from evaluators.stats_view import stats_of
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.run.config import LedgerConfig
from ledger.run.plan import RunRequest, resume_plan
from ledger.tasks.loader import load_tasks
from tests.evaluators.builders import RunBuilder


def _journal_with(tmp_path: Path) -> tuple[LedgerHome, Journal, str]:
    """A finished run of the packaged add-clamp task, noop x 3 repeats: repeat 1 the model
    endpoint answered 503 through the proxy (agent_error model_error), repeat 2 an ordinary
    failure, repeat 3 a harness error with a full disk."""
    (task,) = load_tasks(["smoke"], ["add-clamp"])
    b = RunBuilder()
    rec = {"id": task.id, "title": task.title, "tier": task.tier, "hash": task.hash,
           "max_duration_s": 60.0, "max_cost_usd": 1.0, "max_tokens": 1000,
           "owned_files": [], "expected_files_modified": []}
    b.started([rec], agents=("noop",), repeat=3)
    b.attempt("add-clamp", agent="noop", repeat=1, hidden=(0, 1, 0), agent_finished=False,
              extra=[("agent.finished", {
                  "exit_code": 1, "signal": None, "wall_s": 1.0, "timed_out": False,
                  "crashed": False, "orphans": 0, "telemetry": True, "cost_usd": None,
                  "agent_error": {"kind": "model_error", "detail": "HTTP 503 x3 via proxy"}})])
    b.attempt("add-clamp", agent="noop", repeat=2, hidden=(0, 1, 0))
    b.attempt("add-clamp", agent="noop", repeat=3, hidden=None, signals=(), status="error",
              error="OSError: [Errno 28] No space left on device")
    b.finished()
    home = LedgerHome(tmp_path / ".ledger")
    home.path.mkdir(parents=True)
    j = Journal.open(home.journal_path, create=True, harness=True)
    j.append_many([(e.kind, e.data, e.run, e.task) for e in b.entries])
    return home, j, b.run


def test_retry_infra_plans_only_the_infra_failures(tmp_path: Path) -> None:
    """The endpoint 503 and the full disk are planned again (try 2); the ordinary failure is
    not; a plain --resume of the finished run plans nothing."""
    home, j, run = _journal_with(tmp_path)
    with j:
        entries = list(j.entries(run=run))
        assert stats_of(entries, run)["infra"]["by_kind"]["endpoint"] == 1
        plan, _ = resume_plan(home, j, RunRequest(resume=run, retry="infra"), LedgerConfig())
        assert sorted((s.repeat, s.try_no) for s in plan.slots) == [(1, 2), (3, 2)]
        plain, _ = resume_plan(home, j, RunRequest(resume=run), LedgerConfig())
        assert plain.slots == []


def test_retry_takes_only_infra(tmp_path: Path) -> None:
    """--retry anything-else is a usage error; --retry without --resume too (exit 2)."""
    from click.testing import CliRunner

    from cli.main import cli
    from ledger.errors import UsageError

    home, j, run = _journal_with(tmp_path)
    with j, pytest.raises(UsageError):
        resume_plan(home, j, RunRequest(resume=run, retry="all"), LedgerConfig())
    res = CliRunner().invoke(cli, ["--ledger", str(tmp_path / "x"), "run", "--retry", "infra"])
    assert res.exit_code == 2 and "--resume" in res.stderr


@pytest.mark.sandbox
def test_an_injected_sandbox_start_failure_is_excluded_and_retried_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real run, two repeats, the first attempt's sandbox made to fail at start: the report
    excludes it ("1 infra failure(s) excluded"); `--resume RUN --retry infra` runs that slot
    again (try 2) and nothing else; afterwards no infra failure is left."""
    from ledger.sandbox import probe_bwrap

    ok, why, _ = probe_bwrap()
    if not ok:
        pytest.skip(f"bubblewrap unusable: {why}")
    from ledger.sandbox import attempt_boxes
    from tests.sandbox.test_start_failure import MISSING, _entries, _inline_run, _ledger

    real = attempt_boxes.agent_policy
    calls = {"n": 0}

    def first_fails(**kwargs: Any) -> Any:
        calls["n"] += 1
        policy = real(**kwargs)
        if calls["n"] == 1:
            return dataclasses.replace(policy, readable=(*policy.readable, MISSING))
        return policy

    monkeypatch.setattr(attempt_boxes, "agent_policy", first_fails)
    result, home = _inline_run(tmp_path, monkeypatch, "--repeat", "2")
    run = json.loads(result.stdout)["run"]
    entries = _entries(home, run)
    failed = [e for e in entries if e.kind == "sandbox.failed"]
    assert len(failed) == 1 and MISSING in failed[0].data["message"]  # the injection ran
    s = stats_of(entries, run)
    assert s["infra"]["excluded"] == 1 and s["infra"]["by_kind"]["sandbox"] == 1
    report = _ledger(home, "report", run)
    assert "over 2 attempts, 1 infra failure(s) excluded" in report.stdout
    monkeypatch.setattr(attempt_boxes, "agent_policy", real)
    before = {e.data["attempt"] for e in entries if e.kind == "attempt.started"}
    again = _ledger(home, "run", "--json", "--resume", run, "--retry", "infra")
    assert again.exit_code in (0, 1), again.output
    after = _entries(home, run)
    started = [e.data["attempt"] for e in after if e.kind == "attempt.started"
               and e.data["attempt"] not in before]
    (retried,) = started  # exactly one attempt ran again
    assert retried.endswith("/1/2") and failed[0].data["attempt"].endswith("/1/1")
    resumed = [e for e in after if e.kind == "run.resumed"]
    assert resumed[-1].data["remaining"] == [retried]
    assert stats_of(after, run)["infra"]["failures"] == 0


@pytest.mark.sandbox
def test_an_endpoint_503_through_the_proxy_is_excluded_and_retried_alone(tmp_path: Path) -> None:
    """A real run of the built-in HTTP agent in bubblewrap, its model a local server this test
    starts and stops: the first two requests it gets are answered 503 (retries = 1), so one
    attempt ends agent_error model_error, its requests relayed by the journaling proxy
    (net.connect source proxy) and answered 503 (model.response); the report excludes it as an
    endpoint infra failure; `--resume RUN --retry infra` runs that slot again, nothing else,
    and no infra failure is left."""
    from ledger.sandbox import sandbox_status
    from tests.agents.scripted_model import ScriptedModel, fail, tool_call

    status = sandbox_status("bwrap")
    if status.mode != "bwrap":
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    with ScriptedModel([fail(503, "upstream overloaded"), fail(503, "upstream overloaded"),
                        tool_call("submit", {}), tool_call("submit", {})]) as server:
        _endpoint_503_run(tmp_path, server)


def _endpoint_503_run(tmp_path: Path, server: Any) -> None:
    from click.testing import CliRunner

    from cli.main import cli
    home = tmp_path / ".ledger"
    home.mkdir()
    (home.parent / "ledger.toml").write_text(  # beside the ledger home, as `ledger` reads it
        f'[agents.flaky]\nkind = "http"\nmodel = "m"\nbase_url = "{server.base_url}"\n'
        'retries = 1\n')

    def ledger(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)

    def entries_of(run: str) -> list[Any]:
        with Journal.open(home / "journal.db", readonly=True) as j:
            return list(j.entries(run=run))

    first = ledger("run", "--json", "--task", "add-clamp", "--agent", "flaky", "--repeat", "2",
                   "--trace", "none", "--sandbox", "bwrap")
    assert first.exit_code in (0, 1), first.output
    run = json.loads(first.stdout)["run"]
    entries = entries_of(run)
    failed = [e.data for e in entries if e.kind == "agent.finished"
              and (e.data.get("agent_error") or {}).get("kind") == "model_error"]
    assert len(failed) == 1, [e.data for e in entries if e.kind == "agent.finished"]
    bad = failed[0]["attempt"]
    # the injection ran: the server answered 503 twice, through the proxy, to that attempt
    assert [r.status for r in server.requests[:2]] == [503, 503]
    answered = [e.data["status"] for e in entries if e.kind == "model.response"
                and e.data["attempt"] == bad]
    assert answered == [503, 503]
    relayed = [e.data for e in entries if e.kind == "net.connect" and e.data["attempt"] == bad]
    assert relayed and all(c["source"] == "proxy" and c["allowed"] for c in relayed)
    assert {c["port"] for c in relayed} == {server.port}
    s = stats_of(entries, run)
    assert s["infra"]["by_kind"]["endpoint"] == 1 and s["infra"]["failures"] == 1
    report = ledger("report", run)
    assert "over 2 attempts, 1 infra failure(s) excluded" in report.stdout

    before = {e.data["attempt"] for e in entries if e.kind == "attempt.started"}
    again = ledger("run", "--json", "--resume", run, "--retry", "infra")
    assert again.exit_code in (0, 1), again.output
    after = entries_of(run)
    started = [e.data["attempt"] for e in after
               if e.kind == "attempt.started" and e.data["attempt"] not in before]
    assert started == [bad[: -len("/1")] + "/2"]  # the same slot, try 2, and nothing else
    assert stats_of(after, run)["infra"]["failures"] == 0
