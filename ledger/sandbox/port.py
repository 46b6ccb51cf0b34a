"""The Sandbox port: the one seam through which the harness confines what it runs.

A **backend** (``Sandbox``) is named in the registry (``ledger.sandbox.registry``: ``none``,
``bwrap``; a container engine plugs in the same way). It makes **boxes**: one ``agent_box`` per
attempt's agent run, one ``grading_box`` per grading tree (and per isolated task command of
``ledger tasks``). A ``Box`` turns an argv and an env into the confined command and knows what it
shows; the caller keeps the policy (what to run, limits, journaling) above it, as an HTTP client
keeps auth and redirects above its transport.

Using the port (``attempt``: ``ledger/run/attempt/``; ``ledger tasks``' command runner)::

    from ledger.sandbox import registry
    from ledger.sandbox.port import AgentRequest, GradingRequest

    sandbox = registry.get(plan_sandbox_name)          # "bwrap" | "none" | ... (resolved once
                                                       # per run by registry.resolve("auto"))
    box = sandbox.agent_box(AgentRequest(worktree=..., home=..., scratch=..., argv=agent_argv,
                                         path_env=env["PATH"], hidden=paths.hidden_paths(...),
                                         allowlist=hosts, net_dir=attempt_root / "net"))
    try:
        enf = box.enforcement(limits, label="agent")     # cgroups / rlimits as this box needs
        cmd = box.command(argv, env, limits=enf, waiter=(status_w, release_r))
        proc = Popen(cmd.argv, env=cmd.env, pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec, ...)
        box.started()                                  # the harness's copies of the child's fds
        ... wait ...
        why = box.failure(proc.returncode, stderr_head) # str: the box never ran the command
        ns = box.namespace()                           # (host pid of init, "pid:[inode]") | None
        events = parse(box.trace_lines(strace_log_lines))  # the box's own set-up cut off
        journal(box.as_data())                         # what it showed: agent.started, grading
    finally:
        records = box.close()                          # BoxRecords: proxy connections, failures

    ``box.readable()``  paths the confined command may read (the attestation's scope)
    ``box.writable()``  the folders it may write (the disk watch walks them)
    ``box.isolated``    False for ``none``: nothing is confined, orphans are swept by the caller
    ``sandbox.isolated``  the same, asked of the backend before any box exists: a confining
                        backend's attempt is graded in a fresh tree (``ledger/run/attempt/collect.py``)
    ``box.proxy``       the attempt's journaling proxy (``ledger.sandbox.net.Proxy``) or None
    ``box.captures_trace``  whether strace wrapped around ``command``'s argv sees the command's
                        own processes (False for a container engine's client): when it does not,
                        the agent's capture says so (trace ``none`` with the reason: the attempt
                        is not observed by a trace, never CLEAN on one)
    ``box.captures_opens``  whether the box can report the file opens of its next command itself,
                        from the kernel (bwrap's agent box where fanotify works here): then
                        ``capture_opens()`` arms the next ``command`` and returns its capture
                        (``ledger.sandbox.fanotify.CommandOpens``: ``begin(pid)`` once started,
                        ``drain``, ``finish``, ``lost``), and the tracer need not stop the
                        command on its opens; None from a box that cannot

**The agent side** (``ledger/run/attempt/agent.py``, the bench's ``ledger/bench/confine.py``):
the attempt asks the run's backend (``registry.get(plan's sandbox)``) for one ``agent_box`` while
it prepares, journals ``box.as_data()`` as ``agent.started``'s ``sandbox`` (None: ``none``) and
``box.readable()`` as its scope, and hands the box to the agent runner::

    outcome = run_agent_process(invocation, ctx, box=box, limits=box.enforcement(...), ...)

``run_agent_process`` (``ledger/agents/process.py``) calls ``box.command(argv, env, limits=,
waiter=)`` once (the waiter pipes only for an isolated box: the in-namespace waiter counts the
orphans it finds through ``box.namespace()``), wraps strace around the confined argv from outside
when ``box.captures_trace``, filters the log with ``box.trace_lines``, and reports
``box.failure(...)`` as the outcome's ``sandbox_failed`` (journaled ``sandbox.failed`` with
``box.backend``). The attempt closes the box after the agent: the proxy's connections of
``box.close()`` become its ``net.connect`` entries.

A grading box runs several commands one after the other (hidden tests, signals, regression):
call ``command`` / ``started`` / ``failure`` for each; ``close`` once. ``BoxStartFailed`` is the
one error a caller raises when ``failure`` returns a message: the harness's failure (journaled as
``sandbox.failed`` with ``backend``), never the agent's.

Implementing a backend (``containers``: ``ledger/sandbox/container*.py``)::

    class PodmanSandbox:                               # satisfies ``Sandbox``
        name = "podman"
        hint = "install podman (Debian/Ubuntu: apt-get install podman runc)"
        def available(self) -> Availability: ...       # probed once, cached; never raises
        def agent_box(self, request: AgentRequest) -> Box: ...
        def grading_box(self, request: GradingRequest) -> Box: ...

    registry.register(PodmanSandbox())                 # one line in ledger/sandbox/registry.py

and a ``Box`` with the methods above. What every backend must guarantee is checked by
``tests/sandbox/sandbox_contract.py``, run against every registered backend: the request's
hidden paths are invisible, the worktree is writable and nothing else of the host is, there is no
network without an allowlist and the proxy journals what it saw, limits apply, and honest agent
shapes run. Keep the backend's own words (program names, flags) inside ``ledger/sandbox/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ledger.errors import LedgerError


class BoxStartFailed(LedgerError):
    """A box never ran its command (the backend's message): the harness's failure."""

    def __init__(self, stage: str, message: str, backend: str = "bwrap") -> None:
        super().__init__(f"the {stage} sandbox did not start: {message}")
        self.stage = stage
        self.message = message
        self.backend = backend


@dataclass(frozen=True)
class Availability:
    """Whether a backend works on this machine, why (or why not), and its version."""

    ok: bool
    reason: str
    version: str | None = None


@dataclass(frozen=True)
class SandboxStatus:
    """A requested ``--sandbox`` mode resolved on this machine (``registry.resolve``)."""

    requested: str
    mode: str  # a backend name: "bwrap" | "none" | ...
    reason: str
    version: str | None = None

    @property
    def backend(self) -> Sandbox:
        from ledger.sandbox.registry import get

        return get(self.mode)


@dataclass(frozen=True)
class AgentRequest:
    """What an agent's box must show and hide.

    ``argv`` is the agent's command line: its program's install tree (and its ``#!``
    interpreter's) becomes readable. ``harness_code`` shows the harness package (built-in and
    HTTP agents run it). ``allowlist``: hosts the journaling proxy lets through (none: no network
    at all); its socket lives in ``net_dir``, a folder no box shows; ``allows(host, port)``
    decides each request (``attest.scan.ScanPolicy.endpoint_allowed`` over the allowlist: the
    caller passes it, the sandbox imports nothing of ``attest``). ``loopback_ports``: declared
    loopback endpoints forwarded inside to the same port. ``config``: files of the operator's
    home the agent needs (``[agents.NAME] config``), copied into a fresh home by a backend that
    gives one (``copied_config``: ones the caller copied already)."""

    worktree: Path
    home: Path
    scratch: Path
    argv: tuple[str, ...]
    path_env: str
    hidden: tuple[str, ...] = ()
    harness_code: bool = False
    extra_readable: tuple[str, ...] = ()
    copied_config: tuple[str, ...] = ()
    allowlist: tuple[str, ...] = ()
    loopback_ports: tuple[int, ...] = ()
    net_dir: Path | None = None
    allows: Callable[[str, int], bool] | None = None
    config: tuple[str, ...] = ()


@dataclass(frozen=True)
class GradingRequest:
    """What a grading box (or an isolated task command's box) must show and hide.

    ``programs``: absolute programs the commands name outside the system folders
    (``paths.outside_system``); their install trees become readable. ``readable``: further
    read-only paths (the task folder whose solution script runs). ``cwd`` defaults to the
    worktree; the worktree, home and scratch are the only writable folders."""

    worktree: Path
    home: Path
    scratch: Path
    hidden: tuple[str, ...] = ()
    path_env: str = ""
    programs: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    cwd: Path | None = None


@dataclass(frozen=True)
class Confined:
    """A command as the box runs it: hand these to ``Popen`` / ``checks.run_command``."""

    argv: tuple[str, ...]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    preexec: Callable[[], None] | None = None


@dataclass(frozen=True)
class BoxRecords:
    """What a box leaves when it closes: its proxy's connections (``net.connect`` data, in
    order) and the start failures it saw (the backend's messages)."""

    backend: str
    connections: tuple[dict[str, Any], ...] = ()
    failures: tuple[str, ...] = ()
    commands: int = 0


@runtime_checkable
class Box(Protocol):
    """One confined place: see the module docstring for the calling order."""

    backend: str
    purpose: str  # "agent" | "grading"
    isolated: bool
    proxy: Any
    captures_trace: bool  # strace around ``command``'s argv sees the command's processes
    captures_opens: bool  # ``capture_opens`` gives the kernel's record of the next command's opens

    def readable(self) -> tuple[str, ...]: ...

    def capture_opens(self) -> Any: ...

    def writable(self) -> tuple[str, ...]: ...

    def enforcement(self, limits: Any, *, label: str) -> Any: ...

    def command(self, argv: Sequence[str], env: Mapping[str, str], *, limits: Any = None,
                waiter: tuple[int, int] | None = None) -> Confined: ...

    def started(self) -> None: ...

    def failure(self, returncode: int | None, output: str) -> str | None: ...

    def namespace(self) -> tuple[int, str] | None: ...

    def trace_lines(self, lines: Iterable[str]) -> Iterable[str]: ...

    def as_data(self) -> dict[str, Any] | None: ...

    def close(self) -> BoxRecords: ...


@runtime_checkable
class Sandbox(Protocol):
    """A backend: probes itself, makes boxes."""

    name: str
    hint: str  # how to make it available (an install line), for the refusal's message
    isolated: bool  # its boxes confine (every box's ``isolated``): False only for ``none``

    def available(self) -> Availability: ...

    def agent_box(self, request: AgentRequest) -> Box: ...

    def grading_box(self, request: GradingRequest) -> Box: ...


__all__ = ["AgentRequest", "Availability", "Box", "BoxRecords", "BoxStartFailed", "Confined",
           "GradingRequest", "Sandbox", "SandboxStatus"]
