"""The bench's agents and checks run in boxes of the Sandbox port: the ledger folder (keys,
journal) is hidden from them. Each attacker reports what it tried, and the test finds that report
in the journal (or the check's output), so a box that killed every agent could not pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.bench import checks
from ledger.bench.confine import confinement
from ledger.bench.inputs import task_from_prompt
from ledger.bench.runner import BenchOptions, run_bench
from ledger.errors import NothingToRun
from ledger.home import LedgerHome
from tests.bench.conftest import BenchEnv


def _bwrap() -> None:
    try:
        confinement((), "bwrap")
    except NothingToRun as exc:
        pytest.skip(f"no bubblewrap here: {exc}")


def _attack(env: BenchEnv, sandbox: str) -> tuple[str, Path]:
    key = env.ledger / "keys" / "master.key"  # made by the bench's session before any agent runs
    env.fakes(claude={"code": f"attack:{key}"})
    opts = BenchOptions(agents=("claude",), judges=("offline",), timeout_s=60, sandbox=sandbox)
    run_bench(LedgerHome(env.ledger), task_from_prompt("Write add(a, b)"), opts)
    (response,) = [e.data for e in env.entries("bench.response")]
    return str(response["text"]), key


def test_a_bench_agent_cannot_read_the_ledger_keys(env: BenchEnv) -> None:
    _bwrap()
    text, key = _attack(env, "bwrap")
    assert "ATTACKER RAN" in text  # it ran, in the box, and answered
    assert f"read {key}: FileNotFoundError" in text or f"read {key}: PermissionError" in text
    assert "GOT" not in text and "WROTE" not in text
    assert not (key.parent / "planted").exists()
    secret = key.read_text(encoding="ascii").strip()
    with env.journal() as j:
        assert all(secret not in repr(e.data) for e in j.entries())
    (started,) = [e.data for e in env.entries("bench.started")]
    assert started["sandbox"]["backend"] == "bwrap"


def test_without_a_sandbox_the_same_attack_reads_the_keys(env: BenchEnv) -> None:
    """The control: the attack is real (``--sandbox none`` confines nothing)."""
    text, key = _attack(env, "none")
    assert f"read {key}: GOT 65 bytes" in text
    assert (key.parent / "planted").exists()


def test_an_agents_own_tests_cannot_read_the_ledger(tmp_path: Path) -> None:
    _bwrap()
    ledger = tmp_path / ".ledger"
    (ledger / "keys").mkdir(parents=True)
    key = ledger / "keys" / "master.key"
    key.write_text("ab" * 32 + "\n", encoding="ascii")
    test = ("import os\n\n\ndef test_steal():\n    tried = []\n"
            f"    for path in ({str(key)!r}, {str(ledger)!r}):\n"
            "        try:\n"
            "            tried.append(path + ' GOT ' + repr(open(path).read()[:8]) if os.path.isfile(path)\n"
            "                         else path + ' LISTED ' + repr(os.listdir(path)))\n"
            "        except OSError as exc:\n"
            "            tried.append(path + ' ' + type(exc).__name__)\n"
            "    assert False, 'ATTACKER RAN: ' + '; '.join(tried)\n")
    res = checks.run_agent_tests({"solution.py": "x = 1\n"}, {"test_steal.py": test}, "python",
                                 timeout=60, confine=confinement([str(ledger)], "bwrap"))
    assert res["ran"] and res["counts"]["failed"] == 1
    said = [ln for ln in res["output"].splitlines()
            if ln.startswith("E ") and "AssertionError: ATTACKER RAN: " in ln]
    assert said, res["output"]  # the attacker's own report (not its source in the traceback)
    report = said[-1]
    assert f"{key} FileNotFoundError" in report or f"{key} PermissionError" in report
    assert "GOT" not in report and "LISTED" not in report


def test_a_check_box_that_cannot_start_is_an_error_never_a_pass(tmp_path: Path) -> None:
    """A command the box cannot start (a folder that is not there) gives no passing result."""
    _bwrap()
    box_conf = confinement([], "bwrap")
    with checks.CheckFolder(box_conf) as box:
        code, _wall, _timed_out, out = box.run(["/nonexistent/program"], 30, "x")
    assert code != 0 and out


def test_a_boxed_bench_agent_reaches_only_its_declared_endpoint(env: BenchEnv) -> None:
    """Through the box's proxy the agent reaches the model endpoint it declares (a loopback one,
    at its own URL), and is refused anything else; its answer says both."""
    import sys

    from tests.local_http import CountingServer

    _bwrap()
    with CountingServer(b"stand-in model") as model:
        script = env.root / "bot.py"
        script.write_text(
            "import urllib.request\n"
            f"print('model said:', urllib.request.urlopen('http://127.0.0.1:{model.port}/v1',"
            " timeout=10).read().decode())\n"
            "try:\n"
            "    urllib.request.urlopen('https://denied.example.test/', timeout=10)\n"
            "    print('denied host: REACHED')\n"
            "except OSError as exc:\n"
            "    print('denied host: refused', type(exc).__name__)\n", encoding="utf-8")
        (env.root / "ledger.toml").write_text(
            f'[agents.bot]\ncommand = ["{sys.executable}", "{script}"]\n'
            f'endpoints = ["127.0.0.1:{model.port}"]\n', encoding="utf-8")
        opts = BenchOptions(agents=("bot",), judges=("offline",), timeout_s=60, sandbox="bwrap")
        run_bench(LedgerHome(env.ledger), task_from_prompt("Say hello"), opts)
        hits = list(model.hits)
    (response,) = [e.data for e in env.entries("bench.response")]
    assert "model said: stand-in model" in response["text"], response
    assert "denied host: refused" in response["text"]
    assert hits == ["/v1"]
