"""One contract, every Sandbox backend: ``test_sandbox_contract.py`` runs these tests against every
backend of ``ledger.sandbox.registry`` that works on this machine (a backend is tested by being
registered). Each test takes the ``sandbox`` fixture (a ``ledger.sandbox.port.Sandbox``).

A backend whose boxes say ``isolated`` must deliver the confinement: the request's hidden paths
invisible, the worktree writable and nothing else of the host, no network without an allowlist,
the proxy journaling every request (allowed or denied). A backend that confines nothing (``none``)
must say so (``isolated`` False, ``as_data`` None, the whole host readable), so the run records
``isolation: none``. Every backend applies limits, tells a command that failed from a box that
never ran it, and runs the honest agent shapes.

Each attacker prints what it tried (``TRIED ...``) and the test asserts that line, so a box that
kills every command cannot pass.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.sandbox.limits import MIB, Limits
from ledger.sandbox.port import AgentRequest, Box, BoxRecords, GradingRequest, Sandbox
from ledger.tasks.checks import run_command

SECRET = "contract-secret-" + secrets.token_hex(8)


@dataclass
class Folders:
    root: Path
    worktree: Path
    home: Path
    scratch: Path
    outside: Path  # a folder of the host shown read-only (its ``hidden/`` masked)
    hidden: Path


def folders(tmp: Path) -> Folders:
    """The attempt's folders and a read-only host folder holding a hidden one with a secret."""
    root = tmp / "attempt"
    f = Folders(root, root / "wt", root / "home", root / "scratch", tmp / "outside",
                tmp / "outside" / "hidden")
    for p in (f.worktree, f.home, f.scratch, f.hidden):
        p.mkdir(parents=True, exist_ok=True)
    (f.outside / "public.txt").write_text("public\n")
    (f.hidden / "answer.txt").write_text(SECRET + "\n")
    return f


def agent_box(sandbox: Sandbox, f: Folders, argv: list[str], **kw: Any) -> Box:
    return sandbox.agent_box(AgentRequest(
        worktree=f.worktree, home=f.home, scratch=f.scratch, argv=tuple(argv),
        path_env=os.environ.get("PATH", os.defpath), hidden=(str(f.hidden),),
        extra_readable=(str(f.outside),), net_dir=f.root / "net", **kw))


def grading_box(sandbox: Sandbox, f: Folders) -> Box:
    return sandbox.grading_box(GradingRequest(
        worktree=f.worktree, home=f.home, scratch=f.scratch, hidden=(str(f.hidden),),
        path_env=os.environ.get("PATH", os.defpath), readable=(str(f.outside),)))


def run(box: Box, f: Folders, argv: list[str], *, limits: Any = None,
        env: dict[str, str] | None = None, timeout: float = 60.0) -> tuple[int, str, str | None]:
    """(exit code, output, the box's start failure) of ``argv`` in ``box``."""
    confined = box.command(argv, env if env is not None else _env(f), limits=limits)
    log = f.root / f"out-{secrets.token_hex(4)}.log"
    code, _s, timed_out = run_command(confined.argv, cwd=f.worktree, env=confined.env,
                                      timeout=timeout, output=log, pass_fds=confined.pass_fds,
                                      preexec=confined.preexec)
    box.started()
    text = log.read_text(errors="replace")
    return code, text, None if timed_out else box.failure(code, text)


def _env(f: Folders) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(f.home),
            "TMPDIR": str(f.scratch), "LANG": "C.UTF-8"}


def py(code: str) -> list[str]:
    return [sys.executable, "-I", "-c", code]


def isolated_only(box: Box) -> None:
    if not box.isolated:
        box.close()
        pytest.skip(f"the {box.backend} backend confines nothing (it says so: isolated False)")


# --------------------------------------------------------------------------- the protocol


def test_backend_and_boxes_implement_the_port(sandbox: Sandbox, tmp_path: Path) -> None:
    """The backend and both of its boxes satisfy the protocols; records name the backend."""
    f = folders(tmp_path)
    assert isinstance(sandbox, Sandbox) and sandbox.available().ok
    for box in (agent_box(sandbox, f, ["/bin/true"]), grading_box(sandbox, f)):
        assert isinstance(box, Box)
        assert box.backend == sandbox.name
        assert box.isolated is sandbox.isolated  # what the attempt asks before any box exists
        assert str(f.worktree) in box.writable()
        data = box.as_data()
        assert (data is None) is (not box.isolated)
        if data is not None:
            assert data["purpose"] == box.purpose
        records = box.close()
        assert isinstance(records, BoxRecords) and records.backend == sandbox.name


def test_a_box_that_confines_nothing_says_so(sandbox: Sandbox, tmp_path: Path) -> None:
    """``isolated`` False means the box shows the whole host and records no sandbox."""
    box = grading_box(sandbox, folders(tmp_path))
    try:
        if box.isolated:
            assert "/" not in box.readable()
            assert box.as_data() is not None
        else:
            assert box.readable() == ("/",) and box.as_data() is None and box.proxy is None
    finally:
        box.close()


# --------------------------------------------------------------------------- confinement


HIDDEN_READER = """
import os, sys
for path in sys.argv[1:]:
    try:
        with open(path) as fh:
            print("TRIED", path, "READ", fh.read().strip())
    except OSError as exc:
        print("TRIED", path, "DENIED", type(exc).__name__)
    try:
        print("TRIED-LIST", path, os.listdir(os.path.dirname(path)))
    except OSError as exc:
        print("TRIED-LIST", path, "DENIED", type(exc).__name__)
"""


@pytest.mark.parametrize("purpose", ["agent", "grading"])
def test_hidden_paths_are_invisible(sandbox: Sandbox, tmp_path: Path, purpose: str) -> None:
    """A hidden folder inside a readable tree can be neither read nor listed; its neighbour can."""
    f = folders(tmp_path)
    target = str(f.hidden / "answer.txt")
    argv = py(HIDDEN_READER) + [target, str(f.outside / "public.txt")]
    box = agent_box(sandbox, f, argv) if purpose == "agent" else grading_box(sandbox, f)
    isolated_only(box)
    try:
        code, out, failed = run(box, f, argv)
    finally:
        box.close()
    assert failed is None and code == 0, out
    assert f"TRIED {target} " in out and f"TRIED {f.outside / 'public.txt'} READ public" in out
    assert SECRET not in out and "answer.txt" not in out.split("TRIED-LIST " + target, 1)[1]


WRITER = """
import sys
for path in sys.argv[1:]:
    try:
        with open(path, "w") as fh:
            fh.write("planted")
        print("TRIED", path, "WROTE")
    except OSError as exc:
        print("TRIED", path, "DENIED", type(exc).__name__)
"""


@pytest.mark.parametrize("purpose", ["agent", "grading"])
def test_worktree_writable_nothing_else(sandbox: Sandbox, tmp_path: Path, purpose: str) -> None:
    """The worktree (and the box's home and scratch) take writes; a shown host folder, the host's
    /tmp and the hidden folder do not, and nothing lands on the host there."""
    f = folders(tmp_path)
    inside = [f.worktree / "made.txt", f.home / "made.txt", f.scratch / "made.txt"]
    stray = f"/tmp/ledger-contract-{secrets.token_hex(6)}"
    outside = [f.outside / "planted.txt", Path(stray), f.hidden / "planted.txt",
               Path(sys.prefix) / f"planted-{secrets.token_hex(4)}"]
    argv = py(WRITER) + [str(p) for p in (*inside, *outside)]
    box = agent_box(sandbox, f, argv) if purpose == "agent" else grading_box(sandbox, f)
    isolated_only(box)
    try:
        code, out, failed = run(box, f, argv)
    finally:
        box.close()
        with_planted = [p for p in outside if p.exists()]
        for p in with_planted:
            p.unlink()
    assert failed is None and code == 0, out
    for p in inside:
        assert f"TRIED {p} WROTE" in out and p.read_text() == "planted"
    for p in outside:
        assert f"TRIED {p} DENIED" in out
    assert with_planted == []


CONNECTOR = """
import socket, sys
port = int(sys.argv[1])
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    print("TRIED connect", port, "CONNECTED", s.recv(100))
except OSError as exc:
    print("TRIED connect", port, "REFUSED", type(exc).__name__)
"""


class _Listener:
    """A loopback TCP server of the host that counts who reached it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.close()

    def close(self) -> None:
        self.sock.close()


def test_no_network_without_an_allowlist(sandbox: Sandbox, tmp_path: Path) -> None:
    """Without an allowlist a box has no way to the host's network: the host's loopback
    server is not reached, and there is no proxy."""
    f = folders(tmp_path)
    server = _Listener()
    argv = py(CONNECTOR) + [str(server.port)]
    box = agent_box(sandbox, f, argv)
    try:
        isolated_only(box)
        assert box.proxy is None
        code, out, failed = run(box, f, argv)
        box.close()
    finally:
        server.close()
    assert failed is None and code == 0, out
    assert f"TRIED connect {server.port} REFUSED" in out and server.hits == 0


PROXIED = """
import os, sys, urllib.request
port = sys.argv[1]
for url in ("http://127.0.0.1:%s/allowed" % port, "http://denied.invalid/x"):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(
        {"http": os.environ["HTTP_PROXY"]}))
    try:
        print("TRIED", url, "GOT", opener.open(url, timeout=10).status)
    except Exception as exc:
        print("TRIED", url, "REFUSED", getattr(exc, "code", type(exc).__name__))
"""


def test_proxy_journals_what_it_allowed_and_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    """With an allowlist the box reaches the allowed host through the harness's proxy only (a
    declared loopback endpoint at its own address, the rest through ``HTTP_PROXY``), and the
    box's records hold one connection per request, allowed or denied."""
    f = folders(tmp_path)
    server = _Listener()
    argv = py(PROXIED) + [str(server.port)]
    box = agent_box(sandbox, f, argv, allowlist=(f"127.0.0.1:{server.port}",),
                    loopback_ports=(server.port,))
    try:
        isolated_only(box)
        assert box.proxy is not None
        code, out, failed = run(box, f, argv)
        records = box.close()
    finally:
        server.close()
    assert failed is None and code == 0, out
    assert f"TRIED http://127.0.0.1:{server.port}/allowed GOT 200" in out
    assert "TRIED http://denied.invalid/x REFUSED 403" in out
    seen = [(r["host"], r["allowed"]) for r in records.connections]
    assert ("127.0.0.1", True) in seen and ("denied.invalid", False) in seen
    assert server.hits == 1


# --------------------------------------------------------------------------- limits, starts


FILLER = """
import sys
try:
    with open("big.bin", "wb") as fh:
        for _ in range(8):
            fh.write(b"x" * (1 << 20))
            fh.flush()
    print("TRIED write 8 MiB WROTE")
except OSError as exc:
    print("TRIED write 8 MiB STOPPED", type(exc).__name__)
"""


def test_limits_apply_in_the_box(sandbox: Sandbox, tmp_path: Path) -> None:
    """A 1 MiB file-size limit stops a writer of 8 MiB, whether the box confines or not."""
    f = folders(tmp_path)
    argv = py(FILLER)
    box = agent_box(sandbox, f, argv)
    enf = box.enforcement(Limits(file_size=1 * MIB, cgroups=False), label="agent")
    try:
        code, out, failed = run(box, f, argv, limits=enf)
    finally:
        enf.close()
        box.close()
    assert failed is None
    assert "TRIED write 8 MiB" in out or code == 128 + 25, out  # EFBIG, or SIGXFSZ killed it
    assert "WROTE" not in out
    assert (f.worktree / "big.bin").stat().st_size <= 1 * MIB


def test_a_failed_command_is_not_a_box_that_never_started(sandbox: Sandbox,
                                                          tmp_path: Path) -> None:
    """A command that ran and exited 3 is the command's failure, never the box's."""
    f = folders(tmp_path)
    box = grading_box(sandbox, f)
    try:
        code, out, failed = run(box, f, py("print('TRIED exit 3'); raise SystemExit(3)"))
    finally:
        records = box.close()
    assert (code, failed) == (3, None) and "TRIED exit 3" in out
    assert records.failures == () and records.commands == 1


def test_a_program_missing_inside_is_the_box_failure(sandbox: Sandbox, tmp_path: Path) -> None:
    """A program the box cannot execute: an isolated backend reports its own start failure
    (never a CLEAN command failure); the ``none`` backend's command exits 127."""
    f = folders(tmp_path)
    box = grading_box(sandbox, f)
    missing = str(tmp_path / "no-such-program")
    try:
        code, _out, failed = run(box, f, [missing])
    finally:
        records = box.close()
    if box.isolated:
        assert failed is not None and records.failures == (failed,)
    else:
        assert (code, failed) == (127, None)


# --------------------------------------------------------------------------- honest shapes


def _shapes(tmp: Path) -> list[tuple[str, list[str]]]:
    bin_dir = tmp / "agents"
    bin_dir.mkdir()
    out = []
    for name, head, body in (
            ("sh", "#!/bin/sh", 'echo "SHAPE-RAN sh" > shape-sh.txt'),
            ("bash", "#!/usr/bin/env bash", 'echo "SHAPE-RAN bash" > shape-bash.txt'),
            ("env-python3", "#!/usr/bin/env python3",
             'open("shape-env-python3.txt", "w").write("SHAPE-RAN env-python3")')):
        if name == "bash" and shutil.which("bash") is None:
            continue
        script = bin_dir / name
        script.write_text(f"{head}\n{body}\n")
        script.chmod(0o755)
        out.append((name, [str(script)]))
    out.append(("sys-executable", [sys.executable, "-c",
                                   'open("shape-sys-executable.txt", "w")'
                                   '.write("SHAPE-RAN sys-executable")']))
    out.append(("sh-c", ["/bin/sh", "-c", 'echo "SHAPE-RAN sh-c" > shape-sh-c.txt']))
    return out


def test_honest_shapes_run(sandbox: Sandbox, tmp_path: Path) -> None:
    """Scripts by ``#!/bin/sh``, ``#!/usr/bin/env bash``, ``#!/usr/bin/env python3``, this
    interpreter and ``sh -c`` run in an agent box and write their file in the worktree."""
    shapes = _shapes(tmp_path)
    if shutil.which("python3") is None:
        shapes = [s for s in shapes if s[0] != "env-python3"]
    for name, argv in shapes:
        f = folders(tmp_path / name)
        box = agent_box(sandbox, f, argv)
        try:
            code, out, failed = run(box, f, argv)
        finally:
            box.close()
        assert failed is None and code == 0, (name, out)
        assert (f.worktree / f"shape-{name}.txt").read_text().strip() == f"SHAPE-RAN {name}"


def test_trace_filter_keeps_the_command_lines(sandbox: Sandbox, tmp_path: Path) -> None:
    """``trace_lines`` of a box drops only its own set-up: lines of the command's own
    processes, from its first exec on, come through (strace, when it is there)."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    f = folders(tmp_path)
    argv = py("print('TRIED traced')")
    box = agent_box(sandbox, f, argv)
    log = f.root / "strace.log"
    try:
        confined = box.command(argv, _env(f))
        proc = subprocess.run([strace, "-f", "-qq", "-e", "trace=execve", "-o", str(log),
                               *confined.argv], env=confined.env, cwd=f.worktree,
                              pass_fds=confined.pass_fds, preexec_fn=confined.preexec,
                              capture_output=True, timeout=60)
        box.started()
        assert box.failure(proc.returncode, proc.stderr.decode()) is None
    finally:
        box.close()
    assert b"TRIED traced" in proc.stdout
    kept = list(box.trace_lines(log.read_text().splitlines()))
    if getattr(box, "captures_trace", True) is False:
        # A box a tracer outside cannot follow (a container's) keeps none of the outer trace and
        # says so in its record: a run reads it as not observed, never as a clean trace.
        assert kept == [] and (box.as_data() or {}).get("trace") == "not captured"
        return
    assert any(sys.executable in line and "execve(" in line for line in kept)
    if box.isolated:
        assert not any("bwrap" in line.split("execve(", 1)[-1][:200] for line in kept)


def test_preflight_starts_the_agent_box(sandbox: Sandbox) -> None:
    """``ledger run``'s pre-flight (through the port) starts an honest agent's box: no message."""
    from ledger.sandbox.preflight import check_agent_box

    assert check_agent_box(sandbox, [sys.executable, "-c", "pass"],
                           path_env=os.environ.get("PATH", os.defpath), hidden=()) is None
