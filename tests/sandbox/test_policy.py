"""The sandbox policy and its one bubblewrap command line: what is shown, hidden, writable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.errors import NothingToRun, UsageError
from ledger.sandbox import PolicyRequest, build_policy, bwrap_command, probe_bwrap, sandbox_status
from ledger.sandbox import bwrap as bw
from ledger.sandbox.attempt_boxes import agent_policy, copy_config, packaged_tasks_dir
from ledger.sandbox.policy import SandboxPolicy, install_tree

BWRAP_OK, BWRAP_WHY, _VERSION = probe_bwrap()
needs_bwrap = pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}")


def _folders(tmp: Path) -> tuple[Path, Path, Path]:
    wt, home, scratch = tmp / "wt", tmp / "home", tmp / "scratch"
    for d in (wt, home, scratch):
        d.mkdir()
    return wt, home, scratch


def _inside(policy: SandboxPolicy, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(bwrap_command(policy, ["/bin/sh", "-c", script]), capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})


def test_policy_refuses_binding_the_whole_host(tmp_path: Path) -> None:
    """A policy that would bind /, /home or /tmp is an error, not a weaker sandbox."""
    for wide in ("/", "/home", "/tmp"):
        with pytest.raises(UsageError, match="expose the host"):
            SandboxPolicy(cwd=str(tmp_path), writable=(str(tmp_path),), readable=(wide,))


def test_hidden_path_that_contains_what_the_agent_needs_is_an_error(tmp_path: Path) -> None:
    """Hiding a folder that holds the worktree cannot be honoured: refused loudly."""
    wt, home, scratch = _folders(tmp_path)
    with pytest.raises(UsageError, match="cannot hide"):
        build_policy(PolicyRequest(cwd=wt, writable=[wt, home, scratch], hidden=[str(tmp_path)]))


def test_agent_policy_masks_the_packaged_tasks_inside_the_harness_package(tmp_path: Path) -> None:
    """Built-in agents see the harness package but never its golden tasks (solutions)."""
    wt, home, scratch = _folders(tmp_path)
    policy = agent_policy(worktree=wt, home=home, scratch=scratch, argv=[sys.executable],
                          path_env=os.environ.get("PATH", ""), hidden=[packaged_tasks_dir()],
                          harness_code=True)
    assert packaged_tasks_dir() in policy.masked
    assert not policy.visible(packaged_tasks_dir() + "/smoke/add-clamp/solution")
    assert policy.visible(str(wt / "x.py"))


def test_install_tree_of_a_venv_program_is_the_venv_and_its_base(tmp_path: Path) -> None:
    """A program in a virtualenv brings the venv and the venv's base installation."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(sys.base_prefix)}/bin\n")
    prog = venv / "bin" / "agent"
    prog.write_text("#!/bin/sh\n")
    prog.chmod(0o755)
    tree = install_tree(str(prog), "")
    assert str(venv) in tree


def test_copy_config_copies_named_files_into_the_fresh_home(tmp_path: Path) -> None:
    """Named config files are copied to the same place under the fresh home and listed."""
    real, fresh = tmp_path / "real", tmp_path / "fresh"
    (real / ".tool").mkdir(parents=True)
    (real / ".tool" / "settings.json").write_text("{}")
    fresh.mkdir()
    copied = copy_config([str(real / ".tool" / "settings.json")], home=fresh, real_home=real)
    assert copied == ["~/.tool/settings.json"]
    assert (fresh / ".tool" / "settings.json").read_text() == "{}"
    with pytest.raises(UsageError, match="not inside the home"):
        copy_config(["/etc/hostname"], home=fresh, real_home=real)


def test_bwrap_mode_without_bubblewrap_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """--sandbox bwrap where bwrap cannot work raises NothingToRun (exit 3) naming the fix;
    auto falls back to none with the reason."""
    monkeypatch.setattr(bw, "_probed", (False, "bwrap is not on PATH", None))
    with pytest.raises(NothingToRun, match="apt-get install bubblewrap") as err:
        sandbox_status("bwrap")
    assert err.value.exit_code == 3
    auto = sandbox_status("auto")
    assert auto.mode == "none" and "bubblewrap" in auto.reason
    assert sandbox_status("none").backend.isolated is False


@needs_bwrap
def test_inside_the_sandbox_only_the_policy_is_visible(tmp_path: Path) -> None:
    """The worktree is writable, the root and system are read-only, the host's other files,
    the masked folders and the network are not there, and the uid is unprivileged."""
    wt, home, scratch = _folders(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    policy = build_policy(PolicyRequest(cwd=wt, writable=[wt, home, scratch]))
    done = _inside(policy, f"""
        id -u; echo ok > {wt}/w && echo wrote-wt
        cat {secret} 2>/dev/null && echo leaked
        touch /newfile 2>/dev/null && echo root-writable
        touch /usr/x 2>/dev/null && echo usr-writable
        cat /etc/shadow 2>/dev/null | head -c1 | grep -q . && echo shadow
        ls /proc | grep -c '^[0-9]'
        (exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null && echo net
        unshare -rm true 2>/dev/null && echo userns
    """)
    out = done.stdout.split()
    assert out[0] == "1000"
    assert "wrote-wt" in out and (wt / "w").read_text() == "ok\n"
    for bad in ("leaked", "root-writable", "usr-writable", "shadow", "net", "userns"):
        assert bad not in out, done.stdout
    assert int(out[-1]) <= 5  # own PID namespace: bwrap's init, the shell, ls, grep


@needs_bwrap
def test_processes_left_behind_die_with_the_sandbox(tmp_path: Path) -> None:
    """A daemon the command leaves behind (setsid, double fork) is gone once the command ends."""
    wt, home, scratch = _folders(tmp_path)
    policy = build_policy(PolicyRequest(cwd=wt, writable=[wt, home, scratch]))
    tag = f"ledger-daemon-probe-{os.getpid()}"
    _inside(policy, f"setsid sh -c 'exec -a {tag} sleep 300' >/dev/null 2>&1 & echo started")
    alive = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
    assert alive.stdout.strip() == ""


def test_install_tree_follows_every_link_of_a_chain(tmp_path: Path) -> None:
    """bin/x -> shims/x -> tool/bin/x: every folder of the chain is shown, so the program
    resolves inside the sandbox as outside."""
    (tmp_path / "tool" / "bin").mkdir(parents=True)
    (tmp_path / "shims").mkdir()
    (tmp_path / "bin").mkdir()
    real = tmp_path / "tool" / "bin" / "x"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    os.symlink(real, tmp_path / "shims" / "x")
    os.symlink(tmp_path / "shims" / "x", tmp_path / "bin" / "x")
    tree = install_tree(str(tmp_path / "bin" / "x"), "")
    for folder in ("bin", "shims", "tool/bin"):
        assert str(tmp_path / folder) in tree


def test_npm_program_reached_through_a_merged_usr_link_shows_its_package_not_the_host(
        tmp_path: Path) -> None:
    """/bin/x -> ../lib/node_modules/@s/p/cli.js: the prefix would be "/", so the package is shown."""
    from ledger.sandbox.paths import _node_prefix

    assert _node_prefix("/lib/node_modules/@s/p/cli.js") == "/lib/node_modules/@s/p"
    assert _node_prefix("/lib/node_modules/p/bin/cli.js") == "/lib/node_modules/p"
    assert _node_prefix("/usr/lib/node_modules/@s/p/cli.js") == "/usr"
    root = tmp_path / "lib" / "node_modules" / "@s" / "p"
    root.mkdir(parents=True)
    (root / "cli.js").write_text("#!/bin/sh\n")
    assert _node_prefix(str(root / "cli.js")) == str(tmp_path)
