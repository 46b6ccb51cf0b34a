"""The built-in HTTP agent: a small bash-tool loop over any OpenAI-compatible Chat Completions API.

    python -P -m ledger.agents.http_loop --model M --base-url URL [--api-key-env VAR]
        --prompt-file FILE [--max-steps N] [--max-tokens N] [--deadline-s S]
        [--max-cost-usd X --price-in P --price-out Q] [--command-timeout S]
        [--output-limit CHARS] [--retries N] [--temperature T]

It runs as the agent process of an attempt (working directory: the worktree), so the harness
observes it like any other agent: its process group, its time budget, strace. Each step sends the
whole conversation (``POST {base_url}/chat/completions``, no streaming) with two tools, ``bash``
(one shell command, run with ``bash -c`` in the worktree, in a process group of its own, with a
per-command timeout, without the API key variable in its environment; stdout and stderr together, the middle cut out beyond ``--output-limit``
characters with a note saying how much) and ``submit`` (the work is done). A text-only answer also
ends the loop. The loop stops at ``--max-steps`` model calls, at ``--max-tokens`` tokens used
(input + output, from the usage the server reports), at ``--max-cost-usd`` (those tokens at
``--price-in`` / ``--price-out`` dollars per million), and ``--deadline-s`` seconds after it
started.

HTTP: ``urllib`` (so ``HTTP(S)_PROXY`` and ``NO_PROXY`` are honoured the standard way), the key
from the environment variable ``--api-key-env`` as ``Authorization: Bearer``, never on the command
line. 429, 5xx, a dropped connection or a timeout are retried up to ``--retries`` times with
doubling delays (0.5 s, 1 s, 2 s, ... capped at 8 s, or the server's ``Retry-After`` up to 30 s),
never past the deadline. 401/403 and other 4xx are not retried.

Output: one JSON object per line on stdout (``HttpParser`` in ``ledger.agents.http`` turns
them into journal entries):

* ``model.request``  ``step``, ``url``, ``model``, ``messages`` (the messages the loop added since
  the previous request; the assistant message in between is the previous ``model.response``
  ``message`` with its null fields dropped), ``message_count``, ``tools`` (the tool schemas,
  first step only), ``params``, ``body_sha256`` (SHA-256 of the exact request body: compact
  JSON with sorted keys of ``{model, messages, tools, **params}``);
* ``model.response`` ``step``, ``try``, ``status`` (0: no HTTP answer), ``latency_s``,
  ``message``, ``finish_reason``, ``usage``, ``model``, ``error``, ``retry_in_s``;
* ``tool.call`` / ``tool.result`` for every bash command; ``agent.output`` for notes;
* ``agent.error`` ``kind`` (``unreachable`` | ``auth_rejected`` | ``model_error``), ``detail``,
  when the model was never reached with success;
* ``usage`` last: ``tokens_in``, ``tokens_out``, ``model``, ``model_calls`` (answered calls).

Exit: 0 submitted or stopped answering; 1 a limit was reached or the model failed after some
work; 3 the model was never reached (``agent.error``); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_LIMIT, EXIT_USAGE, EXIT_UNREACHED = 0, 1, 2, 3
DEFAULT_MAX_STEPS = 50
DEFAULT_COMMAND_TIMEOUT_S = 120.0
DEFAULT_OUTPUT_LIMIT = 10_000  # characters of one command's output shown to the model
DEFAULT_RETRIES = 4
BACKOFF_FIRST_S, BACKOFF_CAP_S, RETRY_AFTER_CAP_S = 0.5, 8.0, 30.0
REQUEST_TIMEOUT_S = 300.0
RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
ERROR_BODY_LIMIT = 2000

SYSTEM_PROMPT = """\
You are a software engineer working on a task in a git repository. The current directory is the
repository. You act only through the `bash` tool: each call runs one shell command (bash -c) in
the repository and returns its output (stdout and stderr together, the middle cut out when it is
long). Commands have a time limit; nothing is interactive. Read the code, make the change with
shell commands (e.g. a small python or sed script, or a heredoc), run the tests, and when the task
is done call `submit` with a one-line summary."""

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash",
        "description": "Run one shell command (bash -c) in the repository; returns its output "
                       "and exit code.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to run."}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "submit",
        "description": "Finish: the task is done.",
        "parameters": {"type": "object", "properties": {
            "summary": {"type": "string", "description": "One line: what was changed."}},
            "required": []}}},
]


def emit(event_type: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"type": event_type, **fields}, ensure_ascii=False,
                                separators=(",", ":")) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- bash


def truncate_middle(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with a note between."""
    if len(text) <= limit:
        return text
    keep = max(0, limit // 2)
    cut = len(text) - 2 * keep
    return (text[:keep] + f"\n[... {cut} characters of output truncated ...]\n"
            + text[len(text) - keep:])


def run_bash(command: str, cwd: Path, timeout: float, limit: int,
             env: dict[str, str] | None = None) -> tuple[str, int | None]:
    """Run one command in its own process group; (output shown to the model, exit code or None)."""
    try:
        proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    except OSError as exc:
        return f"cannot run bash: {exc.strerror or exc}", None
    timed_out = False
    try:
        raw, _ = proc.communicate(timeout=max(0.1, timeout))
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        raw, _ = proc.communicate()
    finally:
        with contextlib.suppress(OSError):  # whatever the command left running in its group
            os.killpg(proc.pid, signal.SIGKILL)
    text = truncate_middle(raw.decode("utf-8", "replace"), limit)
    if timed_out:
        return text + f"\n[command timed out after {timeout:g} s and was killed]", None
    return text + ("" if text.endswith("\n") or not text else "\n") + f"[exit code {proc.returncode}]", \
        proc.returncode


# --------------------------------------------------------------------------- HTTP


class Unreached(Exception):
    """The model could not be reached with success (after retries, or not retryable)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _error_text(body: bytes) -> str:
    text = body[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        obj = json.loads(text)
        err = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message: str = err["message"]
            return message
        if isinstance(err, str):
            return err
    return text.strip()


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return min(RETRY_AFTER_CAP_S, max(0.0, float(value))) if value is not None else None
    except (TypeError, ValueError):
        return None


def answer_message(payload: dict[str, Any]) -> dict[str, Any] | None:
    """``choices[0].message`` of a Chat Completions answer, or None when it has none."""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, dict) else None


class Client:
    """POST JSON to ``{base}/chat/completions`` with bounded retries; journals every try."""

    def __init__(self, base_url: str, api_key: str | None, retries: int, deadline: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.retries = retries
        self.deadline = deadline
        self.opener = urllib.request.build_opener()  # ProxyHandler from the environment

    def post(self, step: int, body: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "eval-ledger-http-agent"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        delay = BACKOFF_FIRST_S
        payload: dict[str, Any] | None
        for attempt in range(1, self.retries + 2):
            start = time.monotonic()
            status, payload, error, kind, retry_after = 0, None, None, "unreachable", None
            try:
                req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                timeout = max(1.0, min(REQUEST_TIMEOUT_S, self.deadline - time.monotonic()))
                with self.opener.open(req, timeout=timeout) as resp:
                    status = resp.status
                    raw = resp.read()
                payload = json.loads(raw)
                if not isinstance(payload, dict):
                    raise ValueError("the answer is not a JSON object")
                if answer_message(payload) is None:
                    detail = payload.get("error")
                    raise ValueError("no choices[0].message"
                                     + (f" (error: {str(detail)[:ERROR_BODY_LIMIT]})" if detail else ""))
            except urllib.error.HTTPError as exc:
                status = exc.code
                with contextlib.suppress(Exception):
                    error = f"HTTP {exc.code}: {_error_text(exc.read())}"
                error = error or f"HTTP {exc.code}"
                retry_after = _retry_after(exc.headers)
                kind = "auth_rejected" if exc.code in (401, 403) else "model_error"
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                # no (complete) answer: refused, reset, timed out, cut short, a bad status line
                reason = getattr(exc, "reason", exc)
                error = f"{type(reason).__name__}: {reason}"
            except ValueError as exc:
                kind, error = "model_error", f"malformed answer: {exc}"
            latency = round(time.monotonic() - start, 6)
            retryable = error is not None and kind != "auth_rejected" and (
                status == 0 or status in RETRY_STATUSES)
            wait = None
            if retryable and attempt <= self.retries:
                wait = retry_after if retry_after is not None else delay
                delay = min(BACKOFF_CAP_S, delay * 2)
                if time.monotonic() + wait >= self.deadline:
                    wait = None
            if error is None and payload is not None:
                choice = payload["choices"][0]
                emit("model.response", step=step, **{"try": attempt}, status=status,
                     latency_s=latency, message=choice["message"],
                     finish_reason=choice.get("finish_reason"), usage=payload.get("usage"),
                     model=payload.get("model"), error=None, retry_in_s=None)
                return payload
            emit("model.response", step=step, **{"try": attempt}, status=status, latency_s=latency,
                 message=None, finish_reason=None, usage=None, model=None, error=error,
                 retry_in_s=wait)
            if wait is None:
                raise Unreached(kind, error or "no answer")
            time.sleep(wait)
        raise Unreached("model_error", "retries exhausted")  # not reached: the loop raises first


# --------------------------------------------------------------------------- the loop


class Loop:
    def __init__(self, args: argparse.Namespace, client: Client, prompt: str) -> None:
        self.args = args
        self.client = client
        self.cwd = Path.cwd()
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                               {"role": "user", "content": prompt}]
        self.sent = 0  # messages already sent in an earlier request
        self.tokens_in = 0
        self.tokens_out = 0
        self.model_name: str | None = None
        self.calls = 0  # answered model calls
        # Commands get the agent's environment without the API key: the model has no use for it.
        self.command_env = {k: v for k, v in os.environ.items() if k != args.api_key_env}

    def request_body(self, step: int) -> bytes:
        params: dict[str, Any] = {"tool_choice": "auto"}
        if self.args.temperature is not None:
            params["temperature"] = self.args.temperature
        body = {"model": self.args.model, "messages": self.messages, "tools": TOOLS, **params}
        # Sorted keys: the journal stores maps with sorted keys, so the body can be rebuilt from
        # the entries byte for byte and checked against body_sha256.
        raw = json.dumps(body, ensure_ascii=False, sort_keys=True,
                         separators=(",", ":")).encode("utf-8")
        new = self.messages[self.sent:]
        if step > 1 and new and new[0].get("role") == "assistant":
            new = new[1:]  # the previous model.response message, echoed verbatim
        emit("model.request", step=step, url=self.client.url, model=self.args.model,
             messages=new, message_count=len(self.messages),
             tools=TOOLS if step == 1 else None, params=params,
             body_sha256=hashlib.sha256(raw).hexdigest())
        self.sent = len(self.messages)
        return raw

    def run(self) -> int:
        deadline = self.client.deadline
        for step in range(1, self.args.max_steps + 1):
            if time.monotonic() >= deadline:
                emit("agent.output", text="http agent: time budget used up")
                return EXIT_LIMIT
            try:
                payload = self.client.post(step, self.request_body(step))
            except Unreached as exc:
                if self.calls == 0:
                    emit("agent.error", kind=exc.kind, detail=exc.detail)
                    return EXIT_UNREACHED
                emit("agent.output", text=f"http agent: model call failed: {exc.detail}")
                return EXIT_LIMIT
            self.calls += 1
            usage = _obj(payload.get("usage"))
            self.tokens_in += _int(usage.get("prompt_tokens"))
            self.tokens_out += _int(usage.get("completion_tokens"))
            if isinstance(payload.get("model"), str):
                self.model_name = payload["model"]
            message = {k: v for k, v in (answer_message(payload) or {}).items() if v is not None}
            message["role"] = "assistant"
            message.setdefault("content", None)
            self.messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                return EXIT_OK  # a text-only answer: the model stopped
            done = False
            for call in calls:
                done = self.tool(call) or done
            if done:
                return EXIT_OK
            if self.args.max_tokens and self.tokens_in + self.tokens_out >= self.args.max_tokens:
                emit("agent.output", text=f"http agent: token budget {self.args.max_tokens} used "
                                          f"up ({self.tokens_in} in, {self.tokens_out} out)")
                return EXIT_LIMIT
            cost = (self.tokens_in * self.args.price_in + self.tokens_out * self.args.price_out) / 1e6
            if self.args.max_cost_usd and cost >= self.args.max_cost_usd:
                emit("agent.output", text=f"http agent: cost budget ${self.args.max_cost_usd:g} used "
                                          f"up (${cost:.6f} at the table's prices)")
                return EXIT_LIMIT
        emit("agent.output", text=f"http agent: step limit {self.args.max_steps} reached")
        return EXIT_LIMIT

    def tool(self, call: Any) -> bool:
        """Run one tool call and append its result message; True when it was ``submit``."""
        fn = call.get("function") if isinstance(call, dict) else None
        call_id = str(call.get("id", "")) if isinstance(call, dict) else ""
        name = str(fn.get("name", "")) if isinstance(fn, dict) else ""
        raw_args = fn.get("arguments", "{}") if isinstance(fn, dict) else "{}"
        error: str | None
        try:
            args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
            if not isinstance(args, dict):
                raise ValueError("arguments are not a JSON object")
        except ValueError as exc:
            args, error = {}, f"invalid arguments: {exc}"
        else:
            error = None
        emit("tool.call", tool=name, input=args if error is None else {"raw": str(raw_args)})
        submitted = False
        if error is not None:
            output, is_error = error, True
        elif name == "bash":
            command = args.get("command")
            if not isinstance(command, str) or not command.strip():
                output, is_error = "bash needs a non-empty `command` string", True
            else:
                remaining = self.client.deadline - time.monotonic()
                output, code = run_bash(command, self.cwd,
                                        min(self.args.command_timeout, max(0.1, remaining)),
                                        self.args.output_limit, self.command_env)
                is_error = code != 0
        elif name == "submit":
            output, is_error, submitted = "submitted", False, True
        else:
            output, is_error = f"unknown tool {name!r}; use bash or submit", True
        emit("tool.result", tool=name, output=output, is_error=is_error)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        return submitted


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (typed for mypy)."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ledger.agents.http_loop")
    parser.add_argument("--model", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key-env")
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    parser.add_argument("--max-tokens", type=int, default=0)
    parser.add_argument("--deadline-s", type=float, default=3600.0)
    parser.add_argument("--command-timeout", type=float, default=DEFAULT_COMMAND_TIMEOUT_S)
    parser.add_argument("--output-limit", type=int, default=DEFAULT_OUTPUT_LIMIT)
    parser.add_argument("--retries", type=int, default=DEFAULT_RETRIES)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--max-cost-usd", type=float, default=0.0)
    parser.add_argument("--price-in", type=float, default=0.0)  # $ per million input tokens
    parser.add_argument("--price-out", type=float, default=0.0)  # $ per million output tokens
    args = parser.parse_args(argv)
    if args.max_steps < 1 or args.output_limit < 100 or args.retries < 0:
        parser.error("--max-steps >= 1, --output-limit >= 100 and --retries >= 0")
    try:
        prompt = Path(args.prompt_file).read_text(encoding="utf-8")
    except OSError as exc:
        emit("agent.output", text=f"http agent: cannot read the prompt: {exc}")
        return EXIT_USAGE
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    client = Client(args.base_url, key, args.retries, time.monotonic() + args.deadline_s)
    loop = Loop(args, client, prompt)
    try:
        code = loop.run()
    finally:
        emit("usage", tokens_in=loop.tokens_in, tokens_out=loop.tokens_out,
             model=loop.model_name or args.model, model_calls=loop.calls)
    return code


if __name__ == "__main__":
    sys.exit(main())
