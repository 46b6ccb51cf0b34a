"""replay / report / failures / compare through click's CliRunner on a real journal."""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from evaluators.views import compute_views, recorded_view_data
from ledger.journal.journal import Journal
from tests.evaluators.builders import RunBuilder, task

ROOT = Path(__file__).resolve().parents[2]
RUN_A = "r-20261129T203000Z-aaaaaa"
RUN_B = "r-20261130T090000Z-bbbbbb"


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


def builder(run: str, outcomes: dict[str, bool], *, finish: bool = True,
            unknown: bool = False) -> RunBuilder:
    b = RunBuilder(run=run)
    b.started([task(t, tier="standard" if t.endswith("s") else "smoke") for t in outcomes])
    if unknown:
        b.add("future.kind", {"x": 1})
    for tid, ok in outcomes.items():
        b.attempt(tid, tier="standard" if tid.endswith("s") else "smoke",
                  hidden=(2, 0, 0) if ok else (0, 2, 0), wall_s=30.0, cost_usd=0.25,
                  judge={"completeness": 4, "accuracy": 4, "actionability": 4,
                         "no_hallucinations": 4})
    if finish:
        b.finished()
    return b


def write(home: Path, b: RunBuilder, *, record: bool = True) -> None:
    """Append the builder's entries to the journal, then the view recorded from the journal."""
    with Journal.open(home / "journal.db", create=True, harness=True) as j:
        j.append_many([(e.kind, e.data, e.run, e.task) for e in b.entries])
        if record:
            j.append("view.recorded", recorded_view_data(j.entries(run=b.run), b.run), run=b.run)


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    h = tmp_path / "L"
    h.mkdir()
    return h


@pytest.fixture()
def two_runs(home: Path) -> Path:
    write(home, builder(RUN_A, {"t1": True, "t2": False, "t3s": True}, unknown=True))
    write(home, builder(RUN_B, {"t1": False, "t2": True, "t3s": True}))
    return home


def test_report_json_has_the_golden_run_file_fields(two_runs: Path) -> None:
    """report --json carries score, components, per_tier, failures, cost_total, run_id, attempts."""
    code, out, _ = invoke(two_runs, "report", RUN_A[:20], "--json")
    assert code == 0
    v = json.loads(out)
    for key in ("score", "components", "per_tier", "failures", "cost_total", "run_id", "attempts",
                "per_agent", "checkpoint", "attestations"):
        assert key in v
    assert v["run_id"] == RUN_A and v["checkpoint"] is None
    assert set(v["components"]) == {"task_success", "code_quality", "efficiency", "reliability",
                                    "safety"}
    assert set(v["per_tier"]) == {"smoke", "standard", "stretch", "adversarial"}
    assert v["failures"] == [{"attempt": f"{RUN_A}/t2/demo/1/1", "task": "t2", "agent": "demo",
                              "category": "incomplete",
                              "details": "hidden tests: 0 passed, 2 failed, 0 errors"}]
    assert v["cost_total"] == 0.75 and v["entries"]["unknown"] == {"future.kind": 1}
    with Journal.open(two_runs / "journal.db", harness=True) as j:
        expected = compute_views(j.entries(run=RUN_A), RUN_A)
    assert {k: v[k] for k in expected} == json.loads(json.dumps(expected))


def test_report_defaults_to_latest_run_and_renders_text_and_markdown(two_runs: Path) -> None:
    """No RUN means the latest run; text shows the formula, md renders tables."""
    code, out, _ = invoke(two_runs, "report")
    assert code == 0
    assert out.startswith(f"Run {RUN_B} (finished)")
    score_line = next(line for line in out.splitlines() if line.startswith("Score:"))
    assert "(0.5*0.6667 + 0.3*0.8000 + 0.2*0.4833) * 1.0000 * 1.0000" in score_line
    assert "Checkpoint: none covers this run yet" in out
    code, md, _ = invoke(two_runs, "report", "--format", "md")
    assert code == 0 and md.startswith(f"# Run {RUN_B}")
    assert "| tier | passed | attempts | pass rate |" in md and "| smoke | 1 | 2 | 50.0% |" in md


def test_report_names_the_covering_checkpoint(two_runs: Path) -> None:
    """After a checkpoint, report shows the signed tree head that covers the run."""
    assert invoke(two_runs, "keys", "init", "--name", "example.org/test")[0] == 0
    assert invoke(two_runs, "checkpoint")[0] == 0
    v = json.loads(invoke(two_runs, "report", "--json")[1])
    with Journal.open(two_runs / "journal.db", harness=True) as j:
        size = j.size
    assert v["checkpoint"]["size"] == size
    assert v["checkpoint"]["note"].startswith("example.org/test\n")


def test_report_json_and_format_together_is_usage_error(two_runs: Path) -> None:
    """--json with --format md is refused with exit 2."""
    code, _, err = invoke(two_runs, "report", "--json", "--format", "md")
    assert code == 2 and "either --json or --format" in err


def test_failures_table_and_json(two_runs: Path) -> None:
    """failures lists attempt/category/details and counts every category."""
    code, out, _ = invoke(two_runs, "failures", RUN_A)
    assert code == 0
    assert f"Run {RUN_A} (finished): 1 failed of 3 attempt(s)" in out
    assert f"{RUN_A}/t2/demo/1/1  incomplete  hidden tests: 0 passed, 2 failed, 0 errors" in out
    assert "orientation_miss  0" in out
    data = json.loads(invoke(two_runs, "failures", RUN_A, "--json")[1])
    assert data["counts"]["incomplete"] == 1 and sum(data["counts"].values()) == 1
    assert len(data["counts"]) == 8


def test_compare_shows_deltas_and_task_changes(two_runs: Path) -> None:
    """compare names newly passing and failing tasks and has zero deltas for equal scores."""
    code, out, err = invoke(two_runs, "compare", RUN_A, RUN_B)
    assert code == 0 and err == ""
    assert "newly passing: t2" in out and "newly failing: t1" in out
    assert "score: 0.6700 -> 0.6700 (+0.0000)" in out
    d = json.loads(invoke(two_runs, "compare", RUN_A, RUN_B, "--json")[1])
    assert d["tasks"]["newly_passing"] == ["t2"] and d["warnings"] == []


def test_compare_warns_on_different_task_sets(home: Path) -> None:
    """compare warns on stderr when the runs' task sets differ."""
    write(home, builder(RUN_A, {"t1": True}))
    write(home, builder(RUN_B, {"t1": True, "t9": True}))
    code, _, err = invoke(home, "compare", RUN_A, RUN_B)
    assert code == 0 and "warning: the task sets differ" in err


def test_replay_reproduces_and_output_is_stable(two_runs: Path) -> None:
    """replay exits 0 with 'reproduced'; its JSON is byte-identical run twice."""
    code, out, _ = invoke(two_runs, "replay", RUN_A)
    assert code == 0 and out.startswith("reproduced: 1 view(s)")
    first = invoke(two_runs, "replay", RUN_A, "--json")
    second = invoke(two_runs, "replay", RUN_A, "--json")
    assert first == second and json.loads(first[1])["reproduced"] is True


def test_replay_bytes_identical_under_other_hash_seed(two_runs: Path) -> None:
    """Separate processes with different PYTHONHASHSEED print the same replay and report bytes."""
    outs = []
    for seed in ("1", "987654"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        prog = "from cli.main import main; main()"
        rep = subprocess.run([sys.executable, "-c", prog, "--ledger", str(two_runs), "replay",
                              RUN_A, "--json"], env=env, capture_output=True, check=True, cwd=ROOT)
        rpt = subprocess.run([sys.executable, "-c", prog, "--ledger", str(two_runs), "report",
                              RUN_A, "--json"], env=env, capture_output=True, check=True, cwd=ROOT)
        outs.append(rep.stdout + rpt.stdout)
    assert outs[0] == outs[1]


def test_replay_detects_a_changed_recorded_view(home: Path) -> None:
    """A recorded view that does not match the entries: exit 1 and the differing paths."""
    b = builder(RUN_A, {"t1": True, "t2": False})
    write(home, b, record=False)
    with Journal.open(home / "journal.db", harness=True) as j:
        data = recorded_view_data(j.entries(run=RUN_A), RUN_A)
        forged = copy.deepcopy(data)
        forged["view"]["components"]["task_success"] = 1.0
        j.append("view.recorded", forged, run=RUN_A)
    code, out, _ = invoke(home, "replay")
    assert code == 1
    assert out.splitlines()[0] == f"not reproduced: 1 field(s) differ in run {RUN_A}"
    assert "  components.task_success: recorded=1.0 computed=0.5" in out
    data_out = json.loads(invoke(home, "replay", "--json")[1])
    assert data_out["views"][0]["diffs"][0]["path"] == "components.task_success"


def test_replay_refuses_a_journal_that_fails_verification(two_runs: Path) -> None:
    """A flipped byte in a stored entry: replay exits 1 and points at `ledger verify`."""
    db = sqlite3.connect(two_runs / "journal.db")
    db.execute("DROP TRIGGER entries_no_update")
    body = bytearray(db.execute("SELECT body FROM entries WHERE seq = 3").fetchone()[0])
    body[-3] ^= 1
    db.execute("UPDATE entries SET body = ? WHERE seq = 3", (bytes(body),))
    db.commit()
    db.close()
    code, out, err = invoke(two_runs, "replay", RUN_A)
    assert code == 1 and out == ""
    assert "ledger verify" in err and "seq=3" in err and "Traceback" not in err


def test_unfinished_run_is_reported_as_unfinished(home: Path) -> None:
    """A run without run.finished: report says so, replay has nothing recorded (exit 1)."""
    write(home, builder(RUN_A, {"t1": True, "t2": True}, finish=False), record=False)
    code, out, _ = invoke(home, "report")
    assert code == 0
    assert out.startswith(f"Run {RUN_A} (unfinished)")
    assert "Note: the run is unfinished; the figures cover what was recorded." in out
    code, out, _ = invoke(home, "replay")
    assert code == 1 and "recorded no golden view" in out


@pytest.mark.parametrize("args", [["report", "r-nope"], ["failures", "zzz"], ["replay", "x"],
                                  ["compare", RUN_A, "r-nope"], ["report", "r-2026"]])
def test_unknown_or_ambiguous_run_is_exit_2(two_runs: Path, args: list[str]) -> None:
    """A run id that matches nothing, or more than one run, is a usage error."""
    code, _, err = invoke(two_runs, *args)
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err


def test_missing_journal_is_exit_2(tmp_path: Path) -> None:
    """Reporting without a journal is a clear usage error that creates nothing."""
    code, _, err = invoke(tmp_path / "none", "report")
    assert code == 2 and "Traceback" not in err
    assert not (tmp_path / "none").exists()


def test_every_command_has_help() -> None:
    """Each report command documents itself."""
    for name in ("replay", "report", "failures", "compare"):
        res = CliRunner().invoke(cli, [name, "--help"])
        assert res.exit_code == 0 and len(res.output.splitlines()) > 3
        assert cli.all_commands()[name].help


def test_replay_checks_checkpoints_with_the_verifier_key(two_runs: Path, tmp_path: Path) -> None:
    """With signed checkpoints, replay needs the verifier key: own keys, --vkey, or exit 2."""
    assert invoke(two_runs, "keys", "init", "--name", "example.org/test")[0] == 0
    vkey = invoke(two_runs, "keys", "show", "--public")[1].strip()
    assert invoke(two_runs, "checkpoint")[0] == 0
    assert invoke(two_runs, "replay", RUN_A)[0] == 0
    (two_runs / "keys").rename(tmp_path / "moved-keys")
    code, _, err = invoke(two_runs, "replay", RUN_A)
    assert code == 2 and "verifier key" in err
    code, out, _ = invoke(two_runs, "replay", RUN_A, "--vkey", vkey)
    assert code == 0 and out.startswith("reproduced")


def test_report_marks_outcomes_a_task_runner_decided_as_weaker_evidence() -> None:
    """A hidden suite decided by an exit code or a reward file is marked in the attempts table;
    one the harness's reporter decided is not."""
    from cli.report_cmds import _passed_cell

    assert _passed_cell({"passed": True, "outcomes": "reporter"}) == "yes"
    assert _passed_cell({"passed": True}) == "yes"  # an older run: no provenance recorded
    assert _passed_cell({"passed": True, "outcomes": "reward-file"}) == (
        "yes (reward-file: weaker evidence)")
    assert _passed_cell({"passed": False, "outcomes": "exit-code"}) == (
        "no (exit-code: weaker evidence)")
