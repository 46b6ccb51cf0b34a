"""``agent_error``: an agent that never reached its model, told apart from one that tried and failed.

Kinds (``agent.finished`` ``agent_error.kind``):

    unreachable     the model endpoint did not answer (connection refused, DNS, reset, timeout)
    auth_rejected   the endpoint refused the key (401/403, "invalid API key", ...)
    model_error     the endpoint answered only with errors (5xx/429 after retries, malformed)
    no_model_call   the agent failed and no model call was observed at all
    sandbox_failed  the harness's sandbox never started the agent (``sandbox.failed``): a harness
                    failure, for every agent kind, never the agent's crash

Only agents whose profile says they use a model are judged (``AgentProfile.uses_model``: the CLI
presets and the HTTP agent); built-ins and ``cmd:`` programs never get an ``agent_error``. An agent made *progress* when a model call was answered
(``model_calls`` > 0, tokens reported, or a tool call in its transcript); such an attempt never
has an ``agent_error``, whatever happened later.

The HTTP agent says it itself (its transcript's ``agent.error``). For CLI agents the signs are
generic: lines of their output shaped like a connection or an authentication failure, counted
live by ``ReachWatch`` while the agent runs, so that a CLI retrying a dead endpoint is stopped
early instead of running out its time budget: ``UNREACHABLE_LINES`` such lines (or
``AUTH_LINES``) before any progress, the last at least ``WINDOW_S`` seconds after the first. The
window lets a CLI get over a failure it recovers from by itself (codex fails to open a WebSocket
a few times within seconds, then falls back to HTTP).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from ledger.agents.contracts import Event, ProcessOutcome

KINDS = ("unreachable", "auth_rejected", "model_error", "no_model_call", "sandbox_failed")
UNREACHABLE_LINES = 3
AUTH_LINES = 2
WINDOW_S = 20.0
DETAIL_LIMIT = 300

_AUTH = re.compile(
    r"\b40[13]\b.{0,80}(unauthori[sz]ed|forbidden|api[ _-]?key|authenticat|credential)"
    r"|(unauthori[sz]ed|forbidden|authenticat\w*).{0,80}\b40[13]\b"
    r"|invalid[ _-]?(x-)?api[ _-]?key|incorrect api key|api key not valid|authentication[_ ](error|failed)"
    r"|not able to authenticate|invalid authentication|missing (an )?api key|no api key",
    re.IGNORECASE)
_UNREACHABLE = re.compile(
    r"connection refused|connection error|failed to connect|error sending request"
    r"|could not connect|couldn't connect|unable to connect|name or service not known"
    r"|getaddrinfo|network is unreachable|connection reset|reconnecting",
    re.IGNORECASE)
_ERRNO = re.compile(r"\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ECONNRESET|ENETUNREACH|EHOSTUNREACH)\b")
_PROGRESS_KINDS = frozenset({"tool.call", "tool.result"})


def line_sign(text: str) -> str | None:
    """``auth_rejected`` / ``unreachable`` when a line of output looks like one, else None."""
    if _AUTH.search(text):
        return "auth_rejected"
    if _UNREACHABLE.search(text) or _ERRNO.search(text):
        return "unreachable"
    return None


def made_progress(event: Event) -> bool:
    kind, data = event
    if kind in _PROGRESS_KINDS:
        return True
    return kind == "model.response" and data.get("status") == 200


class ReachWatch:
    """Fed every output line and transcript event while the agent runs; ``verdict`` is set (and
    the agent should be stopped) once it is clear that the agent cannot reach its model."""

    def __init__(self, unreachable_lines: int = UNREACHABLE_LINES, auth_lines: int = AUTH_LINES,
                 window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = {"unreachable": unreachable_lines, "auth_rejected": auth_lines}
        self.counts = {"unreachable": 0, "auth_rejected": 0}
        self.window_s = window_s
        self.clock = clock
        self.first: dict[str, str] = {}
        self.first_at: dict[str, float] = {}
        self.progress = False
        self.verdict: dict[str, str] | None = None

    def event(self, event: Event) -> None:
        if made_progress(event):
            self.progress = True

    def line(self, text: str) -> bool:
        """Count one line of output; True when the agent should be stopped now."""
        if self.progress or self.verdict is not None:
            return False
        sign = line_sign(text)
        if sign is None:
            return False
        now = self.clock()
        self.counts[sign] += 1
        self.first.setdefault(sign, text.strip()[:DETAIL_LIMIT])
        self.first_at.setdefault(sign, now)
        if self.counts[sign] >= self.limits[sign] and now - self.first_at[sign] >= self.window_s:
            self.verdict = {"kind": sign, "detail": (
                f"stopped early: {self.counts[sign]} lines like {self.first[sign]!r} in "
                f"{now - self.first_at[sign]:.0f} s before any model answer")}
            return True
        return False


def classify(uses_model: bool, outcome: ProcessOutcome,
             events: Iterable[Event] = ()) -> dict[str, Any] | None:
    """The attempt's ``agent_error`` (``{kind, detail}``), or None when the agent reached a model,
    uses none (``AgentProfile.uses_model``), or nothing says otherwise. ``outcome`` texts are
    already redacted."""
    if not uses_model:
        return None
    usage = outcome.usage
    events = list(events) or list(outcome.events)
    if (usage.model_calls or 0) > 0 or (usage.tokens_in or 0) > 0 or (usage.tokens_out or 0) > 0 \
            or any(made_progress(ev) for ev in events):
        return None
    if usage.agent_error:
        return {"kind": str(usage.agent_error.get("kind")),
                "detail": str(usage.agent_error.get("detail", ""))[:DETAIL_LIMIT]}
    if outcome.agent_error:
        return dict(outcome.agent_error)
    failed = outcome.timed_out or outcome.signal is not None or outcome.exit_code != 0
    # the transcript's own words first (short and readable), then stderr, then raw stdout
    texts = [*(str(d.get("text", "")) for k, d in events if k == "agent.output"),
             outcome.stderr_text, outcome.stdout_text]
    for sign in ("auth_rejected", "unreachable"):
        for text in texts:
            for line in text.splitlines():
                if line_sign(line) == sign:
                    return {"kind": sign, "detail": line.strip()[:DETAIL_LIMIT]}
    if failed:
        how = ("timed out" if outcome.timed_out else f"signal {outcome.signal}"
               if outcome.signal is not None else f"exit {outcome.exit_code}")
        return {"kind": "no_model_call", "detail": f"{how} without any model call observed"}
    return None


__all__ = ["AUTH_LINES", "KINDS", "UNREACHABLE_LINES", "WINDOW_S", "ReachWatch", "classify",
           "line_sign", "made_progress"]
