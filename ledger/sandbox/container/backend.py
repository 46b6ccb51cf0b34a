"""The ``podman`` (and ``docker``) backend of the Sandbox port (``ledger.sandbox.port``): boxes
that are containers of the task's image.

A box is the same ``SandboxPolicy`` the bubblewrap backend builds (``attempt_boxes.agent_policy`` /
``grading_policy``), turned into ``ENGINE run`` instead of a bwrap command line:

- the image is the root: the system folders of the policy (``paths.SYSTEM_PATHS``) come from the
  image, never from the host; every other readable path (the agent's install tree, the
  interpreter's virtualenv, the forwarder) is bind-mounted read-only at its own path, the
  writable folders (worktree, fresh home, scratch) read-write at theirs, so a path means one
  file inside and out (as in bubblewrap);
- the policy's masks hide what lies inside a mounted tree (a tmpfs over a folder, ``/dev/null``
  over a file); nothing of ``.ledger/``, the task folders or other attempts is mounted at all;
- ``--network=none``: loopback only; with an allowlist the journaling proxy's unix socket is
  mounted and the command runs behind the forwarder (``net.forwarder_command``), as in bubblewrap;
- an unprivileged user: ``--user 1000:1000`` with every capability dropped and
  ``no-new-privileges``. User namespaces (``--uidmap``) cannot mount the image's layers on this
  machine class, so the writable folders are handed to uid 1000 for the box's life and given back
  to their owner when it closes;
- limits by the engine: ``--memory`` (and no swap beyond it), ``--pids-limit``, ``--ulimit`` for
  file size, open files and CPU seconds;
- every command's container is named; ``close`` removes each one (``rm -f``) whatever happened
  (but those ``--rm`` removed already: their client exited with the command's own status).

A box that never ran its command is told from a command that failed by the engine's own error
(exit 125-127 with an ``Error:`` line of the engine or runtime). The engine's processes are not
the command's: strace of the engine client does not see inside the container, so ``trace_lines``
yields nothing (the activity trace of a container attempt is not captured; docs/ENVIRONMENTS.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.sandbox.attempt_boxes import agent_setup, grading_policy, inner_command
from ledger.sandbox.container import engine as engines
from ledger.sandbox.container import supervise
from ledger.sandbox.outcomes import FD_ENV
from ledger.sandbox.paths import SYSTEM_PATHS, TOO_WIDE, under
from ledger.sandbox.policy import SANDBOX_GID, SANDBOX_UID, SandboxPolicy
from ledger.sandbox.port import AgentRequest, Availability, BoxRecords, Confined, GradingRequest

INNER_PYTHON = "/usr/bin/python3"  # the image's interpreter that runs the forwarder
_CHANNEL_FD = 3  # the outcome channel's fd inside a container (``--preserve-fds=1``)
_ENGINE_ERROR = ("Error: ", "error: ", "OCI runtime", "runc create failed", "crun:")


@dataclass(frozen=True)
class ContainerEnforcement:
    """The limits a container box applies (as engine flags); the shape of ``limits.Enforcement``."""

    limits: Any
    label: str
    preexec: None = None

    def flags(self) -> list[str]:
        lim = self.limits
        if lim is None:
            return []
        # Any --ulimit makes the engine add nofile and nproc at their maximum, which this machine
        # class refuses (no CAP_SYS_RESOURCE): both are always given, at the attempt's values.
        return [f"--memory={lim.memory}", f"--memory-swap={lim.memory}", f"--pids-limit={lim.processes}",
                f"--ulimit=nofile={lim.open_files}:{lim.open_files}",
                f"--ulimit=nproc={lim.processes}:{lim.processes}",
                f"--ulimit=fsize={lim.file_size}:{lim.file_size}", f"--ulimit=cpu={lim.cpu_s}:{lim.cpu_s}"]

    def as_data(self) -> dict[str, Any]:
        data = self.limits.as_data() if self.limits is not None else {}
        return {**data, "mechanisms": {"memory": "engine", "processes": "engine", "file_size": "ulimit",
                                       "open_files": "ulimit", "cpu_s": "ulimit"}}

    def hits(self, *, exit_code: int | None = None, signal_no: int | None = None) -> list[dict[str, Any]]:
        hit = {25: "file_size", 24: "cpu_s", 9: None}.get(signal_no or (exit_code or 0) - 128)
        return [{"limit": hit, "label": self.label}] if hit else []

    def kill_all(self) -> int:
        return 0  # the container's end ends every process in it: nothing is left to count

    def close(self) -> None:
        return None


def _dup_to(moves: Mapping[int, int]) -> Callable[[], None]:
    """A pre-exec hook putting each fd of ``moves`` at its target in the child (inheritable);
    every source is copied aside first, so a source that is another's target is not lost."""
    def dup() -> None:
        aside = {target: fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd, target in moves.items()}
        for target, fd in aside.items():
            os.dup2(fd, target)
            os.close(fd)
    return dup


def _is_system(path: str) -> bool:
    return any(under(path, s) for s in SYSTEM_PATHS)


def root_stub(policy: SandboxPolicy, stub: Path) -> bool:
    """Make ``stub`` a stand-in for the image's ``/root`` holding a mount point for every shown
    path below it (the image's own ``/root`` is 0700: the box's user could not reach a tree of
    ``/root`` bound below it). False when nothing shown lies below ``/root``."""
    below = [p for p in (*policy.writable, *policy.readable, *policy.sockets) if under(p, "/root") and p != "/root"]
    if not below:
        return False
    stub.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(stub, 0o755)
    for path in below:
        target = stub / os.path.relpath(path, "/root")
        if os.path.isdir(path):
            target.mkdir(mode=0o755, parents=True, exist_ok=True)
        else:
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            target.touch(mode=0o644, exist_ok=True)
    for top, dirs, _files in os.walk(stub):
        for name in dirs:
            os.chmod(os.path.join(top, name), 0o755)
    return True


def task_workdir(workdir: str | None) -> str | None:
    """``workdir`` (a task's ``environment.workdir``) when the worktree may be mounted there too:
    an absolute path that is none of the image's system folders nor a folder that holds the
    rest of the container (``/``, ``/root``, ``/proc``, ...); else None."""
    if not workdir or not workdir.startswith("/"):
        return None
    path = os.path.normpath(workdir)
    if path in TOO_WIDE - {"/srv", "/opt", "/mnt", "/media"} or _is_system(path) or under(path, "/root") \
            or any(under(path, top) for top in ("/proc", "/sys", "/dev", "/run")):
        return None
    return path


def _node_package(path: str) -> str | None:
    """The npm package folder holding ``path`` (``.../node_modules/[@scope/]name``), or None."""
    parts = Path(path).parts
    if "node_modules" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("node_modules")
    width = 2 if i + 1 < len(parts) and parts[i + 1].startswith("@") else 1
    return str(Path(*parts[:i + 1 + width])) if i + width < len(parts) else None


def agent_program_mounts(argv0: str, path_env: str) -> list[str]:
    """``--volume`` flags for the parts of the agent's program that live in the host's system
    folders, which a container takes from its image: each link or file of its chain
    (``paths.program_chain``: ``/usr/bin/claude`` and what it points to, a ``#!`` interpreter
    such as ``/usr/bin/node``) read-only at its own path, an npm package's whole folder. Only for
    a program that is an npm package in a system folder (claude, codex, ...): a Python or other
    system program the image is expected to have is not replaced by the host's."""
    from ledger.sandbox.paths import program_chain

    chain = program_chain(argv0, path_env)
    if not any(_is_system(_node_package(os.path.realpath(p)) or "") for p in chain):
        return []  # only an npm-installed CLI: never the host's python over the image's own
    out: list[str] = []
    for path in chain:
        if not _is_system(path):
            continue
        real = os.path.realpath(path)
        package = _node_package(real)
        flags = [f"--volume={package}:{package}:ro"] if package and _is_system(package) else []
        if not (package and under(path, package)) and os.path.isfile(real):
            flags.append(f"--volume={real}:{path}:ro")  # a link outside it: its target at its path
        out += [f for f in flags if f not in out]
    return out


def _agent_program(request: AgentRequest) -> dict[str, Any]:
    """``programs`` and ``program`` of an agent box (``agent_program_mounts``)."""
    if not request.argv:
        return {}
    from ledger.sandbox.paths import which

    flags = agent_program_mounts(request.argv[0], request.path_env)
    found = request.argv[0] if "/" in request.argv[0] else which(request.argv[0], request.path_env)
    program = (request.argv[0], os.path.realpath(found)) if flags and found else None
    return {"programs": flags, "program": program}


def mounts(policy: SandboxPolicy, stub: Path | None, empty: Path) -> list[str]:
    """The ``--volume`` flags of ``policy``: see the module docstring. ``stub``: the stand-in for
    ``/root`` (``root_stub``), mounted read-only first; ``empty``: an empty folder mounted
    read-only over each masked folder."""
    out: list[str] = [f"--volume={stub}:/root:ro"] if stub is not None else []
    for path in policy.writable:
        out.append(f"--volume={path}:{path}:rw")
    for path in policy.readable:
        if _is_system(path) or any(under(path, w) for w in policy.writable) or not os.path.exists(path):
            continue
        out.append(f"--volume={path}:{path}:ro")
    for sock in policy.sockets:
        out.append(f"--volume={sock}:{sock}")
    for path in policy.masked:
        if _is_system(path):
            continue
        if os.path.isdir(path):
            out.append(f"--volume={empty}:{path}:ro")
        else:
            out.append(f"--volume=/dev/null:{path}:ro")
    return out


class ContainerBox:
    """One box: each ``command`` is a fresh container of ``image`` over ``policy``."""

    isolated = True
    captures_trace = False  # strace of the engine client sees nothing of the container
    captures_opens = False

    def capture_opens(self) -> None:
        return None

    def __init__(self, engine: engines.Engine, image: str, policy: SandboxPolicy, *, home: str, scratch: str,
                 proxy: Any = None, forward: tuple[str, tuple[int, ...]] | None = None,
                 record: Mapping[str, Any] | None = None, tree: str | None = None,
                 workdir: str | None = None, programs: Sequence[str] = (),
                 program: tuple[str, str] | None = None) -> None:
        self.engine, self.image, self.policy = engine, image, policy
        # the worktree also at the task's workdir (``/app``), where the task's own files live
        self.tree, self.workdir = tree, task_workdir(workdir) if tree and tree != workdir else None
        self.programs = list(programs)  # ``agent_program_mounts``
        # (argv[0], its real file): a program reached through links in the system folders starts
        # by its real path, so a script finds its own package (its links are only at the host's)
        self.program = program
        self.record = dict(record or {})
        self.backend = engine.name
        self.purpose = policy.purpose
        self.home, self.scratch = home, scratch
        self.proxy = proxy
        self._forward = forward
        self._names: list[str] = []
        self._owners: dict[str, tuple[int, int]] = {}
        self._failures: list[str] = []
        self._commands = 0
        self._stub: Path | None = None
        self._settled: set[str] = set()  # containers the engine removed itself (``failure``)
        self._status: dict[str, supervise.Status] = {}  # each command's supervisor pipe (podman)

    def readable(self) -> tuple[str, ...]:
        return tuple(p for p in self.policy.readable if p not in self.policy.masked)

    def writable(self) -> tuple[str, ...]:
        return self.policy.writable

    def as_data(self) -> dict[str, Any]:
        data = self.policy.as_data()
        data.update(backend=self.backend, image=self.image, uid=SANDBOX_UID, trace="not captured",
                    namespaces=["pid", "mount", "ipc", "uts", "net", "cgroup"])
        data.update({k: v for k, v in self.record.items() if k in ("image_id", "digest")})
        if self.workdir:
            data["workdir"] = self.workdir
        return data

    def enforcement(self, limits: Any, *, label: str) -> ContainerEnforcement:
        return ContainerEnforcement(limits, label)

    def _hand_over(self) -> None:
        """The writable folders to the box's user (once per box; ``close`` gives them back)."""
        for folder in self.policy.writable:
            if folder in self._owners:
                continue
            st = os.lstat(folder)
            self._owners[folder] = (st.st_uid, st.st_gid)
            _chown_tree(folder, SANDBOX_UID, SANDBOX_GID)

    def command(self, argv: Sequence[str], env: Mapping[str, str], *, limits: Any = None,
                waiter: tuple[int, int] | None = None) -> Confined:
        """``ENGINE run`` of ``argv`` in a new container (``waiter`` is not used: the engine
        waits for the container, and the container's end ends every process in it)."""
        self._commands += 1
        self._hand_over()
        if self.program is not None and argv and argv[0] == self.program[0]:
            argv = [self.program[1], *argv[1:]]
        inner, inner_env = inner_command(argv, env, policy=self.policy, home=self.home, scratch=self.scratch,
                                         forward=self._forward, python=INNER_PYTHON)
        name = f"ledger-{self.purpose}-{secrets.token_hex(6)}"
        self._names.append(name)
        moves: dict[int, int] = {}
        flags = ["run", "--rm", f"--name={name}", "--network=none", f"--user={SANDBOX_UID}:{SANDBOX_GID}",
                 "--cap-drop=all", "--security-opt=no-new-privileges", "--pull=never", "--read-only",
                 # podman mounts tmpfs on /tmp, /run, /var/tmp of a read-only root unless told not to
                 *(["--read-only-tmpfs=false"] if self.engine.name == "podman" else []),
                 *self._workdir_flags(), *mounts(self.policy, *self._stubs()), *self.programs]
        if isinstance(limits, ContainerEnforcement):
            flags += limits.flags()
        report_fd = inner_env.get(FD_ENV)
        if report_fd is not None and report_fd.isdigit():
            # The outcome channel (an inherited pipe) reaches the container as its fd 3: the
            # client's child gets it there (dup2 between fork and exec), the engine passes it on.
            inner_env[FD_ENV] = str(_CHANNEL_FD)
            moves[int(report_fd)] = _CHANNEL_FD
        if self.engine.name == "podman":  # docker passes no fds: its commands run unsupervised
            status = self._status[name] = supervise.Status()
            moves[status.write_fd] = _CHANNEL_FD + len(moves)
            inner = supervise.wrap(inner, moves[status.write_fd])
        if moves:
            flags.append(f"--preserve-fds={len(moves)}")
        preexec, keep = (_dup_to(moves), tuple(moves.values())) if moves else (None, ())
        for key in sorted(inner_env):
            flags.append(f"--env={key}")  # the value comes from the engine's own environment
        client_env = {**os.environ, **self.engine.env, **inner_env}
        return Confined(argv=(self.engine.path, *flags, self.image, *inner), env=client_env,
                        pass_fds=keep, preexec=preexec)

    def _workdir_flags(self) -> list[str]:
        """Where the command starts: the task's workdir for an agent starting in its worktree
        (its instructions name ``/app``), else the policy's ``cwd``; the worktree mounted there too."""
        if not self.workdir or self.tree is None:
            return [f"--workdir={self.policy.cwd}"]
        cwd = self.workdir if self.purpose == "agent" and self.policy.cwd == self.tree else self.policy.cwd
        out = [f"--workdir={cwd}", f"--volume={self.tree}:{self.workdir}:rw"]
        for path in self.policy.masked:  # what is hidden inside the worktree stays hidden there
            if under(path, self.tree) and path != self.tree:
                inner = os.path.join(self.workdir, os.path.relpath(path, self.tree))
                source = self._stubs()[1] if os.path.isdir(path) else Path("/dev/null")
                out.append(f"--volume={source}:{inner}:ro")
        return out

    def _stubs(self) -> tuple[Path | None, Path]:
        """(the /root stand-in or None, the empty folder of the masks), made once per box."""
        if self._stub is None:
            self._stub = Path(tempfile.mkdtemp(prefix="ledger-box-"))
            os.chmod(self._stub, 0o755)
            (self._stub / "empty").mkdir(mode=0o755)
        root = self._stub / "root"
        return (root if root.is_dir() or root_stub(self.policy, root) else None), self._stub / "empty"

    def started(self) -> None:
        """The harness's copy of the last command's status pipe closed (the child has its own)."""
        if self._names and self._names[-1] in self._status:
            self._status[self._names[-1]].release()

    def failure(self, returncode: int | None, output: str) -> str | None:
        """The engine's message when it never ran the command (exit 125-127 and its error line).

        A command whose engine client exited by itself with the command's status has had its
        container removed by ``--rm`` already: ``close`` need not ask the engine again."""
        if returncode is not None and (0 <= returncode < 125 or returncode > 127) and self._names:
            self._settled.add(self._names[-1])
        why = self._supervised(returncode, output)
        if why is not None:
            if self._names:
                self._settled.discard(self._names[-1])  # ``close`` makes sure it is gone
            self._failures.append(why)
        return why

    def _engine_error(self, returncode: int | None, output: str) -> str | None:
        if returncode not in (125, 126, 127):
            return None
        lines = [ln.strip() for ln in output.splitlines() if ln.strip().startswith(_ENGINE_ERROR)]
        return f"{self.backend}: {lines[-1][:300]}" if lines else None

    def _supervised(self, returncode: int | None, output: str) -> str | None:
        """None when the last command ran and ended by itself; else why the box failed it.

        Supervised (podman, ``supervise``): the supervisor's line decides, so a command that
        prints an engine-like ``Error:`` and exits 127 is still the command's failure; without
        the line the container ended under the command (the engine's own error when it gave
        one: it never started it). Unsupervised (docker): the engine's error line alone."""
        status = self._status.get(self._names[-1]) if self._names else None
        if status is None or returncode is None:  # None: stopped by the harness (its timeout)
            return None if returncode is None else self._engine_error(returncode, output)
        status.release()
        verdict = status.verdict()
        if verdict == "exited":
            return None
        if verdict == "noexec":
            return self._engine_error(returncode, output) or f"{self.backend}: the program is not in the image"
        how = f"signal {-returncode}" if returncode < 0 else f"exit {returncode}"
        return self._engine_error(returncode, output) or (
            f"{self.backend}: the container ended before its command did ({how} of the engine client): "
            "killed from outside the attempt, or the engine failed")

    def namespace(self) -> tuple[int, str] | None:
        return None

    def trace_lines(self, lines: Iterable[str]) -> Iterator[str]:
        return iter(())

    def close(self) -> BoxRecords:
        names = [n for n in self._names if n not in self._settled]
        self._names = []
        if names:
            with contextlib.suppress(LedgerError):  # the folders are given back whatever the engine did
                # podman: no stop timeout (it would wait 10 s on a PID 1 that ignores SIGTERM);
                # docker's rm --force kills at once and has no --ignore
                ignore = ["--ignore", "--time=0"] if self.engine.name == "podman" else []
                self.engine.call(["rm", "--force", *ignore, *names], timeout=60)
        statuses, self._status = self._status, {}
        for status in statuses.values():
            status.close()
        stub, self._stub = self._stub, None
        if stub is not None:
            shutil.rmtree(stub, ignore_errors=True)
        owners, self._owners = self._owners, {}
        for folder, (uid, gid) in owners.items():
            _chown_tree(folder, uid, gid)
        proxy, self.proxy = self.proxy, None
        connections = proxy.close() if proxy is not None else []
        return BoxRecords(backend=self.backend, connections=tuple(connections), failures=tuple(self._failures),
                          commands=self._commands)


def _chown_tree(root: str, uid: int, gid: int) -> None:
    """``root`` and everything under it (links themselves, never followed) to ``uid:gid``."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            try:
                os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)
            except FileNotFoundError:
                continue


class ContainerSandbox:
    """The container backend under the engine's name; ``for_image`` binds a task's image."""

    hint = engines.INSTALL_HINT
    isolated = True

    def __init__(self, name: str = "podman", image: str = engines.BASE_IMAGE,
                 record: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.image = image
        self.record = dict(record or {})  # the image's id and digest (``environment.ready``)
        self.workdir: str | None = None  # the task's environment.workdir (``for_image``)
        self._available: Availability | None = None

    def for_image(self, image: str | Mapping[str, Any]) -> ContainerSandbox:
        """The same backend running ``image``: a reference, or a task's ``environment.ready``
        data (``Ready.as_data()``), whose image id is what runs (a tag moved later cannot
        change the image) and whose id and digest the boxes record; its ``workdir`` (the task's
        ``environment.workdir``) is where the boxes mount the worktree too."""
        if isinstance(image, str):
            bound = ContainerSandbox(self.name, image)
        else:
            ref = str(image.get("image_id") or image.get("image") or "")
            if not ref:
                raise LedgerError("an environment.ready record without an image")
            bound = ContainerSandbox(self.name, ref, {k: image[k] for k in ("image", "image_id", "digest")
                                                      if image.get(k)})
        bound._available = self._available
        bound.workdir = None if isinstance(image, str) else image.get("workdir")
        return bound

    def _engine(self) -> engines.Engine:
        found = engines.find_engine(self.name)
        if found is None:
            raise engines.EngineUnavailable(f"{self.name} is not on PATH; {engines.INSTALL_HINT}")
        return found

    def available(self) -> Availability:
        if self._available is None:
            probe = engines.probe(self.name, image=self.image)
            self._available = Availability(probe.runs, probe.reason, probe.version)
        return self._available

    def agent_box(self, request: AgentRequest) -> ContainerBox:
        made = agent_setup(request)  # the policy, and with an allowlist the proxy and forwarder
        try:
            return ContainerBox(self._engine(), self.image, made.policy, home=str(request.home),
                                scratch=str(request.scratch), proxy=made.proxy, forward=made.forward,
                                record=self.record, tree=str(request.worktree), workdir=self.workdir,
                                **_agent_program(request))
        except BaseException:
            if made.proxy is not None:
                made.proxy.close()
            raise

    def grading_box(self, request: GradingRequest) -> ContainerBox:
        policy = grading_policy(
            worktree=request.worktree, home=request.home, scratch=request.scratch, hidden=request.hidden,
            path_env=request.path_env, programs=request.programs, readable=request.readable, cwd=request.cwd)
        return ContainerBox(self._engine(), self.image, policy, home=str(request.home),
                            scratch=str(request.scratch), record=self.record, tree=str(request.worktree),
                            workdir=self.workdir)
