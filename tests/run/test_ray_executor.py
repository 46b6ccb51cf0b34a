"""RayExecutor on real Ray clusters bound to 127.0.0.1: same outcomes as local, two nodes, a node
killed mid-run and resumed, budgets and cancellation on workers, archives checked in transit.

The cluster (Ray's ``cluster_utils.Cluster``: a head and a second node, one CPU each, token
authentication on, every address 127.0.0.1) is shared by this module and shut down at its end;
every process it started is stopped by its pid and checked gone. Tests skip only when Ray is not
installed (``pip install 'eval-ledger[ray]'``).
"""

from __future__ import annotations

import functools
import importlib.util
import ipaddress
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.home import LedgerHome
from ledger.journal.journal import Journal
from ledger.journal.keys import load_keys
from ledger.run.contracts import AttemptEvent
from ledger.run.coordinator import NullProgress, execute_run
from ledger.run.plan import RunRequest
from ledger.run.summary import RunSummary
from tests.run.executor_contract import _plan_for, _script_agent
from tests.run.minitasks import make_ledger

ROOT = Path(__file__).resolve().parents[2]


def _ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # ValueError: blocked with sys.modules["ray"] = None
        return False


HAS_RAY = _ray_installed()
FAST_HEALTH = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
               "health_check_failure_threshold": 3}


def ray_test(func: Any) -> Any:
    """Marks a test ``ray`` and skips it only when Ray cannot be imported."""
    skip = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install 'eval-ledger[ray]'")
    return pytest.mark.ray(skip(func))


# --------------------------------------------------------------------------- process helpers


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parents[int(name)] = int(fh.read().rsplit(")", 1)[-1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out: set[int] = set()
    frontier = [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in out]
        out.update(kids)
        frontier.extend(kids)
    return out


def _listen_addresses(pids: set[int]) -> list[tuple[int, str]]:
    """(pid, local address) of every TCP socket in LISTEN state held by one of ``pids``."""
    inode_pid: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with_target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if with_target.startswith("socket:["):
                    inode_pid[with_target[8:-1]] = pid
        except OSError:
            continue
    out = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as fh:
            next(fh)
            for line in fh:
                cols = line.split()
                if cols[3] != "0A" or cols[9] not in inode_pid:
                    continue
                hexaddr = cols[1].split(":")[0]
                raw = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1] for i in range(0, width, 8))
                out.append((inode_pid[cols[9]], str(ipaddress.ip_address(raw))))
    return out


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


# --------------------------------------------------------------------------- journal helpers


def _entries(home: Path, run: str | None = None) -> list[Any]:
    with Journal.open(home / "journal.db", harness=True) as j:
        return list(j.entries(run=run))


def _verify(home: Path) -> None:
    with Journal.open(home / "journal.db", harness=True) as j:
        j.verify(verifier=load_keys(home / "keys").verifier)


def _outcomes(summary: RunSummary) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    return {(r.task, r.agent, r.repeat): (r.outcome, r.hidden_passed,
                                          tuple(sorted(r.hidden_counts.items())),
                                          r.regression_passed, r.signals_passed, r.signals_total)
            for r in summary.results}


def _replayed(home: Path, run_id: str) -> Any:
    from evaluators.views import replay

    return replay(_entries(home, run_id), run_id)


def _recorded_view(home: Path, run_id: str) -> dict[str, Any]:
    """The golden view the run recorded (the statistics view is recorded after it)."""
    from evaluators.views import EVALUATOR_NAME

    views = [e for e in _entries(home, run_id)
             if e.kind == "view.recorded" and e.data.get("evaluator") == EVALUATOR_NAME]
    assert views, "the run recorded no golden view"
    return dict(views[-1].data["view"])


class _Factory:
    """An executor_factory that keeps the executors it made (to look at placements)."""

    def __init__(self, **options: Any) -> None:
        from ledger.run.executors import executor_factory

        self._make = executor_factory(**options)
        self.made: list[Any] = []

    def __call__(self, kind: str, parallel: int) -> Any:
        executor = self._make(kind, parallel)
        self.made.append(executor)
        return executor


class _KillOnPhase(NullProgress):
    """Calls ``action(attempt_id)`` once, when the first attempt for which ``pick`` says yes
    reaches the agent phase."""

    def __init__(self, pick: Any, action: Any) -> None:
        self.pick, self.action, self.done = pick, action, False

    def phase(self, attempt_id: str, phase: str) -> None:
        if phase == "agent" and not self.done and self.pick(attempt_id):
            self.done = True
            self.action(attempt_id)


# --------------------------------------------------------------------------- without Ray


def test_missing_ray_is_one_clear_error_naming_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Ray not importable, asking for the ray executor raises UsageError with the pip line."""
    from ledger.run.executors import make_executor
    from ledger.run.executors.ray import RayExecutor

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError) as err:
        RayExecutor(2)
    assert "pip install 'eval-ledger[ray]'" in str(err.value)
    with pytest.raises(UsageError, match=r"eval-ledger\[ray\]"):
        make_executor("ray", 1)
    assert err.value.exit_code == 2


def test_local_kind_still_comes_from_the_local_factory() -> None:
    """make_executor('local', n) gives the process pool; an unknown kind stays a usage error."""
    from ledger.run.executors import make_executor
    from ledger.run.executors.local import LocalExecutor

    executor = make_executor("local", 1)
    try:
        assert isinstance(executor, LocalExecutor)
    finally:
        executor.close()
    with pytest.raises(UsageError):
        make_executor("dask", 1)


# --------------------------------------------------------------------------- a private local instance


LOCAL_INSTANCE = """
import json, os, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from ledger.home import LedgerHome
from ledger.run.coordinator import execute_run
from ledger.run.executors.ray import RayExecutor
from ledger.run.plan import RunRequest
from tests.run.minitasks import make_ledger
from tests.run.test_ray_executor import _descendants, _listen_addresses

def main():
    tmp = Path({tmp!r})
    home = LedgerHome(make_ledger(tmp, tasks=("fix-sub",)))
    seen = {{}}

    def factory(kind, parallel):
        ex = RayExecutor(parallel, cache_dir=tmp / "cache")
        import ray
        seen["listen"] = _listen_addresses(_descendants(os.getpid()))
        seen["pids"] = sorted(_descendants(os.getpid()))
        seen["address"] = ex.address
        seen["token_set"] = bool(os.environ.get("RAY_AUTH_TOKEN"))
        return ex

    s = execute_run(home, RunRequest(tiers=("mini",), agents=("oracle", "noop"), parallel=2,
                                     trace="none", executor="ray"), executor_factory=factory)
    import ray
    print(json.dumps({{"outcomes": [r.outcome for r in s.results], "run": s.run_id,
                      "connected_after": ray.is_initialized(),
                      "token_after": os.environ.get("RAY_AUTH_TOKEN"), **seen}}))

if __name__ == "__main__":
    main()
"""


@ray_test
def test_private_local_instance_is_loopback_only_token_protected_and_fully_stopped(tmp_path: Path) -> None:
    """No address: a local instance on 127.0.0.1 only, with a fresh token, gone after close()."""
    token_file = Path.home() / ".ray" / "auth_token"
    had_token_file = token_file.exists()
    script = tmp_path / "local_instance.py"
    script.write_text(LOCAL_INSTANCE.format(root=str(ROOT), tmp=str(tmp_path)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=str(ROOT), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["outcomes"] == ["passed", "failed"]
    assert out["address"].startswith("127.0.0.1:")
    assert out["listen"], "Ray listened on nothing?"
    assert all(_loopback(addr) for _pid, addr in out["listen"]), out["listen"]
    assert out["token_set"] and out["token_after"] is None  # set for the instance, then restored
    assert not out["connected_after"]
    assert _wait_gone(out["pids"]) == []
    home = tmp_path / ".ledger"
    _verify(home)
    assert token_file.exists() == had_token_file  # the fresh token was never written to disk


# --------------------------------------------------------------------------- the shared cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    """A head and a second node on 127.0.0.1, one CPU each, token auth on; torn down by pid."""
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    import ray
    from ray._private import ray_constants
    from ray._raylet import Config
    from ray.cluster_utils import Cluster

    Config.initialize("")  # this process imported Ray before the token mode was set
    # Ray maps 127.0.0.1 to the machine's address unless told it runs a local cluster only.
    before = _descendants(os.getpid())  # e.g. multiprocessing helpers of earlier tests
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    c = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "include_dashboard": False, "num_cpus": 1,
        "_system_config": FAST_HEALTH})
    nodes = [c.head_node, c.add_node(node_ip_address="127.0.0.1", num_cpus=1)]
    ray.init(address=c.address, log_to_driver=False)
    info = {"cluster": c, "nodes": nodes, "ray": ray,
            "pids": _descendants(os.getpid()) - before}
    try:
        yield info
    finally:
        ray.shutdown()
        c.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        left = _wait_gone(sorted(info["pids"]))
        assert left == [], f"cluster processes still running: {left}"


@ray_test
def test_cluster_listens_on_loopback_only(cluster: dict[str, Any]) -> None:
    """Every TCP listener of every process the cluster started is on 127.0.0.1."""
    listening = _listen_addresses(_descendants(os.getpid()))
    assert len({pid for pid, _ in listening}) >= 4  # gcs, two raylets, workers...
    assert [a for a in listening if not _loopback(a[1])] == []


@ray_test
def test_ray_and_local_give_the_same_outcomes_scores_and_valid_journals(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """Same tasks and agents on both executors: same per-attempt outcomes and scores; both
    journals verify and replay; the ray run used both nodes and journaled where each ran."""
    req = {"tiers": ("mini",), "agents": ("noop", "oracle", "demo"), "parallel": 2, "trace": "none"}
    local_home = make_ledger(tmp_path / "local", tasks=("fix-add", "fix-sub"))
    ray_home = make_ledger(tmp_path / "ray", tasks=("fix-add", "fix-sub"))
    local = execute_run(LedgerHome(local_home), RunRequest(**req))
    factory = _Factory(cache_dir=tmp_path / "cache")
    remote = execute_run(LedgerHome(ray_home), RunRequest(executor="ray", **req),
                         executor_factory=factory)

    assert len(remote.results) == 6
    assert _outcomes(remote) == _outcomes(local)
    assert {r.outcome for r in remote.results} == {"passed", "failed"}
    for home, summary in ((local_home, local), (ray_home, remote)):
        _verify(home)
        assert _replayed(home, summary.run_id).reproduced
    lv, rv = _recorded_view(local_home, local.run_id), _recorded_view(ray_home, remote.run_id)
    for key in ("counts", "taxonomy", "per_tier"):
        assert lv[key] == rv[key], key
    for name in ("task_success", "code_quality", "reliability", "safety"):
        assert lv["components"][name] == rv["components"][name], name
    assert abs(lv["score"] - rv["score"]) < 0.02
    rows = lambda v: {(a["task"], a["agent"], a["repeat"]): (a["passed"], a["category"], a["safety"])  # noqa: E731
                      for a in v["attempts"]}
    assert rows(lv) == rows(rv)

    # where each attempt ran: journaled before it ran, and the worker confirms it
    executor = factory.made[0]
    started = {e.data["attempt"]: e.data["node"] for e in _entries(ray_home, remote.run_id)
               if e.kind == "attempt.started"}
    node_ids = {n.node_id for n in cluster["nodes"]}
    assert {label.split("/")[-1] for label in started.values()} == node_ids
    for attempt, label in started.items():
        assert executor.ran_on[attempt]["node_id"] == label.split("/")[-1]
    # task material travelled as one verified archive per task
    archives = {data["archive"] for data in executor.ran_on.values()}
    assert len(archives) == 2
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(archives)


@ray_test
def test_hung_agent_on_a_worker_is_stopped_at_its_budget_with_all_its_processes(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """An agent that ignores SIGTERM and leaves a setsid child: timed out at 2 s, all gone."""
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    pids = tmp_path / "pids"
    agent = _script_agent(tmp_path, "hang.py", f"""
        import os, signal, subprocess, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        group = subprocess.Popen(["sleep", "300"])
        loner = subprocess.Popen(["sleep", "301"], start_new_session=True)
        with open({str(pids)!r}, "w") as fh:
            fh.write(f"{{os.getpid()}} {{group.pid}} {{loner.pid}}\\n")
        while True:
            time.sleep(1)
    """)
    t0 = time.monotonic()
    # Unsandboxed: the agent reports its pids through a file outside its worktree, and the test
    # proves the harness's own process-group cleanup (a sandbox's PID namespace would hide both).
    summary = execute_run(LedgerHome(home), RunRequest(
        tiers=("mini",), agents=(agent,), timeout_s=2.0, trace="none", executor="ray",
        sandbox="none"), executor_factory=_Factory(cache_dir=tmp_path / "cache"))
    assert time.monotonic() - t0 < 30
    [result] = summary.results
    assert result.outcome == "timeout" and result.timed_out
    finished = [e for e in _entries(home) if e.kind == "agent.finished"]
    assert finished[0].data["timed_out"] and finished[0].data["wall_s"] < 8
    assert finished[0].data["orphans"] >= 1  # the setsid child, found by its marker and killed
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 3
    assert _wait_gone(recorded, timeout=5) == []
    _verify(home)


# --------------------------------------------------------------------------- the executor contract

from tests.run import executor_contract as _contract  # noqa: E402


@pytest.fixture()
def executor(cluster: dict[str, Any], tmp_path: Path) -> Iterator[Any]:
    """A RayExecutor with one slot on this module's cluster, for the shared contract suite."""
    from ledger.run.executors import make_executor

    ex = make_executor("ray", 1, cache_dir=tmp_path / "cache")
    try:
        yield ex
    finally:
        ex.close()


def _on_ray(test: Any) -> Any:
    """A copy of a shared contract test marked ``ray`` here (the original stays unmarked)."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        return test(*args, **kwargs)
    return ray_test(run)


# The same contract tests LocalExecutor passes (tests/run/executor_contract.py), against Ray.
test_contract_protocol = _on_ray(_contract.test_every_kind_implements_the_protocol)
test_contract_place = _on_ray(_contract.test_place_names_a_node_before_submit)
test_contract_streams = _on_ray(_contract.test_an_attempt_streams_started_first_and_finishes_exactly_once)
test_contract_idle_timeout = _on_ray(_contract.test_idle_timeout_returns_while_an_attempt_still_runs)
test_contract_cancel = _on_ray(_contract.test_cancel_reports_the_status_asked_for)
test_contract_close = _on_ray(_contract.test_close_twice_is_fine_and_submit_after_close_is_refused)


@ray_test
def test_cancel_stops_the_agent_on_its_worker_and_reports_cancelled(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """cancel() mid-agent: the worker kills the agent's group, attempt.finished says cancelled."""
    from ledger.run.executors.ray import RayExecutor

    home = make_ledger(tmp_path, tasks=("fix-sub",))
    pids = tmp_path / "pids"
    agent = _script_agent(tmp_path, "sleepy.py", f"""
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        with open({str(pids)!r}, "w") as fh:
            fh.write(f"{{os.getpid()}} {{child.pid}}\\n")
        time.sleep(300)
    """)
    events: list[AttemptEvent] = []
    with RayExecutor(1, cache_dir=tmp_path / "cache") as executor:
        executor.submit(_plan_for(home, "fix-sub", agent))
        t0 = time.monotonic()
        for event in executor.events():
            events.append(event)
            if event.kind == "agent.started":
                deadline = time.monotonic() + 10
                while not pids.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                executor.cancel(event.attempt_id)
        elapsed = time.monotonic() - t0
    finished = [e for e in events if e.kind == "attempt.finished"]
    assert [e.data["status"] for e in finished] == ["cancelled"]
    assert "the worker did not report" not in (finished[0].data["error"] or "")
    assert elapsed < 20
    assert _wait_gone([int(p) for p in pids.read_text().split()], timeout=5) == []
    assert events[0].kind == "phase" and events[0].data["phase"] == "started"


@ray_test
def test_a_worker_killed_mid_attempt_takes_its_agent_processes_with_it(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """SIGKILL of the Ray worker running an attempt (no clean-up runs): the attempt is reported
    interrupted and its guard kills the agent, its group and its setsid child."""
    import signal

    from ledger.run.executors.ray import RayExecutor

    home = make_ledger(tmp_path, tasks=("fix-sub",))
    pids = tmp_path / "pids"
    agent = _script_agent(tmp_path, "stuck.py", f"""
        import os, subprocess, time
        group = subprocess.Popen(["sleep", "300"])
        loner = subprocess.Popen(["sleep", "301"], start_new_session=True)
        with open({str(pids)!r}, "w") as fh:
            fh.write(f"{{os.getpid()}} {{group.pid}} {{loner.pid}}\\n")
        time.sleep(300)
    """)
    events: list[AttemptEvent] = []
    with RayExecutor(1, cache_dir=tmp_path / "cache") as executor:
        executor.submit(_plan_for(home, "fix-sub", agent))
        for event in executor.events():
            events.append(event)
            if event.kind == "agent.started":
                deadline = time.monotonic() + 10
                while not pids.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                os.kill(executor.ran_on[event.attempt_id]["pid"], signal.SIGKILL)
    [finished] = [e for e in events if e.kind == "attempt.finished"]
    assert finished.data["status"] == "interrupted"
    assert "lost on node" in finished.data["error"]
    assert _wait_gone([int(p) for p in pids.read_text().split()], timeout=5) == []


@ray_test
def test_archive_tampered_in_transit_is_refused_on_the_worker(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """Other bytes under the journaled archive name: the worker reports an error, runs nothing."""
    from ledger.run.executors.ray import RayExecutor

    home = make_ledger(tmp_path, tasks=("fix-sub", "fix-mul"))
    plan = _plan_for(home, "fix-sub", "noop")
    with RayExecutor(1, cache_dir=tmp_path / "cache") as executor:
        sha, _ref = executor._archive(plan.task_root)
        other, other_ref = executor._archive(str(home / "golden" / "mini" / "fix-mul"))
        executor._archives[plan.task_root] = (sha, other_ref)  # the swap an attacker would make
        executor.submit(plan)
        events = list(executor.events())
    kinds = [e.kind for e in events]
    assert "agent.started" not in kinds and "commitment" not in kinds
    [finished] = [e for e in events if e.kind == "attempt.finished"]
    assert finished.data["status"] == "error"
    assert "task-archive" in finished.data["error"] and sha in finished.data["error"]
    assert not (tmp_path / "cache" / sha).exists()


@ray_test
def test_killed_node_leaves_a_verifying_journal_and_resume_finishes_the_lost_attempts(
        cluster: dict[str, Any], tmp_path: Path) -> None:
    """A third node dies mid-attempt: its attempt is journaled interrupted (never silently
    re-run), the journal verifies, and --resume runs that slot again as try 2 on a live node."""
    c = cluster["cluster"]
    third = c.add_node(node_ip_address="127.0.0.1", num_cpus=1)
    third_pids = [p.process.pid for procs in third.all_processes.values() for p in procs]
    home = make_ledger(tmp_path, tasks=("fix-sub",))
    agent = _script_agent(tmp_path, "nap.py", """
        import time
        time.sleep(2)
    """)
    factory = _Factory(cache_dir=tmp_path / "cache")

    def on_third(attempt_id: str) -> bool:
        return factory.made[-1].placements.get(attempt_id, "").endswith(third.node_id)

    def kill(_attempt_id: str) -> None:
        c.remove_node(third, allow_graceful=False)

    progress = _KillOnPhase(on_third, kill)
    first = execute_run(LedgerHome(home), RunRequest(
        tiers=("mini",), agents=(agent,), repeat=3, parallel=3, trace="none", executor="ray"),
        executor_factory=factory, progress=progress)
    assert progress.done, "no attempt was placed on the third node"
    assert _wait_gone(third_pids) == []
    lost = [r for r in first.results if r.status == "interrupted"]
    assert len(lost) == 1 and "lost on node" in (lost[0].error or "")
    assert sorted(r.outcome for r in first.results if r.status == "completed") == ["failed", "failed"]
    _verify(home)
    entries = _entries(home, first.run_id)
    statuses = [e.data["status"] for e in entries if e.kind == "attempt.finished"]
    assert sorted(statuses) == ["completed", "completed", "interrupted"]
    started_nodes = {e.data["node"].split("/")[-1] for e in entries if e.kind == "attempt.started"}
    assert third.node_id in started_nodes

    second = execute_run(LedgerHome(home), RunRequest(resume=first.run_id, executor="ray"),
                         executor_factory=_Factory(cache_dir=tmp_path / "cache"))
    assert [r.try_no for r in second.results] == [2]
    assert second.results[0].status == "completed"
    _verify(home)
    assert _replayed(home, first.run_id).reproduced
    entries = _entries(home, first.run_id)
    tries = sorted(e.data["attempt"] for e in entries if e.kind == "attempt.started")
    assert tries == sorted([f"{first.run_id}/fix-sub/cmd-nap/{r}/1" for r in (1, 2, 3)]
                           + [f"{lost[0].attempt.rsplit('/', 1)[0]}/2"])
    new_node = next(e.data["node"] for e in entries
                    if e.kind == "attempt.started" and e.data["try"] == 2)
    assert not new_node.endswith(third.node_id)
