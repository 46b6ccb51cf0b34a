"""The Agent port: what a spec string names, what the agent declares it is, how it is run.

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
``Invocation.secrets`` so that they never reach the journal. Each agent declares what it is in
a frozen ``AgentProfile`` (``Agent.profile()``: runs harness code, sees the solution, uses a
model, the model API hosts it may reach, its transcript parser, what the run hands it); the run
reads the profile and never probes the agent. docs/agents.md describes each agent.

    contracts.py   the port's types (Agent, AgentProfile, AttemptContext, Invocation, ...)
    registry.py    resolve_agent: names and schemes, register_scheme / register_table_kind
    kinds.py       the built-ins, the CLI presets (presets.py, parsers.py), cmd:
    http.py        the built-in HTTP agent (http_loop.py runs in the sandbox)
    process.py     run_agent_process: the bounded, traced, sandboxed agent process
    trace.py       strace capture;  errors.py  agents that never reached their model
    costs.py       the price table;  env.py  the agent environment and its secrets
"""

from ledger.agents.contracts import Agent, AgentProfile
from ledger.agents.env import base_env, env_secrets, harness_version, program_version, substitute
from ledger.agents.kinds import BUILTINS, BuiltinAgent, CliAgent, CmdAgent
from ledger.agents.registry import (
    PRESET_ORDER,
    check_available,
    default_agent_spec,
    detect_cli_agents,
    preset_settings,
    register_scheme,
    register_table_kind,
    resolve_agent,
)

__all__ = [
    "BUILTINS", "PRESET_ORDER", "Agent", "AgentProfile", "BuiltinAgent", "CliAgent", "CmdAgent",
    "base_env", "check_available", "default_agent_spec", "detect_cli_agents", "env_secrets",
    "harness_version", "preset_settings", "program_version", "register_scheme",
    "register_table_kind", "resolve_agent", "substitute",
]
