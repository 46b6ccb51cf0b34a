"""The strace log parser: syscalls into fs.read / fs.write / proc.exec / net.connect events."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.agents.strace import (
    FILTER_PTRACE,
    FILTER_SECCOMP,
    SECCOMP_ENV,
    decode_array,
    decode_string,
    iter_syscalls,
    split_args,
    strace_command,
    strace_filter,
    strace_status,
    unescape,
)
from ledger.agents.trace import TraceOptions, parse_strace_lines


def h(text: str | bytes) -> str:
    """A string as strace -xx prints it (every byte as \\xNN), without quotes."""
    raw = text.encode() if isinstance(text, str) else text
    return "".join(f"\\x{b:02x}" for b in raw)


def q(text: str | bytes) -> str:
    return f'"{h(text)}"'


def parse(lines: list[str], tmp_path: Path, **kw: object) -> list[tuple[str, dict]]:
    wt = tmp_path / "wt"
    wt.mkdir(exist_ok=True)
    opts = TraceOptions(worktree=wt, home=tmp_path / "home", **kw)  # type: ignore[arg-type]
    return [ev for _ts, ev in parse_strace_lines(iter(lines), opts)]


def test_split_args_respects_nesting_and_strings() -> None:
    """Commas inside brackets, braces and strings do not split; the return part is kept."""
    args, rest = split_args('AT_FDCWD</w>, "a,b", [x, y], {f=1, g=2}) = 3</w/a>')
    assert args == ["AT_FDCWD</w>", '"a,b"', "[x, y]", "{f=1, g=2}"]
    assert rest == " = 3</w/a>"


def test_unescape_handles_hex_octal_and_c_escapes() -> None:
    """Strace string bodies decode to the exact bytes."""
    assert unescape(r"\x2f\x74") == b"/t"
    assert unescape(r"a\"b\\c\n\0\377") == b'a"b\\c\n\x00\xff'
    assert decode_string(q("hi") + "...") == b"hi"
    assert decode_array("[" + q("ls") + ", " + q("-l") + ", ...]") == ["ls", "-l", "..."]


def test_open_read_write_and_failed(tmp_path: Path) -> None:
    """Open flags decide read vs write; O_RDWR is both; failed opens are skipped."""
    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    (wt / "a.py").write_text("print(1)\n")
    lines = [
        f"100 1.000001 openat(AT_FDCWD<{h(str(wt))}>, {q('a.py')}, O_RDONLY|O_CLOEXEC) = 3<{h(str(wt / 'a.py'))}>",
        f"100 1.000002 openat(AT_FDCWD<{h(str(wt))}>, {q('b.py')}, O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3<{h(str(wt / 'b.py'))}>",
        f"100 1.000003 openat(AT_FDCWD<{h(str(wt))}>, {q('c.db')}, O_RDWR) = 4<{h(str(wt / 'c.db'))}>",
        f"100 1.000004 openat(AT_FDCWD<{h(str(wt))}>, {q('gone.py')}, O_RDONLY) = -1 ENOENT (No such file or directory)",
        f"100 1.000005 openat(AT_FDCWD<{h(str(wt))}>, {q('a.py')}, O_RDONLY) = 3<{h(str(wt / 'a.py'))}>",
        f"100 1.000006 openat(AT_FDCWD<{h(str(wt))}>, {q('/dev/null')}, O_WRONLY) = 5<{h('/dev/null')}>",
    ]
    events = parse(lines, tmp_path)
    assert [(k, Path(d["resolved"]).name) for k, d in events] == [
        ("fs.read", "a.py"), ("fs.write", "b.py"), ("fs.read", "c.db"), ("fs.write", "c.db")]
    read = events[0][1]
    assert read == {"path": "a.py", "resolved": str(wt / "a.py"), "in_worktree": True,
                    "source": "strace", "content": "print(1)\n"}


def test_o_path_open_is_not_a_read_but_an_open_through_it_is(tmp_path: Path) -> None:
    """O_PATH names a location without opening the file (claude does it to $HOME and /var);
    an openat relative to that descriptor is still a read of the resolved file."""
    lines = [
        f"100 1.1 openat(AT_FDCWD<{h('/wt')}>, {q('/secret')}, O_RDONLY|O_LARGEFILE|O_PATH) = 7<{h('/secret')}>",
        f"100 1.2 openat(7<{h('/secret')}>, {q('answer.py')}, O_RDONLY) = 8<{h('/secret/answer.py')}>",
    ]
    events = parse(lines, tmp_path)
    assert [(k, d["resolved"]) for k, d in events] == [("fs.read", "/secret/answer.py")]


def test_unfinished_and_resumed_calls_are_joined(tmp_path: Path) -> None:
    """Interleaved <unfinished ...> / <... resumed> lines from two pids form whole calls."""
    lines = [
        f"200 2.0 execve({q('/usr/bin/git')}, [{q('git')}, {q('status')}], 0x7ff /* 3 vars */ <unfinished ...>",
        f"201 2.1 openat(AT_FDCWD<{h('/x')}>, {q('/x/y')}, O_RDONLY <unfinished ...>",
        "200 2.2 <... execve resumed>) = 0",
        f"201 2.3 <... openat resumed>) = 3<{h('/x/y')}>",
        "202 2.4 <... openat resumed>) = 3",  # resumed without its start: ignored
        "201 2.5 +++ exited with 0 +++",
    ]
    events = parse(lines, tmp_path)
    assert events[0] == ("proc.exec", {"argv": ["git", "status"], "path": "/usr/bin/git",
                                       "source": "strace"})
    assert events[1][0] == "fs.read" and events[1][1]["resolved"] == "/x/y"
    assert events[1][1]["in_worktree"] is False
    assert len(events) == 2


def test_failed_exec_is_skipped(tmp_path: Path) -> None:
    """A shell's PATH search (execve ENOENT) is not a program run."""
    lines = [f"1 1.0 execve({q('/usr/local/bin/x')}, [{q('x')}], 0x1 /* 1 var */) = -1 ENOENT (No such file or directory)"]
    assert parse(lines, tmp_path) == []


def test_connect_families(tmp_path: Path) -> None:
    """IPv4, IPv6 and unix connects are recorded (failed ones too); other families are not."""
    lines = [
        f'1 1.0 connect(3<{h("socket:[1]")}>, {{sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr({q("93.184.216.34")})}}, 16) = -1 EINPROGRESS (Operation now in progress)',
        f'1 1.1 connect(4<{h("socket:[2]")}>, {{sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, {q("::1")}, &sin6_addr), sin6_scope_id=0}}, 28) = 0',
        f'1 1.2 connect(5<{h("socket:[3]")}>, {{sa_family=AF_UNIX, sun_path={q("/run/x.sock")}}}, 110) = -1 ENOENT (No such file or directory)',
        f'1 1.3 connect(6<{h("socket:[4]")}>, {{sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}}, 12) = 0',
        f'1 1.4 connect(3<{h("socket:[5]")}>, {{sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr({q("93.184.216.34")})}}, 16) = 0',
    ]
    events = parse(lines, tmp_path)
    assert [d for _k, d in events] == [
        {"host": "93.184.216.34", "port": 443, "family": "inet", "source": "strace"},
        {"host": "::1", "port": 80, "family": "inet6", "source": "strace"},
        {"host": "/run/x.sock", "port": 0, "family": "unix", "source": "strace"},
    ]


def test_rename_unlink_mkdir_are_writes(tmp_path: Path) -> None:
    """renameat2 (both names), unlinkat and mkdir are fs.write, resolved against their dirfd."""
    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    lines = [
        f"7 1.0 renameat2(AT_FDCWD<{h(str(wt))}>, {q('a.tmp')}, AT_FDCWD<{h(str(wt))}>, {q('a.py')}, RENAME_NOREPLACE) = 0",
        f"7 1.1 unlinkat(5<{h('/tmp/other')}>, {q('junk')}, 0) = 0",
        f"7 1.2 mkdir({q('/tmp/newdir')}, 0777) = 0",
        f"7 1.3 unlinkat(AT_FDCWD<{h(str(wt))}>, {q('nope')}, 0) = -1 ENOENT (No such file or directory)",
    ]
    events = parse(lines, tmp_path)
    assert [(k, d["resolved"], d["in_worktree"]) for k, d in events] == [
        ("fs.write", str(wt / "a.tmp"), True),
        ("fs.write", str(wt / "a.py"), True),
        ("fs.write", "/tmp/other/junk", False),
        ("fs.write", "/tmp/newdir", False),
    ]


def test_content_capture_rules(tmp_path: Path) -> None:
    """Worktree text files get bounded content; binary, home and over-budget files get none;
    a system file folds into the summary with its digest."""
    wt = (tmp_path / "wt").resolve()
    home = (tmp_path / "home").resolve()
    wt.mkdir()
    home.mkdir()
    files = {
        "small.txt": b"hello\n",
        "big.txt": b"a" * 5000,
        "bin.dat": b"\x00\x01\x02",
        "late.txt": b"after budget\n",
    }
    for name, data in files.items():
        (wt / name).write_bytes(data)
    (home / "cred.json").write_text("{}")
    lines = [f"9 1.{i} openat(AT_FDCWD<{h(str(wt))}>, {q(n)}, O_RDONLY) = 3<{h(str(wt / n))}>"
             for i, n in enumerate(files)]
    lines.append(f"9 2.0 openat(AT_FDCWD<{h(str(wt))}>, {q(str(home / 'cred.json'))}, O_RDONLY) = 3<{h(str(home / 'cred.json'))}>")
    lines.append(f"9 2.1 openat(AT_FDCWD<{h(str(wt))}>, {q('/etc/passwd')}, O_RDONLY) = 3<{h('/etc/passwd')}>")
    opts = TraceOptions(worktree=wt, home=home, content_limit=1000, content_budget=1010,
                        capture_filter=str.upper)
    parsed = parse_strace_lines(iter(lines), opts)
    events = {Path(d["resolved"]).name: d for _t, (k, d) in parsed if k == "fs.read"}
    assert events["small.txt"]["content"] == "HELLO\n"
    assert events["big.txt"]["content"] == "A" * 1000
    assert events["big.txt"]["truncated"] is True and events["big.txt"]["total_bytes"] == 5000
    assert events["bin.dat"]["content"] is None
    assert events["late.txt"]["content"] == "AFTE"  # the last 4 bytes of the budget
    assert events["late.txt"]["truncated"] is True and events["late.txt"]["total_bytes"] == 13
    assert "content" not in events["cred.json"] and "sha256" not in events["cred.json"]
    (_t, (kind, summary)), = [p for p in parsed if p[1][0] == "fs.read.summary"]
    assert summary["files"] == [["/etc/passwd", hashlib.sha256(Path("/etc/passwd").read_bytes())
                                 .hexdigest(), 1]]


def test_non_utf8_path_is_replaced(tmp_path: Path) -> None:
    """A file name that is not UTF-8 is reported with replacement characters."""
    bad = b"/t/bad-\xff.txt"
    lines = [f"1 1.0 openat(AT_FDCWD<{h('/t')}>, {q(bad)}, O_WRONLY|O_CREAT, 0644) = 3<{h(bad)}>"]
    (kind, data), = parse(lines, tmp_path)
    assert kind == "fs.write" and data["resolved"] == "/t/bad-\ufffd.txt"


def test_garbage_lines_are_ignored(tmp_path: Path) -> None:
    """Lines that are not syscalls (or are cut off) produce nothing and raise nothing."""
    lines = ["", "strace: Process 5 attached", "12 1.0 --- SIGCHLD {si_signo=SIGCHLD} ---",
             "12 1.0 openat(AT_FDCWD, ", "junk junk", "12 x.y openat()"]
    assert parse(lines, tmp_path) == []
    assert list(iter_syscalls(iter(lines))) == []


def test_strace_command_shape(tmp_path: Path) -> None:
    """The tracer is detached (-DDD), follows forks, and sets the marker only in the agent's env."""
    argv = strace_command(tmp_path / "log", {"LEDGER_ATTEMPT": "a#1"})
    assert "-DDD" in argv and "-f" in argv and "-y" in argv and "-xx" in argv
    assert argv[argv.index("-E") + 1] == "LEDGER_ATTEMPT=a#1"
    assert argv[argv.index("-o") + 1] == str(tmp_path / "log")
    assert argv[-1] == "--"


def test_strace_command_adds_seccomp_bpf_only_when_asked(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--seccomp-bpf is in the argv exactly when the filter is used; LEDGER_TRACE_SECCOMP=off
    forces the fallback (a stop on every syscall) whatever the probe found."""
    assert "--seccomp-bpf" in strace_command(tmp_path / "log", {}, seccomp=True)
    assert "--seccomp-bpf" not in strace_command(tmp_path / "log", {}, seccomp=False)
    monkeypatch.setenv(SECCOMP_ENV, "off")
    assert strace_filter() == FILTER_PTRACE
    assert "--seccomp-bpf" not in strace_command(tmp_path / "log", {})


@pytest.mark.strace
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not on PATH")
def test_seccomp_filter_probe_matches_what_a_traced_program_sees(tmp_path: Path) -> None:
    """The probe says seccomp-bpf exactly when a program run with the harness's argv runs under
    a seccomp filter (Seccomp: 2 in its /proc status)."""
    mode = strace_filter(refresh=True)
    argv = strace_command(Path(os.devnull), {"LEDGER_ATTEMPT": "x"}) + ["cat", "/proc/self/status"]
    out = subprocess.run(argv, capture_output=True, check=True, stdin=subprocess.DEVNULL).stdout
    filtered = b"Seccomp:\t2" in out
    assert filtered == (mode == FILTER_SECCOMP)
    assert ("--seccomp-bpf" in argv) == filtered


UNTRACED_CHILD = """
import ctypes, os, platform, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
nr = 56 if platform.machine() == "x86_64" else 220
print("attacker: cloning with CLONE_UNTRACED", flush=True)
pid = libc.syscall(nr, 0x00800000 | int(signal.SIGCHLD), 0, 0, 0, 0)
if pid == 0:
    try:
        data = open(SECRET).read()
        print("attacker: child read", len(data), "bytes untraced", flush=True)
    except OSError as exc:
        print("attacker: child open failed errno", exc.errno, flush=True)
    finally:
        os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.strace
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not on PATH")
@pytest.mark.parametrize("seccomp", [True, False], ids=["seccomp-bpf", "ptrace"])
def test_clone_untraced_child_under_each_filter(tmp_path: Path, seccomp: bool) -> None:
    """Attack: a raw CLONE_UNTRACED child opens a secret. Without the filter (ptrace) it reads it
    and the log never shows the open (the escape the sandbox exists for); under --seccomp-bpf the
    inherited filter answers its open ENOSYS with no tracer to stop it: it reads nothing."""
    if seccomp and strace_filter(refresh=True) != FILTER_SECCOMP:
        pytest.skip("strace --seccomp-bpf does not work here")
    secret = tmp_path / "secret.txt"
    secret.write_text("the answer\n")
    log = tmp_path / "log"
    script = f"SECRET = {str(secret)!r}\n" + UNTRACED_CHILD
    argv = strace_command(log, {}, seccomp=seccomp) + [sys.executable, "-c", script]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL).stdout
    assert "attacker: cloning with CLONE_UNTRACED" in out  # the attacker ran
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and subprocess.run(
            ["pgrep", "-f", str(log)], capture_output=True).returncode == 0:
        time.sleep(0.02)
    secret_hex = "".join(f"\\x{b:02x}" for b in str(secret).encode())
    assert not [line for line in log.read_text().splitlines()
                if "openat(" in line and secret_hex in line]  # the trace never saw the open
    if seccomp:
        assert "attacker: child open failed errno 38" in out, out  # ENOSYS
    else:
        assert "attacker: child read 11 bytes untraced" in out, out


@pytest.mark.strace
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not on PATH")
def test_real_strace_log_parses(tmp_path: Path) -> None:
    """A real strace run of a shell that reads, writes, renames and runs a program parses back."""
    ok, reason = strace_status()
    assert ok, reason
    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    (wt / "in.txt").write_text("data\n")
    log = tmp_path / "log"
    script = "cat in.txt > out.txt; mv out.txt moved.txt; rm moved.txt"
    argv = strace_command(log, {"LEDGER_ATTEMPT": "x"}) + ["/bin/sh", "-c", script]
    subprocess.run(argv, cwd=wt, check=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 5  # the detached tracer exits shortly after the command
    while time.monotonic() < deadline and subprocess.run(
            ["pgrep", "-f", str(log)], capture_output=True).returncode == 0:
        time.sleep(0.02)
    opts = TraceOptions(worktree=wt, home=tmp_path / "home")
    events = [ev for _t, ev in parse_strace_lines(iter(log.read_text(errors="replace").splitlines()), opts)]
    reads = {d["resolved"]: d for k, d in events if k == "fs.read"}
    writes = {d["resolved"] for k, d in events if k == "fs.write"}
    assert reads[str(wt / "in.txt")]["content"] == "data\n"
    assert {str(wt / "out.txt"), str(wt / "moved.txt")} <= writes
    assert any(d["argv"][:1] == ["cat"] for k, d in events if k == "proc.exec")


def test_a_read_after_a_write_is_recorded_again(tmp_path: Path) -> None:
    """Read, write, read again: the second read is its own event (the content may have changed);
    a read with no write in between stays folded into the first."""
    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    (wt / "m.py").write_text("new\n")
    (wt / "other.py").write_text("x\n")
    cwd = f"AT_FDCWD<{h(str(wt))}>"
    lines = [
        f"7 1.0 openat({cwd}, {q('m.py')}, O_RDONLY) = 3<{h(str(wt / 'm.py'))}>",
        f"7 1.1 openat({cwd}, {q('other.py')}, O_RDONLY) = 3<{h(str(wt / 'other.py'))}>",
        f"7 1.2 openat({cwd}, {q('m.py')}, O_WRONLY|O_TRUNC) = 3<{h(str(wt / 'm.py'))}>",
        f"7 1.3 openat({cwd}, {q('m.py')}, O_RDONLY) = 3<{h(str(wt / 'm.py'))}>",
        f"7 1.4 openat({cwd}, {q('m.py')}, O_RDONLY) = 3<{h(str(wt / 'm.py'))}>",
        f"7 1.5 openat({cwd}, {q('other.py')}, O_RDONLY) = 3<{h(str(wt / 'other.py'))}>",
    ]
    events = parse(lines, tmp_path)
    assert [(k, Path(d["resolved"]).name) for k, d in events] == [
        ("fs.read", "m.py"), ("fs.read", "other.py"), ("fs.write", "m.py"), ("fs.read", "m.py")]
    assert events[-1][1]["content"] == "new\n"


def test_follower_parses_a_growing_log_like_the_finished_one(tmp_path: Path) -> None:
    """Lines written in pieces while the follower runs (a line split mid-way, a last line
    without a newline) give the events parse_strace_log gives for the finished file."""
    import threading

    from ledger.agents.follow import TraceFollower, follow_lines
    from ledger.agents.trace import parse_strace_log

    wt = (tmp_path / "wt").resolve()
    wt.mkdir()
    for n in ("a.py", "b.py", "c.py"):
        (wt / n).write_text(f"{n}\n")
    cwd = f"AT_FDCWD<{h(str(wt))}>"
    log = tmp_path / "strace.log"
    text = "".join(f"5 1.{i} openat({cwd}, {q(n)}, O_RDONLY) = 3<{h(str(wt / n))}>\n"
                   for i, n in enumerate(("a.py", "b.py", "c.py")))
    text = text.rstrip("\n")  # the tracer died mid-write: no newline at the end
    opts = TraceOptions(worktree=wt, home=tmp_path / "home")
    follower = TraceFollower(log, opts)
    time.sleep(0.02)  # the log does not exist yet: the follower waits for it
    with open(log, "w") as fh:
        for piece in (text[:50], text[50:170], text[170:]):
            fh.write(piece)
            fh.flush()
            time.sleep(0.02)
    followed = follower.finish()
    assert followed == parse_strace_log(log, opts)
    assert [Path(d["resolved"]).name for _t, (_k, d) in followed] == ["a.py", "b.py", "c.py"]
    done = threading.Event()
    done.set()
    assert list(follow_lines(tmp_path / "never-written.log", done)) == []


def test_follower_error_reaches_the_caller(tmp_path: Path) -> None:
    """A parser failure in the follower's thread is raised by finish(), not lost."""
    from ledger.agents.follow import TraceFollower

    log = tmp_path / "strace.log"
    log.write_text("1 1.0 openat(AT_FDCWD</>, \"x\", O_RDONLY) = 3</x>\n")

    def broken(lines):  # type: ignore[no-untyped-def]
        for _line in lines:
            raise RuntimeError("parser bug")
        yield ""

    follower = TraceFollower(log, TraceOptions(worktree=tmp_path), keep=broken)
    with pytest.raises(RuntimeError, match="parser bug"):
        follower.finish()
