"""Every ordinary agent shape (tests/sandbox/shapes.py) runs in the default sandbox as outside.

One ``ledger run`` (a child process, so that its ``PATH`` and ``HOME`` are the test's) of every
shape on the ``add-clamp`` smoke task, with a fake pyenv installation first on ``PATH``: its
``shims/python3`` execs ``libexec/pyenv exec python3``, which reads the root's ``version`` file
and execs ``versions/<v>/bin/python3`` (a wrapper of the real interpreter). The fake ``HOME``
holds a script of its own and a file no sandbox may show. Each shape must have run (its own
marker in the journal), passed and stayed CLEAN, in a bubblewrap sandbox.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ledger.journal.journal import Journal
from ledger.sandbox import probe_bwrap
from tests.sandbox.shapes import SHAPES, Shape

BWRAP_OK, BWRAP_WHY, _V = probe_bwrap()
pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_WHY}")]

LEDGER = [sys.executable, "-c", "from cli.main import main; main()"]
REAL_PYTHON = os.path.realpath(sys.executable)


def fake_pyenv(root: Path) -> Path:
    """A pyenv-style installation at ``root``; returns its ``shims`` folder."""
    version = "fake-3.11"
    bin_dir = root / "versions" / version / "bin"
    bin_dir.mkdir(parents=True)
    (root / "libexec").mkdir()
    (root / "shims").mkdir()
    (root / "version").write_text(version + "\n")
    _exe(bin_dir / "python3", f'#!/bin/sh\nexec {REAL_PYTHON} "$@"\n')
    _exe(root / "libexec" / "pyenv", """#!/usr/bin/env bash
set -e
[ "$1" = exec ] || { echo "pyenv: only exec is faked" >&2; exit 1; }
shift
program="$1"; shift
version="$(cat "$PYENV_ROOT/version")"
exec "$PYENV_ROOT/versions/$version/bin/$program" "$@"
""")
    _exe(root / "shims" / "python3", f"""#!/usr/bin/env bash
set -e
export PYENV_ROOT="{root}"
exec "{root}/libexec/pyenv" exec "python3" "$@"
""")
    return root / "shims"


def fake_asdf(root: Path) -> Path:
    """An asdf-style installation at ``root`` (``bin/asdf``, ``shims/``, ``installs/``): its
    ``python3`` shim runs ``asdf exec``, which finds the version under ``installs/``."""
    version = "fake-3.11"
    bin_dir = root / "installs" / "python" / version / "bin"
    bin_dir.mkdir(parents=True)
    (root / "shims").mkdir()
    (root / "version").write_text(version + "\n")
    _exe(bin_dir / "python3", f'#!/bin/sh\nexec {REAL_PYTHON} "$@"\n')
    (root / "bin").mkdir()
    _exe(root / "bin" / "asdf", """#!/bin/sh
set -e
[ "$1" = exec ] || { echo "asdf: only exec is faked" >&2; exit 1; }
shift
program="$1"; shift
exec "$ASDF_DIR/installs/python/$(cat "$ASDF_DIR/version")/bin/$program" "$@"
""")
    _exe(root / "shims" / "python3", f"""#!/bin/sh
export ASDF_DIR="{root}"
exec "{root}/bin/asdf" exec python3 "$@"
""")
    return root


def _user_script(shape: Shape, home: Path) -> tuple[str, str]:
    """A ``pip install --user`` console script in the operator's ``~/.local``."""
    from tests.sandbox.shapes import CLAMP, USER_MODULE

    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = home / ".local" / "lib" / pyver / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    module = shape.name.replace("-", "_")
    (site / f"{module}.py").write_text(USER_MODULE.format(name=shape.name, clamp=CLAMP))
    prog = home / ".local" / "bin" / shape.name
    prog.parent.mkdir(parents=True, exist_ok=True)
    _exe(prog, f"#!{REAL_PYTHON}\nimport sys\nfrom {module} import main\nsys.exit(main())\n")
    return f"cmd:{prog}", str(prog)


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@dataclass
class Matrix:
    tmp: Path
    home: Path
    summary: dict[str, Any]
    spec_of: dict[str, str]  # shape -> the path that identifies its attempt
    skipped: dict[str, str]  # shape -> why it could not be built here
    entries: list[Any] = field(default_factory=list)
    stderr: str = ""


def _build(shape: Shape, tmp: Path, home: Path, cleanup: list[Path]) -> tuple[str, str]:
    """(agent spec, unique token of its command line) for ``shape``; raises ``LookupError``
    with the reason when this machine cannot build it."""
    agents = tmp / "agents"
    stem = f"{shape.name}-{uuid.uuid4().hex[:6]}" if shape.where == "tmp" else shape.name
    if shape.kind == "static":
        return _static_binary(shape, tmp, agents)
    if shape.kind == "user":
        return _user_script(shape, home)
    if "{asdf}" in shape.interpreter:
        shape = dataclasses.replace(
            shape, interpreter=shape.interpreter.replace("{asdf}", str(tmp / "asdf")))
    if shape.kind == "venv":
        venv = tmp / "venv"
        subprocess.run([REAL_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True,
                       timeout=120)
        prog = venv / "bin" / shape.name
        _exe(prog, f"#!{venv}/bin/python\n" + shape.body())
        return f"cmd:{prog}", str(prog)
    if shape.language == "node" and shutil.which("node") is None:
        raise LookupError("node is not installed")
    suffix = {"sh": ".sh", "py": ".py", "node": ".js"}[shape.language]
    folder = {"agents": agents, "relative": agents, "tmp": Path("/tmp"), "home": home}[shape.where]
    path = folder / (stem + suffix)
    _exe(path, shape.body())
    if shape.where == "tmp":
        cleanup.append(path)
    if shape.kind == "interp":
        path.chmod(0o644)
        return f"cmd:{shape.interpreter} {path}", str(path)
    if shape.where == "relative":
        return f"cmd:./agents/{path.name}", str(path)
    return f"cmd:{path}", str(path)


def _is_static(path: str) -> bool:
    """An ELF executable without an interpreter (PT_INTERP): statically linked."""
    import struct

    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
                return False
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
    except OSError:
        return False
    return not any(struct.unpack_from("<I", table, i * phentsize)[0] == 3  # PT_INTERP
                   for i in range(phnum))


def _static_binary(shape: Shape, tmp: Path, agents: Path) -> tuple[str, str]:
    """A static C program built with ``gcc -static``; else Debian's busybox-static (``.ci/run``
    installs it) running the shell body; ``LookupError`` with both reasons otherwise."""
    why = []
    gcc = shutil.which("gcc")
    if gcc is not None:
        src = tmp / f"{shape.name}.c"
        src.write_text(shape.c_source())
        out = agents / shape.name
        proc = subprocess.run([gcc, "-static", "-O1", "-o", str(out), str(src)],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode == 0 and _is_static(str(out)):
            return f"cmd:{out}", str(out)
        why.append(f"gcc -static failed (no static libc?): {proc.stderr.strip()[:200]}")
    else:
        why.append("gcc is not installed")
    busybox = shutil.which("busybox") or "/bin/busybox"
    if os.path.isfile(busybox) and _is_static(busybox):
        script = agents / f"{shape.name}.sh"
        script.write_text(Shape(shape.name, "interp").body())
        return f"cmd:{busybox} sh {script}", str(script)
    why.append("no statically linked busybox (apt-get install busybox-static)")
    raise LookupError("; ".join(why))


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    tmp = tmp_path_factory.mktemp("shapes")
    home = tmp / "home"
    home.mkdir()
    (home / "private-note.txt").write_text("operator's own file\n")
    (home / ".local" / "share").mkdir(parents=True)  # beside a pip --user install: never shown
    (home / ".local" / "share" / "private-note.txt").write_text("operator's own file\n")
    (tmp / "agents").mkdir()
    shims = fake_pyenv(tmp / "pyenv")
    fake_asdf(tmp / "asdf")
    cleanup: list[Path] = []
    specs: list[str] = []
    spec_of: dict[str, str] = {}
    skipped: dict[str, str] = {}
    try:
        for shape in SHAPES:
            try:
                spec, token = _build(shape, tmp, home, cleanup)
            except LookupError as why:
                skipped[shape.name] = str(why)
                continue
            specs.append(spec)
            spec_of[shape.name] = token
        env = {**os.environ, "HOME": str(home),
               "PATH": os.pathsep.join([str(shims), os.environ.get("PATH", os.defpath)])}
        env.pop("PYENV_ROOT", None)
        env.pop("PYENV_VERSION", None)
        ledger = tmp / ".ledger"
        args = [*LEDGER, "--ledger", str(ledger), "run", "--json", "--task", "add-clamp",
                "--parallel", "2"]
        for spec in specs:
            args += ["--agent", spec]
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        summary = json.loads(proc.stdout)
        with Journal.open(ledger / "journal.db", readonly=True) as j:
            entries = list(j.entries(run=summary["run"]))
        yield Matrix(tmp, home, summary, spec_of, skipped, entries, proc.stderr)
    finally:
        for path in cleanup:
            path.unlink(missing_ok=True)


def _attempt_of(m: Matrix, shape: str) -> str:
    token = m.spec_of[shape]
    ids = [e.data["attempt"] for e in m.entries
           if e.kind == "agent.started" and any(token in a for a in e.data["argv"])]
    assert len(ids) == 1, (shape, ids)
    return ids[0]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_shape_runs_passes_and_stays_clean_in_the_default_sandbox(matrix: Matrix,
                                                                   shape: Shape) -> None:
    """The agent ran (its own marker line reached the journal), in a bubblewrap sandbox, and
    its attempt passed and is CLEAN."""
    if shape.name in matrix.skipped:
        pytest.skip(matrix.skipped[shape.name])
    attempt = _attempt_of(matrix, shape.name)
    started = next(e.data for e in matrix.entries
                   if e.kind == "agent.started" and e.data["attempt"] == attempt)
    assert started["isolation"] == "sandbox"
    text = "".join(e.data.get("text", "") for e in matrix.entries
                   if e.kind == "agent.output" and e.data["attempt"] == attempt)
    marker = next((ln for ln in text.splitlines() if f"SHAPE-RAN {shape.name}" in ln), None)
    assert marker is not None, (shape.name, text[-2000:])
    assert shape.proves in marker, marker  # e.g. python3 came through the pyenv shim
    row = next(r for r in matrix.summary["attempts"] if r["attempt"] == attempt)
    assert (row["outcome"], row["attestation"]) == ("passed", "CLEAN"), (shape.name, row, text)


def test_a_pip_user_script_sees_its_user_base_bin_and_site_packages_only(matrix: Matrix) -> None:
    """The ``pip install --user`` console script's attempt: of the operator's ``~/.local`` only
    ``bin`` and ``lib/pythonX.Y/site-packages`` are shown (not ``lib/pythonX.Y`` itself, not
    ``share``), and the agent got ``PYTHONUSERBASE`` (its fresh HOME hides ``~/.local``)."""
    if "pip-user-console-script" in matrix.skipped:
        pytest.skip(matrix.skipped["pip-user-console-script"])
    attempt = _attempt_of(matrix, "pip-user-console-script")
    started = next(e.data for e in matrix.entries
                   if e.kind == "agent.started" and e.data["attempt"] == attempt)
    base = str((matrix.home / ".local").resolve())
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    shown = sorted(p for p in started["sandbox"]["readable"] if p.startswith(base + "/"))
    assert shown == [f"{base}/bin", f"{base}/lib/{pyver}/site-packages"], shown
    assert "PYTHONUSERBASE" in started["sandbox"]["env"]


def test_shims_bring_their_installation_and_never_the_home(matrix: Matrix) -> None:
    """The pyenv shim brought the fake pyenv root read-only; neither the operator's home nor
    any folder above it is shown, and the script in $HOME is shown as that file alone."""
    pyenv = str((matrix.tmp / "pyenv").resolve())
    home = str(matrix.home.resolve())
    for e in matrix.entries:
        if e.kind != "agent.started":
            continue
        shown = e.data["sandbox"]["readable"] + e.data["sandbox"]["writable"]
        assert pyenv in e.data["sandbox"]["readable"]
        assert not any(home == p or home.startswith(p.rstrip("/") + "/") for p in shown), shown
    if "script-in-home" in matrix.spec_of:
        started = next(e.data for e in matrix.entries if e.kind == "agent.started"
                       and e.data["attempt"] == _attempt_of(matrix, "script-in-home"))
        assert matrix.spec_of["script-in-home"] in started["sandbox"]["readable"]
