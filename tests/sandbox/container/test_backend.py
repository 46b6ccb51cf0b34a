"""The container backend's own guarantees beyond the sandbox contract suite (which it passes in
tests/sandbox/test_sandbox_contract.py): the task's image is the root, an unprivileged user, the
engine's limits, nothing of the ledger home or the task folders inside, every container removed
and the folders given back whatever happened. Each attacker prints what it tried."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ledger.sandbox.container import engine
from ledger.sandbox.container.backend import ContainerSandbox
from ledger.sandbox.limits import MIB, Limits
from ledger.sandbox.port import AgentRequest, GradingRequest


@pytest.fixture
def sandbox(podman: engine.Engine) -> ContainerSandbox:
    return ContainerSandbox(podman.name)


def folders(tmp: Path) -> dict[str, Path]:
    out = {name: tmp / "attempt" / name for name in ("wt", "home", "scratch")}
    for p in out.values():
        p.mkdir(parents=True)
    return out


def agent_box(sandbox: ContainerSandbox, f: dict[str, Path], argv: list[str], hidden: tuple[str, ...] = ()):
    return sandbox.agent_box(AgentRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"], argv=tuple(argv),
                                          path_env="/usr/local/bin:/usr/bin:/bin", hidden=hidden))


def run(box, f: dict[str, Path], argv: list[str], limits=None, timeout: float = 120):
    cmd = box.command(argv, {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(f["home"])}, limits=limits)
    proc = subprocess.run(cmd.argv, env=cmd.env, cwd=f["wt"], capture_output=True, text=True, timeout=timeout,
                          pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec)
    box.started()
    return proc.returncode, proc.stdout + proc.stderr, box.failure(proc.returncode, proc.stdout + proc.stderr)


def containers_named(podman: engine.Engine, prefix: str) -> list[str]:
    out = podman.call(["ps", "-a", "--format", "{{.Names}}"], timeout=60, check=True).stdout.split()
    return [n for n in out if n.startswith(prefix)]


def test_the_image_is_the_root_and_the_user_is_unprivileged(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    f = folders(tmp_path)
    argv = ["/bin/sh", "-c", "echo TRIED id $(id -u):$(id -g); cat /etc/debian_version; "
            "touch /etc/planted && echo TRIED-ROOT WROTE || echo TRIED-ROOT DENIED; echo ok > made.txt"]
    box = agent_box(sandbox, f, argv)
    try:
        code, out, failed = run(box, f, argv)
    finally:
        box.close()
    assert (code, failed) == (0, None), out
    assert "TRIED id 1000:1000" in out and out.splitlines()[1].startswith("12.")  # bookworm, the image's
    assert "TRIED-ROOT DENIED" in out
    assert (f["wt"] / "made.txt").read_text() == "ok\n"
    assert (f["wt"] / "made.txt").stat().st_uid == os.getuid()  # given back when the box closed
    assert box.as_data()["image"] == engine.BASE_IMAGE and box.as_data()["backend"] == "podman"


def test_nothing_of_the_ledger_home_or_the_task_is_inside(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    """The ledger home and the task folder exist on the host beside the worktree; inside, neither
    is there at all (only what the policy shows is mounted)."""
    f = folders(tmp_path)
    home = tmp_path / ".ledger"
    home.mkdir()
    (home / "signing.key").write_text("SECRET-KEY\n")
    task = tmp_path / "task" / "tests"
    task.mkdir(parents=True)
    (task / "test_hidden.py").write_text("HIDDEN-TEST\n")
    argv = ["/bin/sh", "-c", f"for p in {home}/signing.key {task}/test_hidden.py; do "
            "cat $p 2>/dev/null && echo TRIED $p READ || echo TRIED $p ABSENT; done; ls /"]
    box = agent_box(sandbox, f, argv, hidden=(str(home), str(tmp_path / "task")))
    try:
        code, out, failed = run(box, f, argv)
    finally:
        box.close()
    assert (code, failed) == (0, None), out
    assert f"TRIED {home}/signing.key ABSENT" in out and f"TRIED {task}/test_hidden.py ABSENT" in out
    assert "SECRET-KEY" not in out and "HIDDEN-TEST" not in out


def test_the_engine_limits_memory_and_processes(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    f = folders(tmp_path)
    hog = ["/usr/bin/python3", "-c",
           "import os\nprint('TRIED allocate 512 MiB', flush=True)\nb = bytearray(512 << 20)\n"
           "for i in range(0, len(b), 4096): b[i] = 1\nprint('ALLOCATED')"]
    box = agent_box(sandbox, f, hog)
    enf = box.enforcement(Limits(memory=128 * MIB, processes=64), label="agent")
    try:
        code, out, failed = run(box, f, hog, limits=enf)
        forks = ["/bin/sh", "-c", "echo TRIED fork 200; for i in $(seq 200); do sleep 5 & done 2>&1 | "
                 "grep -c -i 'fork\\|resource' ; wait"]
        fcode, fout, ffailed = run(box, f, forks, limits=enf)
    finally:
        box.close()
    assert failed is None and "TRIED allocate 512 MiB" in out and "ALLOCATED" not in out and code == 137, out
    assert ffailed is None and "TRIED fork 200" in fout
    assert int(fout.split()[-1]) > 0, fout  # some forks were refused


def test_every_container_is_removed_whatever_happened(sandbox: ContainerSandbox, podman: engine.Engine,
                                                       tmp_path: Path) -> None:
    """A command killed mid-way (its engine client killed) leaves no container once the box closes."""
    f = folders(tmp_path)
    argv = ["/bin/sh", "-c", "echo TRIED outlive; sleep 300"]
    box = agent_box(sandbox, f, argv)
    cmd = box.command(argv, {"PATH": "/usr/bin:/bin"})
    proc = subprocess.Popen(cmd.argv, env=cmd.env, stdout=subprocess.PIPE, text=True, pass_fds=cmd.pass_fds,
                            preexec_fn=cmd.preexec)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "TRIED outlive"
        name = box._names[-1]
        assert containers_named(podman, name) == [name]
        proc.kill()
        proc.wait(timeout=30)
    finally:
        records = box.close()
    assert containers_named(podman, name) == [] and records.commands == 1
    assert f["wt"].stat().st_uid == os.getuid()


def test_a_grading_box_is_a_fresh_container_per_command(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    """A process left behind by one grading command is gone for the next (a fresh container each)."""
    f = folders(tmp_path)
    box = sandbox.grading_box(GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                             path_env="/usr/bin:/bin"))
    try:
        pcode, pout, _ = run(box, f, ["/bin/sh", "-c", "(sleep 60 &); echo TRIED plant $(cat /proc/[0-9]*/comm "
                                      "| grep -c sleep)"])
        code, out, failed = run(box, f, ["/bin/sh", "-c", "echo TRIED look $(cat /proc/[0-9]*/comm | grep -c sleep)"])
    finally:
        box.close()
    assert pcode == 0 and "TRIED plant 1" in pout, pout  # the planted process ran beside its command
    assert (code, failed) == (0, None) and "TRIED look 0" in out, out


def test_a_missing_image_is_the_box_failure(podman: engine.Engine, tmp_path: Path) -> None:
    f = folders(tmp_path)
    box = ContainerSandbox(podman.name).for_image("localhost/ledger-no-such-image:1").grading_box(
        GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"]))
    try:
        code, out, failed = run(box, f, ["/bin/true"])
    finally:
        records = box.close()
    assert code == 125 and failed is not None and "ledger-no-such-image" in failed
    assert records.failures == (failed,)


def test_mounts_take_system_folders_from_the_image_and_mask_inside_shown_trees(tmp_path: Path) -> None:
    """No host system folder is mounted (the image provides them); a masked folder inside a shown
    tree gets the empty folder, a masked file /dev/null; writable folders are read-write."""
    from ledger.sandbox.container.backend import mounts
    from ledger.sandbox.policy import SandboxPolicy

    shown, wt = tmp_path / "tree", tmp_path / "wt"
    (shown / "secret").mkdir(parents=True)
    (shown / "key.txt").write_text("k")
    wt.mkdir()
    policy = SandboxPolicy(cwd=str(wt), writable=(str(wt),), readable=("/usr", "/etc", str(shown)),
                           masked=(str(shown / "secret"), str(shown / "key.txt"), "/etc/shadow"))
    flags = mounts(policy, None, tmp_path / "empty")
    assert flags == [f"--volume={wt}:{wt}:rw", f"--volume={shown}:{shown}:ro",
                     f"--volume={tmp_path / 'empty'}:{shown / 'secret'}:ro",
                     f"--volume=/dev/null:{shown / 'key.txt'}:ro"]


def test_limits_become_engine_flags_with_nofile_and_nproc_always_given() -> None:
    """Any --ulimit makes podman add nofile/nproc at their maximum (refused here): both are given."""
    from ledger.sandbox.container.backend import ContainerEnforcement

    flags = ContainerEnforcement(Limits(memory=64 * MIB, processes=32, open_files=256, file_size=MIB, cpu_s=9),
                                 "agent").flags()
    assert flags == [f"--memory={64 * MIB}", f"--memory-swap={64 * MIB}", "--pids-limit=32",
                     "--ulimit=nofile=256:256", "--ulimit=nproc=32:32", f"--ulimit=fsize={MIB}:{MIB}",
                     "--ulimit=cpu=9:9"]


def test_a_docker_box_gets_only_flags_docker_knows(tmp_path: Path) -> None:
    """docker has no --read-only-tmpfs (its read-only root has no tmpfs anyway) and no rm --ignore."""
    from ledger.sandbox.container.backend import ContainerBox
    from ledger.sandbox.policy import SandboxPolicy

    log = tmp_path / "calls.log"
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    fake.chmod(0o755)
    wt = tmp_path / "wt"
    wt.mkdir()
    box = ContainerBox(engine.Engine("docker", str(fake)), "img:1",
                       SandboxPolicy(cwd=str(wt), writable=(str(wt),), readable=()), home=str(wt), scratch=str(wt))
    argv = box.command(["/bin/true"], {"PATH": "/usr/bin"}).argv
    assert argv[0] == str(fake) and "--read-only" in argv and not any("read-only-tmpfs" in a for a in argv)
    box.close()
    assert log.read_text().startswith("rm --force ledger-agent-") and "--ignore" not in log.read_text()


# Who ended a running command, and whether that is the box's failure (the harness's: an infra
# failure) or the command's own ending (the agent's): one case each.
ENDINGS = [
    ("killed-from-outside", ["kill"], "the container ended before its command did"),
    ("removed-from-outside", ["rm", "--force", "--time=0"], "the container ended before its command did"),
    ("killed-itself", None, None),  # SIGKILL to its own process: exit 137, the command's
    ("prints-an-engine-like-error", None, None),  # "Error: ..." and exit 127: still the command's
]
ENDING_ARGV = {
    "killed-itself": "echo TRIED running; kill -9 $$",
    "prints-an-engine-like-error": "echo TRIED running; echo 'Error: OCI runtime error: forged' >&2; exit 127",
}


@pytest.mark.parametrize("case,engine_cmd,want", ENDINGS, ids=[c[0] for c in ENDINGS])
def test_who_ended_the_command(sandbox: ContainerSandbox, podman: engine.Engine, tmp_path: Path, case: str,
                               engine_cmd: list[str] | None, want: str | None) -> None:
    """A container ended under its running command (killed or removed from outside: the engine's
    doing, proved running first) is the box's failure; a command that ended itself, however it
    looks (SIGKILL, an engine-like error line and exit 127), is not. The container is gone."""
    f = folders(tmp_path)
    argv = ["/bin/sh", "-c", ENDING_ARGV.get(case, "echo TRIED running; sleep 300")]
    box = agent_box(sandbox, f, argv)
    cmd = box.command(argv, {"PATH": "/usr/bin:/bin"})
    proc = subprocess.Popen(cmd.argv, env=cmd.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec)
    box.started()
    name = box._names[-1]
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "TRIED running"
        if engine_cmd is not None:
            state = podman.call(["inspect", "--format", "{{.State.Running}}", name], timeout=30, check=True)
            assert state.stdout.strip() == "true"  # running when the engine ended it
            podman.call([*engine_cmd, name], timeout=60, check=True)
        _out, err = proc.communicate(timeout=60)
        failed = box.failure(proc.returncode, err)
    finally:
        records = box.close()
    if want is None:
        assert failed is None and records.failures == (), (proc.returncode, err)
        assert proc.returncode in (137, 127)
    else:
        assert failed is not None and want in failed and records.failures == (failed,)
    assert containers_named(podman, name) == []


WORKDIRS = [  # (case, a task's environment.workdir, where the worktree is mounted too, or None)
    ("app", "/app", "/app"),
    ("trailing-slash", "/app/", "/app"),
    ("srv-subfolder", "/srv/task", "/srv/task"),
    ("relative", "app", None),
    ("root-of-all", "/", None),
    ("system-folder", "/usr/local/app", None),
    ("under-root-home", "/root/app", None),
    ("proc", "/proc/app", None),
]


@pytest.mark.parametrize("case,workdir,want", WORKDIRS, ids=[w[0] for w in WORKDIRS])
def test_which_workdirs_the_worktree_is_mounted_at(case: str, workdir: str, want: str | None) -> None:
    from ledger.sandbox.container.backend import task_workdir

    assert task_workdir(workdir) == want


def test_the_agent_starts_in_the_task_workdir_where_the_worktree_is(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    """With the task's workdir /app: the agent starts in /app, which is its worktree (a file
    written there is in the worktree, the worktree's files are there); a grading box shows the
    tree at /app too and starts where it did (its commands name the worktree's own path)."""
    f = folders(tmp_path)
    (f["wt"] / "given.txt").write_text("GIVEN\n")
    bound = sandbox.for_image({"image": engine.BASE_IMAGE, "workdir": "/app"})
    argv = ["/bin/sh", "-c", "echo TRIED pwd $(pwd); cat given.txt; echo made > made-in-app.txt"]
    box = agent_box(bound, f, argv)
    try:
        code, out, failed = run(box, f, argv)
    finally:
        box.close()
    assert (code, failed) == (0, None), out
    assert "TRIED pwd /app" in out and "GIVEN" in out
    assert (f["wt"] / "made-in-app.txt").read_text() == "made\n" and box.as_data()["workdir"] == "/app"
    grading = bound.grading_box(GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                               path_env="/usr/bin:/bin"))
    try:
        code, out, failed = run(grading, f, ["/bin/sh", "-c", "echo TRIED pwd $(pwd); cat /app/made-in-app.txt"])
    finally:
        grading.close()
    assert (code, failed) == (0, None) and f"TRIED pwd {f['wt']}" in out and "made" in out, out


def test_a_mask_inside_the_worktree_is_a_mask_at_the_workdir_too(tmp_path: Path) -> None:
    """Whatever the policy hides inside the worktree is hidden under the workdir as well (the
    same empty folder or /dev/null over it), so the second mount shows nothing the first hides."""
    from ledger.sandbox.container.backend import ContainerBox
    from ledger.sandbox.policy import SandboxPolicy

    wt = tmp_path / "wt"
    (wt / "secret").mkdir(parents=True)
    (wt / "key.txt").write_text("k")
    policy = SandboxPolicy(cwd=str(wt), writable=(str(wt),), readable=(),
                           masked=(str(wt / "secret"), str(wt / "key.txt")), purpose="agent")
    box = ContainerBox(engine.Engine("podman", "/bin/true"), "img:1", policy, home=str(wt), scratch=str(wt),
                       tree=str(wt), workdir="/app")
    try:
        flags = box._workdir_flags()
        empty = box._stubs()[1]
    finally:
        box.close()
    assert flags == ["--workdir=/app", f"--volume={wt}:/app:rw", f"--volume={empty}:/app/secret:ro",
                     "--volume=/dev/null:/app/key.txt:ro"]


PACKAGES = [  # (case, a file, the npm package folder holding it, or None)
    ("scoped", "/usr/lib/node_modules/@openai/codex/bin/codex.js", "/usr/lib/node_modules/@openai/codex"),
    ("unscoped", "/usr/lib/node_modules/opencode-ai/bin/opencode", "/usr/lib/node_modules/opencode-ai"),
    ("nested", "/usr/lib/node_modules/a/node_modules/@s/b/x.js", "/usr/lib/node_modules/a/node_modules/@s/b"),
    ("not-a-package", "/usr/bin/node", None),
    ("the-folder-itself", "/usr/lib/node_modules", None),
]


@pytest.mark.parametrize("case,path,want", PACKAGES, ids=[p[0] for p in PACKAGES])
def test_the_npm_package_an_agent_program_lives_in(case: str, path: str, want: str | None) -> None:
    """An agent CLI installed by npm under /usr (which a container takes from its image) gets its
    whole package folder mounted: which folder that is."""
    from ledger.sandbox.container.backend import _node_package

    assert _node_package(path) == want
