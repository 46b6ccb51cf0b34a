"""Agents: what a spec string names, and how to invoke it for one attempt.

Specs (``resolve_agent``):

    noop | oracle | demo | replay:RUN          built-in agents (subprocesses of this package)
    claude | codex | gemini | cursor-agent | aider   CLI presets; ``PRESET:MODEL`` picks a model
    cmd:PROGRAM ARG...                          any program; ``{prompt_file}`` ``{worktree}``
                                                ``{task_id}`` ``{prompt}`` are substituted
    http:MODEL@BASE_URL                         the built-in HTTP agent (``agents/http.py``)
    NAME                                        ``[agents.NAME]`` in ledger.toml (a command, or
                                                ``kind = "http"``)

Every agent runs with the worktree as working directory and ``LEDGER_WORKTREE``,
``LEDGER_PROMPT_FILE``, ``LEDGER_TASK_ID`` in its environment. Secrets found in the environment
(variables named like ``*API_KEY*``, ``*TOKEN*``, ``*SECRET*``, ...) are listed in
``Invocation.secrets`` so that they never reach the journal. ``endpoints()`` names the model API
hosts the agent may reach (presets: their vendor's; ``[agents.NAME] endpoints``; built-ins and
``cmd:`` specs: none). docs/agents.md describes each agent.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.agents import presets as _presets
from ledger.agents.contracts import Agent, AttemptContext, Invocation
from ledger.agents.parsers import BuiltinParser
from ledger.errors import UsageError

BUILTINS = ("noop", "oracle", "demo")
PRESET_ORDER = _presets.PRESET_ORDER
VERSION_TIMEOUT_S = 10.0
_SECRET_NAME = re.compile(r"API_?KEY|TOKEN|SECRET|PASSW(OR)?D|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL",
                          re.IGNORECASE)
_NAME_OK = re.compile(r"[^A-Za-z0-9._-]+")
_INTERPRETERS = {"python", "python3", "bash", "sh", "node", "ruby", "perl", "uv", "uvx", "npx",
                 "env", "deno", "bun"}
_STATE_ENV = ("LEDGER_ATTEMPT",)


def env_secrets(env: Mapping[str, str]) -> tuple[str, ...]:
    """Values of environment variables whose names say they are credentials."""
    return tuple(sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}))


def base_env(ctx: AttemptContext, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The harness environment plus the ``LEDGER_*`` variables every agent gets."""
    env = {k: v for k, v in os.environ.items() if k not in _STATE_ENV}
    env.update({
        "LEDGER_WORKTREE": str(ctx.worktree),
        "LEDGER_PROMPT_FILE": str(ctx.prompt_file),
        "LEDGER_TASK_ID": ctx.task_id,
    })
    if extra:
        env.update(extra)
    return env


def safe_name(text: str) -> str:
    return _NAME_OK.sub("-", text).strip("-.") or "agent"


_version_lock = threading.Lock()
_versions: dict[tuple[str, ...], str | None] = {}


def program_version(argv: tuple[str, ...], timeout: float = VERSION_TIMEOUT_S) -> str | None:
    """First line of ``argv`` (e.g. ``claude --version``), cached per process; None on failure."""
    with _version_lock:
        if argv in _versions:
            return _versions[argv]
    try:
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
        lines = (proc.stdout or proc.stderr).decode("utf-8", "replace").strip().splitlines()
        version = lines[0].strip()[:200] if proc.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired):
        version = None
    with _version_lock:
        _versions[argv] = version
    return version


def harness_version() -> str:
    try:
        from importlib.metadata import version

        return f"eval-ledger {version('eval-ledger')}"
    except Exception:
        return "eval-ledger (unknown version)"


@dataclass
class BuiltinAgent:
    """``noop``, ``oracle``, ``demo``, ``replay:RUN``: ``python -m ledger.agents.builtin``."""

    name: str
    spec: str
    builtin: str
    run_ref: str | None = None
    kind: str = "builtin"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str | None:
        return harness_version()

    def endpoints(self) -> tuple[str, ...]:
        return ()  # the built-ins use no model

    def _json_file(self, ctx: AttemptContext, key: str, fname: str) -> str:
        import json

        given = ctx.extra.get(key + "_file")
        if given:
            return str(given)
        if key not in ctx.extra:
            raise UsageError(f"agent {self.spec!r} needs ctx.extra[{key!r}] (set by the run)")
        path = Path(ctx.home) / fname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ctx.extra[key], ensure_ascii=False), encoding="utf-8")
        return str(path)

    def invocation(self, ctx: AttemptContext) -> Invocation:
        argv = [sys.executable, "-P", "-m", "ledger.agents.builtin", self.builtin,
                "--worktree", str(ctx.worktree)]
        if self.builtin == "oracle":
            task_root = ctx.extra.get("task_root")
            if not task_root:
                raise UsageError("agent 'oracle' needs ctx.extra['task_root'] (set by the run)")
            argv += ["--task-root", str(task_root)]
        elif self.builtin == "demo":
            argv += ["--steps", self._json_file(ctx, "demo_steps", ".ledger-demo-steps.json")]
        elif self.builtin == "replay":
            argv += ["--files", self._json_file(ctx, "replay_files", ".ledger-replay-files.json")]
        env = base_env(ctx)
        return Invocation(argv=tuple(argv), env=env, parser_factory=BuiltinParser,
                          secrets=env_secrets(env))


@dataclass
class CliAgent:
    """A preset for a known agent CLI (see ``presets.py`` and docs/agents.md)."""

    name: str
    spec: str
    preset: _presets.Preset
    model: str | None = None
    program: str | None = None  # an explicit path; else the preset's names on PATH
    extra_env: Mapping[str, str] = field(default_factory=dict)
    base_url: str | None = None  # [agents.NAME] base_url / --agent-base-url
    api_key_env: str | None = None  # [agents.NAME] api_key_env: the variable holding the key
    kind: str = "cli"

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.extra_env}

    def access(self) -> _presets.ModelAccess:
        """Endpoint and key as the preset will hand them to the CLI (see presets.ModelAccess)."""
        return self.preset.access(self._env(), self.base_url, self.api_key_env)

    def resolved_program(self) -> str | None:
        if self.program:
            return shutil.which(self.program)
        for candidate in self.preset.programs:
            found = shutil.which(candidate)
            if found:
                return found
        return None

    def available(self) -> tuple[bool, str]:
        if self.resolved_program() is None:
            names = " or ".join(repr(p) for p in ((self.program,) if self.program else self.preset.programs))
            return False, f"{names} not found on PATH (install {self.preset.name}, or name its path)"
        try:
            self.access()
        except UsageError as exc:
            return False, str(exc)
        return True, ""

    def version(self) -> str | None:
        prog = self.resolved_program()
        if prog is None:
            return None
        if self.preset.installed_version is not None:
            found = self.preset.installed_version(prog)
            if found:
                return found
        return program_version((prog, "--version"))

    def endpoints(self) -> tuple[str, ...]:
        """The preset's model API endpoints for this model and environment, and the endpoint the
        attempt is pointed at (``base_url``, or the vendor variable it carries over)."""
        env = self._env()
        if self.base_url:  # the explicit endpoint replaces what the vendor variables name
            env = {k: v for k, v in env.items() if k not in self.preset.base_url_vars}
        hosts = list(self.preset.endpoints(self.model, env))
        with contextlib.suppress(UsageError):
            own = _presets.url_endpoint(self.access().base_url)
            if own:
                hosts.append(own)
        return _presets.check_endpoints(list(dict.fromkeys(hosts)), f"preset {self.preset.name}")

    def invocation(self, ctx: AttemptContext) -> Invocation:
        prog = self.resolved_program()
        if prog is None:
            raise UsageError(self.available()[1])
        access = self.access()
        argv, overrides = self.preset.build(prog, ctx, self.model, access)
        env = base_env(ctx, overrides)
        env.update(self.extra_env)
        model, home = self.model, Path(ctx.home)
        secrets = set(env_secrets(env))
        if access.api_key and len(access.api_key) >= 8:
            secrets.add(access.api_key)
        return Invocation(argv=tuple(argv), env=env,
                          parser_factory=lambda: self.preset.parser(model, home=home),
                          secrets=tuple(sorted(secrets)))


def substitute(arg: str, ctx: AttemptContext) -> str:
    for key, value in (("{prompt_file}", str(ctx.prompt_file)), ("{worktree}", str(ctx.worktree)),
                       ("{task_id}", ctx.task_id), ("{prompt}", ctx.prompt)):
        arg = arg.replace(key, value)
    return arg


@dataclass
class CmdAgent:
    """``cmd:PROGRAM ARG...`` or a named ``[agents.NAME] command``: any program."""

    name: str
    spec: str
    command: tuple[str, ...]
    extra_env: Mapping[str, str] = field(default_factory=dict)
    version_text: str | None = None
    declared_endpoints: tuple[str, ...] = ()  # [agents.NAME] endpoints
    kind: str = "cmd"

    def program(self) -> str | None:
        prog = self.command[0]
        if "/" in prog:
            return prog if os.path.isfile(prog) and os.access(prog, os.X_OK) else None
        return shutil.which(prog)

    def available(self) -> tuple[bool, str]:
        if self.program() is None:
            return False, (f"program {self.command[0]!r} not found or not executable "
                           f"(agent {self.spec!r})")
        return True, ""

    def version(self) -> str | None:
        return self.version_text

    def endpoints(self) -> tuple[str, ...]:
        return self.declared_endpoints

    def invocation(self, ctx: AttemptContext) -> Invocation:
        prog = self.program()
        if prog is None:
            raise UsageError(self.available()[1])
        argv = [prog] + [substitute(a, ctx) for a in self.command[1:]]
        env = base_env(ctx, self.extra_env)
        return Invocation(argv=tuple(argv), env=env, parser_factory=None, secrets=env_secrets(env))


def _cmd_name(argv: tuple[str, ...]) -> str:
    words = [w for w in argv if not w.startswith("-")]
    stem = Path(words[0]).name if words else "cmd"
    if Path(stem).stem in _INTERPRETERS or re.fullmatch(r"python3(\.\d+)?", stem):
        for w in words[1:]:
            if "{" not in w:
                stem = Path(w).stem
                break
    return "cmd-" + safe_name(Path(stem).stem if "." in stem else stem)


def _absolute_program(argv: tuple[str, ...]) -> tuple[str, ...]:
    prog = argv[0]
    if "/" in prog and not os.path.isabs(prog):
        prog = os.path.abspath(prog)
    return (prog, *argv[1:])


def _agents_table(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not config:
        return {}
    table = config.get("agents")
    if isinstance(table, Mapping):
        return table
    return config


def _command_of(name: str, entry: Any) -> tuple[tuple[str, ...], dict[str, str], str | None]:
    if hasattr(entry, "command"):  # a ledger.run.config.AgentDef
        return tuple(entry.command), dict(entry.env), getattr(entry, "version", None)
    if not isinstance(entry, Mapping):
        raise UsageError(f"[agents.{name}] must be a table with a command")
    command = entry.get("command")
    if isinstance(command, str):
        try:
            argv = tuple(shlex.split(command))
        except ValueError as exc:
            raise UsageError(f"[agents.{name}] command: {exc}") from None
    elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
        argv = tuple(command)
    else:
        raise UsageError(f"[agents.{name}] needs command = \"PROGRAM ARG...\" (a string or a list)")
    if not argv:
        raise UsageError(f"[agents.{name}] has an empty command")
    env = entry.get("env") or {}
    version = entry.get("version")
    return argv, {str(k): str(v) for k, v in env.items()}, version if isinstance(version, str) else None


def _endpoints_of(name: str, entry: Any) -> tuple[str, ...]:
    """``[agents.NAME] endpoints``, checked (an AgentDef or its plain table form)."""
    values = entry.get("endpoints") if isinstance(entry, Mapping) else getattr(entry, "endpoints", ())
    return _presets.check_endpoints(values if values is not None else (), f"[agents.{name}]")


PRESET_KEYS = frozenset({"preset", "model", "base_url", "api_key_env", "env", "program"})


def preset_settings(name: str, entry: Any) -> dict[str, Any] | None:
    """``[agents.NAME]`` as settings for a CLI preset (``preset = "codex"``, or a table named
    after a preset with no ``command``): ``{preset, model, base_url, api_key_env, env,
    program}``; None when the entry is something else (a command, the HTTP agent)."""
    if hasattr(entry, "settings") and getattr(entry, "kind", None) == "preset":
        entry = entry.settings
    if not isinstance(entry, Mapping) or "command" in entry or entry.get("kind") not in (None, "cli"):
        return None
    preset = entry.get("preset", name if name in _presets.PRESETS else None)
    if preset is None:
        return None
    if preset not in _presets.PRESETS:
        raise UsageError(f"[agents.{name}] preset must be one of {', '.join(PRESET_ORDER)}, "
                         f"got {preset!r}")
    unknown = sorted(set(entry) - PRESET_KEYS - {"kind"})
    if unknown:
        raise UsageError(f"[agents.{name}]: unknown key(s) {unknown} for a CLI preset; known: "
                         f"{sorted(PRESET_KEYS)}")
    out: dict[str, Any] = {"preset": preset}
    for key in ("model", "base_url", "api_key_env", "program"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise UsageError(f"[agents.{name}] {key} must be a non-empty string")
        out[key] = value.strip() if isinstance(value, str) else None
    if out["base_url"]:
        _presets.api_base(out["base_url"], "openai")  # a URL, or a UsageError naming it
    if out["api_key_env"] and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", out["api_key_env"]):
        raise UsageError(f"[agents.{name}] api_key_env must name an environment variable")
    env = entry.get("env") or {}
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in env.items()):
        raise UsageError(f"[agents.{name}] env must be a table of strings")
    out["env"] = dict(env)
    return out


def _preset_agent(spec: str, name: str, settings: Mapping[str, Any],
                  model: str | None = None) -> CliAgent:
    preset = _presets.PRESETS[settings["preset"]]
    model = model or settings.get("model")
    return CliAgent(name=safe_name(name), spec=spec, preset=preset, model=model,
                    program=settings.get("program"), extra_env=dict(settings.get("env") or {}),
                    base_url=settings.get("base_url"), api_key_env=settings.get("api_key_env"))


def _table_kind(entry: Any) -> str:
    kind = entry.get("kind") if isinstance(entry, Mapping) else getattr(entry, "kind", None)
    return kind if isinstance(kind, str) else "cmd"


def resolve_agent(spec: str, *, config: Mapping[str, Any] | None = None) -> Agent:
    """The agent a spec string names (see the module docstring); UsageError if it names none."""
    spec = spec.strip()
    if not spec:
        raise UsageError("empty agent spec")
    table = _agents_table(config)
    if spec in table and _table_kind(table[spec]) == "http":
        from ledger.agents.http import http_agent_from_table

        entry = table[spec]
        return http_agent_from_table(spec, entry if isinstance(entry, Mapping) else entry.settings)
    settings = preset_settings(spec, table[spec]) if spec in table else None
    if settings is not None:
        return _preset_agent(spec, spec, settings)
    if spec in table:
        argv, env, version = _command_of(spec, table[spec])
        return CmdAgent(name=safe_name(spec), spec=spec, command=_absolute_program(argv),
                        extra_env=env, version_text=version,
                        declared_endpoints=_endpoints_of(spec, table[spec]))
    if spec in BUILTINS:
        return BuiltinAgent(name=spec, spec=spec, builtin=spec)
    if spec.startswith("replay:"):
        run = spec[len("replay:"):].strip()
        if not run:
            raise UsageError("replay needs a run id: replay:RUN")
        return BuiltinAgent(name=safe_name(f"replay-{run}"), spec=spec, builtin="replay", run_ref=run)
    if spec.startswith("http:"):
        from ledger.agents.http import parse_http_spec

        return parse_http_spec(spec)
    if spec.startswith("cmd:"):
        try:
            argv = tuple(shlex.split(spec[len("cmd:"):]))
        except ValueError as exc:
            raise UsageError(f"cannot split {spec!r}: {exc}") from None
        if not argv:
            raise UsageError("cmd: needs a program, e.g. cmd:./my-agent --prompt-file {prompt_file}")
        return CmdAgent(name=_cmd_name(argv), spec=spec, command=_absolute_program(argv))
    preset_name, _, model_text = spec.partition(":")
    preset = _presets.PRESETS.get(preset_name)
    if preset is not None:
        model = model_text.strip() or None
        own = preset_settings(preset.name, table[preset.name]) if preset.name in table else None
        name = preset.name if model is None else f"{preset.name}-{model}"
        return _preset_agent(spec, name, own or {"preset": preset.name}, model)
    known = [*BUILTINS, "replay:RUN", *PRESET_ORDER, "cmd:PROGRAM ...", "http:MODEL@BASE_URL",
             *sorted(table)]
    raise UsageError(f"unknown agent {spec!r}; known: {', '.join(known)}")


def detect_cli_agents() -> list[str]:
    """Preset names whose program is on PATH, in preference order."""
    found = []
    for name in PRESET_ORDER:
        preset = _presets.PRESETS[name]
        if any(shutil.which(p) for p in preset.detect):
            found.append(name)
    return found


def default_agent_spec() -> tuple[str, str]:
    """``(spec, one-line reason)`` for a run that names no agent."""
    found = detect_cli_agents()
    if found:
        preset = _presets.PRESETS[found[0]]
        path = next(shutil.which(p) for p in preset.detect if shutil.which(p))
        return found[0], f"using {found[0]} found on PATH ({path})"
    return "demo", "no agent CLI on PATH; using the built-in demo agent"


def check_available(agents: list[Agent]) -> dict[str, str]:
    """``{spec: reason}`` for each agent that cannot run here (empty when all can)."""
    out = {}
    for agent in agents:
        ok, reason = agent.available()
        if not ok:
            out[agent.spec] = reason
    return out


__all__ = [
    "BUILTINS", "PRESET_ORDER", "BuiltinAgent", "CliAgent", "CmdAgent", "base_env",
    "check_available", "default_agent_spec", "detect_cli_agents", "env_secrets", "harness_version",
    "program_version", "resolve_agent", "substitute",
]
