"""The ``bwrap`` backend of the Sandbox port (``ledger.sandbox.port``): boxes made of bubblewrap.

    BwrapSandbox.agent_box(req)    ``attempt_boxes.agent_setup`` (``agent_policy``: the install trees
                                   the agent's argv needs, the harness package for built-in
                                   agents, the hidden paths masked); with an allowlist, the
                                   journaling proxy on a unix socket bound in and the agent
                                   behind the forwarder
    BwrapSandbox.grading_box(req)  ``attempt_boxes.grading_policy``: the fresh tree, the interpreter,
                                   the harness's pytest reporter, the task's test programs
    BwrapBox.command(argv, env)    ``bwrap_command``: the status pipe (a box that never ran its
                                   command), ``--info-fd`` when a waiter counts orphans, the
                                   limits' init script inside; the box's HOME and TMPDIR;
                                   ``--block-fd`` when ``capture_opens`` armed it
    BwrapBox.capture_opens()       an agent box where fanotify works here
                                   (``ledger.sandbox.fanotify``): the next command's file opens,
                                   reported by the kernel through mount marks on the sandbox's
                                   own mounts, set while bwrap's child waits on ``--block-fd``

The policy of a box is ``box.policy`` (``SandboxPolicy``); ``as_data`` is its record, the same
data ``agent.started`` and ``grading`` carried before the port (the agent's also names bwrap's
version under ``bwrap``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ledger.sandbox import attempt_boxes
from ledger.sandbox.bwrap import INSTALL_HINT, StartStatus, bwrap_command, probe_bwrap
from ledger.sandbox.fanotify import CommandOpens, fanotify_status
from ledger.sandbox.policy import SandboxPolicy
from ledger.sandbox.port import AgentRequest, Availability, BoxRecords, Confined, GradingRequest
from ledger.sandbox.tracelog import agent_lines


class BwrapBox:
    """One bubblewrap box over ``policy`` (see ``ledger.sandbox.port`` for the calling order)."""

    backend = "bwrap"
    isolated = True
    captures_trace = True  # strace outside follows bwrap into the namespaces

    def __init__(self, policy: SandboxPolicy, *, home: str, scratch: str, proxy: Any = None,
                 forward: tuple[str, tuple[int, ...]] | None = None) -> None:
        self.policy = policy
        self.home, self.scratch = home, scratch
        self.purpose = policy.purpose
        self.proxy = proxy
        self._forward = forward  # (socket path, loopback ports) of the forwarder, with a proxy
        self._status: StartStatus | None = None
        self._info: tuple[int, int] | None = None  # bwrap's --info-fd pipe (read, write)
        self._namespace: tuple[int, str] | None = None
        self._commands = 0
        self._failures: list[str] = []
        self._opens: CommandOpens | None = None  # armed for the next command

    # ---- what it shows

    def readable(self) -> tuple[str, ...]:
        return tuple(p for p in self.policy.readable if p not in self.policy.masked)

    def writable(self) -> tuple[str, ...]:
        return self.policy.writable

    def as_data(self) -> dict[str, Any]:
        data = self.policy.as_data()
        if self.purpose == "agent":
            data["bwrap"] = probe_bwrap()[2]
        return data

    # ---- running one command

    @property
    def captures_opens(self) -> bool:
        """An agent box where fanotify works here (the grading capture keeps strace's opens:
        its collection rule needs them in order with the rest)."""
        return self.purpose == "agent" and fanotify_status()[0]

    def capture_opens(self) -> CommandOpens | None:
        """Arm the next ``command`` (``--block-fd``); the caller owns the capture returned."""
        if not self.captures_opens:
            return None
        self._opens = CommandOpens()
        return self._opens

    def enforcement(self, limits: Any, *, label: str) -> Any:
        from ledger.sandbox.limits import Enforcement

        return Enforcement(limits, sandboxed=True, label=label)

    def command(self, argv: Sequence[str], env: Mapping[str, str], *, limits: Any = None,
                waiter: tuple[int, int] | None = None) -> Confined:
        """``argv`` inside the box. ``limits`` (an ``Enforcement``): its init script inside and
        its preexec outside. ``waiter`` (status write end, release read end): the init script is
        the attempt's waiter too, and bwrap reports the namespace (``namespace()``)."""
        self._reset()
        self._commands += 1
        inner, inner_env = attempt_boxes.inner_command(argv, env, policy=self.policy, home=self.home,
                                               scratch=self.scratch, forward=self._forward,
                                               python=sys.executable)
        self._status = StartStatus()
        extra = self._status.args()
        fds = [*self._status.pass_fds]
        if waiter is not None:
            self._info = os.pipe()
            extra += ["--info-fd", str(self._info[1])]
            fds += [self._info[1], *waiter]
        opens, self._opens = self._opens, None
        if opens is not None:
            extra += opens.args()
            fds += opens.pass_fds
        init: Sequence[str] = ()
        if limits is not None:
            init = limits.init_script(*waiter) if waiter is not None else limits.init_script()
        return Confined(argv=tuple(bwrap_command(self.policy, inner, extra=extra, init=init)),
                        env=inner_env, pass_fds=tuple(fds),
                        preexec=limits.preexec if limits is not None else None)

    def started(self) -> None:
        if self._status is not None:
            self._status.started()
        if self._info is not None and self._info[1] >= 0:
            os.close(self._info[1])
            self._info = (self._info[0], -1)

    def failure(self, returncode: int | None, output: str) -> str | None:
        status, self._status = self._status, None
        if status is None:
            return None
        why = status.failure(returncode, output)
        status.close()
        if why is not None:
            self._failures.append(why)
        return why

    def namespace(self) -> tuple[int, str] | None:
        """(host pid of the namespace's init, its ``pid:[inode]``) from bwrap's info."""
        if self._namespace is not None or self._info is None:
            return self._namespace
        data = b""
        with contextlib.suppress(OSError):
            os.set_blocking(self._info[0], False)
            while len(data) < 65536:
                chunk = os.read(self._info[0], 4096)
                if not chunk:
                    break
                data += chunk
        try:
            info = json.loads(data.decode("utf-8", "replace").split("}", 1)[0] + "}")
            self._namespace = (int(info["child-pid"]), f"pid:[{int(info['pid-namespace'])}]")
        except (ValueError, KeyError, TypeError):
            return None
        return self._namespace

    def trace_lines(self, lines: Iterable[str]) -> Iterator[str]:
        return agent_lines(lines)

    # ---- the end

    def _reset(self) -> None:
        if self._status is not None:
            self._status.close()
            self._status = None
        if self._info is not None:
            for fd in self._info:
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._info = None
        self._namespace = None

    def close(self) -> BoxRecords:
        self._reset()
        proxy, self.proxy = self.proxy, None
        connections = proxy.close() if proxy is not None else []
        return BoxRecords(backend=self.backend, connections=tuple(connections),
                          failures=tuple(self._failures), commands=self._commands)


class BwrapSandbox:
    """The bubblewrap backend (``ledger.sandbox.bwrap``: the command line and the probe)."""

    name = "bwrap"
    hint = INSTALL_HINT
    isolated = True

    def available(self) -> Availability:
        ok, reason, version = probe_bwrap()
        return Availability(ok, reason, version)

    def agent_box(self, request: AgentRequest) -> BwrapBox:
        made = attempt_boxes.agent_setup(request)
        return BwrapBox(made.policy, home=str(request.home), scratch=str(request.scratch),
                        proxy=made.proxy, forward=made.forward)

    def grading_box(self, request: GradingRequest) -> BwrapBox:
        policy = attempt_boxes.grading_policy(
            worktree=request.worktree, home=request.home, scratch=request.scratch,
            hidden=request.hidden, path_env=request.path_env, programs=request.programs,
            readable=request.readable, cwd=request.cwd)
        return BwrapBox(policy, home=str(request.home), scratch=str(request.scratch))
