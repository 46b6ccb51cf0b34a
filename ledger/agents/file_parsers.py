"""Transcript parsers of the CLIs whose record is not JSON lines on stdout: aider's plain text
(and the analytics log the preset has it write in the attempt's private home) and
mini-swe-agent's trajectory file, read once it has exited. The conventions are ``parsers.py``'s.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from ledger.agents.contracts import Event, Usage
from ledger.agents.parsers import as_int, as_obj, output_event, text_of

_AIDER_COUNT = re.compile(r"([\d.]+)([kKmM]?) (sent|cache write|cache hit|received)")
_AIDER_COST = re.compile(r"Cost: \$([\d.]+) message, \$([\d.]+) session")
_AIDER_MODEL = re.compile(r"^Main model: (\S+)")
_AIDER_EDIT = re.compile(r"^Applied edit to (.+?)\s*$")


def aider_count(number: str, suffix: str) -> int:
    """``12k`` -> 12000, ``1.2k`` -> 1200, ``345`` -> 345, ``1.5M`` -> 1500000."""
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[suffix.lower()]
    return round(float(number) * scale)


class AiderParser:
    """Aider's plain text: ``Tokens: ... sent, ... received. Cost: $x message, $y session.``

    Token counts are summed over LLM calls (``sent`` as input, ``received`` as output; aider rounds
    them for display); the cost is the last cumulative ``session`` figure, reported by aider.
    """

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        self.usage = Usage(model=model)
        self.home = home  # the private home, where the preset puts aider's analytics log

    def feed_line(self, line: str) -> list[Event]:
        line = line.strip().lstrip("> ").strip()
        events: list[Event] = []
        if line.startswith("Tokens:"):
            for number, suffix, what in _AIDER_COUNT.findall(line):
                n = aider_count(number, suffix)
                if what == "sent":
                    self.usage.tokens_in = (self.usage.tokens_in or 0) + n
                elif what == "received":
                    self.usage.tokens_out = (self.usage.tokens_out or 0) + n
        model = _AIDER_MODEL.match(line)
        if model and self.usage.model is None:
            self.usage.model = model.group(1)
        cost = _AIDER_COST.search(line)
        if cost:
            self.usage.cost_usd = float(cost.group(2))
        edit = _AIDER_EDIT.match(line)
        if edit:
            events.append(("tool.call", {"tool": "edit", "input": {"path": edit.group(1)}}))
        return events

    def flush(self) -> list[Event]:
        return []

    def finish(self) -> Usage:
        """Exact counts from aider's analytics log when the preset asked for one (its
        ``message_send`` events carry the provider's usage); else the rounded text above."""
        if self.home is not None:
            exact = aider_analytics_usage(self.home / "aider-analytics.jsonl")
            if exact is not None:
                self.usage.tokens_in, self.usage.tokens_out, cost = exact
                if cost is not None:
                    self.usage.cost_usd = cost
        return self.usage


def aider_analytics_usage(path: Path, limit: int = 8 << 20) -> tuple[int, int, float | None] | None:
    """``(tokens_in, tokens_out, session cost)`` summed over the ``message_send`` events of an
    aider ``--analytics-log`` file; None when it has none."""
    try:
        with path.open("rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    tin = tout = 0
    cost: float | None = None
    seen = False
    for raw in data.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(raw)
            props = obj.get("properties") if isinstance(obj, dict) else None
            if not isinstance(obj, dict) or obj.get("event") != "message_send" \
                    or not isinstance(props, dict):
                continue
            seen = True
            tin += as_int(props.get("prompt_tokens"))
            tout += as_int(props.get("completion_tokens"))
            total = props.get("total_cost")
            if isinstance(total, int | float) and not isinstance(total, bool):
                cost = float(total)
    return (tin, tout, cost) if seen else None


MINI_TRAJECTORY = "mini-trajectory.json"  # in the private home (``mini -o``)


class MiniSweAgentParser:
    """mini-swe-agent prints rich text; what it did is in its trajectory file (format
    ``mini-swe-agent-1.1``), read when it has exited: ``bash`` tool calls and their results, the
    exit status, exact tokens (each answer's ``extra.response.usage``), the model that answered
    (``extra.response.model``) and the cost it reported (``info.model_stats.instance_cost``)."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        self.usage = Usage(model=model)
        self.home = home
        self.loaded = False

    def feed_line(self, line: str) -> list[Event]:
        return []

    def flush(self) -> list[Event]:
        if self.loaded or self.home is None:
            return []
        self.loaded = True
        try:
            data = json.loads((self.home / MINI_TRAJECTORY).read_bytes()[: 64 << 20])
        except (OSError, ValueError):
            return []
        return self._read(data) if isinstance(data, dict) else []

    def _read(self, data: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        tin = tout = 0
        seen = False
        for msg in data.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            role, extra = msg.get("role"), as_obj(msg.get("extra"))
            if role == "assistant":
                if isinstance(msg.get("content"), str) and msg["content"].strip():
                    events.append(output_event(msg["content"]))
                for call in msg.get("tool_calls") or []:
                    fn = call.get("function") if isinstance(call, dict) else None
                    if isinstance(fn, dict):
                        with contextlib.suppress(ValueError, TypeError):
                            args = json.loads(fn.get("arguments") or "{}")
                            events.append(("tool.call", {"tool": str(fn.get("name", "")),
                                                         "input": args}))
                response = as_obj(extra.get("response"))
                usage = response.get("usage")
                if isinstance(usage, dict):
                    seen = True
                    tin += as_int(usage.get("prompt_tokens"))
                    tout += as_int(usage.get("completion_tokens"))
                if isinstance(response.get("model"), str):
                    self.usage.model = response["model"]
            elif role == "tool":
                code = extra.get("returncode")
                events.append(("tool.result", {"tool": "bash", "output": text_of(msg.get("content")),
                                               "is_error": isinstance(code, int) and code != 0}))
        info = as_obj(data.get("info"))
        if info.get("exit_status"):
            events.append(output_event(f"[exit_status {info['exit_status']}]"))
        stats = as_obj(info.get("model_stats"))
        cost = stats.get("instance_cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
            self.usage.cost_usd = float(cost)
        if seen:
            self.usage.tokens_in, self.usage.tokens_out = tin, tout
        return events

    def finish(self) -> Usage:
        self.flush()
        return self.usage


__all__ = ["MINI_TRAJECTORY", "AiderParser", "MiniSweAgentParser", "aider_analytics_usage", "aider_count"]
