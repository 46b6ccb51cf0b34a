"""The container engine: which one this machine has (podman, else docker), its version, whether a
container actually runs here and, when not, why; the engine configuration this machine class needs.

Every engine command goes through ``Engine.call`` (bounded in time, output bounded, never a shell)
so an engine that hangs or dies is an ``EngineFailed`` naming the command, never a hang or a raw
traceback. ``probe`` answers in stages, each failure its own one-line reason:

    no engine on PATH -> ``podman info`` fails -> no base image -> ``run --rm BASE true`` fails

On Debian 12 inside a container (root, cgroup v1, no ``CAP_SYS_RESOURCE``) podman's default
runtime crun fails every container (``setrlimit RLIMIT_NOFILE: Operation not permitted``, then
``cgroups in hybrid mode not supported``); ``CONTAINERS_CONF_TEXT`` (runc, cgroupfs, no default
ulimits) is the configuration ``configure`` writes and ``.ci/run`` installs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import EngineFailed, EngineUnavailable

ENGINES = ("podman", "docker")  # the order ``find_engine`` tries them in
BASE_IMAGE = "localhost/ledger-base:bookworm"  # built offline by ``base.build_base_image``
CONF_PATH = Path("/etc/containers/containers.conf")
CONTAINERS_CONF_TEXT = """\
# Written by eval-ledger (ledger/sandbox/container/engine.py): the container settings that work on
# a machine without CAP_SYS_RESOURCE and with cgroups v1 or hybrid (crun fails there).
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""
INSTALL_HINT = ("install podman and runc (apt-get install podman runc mmdebstrap), then "
                "`python -m ledger.sandbox.container setup` to configure it and build the base image")
_OUT_LIMIT = 64 * 1024  # bytes of an engine command's output kept
_VERSIONS: dict[str, str] = {}


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_line(self) -> str:
        """The engine's own last line of error output (what a one-line error quotes)."""
        lines = [ln.strip() for ln in (self.stderr or self.stdout).splitlines() if ln.strip()]
        return lines[-1][:300] if lines else f"exit status {self.returncode}"


@dataclass(frozen=True)
class Engine:
    """One container engine program (``name`` is podman or docker)."""

    name: str
    path: str
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment (CONTAINERS_CONF)

    def call(self, args: Sequence[str], *, timeout: float = 120.0, check: bool = False,
             input_text: str | None = None) -> Result:
        """Run ``ENGINE args...``; a timeout or a missing program is ``EngineFailed``."""
        argv = (self.path, *args)
        env = {**os.environ, **self.env}
        start = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                                  env=env, input=input_text, stdin=None if input_text is not None
                                  else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EngineFailed(f"{self.name} {' '.join(args[:2])} did not finish in {timeout:g} s") from None
        except OSError as exc:
            raise EngineFailed(f"{self.name} could not be started: {exc.strerror or exc}") from None
        result = Result(tuple(argv), proc.returncode, proc.stdout[-_OUT_LIMIT:], proc.stderr[-_OUT_LIMIT:],
                        time.monotonic() - start)
        if check and not result.ok:
            raise EngineFailed(f"{self.name} {' '.join(args[:2])} failed: {result.last_line()}")
        return result

    def version(self) -> str:
        """The client's version (asked once per program path in this process)."""
        if self.path not in _VERSIONS:
            out = self.call(["version", "--format", "{{.Client.Version}}"], timeout=30).stdout.strip()
            _VERSIONS[self.path] = out.splitlines()[0] if out else "unknown"
        return _VERSIONS[self.path]

    def image_exists(self, ref: str) -> bool:
        return self.call(["image", "inspect", "--format", "{{.Id}}", ref], timeout=30).ok

    def inspect_image(self, ref: str) -> dict[str, Any]:
        """``{id, digest, labels}`` of a local image; ``EngineFailed`` when there is none."""
        res = self.call(["image", "inspect", ref], timeout=30)
        if not res.ok:
            raise EngineFailed(f"no image {ref}: {res.last_line()}")
        try:
            info = json.loads(res.stdout)[0]
        except (ValueError, IndexError, KeyError):
            raise EngineFailed(f"{self.name} image inspect {ref}: unreadable answer") from None
        digest = info.get("Digest") or ""
        if not digest:  # docker: RepoDigests only for pulled images; the id is the content digest
            digest = next(iter(info.get("RepoDigests") or []), "").rpartition("@")[2] or info.get("Id", "")
        image_id = str(info.get("Id", ""))
        return {"id": image_id if image_id.startswith("sha256:") else f"sha256:{image_id}",
                "digest": digest, "labels": dict((info.get("Config") or {}).get("Labels") or {})}


def find_engine(name: str | None = None) -> Engine | None:
    """The engine called ``name`` (or the first of ``ENGINES`` on PATH); None when there is none."""
    for candidate in (name,) if name else ENGINES:
        path = shutil.which(candidate)
        if path:
            return Engine(candidate, path, _engine_env(candidate))
    return None


def _engine_env(name: str) -> dict[str, str]:
    """``CONTAINERS_CONF`` pointing at ``LEDGER_CONTAINERS_CONF`` when the operator set it."""
    conf = os.environ.get("LEDGER_CONTAINERS_CONF")
    return {"CONTAINERS_CONF": conf} if conf and name == "podman" else {}


@dataclass(frozen=True)
class Probe:
    """What the engine probe found: ``runs`` says a container ran; else ``reason`` says why not."""

    engine: str | None
    version: str | None
    runs: bool
    reason: str
    base_image: str | None = None
    run_s: float | None = None

    def as_data(self) -> dict[str, Any]:
        return {"engine": self.engine, "version": self.version, "runs": self.runs, "reason": self.reason,
                "base_image": self.base_image, "run_s": None if self.run_s is None else round(self.run_s, 3)}


def probe(name: str | None = None, *, image: str = BASE_IMAGE) -> Probe:
    """Whether a container runs on this machine, and the first reason it does not."""
    engine = find_engine(name)
    if engine is None:
        wanted = name or " or ".join(ENGINES)
        return Probe(None, None, False, f"no container engine: {wanted} is not on PATH; {INSTALL_HINT}")
    try:
        info = engine.call(["info", "--format", "json"], timeout=60)
        if not info.ok:
            return Probe(engine.name, None, False, f"{engine.name} info failed: {info.last_line()}")
        version = engine.version()
        if not engine.image_exists(image):
            return Probe(engine.name, version, False,
                         f"no base image {image}: build it with `python -m ledger.sandbox.container base`")
        run = engine.call(["run", "--rm", "--network=none", image, "true"], timeout=120)
    except EngineFailed as exc:
        return Probe(engine.name, None, False, str(exc))
    if not run.ok:
        hint = ""
        if "setrlimit" in run.stderr or "hybrid mode" in run.stderr or "crun" in run.stderr:
            hint = f" (configure {CONF_PATH}: `python -m ledger.sandbox.container configure`)"
        return Probe(engine.name, version, False, f"{engine.name} run failed: {run.last_line()}{hint}", image)
    return Probe(engine.name, version, True, f"{engine.name} {version} runs containers", image, run.seconds)


def require(name: str | None = None, *, image: str = BASE_IMAGE) -> Engine:
    """The engine, when a container runs on it; else ``EngineUnavailable`` (exit 3) with the reason."""
    found = probe(name, image=image)
    engine = find_engine(name)
    if not found.runs or engine is None:
        raise EngineUnavailable(f"no container can run here: {found.reason}")
    return engine


def configure(path: Path = CONF_PATH) -> str:
    """Write ``CONTAINERS_CONF_TEXT`` to ``path`` unless it holds those settings already.

    An existing file with other settings is kept (moved aside to ``path.orig`` once): the settings
    this machine class needs replace it. Returns what was done, as a line.
    """
    path = Path(path)
    if path.is_file() and path.read_text(encoding="utf-8", errors="replace") == CONTAINERS_CONF_TEXT:
        return f"{path}: already configured"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and not path.with_name(path.name + ".orig").exists():
        path.rename(path.with_name(path.name + ".orig"))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(CONTAINERS_CONF_TEXT, encoding="utf-8")
    os.replace(tmp, path)
    return f"{path}: written (runtime runc, cgroupfs, no default ulimits)"
