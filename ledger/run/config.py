"""``ledger.toml``: named agents and default run options.

The file sits next to the ledger directory (``LedgerHome.config_path``)::

    [run]                       # defaults for `ledger run`; flags on the command line win
    tiers = ["smoke"]
    agents = ["claude"]
    parallel = 2
    repeat = 1
    timeout = 600               # seconds; overrides every task's time budget
    trace = "auto"              # auto | strace | none
    sandbox = "auto"            # auto or a sandbox backend (ledger.sandbox.registry)
    executor = "local"          # local | ray (pip install 'eval-ledger[ray]')
    ray_address = "auto"        # with executor = "ray": an existing cluster (default: a private one)

    [limits]                    # every attempt's resource limits (docs/agents.md); a task's
    processes = 512             # own `limits:` wins over these
    memory = "4G"               # sizes: bytes, or a string with K/M/G (powers of 1024)
    cpu_s = 3600
    file_size = "1G"
    open_files = 4096
    disk = "4G"                 # allocated under the attempt's worktree, home and scratch
    disk_files = 200000

    [agents.codex]              # settings for a CLI preset (a table named after it, or
    base_url = "http://127.0.0.1:8000/v1"   # preset = "codex" under any name): its endpoint,
    api_key_env = "MY_KEY"      # the variable holding its key, model, env, program

    [agents.mybot]              # `--agent mybot` then means this command
    command = "mybot --prompt-file {prompt_file}"     # a string (shell words) or a list
    env = { MYBOT_MODE = "batch" }                   # optional extra environment
    endpoints = ["api.mybot.example"]                # its model API: host[:port], 443 if none
    config = ["~/.mybot/config.toml"]                # copied into the sandbox's fresh home

    [agents.local-qwen]         # the built-in HTTP agent (docs/agents.md)
    kind = "http"
    model = "qwen2.5-coder"
    base_url = "http://127.0.0.1:8000/v1"
    api_key_env = "MY_KEY"      # the variable holding the key (default OPENAI_API_KEY)

A missing file means "no configuration"; anything else that is wrong is a ``MalformedInput``
naming the file and the key.
"""

from __future__ import annotations

import math
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.agents.strace import TRACE_MODES
from ledger.argv import CommandError, split_command
from ledger.errors import MalformedInput
from ledger.sandbox.registry import modes as sandbox_modes  # auto and every registered backend

_RUN_KEYS = {"tiers", "tasks", "agents", "parallel", "repeat", "timeout", "trace", "sandbox",
             "executor",
             "ray_address"}
EXECUTORS = ("local", "ray")
_AGENT_KEYS = {"command", "env", "version", "endpoints", "config"}


@dataclass(frozen=True)
class AgentDef:
    """An agent named in ``[agents.NAME]``: a command template like ``cmd:`` takes."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    version: str | None = None
    endpoints: tuple[str, ...] = ()  # model API endpoints the agent may reach
    kind: str = "cmd"  # "cmd" | "preset" (settings for a CLI preset) | "http" (the HTTP agent)
    settings: Mapping[str, Any] = field(default_factory=dict)  # kind preset/http: the table
    config: tuple[str, ...] = ()  # files of the real home copied into the sandbox's fresh home

    def spec(self) -> str:
        """The equivalent generic ``cmd:`` spec string."""
        return "cmd:" + shlex.join(self.command)


@dataclass(frozen=True)
class RunDefaults:
    tiers: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    parallel: int | None = None
    repeat: int | None = None
    timeout: float | None = None
    trace: str | None = None
    sandbox: str | None = None
    executor: str | None = None
    ray_address: str | None = None


@dataclass(frozen=True)
class LedgerConfig:
    path: Path | None = None
    run: RunDefaults = field(default_factory=RunDefaults)
    agents: Mapping[str, AgentDef] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)  # [limits]: overrides of the defaults

    def agent_table(self) -> dict[str, dict[str, Any]]:
        """Plain, picklable form of the named agents (sent to workers with each attempt)."""
        return {
            name: dict(a.settings) if a.kind in ("preset", "http") else
            {"command": list(a.command), "env": dict(a.env), "version": a.version,
             "endpoints": list(a.endpoints)}
            for name, a in self.agents.items()
        }

    def agent_config(self) -> dict[str, list[str]]:
        """``[agents.NAME] config``: the files each named agent wants in its fresh home."""
        return {name: list(a.config) for name, a in self.agents.items() if a.config}

    def with_agent_base_url(self, url: str) -> LedgerConfig:
        """``--agent-base-url``: every CLI preset pointed at ``url`` (a ``[agents.PRESET]``
        table keeps its other settings; a named command agent is left alone)."""
        from dataclasses import replace

        from ledger.agents import preset_settings
        from ledger.agents.presets import PRESETS

        agents = dict(self.agents)
        for name in PRESETS:
            current = agents.get(name)
            if current is not None and current.kind != "preset":
                continue
            settings = dict(current.settings) if current is not None else {"preset": name}
            settings["base_url"] = url
            agents[name] = AgentDef(name=name, command=(), kind="preset",
                                    settings=preset_settings(name, settings) or settings)
        return replace(self, agents=agents)



def _refuse_unknown(what: str, raw: Mapping[str, Any], known: set[str] | frozenset[str]) -> None:
    """``MalformedInput`` naming the keys of ``raw`` not in ``known``, each with the closest known
    key when there is one (as task.md typos get), and the known ones."""
    unknown = sorted(set(raw) - set(known))
    if not unknown:
        return
    import difflib

    named = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        named.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise MalformedInput(f"{what} {', '.join(named)}; known: {sorted(known)}")

def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise MalformedInput(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MalformedInput(f"{where}: expected a positive integer, got {value!r}")
    return value


def _parse_run(raw: Any, where: str) -> RunDefaults:
    if not isinstance(raw, dict):
        raise MalformedInput(f"{where}: [run] must be a table")
    _refuse_unknown(f"{where}: unknown [run] key(s)", raw, _RUN_KEYS)
    timeout = raw.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise MalformedInput(f"{where}: [run] timeout must be a number of seconds")
        timeout = float(timeout)
        if not math.isfinite(timeout) or timeout <= 0:
            raise MalformedInput(f"{where}: [run] timeout must be positive")
    trace = raw.get("trace")
    if trace is not None and trace not in TRACE_MODES:
        raise MalformedInput(f"{where}: [run] trace must be one of {', '.join(TRACE_MODES)}")
    sandbox = raw.get("sandbox")
    if sandbox is not None and sandbox not in sandbox_modes():
        raise MalformedInput(f"{where}: [run] sandbox must be one of {', '.join(sandbox_modes())}")
    executor = raw.get("executor")
    if executor is not None and executor not in EXECUTORS:
        raise MalformedInput(f"{where}: [run] executor must be one of {', '.join(EXECUTORS)}")
    ray_address = raw.get("ray_address")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address):
        raise MalformedInput(f"{where}: [run] ray_address must be a non-empty string")
    return RunDefaults(
        tiers=_strings(raw["tiers"], f"{where}: [run] tiers") if "tiers" in raw else (),
        tasks=_strings(raw["tasks"], f"{where}: [run] tasks") if "tasks" in raw else (),
        agents=_strings(raw["agents"], f"{where}: [run] agents") if "agents" in raw else (),
        parallel=_positive_int(raw["parallel"], f"{where}: [run] parallel") if "parallel" in raw else None,
        repeat=_positive_int(raw["repeat"], f"{where}: [run] repeat") if "repeat" in raw else None,
        timeout=timeout,
        trace=trace,
        sandbox=sandbox,
        executor=executor,
        ray_address=ray_address,
    )


def _parse_agent(name: str, raw: Any, where: str) -> AgentDef:
    at = f"{where}: [agents.{name}]"
    if not isinstance(raw, dict):
        raise MalformedInput(f"{at} must be a table")
    if not name or ":" in name or any(c.isspace() for c in name):
        raise MalformedInput(f"{at}: an agent name has no spaces or ':'")
    from ledger.agents import preset_settings
    from ledger.errors import UsageError

    config = raw.get("config", [])
    if not isinstance(config, list) or not all(
            isinstance(c, str) and (c.startswith("~/") or c.startswith("/")) for c in config):
        raise MalformedInput(f"{at}: config must be a list of paths (~/... or absolute)")
    raw = {k: v for k, v in raw.items() if k != "config"}
    kind = raw.get("kind", "cmd")
    if kind == "http":
        from ledger.agents.http import http_agent_from_table

        try:
            http_agent_from_table(name, raw, where)
        except UsageError as exc:
            raise MalformedInput(str(exc)) from None
        return AgentDef(name=name, command=(), kind="http", settings=dict(raw))
    try:
        preset = preset_settings(name, raw)
    except UsageError as exc:
        raise MalformedInput(f"{where}: {exc}") from None
    if preset is not None:  # base_url / api_key_env / model / env for a CLI preset
        return AgentDef(name=name, command=(), kind="preset", settings=preset,
                        config=tuple(config))
    if kind != "cmd":
        raise MalformedInput(f"{at}: kind must be \"cmd\" (a command), \"cli\" (a preset) or "
                             f"\"http\" (the built-in HTTP agent), got {kind!r}")
    _refuse_unknown(f"{at}: unknown key(s)", raw, _AGENT_KEYS | {"kind"})
    try:
        argv = split_command(raw.get("command"))
    except CommandError as exc:
        raise MalformedInput(f"{at}: {exc}") from None
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise MalformedInput(f"{at}: env must be a table of strings")
    version = raw.get("version")
    if version is not None and not isinstance(version, str):
        raise MalformedInput(f"{at}: version must be a string")
    from ledger.agents.presets import check_endpoints
    from ledger.errors import UsageError

    try:
        endpoints = check_endpoints(raw.get("endpoints", []), at)
    except UsageError as exc:
        raise MalformedInput(str(exc)) from None
    return AgentDef(name=name, command=argv, env=dict(env), version=version, endpoints=endpoints,
                    config=tuple(config))


def parse_config(text: str, where: str = "ledger.toml") -> LedgerConfig:
    """Parse the text of a ``ledger.toml``."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedInput(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:
        raise MalformedInput(f"{where}: invalid TOML: nested too deeply") from None
    # [publish] is the disclosure policy of `ledger publish` (ledger.publish.writer.make_policy)
    _refuse_unknown(f"{where}: unknown table(s)", raw, {"run", "agents", "publish", "limits"})
    run = _parse_run(raw["run"], where) if "run" in raw else RunDefaults()
    agents_raw = raw.get("agents", {})
    if not isinstance(agents_raw, dict):
        raise MalformedInput(f"{where}: [agents] must be a table of tables")
    agents = {name: _parse_agent(name, spec, where) for name, spec in agents_raw.items()}
    from ledger.limits import parse_limits

    limits = parse_limits(raw["limits"], f"{where}: [limits]") if "limits" in raw else {}
    return LedgerConfig(path=Path(where), run=run, agents=agents, limits=limits)


def load_config(path: Path) -> LedgerConfig:
    """Load ``ledger.toml`` at ``path``; an absent file is the empty configuration."""
    path = Path(path)
    if not path.is_file():
        return LedgerConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MalformedInput(f"{path}: cannot read: {exc}") from None
    return parse_config(text, str(path))
