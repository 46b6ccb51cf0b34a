"""The ``none`` backend of the Sandbox port: commands run as ordinary processes of the harness.

Nothing is confined (``isolated`` is False): the box shows the whole host, has the host's network
(no proxy), and ``--sandbox none`` is recorded as such (``as_data`` is None: ``agent.started``
and ``grading`` carry ``"sandbox": null``). Limits still apply: the ``Enforcement`` it makes sets
the rlimits between fork and exec and joins the cgroups. The command and its environment go
through unchanged; the caller sweeps orphans itself (there is no namespace to count them in).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledger.sandbox.port import AgentRequest, Availability, BoxRecords, Confined, GradingRequest


class LocalBox:
    """A box that confines nothing (see the module docstring)."""

    backend = "none"
    isolated = False
    proxy = None
    captures_trace = True  # an ordinary process: strace around it sees it all
    captures_opens = False  # no sandbox mounts to mark: strace traces the opens too

    def __init__(self, purpose: str, writable: Sequence[str]) -> None:
        self.purpose = purpose
        self._writable = tuple(writable)
        self._commands = 0

    def readable(self) -> tuple[str, ...]:
        return ("/",)

    def writable(self) -> tuple[str, ...]:
        return self._writable

    def as_data(self) -> None:
        return None

    def capture_opens(self) -> None:
        return None

    def enforcement(self, limits: Any, *, label: str) -> Any:
        from ledger.sandbox.limits import Enforcement

        return Enforcement(limits, sandboxed=False, label=label)

    def command(self, argv: Sequence[str], env: Mapping[str, str], *, limits: Any = None,
                waiter: tuple[int, int] | None = None) -> Confined:
        self._commands += 1
        return Confined(argv=tuple(argv), env=dict(env),
                        preexec=limits.preexec if limits is not None else None)

    def started(self) -> None:
        return None

    def failure(self, returncode: int | None, output: str) -> str | None:
        return None  # an ordinary process that could not start is the command's exit 127

    def namespace(self) -> None:
        return None

    def trace_lines(self, lines: Iterable[str]) -> Iterable[str]:
        return lines

    def close(self) -> BoxRecords:
        return BoxRecords(backend=self.backend, commands=self._commands)


class LocalSandbox:
    """``--sandbox none``: always available."""

    name = "none"
    hint = ""
    isolated = False

    def available(self) -> Availability:
        return Availability(True, "isolation disabled (--sandbox none)")

    def agent_box(self, request: AgentRequest) -> LocalBox:
        return LocalBox("agent", [str(p) for p in dict.fromkeys((request.worktree, request.home))])

    def grading_box(self, request: GradingRequest) -> LocalBox:
        return LocalBox("grading", [str(request.worktree), str(request.home),
                                    str(request.scratch)])
