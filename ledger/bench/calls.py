"""One agent (or judge) call of a bench: the agent run once on a prompt in an empty private
folder, its answer and usage as a ``CallResult`` ready to be journaled.

    call_agent(agent, name, round, prompt, run_id=..., timeout_s=..., pricing=...) -> CallResult
    kill_run_processes(run_id)   on Ctrl-C: every process carrying the run's attempt marker
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluators.responses import code_files, extract_answer, render_files
from ledger.agents.contracts import AttemptContext, Usage
from ledger.bench.confine import Confinement, agent_box, confinement
from ledger.errors import LedgerError
from ledger.session import attempt_id
from ledger.textbound import bound_text

TEXT_LIMIT = 200_000  # characters of an answer kept in the journal (head + tail)
PROMPT_LIMIT = 200_000
STDOUT_LIMIT = 64 * 1024
OUTPUT_LIMIT = 8 * 1024 * 1024  # bytes of agent stdout read (the answer is in it)
ACTIVITY_LIMIT = 200  # transcript events kept per call
COLLECT_MAX_FILES = 50
COLLECT_MAX_BYTES = 200_000
MAX_ARG_BYTES = 120_000  # a prompt travels as one argv element (Linux limit 128 KiB)


@dataclass
class CallResult:
    """One agent (or judge) call, ready to be journaled."""

    agent: str
    round: str
    status: str  # "ok" | "timeout" | "failed"
    error: str | None
    exit_code: int | None
    signal: int | None
    wall_s: float
    text: str
    stdout: str
    stderr: str
    tokens_in: int | None
    tokens_out: int | None
    tokens_source: str  # "reported" | "estimated"
    cost_usd: float | None
    cost_source: str
    model: str | None
    format: str
    files_collected: list[str]
    orphans: int
    events: list[tuple[str, dict[str, Any]]]
    prompt_sha256: str
    prompt_chars: int

    def record(self) -> dict[str, Any]:
        text, cut, total = bound_text(self.text, TEXT_LIMIT, tail=0.1, unit="chars")
        return {
            "agent": self.agent, "round": self.round, "status": self.status, "error": self.error,
            "exit_code": self.exit_code, "signal": self.signal, "wall_s": round(self.wall_s, 6),
            "timed_out": self.status == "timeout", "text": text, "text_truncated": cut,
            "text_chars": total, "stderr": bound_text(self.stderr, 4000, tail=1.0, unit="chars")[0],
            "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "tokens_source": self.tokens_source, "cost_usd": self.cost_usd,
            "cost_source": self.cost_source, "model": self.model, "format": self.format,
            "files_collected": self.files_collected, "orphans": self.orphans,
            "prompt_sha256": self.prompt_sha256, "prompt_chars": self.prompt_chars,
            "events": len(self.events),
        }


def estimate_tokens(text: str) -> int:
    """The existing tool's estimate: words x 1.3."""
    return round(len(text.split()) * 1.3)


def _collect_files(worktree: Path, answer: str) -> dict[str, str]:
    """Text files the agent wrote in its folder (when it wrote files instead of answering)."""
    named = set(code_files(answer))
    found: dict[str, str] = {}
    for path in sorted(worktree.rglob("*")):
        rel = path.relative_to(worktree)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if len(found) >= COLLECT_MAX_FILES:
            break
        name = rel.as_posix()
        if name in named or path.stat().st_size > COLLECT_MAX_BYTES:
            continue
        try:
            found[name] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return found


def call_agent(agent: Any, name: str, round_name: str, prompt: str, *, run_id: str,
               timeout_s: float, pricing: Mapping[str, Any] | None,
               confine: Confinement | None = None, kind: str = "cli") -> CallResult:
    """Run one agent once on ``prompt`` in an empty private folder, in its box of ``confine``
    (``ledger.bench.confine``; resolved here when not given); never raises for the agent."""
    from ledger.agents.capture import redact_secrets
    from ledger.agents.costs import estimate_cost
    from ledger.agents.process import run_agent_process

    confine = confine or confinement()
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    worktree, home, scratch, net_dir = tmp / "work", tmp / "home", tmp / "scratch", tmp / "net"
    for folder in (worktree, home, scratch, net_dir):
        folder.mkdir()
    prompt_file = tmp / "prompt.md"
    prompt_file.write_text(prompt, encoding="utf-8")
    ctx = AttemptContext(attempt_id=attempt_id(run_id, f"bench-{round_name}", name, 1, 1),
                         task_id=f"bench-{round_name}", worktree=worktree, prompt_file=prompt_file,
                         prompt=prompt, home=home, timeout_s=timeout_s)

    def failed(error: str, wall: float = 0.0) -> CallResult:
        return CallResult(name, round_name, "failed", error, None, None, wall, "", "", "", None,
                          None, "estimated", None, "none", None, "none", [], 0, [], digest,
                          len(prompt))

    start = time.monotonic()
    try:
        if len(prompt.encode("utf-8")) > MAX_ARG_BYTES:
            return failed(f"the prompt has {len(prompt.encode('utf-8'))} bytes; agent CLIs take "
                          f"at most about {MAX_ARG_BYTES} in one argument")
        try:
            inv = agent.invocation(ctx)
            with agent_box(confine, agent, inv, kind=kind, worktree=worktree, home=home,
                           scratch=scratch, net_dir=net_dir) as box:
                outcome = run_agent_process(inv, ctx, trace="none", output_limit=OUTPUT_LIMIT,
                                            box=box)
        except LedgerError as exc:
            return failed(str(exc), time.monotonic() - start)
        except OSError as exc:
            return failed(f"cannot start the agent: {exc}", time.monotonic() - start)
        answer = extract_answer(outcome.stdout_text)
        text = answer.text
        collected = {name: redact_secrets(body, inv.secrets)
                     for name, body in _collect_files(worktree, text).items()}
        if collected:
            text = (text.rstrip() + "\n\n" + render_files(collected)).strip()
        if outcome.sandbox_failed:
            status, error = "failed", f"the {confine.name} sandbox did not start: " \
                f"{outcome.sandbox_failed}"
        elif outcome.timed_out:
            status, error = "timeout", f"no answer within {timeout_s:g}s"
        elif outcome.signal is not None:
            status, error = "failed", f"killed by signal {outcome.signal}"
        elif outcome.exit_code not in (0, None):
            status, error = "failed", f"exit code {outcome.exit_code}" + (
                f": {answer.error}" if answer.error else "")
        elif answer.error:
            status, error = "failed", answer.error
        elif not text.strip():
            status, error = "failed", "the agent gave an empty answer"
        else:
            status, error = "ok", None
        usage = outcome.usage
        tokens_source = "reported"
        tin, tout = usage.tokens_in, usage.tokens_out
        if tin is None and tout is None:
            tin, tout, tokens_source = estimate_tokens(prompt), estimate_tokens(text), "estimated"
        cost, cost_source = estimate_cost(
            Usage(tokens_in=tin, tokens_out=tout, cost_usd=usage.cost_usd, model=usage.model),
            agent.profile().model or name.split("-")[0], pricing=pricing)
        return CallResult(
            name, round_name, status, error, outcome.exit_code, outcome.signal, outcome.wall_s,
            text, bound_text(outcome.stdout_text, STDOUT_LIMIT, tail=0.1, unit="chars")[0], outcome.stderr_text,
            tin, tout, tokens_source, cost, cost_source, usage.model, answer.format,
            sorted(collected), outcome.orphans, list(outcome.events)[:ACTIVITY_LIMIT], digest,
            len(prompt))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kill_run_processes(run_id: str) -> int:
    """SIGKILL every process that carries this run's attempt marker (on Ctrl-C)."""
    needle = f"LEDGER_ATTEMPT={run_id}/".encode()
    killed = 0
    for pid_name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid_name.isdigit() or int(pid_name) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid_name}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if any(var.startswith(needle) for var in env.split(b"\0")):
            with contextlib.suppress(OSError):
                os.kill(int(pid_name), signal.SIGKILL)
                killed += 1
    return killed


__all__ = ["CallResult", "call_agent", "estimate_tokens", "kill_run_processes"]
