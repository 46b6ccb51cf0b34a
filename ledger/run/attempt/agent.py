"""The agent step: its context, command line, box (``Sandbox.agent_box`` of the run's backend,
with its proxy), trace mode and scope worked out ahead (``prepare_agent``), then
``agent.started``, the run in the box, ``agent.finished``.

``agent.started`` reports the folders the attempt used (worktree, home, scratch), what the agent
may read besides system paths (interpreter, harness, its own program files) and its model API
endpoints; the coordinator's attestation scan takes its scope from there."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.agents.contracts import AttemptContext
from ledger.run.attempt.endpoints import RESOLVE_TIMEOUT_S, agent_endpoints, resolve_endpoints
from ledger.run.attempt.events import Redact, limit_hits, sandbox_failed_data
from ledger.run.attempt.prepare import Attempt, attempt_limits, hidden_for, prepare_grading
from ledger.run.background import Background
from ledger.run.workspace import Workspace
from ledger.tasks.model import Task
from ledger.textbound import bound_text

if TYPE_CHECKING:
    from ledger.sandbox.port import Box

TEXT_LIMIT = 64 * 1024  # bytes of captured text per entry
DEMO_STEPS_NAME = ".ledger-demo-steps.json"  # in the attempt's private home


def prepare_ahead(att: Attempt) -> tuple[Prepared, tuple[Workspace, Box]]:
    """The agent's run and the grading tree and box, both worked out ahead."""
    prep = prepare_agent(att)
    try:
        return prep, prepare_grading(att)
    except BaseException:
        prep.discard()
        raise


def _agent_box(att: Attempt, invocation: Any, endpoints: Sequence[Mapping[str, Any]]) -> Box:
    """The agent's box of the run's backend (``ledger.sandbox.port``).

    With a network allowlist (the task's, the agent's declared endpoints) a backend that
    confines serves the attempt with its journaling proxy on a unix socket bound into the box,
    the agent behind the in-box forwarder (``ledger.sandbox.net``); without one the box has no
    network. The agent's configuration files (``[agents.NAME] config``) are copied into the
    box's fresh home by a backend that gives it one."""
    from ledger.run.attestor import endpoint_allowlist
    from ledger.sandbox.net import loopback_ports
    from ledger.sandbox.port import AgentRequest

    task, agent, ws = att.task, att.agent, att.ws
    profile = agent.profile()
    extra: list[str] = []
    hidden = hidden_for(task, att.settings)
    if profile.sees_solution:  # the oracle reads the solution: DIRTY by design, and shown to it
        root = _resolved(task.root)
        extra.append(root)
        hidden = [h for h in hidden if not _under(root, h) and not _under(h, root)]
    return att.sandbox.agent_box(AgentRequest(
        worktree=ws.worktree, home=ws.home, scratch=ws.scratch, argv=tuple(invocation.argv),
        path_env=invocation.env.get("PATH", os.defpath), hidden=tuple(hidden),
        harness_code=profile.runs_harness_code, extra_readable=tuple(extra),
        config=tuple(att.settings.agent_config.get(agent.name, ())),
        allowlist=tuple([*task.network_allowlist, *endpoint_allowlist(list(endpoints))]),
        loopback_ports=tuple(loopback_ports(endpoints)), net_dir=ws.root / "net"))


def _agent_extra(att: Attempt) -> dict[str, Any]:
    """What a built-in agent needs besides the context (never given to other agents)."""
    task, agent, ws = att.task, att.agent, att.ws
    extra: dict[str, Any] = dict(att.settings.agent_extra)
    profile = agent.profile()
    if "budgets" in profile.inputs:  # the HTTP agent stops at the token and cost budgets
        from ledger.agents.costs import builtin_pricing, find_price

        extra["max_tokens"] = int(task.max_tokens)
        extra["max_cost_usd"] = float(task.max_cost_usd)
        found = find_price(profile.model, att.settings.pricing or builtin_pricing())
        if found is not None:
            extra["price_per_mtok"] = [found[1].input_per_mtok, found[1].output_per_mtok]
    if "task_root" in profile.inputs:
        extra["task_root"] = str(task.root)  # the oracle reads the solution: DIRTY by design
    if "demo_steps" in profile.inputs:
        # The steps are public demonstration material, handed to the demo agent as its own
        # config: in its private home (readable by the scan policy, never content-captured),
        # not in scratch, where a traced read would journal them as inflow resembling the fix.
        steps = ws.home / DEMO_STEPS_NAME
        steps.write_text(json.dumps(list(task.demo)), encoding="utf-8")
        extra["demo_steps"] = list(task.demo)
        extra["demo_steps_file"] = str(steps)
    return extra


def _resolved(path: Path | str) -> str:
    return os.path.realpath(path)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def harness_readable() -> list[str]:
    """Folders every agent on this node may read: the interpreter installation and the harness
    package (what a regular install keeps under the interpreter prefix anyway)."""
    import ledger

    out: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        out += [p, _resolved(p)]
    out.append(_resolved(Path(ledger.__file__).parent))
    return [p for p in dict.fromkeys(out) if p.startswith("/") and p != "/"]


def agent_readable(argv: Sequence[str], ws: Workspace, task: Task) -> list[str]:
    """The agent's own program: files its command line names (outside the worktree and the task
    folder), and the folder of each unless that folder is an ancestor of the worktree; for a
    program in a virtualenv's ``bin/`` (aider, mini-swe-agent), that whole virtualenv."""
    worktree, task_root = _resolved(ws.worktree), _resolved(task.root)
    out: list[str] = []
    for arg in argv:
        if not arg.startswith("/") or "\0" in arg:
            continue
        try:
            if not os.path.isfile(arg):
                continue
        except (OSError, ValueError):
            continue
        real = _resolved(arg)
        if _under(real, worktree) or _under(real, task_root):
            continue
        out.append(real)
        folder = os.path.dirname(real)
        if folder not in ("", "/") and not _under(worktree, folder):
            out.append(folder)
        venv = os.path.dirname(folder)  # a program in a virtualenv's bin/: that virtualenv
        if os.path.basename(folder) == "bin" and os.path.isfile(os.path.join(venv, "pyvenv.cfg")) \
                and venv not in ("", "/") and not _under(worktree, venv) \
                and not _under(task_root, venv):
            out.append(venv)
    return list(dict.fromkeys(out))


def _observed_invocation(invocation: Any, agent: Any, ws: Workspace) -> Any:
    """The invocation with the attempt's own temporary folder (scratch, writable by the scan
    policy). The built-in agents and the HTTP agent (harness code) also get what the harness gives the task's
    commands: the private home, the harness's Python first on PATH (``python`` in a demo step is
    the one ``python`` in the task means), and no bytecode written outside the worktree."""
    env = dict(invocation.env)
    for name in ("TMPDIR", "TMP", "TEMP"):
        env[name] = str(ws.scratch)
    if agent.profile().runs_harness_code:
        env["HOME"] = str(ws.home)
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable),
                                       env.get("PATH", os.defpath)])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return dataclasses.replace(invocation, env=env)


def streamed(event: tuple[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """A streamed event; text the agent's transcript stream gave is a model turn (role assistant)."""
    kind, data = event
    if kind == "agent.output":
        return kind, {**data, "role": "assistant"}
    return kind, data


def _prompt_fields(prompt: str, redact: Redact) -> dict[str, Any]:
    """The prompt as given to the agent (public task text; redacted and bounded like any text)."""
    text, truncated, total = bound_text(redact(prompt), TEXT_LIMIT)
    out: dict[str, Any] = {"prompt": text}
    if truncated:
        out.update(prompt_truncated=True, prompt_bytes=total)
    return out


@dataclasses.dataclass
class Prepared:
    """The agent's run, worked out before it starts (``prepare_agent``)."""

    ctx: AttemptContext
    invocation: Any
    mode: str
    observed: str
    reason: str
    readable: list[str]
    endpoints: list[dict[str, Any]]
    box: Box

    def discard(self) -> None:
        """Close the box (and its proxy) of a run that will not happen."""
        with contextlib.suppress(Exception):
            self.box.close()


def prepare_agent(att: Attempt) -> Prepared:
    """The agent's context, command line, box (with its proxy), trace mode and scope."""
    from ledger.agents.process import resolve_trace

    plan, task, agent, ws = att.plan, att.task, att.agent, att.ws

    prompt_file = ws.scratch / "prompt.md"
    prompt_file.write_text(task.prompt, encoding="utf-8")
    ctx = AttemptContext(
        attempt_id=plan.attempt_id, task_id=task.id, worktree=ws.worktree,
        prompt_file=prompt_file, prompt=task.prompt, home=ws.home, timeout_s=plan.timeout_s,
        extra=_agent_extra(att),
    )
    invocation = _observed_invocation(agent.invocation(ctx), agent, ws)
    endpoints = resolve_endpoints(
        agent_endpoints(agent), resolver=att.settings.resolver,
        timeout=att.settings.resolve_timeout_s or RESOLVE_TIMEOUT_S)
    box = _agent_box(att, invocation, endpoints)
    try:
        mode, reason = resolve_trace(plan.trace, box)
    except BaseException:
        box.close()
        raise
    observed = mode if mode == "strace" else (
        "transcript" if invocation.parser_factory is not None else "none")
    # Confined, what the box shows may be read: that is the scope; else what the agent declares.
    readable = list(box.readable()) if box.isolated else (
        harness_readable() + agent_readable(invocation.argv, ws, task))
    return Prepared(ctx, invocation, mode, observed, reason, readable, endpoints, box)


def discard(job: Background) -> None:
    """Wait for a preparation the attempt will not run, and close the proxy it started."""
    try:
        prep, _grading = job.result()
    except BaseException:  # the attempt is failing already: its own error is the one reported
        return
    prep.discard()


def run_agent(att: Attempt, prep: Prepared) -> bool:
    """Run the agent; False when its sandbox never started it."""
    try:
        ran = _agent_started_and_run(att, prep)
    finally:
        records = prep.box.close()
    for rec in records.connections:  # every request the proxy saw: allowed or denied, bytes
        att.out.entry("net.connect", rec)
    return ran


def _agent_started_and_run(att: Attempt, prep: Prepared) -> bool:
    from ledger.agents.capture import output_events, redact_secrets
    from ledger.agents.costs import estimate_cost
    from ledger.agents.errors import ReachWatch, classify
    from ledger.agents.process import capture_mode, run_agent_process
    from ledger.agents.strace import strace_filter

    task, agent, ws, out, redact = att.task, att.agent, att.ws, att.out, att.redact
    invocation, profile, box = prep.invocation, agent.profile(), prep.box
    enforcement = box.enforcement(attempt_limits(att.settings, task), label="agent")
    sandbox = box.as_data()
    out.entry("agent.started", {
        "argv": [redact(redact_secrets(a, invocation.secrets)) for a in invocation.argv],
        "cwd": _resolved(ws.worktree),
        "home": _resolved(ws.home),
        "scratch": _resolved(ws.scratch),
        "readable": [redact_secrets(p, invocation.secrets) for p in dict.fromkeys(prep.readable)],
        "endpoints": prep.endpoints,
        "trace": prep.observed,
        "trace_reason": prep.reason,
        **({"trace_filter": strace_filter(), "capture": capture_mode(prep.mode, box)}
           if prep.mode == "strace" else {}),
        **_prompt_fields(task.prompt, redact),
        "version": agent.version(),
        "isolation": "sandbox" if box.isolated else "none",
        "sandbox": sandbox,
        "limits": enforcement.as_data(),
    })
    try:
        outcome = run_agent_process(
            invocation, prep.ctx, trace=prep.mode, capture_filter=redact, evidence=redact.evidence,
            path_hit=lambda path: bool(redact.path_digests([path])),
            on_event=lambda ev: out.entry(*streamed(ev)), box=box,
            watch=ReachWatch() if profile.watch_reach else None,
            limits=enforcement,
        )
    finally:
        enforcement.close()
    failed = outcome.sandbox_failed
    if failed is not None:  # the box never started the agent: the harness's failure
        failed = redact(failed)
        out.entry("sandbox.failed", sandbox_failed_data("agent", failed, box.backend))
    for kind, data in output_events(outcome) if failed is None else []:
        if not (invocation.stdout_is_transcript and data.get("stream") == "stdout"):
            out.entry(kind, data)
    limit_hits(out, "agent", outcome.limit_hits)
    cost, source = estimate_cost(outcome.usage, profile.model or agent.name,
                                 pricing=att.settings.pricing)
    out.entry("agent.finished", {
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "wall_s": round(outcome.wall_s, 6),
        "timed_out": outcome.timed_out,
        "crashed": failed is None and not outcome.timed_out and (
            outcome.signal is not None or outcome.exit_code not in (0, None)),
        "tokens_in": outcome.usage.tokens_in,
        "tokens_out": outcome.usage.tokens_out,
        "cost_usd": cost,
        "cost_source": source,
        "orphans": outcome.orphans,
        "telemetry": outcome.exit_code is not None or outcome.signal is not None,
        "model_calls": outcome.usage.model_calls,
        "agent_error": ({"kind": "sandbox_failed", "detail": f"the sandbox did not start: {failed}"}
                        if failed is not None else classify(profile.uses_model, outcome)),
        "trace_partial": outcome.trace_partial,
        **({"trace_partial_reason": redact(outcome.trace_partial_reason)}
           if outcome.trace_partial_reason else {}),
        "limits_hit": sorted({str(h["which"]) for h in outcome.limit_hits}),
    })
    return failed is None
