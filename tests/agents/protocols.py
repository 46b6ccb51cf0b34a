"""The wire formats of the real agent CLIs, for the scripted model server (scripted_model.py).

Captured from the CLIs themselves (a server that logged every request, 2026-12-01):

* claude 2.1.x: ``POST /v1/messages?beta=true``, ``stream: true`` -> Anthropic Messages SSE
  (``message_start`` with the input usage, content blocks with ``text_delta`` /
  ``input_json_delta``, ``message_delta`` with the stop reason and output usage, ``message_stop``);
* codex 0.169: ``GET /v1/responses`` (a WebSocket upgrade; answered 404, it falls back) then
  ``POST /v1/responses``, ``stream: true`` -> OpenAI Responses SSE (``response.created``,
  ``response.output_item.added|done``, ``response.completed`` with ``usage``);
* gemini 0.61: ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`` (and
  ``:generateContent`` for its routing and helper calls) -> ``GenerateContentResponse`` chunks with
  ``usageMetadata`` and ``modelVersion``;
* aider, opencode, qwen, mini-swe-agent: ``POST /v1/chat/completions``, with or without
  ``stream: true`` -> Chat Completions (streamed as ``chat.completion.chunk`` lines, usage in a
  last chunk with no choices, then ``[DONE]``).

A tool call's arguments may hold ``{worktree}``: it is replaced by the attempt's worktree, found as
the absolute path in the request (every CLI tells its model its working directory) under which
``marker`` exists, so a script can name files the way the CLI's tools want them (absolute paths).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from tests.agents.scripted_model import (
    ChatCompletions,
    Protocol,
    Reply,
    ToolCall,
    Turn,
    json_reply,
)

_ABS_PATH = re.compile(r"/[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)*")


def find_worktree(request: Any, marker: str, avoid: tuple[str, ...] = ()) -> str | None:
    """The absolute folder named in ``request`` that holds ``marker`` (longest first), other
    than the ``avoid`` folders and what lies under them (e.g. a task's solution folder)."""
    text = json.dumps(request) if not isinstance(request, str) else request
    seen: set[str] = {a.rstrip("/") for a in avoid}
    for match in _ABS_PATH.findall(text):
        parts = match.split("/")
        for end in range(len(parts), 1, -1):
            folder = "/".join(parts[:end])
            if folder in seen or any(folder.startswith(a.rstrip("/") + "/") for a in avoid):
                continue
            seen.add(folder)
            if os.path.isfile(os.path.join(folder, marker)):
                return folder
    return None


def _fill(value: Any, worktree: str) -> Any:
    if isinstance(value, str):
        return value.replace("{worktree}", worktree)
    if isinstance(value, dict):
        return {k: _fill(v, worktree) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, worktree) for v in value]
    return value


class Resolving(Protocol):
    """A protocol whose tool arguments may name ``{worktree}`` (see the module docstring)."""

    def __init__(self, marker: str | None = None, avoid: tuple[str, ...] = ()) -> None:
        self.marker = marker
        self.avoid = avoid

    def resolve(self, turn: Turn, request: Any) -> Turn:
        if not self.marker or not any("{worktree}" in json.dumps(c.arguments)
                                      for c in turn.tool_calls):
            return turn
        worktree = find_worktree(request, self.marker, self.avoid)
        if worktree is None:
            raise RuntimeError(f"no folder holding {self.marker} is named in the request")
        calls = tuple(ToolCall(c.name, _fill(c.arguments, worktree), c.id) for c in turn.tool_calls)
        return replace(turn, tool_calls=calls)


def sse(events: list[tuple[str | None, Any]]) -> Reply:
    """An SSE body: ``event: NAME`` (when named) and ``data: JSON`` per event."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append(f"{head}data: {payload}\n\n")
    return Reply(200, "".join(out).encode("utf-8"), "text/event-stream",
                 (("Cache-Control", "no-cache"),))


def _model_of(turn: Turn, request: Any, default: str) -> str:
    named = request.get("model") if isinstance(request, dict) else None
    return turn.model or named or default


# --------------------------------------------------------------------------- Anthropic Messages


class AnthropicMessages(Resolving):
    """``POST .../v1/messages`` (any query), streamed (SSE) or not."""

    name = "anthropic_messages"

    def claims(self, method: str, path: str) -> bool:
        return method == "POST" and urlsplit(path).path.rstrip("/").endswith("/v1/messages")

    def error(self, status: int, message: str, retry_after: float | None = None) -> Reply:
        kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        headers = [("Retry-After", f"{retry_after:g}")] if retry_after is not None else []
        return json_reply(status, {"type": "error", "error": {"type": kind, "message": message}},
                          headers)

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        turn = self.resolve(turn, request)
        model = _model_of(turn, request, "claude-scripted")
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for i, call in enumerate(turn.tool_calls):
            blocks.append({"type": "tool_use", "id": call.id or f"toolu_{index:02d}{i:02d}",
                           "name": call.name, "input": call.arguments})
        stop = turn.finish_reason or ("tool_use" if turn.tool_calls else "end_turn")
        usage_in = {"input_tokens": turn.input_tokens, "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0}
        msg_id = f"msg_scripted_{index}"
        if not (isinstance(request, dict) and request.get("stream")):
            return json_reply(200, {
                "id": msg_id, "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_reason": stop, "stop_sequence": None,
                "usage": {**usage_in, "output_tokens": turn.output_tokens}})
        events: list[tuple[str | None, Any]] = [("message_start", {
            "type": "message_start",
            "message": {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                        "content": [], "stop_reason": None, "stop_sequence": None,
                        "usage": {**usage_in, "output_tokens": 0}}})]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {
                    "type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": block["text"]}}))
            else:
                events.append(("content_block_start", {
                    "type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"],
                                      "input": {}}}))
                events.append(("content_block_delta", {
                    "type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta",
                              "partial_json": json.dumps(block["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": turn.output_tokens}}))
        events.append(("message_stop", {"type": "message_stop"}))
        return sse(events)


# --------------------------------------------------------------------------- OpenAI Responses


class OpenAIResponses(Resolving):
    """``POST .../responses``, streamed (SSE) or not. Tool calls become ``function_call`` items."""

    name = "openai_responses"

    def claims(self, method: str, path: str) -> bool:
        return method == "POST" and urlsplit(path).path.rstrip("/").endswith("/responses")

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        turn = self.resolve(turn, request)
        model = _model_of(turn, request, "gpt-scripted")
        items: list[dict[str, Any]] = []
        if turn.text:
            items.append({"type": "message", "id": f"msg_{index}", "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": turn.text,
                                       "annotations": []}]})
        for i, call in enumerate(turn.tool_calls):
            items.append({"type": "function_call", "id": f"fc_{index}_{i}",
                          "call_id": call.id or f"call_{index}_{i}", "name": call.name,
                          "arguments": json.dumps(call.arguments), "status": "completed"})
        usage = {"input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": turn.output_tokens,
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": turn.input_tokens + turn.output_tokens}
        response = {"id": f"resp_scripted_{index}", "object": "response",
                    "created_at": 1_700_000_000 + index, "status": "completed", "model": model,
                    "output": items, "usage": usage}
        if not (isinstance(request, dict) and request.get("stream")):
            return json_reply(200, response)
        seq = 0

        def ev(kind: str, **data: Any) -> tuple[str, Any]:
            nonlocal seq
            seq += 1
            return kind, {"type": kind, "sequence_number": seq - 1, **data}

        events = [ev("response.created", response={**response, "status": "in_progress",
                                                   "output": [], "usage": None})]
        for i, item in enumerate(items):
            events.append(ev("response.output_item.added", output_index=i,
                             item={**item, "status": "in_progress"}))
            if item["type"] == "message":
                events.append(ev("response.output_text.delta", item_id=item["id"],
                                 output_index=i, content_index=0, delta=turn.text))
                events.append(ev("response.output_text.done", item_id=item["id"],
                                 output_index=i, content_index=0, text=turn.text))
            events.append(ev("response.output_item.done", output_index=i, item=item))
        events.append(ev("response.completed", response=response))
        return sse(list(events))


# --------------------------------------------------------------------------- Gemini


class GeminiGenerate(Resolving):
    """``POST .../models/MODEL:generateContent`` and ``:streamGenerateContent`` (SSE)."""

    name = "gemini_generate"

    def claims(self, method: str, path: str) -> bool:
        p = urlsplit(path).path
        return method == "POST" and (p.endswith(":generateContent")
                                     or p.endswith(":streamGenerateContent"))

    def error(self, status: int, message: str, retry_after: float | None = None) -> Reply:
        state = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
        return json_reply(status, {"error": {"code": status, "message": message, "status": state}})

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        return self.reply_at(turn, index, request, "/models/gemini-scripted:generateContent")

    def reply_at(self, turn: Turn, index: int, request: Any, path: str) -> Reply:
        turn = self.resolve(turn, request)
        found = re.search(r"/models/([^/:]+):", urlsplit(path).path)
        model = turn.model or (found.group(1) if found else "gemini-scripted")
        usage = {"promptTokenCount": turn.input_tokens,
                 "candidatesTokenCount": turn.output_tokens,
                 "totalTokenCount": turn.input_tokens + turn.output_tokens}
        parts: list[dict[str, Any]] = []
        if turn.text:
            parts.append({"text": turn.text})
        for call in turn.tool_calls:
            parts.append({"functionCall": {"name": call.name, "args": call.arguments}})
        finish = turn.finish_reason or "STOP"
        whole = {"candidates": [{"content": {"role": "model", "parts": parts},
                                 "finishReason": finish, "index": 0}],
                 "usageMetadata": usage, "modelVersion": model,
                 "responseId": f"scripted-{index}"}
        if not urlsplit(path).path.endswith(":streamGenerateContent"):
            return json_reply(200, whole)
        return sse([(None, whole)])


# --------------------------------------------------------------------------- Chat Completions


class ChatCompletionsStreaming(ChatCompletions):
    """Chat Completions as scripted_model.py serves it, plus ``stream: true`` (chunks, usage in
    a last chunk with no choices, ``[DONE]``) and ``{worktree}`` in tool arguments."""

    def __init__(self, marker: str | None = None, avoid: tuple[str, ...] = ()) -> None:
        self._resolver = Resolving(marker, avoid)

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        turn = self._resolver.resolve(turn, request)
        if not (isinstance(request, dict) and request.get("stream")):
            return super().reply(turn, index, request)
        model = _model_of(turn, request, "scripted")
        head = {"id": f"chatcmpl-scripted-{index}", "object": "chat.completion.chunk",
                "created": 1_700_000_000 + index, "model": model}
        chunks: list[tuple[str | None, Any]] = [(None, {**head, "choices": [{
            "index": 0, "delta": {"role": "assistant", "content": turn.text or ""},
            "finish_reason": None}]})]
        for i, call in enumerate(turn.tool_calls):
            chunks.append((None, {**head, "choices": [{"index": 0, "delta": {"tool_calls": [{
                "index": i, "id": call.id or f"call_{index}_{i}", "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]},
                "finish_reason": None}]}))
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        chunks.append((None, {**head, "choices": [{"index": 0, "delta": {},
                                                   "finish_reason": finish}]}))
        chunks.append((None, {**head, "choices": [], "usage": {
            "prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens}}))
        chunks.append((None, "[DONE]"))
        return sse(chunks)


def all_protocols(marker: str | None = None, avoid: tuple[str, ...] = ()) -> list[Protocol]:
    """Every wire format above (each claims its own paths)."""
    return [AnthropicMessages(marker, avoid), OpenAIResponses(marker, avoid),
            GeminiGenerate(marker, avoid), ChatCompletionsStreaming(marker, avoid)]
