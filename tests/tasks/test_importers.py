"""`ledger tasks import swebench|harbor`: records against a local clone and task folders written
for these tests become ordinary tasks; the oracle passes and `noop` fails on every runnable one."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.tasks.importers import _container_paths, host_unsafe
from ledger.tasks.loader import load_task
from ledger.tasks.model import Environment
from ledger.tasks.validate import validate_task
from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_ADD, TEST_NEG, commit, git, init


def ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def run_outcomes(home: Path, tier: str) -> dict[tuple[str, str], str]:
    result = ledger(home, "run", "--tier", tier, "--agent", "oracle", "--agent", "noop", "--trace", "none", "--json")
    assert result.exit_code == 0, result.output
    return {(a["task"], a["agent"]): a["outcome"] for a in json.loads(result.stdout)["attempts"]}


# --------------------------------------------------------------------------- SWE-bench


def _swebench_records(repos: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A clone at repos/acme__calc and one record per case; returns (records, expected reason by id)."""
    clone = init(repos / "acme__calc")
    base = commit(clone, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})
    fix = commit(clone, "fix add", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD})
    git(clone, "checkout", "-q", "-b", "env", base)
    env = commit(clone, "needs a dependency", {"calc.py": CALC_FIXED, "tests/test_env.py":
                 "import not_installed_dependency_xyz\n\n\ndef test_add_env():\n    assert True\n"})
    git(clone, "checkout", "-q", "main")

    def diff(a: str, b: str, *paths: str) -> str:
        return git(clone, "diff", "--full-index", a, b, "--", *paths) + "\n"

    good = {"repo": "acme/calc", "instance_id": "acme__calc-1", "base_commit": base,
            "patch": diff(base, fix, "calc.py"), "test_patch": diff(base, fix, "tests"),
            "problem_statement": "add() returns the difference\n\nadd(2, 3) gives -1; it should be 5.\n",
            "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),  # the datasets' JSON-string form
            "PASS_TO_PASS": ["tests/test_calc.py::test_neg"], "version": "0.1",
            "environment_setup_commit": base, "hints_text": "look at the operator"}
    records = [
        good,
        {**good, "instance_id": "acme__absent-1", "repo": "acme/absent"},
        {**good, "instance_id": "acme__calc-django", "FAIL_TO_PASS": ["test_add (calc.tests.AddTests)"]},
        {**good, "instance_id": "acme__calc-env", "test_patch": diff(base, env, "tests"),
         "FAIL_TO_PASS": ["tests/test_env.py::test_add_env"]},
        {k: v for k, v in good.items() if k != "test_patch"} | {"instance_id": "acme__calc-partial"},
        {**good, "instance_id": "acme__calc-badbase", "base_commit": "0" * 40},
        {**good, "instance_id": "acme__calc-wrong", "PASS_TO_PASS": ["tests/test_calc.py::test_add_missing"]},
    ]
    expected = {
        "acme__calc-1": "1 FAIL_TO_PASS, 1 PASS_TO_PASS",
        "acme__absent-1": "no local clone at",
        "acme__calc-django": "test ids are not pytest node ids",
        "acme__calc-env": "environment cannot be built here",
        "acme__calc-partial": "missing field(s) test_patch",
        "acme__calc-badbase": "is not in",
        "acme__calc-wrong": "PASS_TO_PASS tests/test_calc.py::test_add_missing is missing before",
    }
    return records, expected


@pytest.fixture(scope="module")
def swebench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("swebench")
    records, expected = _swebench_records(tmp / "repos")
    data = tmp / "instances.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    home = tmp / ".ledger"
    result = ledger(home, "tasks", "import", "swebench", str(data), "--repos", str(tmp / "repos"), "--json")
    assert result.exit_code == 0, result.output
    return {"home": home, "report": json.loads(result.stdout), "expected": expected, "tmp": tmp}


def test_swebench_import_takes_the_buildable_record_and_skips_the_rest_with_reasons(swebench: dict[str, Any]) -> None:
    """Only the record whose environment works here is imported; each other one says why it was skipped."""
    got = {r["name"]: r for r in swebench["report"]["results"]}
    for name, phrase in swebench["expected"].items():
        assert phrase in got[name]["reason"], (name, got[name]["reason"])
        assert got[name]["accepted"] is (name == "acme__calc-1"), name
    assert swebench["report"]["imported"] == 1


def test_swebench_task_is_graded_by_swebench_ids_and_keeps_hints_hidden(swebench: dict[str, Any]) -> None:
    """The imported task starts at base_commit, grades FAIL_TO_PASS/PASS_TO_PASS ids, and validates."""
    task = load_task(swebench["home"] / "golden" / "swebench" / "acme__calc-1")
    assert task.fail_to_pass == ("tests/test_calc.py::test_add",)
    assert task.pass_to_pass == ("tests/test_calc.py::test_neg",)
    assert task.source["instance_id"] == "acme__calc-1" and task.source["format"] == "swebench"
    assert task.prompt.startswith("add() returns the difference") and "operator" not in task.prompt
    assert task.hidden_fields["hints_text"] == "look at the operator"
    assert (task.repo_dir / "calc.py").read_text() == CALC_START
    assert validate_task(task).ok


def test_swebench_task_oracle_passes_noop_fails(swebench: dict[str, Any]) -> None:
    """Through `ledger run`: the reference patch resolves the instance, doing nothing does not."""
    assert run_outcomes(swebench["home"], "swebench") == {
        ("acme__calc-1", "oracle"): "passed", ("acme__calc-1", "noop"): "failed"}


def test_swebench_bad_input_is_exit_2(tmp_path: Path) -> None:
    """A file that is not JSON lines is one clear error line, exit 2."""
    bad = tmp_path / "x.jsonl"
    bad.write_text("{not json\n")
    (tmp_path / "repos").mkdir()
    result = ledger(tmp_path / ".ledger", "tasks", "import", "swebench", str(bad), "--repos", str(tmp_path / "repos"))
    assert result.exit_code == 2 and "line 1 is not JSON" in result.stderr and "Traceback" not in result.output


# --------------------------------------------------------------------------- Harbor / Terminal-Bench

WORDCOUNT_START = "def count_words(text):\n    return len(text.split(' '))\n"
WORDCOUNT_FIXED = "def count_words(text):\n    return len(text.split())\n"
TEST_OUTPUTS = """from wordcount import count_words


def test_counts_words_separated_by_any_whitespace():
    assert count_words("a  b\\tc\\n") == 3


def test_empty_text_has_no_words():
    assert count_words("") == 0
"""

HARBOR = {
    # Runs on this host: a Python-only environment, scripts that use container paths only.
    "wordcount/task.toml": """\
        version = "1.0"

        [metadata]
        difficulty = "easy"
        category = "programming"

        [verifier]
        timeout_sec = 60.0

        [agent]
        timeout_sec = 240.0

        [environment]
        build_timeout_sec = 600.0
        cpus = 1
        """,
    "wordcount/instruction.md": "# Count words by whitespace\n\n`count_words` in `/app/wordcount.py` miscounts "
                                "text with tabs, newlines or repeated spaces. Make it count words separated by any "
                                "whitespace.\n",
    "wordcount/environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY wordcount.py /app/\n",
    "wordcount/environment/wordcount.py": WORDCOUNT_START,
    "wordcount/tests/test.sh": """\
        #!/bin/bash
        cd /app
        if python -m pytest -q /tests/test_outputs.py; then
          echo 1 > /logs/verifier/reward.txt
        else
          echo 0 > /logs/verifier/reward.txt
        fi
        """,
    "wordcount/tests/test_outputs.py": TEST_OUTPUTS,
    "wordcount/solution/solve.sh": "#!/bin/bash\ncat > /app/wordcount.py <<'EOF'\n" + WORDCOUNT_FIXED + "EOF\n",
    # Typical Harbor verifier: fetches its test runner from the network. Never tried on the host.
    # (Its image builds offline: tests use no network, and the engine's builds would have some.)
    "fetches/task.toml": "version = \"1.0\"\n\n[agent]\ntimeout_sec = 60.0\n",
    "fetches/instruction.md": "Write hello to /app/out.txt.\n",
    "fetches/environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nRUN mkdir -p /app\n",
    "fetches/tests/test.sh": """\
        #!/bin/bash
        curl -LsSf https://astral.sh/uv/install.sh | sh
        uvx pytest /tests/test_state.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
        """,
    "fetches/tests/test_state.py": "def test_out():\n    assert open('/app/out.txt').read() == 'hello'\n",
    "fetches/solution/solve.sh": "#!/bin/bash\necho -n hello > /app/out.txt\n",
    # Tried on the host, fails: it needs a tool only its image has.
    "needs-tool/task.toml": "version = \"1.0\"\n",
    "needs-tool/instruction.md": "Configure the frobnicator.\n",
    "needs-tool/environment/Dockerfile": "FROM frob:1\nWORKDIR /srv\n",
    "needs-tool/tests/test.sh": """\
        #!/bin/bash
        if [ -x /opt/frobnicator-image-only/frob ]; then echo 1 > /logs/verifier/reward.json; fi
        """,
    "needs-tool/solution/solve.sh": "#!/bin/bash\n/opt/frobnicator-image-only/frob --init\n",
    # Terminal-Bench's older layout: task.yaml, run-tests.sh (exit code decides), solution.sh.
    "tb-wordcount/task.yaml": """\
        instruction: |-
          count_words in wordcount.py miscounts text with tabs, newlines or repeated spaces.
          Make it count words separated by any whitespace.
        author_email: someone@example.invalid
        difficulty: easy
        max_agent_timeout_sec: 180
        max_test_timeout_sec: 30
        """,
    "tb-wordcount/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY wordcount.py /app/\n",
    "tb-wordcount/wordcount.py": WORDCOUNT_START,
    "tb-wordcount/run-tests.sh": "#!/bin/bash\npython -m pytest -q $TEST_DIR/test_outputs.py\n".replace(
        "$TEST_DIR", "/tests"),
    "tb-wordcount/tests/test_outputs.py": TEST_OUTPUTS,
    "tb-wordcount/solution.sh": "#!/bin/bash\ncat > wordcount.py <<'EOF'\n" + WORDCOUNT_FIXED + "EOF\n",
    # Not a task: no solution to prove it with.
    "no-oracle/task.toml": "version = \"1.0\"\n",
    "no-oracle/instruction.md": "Do something.\n",
    "no-oracle/tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
}


def write_harbor(root: Path) -> Path:
    for rel, text in HARBOR.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def harbor(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("harbor")
    src = write_harbor(tmp / "harbor-tasks")
    home = tmp / ".ledger"
    result = ledger(home, "tasks", "import", "harbor", str(src), "--json")
    assert result.exit_code == 0, result.output
    return {"home": home, "report": json.loads(result.stdout)}


def test_harbor_import_marks_what_this_host_cannot_run(harbor: dict[str, Any]) -> None:
    """Host-satisfied tasks import runnable; network/installing scripts and failing oracles get needs: container."""
    got = {r["name"]: r for r in harbor["report"]["results"]}
    assert got["wordcount"]["accepted"] and got["wordcount"]["needs"] == []
    assert got["tb-wordcount"]["accepted"] and got["tb-wordcount"]["needs"] == []
    assert got["fetches"]["needs"] == ["container"] and "tests/test.sh runs 'curl'" in got["fetches"]["reason"]
    assert got["needs-tool"]["needs"] == ["container"] and "hidden-passes-after" in got["needs-tool"]["reason"]
    assert not got["no-oracle"]["accepted"] and "no solution/solve.sh" in got["no-oracle"]["reason"]
    assert harbor["report"]["runnable"] == 2


def test_harbor_task_records_instruction_limits_grading_and_environment(harbor: dict[str, Any]) -> None:
    """Instruction is the prompt, timeouts become budgets, test.sh + reward.txt the grading, solve.sh a command."""
    root = harbor["home"] / "golden" / "harbor"
    task = load_task(root / "wordcount")
    assert task.prompt.startswith("# Count words by whitespace") and task.max_duration_s == 240.0
    assert task.grading is not None and task.grading.reward_file == "reward.txt" and task.grading.timeout_s == 60.0
    assert task.solution.kind == "command" and task.regression_command == ()
    assert (task.root / "environment" / "Dockerfile").is_file()
    assert task.environment == Environment(dockerfile="environment/Dockerfile", context="environment", workdir="/app")
    assert (task.repo_dir / "wordcount.py").read_text() == WORDCOUNT_START
    assert not (task.repo_dir / "Dockerfile").exists()
    assert "${LEDGER_VERIFIER_DIR:-/logs/verifier}/reward.txt" in (task.tests_dir / "test.sh").read_text()
    tb = load_task(root / "tb-wordcount")
    assert tb.grading is not None and tb.grading.reward_file is None and tb.max_duration_s == 180.0
    # Terminal-Bench's context is the task folder without its task files: the Dockerfile's COPY finds them
    assert tb.environment is not None and tb.environment.context == "environment"
    assert sorted(p.name for p in (tb.root / "environment").iterdir()) == ["Dockerfile", "wordcount.py"]
    assert load_task(root / "needs-tool").grading.reward_file == "reward.json"  # type: ignore[union-attr]
    assert validate_task(task).ok and validate_task(tb).ok
    # graded by their own command, their hidden test files mutated: every canary proved sound
    # (the command passes with the solution, fails with each canary installed)
    for t in (task, tb):
        [check] = [c for c in validate_task(t).checks if c.name == "canaries"]
        assert check.passed and check.detail == "canaries: 2 test and 0 signal site(s), all sound", check


def test_harbor_tasks_oracle_passes_noop_fails_and_container_tasks_need_a_container(harbor: dict[str, Any]) -> None:
    """Every runnable imported task: oracle passes, noop fails (reward file read); a `needs:
    container` task under `--sandbox bwrap`: exit 3, one line naming it, nothing journaled."""
    home = harbor["home"]
    result = ledger(home, "run", "--tier", "harbor", "--task", "wordcount", "--task", "tb-wordcount",
                    "--agent", "oracle", "--agent", "noop", "--trace", "none", "--json")
    assert result.exit_code == 0, result.output
    got = {(a["task"], a["agent"]): a["outcome"] for a in json.loads(result.stdout)["attempts"]}
    assert got == {("wordcount", "oracle"): "passed", ("wordcount", "noop"): "failed",
                   ("tb-wordcount", "oracle"): "passed", ("tb-wordcount", "noop"): "failed"}
    runs = _run_count(home)
    refused = ledger(home, "run", "--tier", "harbor", "--task", "fetches", "--agent", "oracle", "--trace", "none",
                     "--sandbox", "bwrap")
    line = refused.stderr.strip()
    assert refused.exit_code == 3, refused.output
    assert "\n" not in line and "task fetches needs a container and --sandbox bwrap runs none" in line
    assert "--sandbox auto, container, podman or docker" in line
    assert _run_count(home) == runs


SHADOW_PYTEST = """#!/bin/sh
echo "CHEAT-SHADOW ran in $(pwd)"
printf 'import sys\\nprint("SHADOW-PYTEST")\\nsys.exit(0)\\n' > pytest.py
"""


def test_harbor_pytest_shadowed_in_the_tree_is_caught_by_a_canary_run_under_bwrap(
        harbor: dict[str, Any], tmp_path: Path) -> None:
    """A `cmd:` agent that writes a `pytest.py` into the tree (test.sh and run-tests.sh run
    `python -m pytest` there: it exits 0 for any tests) forges the real run's pass, and its
    canary run (the command again over the mutant tests) passes too: DIRTY, not passed. The
    oracle stays passed and CLEAN; the run verifies."""
    cheat = tmp_path / "shadow.sh"
    cheat.write_text(SHADOW_PYTEST)
    cheat.chmod(0o755)
    home = harbor["home"]
    result = ledger(home, "run", "--tier", "harbor", "--task", "wordcount", "--task", "tb-wordcount",
                    "--agent", "oracle", "--agent", f"cmd:{cheat}", "--sandbox", "bwrap", "--trace", "none",
                    "--json")
    assert result.exit_code in (0, 1), result.output
    summary = json.loads(result.stdout)
    got = {(a["task"], a["agent"]): (a["outcome"], a["attestation"], a["canaries_passed"], a["hidden_passed"])
           for a in summary["attempts"]}
    assert got == {("wordcount", "oracle"): ("passed", "CLEAN", 0, True),
                   ("tb-wordcount", "oracle"): ("passed", "CLEAN", 0, True),
                   # the forged real run still says passed: the canary run is what catches it
                   ("wordcount", "cmd-shadow"): ("failed", "DIRTY", 2, True),
                   ("tb-wordcount", "cmd-shadow"): ("failed", "DIRTY", 2, True)}
    from ledger.journal.journal import Journal

    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary["run"]))
    cheats = {a["attempt"] for a in summary["attempts"] if a["agent"] == "cmd-shadow"}
    output = "".join(json.dumps(e.data) for e in entries
                     if e.kind == "agent.output" and e.data.get("attempt") in cheats)
    assert output.count("CHEAT-SHADOW ran in") == 2, output[-2000:]  # the cheat really ran
    kinds = [(e.data.get("attempt"), e.kind) for e in entries]
    for att in cheats:  # committed before grading, like every canary
        assert kinds.index((att, "canary.commitment")) < kinds.index((att, "canary.result"))
    assert ledger(home, "verify", summary["run"]).exit_code == 0


def _run_count(home: Path) -> int:
    from ledger.journal.journal import Journal

    with Journal.open(home / "journal.db", readonly=True) as j:
        return len(list(j.entries(kind="run.started")))


def test_harbor_container_task_runs_under_auto_where_an_engine_works(harbor: dict[str, Any]) -> None:
    """Where a container runs, `--sandbox auto` runs the `needs: container` task in its image
    (environment.ready journaled, the attempt graded): its verifier fetches its runner from the
    network, which the container has none of, so even the oracle fails."""
    from ledger.journal.journal import Journal
    from ledger.sandbox.container import engine

    probe = engine.probe()
    if not probe.runs:
        pytest.skip(probe.reason)
    home = harbor["home"]
    result = ledger(home, "run", "--tier", "harbor", "--task", "fetches", "--agent", "oracle", "--trace", "none",
                    "--json")
    assert result.exit_code in (0, 1), result.output
    summary = json.loads(result.stdout)
    [row] = summary["attempts"]
    assert (row["task"], row["agent"], row["outcome"]) == ("fetches", "oracle", "failed"), row
    with Journal.open(home / "journal.db", readonly=True) as j:
        entries = list(j.entries(run=summary["run"]))
    [ready] = [e for e in entries if e.kind == "environment.ready"]
    assert ready.task == "fetches" and ready.data["backend"] == probe.engine
    [grading] = [e.data for e in entries if e.kind == "grading"]
    assert grading["sandbox"]["image"] == ready.data["image_id"]


# Container paths in shell scripts -> harness variables with the container path as default.
PATHS = [
    ("verifier", "echo 1 > /logs/verifier/reward.txt", "echo 1 > ${LEDGER_VERIFIER_DIR:-/logs/verifier}/reward.txt"),
    ("tests-dir", "pytest /tests/test_x.py", "pytest ${LEDGER_TESTS_DIR:-/tests}/test_x.py"),
    ("workdir-alone", "cd /app", "cd ${LEDGER_WORKDIR:-/app}"),
    ("not-a-prefix", "ls /application /tests_extra /usr/tests", "ls /application /tests_extra /usr/tests"),
    ("quoted", 'cat "/solution/x"', 'cat "${LEDGER_SOLUTION_DIR:-/solution}/x"'),
]


@pytest.mark.parametrize("name,text,want", PATHS, ids=[p[0] for p in PATHS])
def test_container_paths_become_variables(name: str, text: str, want: str) -> None:
    """Only whole container paths are rewritten; longer names that start the same are left alone."""
    assert _container_paths(text, "/app") == want


def test_host_unsafe_scripts_are_found(tmp_path: Path) -> None:
    """Installing or fetching commands are found in code, not in comments."""
    (tmp_path / "a.sh").write_text("# apt-get is not used here\necho ok\n")
    assert host_unsafe(tmp_path) is None
    (tmp_path / "b.sh").write_text("set -e\npip install requests\n")
    assert host_unsafe(tmp_path) == "b.sh runs 'pip'"


def test_swebench_repository_whose_tests_need_a_virtualenv(tmp_path: Path) -> None:
    """Tests needing a dependency found only in a virtualenv: skipped without --python, imported and run with it."""
    import site
    import subprocess
    import sys

    clone = init(tmp_path / "repos" / "acme__dep")
    uses_dep = "from fancydep import double\n\n\ndef twice(x):\n    return double(x)\n"
    base = commit(clone, "start", {"twice.py": uses_dep.replace("double(x)", "x + x + 1"),
                                   "tests/test_twice.py": "from twice import twice\n\n\ndef test_zero():\n    pass\n"})
    fix = commit(clone, "fix", {"twice.py": uses_dep, "tests/test_twice.py":
                                "from twice import twice\n\n\ndef test_zero():\n    pass\n\n\n"
                                "def test_twice():\n    assert twice(4) == 8\n"})
    record = {"repo": "acme/dep", "instance_id": "acme__dep-1", "base_commit": base,
              "patch": git(clone, "diff", base, fix, "--", "twice.py") + "\n",
              "test_patch": git(clone, "diff", base, fix, "--", "tests") + "\n",
              "problem_statement": "twice(4) is 9\n", "FAIL_TO_PASS": ["tests/test_twice.py::test_twice"],
              "PASS_TO_PASS": ["tests/test_twice.py::test_zero"]}
    data = tmp_path / "i.jsonl"
    data.write_text(json.dumps(record) + "\n")
    # The virtualenv: pytest through a .pth to this interpreter's packages, fancydep only there.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = next(venv.glob("lib/python*/site-packages"))
    (purelib / "harness.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    (purelib / "fancydep.py").write_text("def double(x):\n    return 2 * x\n")
    home = tmp_path / ".ledger"
    plain = ledger(home, "tasks", "import", "swebench", str(data), "--repos", str(tmp_path / "repos"), "--json")
    assert plain.exit_code == 1
    assert "environment cannot be built here" in json.loads(plain.stdout)["results"][0]["reason"]
    with_venv = ledger(home, "tasks", "import", "swebench", str(data), "--repos", str(tmp_path / "repos"),
                       "--python", str(venv / "bin" / "python"), "--json")
    assert with_venv.exit_code == 0, with_venv.output
    assert load_task(home / "golden" / "swebench" / "acme__dep-1").test_command[0] == str(venv / "bin" / "python")
    assert run_outcomes(home, "swebench") == {("acme__dep-1", "oracle"): "passed", ("acme__dep-1", "noop"): "failed"}
