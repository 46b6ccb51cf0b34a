"""A fast CLI: the journal commands import no run, bench, task, evaluator or Ray machinery.

Each command runs in a fresh interpreter, which then lists ``sys.modules``: what is asserted is
which modules were imported, not a timing (``benchmarks/cli.py`` measures the time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from cli.main import COMMAND_MODULES, COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
# Subsystems a journal command has no business loading.
HEAVY = ("ledger.run", "ledger.bench", "ledger.tasks", "ledger.view", "evaluators", "attest",
         "ray", "rich", "yaml", "multiprocessing", "structlog", "sqlite_utils")
_PROBE = """
import json, sys
from cli.main import main
sys.argv = ["ledger", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""


def _modules(home: Path, *args: str, stdin: str | None = None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", _PROBE, "--ledger", str(home), *args],
                          capture_output=True, text=True, env=env, input=stdin, timeout=60,
                          cwd=home.parent)
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES "))
    report = json.loads(line[len("MODULES "):])
    assert report["code"] in (0, None), proc.stderr
    return set(report["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with keys and a few entries, made through the CLI itself."""
    path = tmp_path_factory.mktemp("startup") / "L"
    _modules(path, "keys", "init", "--name", "example.org/startup")
    _modules(path, "append", "ext.ev", "--data", '{"i": 1}', "--run", "r-1")
    return path


@pytest.mark.parametrize("args", [
    ("--version",),
    ("log",),
    ("log", "--json", "--kind", "ext.ev"),
    ("append", "ext.ev", "--data", '{"i": 2}', "--run", "r-1"),
    ("checkpoint",),
    ("checkpoint", "--json"),
], ids=lambda a: "-".join(x.strip("-") for x in a if not x.startswith("{")))
def test_journal_commands_import_nothing_heavy(home: Path, args: tuple[str, ...]) -> None:
    """`ledger --version|log|append|checkpoint` load no run, bench, task, Ray or evaluator code."""
    modules = _modules(home, *args)
    assert "cli.main" in modules
    assert _heavy(modules) == []


def test_version_loads_no_command_module(home: Path) -> None:
    """`ledger --version` imports no command module at all (not even the journal's)."""
    modules = _modules(home, "--version")
    assert not {m for m in modules if m.startswith("cli.") and m != "cli.main"}
    assert "ledger.journal.journal" not in modules


def test_a_run_command_still_loads_its_module(home: Path) -> None:
    """The probe sees imports: `ledger runs` does load the run's code (the check can fail)."""
    modules = _modules(home, "runs", "--json")
    assert "cli.run_cmds" in modules and any(m.startswith("ledger.run") for m in modules)


def test_every_mapped_command_is_registered_by_its_module() -> None:
    """COMMANDS names, for each command, the module that really registers it."""
    for name, module in COMMANDS.items():
        assert module in COMMAND_MODULES, module
        group = click.Group()
        __import__(module, fromlist=["register"]).register(group)
        assert name in group.commands, f"{module} does not register `ledger {name}`"


def test_help_lists_every_command_of_every_module() -> None:
    """`ledger --help` still shows every command (the lazy group loads them all for help)."""
    from click.testing import CliRunner

    res = CliRunner().invoke(cli, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in res.output or f"  {name}\n" in res.output, name
