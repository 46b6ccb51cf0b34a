"""Resource attacks, one ``cmd:`` agent each, run by the real ``ledger run`` in the sandbox.

Every attacker says on its stdout what it tries and how far it got; each test asserts that the
attacker ran (its first line is in the journal), that it was stopped short of its goal, and that
the journal holds the ``limit.hit`` that stopped it. The limits are set low in ``ledger.toml``
so the tests are quick, and every attacker caps itself (3000 processes, 2 GiB, 512 MiB,
100,000 files), so that a broken limit cannot take the machine down with it. In the same run an
honest agent passes: the harness, the journal and the other attempts survive.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.journal.journal import Journal
from ledger.sandbox import probe_bwrap
from ledger.sandbox.limits import MIB, cgroup_support
from tests.run.minitasks import make_ledger

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()
CGROUPS = cgroup_support()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}")]
needs_cgroups = pytest.mark.skipif(
    not {"pids", "memory"} <= set(CGROUPS.parents), reason=f"no pids+memory cgroups: {CGROUPS.reason}")

PYTHON = "/usr/bin/python3"
LIMITS = """\
[limits]
processes = 64
memory = "256M"
file_size = "8M"
disk = "48M"
disk_files = 3000
"""

ATTACKERS = {
    "fork-bomb": """
        import os, time
        print("fork bomb: forking up to 3000 sleepers", flush=True)
        n = 0
        try:
            for n in range(3000):
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
        except OSError as exc:
            print(f"fork refused after {n} children: {exc.strerror}", flush=True)
        else:
            print("forked all 3000", flush=True)
    """,
    "memory-hog": """
        print("memory hog: touching 2048 MiB in 64 MiB chunks", flush=True)
        chunks = []
        try:
            for i in range(32):
                chunks.append(bytearray(64 << 20))  # zero-filled: every page touched
                print(f"touched {(i + 1) * 64} MiB", flush=True)
        except MemoryError:
            print(f"MemoryError after {len(chunks) * 64} MiB", flush=True)
    """,
    "disk-filler": """
        import time
        # 64 files, a pause after each: it outlasts the disk watch's sampling (0.25 s), so a
        # limit that works stops it, and one that does not lets it print "wrote all 64"
        print("disk filler: writing 64 files of 32 MiB in the worktree", flush=True)
        for i in range(64):
            try:
                with open(f"fill-{i}.bin", "wb") as f:
                    for _ in range(32):
                        f.write(b"x" * (1 << 20))
                print(f"wrote file {i}", flush=True)
            except OSError as exc:
                print(f"file {i}: {exc.strerror}", flush=True)
            time.sleep(0.1)
        print("wrote all 64", flush=True)
    """,
    "tiny-files": """
        import os
        print("tiny files: creating 100000 in the worktree", flush=True)
        os.makedirs("many", exist_ok=True)
        for i in range(100000):
            open(f"many/f{i}", "w").close()
            if i % 1000 == 0:
                print(f"created {i}", flush=True)
        print("created all 100000", flush=True)
    """,
    "two-orphans": """
        import subprocess
        subprocess.Popen(["sleep", "60"])
        subprocess.Popen(["setsid", "sleep", "61"])
        print("left 2 background processes", flush=True)
    """,
    "honest": """
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n"
                                   "    return a * b\\n")
        print("honest: fixed add", flush=True)
    """,
    "cpu-spinner": """
        import time
        print("cpu spinner: spinning for at most 30 s", flush=True)
        end = time.time() + 30
        n = 0
        while time.time() < end:
            n += 1
        print("spun 30 s", flush=True)
    """,
}


@dataclass
class Run:
    home: Path
    summary: dict[str, Any]
    entries: list[Any] = field(default_factory=list)

    def attempt(self, name: str) -> str:
        return next(a["attempt"] for a in self.summary["attempts"] if a["agent"] == f"cmd-{name}")

    def outcome(self, name: str) -> str:
        return next(a["outcome"] for a in self.summary["attempts"] if a["agent"] == f"cmd-{name}")

    def of(self, name: str, kind: str) -> list[dict[str, Any]]:
        aid = self.attempt(name)
        return [e.data for e in self.entries if e.kind == kind and e.data.get("attempt") == aid]

    def stdout(self, name: str) -> str:
        return "".join(d["text"] for d in self.of(name, "agent.output") if d["stream"] == "stdout")

    def hits(self, name: str) -> set[str]:
        return {d["which"] for d in self.of(name, "limit.hit")}


def _script(folder: Path, name: str) -> str:
    import textwrap

    path = folder / f"{name}.py"
    path.write_text(f"#!{PYTHON}\n" + textwrap.dedent(ATTACKERS[name]))
    path.chmod(0o755)
    return f"cmd:{path}"


def _ledger_run(tmp: Path, names: list[str], limits: str, *extra: str) -> Run:
    home = make_ledger(tmp, tasks=("fix-add",))
    (home.parent / "ledger.toml").write_text(limits)
    agents = tmp / "agents"
    agents.mkdir()
    args = ["--ledger", str(home), "run", "--json", "--task", "fix-add", "--sandbox", "bwrap",
            "--parallel", "2", *extra]
    for name in names:
        args += ["--agent", _script(agents, name)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    run = Run(home, json.loads(result.stdout))
    with Journal.open(home / "journal.db", readonly=True) as j:
        run.entries = list(j.entries(run=run.summary["run"]))
    return run


def _alive(marker: str) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    out.append(int(name))
            except OSError:
                pass
    return out


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("limits")
    run = _ledger_run(tmp, ["fork-bomb", "memory-hog", "disk-filler", "tiny-files",
                            "two-orphans", "honest"], LIMITS)
    yield run
    for pid in _alive(str(tmp / "agents")):
        os.kill(pid, 9)


@needs_cgroups
def test_fork_bomb_is_stopped_by_the_process_limit(attacked: Run) -> None:
    """The bomb's forks are refused below the limit of 64, long before its own cap of 3000."""
    out = attacked.stdout("fork-bomb")
    assert "fork bomb: forking up to 3000 sleepers" in out
    m = re.search(r"fork refused after (\d+) children", out)
    assert m is not None and int(m.group(1)) < 64, out
    assert "forked all 3000" not in out
    assert "processes" in attacked.hits("fork-bomb")
    finished = attacked.of("fork-bomb", "agent.finished")[0]
    assert "processes" in finished["limits_hit"]
    assert finished["orphans"] == int(m.group(1))  # its sleepers, counted in the namespace


@needs_cgroups
def test_memory_hog_is_stopped_by_the_memory_limit(attacked: Run) -> None:
    """The hog touches at most the 256 MiB limit of its 2 GiB and is OOM-killed."""
    out = attacked.stdout("memory-hog")
    assert "memory hog: touching 2048 MiB" in out and "touched 64 MiB" in out
    assert "touched 256 MiB" not in out and "touched 2048 MiB" not in out
    assert "memory" in attacked.hits("memory-hog")
    assert attacked.outcome("memory-hog") == "failed"


def test_disk_filler_is_stopped_by_the_file_size_and_disk_limits(attacked: Run) -> None:
    """Every file stops at the 8 MiB file size limit and the agent is stopped past 48 MiB."""
    out = attacked.stdout("disk-filler")
    assert "disk filler: writing 64 files" in out
    assert "file 0: File too large" in out  # RLIMIT_FSIZE: EFBIG (Python ignores SIGXFSZ)
    assert "wrote all 64" not in out
    assert "disk" in attacked.hits("disk-filler")


def test_tiny_files_are_stopped_by_the_entry_limit(attacked: Run) -> None:
    """100,000 empty files: the disk walk stops the agent soon after 3000 entries."""
    out = attacked.stdout("tiny-files")
    assert "tiny files: creating 100000" in out and "created 1000" in out
    assert "created all 100000" not in out
    assert "created 50000" not in out
    assert "disk_files" in attacked.hits("tiny-files")


def test_orphans_are_counted_inside_the_sandbox(attacked: Run) -> None:
    """Two background processes (one through setsid) left in the namespace are counted, 2."""
    assert "left 2 background processes" in attacked.stdout("two-orphans")
    finished = attacked.of("two-orphans", "agent.finished")[0]
    assert finished["orphans"] == 2
    assert finished["exit_code"] == 0 and attacked.hits("two-orphans") == set()


def test_the_honest_attempt_passes_beside_the_attacks(attacked: Run) -> None:
    """The harness, the journal and the other attempts survive the attacks."""
    assert "honest: fixed add" in attacked.stdout("honest")
    assert attacked.outcome("honest") == "passed"
    assert attacked.hits("honest") == set()
    result = CliRunner().invoke(cli, ["--ledger", str(attacked.home), "verify", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_limits_and_their_mechanism_are_recorded_and_attested(attacked: Run) -> None:
    """agent.started and the attestation say which limits, with which mechanism."""
    started = attacked.of("honest", "agent.started")[0]
    limits = started["limits"]
    assert limits["values"]["processes"] == 64 and limits["values"]["memory"] == 256 * MIB
    assert limits["values"]["disk_files"] == 3000
    assert limits["mechanism"]["cpu_s"] == "rlimit"
    assert limits["mechanism"]["disk"] == "harness-walk"
    if "pids" in CGROUPS.parents:
        assert limits["mechanism"]["processes"] == f"cgroup-{CGROUPS.version}"
    att = attacked.of("honest", "attestation")[0]["attestation"]
    assert att["limits"] == limits


def test_failures_classify_the_attacks_as_resource_limits(attacked: Run) -> None:
    """The failure taxonomy puts an attempt stopped by a limit under resource_limit."""
    result = CliRunner().invoke(cli, ["--ledger", str(attacked.home), "failures",
                                      attacked.summary["run"], "--json"], catch_exceptions=False)
    rows = {f["agent"]: f for f in json.loads(result.stdout)["failures"]}
    for name in ("disk-filler", "tiny-files"):
        assert rows[f"cmd-{name}"]["category"] == "resource_limit", rows[f"cmd-{name}"]


def test_no_attacker_process_survives(attacked: Run, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nothing an attacker started is alive after the run."""
    folder = Path(attacked.home).parent / "agents"
    assert _alive(str(folder)) == []


def test_rlimits_bound_memory_and_cpu_where_no_cgroup_is_made(tmp_path: Path) -> None:
    """``cgroups = false``: RLIMIT_DATA makes the hog's allocation fail below 2 GiB, and
    RLIMIT_CPU ends the spinner with SIGXCPU after 2 s of CPU, journaled as cpu_s."""
    run = _ledger_run(tmp_path, ["memory-hog", "cpu-spinner"],
                      '[limits]\ncgroups = false\nmemory = "256M"\ncpu_s = 2\n')
    out = run.stdout("memory-hog")
    assert "memory hog: touching 2048 MiB" in out
    m = re.search(r"MemoryError after (\d+) MiB", out)
    assert m is not None and int(m.group(1)) < 256, out
    started = run.of("memory-hog", "agent.started")[0]
    assert started["limits"]["mechanism"]["memory"] == "rlimit-data"
    assert started["limits"]["cgroup"] == "none"
    spin = run.stdout("cpu-spinner")
    assert "cpu spinner: spinning" in spin and "spun 30 s" not in spin
    assert run.hits("cpu-spinner") == {"cpu_s"}
