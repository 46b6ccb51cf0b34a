"""A scripted model server on 127.0.0.1 for tests: no network, no real model, known answers.

    with ScriptedModel([tool_call("bash", {"command": "cat x.py"}), say("done")]) as server:
        server.base_url              # http://127.0.0.1:PORT/v1
        ... run an agent against it ...
        server.requests              # every request it received, in order (method, path, headers, body)

The server answers each model call with the next *turn* of its script. A turn is a plain
dataclass (``Turn``): what the assistant says, the tool calls it makes, the usage numbers it
reports, and optionally a failure to inject instead (an HTTP status with an error body, e.g. 429
or 500, or a 401 for a rejected key), a delay before answering, or a dropped connection. Once the
script is used up, every further call gets ``exhausted`` (by default: a 500 saying so), so a test
that makes one call too many fails loudly instead of hanging.

Protocols. A protocol turns a ``Turn`` into the bytes one wire format expects and says which
request paths it serves. This module ships OpenAI Chat Completions (``POST .../chat/completions``,
non-streaming, ``tools`` with ``function`` calls, ``usage.prompt_tokens`` /
``completion_tokens``). Other protocols (Anthropic Messages, OpenAI Responses, Gemini) plug in
by subclassing ``Protocol`` and passing an instance in ``protocols=``; a request whose path no
protocol claims gets a 404 and is still recorded.

Auth. ``api_key=`` makes the server require ``Authorization: Bearer KEY`` (or ``x-api-key`` /
``x-goog-api-key`` / ``?key=``); a request without it gets a 401 and does not consume a turn.

Time. ``ScriptedRequest.server_s`` is the time the server spent on a request (delay included),
measured from the request line being read to the response written (``received_at`` is when
that was, on ``time.perf_counter``), so a benchmark can subtract the server's own time from what
a client saw.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DEFAULT_USAGE = (100, 20)  # (input tokens, output tokens) of a turn that names none


@dataclass(frozen=True)
class ToolCall:
    """A call the assistant makes: a tool name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None  # None: the server numbers it ``call_<turn>_<index>``


@dataclass(frozen=True)
class Turn:
    """One scripted answer of the model (or a failure injected in its place)."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = DEFAULT_USAGE[0]
    output_tokens: int = DEFAULT_USAGE[1]
    finish_reason: str | None = None  # None: "tool_calls" when there are calls, else "stop"
    status: int = 200  # != 200: answer with this status and ``error`` instead
    error: str = ""
    retry_after: float | None = None  # a Retry-After header (seconds) on an error turn
    delay_s: float = 0.0  # sleep before answering
    drop: bool = False  # close the connection without an answer
    model: str | None = None  # the model the answer names; None: the one the request named
    body: Any = None  # a JSON value sent verbatim (with ``status``) instead of the protocol's answer

    @property
    def failure(self) -> bool:
        return self.status != 200 or self.drop


def say(text: str, *, input_tokens: int = DEFAULT_USAGE[0],
        output_tokens: int = DEFAULT_USAGE[1], **kw: Any) -> Turn:
    """A final answer: text and no tool call."""
    return Turn(text=text, input_tokens=input_tokens, output_tokens=output_tokens, **kw)


def tool_call(name: str, arguments: dict[str, Any], *, text: str | None = None,
              input_tokens: int = DEFAULT_USAGE[0], output_tokens: int = DEFAULT_USAGE[1],
              **kw: Any) -> Turn:
    """A turn that calls one tool."""
    return Turn(text=text, tool_calls=(ToolCall(name, dict(arguments)),),
                input_tokens=input_tokens, output_tokens=output_tokens, **kw)


def fail(status: int, error: str = "", *, retry_after: float | None = None,
         delay_s: float = 0.0) -> Turn:
    """An injected failure: an HTTP error status (429, 500, 401, ...) with an error body."""
    return Turn(status=status, error=error or f"scripted failure {status}",
                retry_after=retry_after, delay_s=delay_s)


def drop() -> Turn:
    """An injected failure: the connection is closed without any answer."""
    return Turn(drop=True)


def script_totals(turns: Iterable[Turn]) -> tuple[int, int]:
    """(input, output) tokens the successful turns of a script report in all."""
    tin = tout = 0
    for t in turns:
        if not t.failure:
            tin += t.input_tokens
            tout += t.output_tokens
    return tin, tout


@dataclass
class ScriptedRequest:
    """One request as the server saw it."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-case names
    body: bytes
    protocol: str | None  # the protocol that answered, None when none claimed the path
    turn: int | None  # index of the script turn used, None when none was consumed
    status: int = 0
    server_s: float = 0.0
    received_at: float = 0.0  # time.perf_counter() when the request line had been read

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass(frozen=True)
class Reply:
    """What a protocol sends back: status, headers, body bytes."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_reply(status: int, obj: Any, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    return Reply(status, json.dumps(obj).encode("utf-8"), "application/json", tuple(headers))


class Protocol:
    """One wire format. Subclasses set ``name``, claim paths and render turns."""

    name = "protocol"

    def claims(self, method: str, path: str) -> bool:
        raise NotImplementedError

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        """The answer for a successful turn (``request`` is the decoded JSON body, or None)."""
        raise NotImplementedError

    def reply_at(self, turn: Turn, index: int, request: Any, path: str) -> Reply:
        """``reply`` for a request to ``path`` (a protocol that needs the path overrides this)."""
        return self.reply(turn, index, request)

    def error(self, status: int, message: str, retry_after: float | None = None) -> Reply:
        """The answer for an injected failure or a rejected key."""
        headers = [("Retry-After", f"{retry_after:g}")] if retry_after is not None else []
        return json_reply(status, {"error": {"message": message, "type": "scripted_error",
                                             "code": status}}, headers)


class ChatCompletions(Protocol):
    """OpenAI Chat Completions, non-streaming: ``POST /v1/chat/completions`` (any prefix)."""

    name = "chat_completions"

    def claims(self, method: str, path: str) -> bool:
        return method == "POST" and urlsplit(path).path.rstrip("/").endswith("/chat/completions")

    def reply(self, turn: Turn, index: int, request: Any) -> Reply:
        model = turn.model or (request.get("model") if isinstance(request, dict) else None) or "scripted"
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": c.id or f"call_{index}_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for i, c in enumerate(turn.tool_calls)
            ]
        finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        return json_reply(200, {
            "id": f"chatcmpl-scripted-{index}",
            "object": "chat.completion",
            "created": 1_700_000_000 + index,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": turn.input_tokens,
                      "completion_tokens": turn.output_tokens,
                      "total_tokens": turn.input_tokens + turn.output_tokens},
        })


def _presented_key(headers: dict[str, str], path: str) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    for name in ("x-api-key", "x-goog-api-key", "api-key"):
        if headers.get(name):
            return headers[name].strip()
    query = parse_qs(urlsplit(path).query)
    return query["key"][0] if query.get("key") else None


class ScriptedModel:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port) answering from a script.

    Use as a context manager, or ``start()`` / ``stop()``. Thread-safe: turns are handed out in
    order under a lock, so concurrent clients each get a distinct turn.
    """

    def __init__(self, script: Iterable[Turn] = (), *,
                 protocols: Sequence[Protocol] | None = None, api_key: str | None = None,
                 exhausted: Turn | None = None, host: str = "127.0.0.1") -> None:
        self.script: list[Turn] = list(script)
        self.protocols: list[Protocol] = list(protocols) if protocols is not None else [ChatCompletions()]
        self.api_key = api_key
        self.exhausted = exhausted or fail(500, "the scripted model has no more turns")
        self.host = host
        self.requests: list[ScriptedRequest] = []
        self._next = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> ScriptedModel:
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer((self.host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the scripted model is not running")
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return self.origin + "/v1"

    # -- script ---------------------------------------------------------------------------

    def add(self, *turns: Turn) -> None:
        with self._lock:
            self.script.extend(turns)

    @property
    def used(self) -> int:
        """How many script turns have been consumed."""
        with self._lock:
            return self._next

    def _take(self) -> tuple[int | None, Turn]:
        with self._lock:
            if self._next < len(self.script):
                index = self._next
                self._next += 1
                return index, self.script[index]
            return None, self.exhausted

    def model_requests(self, protocol: str | None = None) -> list[ScriptedRequest]:
        """Requests that consumed a turn (optionally of one protocol)."""
        return [r for r in self.requests if r.turn is not None
                and (protocol is None or r.protocol == protocol)]

    def _record(self, request: ScriptedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ScriptedModel/1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            pass

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()

        def _handle(self) -> None:
            start = time.perf_counter()
            body = self._body()
            headers = {k.lower(): v for k, v in self.headers.items()}
            proto = next((p for p in model.protocols if p.claims(self.command, self.path)), None)
            rec = ScriptedRequest(self.command, self.path, headers, body,
                                  proto.name if proto else None, None, received_at=start)
            try:
                if proto is None:
                    reply = json_reply(404, {"error": {"message": f"no scripted protocol serves "
                                                                  f"{self.command} {self.path}"}})
                elif model.api_key is not None and _presented_key(headers, self.path) != model.api_key:
                    reply = proto.error(401, "invalid api key")
                else:
                    rec.turn, turn = model._take()
                    if turn.delay_s > 0:
                        time.sleep(turn.delay_s)
                    if turn.drop:
                        rec.status = 0
                        self.close_connection = True
                        return
                    if turn.body is not None:
                        reply = json_reply(turn.status, turn.body)
                    elif turn.status != 200:
                        reply = proto.error(turn.status, turn.error, turn.retry_after)
                    else:
                        try:
                            decoded = json.loads(body) if body else None
                        except ValueError:
                            decoded = None
                        reply = proto.reply_at(turn, rec.turn if rec.turn is not None else -1,
                                               decoded, self.path)
                rec.status = reply.status
                rec.server_s = time.perf_counter() - start
                model._record(rec)  # before the answer leaves: a client never sees it unrecorded
                self._send(reply)
            finally:
                if not any(r is rec for r in model.requests):  # a dropped or failed answer
                    rec.server_s = time.perf_counter() - start
                    model._record(rec)

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            self._handle()

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            self._handle()

    return Handler


__all__ = [
    "DEFAULT_USAGE", "ChatCompletions", "Protocol", "Reply", "ScriptedModel", "ScriptedRequest",
    "ToolCall", "Turn", "drop", "fail", "json_reply", "say", "script_totals", "tool_call",
]
