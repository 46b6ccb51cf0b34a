"""The agents the harness knows how to run, each declaring its ``AgentProfile``: the built-ins
(``noop``, ``oracle``, ``demo``, ``replay:RUN``), the CLI presets and any program (``cmd:``).
The HTTP agent is ``http.py``. Which spec names which agent is ``registry.py``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ledger.agents import presets as _presets
from ledger.agents.contracts import AgentProfile, AttemptContext, Invocation
from ledger.agents.env import base_env, env_secrets, harness_version, program_version, substitute
from ledger.agents.parsers import BuiltinParser
from ledger.errors import UsageError

BUILTINS = ("noop", "oracle", "demo")
# what each built-in reads from AttemptContext.extra besides the context
_BUILTIN_INPUTS = {"oracle": frozenset({"task_root"}), "demo": frozenset({"demo_steps"}),
                   "replay": frozenset({"replay_files"})}


@dataclass
class BuiltinAgent:
    """``noop``, ``oracle``, ``demo``, ``replay:RUN``: ``python -m ledger.agents.builtin``."""

    name: str
    spec: str
    builtin: str
    run_ref: str | None = None

    def profile(self) -> AgentProfile:
        return AgentProfile(kind="builtin", runs_harness_code=True,
                            sees_solution=self.builtin == "oracle", transcript=BuiltinParser.__name__,
                            inputs=_BUILTIN_INPUTS.get(self.builtin, frozenset()),
                            sandbox_argv=(sys.executable,),  # the built-ins use no model
                            replays=self.run_ref if self.builtin == "replay" else None)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str | None:
        return harness_version()

    def _json_file(self, ctx: AttemptContext, key: str, fname: str) -> str:
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

    def profile(self) -> AgentProfile:
        # no sandbox is tried ahead for a CLI: its program is looked up when an attempt starts
        return AgentProfile(kind="cli", uses_model=True, watch_reach=True, model=self.model,
                            endpoints=self.endpoints(), transcript=self.preset.parser.__name__)

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


@dataclass
class CmdAgent:
    """``cmd:PROGRAM ARG...`` or a named ``[agents.NAME] command``: any program."""

    name: str
    spec: str
    command: tuple[str, ...]
    extra_env: Mapping[str, str] = field(default_factory=dict)
    version_text: str | None = None
    declared_endpoints: tuple[str, ...] = ()  # [agents.NAME] endpoints

    def profile(self) -> AgentProfile:
        program = self.program()
        argv = (program or self.command[0], *self.command[1:])
        return AgentProfile(kind="cmd", endpoints=self.declared_endpoints, sandbox_argv=argv)

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


__all__ = ["BUILTINS", "BuiltinAgent", "CliAgent", "CmdAgent"]
