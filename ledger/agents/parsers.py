"""Transcript parsers: an agent's stdout, line by line, into activity events and usage.

One class per output format (see /work/shared/AGENT-CLIS.md for the formats and their history).
Every parser ignores lines that are not JSON, unknown ``type`` values and unknown fields; a missing
terminal event only means that ``finish()`` reports what was seen (often nothing). Texts are
returned whole: ``run_agent_process`` bounds, redacts and filters them.

Token conventions (``Usage``): ``tokens_in`` counts every input token the model processed,
cached ones included; ``tokens_out`` every output token, reasoning included. ``cost_usd`` is
set only when the agent itself reported a cost.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from ledger.agents.contracts import Event, Usage


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def as_obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (typed for mypy)."""
    return value if isinstance(value, dict) else {}


def text_of(content: Any) -> str:
    """Text of a tool result ``content``: a string, or a list of ``{type: text, text}`` blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") not in (None, "text"):
                    parts.append(json.dumps(block, ensure_ascii=False, sort_keys=True))
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def output_event(text: str) -> Event:
    return "agent.output", {"stream": "stdout", "text": text}


class JsonLinesParser:
    """Base: decode each line as JSON (objects, or arrays of objects) and dispatch ``handle``."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        self.usage = Usage(model=model)
        self.home = home  # the attempt's private config home (files the CLI leaves there)

    def feed_line(self, line: str) -> list[Event]:
        line = line.strip()
        if not line or line[0] not in "[{":
            return []
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # nested too deeply: not an event either
            return []
        items = obj if isinstance(obj, list) else [obj]
        events: list[Event] = []
        for item in items:
            if isinstance(item, dict):
                events.extend(self.handle(item))
        return events

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        raise NotImplementedError

    def flush(self) -> list[Event]:
        return []

    def finish(self) -> Usage:
        return self.usage


class BuiltinParser(JsonLinesParser):
    """The built-in agents' transcript: ``{"type": "tool.call" | "tool.result" | "agent.output" | "usage", ...}``."""

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        if t == "tool.call":
            return [("tool.call", {"tool": str(obj.get("tool", "")), "input": obj.get("input", {})})]
        if t == "tool.result":
            return [("tool.result", {"tool": str(obj.get("tool", "")),
                                     "output": str(obj.get("output", "")),
                                     "is_error": bool(obj.get("is_error", False))})]
        if t == "agent.output":
            return [output_event(str(obj.get("text", "")))]
        if t == "usage":
            self.usage = Usage(tokens_in=as_int(obj.get("tokens_in")),
                               tokens_out=as_int(obj.get("tokens_out")),
                               cost_usd=float(obj.get("cost_usd") or 0.0),
                               model=obj.get("model") if isinstance(obj.get("model"), str) else None)
        return []


class ClaudeParser(JsonLinesParser):
    """Claude Code ``--output-format stream-json`` (also the single ``json`` object or array)."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        super().__init__(model, home)
        self.tools: dict[str, str] = {}

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        events: list[Event] = []
        if t == "system" and obj.get("subtype") == "init":
            if isinstance(obj.get("model"), str) and self.usage.model is None:
                self.usage.model = obj["model"]
        elif t == "assistant":
            msg = obj.get("message") or {}
            if obj.get("error") or obj.get("is_api_error_message"):
                events.append(output_event(f"[api error: {obj.get('error') or 'unknown'}] "
                                   + text_of(msg.get("content"))))
                return events
            for block in msg.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    events.append(output_event(block["text"]))
                elif block.get("type") == "tool_use":
                    name = str(block.get("name", ""))
                    self.tools[str(block.get("id", ""))] = name
                    events.append(("tool.call", {"tool": name, "input": block.get("input", {})}))
        elif t == "user":
            content = (obj.get("message") or {}).get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    tool = self.tools.get(str(block.get("tool_use_id", "")), "")
                    events.append(("tool.result", {"tool": tool,
                                                   "output": text_of(block.get("content")),
                                                   "is_error": bool(block.get("is_error"))}))
        elif t == "result":
            self._result(obj, events)
        return events

    def _result(self, obj: dict[str, Any], events: list[Event]) -> None:
        model_usage = obj.get("modelUsage")
        if isinstance(model_usage, dict) and model_usage:
            tin = tout = 0
            best: tuple[float, str] | None = None
            for name, mu in model_usage.items():
                if not isinstance(mu, dict):
                    continue
                tin += (as_int(mu.get("inputTokens")) + as_int(mu.get("cacheReadInputTokens"))
                        + as_int(mu.get("cacheCreationInputTokens")))
                tout += as_int(mu.get("outputTokens"))
                weight = float(mu.get("costUSD") or 0) or float(as_int(mu.get("outputTokens")))
                if best is None or weight > best[0]:
                    best = (weight, name)
            self.usage.tokens_in, self.usage.tokens_out = tin, tout
            if best is not None and self.usage.model is None:
                self.usage.model = best[1]
        elif isinstance(obj.get("usage"), dict):
            u = obj["usage"]
            self.usage.tokens_in = (as_int(u.get("input_tokens")) + as_int(u.get("cache_read_input_tokens"))
                                    + as_int(u.get("cache_creation_input_tokens")))
            self.usage.tokens_out = as_int(u.get("output_tokens"))
        for key in ("total_cost_usd", "total_cost", "cost_usd"):
            value = obj.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.usage.cost_usd = float(value)
                break
        if obj.get("is_error") or str(obj.get("subtype", "success")) != "success":
            detail = obj.get("errors") or obj.get("result") or ""
            events.append(output_event(f"[result {obj.get('subtype')}"
                               f" terminal_reason={obj.get('terminal_reason')}] {text_of(detail)}"))


class CodexParser(JsonLinesParser):
    """``codex exec --json`` (thread/turn/item events, codex >= 0.44)."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        super().__init__(model, home)
        self.started: set[str] = set()

    def _call(self, item: dict[str, Any]) -> Event | None:
        it = item.get("type")
        if it == "command_execution":
            return "tool.call", {"tool": "shell", "input": {"command": item.get("command", "")}}
        if it == "file_change":
            return "tool.call", {"tool": "file_change", "input": {"changes": item.get("changes", [])}}
        if it == "mcp_tool_call":
            return "tool.call", {"tool": f"{item.get('server', '')}.{item.get('tool', '')}",
                                 "input": item.get("arguments", {})}
        if it == "web_search":
            return "tool.call", {"tool": "web_search", "input": {"query": item.get("query", "")}}
        return None

    def _result(self, item: dict[str, Any]) -> Event | None:
        it = item.get("type")
        status = item.get("status")
        if it == "command_execution":
            code = item.get("exit_code")
            return "tool.result", {"tool": "shell", "output": str(item.get("aggregated_output") or ""),
                                   "is_error": status in ("failed", "declined")
                                   or (isinstance(code, int) and code != 0)}
        if it == "file_change":
            return "tool.result", {"tool": "file_change", "output": str(status or ""),
                                   "is_error": status == "failed"}
        if it == "mcp_tool_call":
            err = item.get("error")
            result = item.get("result") or {}
            output = (text_of(err.get("message")) if isinstance(err, dict)
                      else text_of(result.get("content") if isinstance(result, dict) else result))
            return "tool.result", {"tool": f"{item.get('server', '')}.{item.get('tool', '')}",
                                   "output": output, "is_error": bool(err) or status == "failed"}
        return None

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        events: list[Event] = []
        item = obj.get("item") if isinstance(obj.get("item"), dict) else None
        if t == "item.started" and item is not None:
            call = self._call(item)
            if call is not None:
                self.started.add(str(item.get("id")))
                events.append(call)
        elif t == "item.completed" and item is not None:
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                events.append(output_event(item["text"]))
            else:
                if str(item.get("id")) not in self.started:
                    call = self._call(item)
                    if call is not None:
                        events.append(call)
                result = self._result(item)
                if result is not None:
                    events.append(result)
        elif t == "turn.completed" and isinstance(obj.get("usage"), dict):
            u = obj["usage"]  # cumulative thread totals: the last one wins
            self.usage.tokens_in = as_int(u.get("input_tokens"))
            self.usage.tokens_out = as_int(u.get("output_tokens"))
        elif t == "turn.failed":
            err = obj.get("error") or {}
            events.append(output_event(f"[turn failed] {err.get('message', '') if isinstance(err, dict) else err}"))
        return events

    def finish(self) -> Usage:
        """``--json`` never names the model: without ``-m`` it comes from the session's rollout
        (``$CODEX_HOME/sessions/**/rollout-*.jsonl``, the last ``turn_context.model``)."""
        if self.usage.model is None and self.home is not None:
            self.usage.model = codex_rollout_model(self.home / ".codex")
        return self.usage


def codex_rollout_model(codex_home: Path, limit: int = 8 << 20) -> str | None:
    """The model of the last turn in codex's newest rollout file under ``codex_home``."""
    try:
        files = sorted((codex_home / "sessions").rglob("rollout-*.jsonl"),
                       key=lambda f: f.stat().st_mtime)
    except OSError:
        return None
    model = None
    for path in files[-1:]:
        try:
            with path.open("rb") as fh:
                data = fh.read(limit)
        except OSError:
            return None
        for raw in data.splitlines():
            if b"turn_context" not in raw:
                continue
            with contextlib.suppress(ValueError):
                obj = json.loads(raw)
                payload = obj.get("payload") if isinstance(obj, dict) else None
                if obj.get("type") == "turn_context" and isinstance(payload, dict) \
                        and isinstance(payload.get("model"), str):
                    model = payload["model"]
    return model


class GeminiParser(JsonLinesParser):
    """``gemini --output-format stream-json`` (assistant text arrives as deltas; joined here)."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        super().__init__(model, home)
        self.tools: dict[str, str] = {}
        self.pending: list[str] = []

    def flush(self) -> list[Event]:
        if not self.pending:
            return []
        text = "".join(self.pending)
        self.pending = []
        return [output_event(text)]

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        if t == "message":
            if obj.get("role") == "assistant" and isinstance(obj.get("content"), str):
                if not obj.get("delta"):
                    events = self.flush()
                    return [*events, output_event(obj["content"])]
                self.pending.append(obj["content"])
            return []
        events = self.flush()
        if t == "init":
            if isinstance(obj.get("model"), str) and self.usage.model is None:
                self.usage.model = obj["model"]
        elif t == "tool_use":
            name = str(obj.get("tool_name", ""))
            self.tools[str(obj.get("tool_id", ""))] = name
            events.append(("tool.call", {"tool": name, "input": obj.get("parameters", {})}))
        elif t == "tool_result":
            err = obj.get("error")
            output = obj.get("output")
            if output is None and isinstance(err, dict):
                output = err.get("message", "")
            events.append(("tool.result", {"tool": self.tools.get(str(obj.get("tool_id", "")), ""),
                                           "output": text_of(output),
                                           "is_error": obj.get("status") == "error"}))
        elif t == "result":
            raw_stats = obj.get("stats")
            stats: dict[str, Any] = raw_stats if isinstance(raw_stats, dict) else {}
            if "input_tokens" in stats or "output_tokens" in stats:
                self.usage.tokens_in = as_int(stats.get("input_tokens"))
                self.usage.tokens_out = as_int(stats.get("output_tokens"))
            models = stats.get("models")
            if isinstance(models, dict) and len(models) == 1 and self.usage.model in (None, "auto"):
                self.usage.model = next(iter(models))
            elif isinstance(models, dict) and len(models) > 1:  # a router model answered too
                self.usage.by_model = {
                    str(name): (as_int(m.get("input_tokens")), as_int(m.get("output_tokens")))
                    for name, m in models.items() if isinstance(m, dict)}
            if obj.get("status") == "error":
                err = obj.get("error")
                events.append(output_event(f"[result error] {text_of(err.get('message') if isinstance(err, dict) else err)}"))
        return events


def _cursor_tool(call: dict[str, Any]) -> tuple[str, Any, Any]:
    """(tool name, args, result) of a cursor ``tool_call`` payload."""
    for key, value in call.items():
        if not isinstance(value, dict):
            continue
        if key == "function":
            args: Any = value.get("arguments", {})
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    args = json.loads(args)
            return str(value.get("name", "function")), args, value.get("result")
        name = key[: -len("ToolCall")] if key.endswith("ToolCall") else key
        return name, value.get("args", {}), value.get("result")
    return "", {}, None


class CursorParser(JsonLinesParser):
    """Cursor ``agent -p --output-format stream-json``."""

    def __init__(self, model: str | None = None, home: Path | None = None) -> None:
        super().__init__(model, home)
        self.started: set[str] = set()

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        events: list[Event] = []
        if t == "system" and obj.get("subtype") == "init":
            if isinstance(obj.get("model"), str) and self.usage.model is None:
                self.usage.model = obj["model"]
        elif t == "assistant":
            content = (obj.get("message") or {}).get("content")
            text = text_of(content) if isinstance(content, list | str) else ""
            if text:
                events.append(output_event(text))
        elif t == "tool_call" and isinstance(obj.get("tool_call"), dict):
            name, args, result = _cursor_tool(obj["tool_call"])
            call_id = str(obj.get("call_id", ""))
            if obj.get("subtype") == "started":
                self.started.add(call_id)
                events.append(("tool.call", {"tool": name, "input": args}))
            elif obj.get("subtype") == "completed":
                if call_id not in self.started:
                    events.append(("tool.call", {"tool": name, "input": args}))
                is_error = isinstance(result, dict) and "success" not in result
                payload = result
                if isinstance(result, dict):
                    payload = next((result[k] for k in ("success", "failure", "error", "rejected")
                                    if k in result), result)
                if isinstance(payload, dict) and isinstance(payload.get("content"), str):
                    output = payload["content"]
                elif isinstance(payload, dict) and isinstance(payload.get("stdout"), str):
                    output = payload["stdout"] + str(payload.get("stderr") or "")
                else:
                    output = text_of(payload)
                events.append(("tool.result", {"tool": name, "output": output,
                                               "is_error": bool(is_error)}))
        elif t == "result":
            u = obj.get("usage")
            if isinstance(u, dict):
                self.usage.tokens_in = (as_int(u.get("inputTokens")) + as_int(u.get("cacheReadTokens"))
                                        + as_int(u.get("cacheWriteTokens")))
                self.usage.tokens_out = as_int(u.get("outputTokens"))
            if obj.get("is_error"):
                events.append(output_event(f"[result error] {text_of(obj.get('result'))}"))
        return events


class OpencodeParser(JsonLinesParser):
    """``opencode run --format json`` (1.18): ``tool_use`` parts (tool, ``state.input``,
    ``state.output``, ``state.status``), ``text`` parts, ``step_finish`` with each step's
    ``tokens`` {input, output, reasoning, cache{read, write}} and ``cost``, ``error`` events."""

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        part = as_obj(obj.get("part"))
        events: list[Event] = []
        if t == "tool_use":
            state = as_obj(part.get("state"))
            tool = str(part.get("tool", ""))
            events.append(("tool.call", {"tool": tool, "input": state.get("input", {})}))
            if state.get("status") in ("completed", "error"):
                output = state.get("output") if state.get("status") == "completed" else state.get("error")
                events.append(("tool.result", {"tool": tool, "output": text_of(output),
                                               "is_error": state.get("status") == "error"}))
        elif t == "text" and isinstance(part.get("text"), str):
            events.append(output_event(part["text"]))
        elif t == "step_finish":
            tokens = as_obj(part.get("tokens"))
            cache = as_obj(tokens.get("cache"))
            self.usage.tokens_in = (self.usage.tokens_in or 0) + as_int(tokens.get("input")) \
                + as_int(cache.get("read")) + as_int(cache.get("write"))
            self.usage.tokens_out = (self.usage.tokens_out or 0) + as_int(tokens.get("output")) \
                + as_int(tokens.get("reasoning"))
            cost = part.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.usage.cost_usd = (self.usage.cost_usd or 0.0) + float(cost)
        elif t == "error":
            err = obj.get("error")
            data = err.get("data") if isinstance(err, dict) else None
            message = data.get("message") if isinstance(data, dict) else err
            events.append(output_event(f"[error] {text_of(message)}"))
        return events
