"""Which of the agent's changes grading applies: the drop rules as data, and the fresh tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.sandbox.grading import apply_changes, drop_reason, graded_changes

# (path, owned_files, expected reason or None): one case per rule, named by the path.
DROP_CASES = [
    ("calc.py", (), None),
    ("pkg/core.py", (), None),
    ("conftest.py", (), "test configuration or import hook"),
    ("pkg/conftest.py", (), "test configuration or import hook"),
    ("pytest.ini", (), "test configuration or import hook"),
    ("tox.ini", (), "test configuration or import hook"),
    ("setup.cfg", (), "test configuration or import hook"),
    ("sitecustomize.py", (), "test configuration or import hook"),
    ("usercustomize.py", (), "test configuration or import hook"),
    ("hook.pth", (), "import hook (.pth)"),
    ("lib/site/evil.pth", (), "import hook (.pth)"),
    ("tests/test_mul.py", (), "test file"),
    ("tests/helpers.py", (), "test file"),
    ("test/data.json", (), "test file"),
    ("test_calc.py", (), "test file"),
    ("calc_test.py", (), "test file"),
    ("tests_hidden/test_add_hidden.py", (), "hidden tests folder"),
    ("calc.py", ("calc.py",), None),
    ("other.py", ("calc.py",), "outside owned_files"),
    ("conftest.py", ("*.py",), "test configuration or import hook"),
    ("pkg/mod.py", ("pkg/*",), None),
]


@pytest.mark.parametrize(("path", "owned", "reason"), DROP_CASES,
                         ids=[f"{c[0]}-owned" if c[1] else c[0] for c in DROP_CASES])
def test_drop_rules(path: str, owned: tuple[str, ...], reason: str | None) -> None:
    """Each path is graded or dropped for the stated reason."""
    assert drop_reason(path, owned=owned, hidden_dir="tests_hidden") == reason


def test_pyproject_dropped_only_when_its_pytest_tables_change() -> None:
    """pyproject.toml: a [tool.pytest] change is dropped, any other change is graded."""
    base = '[project]\nname = "x"\n'
    assert drop_reason("pyproject.toml", owned=(), hidden_dir="t", pyproject_before=base,
                       pyproject_after=base + 'version = "2"\n') is None
    assert drop_reason("pyproject.toml", owned=(), hidden_dir="t", pyproject_before=base,
                       pyproject_after=base + '[tool.pytest.ini_options]\naddopts = "-p x"\n'
                       ) == "pyproject.toml [tool.pytest] changed"


def test_graded_changes_refuse_paths_that_leave_the_tree(tmp_path: Path) -> None:
    """A diff path that is absolute or climbs with .. is dropped, never applied."""
    graded, dropped = graded_changes(
        [{"path": "../x.py", "status": "added"}, {"path": "/etc/x", "status": "added"},
         {"path": "ok.py", "status": "added"}],
        owned=(), hidden_dir="tests_hidden", repo_dir=tmp_path, worktree=tmp_path)
    assert [f["path"] for f in graded] == ["ok.py"]
    assert {d["reason"] for d in dropped} == {"path leaves the worktree"}


def test_apply_changes_copies_files_links_and_deletions(tmp_path: Path) -> None:
    """Graded files are copied, links stay links (never followed), deletions delete."""
    src, dst = tmp_path / "agent", tmp_path / "fresh"
    (src / "pkg").mkdir(parents=True)
    (dst / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("new\n")
    (dst / "pkg" / "a.py").write_text("old\n")
    (dst / "gone.py").write_text("x\n")
    os.symlink("/etc/hostname", src / "link")
    dropped = apply_changes([{"path": "pkg/a.py", "status": "modified"},
                             {"path": "gone.py", "status": "deleted"},
                             {"path": "link", "status": "added"}], source=src, target=dst)
    assert dropped == []
    assert (dst / "pkg" / "a.py").read_text() == "new\n"
    assert not (dst / "gone.py").exists()
    assert os.readlink(dst / "link") == "/etc/hostname"


def test_apply_changes_drops_a_file_behind_a_linked_folder(tmp_path: Path) -> None:
    """A path whose parent folder is a symlink in the agent's tree is dropped: it could point
    anywhere on the host."""
    src, dst, elsewhere = tmp_path / "agent", tmp_path / "fresh", tmp_path / "elsewhere"
    for d in (src, dst, elsewhere):
        d.mkdir()
    (elsewhere / "secret.py").write_text("secret\n")
    os.symlink(elsewhere, src / "pkg")
    dropped = apply_changes([{"path": "pkg/secret.py", "status": "added"}], source=src, target=dst)
    assert dropped == [{"path": "pkg/secret.py", "reason": "a parent folder is a symbolic link"}]
    assert not (dst / "pkg").exists()
