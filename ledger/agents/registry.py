"""Which agent a spec string names: a registry of names and schemes, tried in a fixed order.

1. ``NAME`` with an ``[agents.NAME]`` table in ledger.toml: a registered table kind
   (``TABLE_KINDS``: ``kind = "http"``, the HTTP agent), else a CLI preset (``preset = ...``, or a
   table named after a preset with no command), else a command.
2. A built-in name (``noop``, ``oracle``, ``demo``).
3. ``SCHEME:REST`` for a registered scheme (``SCHEMES``: ``replay``, ``http``, ``cmd``), then a
   preset's name as its own scheme (``claude``, ``claude:MODEL``).

A new kind of agent plugs in with ``register_scheme`` (a spec form) or ``register_table_kind``
(an ``[agents.NAME] kind = ...`` table); nothing here branches on an agent's class.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ledger.agents import presets as _presets
from ledger.agents.contracts import Agent
from ledger.agents.env import safe_name
from ledger.agents.kinds import BUILTINS, BuiltinAgent, CliAgent, CmdAgent
from ledger.argv import CommandError, split_command
from ledger.errors import UsageError

PRESET_ORDER = _presets.PRESET_ORDER
PRESET_KEYS = frozenset({"preset", "model", "base_url", "api_key_env", "env", "program"})
_INTERPRETERS = {"python", "python3", "bash", "sh", "node", "ruby", "perl", "uv", "uvx", "npx",
                 "env", "deno", "bun"}

# A scheme's resolver: (the whole spec, what follows "SCHEME:", the [agents] table) -> Agent
SchemeResolver = Callable[[str, str, Mapping[str, Any]], Agent]
# An [agents.NAME] table in its one form: the mapping ledger.toml gives (``LedgerConfig.agent_table``
# hands the checked tables to the workers in that form, picklable)
Table = Mapping[str, Any]
# A table kind's resolver: (NAME, its [agents.NAME] table) -> Agent, or None when the table is
# not of this kind after all (a preset table that turns out to be a command)
TableResolver = Callable[[str, Table], "Agent | None"]
SCHEMES: dict[str, tuple[SchemeResolver, str]] = {}  # scheme -> (resolver, its form for help)
TABLE_KINDS: dict[str, TableResolver] = {}


def register_scheme(scheme: str, resolver: SchemeResolver, form: str) -> None:
    """``SCHEME:REST`` specs are resolved by ``resolver``; ``form`` names the spec in errors."""
    if scheme in SCHEMES:
        raise ValueError(f"agent scheme {scheme!r} is registered twice")
    SCHEMES[scheme] = (resolver, form)


def register_table_kind(kind: str, resolver: TableResolver) -> None:
    if kind in TABLE_KINDS:
        raise ValueError(f"agent table kind {kind!r} is registered twice")
    TABLE_KINDS[kind] = resolver


# --------------------------------------------------------------------------- [agents.NAME] tables


def _agents_table(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not config:
        return {}
    table = config.get("agents")
    if isinstance(table, Mapping):
        return table
    return config


def _command_of(name: str, entry: Table) -> tuple[tuple[str, ...], dict[str, str], str | None]:
    command = entry.get("command")
    if command is None:
        raise UsageError(f"[agents.{name}] needs command = \"PROGRAM ARG...\" (a string or a list)")
    try:
        argv = split_command(command)
    except CommandError as exc:
        raise UsageError(f"[agents.{name}]: {exc}") from None
    env = entry.get("env") or {}
    version = entry.get("version")
    return argv, {str(k): str(v) for k, v in env.items()}, version if isinstance(version, str) else None


def _endpoints_of(name: str, entry: Table) -> tuple[str, ...]:
    """``[agents.NAME] endpoints``, checked."""
    values = entry.get("endpoints")
    return _presets.check_endpoints(values if values is not None else (), f"[agents.{name}]")


def _check_preset_values(name: str, entry: Mapping[str, Any], out: dict[str, Any]) -> None:
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


def preset_settings(name: str, entry: Table) -> dict[str, Any] | None:
    """``[agents.NAME]`` as settings for a CLI preset (``preset = "codex"``, or a table named
    after a preset with no ``command``): ``{preset, model, base_url, api_key_env, env,
    program}``; None when the entry is something else (a command, the HTTP agent)."""
    if "command" in entry or entry.get("kind") not in (None, "cli"):
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
    _check_preset_values(name, entry, out)
    return out


def _preset_agent(spec: str, name: str, settings: Mapping[str, Any],
                  model: str | None = None) -> CliAgent:
    preset = _presets.PRESETS[settings["preset"]]
    model = model or settings.get("model")
    return CliAgent(name=safe_name(name), spec=spec, preset=preset, model=model,
                    program=settings.get("program"), extra_env=dict(settings.get("env") or {}),
                    base_url=settings.get("base_url"), api_key_env=settings.get("api_key_env"))


def _table_kind(entry: Table) -> str:
    kind = entry.get("kind")
    return kind if isinstance(kind, str) else "cmd"


def _absolute_program(argv: tuple[str, ...]) -> tuple[str, ...]:
    prog = argv[0]
    if "/" in prog and not os.path.isabs(prog):
        prog = os.path.abspath(prog)
    return (prog, *argv[1:])


def _http_table(name: str, entry: Table) -> Agent:
    from ledger.agents.http import http_agent_from_table

    return http_agent_from_table(name, entry)


def _preset_table(name: str, entry: Table) -> Agent | None:
    settings = preset_settings(name, entry)
    return None if settings is None else _preset_agent(name, name, settings)


def _command_table(name: str, entry: Table) -> Agent:
    argv, env, version = _command_of(name, entry)
    return CmdAgent(name=safe_name(name), spec=name, command=_absolute_program(argv),
                    extra_env=env, version_text=version, declared_endpoints=_endpoints_of(name, entry))


def _from_table(name: str, entry: Any) -> Agent:
    """A table of a registered kind; else a CLI preset's settings; else a command."""
    if not isinstance(entry, Mapping):
        raise UsageError(f"[agents.{name}] must be a table")
    resolver = TABLE_KINDS.get(_table_kind(entry))
    agent = resolver(name, entry) if resolver is not None else None
    return agent or _preset_table(name, entry) or _command_table(name, entry)


# --------------------------------------------------------------------------- schemes


def _replay(spec: str, rest: str, table: Mapping[str, Any]) -> Agent:
    run = rest.strip()
    if not run:
        raise UsageError("replay needs a run id: replay:RUN")
    return BuiltinAgent(name=safe_name(f"replay-{run}"), spec=spec, builtin="replay", run_ref=run)


def _http(spec: str, rest: str, table: Mapping[str, Any]) -> Agent:
    from ledger.agents.http import parse_http_spec

    return parse_http_spec(spec)


def _cmd_name(argv: tuple[str, ...]) -> str:
    words = [w for w in argv if not w.startswith("-")]
    stem = Path(words[0]).name if words else "cmd"
    if Path(stem).stem in _INTERPRETERS or re.fullmatch(r"python3(\.\d+)?", stem):
        for w in words[1:]:
            if "{" not in w:
                stem = Path(w).stem
                break
    return "cmd-" + safe_name(Path(stem).stem if "." in stem else stem)


def _cmd(spec: str, rest: str, table: Mapping[str, Any]) -> Agent:
    if not rest.strip():
        raise UsageError("cmd: needs a program, e.g. cmd:./my-agent --prompt-file {prompt_file}")
    try:
        argv = split_command(rest)
    except CommandError as exc:
        raise UsageError(f"{spec}: {exc}") from None
    return CmdAgent(name=_cmd_name(argv), spec=spec, command=_absolute_program(argv))


def _preset(preset: _presets.Preset) -> SchemeResolver:
    def resolve(spec: str, rest: str, table: Mapping[str, Any]) -> Agent:
        model = rest.strip() or None
        entry = table.get(preset.name)
        own = preset_settings(preset.name, entry) if isinstance(entry, Mapping) else None
        name = preset.name if model is None else f"{preset.name}-{model}"
        return _preset_agent(spec, name, own or {"preset": preset.name}, model)

    return resolve


register_table_kind("http", _http_table)
register_scheme("replay", _replay, "replay:RUN")
for _name in PRESET_ORDER:
    register_scheme(_name, _preset(_presets.PRESETS[_name]), _name)
register_scheme("cmd", _cmd, "cmd:PROGRAM ...")
register_scheme("http", _http, "http:MODEL@BASE_URL")


def resolve_agent(spec: str, *, config: Mapping[str, Any] | None = None) -> Agent:
    """The agent a spec string names (see the module docstring); UsageError if it names none."""
    spec = spec.strip()
    if not spec:
        raise UsageError("empty agent spec")
    table = _agents_table(config)
    if spec in table:
        return _from_table(spec, table[spec])
    if spec in BUILTINS:
        return BuiltinAgent(name=spec, spec=spec, builtin=spec)
    scheme, colon, rest = spec.partition(":")
    found = SCHEMES.get(scheme)
    if found is not None and (colon or scheme in _presets.PRESETS):
        return found[0](spec, rest, table)
    known = [*BUILTINS, *(form for _, form in SCHEMES.values()), *sorted(table)]
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


__all__ = ["PRESET_KEYS", "PRESET_ORDER", "SCHEMES", "TABLE_KINDS", "check_available",
           "default_agent_spec", "detect_cli_agents", "preset_settings", "register_scheme",
           "register_table_kind", "resolve_agent"]
