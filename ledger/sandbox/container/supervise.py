"""Telling a command that ended from a container that was ended under it.

Each command of a podman box runs under a small ``/bin/sh`` supervisor as the container's PID 1
(``wrap``). It starts the command as its child, passes SIGTERM/SIGINT/SIGHUP on to it, waits for
it, and then writes one line, ``ledger-box exit N``, to a pipe of the harness (``Status``, handed
in with ``--preserve-fds``) before exiting with the command's own status. A command missing from
the image is reported as ``ledger-box noexec`` (the box never ran it, as the engine's own 127).

When the engine client has returned and that line is not in the pipe, the supervisor never got to
write it: the container was killed or removed from outside, or the engine or runtime died. That is
the harness's failure (``ContainerBox.failure``: a ``sandbox.failed``, an infra failure excluded
from the score and re-run by ``--retry infra``), never the command's.

Why the line cannot be forged into an infra failure: the command cannot stop its PID 1 (signals
from inside a PID namespace reach its init only for handlers it installed: none for SIGKILL or
SIGSTOP), and bytes it writes into the pipe (through ``/proc/1/fd``) cannot remove the
supervisor's own line (and ``noexec`` counts only as the first line, written before the command
started); at worst a forged line makes a killed container look like a command that ended, which
hides an infra failure but scores nothing. The residue: this machine class has no Yama, so a
command that ptraces its PID 1 (same uid) could end it without its line and be recorded as an
infra failure; the supervisor would need another uid than the command's to close that. The container's stdin is not attached
(no ``--interactive``), so the child's being started in the background changes nothing there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from ledger.spawn import read_available

SHELL = "/bin/sh"
_EXIT = "ledger-box exit "
_NOEXEC = "ledger-box noexec"


def script(fd: int) -> str:
    """The supervisor for status fd ``fd`` (``$@`` is the command)."""
    return (
        'case $1 in */*) [ -x "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac || {\n'
        f'  echo "{_NOEXEC}" >&{fd}; echo "Error: $1: executable file not found in the container" >&2\n'
        "  exit 127\n"
        "}\n"
        f'"$@" {fd}>&- &\n'
        "c=$!\n"
        "trap 'kill -TERM $c 2>/dev/null' TERM\n"
        "trap 'kill -INT $c 2>/dev/null' INT\n"
        "trap 'kill -HUP $c 2>/dev/null' HUP\n"
        "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null || break; done\n"
        f'echo "{_EXIT}$s" >&{fd}\n'
        "exit $s\n")


def wrap(inner: Sequence[str], fd: int) -> list[str]:
    """``inner`` as the supervisor's child (the supervisor reports on ``fd``)."""
    return [SHELL, "-c", script(fd), "ledger-box", *inner]


class Status:
    """One command's status pipe: ``write`` goes to the child, ``read`` after it ended."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._text = ""

    def release(self) -> None:
        """The harness's copy of the write end (the child has its own once started)."""
        if self.write_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.write_fd)
            self.write_fd = -1

    def text(self) -> str:
        """What the supervisor (and anything else in the container) wrote so far, bounded."""
        if self.read_fd >= 0 and len(self._text) < 65536:
            self._text += read_available(self.read_fd, 65536 - len(self._text)).decode("utf-8", "replace")
        return self._text

    def verdict(self) -> str:
        """``exited`` (the command ended by itself), ``noexec`` (not in the image) or ``killed``
        (the supervisor never reported: the container was ended under the command)."""
        lines = self.text().splitlines()
        if lines[:1] == [_NOEXEC]:  # written before the command started: nothing else precedes it
            return "noexec"
        if any(line.startswith(_EXIT) for line in lines):
            return "exited"
        return "killed"

    def close(self) -> None:
        self.release()
        if self.read_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            self.read_fd = -1
