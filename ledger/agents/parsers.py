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
import re
from pathlib import Path
from typing import Any

from ledger.agents.contracts import Event, Usage


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (typed for mypy)."""
    return value if isinstance(value, dict) else {}


def _text_of(content: Any) -> str:
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


def _out(text: str) -> Event:
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
            return [_out(str(obj.get("text", "")))]
        if t == "usage":
            self.usage = Usage(tokens_in=_int(obj.get("tokens_in")),
                               tokens_out=_int(obj.get("tokens_out")),
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
                events.append(_out(f"[api error: {obj.get('error') or 'unknown'}] "
                                   + _text_of(msg.get("content"))))
                return events
            for block in msg.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    events.append(_out(block["text"]))
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
                                                   "output": _text_of(block.get("content")),
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
                tin += (_int(mu.get("inputTokens")) + _int(mu.get("cacheReadInputTokens"))
                        + _int(mu.get("cacheCreationInputTokens")))
                tout += _int(mu.get("outputTokens"))
                weight = float(mu.get("costUSD") or 0) or float(_int(mu.get("outputTokens")))
                if best is None or weight > best[0]:
                    best = (weight, name)
            self.usage.tokens_in, self.usage.tokens_out = tin, tout
            if best is not None and self.usage.model is None:
                self.usage.model = best[1]
        elif isinstance(obj.get("usage"), dict):
            u = obj["usage"]
            self.usage.tokens_in = (_int(u.get("input_tokens")) + _int(u.get("cache_read_input_tokens"))
                                    + _int(u.get("cache_creation_input_tokens")))
            self.usage.tokens_out = _int(u.get("output_tokens"))
        for key in ("total_cost_usd", "total_cost", "cost_usd"):
            value = obj.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.usage.cost_usd = float(value)
                break
        if obj.get("is_error") or str(obj.get("subtype", "success")) != "success":
            detail = obj.get("errors") or obj.get("result") or ""
            events.append(_out(f"[result {obj.get('subtype')}"
                               f" terminal_reason={obj.get('terminal_reason')}] {_text_of(detail)}"))


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
            output = (_text_of(err.get("message")) if isinstance(err, dict)
                      else _text_of(result.get("content") if isinstance(result, dict) else result))
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
                events.append(_out(item["text"]))
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
            self.usage.tokens_in = _int(u.get("input_tokens"))
            self.usage.tokens_out = _int(u.get("output_tokens"))
        elif t == "turn.failed":
            err = obj.get("error") or {}
            events.append(_out(f"[turn failed] {err.get('message', '') if isinstance(err, dict) else err}"))
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
        return [_out(text)]

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        if t == "message":
            if obj.get("role") == "assistant" and isinstance(obj.get("content"), str):
                if not obj.get("delta"):
                    events = self.flush()
                    return [*events, _out(obj["content"])]
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
                                           "output": _text_of(output),
                                           "is_error": obj.get("status") == "error"}))
        elif t == "result":
            raw_stats = obj.get("stats")
            stats: dict[str, Any] = raw_stats if isinstance(raw_stats, dict) else {}
            if "input_tokens" in stats or "output_tokens" in stats:
                self.usage.tokens_in = _int(stats.get("input_tokens"))
                self.usage.tokens_out = _int(stats.get("output_tokens"))
            models = stats.get("models")
            if isinstance(models, dict) and len(models) == 1 and self.usage.model in (None, "auto"):
                self.usage.model = next(iter(models))
            elif isinstance(models, dict) and len(models) > 1:  # a router model answered too
                self.usage.by_model = {
                    str(name): (_int(m.get("input_tokens")), _int(m.get("output_tokens")))
                    for name, m in models.items() if isinstance(m, dict)}
            if obj.get("status") == "error":
                err = obj.get("error")
                events.append(_out(f"[result error] {_text_of(err.get('message') if isinstance(err, dict) else err)}"))
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
            text = _text_of(content) if isinstance(content, list | str) else ""
            if text:
                events.append(_out(text))
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
                    output = _text_of(payload)
                events.append(("tool.result", {"tool": name, "output": output,
                                               "is_error": bool(is_error)}))
        elif t == "result":
            u = obj.get("usage")
            if isinstance(u, dict):
                self.usage.tokens_in = (_int(u.get("inputTokens")) + _int(u.get("cacheReadTokens"))
                                        + _int(u.get("cacheWriteTokens")))
                self.usage.tokens_out = _int(u.get("outputTokens"))
            if obj.get("is_error"):
                events.append(_out(f"[result error] {_text_of(obj.get('result'))}"))
        return events


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
            tin += _int(props.get("prompt_tokens"))
            tout += _int(props.get("completion_tokens"))
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
            role, extra = msg.get("role"), _obj(msg.get("extra"))
            if role == "assistant":
                if isinstance(msg.get("content"), str) and msg["content"].strip():
                    events.append(_out(msg["content"]))
                for call in msg.get("tool_calls") or []:
                    fn = call.get("function") if isinstance(call, dict) else None
                    if isinstance(fn, dict):
                        with contextlib.suppress(ValueError, TypeError):
                            args = json.loads(fn.get("arguments") or "{}")
                            events.append(("tool.call", {"tool": str(fn.get("name", "")),
                                                         "input": args}))
                response = _obj(extra.get("response"))
                usage = response.get("usage")
                if isinstance(usage, dict):
                    seen = True
                    tin += _int(usage.get("prompt_tokens"))
                    tout += _int(usage.get("completion_tokens"))
                if isinstance(response.get("model"), str):
                    self.usage.model = response["model"]
            elif role == "tool":
                code = extra.get("returncode")
                events.append(("tool.result", {"tool": "bash", "output": _text_of(msg.get("content")),
                                               "is_error": isinstance(code, int) and code != 0}))
        info = _obj(data.get("info"))
        if info.get("exit_status"):
            events.append(_out(f"[exit_status {info['exit_status']}]"))
        stats = _obj(info.get("model_stats"))
        cost = stats.get("instance_cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost > 0:
            self.usage.cost_usd = float(cost)
        if seen:
            self.usage.tokens_in, self.usage.tokens_out = tin, tout
        return events

    def finish(self) -> Usage:
        self.flush()
        return self.usage


class OpencodeParser(JsonLinesParser):
    """``opencode run --format json`` (1.18): ``tool_use`` parts (tool, ``state.input``,
    ``state.output``, ``state.status``), ``text`` parts, ``step_finish`` with each step's
    ``tokens`` {input, output, reasoning, cache{read, write}} and ``cost``, ``error`` events."""

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        part = _obj(obj.get("part"))
        events: list[Event] = []
        if t == "tool_use":
            state = _obj(part.get("state"))
            tool = str(part.get("tool", ""))
            events.append(("tool.call", {"tool": tool, "input": state.get("input", {})}))
            if state.get("status") in ("completed", "error"):
                output = state.get("output") if state.get("status") == "completed" else state.get("error")
                events.append(("tool.result", {"tool": tool, "output": _text_of(output),
                                               "is_error": state.get("status") == "error"}))
        elif t == "text" and isinstance(part.get("text"), str):
            events.append(_out(part["text"]))
        elif t == "step_finish":
            tokens = _obj(part.get("tokens"))
            cache = _obj(tokens.get("cache"))
            self.usage.tokens_in = (self.usage.tokens_in or 0) + _int(tokens.get("input")) \
                + _int(cache.get("read")) + _int(cache.get("write"))
            self.usage.tokens_out = (self.usage.tokens_out or 0) + _int(tokens.get("output")) \
                + _int(tokens.get("reasoning"))
            cost = part.get("cost")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.usage.cost_usd = (self.usage.cost_usd or 0.0) + float(cost)
        elif t == "error":
            err = obj.get("error")
            data = err.get("data") if isinstance(err, dict) else None
            message = data.get("message") if isinstance(data, dict) else err
            events.append(_out(f"[error] {_text_of(message)}"))
        return events
