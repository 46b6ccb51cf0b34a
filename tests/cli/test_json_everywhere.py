"""`--json` on every command that prints a result (docs/CLI.md: "Every command that prints data
takes `--json`"): the whole click tree is walked, and a representative set of commands is run on
a small signed run with `--json`, each stdout parsed as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from cli.main import cli
from tests.cli.test_report_cmds import invoke, write
from tests.cli.test_stats_cmds import RUN_1, TASKS, agents_run

# Commands without --json, each with the reason. Everything else must have it.
NO_JSON: dict[str, str] = {
    # servers: they run until stopped and print access-log lines on stderr, no result
    "serve": "serves a published directory over HTTP until stopped",
    "witness serve": "serves C2SP tlog-witness over HTTP until stopped",
}


def _leaves(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _leaves(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def _every_leaf() -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, cmd in sorted(cli.all_commands().items()):  # type: ignore[attr-defined]
        out.update(_leaves(cmd, (name,)))
    return out


def _has_json(cmd: click.Command) -> bool:
    return any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option))


def test_every_command_that_prints_a_result_takes_json() -> None:
    """Every leaf command of the tree (nested groups walked) has a --json flag, except the listed
    servers; the walk finds the commands it should (a broken walk would pass vacuously)."""
    leaves = _every_leaf()
    assert {"report", "export", "keys show", "proof inclusion", "tasks import swebench",
            "witness cosign"} <= set(leaves)
    missing = sorted(n for n, c in leaves.items() if not _has_json(c) and n not in NO_JSON)
    assert not missing, f"commands without --json (add it, or list the reason in NO_JSON): {missing}"
    for name, cmd in leaves.items():
        if _has_json(cmd):
            opt = next(p for p in cmd.params if "--json" in p.opts)
            assert isinstance(opt, click.Option) and opt.is_flag, name


def test_the_exceptions_are_real_and_still_lack_json() -> None:
    """Each listed exception is a command of the tree and has no --json (a stale entry, or one
    that gained --json, is removed from the list)."""
    leaves = _every_leaf()
    for name in NO_JSON:
        assert name in leaves, f"{name} is not a command"
        assert not _has_json(leaves[name]), f"{name} takes --json now: drop it from NO_JSON"


@pytest.fixture(scope="module")
def signed_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger with keys, one run of two agents over 14 tasks (2 repeats), a recorded view and a
    signed checkpoint over it."""
    home = tmp_path_factory.mktemp("json") / "L"
    home.mkdir()
    code, _, err = invoke(home, "keys", "init", "--name", "json.example")
    assert code == 0, err
    write(home, agents_run(RUN_1, {"alpha": set(TASKS[:9]), "beta": set(TASKS[:4])}, repeat=2))
    code, _, err = invoke(home, "checkpoint")
    assert code == 0, err
    return home


def _out(home: Path, name: str) -> str:
    return str(home.parent / name)


REPRESENTATIVE: list[tuple[str, ...]] = [
    ("runs",),
    ("report", RUN_1),
    ("failures", RUN_1),
    ("compare", "--agents", "alpha", "beta", RUN_1),
    ("replay", RUN_1),
    ("verify", "--no-remember"),
    ("checkpoint",),
    ("keys", "show"),
    ("proof", "inclusion", "3"),
    ("proof", "consistency", "2"),
    ("plan", "--detect", "0.2", "--from", RUN_1, "--agents", "alpha", "beta"),
    ("costs",),
    ("export", RUN_1, "--format", "sqlite", "-o", "@results.db"),
    ("export", RUN_1, "-o", "@bundle.json"),
    ("view", RUN_1, "-o", "@report.html"),
    ("tasks", "list", "--tier", "smoke"),
]


@pytest.mark.parametrize("argv", REPRESENTATIVE, ids=lambda a: " ".join(a[:2]))
def test_json_output_parses(signed_home: Path, argv: tuple[str, ...]) -> None:
    """The command with --json exits 0 and prints one JSON object or list on stdout, nothing
    else."""
    args = [_out(signed_home, a[1:]) if a.startswith("@") else a for a in argv]
    code, stdout, err = invoke(signed_home, *args, "--json")
    assert code == 0, (argv, err)
    value = json.loads(stdout)
    assert isinstance(value, dict | list) and value, (argv, stdout[:200])


def test_log_json_is_one_object_per_line(signed_home: Path) -> None:
    """`ledger log --json` prints JSON lines: every line an entry with its seq and leaf hash."""
    code, stdout, err = invoke(signed_home, "log", "--run", RUN_1, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert len(rows) > 50 and all({"seq", "kind", "leaf_hash"} <= set(r) for r in rows)
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


def test_witness_cosign_json(signed_home: Path, tmp_path: Path) -> None:
    """`ledger witness cosign --json` prints the cosigned checkpoint's origin, size, root and
    the note (the same note it writes with -o)."""
    wdir = tmp_path / "witness"
    code, stdout, err = invoke(signed_home, "witness", "init", "--witness-dir", str(wdir), "--json")
    assert code == 0, err
    code, cp_out, err = invoke(signed_home, "checkpoint", "--json")
    assert code == 0, err
    cp = json.loads(cp_out)
    note = tmp_path / "cp.note"
    note.write_text(cp["note"])
    out = tmp_path / "cosigned.note"
    code, stdout, err = invoke(signed_home, "witness", "cosign", str(note), "--log-vkey",
                               str(signed_home / "keys" / "signing.vkey"), "--witness-dir",
                               str(wdir), "-o", str(out), "--json")
    assert code == 0, err
    got = json.loads(stdout)
    assert (got["origin"], got["size"], got["root"]) == (cp["origin"], cp["size"], cp["root"])
    assert got["note"] == out.read_text() and got["note"].startswith(cp["note"].rstrip("\n"))
    assert got["note"].count("\n\u2014 ") == 2  # the log's signature line and the witness's
