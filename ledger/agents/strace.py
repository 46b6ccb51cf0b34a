"""strace itself: the command line the agent runs under, whether it works here, and its log's text
read back as ``Syscall`` records (``ledger.agents.trace`` turns them into events).

The agent runs as ``strace -DDD -f -qq -ttt -y -xx -s 4096 [--seccomp-bpf] -e trace=... -o LOG
-E LEDGER_ATTEMPT=.. -- AGENT...``:

* ``--seccomp-bpf`` (where it works here: ``strace_filter``, probed once; journaled as
  ``agent.started.trace_filter``) installs a seccomp filter in the agent that stops it only on
  the traced syscalls, instead of on every syscall: a syscall-heavy agent runs at nearly its own
  speed. The filter is inherited by every child, traced or not, across ``exec``: a child that
  escapes the tracer (``CLONE_UNTRACED``) or outlives it gets ``ENOSYS`` from every traced
  syscall (the kernel's answer to ``SECCOMP_RET_TRACE`` with no tracer), so it cannot open, run
  or connect anything; and the option implies ``--kill-on-exit``: a tracer that dies takes the
  agent with it. Without it (``ptrace``) the flags are the same minus that one.

* ``-DDD`` keeps the tracer out of the agent's way: the agent stays the harness's direct child
  (its exit status is its own) and the tracer lives in a session of its own, so killing the
  agent's process group on timeout never kills the tracer before it has written its log.
* ``-y`` prints the path behind every file descriptor, including the one an ``openat`` returns
  (the kernel's resolved path) and ``AT_FDCWD`` (the caller's working directory, strace >= 6),
  so relative paths resolve without tracking ``chdir``.
* ``-xx`` prints every string as ``\\xNN`` escapes: no quote, comma or bracket inside a string can
  confuse the parser, and non-UTF-8 names survive (decoded with ``errors="replace"``).
* ``-E`` puts the attempt marker in the agent's environment only, never in the tracer's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

# Syscalls present on every Linux architecture, then legacy ones (``?`` = ignore if absent).
_SYSCALLS = (
    "openat", "execve", "execveat", "connect", "renameat2", "unlinkat", "mkdirat", "truncate",
    "symlinkat", "linkat",
    "?open", "?openat2", "?creat", "?rename", "?renameat", "?unlink", "?rmdir", "?mkdir",
    "?symlink", "?link",
)
# The opens among them: left out when the box reports the command's opens itself (fanotify:
# ``ledger.sandbox.fanotify``), so the tracer stops the agent only on the rest
OPEN_SYSCALLS = frozenset({"openat", "?open", "?openat2", "?creat"})
STRING_LIMIT = 4096


# The activity capture a run asks for (--trace, [run] trace): strace where it works here, strace
# or nothing (``ledger.agents.process.resolve_trace`` decides what ``auto`` becomes)
TRACE_MODES = ("auto", "strace", "none")
SECCOMP_ENV = "LEDGER_TRACE_SECCOMP"  # "off": never use --seccomp-bpf (diagnostics, benchmarks)
FILTER_SECCOMP = "seccomp-bpf"  # the tracee stops only on the traced syscalls
FILTER_PTRACE = "ptrace"  # the tracee stops on every syscall (strace without --seccomp-bpf)


def strace_command(log_path: Path, agent_env: Mapping[str, str], *,
                   seccomp: bool | None = None, opens: bool = True) -> list[str]:
    """The argv prefix that runs a command under strace, logging to ``log_path``.

    ``agent_env`` is set in the traced command's environment only (``-E NAME=VALUE``).
    ``seccomp``: add ``--seccomp-bpf`` (default: where ``strace_filter`` found it works).
    ``opens``: trace the opens (``OPEN_SYSCALLS``); False when another capture reports them
    (execs, connects, renames, unlinks, links and ``mkdir`` are traced either way).
    """
    if seccomp is None:
        seccomp = strace_filter() == FILTER_SECCOMP
    prog = shutil.which("strace") or "strace"
    argv = [prog, "-DDD", "-f", "-qq", "-ttt", "-y", "-xx", "-s", str(STRING_LIMIT)]
    if seccomp:
        argv.append("--seccomp-bpf")
    calls = _SYSCALLS if opens else tuple(c for c in _SYSCALLS if c not in OPEN_SYSCALLS)
    argv += ["-e", "trace=" + ",".join(calls), "-e", "signal=none", "-o", str(log_path)]
    for name, value in agent_env.items():
        argv += ["-E", f"{name}={value}"]
    argv.append("--")
    return argv


_status_lock = threading.Lock()
_status: tuple[bool, str] | None = None
_filter: str | None = None


def strace_status(*, refresh: bool = False) -> tuple[bool, str]:
    """Whether strace works here, with the exact flags the harness uses (checked once, cached)."""
    global _status, _filter
    with _status_lock:
        if _status is None or refresh:
            _status = _probe()
            _filter = None
        return _status


def strace_filter(*, refresh: bool = False) -> str:
    """How the tracer stops the agent: ``FILTER_SECCOMP`` where strace's ``--seccomp-bpf`` works
    here (strace >= 5.3, a kernel with seccomp filters and ``PTRACE_O_TRACESECCOMP``: checked
    once, by running a program under it and reading its ``Seccomp:`` mode back), else
    ``FILTER_PTRACE`` (today's flags: a stop on every syscall). ``LEDGER_TRACE_SECCOMP=off``
    forces ``FILTER_PTRACE``."""
    global _filter
    if os.environ.get(SECCOMP_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return FILTER_PTRACE
    with _status_lock:
        if _filter is None or refresh:
            _filter = _probe_seccomp()
        return _filter


def _probe() -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, f"strace needs Linux (this is {sys.platform})"
    true_prog = shutil.which("true")
    if shutil.which("strace") is None:
        return False, "strace is not on PATH (install it: apt-get install strace)"
    if true_prog is None:
        return False, "cannot probe strace: no 'true' program on PATH"
    argv = strace_command(Path(os.devnull), {"LEDGER_PROBE": "1"}, seccomp=False) + [true_prog]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"strace probe failed: {exc}"
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = err[-1] if err else f"exit {proc.returncode}"
        return False, f"strace does not work here ({detail[:200]}); ptrace may be forbidden"
    return True, "strace available"


def _probe_seccomp() -> str:
    """``FILTER_SECCOMP`` when a program run with the harness's flags plus ``--seccomp-bpf``
    exits 0, strace says nothing, and the program runs under a seccomp filter (mode 2); else
    ``FILTER_PTRACE`` (strace proceeds without the filter when it cannot install it)."""
    cat = shutil.which("cat")
    if not sys.platform.startswith("linux") or cat is None or shutil.which("strace") is None:
        return FILTER_PTRACE
    argv = strace_command(Path(os.devnull), {"LEDGER_PROBE": "1"}, seccomp=True)
    try:
        proc = subprocess.run(argv + [cat, "/proc/self/status"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return FILTER_PTRACE
    mode = re.search(rb"^Seccomp:\s*(\d+)", proc.stdout, re.MULTILINE)
    if proc.returncode == 0 and not proc.stderr.strip() and mode is not None and mode.group(1) == b"2":
        return FILTER_SECCOMP
    return FILTER_PTRACE


# --- strace text ------------------------------------------------------------------------------

_LINE = re.compile(r"^(\d+)\s+(\d+(?:\.\d+)?)\s+(.*)$")
_RESUMED = re.compile(r"^<\.\.\. ([A-Za-z0-9_]+) resumed>(.*)$")
_CALL = re.compile(r"^([A-Za-z0-9_]+)\((.*)$", re.DOTALL)
_RET = re.compile(r"^\s*=\s*(-?\d+|0x[0-9a-fA-F]+|\?)(?:<(.*?)>)?(?:\s+([A-Z][A-Z0-9_]*))?")
_FD = re.compile(r"^(-?\d+|AT_FDCWD)(?:<(.*)>)?$", re.DOTALL)
_STRING = re.compile(r'^@?"([^"\\]*(?:\\.[^"\\]*)*)"(\.\.\.)?$', re.DOTALL)
_ESC = re.compile(rb"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)", re.DOTALL)
_ALL_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2})*")
_OPENAT_ARGS = re.compile(  # dirfd, "path", flags[, mode]) rest -- strings and <paths> as -xx prints them
    r'((?:AT_FDCWD|-?\d+)(?:<[^<>"]*>)?), ("[^"\\]*(?:\\x[0-9a-fA-F]{2}[^"\\]*)*"), ([A-Z0-9_|]+)'
    r'(?:, (0[0-7]*))?\)(.*)$', re.DOTALL)
_ARG_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[()\[\]{},]')  # unrolled: fast on -xx
_SIMPLE_ESC = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"v": b"\v", b"f": b"\f", b"a": b"\a",
               b"b": b"\b", b"e": b"\x1b"}
WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def unescape(text: str) -> bytes:
    """Bytes of a strace string body (``\\xNN``, octal and C escapes)."""
    if _ALL_HEX.fullmatch(text):  # what -xx prints: every byte as \xNN
        return bytes.fromhex(text.replace("\\x", ""))

    def one(m: re.Match[bytes]) -> bytes:
        esc = m.group(1)
        if esc[:1] == b"x" and len(esc) == 3:
            return bytes([int(esc[1:], 16)])
        if esc[:1].isdigit():
            return bytes([int(esc, 8) & 0xFF])
        return _SIMPLE_ESC.get(esc, esc)

    return _ESC.sub(one, text.encode("utf-8", "surrogateescape"))


def split_args(text: str) -> tuple[list[str], str]:
    """Split ``a, {b, c}, [d], "e"...) = 3<...>`` into top-level args and the text after ``)``."""
    args: list[str] = []
    depth = 0
    start = 0
    for m in _ARG_TOKEN.finditer(text):
        c = m.group()
        if c[0] == '"':
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and c == ")":
                last = text[start:m.start()].strip()
                if last or args:
                    args.append(last)
                return args, text[m.end():]
            depth -= 1
        elif depth == 0:  # a comma
            args.append(text[start:m.start()].strip())
            start = m.end()
    tail = text[start:].strip()
    if tail:
        args.append(tail)
    return args, ""


def decode_string(arg: str) -> bytes | None:
    m = _STRING.match(arg.strip())
    return unescape(m.group(1)) if m else None


def decode_fd(arg: str) -> tuple[str, bytes | None]:
    """``3</a/b>`` -> ("3", b"/a/b"); ``AT_FDCWD</w>`` -> ("AT_FDCWD", b"/w")."""
    m = _FD.match(arg.strip())
    if not m:
        return arg.strip(), None
    return m.group(1), (unescape(m.group(2)) if m.group(2) is not None else None)


def decode_array(arg: str) -> list[str]:
    arg = arg.strip()
    if not (arg.startswith("[") and arg.endswith("]")):
        return []
    items, _ = split_args(arg[1:-1] + ")")
    out: list[str] = []
    for item in items:
        raw = decode_string(item)
        if raw is not None:
            out.append(text_of(raw))
        elif item == "...":
            out.append("...")
    return out


def text_of(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


@dataclass
class Syscall:
    pid: int
    ts: float
    name: str
    args: list[str]
    ret: str
    ret_path: bytes | None
    errno: str | None

    @property
    def ok(self) -> bool:
        return self.errno is None and self.ret != "-1"


def iter_syscalls(lines: Iterable[str], *, skip_failed: frozenset[str] = frozenset()
                  ) -> Iterator[Syscall]:
    """Complete syscalls from strace ``-f -ttt`` lines, joining ``unfinished``/``resumed`` pairs.

    Calls named in ``skip_failed`` that returned -1 are dropped before their arguments are
    split (a Python import fails dozens of opens while it searches ``sys.path``).
    """
    pending: dict[int, str] = {}
    for raw in lines:
        line = raw.rstrip("\n")
        m = _LINE.match(line)
        if not m:
            continue
        pid, ts, body = int(m.group(1)), float(m.group(2)), m.group(3)
        if body.startswith(("+++", "---")):
            continue
        r = _RESUMED.match(body)
        if r:
            head = pending.pop(pid, None)
            if head is None:
                continue
            body = head + r.group(2)
        elif body.endswith("<unfinished ...>"):
            pending[pid] = body[: -len("<unfinished ...>")].rstrip()
            continue
        c = _CALL.match(body)
        if not c:
            continue
        if c.group(1) in skip_failed:
            failed = body.rfind(") = -1 ")
            if failed > 0 and failed > body.rfind('"'):
                continue
        fast = _OPENAT_ARGS.match(c.group(2)) if c.group(1) == "openat" else None
        if fast is not None:  # the common case, without the general splitter
            args = [fast.group(1), fast.group(2), fast.group(3)]
            if fast.group(4) is not None:
                args.append(fast.group(4))
            rest = fast.group(5)
        else:
            args, rest = split_args(c.group(2))
        rm = _RET.match(rest)
        if not rm:
            continue
        ret_path = unescape(rm.group(2)) if rm.group(2) is not None else None
        yield Syscall(pid, ts, c.group(1), args, rm.group(1), ret_path, rm.group(3))
