"""Untrusted task sources are data, never paths to follow: a mined repository that plants a link
to the operator's keys, a Harbor or SWE-bench folder whose files are links out of the task, and a
half-written task folder that would break every later validation. Every check reads the actual
key bytes and asserts that none of them reached a task, a prompt or a worktree."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.errors import TaskError
from ledger.tasks.mine import MineOptions, mine
from tests.tasks.gitrepos import CALC_FIXED, CALC_START, TEST_ADD, TEST_NEG, commit, init


def ledger(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--ledger", str(home), *args], catch_exceptions=False)


def _keys(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """An operator's ledger with real keys; returns (ledger dir, the bytes of every key file)."""
    home = tmp_path / ".ledger"
    assert ledger(home, "keys", "init").exit_code == 0
    keys = [p.read_bytes() for p in sorted((home / "keys").iterdir()) if p.is_file()]
    assert keys and all(len(k) >= 16 for k in keys)
    return home, keys


def _key_bytes_under(root: Path, keys: list[bytes]) -> list[str]:
    """Every file under ``root`` (links followed, as a later reader would) holding a key."""
    hits = []
    for dirpath, _dirs, files in os.walk(root, followlinks=True):
        for name in files:
            path = Path(dirpath) / name
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if any(k.strip() in data for k in keys):
                hits.append(str(path))
    return hits


def _planting_conftest(target: str, *, dangling: bool = False) -> str:
    """A conftest that, when the miner runs the commit's tests, plants ``start/x -> target`` in
    the mining scratch (the exported starting tree's folder) and says so in a test outcome."""
    return f'''import os
from pathlib import Path

START = Path(__file__).resolve().parents[2] / "start"


def _plant():
    try:
        os.symlink({target!r}, START / "x")
    except FileExistsError:
        pass
    return os.path.islink(START / "x")


PLANTED = _plant()
'''


TEST_PLANTED = TEST_ADD + '''

def test_the_link_was_planted():
    from conftest import PLANTED
    assert PLANTED
'''


def _planting_repo(root: Path, target: str) -> tuple[Path, str]:
    repo = init(root)
    commit(repo, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})
    fix = commit(repo, "Fix add", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_PLANTED,
                                   "tests/conftest.py": _planting_conftest(target)})
    return repo, fix


def test_mined_repository_planting_a_link_to_the_keys_gets_no_key_byte(tmp_path: Path) -> None:
    """The fix commit's conftest plants ``start/x -> <ledger>/keys`` while the miner runs its
    tests: the task is mined (its PASS_TO_PASS shows the planting test passed, so the attacker
    ran) and no file of it, its repo/ or its prompt holds a byte of any key."""
    home, keys = _keys(tmp_path)
    repo, fix = _planting_repo(tmp_path / "repo", str(home / "keys"))
    out = tmp_path / "golden"
    report = mine(MineOptions(repo=repo, commits=(fix,), out=out, validate=False))
    (result,) = report.results
    assert result.accepted, result.reason
    task_md = (Path(result.folder) / "task.md").read_text()
    assert "tests/test_calc.py::test_the_link_was_planted" in task_md  # the attacker ran
    assert not (Path(result.folder) / "repo" / "x").exists()
    assert _key_bytes_under(out, keys) == []


def test_dangling_planted_link_leaves_no_half_written_task(tmp_path: Path) -> None:
    """A planted link to nowhere: the mined task is whole (or nothing), and a later
    `tasks validate --tier mined` of the folder is not broken by a half-written one."""
    repo, fix = _planting_repo(tmp_path / "repo", str(tmp_path / "nowhere" / "gone"))
    home = tmp_path / ".ledger"
    report = mine(MineOptions(repo=repo, commits=(fix,), out=home / "golden", tier="mined",
                              validate=False))
    (result,) = report.results
    assert result.accepted, result.reason
    tier = home / "golden" / "mined"
    assert sorted(p.name for p in tier.iterdir()) == [Path(result.folder).name]
    listed = ledger(home, "tasks", "list", "--tier", "mined")
    assert listed.exit_code == 0, listed.output


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails while the task folder is written (here: the export, after writing part of
    it), neither the task folder nor its temporary sibling remains."""
    from ledger.tasks import mine as mine_mod

    real = mine_mod.export_tree
    calls = {"n": 0}

    def failing(repo: Path, commit_id: str, dest: Path) -> None:
        calls["n"] += 1
        real(repo, commit_id, dest)
        if dest.name == "repo":  # the task's own export, not the scratch copy
            (dest / "partial.txt").write_text("half")
            raise TaskError("disk full (simulated)")

    monkeypatch.setattr(mine_mod, "export_tree", failing)
    repo = init(tmp_path / "repo")
    commit(repo, "start", {"calc.py": CALC_START, "tests/test_calc.py": TEST_NEG})
    fix = commit(repo, "Fix add", {"calc.py": CALC_FIXED, "tests/test_calc.py": TEST_ADD})
    out = tmp_path / "golden"
    report = mine(MineOptions(repo=repo, commits=(fix,), out=out, validate=False))
    (result,) = report.results
    assert not result.accepted and "disk full" in result.reason
    assert calls["n"] == 2
    assert list((out / "mined").iterdir()) == []


def _harbor_wordcount(root: Path) -> Path:
    import textwrap

    from tests.tasks.test_importers import HARBOR

    for rel, text in HARBOR.items():
        if rel.startswith("wordcount/"):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
    return root / "wordcount"


@pytest.mark.parametrize("linked", ["instruction.md", "task.toml", "tests/test.sh",
                                    "solution/solve.sh", "environment/wordcount.py"])
def test_harbor_file_that_links_to_the_keys_is_refused(tmp_path: Path, linked: str) -> None:
    """A Harbor task whose file is a link to ``../../.ledger/keys/signing.key``: the import refuses
    the task naming the file, and no key byte reaches any task, prompt or listing."""
    home, keys = _keys(tmp_path)
    src = _harbor_wordcount(tmp_path / "harbor")
    (src / linked).unlink()
    target = os.path.relpath(home / "keys" / "signing.key", (src / linked).parent)
    (src / linked).symlink_to(target)
    assert (src / linked).read_bytes() == (home / "keys" / "signing.key").read_bytes()  # it bites
    result = ledger(home, "tasks", "import", "harbor", str(src), "--json")
    assert result.exit_code == 1
    assert linked in result.output and "link" in result.output
    assert all(k.strip().decode(errors="replace") not in result.output for k in keys)
    assert not (home / "golden" / "harbor").exists() or _key_bytes_under(home / "golden", keys) == []
    shown = ledger(home, "tasks", "list", "--tier", "harbor", "--json")
    assert all(k.strip().decode(errors="replace") not in shown.output for k in keys)


@pytest.mark.parametrize("target", ["signing-key", "outside-md"])
def test_task_file_that_is_a_link_is_refused_by_the_loader(tmp_path: Path, target: str) -> None:
    """A task folder (already in a tier) whose task.md is a link out of it (to the signing key, or
    to a well-formed task.md elsewhere): `tasks show`, `tasks list` and `tasks validate` refuse it
    naming the file; no key byte printed."""
    home, keys = _keys(tmp_path)
    task = home / "golden" / "mini" / "evil"
    for rel, text in {"repo/x.py": "X = 1\n", "tests/test_x.py": "def test_x():\n    pass\n",
                      "solution/x.py": "X = 2\n"}.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(text)
    outside = tmp_path / "outside.md"
    outside.write_text("---\nid: evil\ntitle: Evil\ntier: mini\n---\nSECRET-PROMPT-OUTSIDE\n")
    (task / "task.md").symlink_to(home / "keys" / "signing.key" if target == "signing-key" else outside)
    for args in (["tasks", "show", "evil"], ["tasks", "list", "--tier", "mini"],
                 ["tasks", "validate", "--tier", "mini"]):
        out = ledger(home, *args)
        assert out.exit_code == 2, (args, out.output)
        assert "task.md" in out.output and "link" in out.output, out.output
        assert all(k.strip().decode(errors="replace") not in out.output for k in keys)
        assert "SECRET-PROMPT-OUTSIDE" not in out.output


def test_imported_harbor_task_validates_in_the_default_sandbox(tmp_path: Path) -> None:
    """An imported host-runnable Harbor task passes `tasks validate --tier harbor` with the default
    `--sandbox auto`: its solve.sh is readable to the oracle's step (it exited 127 before)."""
    from ledger.sandbox import resolve

    if resolve("auto").mode == "none":
        pytest.skip("no sandbox backend is usable on this host")
    home = tmp_path / ".ledger"
    src = _harbor_wordcount(tmp_path / "harbor")
    imported = ledger(home, "tasks", "import", "harbor", str(src), "--json")
    assert imported.exit_code == 0, imported.output
    result = ledger(home, "tasks", "validate", "--tier", "harbor", "--json")
    assert result.exit_code == 0, result.output
