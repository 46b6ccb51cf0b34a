"""The CLI agrees with itself (issue 24): the documented exit codes on usage and error paths, one
line for every bad output path (no traceback, no stray file), one spelling of `-o/--output`,
`--open` without a browser is an error, and every command's help is in docs/CLI.md.

Each case is data: the arguments, the exit code, and a phrase of the one error line.
"""

from __future__ import annotations

import re
import webbrowser
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from tests.view.fixtures import RUN, build, write

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("onecli") / "L"
    h.mkdir()
    return write(h, build())


def invoke(home: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    return res.exit_code, res.stdout, res.stderr


# (id, argv with {tmp} for a scratch folder and {run} for the run, exit code, phrase on stderr)
BAD_OUTPUT = [
    ("export-missing-folder", ["export", "{run}", "-o", "{tmp}/no/such/x.bundle"], 2, "does not exist"),
    ("export-a-folder", ["export", "{run}", "-o", "{tmp}"], 2, "is a folder"),
    ("export-inspect-a-folder", ["export", "{run}", "--format", "inspect", "-o", "{tmp}"], 2, "is a folder"),
    ("view-missing-folder", ["view", "-o", "{tmp}/no/such/r.html"], 2, "does not exist"),
    ("view-a-folder", ["view", "-o", "{tmp}"], 2, "is a folder"),
    ("attest-export-missing-folder", ["attest", "export", "--all", "{run}", "-o", "{tmp}/no/such"], 2,
     "does not exist"),
]


@pytest.mark.parametrize("args,code,phrase", [c[1:] for c in BAD_OUTPUT], ids=[c[0] for c in BAD_OUTPUT])
def test_bad_output_path_is_one_line(home: Path, tmp_path: Path, args: list[str], code: int,
                                     phrase: str) -> None:
    """A bad -o path: the documented code, one line naming the problem, nothing left behind."""
    before = set(tmp_path.rglob("*"))
    got, _out, err = invoke(home, *(a.format(tmp=tmp_path, run=RUN) for a in args))
    assert got == code, err
    assert phrase in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert set(tmp_path.rglob("*")) == before  # no stray temporary file


USAGE = [  # usage errors are 2, unknown ids are 2, a check that fails is 1 (docs/CLI.md)
    ("report-unknown-run", ["report", "r-nope"], 2),
    ("failures-unknown-run", ["failures", "r-nope"], 2),
    ("compare-missing-arg", ["compare", RUN], 2),
    ("view-unknown-run", ["view", "r-nope", "-o", "{tmp}/x.html"], 2),
    ("export-bad-format", ["export", RUN, "-o", "{tmp}/x", "--format", "zip"], 2),
    ("log-bad-flag", ["log", "--no-such-flag"], 2),
    ("verify-bundle-without-vkey", ["verify", "--bundle", "{tmp}/b.json"], 2),
    ("attest-export-both", ["attest", "export", "abc123", "--all", RUN, "-o", "{tmp}/x"], 2),
    ("run-ray-address-local", ["run", "--executor", "local", "--ray-address", "x"], 2),
    ("bench-bad-flag", ["bench", "--no-such-flag"], 2),
    ("bench-no-agent", ["bench", "--prompt", "x", "--agent", "gemini"], 3),
]


@pytest.mark.parametrize("args,code", [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_documented_exit_codes(home: Path, tmp_path: Path, args: list[str], code: int,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each usage or error path exits with the code docs/CLI.md gives, in one line."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no agent CLI for bench to find
    (tmp_path / "b.json").write_text("{}")
    got, _out, err = invoke(home, *(a.format(tmp=tmp_path) for a in args))
    assert got == code, err
    assert "Traceback" not in err


def test_export_and_view_spell_the_output_option_alike(home: Path, tmp_path: Path) -> None:
    """`-o/--output` on both (export keeps `--out` as an older spelling)."""
    for spelling in ("-o", "--output", "--out"):
        out = tmp_path / f"b{spelling}.bundle"
        assert invoke(home, "export", RUN, spelling, str(out))[0] == 0 and out.exists()
    out = tmp_path / "r.html"
    assert invoke(home, "view", "--output", str(out))[0] == 0 and out.exists()


def test_view_open_without_a_browser_says_so(home: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`view --open` where no browser starts: exit 1, one line naming the written page."""
    monkeypatch.setattr(webbrowser, "open", lambda *a, **k: False)
    out = tmp_path / "r.html"
    code, _out, err = invoke(home, "view", "-o", str(out), "--open")
    assert code == 1 and "no browser" in err and str(out) in err and out.exists()


def _commands() -> list[str]:
    names = []
    for name, cmd in sorted(cli.all_commands().items()):  # type: ignore[attr-defined]
        if getattr(cmd, "hidden", False):
            continue
        subs = getattr(cmd, "commands", None)
        names += [f"{name} {s}" for s in sorted(subs)] if subs else [name]
    return names


def test_every_command_is_in_the_cli_doc_with_its_options() -> None:
    """docs/CLI.md names every command, and every long option of the commands it documents
    that the real help lists (a new option is documented or this fails)."""
    doc = (ROOT / "docs" / "CLI.md").read_text()
    flat = re.sub(r"\\\|", "|", doc)  # `ledger tasks list|show|validate` names all three
    spelled = set(re.findall(r"ledger ([a-z][a-z-]*)", flat))
    spelled |= set(re.findall(r"ledger ([a-z][a-z-]* [a-z][a-z-]*)", flat))
    for group, subs in re.findall(r"ledger ([a-z][a-z-]*) ([a-z][a-z-]*(?:\|[a-z-]+)+)", flat):
        spelled |= {f"{group} {s}" for s in subs.split("|")}
    missing = [c for c in _commands() if c not in spelled and c.split(" ")[0] not in spelled
               or (" " in c and c not in spelled)]
    assert not missing, f"commands not in docs/CLI.md: {missing}"
    for name in ("report", "failures", "compare", "view", "export"):
        res = CliRunner().invoke(cli, [name, "--help"])
        assert res.exit_code == 0
        options = set(re.findall(r"(--[a-z][a-z-]+)", res.stdout)) - {"--help"}
        rows = [line for line in doc.splitlines() if line.startswith(f"| `ledger {name}")]
        documented = set(re.findall(r"(--[a-z][a-z-]+)", "\n".join(rows)))
        assert options <= documented | {"--out", "--run"}, (name, sorted(options - documented))


def _every_command() -> list[list[str]]:
    out = []
    for name, cmd in sorted(cli.all_commands().items()):  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        if subs:
            out += [[name, s] for s in sorted(subs)]
        out.append([name])
    return out


@pytest.mark.parametrize("argv", _every_command(), ids=lambda a: " ".join(a))
def test_every_command_exits_2_on_an_unknown_option(home: Path, argv: list[str]) -> None:
    """Every command and subcommand: an unknown option is a usage error, exit 2, with no
    traceback, and `--help` is exit 0 with a description."""
    code, _out, err = invoke(home, *argv, "--definitely-not-an-option")
    assert code == 2, (argv, err)
    assert "Traceback" not in err and "definitely-not-an-option" in err
    res = CliRunner().invoke(cli, [*argv, "--help"])
    assert res.exit_code == 0 and "Usage:" in res.stdout and len(res.stdout.splitlines()) > 3


def test_log_takes_the_run_as_every_other_command_does(home: Path) -> None:
    """`ledger log RUN` (a prefix) is `ledger log --run RUN`; naming two different runs is exit 2."""
    code, by_arg, _ = invoke(home, "log", RUN[:12], "--json")
    assert code == 0 and by_arg
    code, by_opt, _ = invoke(home, "log", "--run", RUN, "--json")
    assert code == 0 and by_arg == by_opt
    code, _out, err = invoke(home, "log", RUN, "--run", "r-other")
    assert code == 2 and "name the run once" in err
