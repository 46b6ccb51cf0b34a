"""Reserved entry kinds and the entry size limit (issue 15): outside writers append only ext.*."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.errors import UsageError
from ledger.journal.codec import MAX_ENTRY_BYTES
from ledger.journal.journal import Journal

# One case per attack from the issue: an outside writer appends a harness kind to change a result.
RESERVED_ATTACKS = {
    "appended-test-result": ("test.result", {"attempt": "r/t/a/1/1", "suite": "hidden", "passed": True}),
    "appended-signal-result": ("signal.result", {"attempt": "r/t/a/1/1", "index": 0, "passed": True}),
    "appended-view": ("view.recorded", {"evaluator": "golden", "version": "1", "view": {}}),
    "appended-fake-attestation": ("attestation", {"attempt": "r/t/a/1/1", "attestation": {"verdict": "CLEAN"}}),
    "appended-run-finished": ("run.finished", {"status": "finished"}),
    "appended-judge-verdict": ("judge.verdict", {"attempt": "r/t/a/1/1"}),
    "kind-without-name": ("ext.", {}),
    "look-alike-prefix": ("extra.note", {}),
}


def run(home: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args], input=input)
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize("name", sorted(RESERVED_ATTACKS))
def test_cli_append_refuses_reserved_kind(tmp_path: Path, name: str) -> None:
    """`ledger append` of a harness kind is exit 2 with one clear line, and writes nothing."""
    kind, data = RESERVED_ATTACKS[name]
    home = tmp_path / "L"
    assert run(home, "append", "ext.note", "--data", "{}")[0] == 0
    code, _, err = run(home, "append", kind, "--run", "r", "--data", json.dumps(data))
    assert code == 2
    assert "reserved for the harness" in err and "ext." in err and "Traceback" not in err
    code, _, err = run(home, "append", "--batch", "-",
                       input=json.dumps({"kind": "ext.ok", "data": {}}) + "\n"
                       + json.dumps({"kind": kind, "data": data, "run": "r"}) + "\n")
    assert code == 2 and "reserved for the harness" in err
    assert len(run(home, "log", "--json")[1].splitlines()) == 1


@pytest.mark.parametrize("name", sorted(RESERVED_ATTACKS))
def test_library_append_refuses_reserved_kind(tmp_path: Path, name: str) -> None:
    """The public Journal.append / append_many refuse harness kinds unless opened as the harness."""
    kind, data = RESERVED_ATTACKS[name]
    with Journal.open(tmp_path / "j.db", create=True) as j:
        with pytest.raises(UsageError, match="reserved for the harness"):
            j.append(kind, data, run="r")
        with pytest.raises(UsageError, match="reserved for the harness"):
            j.append_many([("ext.ok", {}, None, None), (kind, data, "r", None)])
        assert j.size == 0
        j.append("ext.tool.note", {"x": 1})
        assert j.size == 1


def test_harness_writer_may_append_reserved_kinds(tmp_path: Path) -> None:
    """The harness's own writer (harness=True) still appends every documented kind."""
    with Journal.open(tmp_path / "j.db", create=True, harness=True) as j:
        j.append("run.started", {"config": {}}, run="r")
        assert j.size == 1


def test_oversized_entry_is_refused(tmp_path: Path) -> None:
    """One entry over 16 MiB (here via `append --batch`) is exit 2 and the journal is unchanged."""
    home = tmp_path / "L"
    big = "x" * (MAX_ENTRY_BYTES + 1)
    code, _, err = run(home, "append", "--batch", "-",
                       input=json.dumps({"kind": "ext.big", "data": {"blob": big}}) + "\n")
    assert code == 2 and "16 MiB" in err and "Traceback" not in err
    if (home / "journal.db").exists():
        assert run(home, "log", "--json")[1] == ""
    just = "x" * (MAX_ENTRY_BYTES - 200)
    with Journal.open(tmp_path / "j.db", create=True, harness=True) as j:
        j.append("ext.ok", {"blob": just})
        with pytest.raises(UsageError, match="at most"):
            j.append("diff", {"patch": big})
        assert j.size == 1
