"""ledger.sandbox.paths: system links resolved, launchers bring their installation, never the home.

Launcher layouts are data (one fake tree per installer, built in the test's folder); each case
names the path a shim or program sits at and the installation that must come with it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.sandbox import paths
from ledger.sandbox.paths import canonical_binds, install_tree, launcher_root, path_trees

# (name, files to create (relative; a trailing / makes a folder), the program or PATH folder,
#  the installation root expected)
LAUNCHERS = (
    ("pyenv-shim", ["pyenv/libexec/pyenv", "pyenv/shims/python3", "pyenv/versions/3.12/bin/"],
     "pyenv/shims/python3", "pyenv"),
    ("pyenv-shims-folder", ["pyenv/libexec/pyenv", "pyenv/shims/"], "pyenv/shims", "pyenv"),
    ("pyenv-virtualenv-plugin-shims", ["pyenv/libexec/pyenv",
                                       "pyenv/plugins/pyenv-virtualenv/shims/"],
     "pyenv/plugins/pyenv-virtualenv/shims", "pyenv"),
    ("asdf-shim", ["asdf/shims/node", "asdf/installs/nodejs/20/bin/node", "asdf/bin/asdf"],
     "asdf/shims/node", "asdf"),
    ("nvm-node", ["nvm/nvm.sh", "nvm/versions/node/v20.1.0/bin/node"],
     "nvm/versions/node/v20.1.0/bin/node", "nvm/versions/node/v20.1.0"),
    ("conda-env", ["conda/conda-meta/", "conda/envs/ml/conda-meta/", "conda/envs/ml/bin/python"],
     "conda/envs/ml/bin/python", "conda/envs/ml"),
    ("homebrew-linux", ["brew/Homebrew/", "brew/Cellar/gh/2.0/bin/gh", "brew/bin/"],
     "brew/Cellar/gh/2.0/bin/gh", "brew"),
    ("pip-user-script", ["u/.local/bin/tool", "u/.local/lib/python3.11/site-packages/",
                         "u/.local/lib/python3.11/private.txt"],
     "u/.local/bin/tool", "u/.local/lib/python3.11/site-packages"),
)


def _make(root: Path, files: list[str]) -> None:
    for rel in files:
        p = root / rel
        if rel.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("#!/bin/sh\n")
            p.chmod(0o755)


@pytest.mark.parametrize("name,files,program,expected", LAUNCHERS, ids=[c[0] for c in LAUNCHERS])
def test_launcher_brings_its_installation(tmp_path: Path, name: str, files: list[str],
                                          program: str, expected: str) -> None:
    """The shim or launcher's installation root is shown, and nothing above it."""
    _make(tmp_path, files)
    assert launcher_root(str(tmp_path / program)) == [str(tmp_path / expected)]


def test_pyenv_shim_on_path_brings_the_pyenv_root(tmp_path: Path) -> None:
    """A PATH folder of pyenv shims brings the pyenv root (libexec/pyenv, versions/)."""
    _make(tmp_path, ["pyenv/libexec/pyenv", "pyenv/shims/python3"])
    trees = path_trees(str(tmp_path / "pyenv" / "shims"), hidden=[])
    assert trees == [str(tmp_path / "pyenv" / "shims"), str(tmp_path / "pyenv")]


def test_a_launcher_root_holding_a_hidden_path_is_not_shown(tmp_path: Path) -> None:
    """An installation that would contain a hidden path (the ledger home) is left out."""
    _make(tmp_path, ["pyenv/libexec/pyenv", "pyenv/shims/python3", "pyenv/.ledger/keys/"])
    trees = path_trees(str(tmp_path / "pyenv" / "shims"), hidden=[str(tmp_path / "pyenv" / ".ledger")])
    assert str(tmp_path / "pyenv") not in trees


def test_launcher_in_the_home_itself_never_shows_the_home(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout whose root would be the operator's home (conda-meta in ~) shows nothing."""
    monkeypatch.setenv("HOME", str(tmp_path))
    _make(tmp_path, ["conda-meta/", "bin/python"])
    assert launcher_root(str(tmp_path / "bin" / "python")) == []


def test_script_in_a_too_wide_folder_or_the_home_is_shown_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/tmp/x.sh and ~/x.sh bring the file alone, never /tmp or the home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert str(tmp_path) not in install_tree(str(script), "")
    assert str(script) in install_tree(str(script), "")
    assert paths._own_folder("/tmp/agent.sh") == "/tmp/agent.sh"


@pytest.mark.skipif(not os.path.islink("/bin"), reason="this host has no merged-/usr /bin link")
def test_paths_through_a_system_link_become_their_real_path_or_are_dropped() -> None:
    """/bin (a recreated link) and /bin/sh lie in /usr, bound anyway: dropped, never bound onto
    the link the sandbox itself makes."""
    assert canonical_binds(["/bin", "/bin/sh", "/usr/bin"]) == []
    assert "/bin" not in canonical_binds(install_tree("/bin/sh", ""))


def test_canonical_binds_drop_nested_and_writable_paths(tmp_path: Path) -> None:
    """A path below another, or below a writable folder, is not bound twice; missing ones go."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "w" / "x").mkdir(parents=True)
    got = canonical_binds([str(tmp_path / "a" / "b"), str(tmp_path / "a"), str(tmp_path / "w" / "x"),
                           str(tmp_path / "missing")], inside=[str(tmp_path / "w")])
    assert got == [str(tmp_path / "a")]


def test_shebang_program_skips_env_options_and_assignments() -> None:
    assert paths.shebang_program(["/usr/bin/env", "-S", "FOO=1", "python3", "-u"]) == "python3"
    assert paths.shebang_program(["/bin/sh"]) == "/bin/sh"
    assert paths.shebang_program([]) is None
