"""``ledger bench`` end to end with fake agent CLIs: dispatch, judging, files, exit codes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from evaluators.leaderboard import leaderboard_from_entries, replay_leaderboard
from ledger.journal.keys import load_verifier
from tests.bench.conftest import BenchEnv, check_documented

GOOD = {"code": "good"}


def _rows(export: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["provider"]: r for r in export["leaderboard"]}


def test_corpus_run_with_timeout_and_crash_is_partial(env: BenchEnv) -> None:
    """Four CLIs: two scored (ranked by the judges), one timeout with its real time, one failed."""
    env.fakes(claude={"code": "good", "self_eval": 18}, codex={"code": "bad", "self_eval": 18},
              gemini={"code": "hang"}, cursor_agent={"code": "crash", "usage": "none"})
    code, out, err = env.bench("--mode", "corpus", "--timeout", "1.5")
    assert code == 0, err
    assert "PARTIAL" in err
    assert re.search(r"^\[\d/4\] gemini - timeout \(\ds\)$", err, re.M)
    assert re.search(r"^\[\d/4\] cursor-agent - failed \(\ds, exit code 139\)$", err, re.M)
    assert re.search(r"^\[\d/4\] claude - done \(\ds\)$", err, re.M)
    assert "corpus check codex (code): 34 passed, 3 failed" in err

    export = env.export()
    rows = _rows(export)
    assert [r["provider"] for r in export["leaderboard"]][:2] == ["claude", "codex"]
    assert rows["claude"]["quality"] == 100 and rows["claude"]["code_score"] == 20
    assert rows["codex"]["quality"] == 55 and rows["codex"]["code_score"] == 11
    assert rows["claude"]["self_eval_bias"] == -2 and rows["codex"]["self_eval_bias"] == 7
    assert rows["gemini"]["status"] == "timeout" and rows["gemini"]["quality"] is None
    assert 1.5 <= rows["gemini"]["time_s"] < 10
    assert rows["cursor-agent"]["status"] == "failed"
    assert rows["claude"]["cost_usd"] == pytest.approx(0.0123)  # reported by the CLI
    assert export["mode"] == "corpus" and export["task_source"] == "corpus"
    assert export["providers_succeeded"] == ["claude", "codex"]
    assert export["scored"] == ["claude", "codex"]
    assert len(export["task_hash"]) == 64 and export["task_snapshot"].startswith("# Benchmark")

    # the terminal table marks estimated tokens/costs and says which agents failed
    table = out.split("\n\n")[1]
    assert re.search(r"^2\s+codex\s+55\s+11\s+-\s+\ds\s+~\$0\.0\d\d", table, re.M)
    assert re.search(r"cursor-agent\s+-\s+-\s+-\s+\ds\s+-\s+~\d", table)

    # the judges never saw an agent name, and nobody judged its own family
    prompts = [e.data for e in env.entries("bench.judge_prompt")]
    assert {p["judge"]: p["order"] for p in prompts} == {"claude": ["codex"], "codex": ["claude"]}
    assert all("# author: " + p["judge"] not in p["prompt"] for p in prompts)

    # the report files and the journal agree, and the journal replays the leaderboard
    assert env.reports() == [f"benchmark-001-{export['run_id']}.json",
                             f"benchmark-001-{export['run_id']}.md"]
    with env.journal() as j:
        j.verify(verifier=load_verifier(env.ledger / "keys"))
        entries = list(j.entries(run=export["run_id"]))
    recorded = [e for e in entries if e.kind == "view.recorded"][0].data["view"]
    assert replay_leaderboard(entries, export["run_id"])["reproduced"] is True
    assert recorded["export"]["leaderboard"][0]["quality"] == 100
    kinds = [e.kind for e in entries]
    assert kinds[:2] == ["run.started", "bench.started"]
    assert kinds[-3:] == ["view.recorded", "bench.finished", "run.finished"]
    assert kinds.count("bench.response") == 4 and kinds.count("bench.check") == 2
    activity = [e.data for e in entries if e.kind == "bench.activity"]
    assert [a["agent"] for a in activity] == ["claude"]
    assert [ev["kind"] for ev in activity[0]["events"]] == ["tool.call", "tool.result"]
    check_documented(entries)


def test_family_rule_with_judges_that_favour_themselves(env: BenchEnv) -> None:
    """Self-favouring judges of two families: each sees only the other's answer."""
    env.fakes(claude={"code": "good", "judge": "self_favor"},
              codex={"code": "good", "judge": "self_favor"})
    code, _out, err = env.bench("--prompt", "Write add(a, b)", "--agent", "claude,codex",
                                "--judge", "claude", "--judge", "codex", "--no-report",
                                "--sandbox", "none")  # the fakes' prompt log is outside a box
    assert code == 0, err
    judge_prompts = [p for p in env.prompts() if p["prompt"].startswith("You are an impartial")]
    assert len(judge_prompts) == 2
    for p in judge_prompts:
        assert f"# author: {p['agent']}" not in p["prompt"]
    view = leaderboard_from_entries(env.entries())
    rows = {r["provider"]: r for r in view["rows"]}
    assert rows["claude"]["judges"] == ["codex"] and rows["codex"]["judges"] == ["claude"]
    assert rows["claude"]["code_score"] == 0  # the other family's judge gave nothing away
    assert not any(v["own_family"] for v in view["judging"]["verdicts"])


def test_lone_judge_of_a_contestants_family_is_flagged(env: BenchEnv) -> None:
    """With only a same-family judge available it scores that answer, flagged own_family."""
    env.fakes(claude={"code": "good", "judge": "self_favor"}, codex=GOOD)
    code, _out, err = env.bench("--prompt", "Write add(a, b)", "--agent", "claude",
                                "--agent", "codex", "--judge", "claude", "--no-report")
    assert code == 0, err
    verdicts = {v["agent"]: v for v in leaderboard_from_entries(env.entries())["judging"]["verdicts"]}
    assert verdicts["claude"]["own_family"] is True and verdicts["codex"]["own_family"] is False
    assert verdicts["claude"]["scores"]["accuracy"] == 5  # the bias the flag warns about


def test_garbage_judge_leaves_answers_unscored(env: BenchEnv) -> None:
    """An unparseable judge answer: UNSCORED, never zero; the run still exits 0."""
    env.fakes(claude=GOOD, codex={"judge": "garbage"})
    code, out, err = env.bench("--prompt", "Write add(a, b)", "--agent", "claude",
                               "--judge", "codex", "--json", "--no-report")
    assert code == 0, err
    export = json.loads(out)
    row = export["leaderboard"][0]
    assert row["status"] == "unscored" and row["quality"] is None and row["code_score"] is None
    assert export["scored"] == [] and export["providers_succeeded"] == ["claude"]
    assert "UNSCORED" in err
    raw = env.entries("bench.judge_raw")[0].data
    assert raw["text"].startswith("All of these answers look great")
    assert env.entries("bench.verdict")[0].data["status"] == "UNSCORED"


def test_partial_judge_answer_scores_only_what_it_covers(env: BenchEnv) -> None:
    """A judge that scores one label of two leaves the other UNSCORED (not dropped)."""
    env.fakes(claude=GOOD, codex={"code": "bad"}, gemini={"judge": "partial"})
    code, out, err = env.bench("--prompt", "Write add(a, b)", "--agent", "claude,codex",
                               "--judge", "gemini", "--json", "--no-report", "--seed", "1")
    assert code == 0, err
    statuses = sorted(r["status"] for r in json.loads(out)["leaderboard"])
    assert statuses == ["scored", "unscored"]


@pytest.mark.parametrize("mode,reason", [("crash", "the judge failed"),
                                         ("hang", "the judge timeout")])
def test_crashing_and_hanging_judges_are_unscored(env: BenchEnv, mode: str, reason: str) -> None:
    """A judge that crashes or hangs gives UNSCORED with the reason recorded."""
    env.fakes(claude=GOOD, codex={"judge": mode})
    code, _out, err = env.bench("--prompt", "Write add(a, b)", "--agent", "claude", "--judge",
                                "codex", "--no-report", "--timeout", "1")
    assert code == 0, err
    v = env.entries("bench.verdict")[0].data
    assert v["status"] == "UNSCORED" and v["reason"] == reason


def test_all_agents_failed_exits_3(env: BenchEnv) -> None:
    """Every agent crashing or answering nothing: FAIL, exit 3."""
    env.fakes(claude={"code": "crash"}, codex={"code": "empty"})
    code, _out, err = env.bench("--prompt", "Write add(a, b)", "--judge", "offline")
    assert code == 3
    assert "FAIL" in err
    assert leaderboard_from_entries(env.entries())["verdict"] == "FAIL"


def test_no_agent_available_exits_3(env: BenchEnv) -> None:
    """No agent CLI on PATH (or only missing ones named): exit 3 (nothing could be run) with a
    clear line."""
    code, _out, err = env.bench("--prompt", "Write add(a, b)")
    assert code == 3 and "no agent CLI found on PATH" in err
    code, _out, err = env.bench("--prompt", "x", "--agent", "gemini")
    assert code == 3 and "not found on PATH" in err
    assert not (env.ledger / "journal.db").exists()


@pytest.mark.parametrize("args,needle", [
    (["--prompt", "x", "--corpus"], "choose one task input"),
    (["words", "--prompt", "x"], "either as TEXT or with --prompt"),
    (["--prompt", "x", "--with-test-review"], "needs --with-tests"),
    (["--prompt", "x", "--timeout", "abc"], "not a valid float"),
    (["--prompt", "x", "--timeout", "0"], "positive"),
    (["--compare", "only-one"], "exactly two"),
    (["--compare", "--prompt", "x"], "--compare takes only run ids"),
    (["--replay-last", "--corpus"], "cannot be combined with --corpus"),
    (["--no-such-flag"], "No such option"),
    (["--prompt", ""], "empty"),
    (["--prompt", "x", "--agent", "nonsense-agent"], "unknown agent"),
])
def test_bad_arguments_exit_2(env: BenchEnv, args: list[str], needle: str) -> None:
    """Bad flags and combinations exit 2 (a usage error, as everywhere) with the reason."""
    env.fakes(claude=GOOD)
    code, _out, err = env.bench(*args)
    assert code == 2, err
    assert needle in err


def test_default_input_outside_git_is_a_clear_error(env: BenchEnv) -> None:
    """With no input the task is `git diff HEAD~1`; outside a repository that is exit 2."""
    env.fakes(claude=GOOD)
    code, _out, err = env.bench()
    assert code == 2 and "--diff HEAD~1" in err


def test_offline_judge_is_the_labelled_fallback(env: BenchEnv) -> None:
    """No judge CLI on PATH: the offline deterministic judge scores, and says it is offline."""
    env.fakes(mybot=GOOD, proser={"code": "text:I would write a function that adds numbers."})
    bot, proser = env.bin / "mybot", env.bin / "proser"
    code, out, err = env.bench("--prompt", "Write add(a, b)", "--agent", f"cmd:{bot} {{prompt}}",
                               "--agent", f"cmd:{proser} {{prompt}}", "--json")
    assert code == 0, err
    export = json.loads(out)
    assert export["meta_judge_model"].startswith("offline (deterministic fallback")
    rows = _rows(export)
    assert rows["cmd-mybot"]["code_score"] == 20 and rows["cmd-mybot"]["rank"] == 1
    assert rows["cmd-proser"]["code_score"] == 0 and rows["cmd-proser"]["status"] == "scored"
    assert "offline deterministic judge" in err
    started = env.entries("bench.started")[0].data
    assert started["judge_fallback"] is True and started["judge_choice"] == "no judge CLI on PATH"


def test_usage_and_cost_per_cli(env: BenchEnv) -> None:
    """Reported cost (claude), tokens priced from the table (gemini), estimated tokens (cursor)."""
    env.fakes(claude=GOOD, gemini=GOOD, cursor_agent={"code": "good", "usage": "none"})
    code, _out, err = env.bench("--prompt", "Write add(a, b)", "--judge", "offline", "--no-report")
    assert code == 0, err
    rows = {r["provider"]: r for r in leaderboard_from_entries(env.entries())["rows"]}
    assert rows["claude"]["cost_source"] == "reported" and not rows["claude"]["tokens_estimated"]
    assert rows["gemini"]["cost_source"] == "priced" and not rows["gemini"]["tokens_estimated"]
    assert rows["gemini"]["cost_usd"] > 0
    assert rows["cursor-agent"]["tokens_estimated"] and rows["cursor-agent"]["cost_usd"] is None


def test_compare_replay_last_and_report_numbering(env: BenchEnv) -> None:
    """Reports number 001, 002...; --compare warns on different tasks; --replay-last repeats one."""
    env.fakes(claude=GOOD, codex={"code": "bad"})
    (env.root / "audit-results").mkdir()
    (env.root / "audit-results" / "benchmark-041-old.md").write_text("old")
    assert env.bench("--prompt", "Write add(a, b)", "--judge", "offline")[0] == 0
    assert env.bench("--prompt", "Write sub(a, b)", "--judge", "offline")[0] == 0
    names = [n for n in env.reports() if n.endswith(".json")]
    assert [n[:13] for n in names] == ["benchmark-042", "benchmark-043"]

    code, out, err = env.bench("--compare")
    assert code == 0 and "task hashes differ" in err
    code, out, _ = env.bench("--compare", "--json")
    d = json.loads(out)
    assert d["same_task"] is False and {a["provider"] for a in d["agents"]} == {"claude", "codex"}

    code, _out, err = env.bench("--replay-last", "--judge", "offline")
    assert code == 0, err
    assert "replaying the task of" in err
    started = [e.data for e in env.entries("bench.started")]
    assert started[-1]["task_hash"] == started[-2]["task_hash"]
    assert started[-1]["detail"]["replay_of"]
    code, out, err = env.bench("--compare", "--json")
    assert json.loads(out)["same_task"] is True and "task hashes differ" not in err

    # an export file of the existing tool compares against a journal run
    first = env.root / "audit-results" / names[0]
    run_b = started[-1]
    code, out, _ = env.bench("--compare", str(first), env.entries("bench.started")[-1].run, "--json")
    assert code == 0 and json.loads(out)["run_a"] in names[0]
    assert run_b["task_hash"]


def test_out_dir_and_json_stdout(env: BenchEnv) -> None:
    """--out picks the folder; --json prints only the v2.0 object on stdout."""
    env.fakes(claude=GOOD)
    code, out, _err = env.bench("--prompt", "Write add(a, b)", "--judge", "offline",
                                "--out", "reports/bench", "--json", "--no-snapshot")
    assert code == 0
    export = json.loads(out)
    assert export["version"] == "2.0" and export["task_snapshot"] is None
    assert [n[:14] for n in env.reports("reports/bench")] == ["benchmark-001-"] * 2
    assert env.export("reports/bench") == export


def test_dry_run_and_show_costs_dispatch_nothing(env: BenchEnv) -> None:
    """--dry-run prints the prompt and the agents; --show-costs the price table; no journal."""
    env.fakes(claude=GOOD, codex=GOOD)
    code, out, _ = env.bench("--dry-run", "--task", "Write add(a, b)")
    assert code == 0
    assert "Agents: claude, codex" in out and "Write add(a, b)" in out
    assert "Judges: claude, codex" in out
    code, out, _ = env.bench("--show-costs", "--json")
    assert code == 0 and any(m["model"] == "gpt-5-codex" for m in json.loads(out)["models"])
    assert env.prompts() == []
    assert not (env.ledger / "journal.db").exists()


def test_no_snapshot_keeps_the_task_out_of_the_journal(env: BenchEnv) -> None:
    """With --no-snapshot neither bench.started nor the judge prompt stores the task text."""
    env.fakes(claude=GOOD, codex=GOOD)
    secret_task = "Write add(a, b) for customer ACME-7731"
    code, _out, err = env.bench("--prompt", secret_task, "--agent", "claude", "--judge", "codex",
                                "--no-snapshot", "--no-report")
    assert code == 0, err
    with env.journal() as j:
        raw = b"".join(e.raw for e in j.entries())
    assert b"ACME-7731" not in raw
    assert "[task text not stored" in env.entries("bench.judge_prompt")[0].data["prompt"]


def test_ledger_replay_reproduces_a_bench_run(env: BenchEnv) -> None:
    """`ledger replay` recomputes a bench leaderboard from the journal, and notices an edit."""
    from click.testing import CliRunner

    from cli.main import cli

    env.fakes(claude=GOOD, codex={"code": "bad"})
    assert env.bench("--mode", "corpus")[0] == 0
    res = CliRunner().invoke(cli, ["--ledger", str(env.ledger), "replay"])
    assert res.exit_code == 0, res.output
    assert "reproduced: the bench leaderboard" in res.stdout
    res = CliRunner().invoke(cli, ["--ledger", str(env.ledger), "replay", "--json"])
    assert json.loads(res.stdout)["reproduced"] is True


def test_compare_refuses_a_tampered_bench_run(env: BenchEnv) -> None:
    """The leaderboards `--compare` shows are verified first: with one byte of a bench run's
    response changed in the database (triggers dropped), it exits 1 naming the failed check."""
    import sqlite3

    env.fakes(claude=GOOD)
    assert env.bench("--prompt", "Write add(a, b)", "--judge", "offline")[0] == 0
    assert env.bench("--prompt", "Write sub(a, b)", "--judge", "offline")[0] == 0
    assert env.bench("--compare", "--json")[0] == 0
    victim = next(e for e in env.entries("bench.response"))
    key = b"\xa6status\xa2ok"
    assert victim.raw.count(key) == 1
    c = sqlite3.connect(env.ledger / "journal.db")
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        c.execute(f"DROP TRIGGER {name}")
    c.execute("UPDATE entries SET body = ? WHERE seq = ?",
              (victim.raw.replace(key, b"\xa6status\xa2OK"), victim.seq))
    c.commit()
    c.close()
    code, out, err = env.bench("--compare", "--json")
    assert code == 1 and out == "", err
    assert "checkpoint-journal" in err or "leaf-hash" in err
