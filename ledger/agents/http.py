"""The built-in HTTP agent's adapter: ``http:MODEL@BASE_URL`` or ``[agents.NAME] kind = "http"``.

The agent process is ``python -P -m ledger.agents.http_loop`` (see that module for the loop);
this module turns a spec or a ``ledger.toml`` table into an ``HttpAgent``, builds its command
line from the attempt (prompt file, time budget, token budget) and parses its transcript
(``HttpParser``) into ``model.request`` / ``model.response`` / ``tool.call`` / ``tool.result``
entries and usage. The API key stays in the environment variable the user named
(``api_key_env``, default ``OPENAI_API_KEY``): it is never on the command line, and its value is
in ``Invocation.secrets``, so the journal never holds it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ledger.agents.contracts import AgentProfile, AttemptContext, Event, Invocation
from ledger.agents.env import base_env, env_secrets, harness_version, safe_name
from ledger.agents.parsers import BuiltinParser
from ledger.errors import UsageError

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEADLINE_MARGIN_S = 5.0  # the loop stops this long before the attempt's budget runs out
DEFAULT_MAX_STEPS = 50
_SPEC = re.compile(r"^(?P<model>[^@\s]+(?:@[^@\s]+)*?)@(?P<url>https?://\S+)$")
_KEYS = {"kind", "model", "base_url", "api_key_env", "max_steps", "command_timeout",
         "output_limit", "retries", "temperature", "env"}


def check_base_url(url: str, where: str) -> str:
    """An ``http(s)://host[:port][/path]`` URL without credentials, query or fragment."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{where}: base URL must be http(s)://HOST[:PORT][/PATH], got {url!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError(f"{where}: base URL {url!r} may not carry credentials, a query or a "
                         "fragment (put the key in the variable api_key_env names)")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise UsageError(f"{where}: base URL {url!r} has a bad port") from None
    return url.rstrip("/")


def url_endpoint(url: str) -> str:
    """``host:port`` of a base URL (80 for http, 443 for https unless given), as endpoints take."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class HttpParser(BuiltinParser):
    """The loop's transcript: the built-in kinds plus ``model.request``, ``model.response``,
    ``agent.error`` and the final ``usage`` (with ``model_calls``)."""

    def handle(self, obj: dict[str, Any]) -> list[Event]:
        t = obj.get("type")
        if t in ("model.request", "model.response"):
            return [(str(t), {k: v for k, v in obj.items() if k != "type"})]
        if t == "agent.error":
            self.usage.agent_error = {"kind": str(obj.get("kind") or "unreachable"),
                                      "detail": str(obj.get("detail") or "")}
            return []
        if t == "usage":
            model = obj.get("model") if isinstance(obj.get("model"), str) else self.usage.model
            calls = obj.get("model_calls")
            error = self.usage.agent_error
            super().handle({**obj, "cost_usd": None})
            self.usage.cost_usd = None  # the loop reports tokens; the cost comes from the price table
            self.usage.model = model
            self.usage.model_calls = calls if isinstance(calls, int) else None
            self.usage.agent_error = error
            return []
        return super().handle(obj)


@dataclass
class HttpAgent:
    """A model behind an OpenAI-compatible Chat Completions endpoint, driven by the bash loop."""

    name: str
    spec: str
    model: str
    base_url: str
    api_key_env: str = DEFAULT_KEY_ENV
    max_steps: int = DEFAULT_MAX_STEPS
    command_timeout: float | None = None
    output_limit: int | None = None
    retries: int | None = None
    temperature: float | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def profile(self) -> AgentProfile:
        """Harness code (the loop runs in the harness's Python) that calls a model and stops at
        the task's token and cost budgets itself."""
        return AgentProfile(kind="http", runs_harness_code=True, uses_model=True,
                            model=self.model, endpoints=self.endpoints(),
                            transcript=HttpParser.__name__, inputs=frozenset({"budgets"}),
                            sandbox_argv=(sys.executable,))

    def available(self) -> tuple[bool, str]:
        return True, ""

    def version(self) -> str | None:
        return f"{harness_version()} http-agent"

    def endpoints(self) -> tuple[str, ...]:
        return (url_endpoint(self.base_url),)

    def invocation(self, ctx: AttemptContext) -> Invocation:
        argv = [sys.executable, "-P", "-m", "ledger.agents.http_loop",
                "--model", self.model, "--base-url", self.base_url,
                "--api-key-env", self.api_key_env, "--prompt-file", str(ctx.prompt_file),
                "--max-steps", str(self.max_steps),
                "--deadline-s", f"{max(1.0, ctx.timeout_s - DEADLINE_MARGIN_S):g}"]
        budget = ctx.extra.get("max_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
            argv += ["--max-tokens", str(budget)]
        cost, price = ctx.extra.get("max_cost_usd"), ctx.extra.get("price_per_mtok")
        if isinstance(cost, int | float) and cost > 0 and isinstance(price, list | tuple) \
                and len(price) == 2:
            argv += ["--max-cost-usd", f"{float(cost):g}", "--price-in", f"{float(price[0]):g}",
                     "--price-out", f"{float(price[1]):g}"]
        for flag, value in (("--command-timeout", self.command_timeout),
                            ("--output-limit", self.output_limit), ("--retries", self.retries),
                            ("--temperature", self.temperature)):
            if value is not None:
                argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        env = base_env(ctx, self.extra_env)
        key = env.get(self.api_key_env) or os.environ.get(self.api_key_env)
        secrets = set(env_secrets(env))
        if key:
            secrets.add(key)  # whatever its variable is called
        return Invocation(argv=tuple(argv), env=env,
                          parser_factory=lambda: HttpParser(self.model),
                          secrets=tuple(sorted(secrets)), stdout_is_transcript=True)


def parse_http_spec(spec: str) -> HttpAgent:
    """``http:MODEL@BASE_URL`` -> an HttpAgent named ``http-MODEL``."""
    body = spec[len("http:"):].strip()
    match = _SPEC.match(body)
    if not match:
        raise UsageError(f"cannot read {spec!r}: use http:MODEL@BASE_URL, e.g. "
                         "http:qwen2.5-coder@http://127.0.0.1:8000/v1")
    url = check_base_url(match["url"], spec)
    model = match["model"]
    return HttpAgent(name=safe_name(f"http-{model}"), spec=spec, model=model, base_url=url)


def _number(raw: Mapping[str, Any], key: str, at: str, kind: type, minimum: float) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum or (
            kind is int and not isinstance(value, int)):
        raise UsageError(f"{at}: {key} must be {'an integer' if kind is int else 'a number'} "
                         f">= {minimum:g}, got {value!r}")
    return kind(value)


def http_agent_from_table(name: str, raw: Mapping[str, Any], where: str = "ledger.toml") -> HttpAgent:
    """``[agents.NAME] kind = "http"`` with ``model``, ``base_url`` and optional ``api_key_env``,
    ``max_steps``, ``command_timeout``, ``output_limit``, ``retries``, ``temperature``, ``env``."""
    at = f"{where}: [agents.{name}]"
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise UsageError(f"{at}: unknown key(s) {unknown} for kind = \"http\"; known: {sorted(_KEYS)}")
    model, base_url = raw.get("model"), raw.get("base_url")
    if not isinstance(model, str) or not model.strip():
        raise UsageError(f"{at}: kind = \"http\" needs model = \"...\"")
    if not isinstance(base_url, str):
        raise UsageError(f"{at}: kind = \"http\" needs base_url = \"http(s)://...\"")
    key_env = raw.get("api_key_env", DEFAULT_KEY_ENV)
    if not isinstance(key_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        raise UsageError(f"{at}: api_key_env must name an environment variable, got {key_env!r}")
    env = raw.get("env") or {}
    if not isinstance(env, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in env.items()):
        raise UsageError(f"{at}: env must be a table of strings")
    return HttpAgent(
        name=name, spec=name, model=model.strip(), base_url=check_base_url(base_url, at),
        api_key_env=key_env,
        max_steps=_number(raw, "max_steps", at, int, 1) or DEFAULT_MAX_STEPS,
        command_timeout=_number(raw, "command_timeout", at, float, 0.1),
        output_limit=_number(raw, "output_limit", at, int, 100),
        retries=_number(raw, "retries", at, int, 0),
        temperature=_number(raw, "temperature", at, float, 0),
        extra_env=dict(env),
    )


__all__ = ["HttpAgent", "HttpParser", "check_base_url", "http_agent_from_table",
           "parse_http_spec", "url_endpoint"]
