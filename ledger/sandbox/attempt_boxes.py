"""What the boxes of one attempt are made of: the agent's, and the fresh one grading runs in.

    agent sandbox    worktree, fresh HOME and TMPDIR read-write; the system, the harness's
                     interpreter and the agent program's install tree read-only; the harness
                     package only with the task folders masked; no network
    grading sandbox  the fresh grading tree read-write, its own HOME and TMPDIR; the system and
                     the interpreter read-only; no network

Hidden everywhere, even where a readable tree contains them: the attempt's task folder, the
packaged golden tasks, the ledger home (journal, keys) and whatever the caller adds.

Every backend whose boxes are built from a policy (bubblewrap, containers) builds an agent box
the same way: ``agent_setup(request)`` gives the policy and, with a network allowlist, the
journaling proxy and the forwarder to run the agent behind; ``inner_command`` turns each
command into what runs inside (the fresh HOME and TMPDIR, the policy's own variables, the
forwarder and its proxy variables).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.commandenv import command_env
from ledger.errors import UsageError
from ledger.sandbox.paths import (
    harness_package_dir,
    hidden_paths,
    interpreter_paths,
    packaged_tasks_dir,
    user_base_of,
)
from ledger.sandbox.policy import PolicyRequest, SandboxPolicy, build_policy, under
from ledger.sandbox.port import AgentRequest


def copy_config(names: Sequence[str], *, home: Path, real_home: Path | None = None) -> list[str]:
    """Copy the named files or folders of the operator's home into the fresh ``home`` at the same
    relative place; returns them as ``~/...``. A name outside the real home, or missing, is a
    ``UsageError`` (the user asked for it by name)."""
    real = Path(real_home or os.path.expanduser("~")).resolve()
    copied: list[str] = []
    for name in names:
        src = Path(os.path.expanduser(name))
        try:
            rel = src.absolute().relative_to(real)
        except ValueError:
            raise UsageError(f"agent config {name!r} is not inside the home folder {real}") from None
        if not src.exists():
            raise UsageError(f"agent config {name!r} does not exist")
        dst = home / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=False, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)
        copied.append("~/" + rel.as_posix())
    return copied


def path_dirs(path_env: str, hidden: Sequence[str]) -> list[str]:
    """The folders of ``PATH`` a sandbox shows read-only, with the installation behind each
    shim folder (``ledger.sandbox.paths.path_trees``)."""
    from ledger.sandbox.paths import path_trees

    return path_trees(path_env, hidden)


def agent_policy(*, worktree: Path, home: Path, scratch: Path, argv: Sequence[str],
                 path_env: str, hidden: Sequence[str], harness_code: bool = False,
                 extra_readable: Sequence[str] = (), copied_config: Sequence[str] = (),
                 network: str = "none", sockets: Sequence[str] = ()) -> SandboxPolicy:
    """The agent's sandbox (see the module docstring). ``harness_code`` shows the harness
    package (built-in agents run it); ``extra_readable`` are files the command line names."""
    readable = [*interpreter_paths(), *path_dirs(path_env, hidden), *extra_readable]
    if harness_code:
        readable.append(harness_package_dir())
    programs = [argv[0]] if argv else []
    # ``python script.py`` / ``node cli.js``: the script's own install tree too.
    programs += [a for a in argv[1:3] if a.startswith("/") and os.path.isfile(a)]
    env: list[tuple[str, str]] = []
    base = user_base_of(programs, path_env)
    if base is not None:  # a pip --user console script: its packages, not the fresh home's
        env.append(("PYTHONUSERBASE", base))
    return build_policy(PolicyRequest(
        cwd=worktree, writable=[worktree, home, scratch], programs=programs, path_env=path_env,
        readable=[p for p in readable if not any(under(os.path.realpath(p), h) for h in hidden)],
        hidden=hidden, env=env, copied_config=copied_config, network=network, purpose="agent",
        sockets=sockets,
    ))


@dataclass(frozen=True)
class AgentSetup:
    """What an agent box is made of: its policy, the journaling proxy (``net.Proxy``) or None,
    and (socket path, loopback ports) of the forwarder the agent runs behind, with a proxy."""

    policy: SandboxPolicy
    proxy: Any = None
    forward: tuple[str, tuple[int, ...]] | None = None


def agent_setup(request: AgentRequest) -> AgentSetup:
    """The agent box of ``request`` as a policy: ``request.config`` copied into the fresh home,
    the install trees of its argv readable, its hidden paths masked; with an allowlist, the
    proxy on ``net_dir/proxy.sock`` (bound in) and the forwarder script readable, and nothing
    else of the harness. The proxy is closed again when the policy cannot be built."""
    proxy = forward = None
    extra = list(request.extra_readable)
    sockets: list[str] = []
    if request.allowlist:
        from ledger.sandbox import net

        if request.net_dir is None:
            raise ValueError("an agent box with a network allowlist needs a net_dir")
        sock = request.net_dir / "proxy.sock"
        proxy = net.Proxy(sock, request.allowlist, allowed=request.allows)
        forward = (str(sock), tuple(request.loopback_ports))
        sockets = [str(sock)]
        extra.append(net.FORWARDER)  # the forwarder script, and nothing else of the harness
    try:
        copied = [*request.copied_config,
                  *(copy_config(list(request.config), home=request.home) if request.config else [])]
        policy = agent_policy(
            worktree=request.worktree, home=request.home, scratch=request.scratch,
            argv=request.argv, path_env=request.path_env, hidden=request.hidden,
            harness_code=request.harness_code, extra_readable=extra, copied_config=copied,
            network="proxy" if proxy is not None else "none", sockets=sockets)
    except BaseException:
        if proxy is not None:
            proxy.close()
        raise
    return AgentSetup(policy, proxy, forward)


def inner_command(argv: Sequence[str], env: Mapping[str, str], *, policy: SandboxPolicy,
                  home: str, scratch: str, forward: tuple[str, tuple[int, ...]] | None,
                  python: str) -> tuple[list[str], dict[str, str]]:
    """(argv, env) as they run inside a box of ``policy``: ``env`` re-homed
    (``ledger.commandenv``) with the policy's own variables; with ``forward``, behind the
    forwarder run by ``python`` (the interpreter inside), the proxy variables pointing at it."""
    inner_env = command_env(env, home=home, scratch=scratch, harness=False)
    inner_env.update(dict(policy.env))
    inner = list(argv)
    if forward is not None:
        from ledger.sandbox import net

        sock, ports = forward
        inner, port = net.forwarder_command(python, Path(sock), ports, inner)
        inner_env.update(net.proxy_env(port))
    return inner, inner_env


def grading_policy(*, worktree: Path, home: Path, scratch: Path, hidden: Sequence[str],
                   path_env: str = "", programs: Sequence[str] = (),
                   readable: Sequence[str] = (), cwd: Path | None = None) -> SandboxPolicy:
    """The grading sandbox: the fresh tree, the interpreter, the harness's pytest reporter
    (``ledger.sandbox.outcomes.PLUGIN_DIR``, read only), nothing of the agent's.

    ``programs``: absolute test programs the task names (an imported task's virtualenv
    interpreter, ``--python``): their installation tree is readable too. ``readable``: further
    read-only paths; ``cwd``: where the commands start (default: the worktree)."""
    from ledger.sandbox.outcomes import PLUGIN_DIR
    from ledger.sandbox.paths import install_tree

    extra = [d for prog in programs for d in install_tree(prog, path_env)]
    return build_policy(PolicyRequest(
        cwd=cwd if cwd is not None else worktree, writable=[worktree, home, scratch],
        readable=[*interpreter_paths(), *path_dirs(path_env, hidden), *extra, *readable,
                  PLUGIN_DIR],
        hidden=hidden, network="none", purpose="grading",
    ))


__all__ = ["AgentSetup", "agent_policy", "agent_setup", "copy_config", "grading_policy", "inner_command",
           "harness_package_dir", "hidden_paths", "interpreter_paths", "packaged_tasks_dir",
           "path_dirs"]
