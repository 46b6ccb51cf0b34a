"""Command lines for the agent CLIs (facts in /work/shared/AGENT-CLIS.md; re-check them often).

Each preset builds the non-interactive argv, the environment overrides (a private config home per
attempt under ``ctx.home``, telemetry and auto-update off) and names its transcript parser. The
attempt's config home starts empty, so user settings cannot change the output format; the login
file of the CLI (if the user has one) is copied in with mode 0600 so that subscription logins
keep working. API keys in the environment pass through and are redacted from everything captured.

A prompt that begins with ``-`` gets a leading space so that no CLI reads it as an option.

Each preset also names the endpoints of its model API (``Preset.endpoints(model, env)``): the
hosts the CLI needs to reach its model and to refresh its login, never telemetry, error reporting
or update checks (the environment above turns those off). The run resolves them before the agent
starts and allows exactly those names and addresses, port 443 (docs/ATTESTATION.md section 4).
An endpoint is ``host`` (port 443), ``host:port``, ``*.domain[:port]`` (matched by name only) or
an IP address (``[v6]:port`` with a port).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ledger.agents.contracts import AttemptContext, OutputParser
from ledger.agents.file_parsers import MINI_TRAJECTORY, AiderParser, MiniSweAgentParser
from ledger.agents.parsers import (
    ClaudeParser,
    CodexParser,
    CursorParser,
    GeminiParser,
    OpencodeParser,
)
from ledger.errors import UsageError

Endpoints = Callable[["str | None", Mapping[str, str]], tuple[str, ...]]  # (model, env) -> hosts


@dataclass(frozen=True)
class ModelAccess:
    """Where the CLI's model is and the key for it, as the user gave them (``[agents.NAME]
    base_url`` / ``api_key_env``, ``--agent-base-url``) or as the vendor's usual variables hold
    them. Each preset turns this into what its CLI really honours."""

    base_url: str | None = None
    api_key: str | None = None  # the key itself: it goes into the environment, never the journal


class ParserFactory(Protocol):
    """A parser class: the model asked for, and the agent's home (where some CLIs log usage)."""

    def __call__(self, model: str | None = None, home: Path | None = None) -> OutputParser: ...


Build = Callable[[str, AttemptContext, "str | None", ModelAccess], tuple[list[str], dict[str, str]]]

DEFAULT_ENDPOINT_PORT = 443  # every model API below is HTTPS only
MAX_ENDPOINTS = 64  # declared endpoints per agent
_LABEL = r"[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*")


@dataclass(frozen=True)
class Preset:
    name: str
    programs: tuple[str, ...]  # tried in order on PATH
    detect: tuple[str, ...]  # names that count as "installed" for auto-detection
    build: Build
    parser: ParserFactory
    doc: str
    endpoints: Endpoints = lambda model, env: ()
    base_url_vars: tuple[str, ...] = ()  # the vendor's usual base URL variables (carried over)
    key_vars: tuple[str, ...] = ()  # the vendor's usual API key variables (carried over)
    api_style: str = "openai"  # how a base URL is completed: openai (/v1), anthropic, gemini
    tested: bool = True  # proven against the real CLI by tests/agents/conformance
    installed_version: Callable[[str], str | None] | None = None  # without running the program

    def access(self, env: Mapping[str, str], base_url: str | None = None,
               api_key_env: str | None = None) -> ModelAccess:
        """The endpoint and key for one attempt: the explicit ones first, then the vendor's
        usual variables in ``env``. UsageError when ``api_key_env`` names an unset variable."""
        url = base_url or next((env[n] for n in self.base_url_vars if env.get(n)), None)
        if api_key_env:
            key = env.get(api_key_env)
            if not key:
                raise UsageError(f"agent {self.name}: api_key_env names {api_key_env}, which is "
                                 "not set in the environment")
        else:
            key = next((env[n] for n in self.key_vars if env.get(n)), None)
        return ModelAccess(api_base(url, self.api_style) if url else None, key)


# --------------------------------------------------------------------------- endpoints


def endpoint_host_ok(host: str) -> bool:
    """A host name (``*.`` allowed in front, lowercase) or an IP address: nothing else (no CIDR
    block, no URL, no port)."""
    if not isinstance(host, str) or not host or len(host) > 253:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return _HOST_NAME.fullmatch(host) is not None and not host.replace(".", "").isdigit()


def parse_endpoint(text: str) -> tuple[str, int]:
    """``(host, port)`` of a declared endpoint: ``host`` (port 443), ``host:port``,
    ``*.domain[:port]``, ``1.2.3.4[:port]``, ``::1`` or ``[::1]:port``; UsageError otherwise."""
    if not isinstance(text, str):
        raise UsageError(f"an endpoint is a string, got {text!r}")
    raw = text.strip().lower()
    host, port_text = raw, ""
    if "/" in raw or "@" in raw:
        raise UsageError(f"endpoint {text!r}: expected host or host:port (no URL, no CIDR block)")
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(f"endpoint {text!r}: expected [IPv6]:port")
        port_text = rest[1:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    host = host.rstrip(".")
    with contextlib.suppress(ValueError):
        host = ipaddress.ip_address(host).compressed
    if not endpoint_host_ok(host) or (raw.startswith("[") and ":" not in host):
        raise UsageError(f"endpoint {text!r}: expected host, host:port, *.domain or an IP "
                         "address (no URL, no CIDR block)")
    port = DEFAULT_ENDPOINT_PORT
    if port_text or raw.endswith(":"):
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise UsageError(f"endpoint {text!r}: the port must be 1-65535")
        port = int(port_text)
    return host, port


def format_endpoint(host: str, port: int) -> str:
    """The canonical text of an endpoint: ``host`` for port 443, else ``host:port``."""
    shown = f"[{host}]" if ":" in host else host
    if port == DEFAULT_ENDPOINT_PORT:
        return host
    return f"{shown}:{port}"


def check_endpoints(values: Any, where: str) -> tuple[str, ...]:
    """Declared endpoints (``[agents.NAME] endpoints``), canonical and deduplicated."""
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise UsageError(f"{where}: endpoints must be a list of strings")
    if len(values) > MAX_ENDPOINTS:
        raise UsageError(f"{where}: at most {MAX_ENDPOINTS} endpoints")
    out = []
    for value in values:
        try:
            out.append(format_endpoint(*parse_endpoint(value)))
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return tuple(dict.fromkeys(out))


def url_endpoint(url: str | None) -> str | None:
    """The endpoint of a base URL (``https://gw.example:8443/v1`` -> ``gw.example:8443``)."""
    from urllib.parse import urlsplit

    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.scheme not in ("http", "https"):
        return None
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        return format_endpoint(*parse_endpoint(format_endpoint(host.lower(), port)))
    except UsageError:
        return None


def _with_base_urls(hosts: tuple[str, ...], env: Mapping[str, str],
                    names: tuple[str, ...]) -> tuple[str, ...]:
    extra = [url_endpoint(env.get(n)) for n in names]
    return tuple(dict.fromkeys([*hosts, *(e for e in extra if e)]))


def claude_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The Messages API; the OAuth token endpoint for subscription logins; a gateway named by
    ``ANTHROPIC_BASE_URL``. Not statsig or sentry (telemetry, turned off)."""
    return _with_base_urls(("api.anthropic.com", "console.anthropic.com"), env,
                           ("ANTHROPIC_BASE_URL",))


def codex_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The OpenAI API (API keys), the ChatGPT backend and its token refresh (ChatGPT logins);
    ``OPENAI_BASE_URL``."""
    return _with_base_urls(("api.openai.com", "chatgpt.com", "auth.openai.com"), env,
                           ("OPENAI_BASE_URL",))


def gemini_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The Gemini API (API keys), Code Assist (Google logins), Google's token endpoint; Vertex AI
    when ``GOOGLE_GENAI_USE_VERTEXAI`` is on; ``GOOGLE_GEMINI_BASE_URL``."""
    hosts = ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
             "oauth2.googleapis.com"]
    if env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true"):
        hosts.append("aiplatform.googleapis.com")
        location = env.get("GOOGLE_CLOUD_LOCATION", "").strip().lower()
        if location and re.fullmatch(r"[a-z0-9-]{1,40}", location):
            hosts.append(f"{location}-aiplatform.googleapis.com")
    return _with_base_urls(tuple(hosts), env, ("GOOGLE_GEMINI_BASE_URL",))


def cursor_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """Cursor's backend (it proxies every model); the wildcard is matched by name only."""
    return ("api2.cursor.sh", "api.cursor.sh", "agent.api5.cursor.sh", "*.cursor.sh")


# (model prefixes, model name starts, API key variable, endpoint) for aider's providers (litellm)
AIDER_PROVIDERS: tuple[tuple[tuple[str, ...], tuple[str, ...], str, str], ...] = (
    (("openrouter/",), (), "OPENROUTER_API_KEY", "openrouter.ai"),
    (("anthropic/",), ("claude", "sonnet", "haiku", "opus"), "ANTHROPIC_API_KEY",
     "api.anthropic.com"),
    (("openai/",), ("gpt", "o1", "o3", "o4", "chatgpt", "codex", "4o", "4-turbo", "35turbo",
                    "35-turbo"), "OPENAI_API_KEY", "api.openai.com"),
    (("gemini/",), ("gemini", "flash"), "GEMINI_API_KEY", "generativelanguage.googleapis.com"),
    (("deepseek/",), ("deepseek", "r1"), "DEEPSEEK_API_KEY", "api.deepseek.com"),
    (("xai/",), ("grok",), "XAI_API_KEY", "api.x.ai"),
    (("mistral/",), ("mistral", "codestral"), "MISTRAL_API_KEY", "api.mistral.ai"),
    (("groq/",), (), "GROQ_API_KEY", "api.groq.com"),
)


def aider_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The provider the model names (``openrouter/...``, ``claude-...``, ``gpt-...``,
    ``ollama/...``); with no model or an unknown one, every provider whose API key is set (aider
    picks its default model from those), else OpenRouter. ``OPENAI_API_BASE`` adds its host."""
    name = (model or "").strip().lower()
    hosts: list[str] = []
    if name.startswith(("ollama/", "ollama_chat/")):
        hosts.append(url_endpoint(env.get("OLLAMA_API_BASE")) or "localhost:11434")
    for prefixes, starts, _key, host in AIDER_PROVIDERS if name else ():
        if name.startswith(prefixes) or (starts and name.startswith(starts)):
            hosts.append(host)
            break
    if not hosts:
        hosts = [host for _p, _s, key, host in AIDER_PROVIDERS if env.get(key)] or ["openrouter.ai"]
    return _with_base_urls(tuple(hosts), env, ("OPENAI_API_BASE", "OPENAI_BASE_URL"))


def api_base(url: str, style: str) -> str:
    """A base URL as the CLI's SDK wants it. A URL with no path names the server root:
    OpenAI-style clients get ``/v1`` added; Anthropic and Gemini SDKs add their own version
    path, so a trailing ``/v1`` (or ``/v1beta``) is dropped for them."""
    from urllib.parse import urlsplit

    text = url.strip().rstrip("/")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise UsageError(f"base URL {url!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"base URL {url!r}: expected http(s)://HOST[:PORT][/PATH]")
    if style == "openai":
        return text if parts.path else text + "/v1"
    for suffix in ("/v1beta", "/v1"):
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text


def prompt_arg(prompt: str) -> str:
    return " " + prompt if prompt.startswith("-") else prompt


def _copy_login(rel_src: str, dst: Path) -> None:
    """Copy ``~/<rel_src>`` to ``dst`` (0600) if it exists and ``dst`` does not."""
    src = Path.home() / rel_src
    with contextlib.suppress(OSError):
        if src.is_file() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o600)


def build_claude(prog: str, ctx: AttemptContext, model: str | None,
                 access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    config_dir = Path(ctx.home) / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    _copy_login(".claude/.credentials.json", config_dir / ".credentials.json")
    argv = [prog, "-p", "--output-format", "stream-json", "--verbose",
            "--dangerously-skip-permissions", "--no-session-persistence"]
    if model:
        argv += ["--model", model]
    budget = ctx.extra.get("max_cost_usd")
    if isinstance(budget, int | float) and budget > 0:
        argv += ["--max-budget-usd", f"{float(budget):g}"]
    argv.append(prompt_arg(ctx.prompt))
    env = {
        "HOME": str(ctx.home),  # it looks into $HOME at start: the private home, not the user's
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_UPDATES": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    if access.base_url:
        env["ANTHROPIC_BASE_URL"] = access.base_url
    if access.api_key:
        env["ANTHROPIC_API_KEY"] = access.api_key
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # bypass mode refuses to run as root otherwise
    return argv, env


def build_codex(prog: str, ctx: AttemptContext, model: str | None,
                access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """codex >= 0.169 ignores ``OPENAI_BASE_URL`` (only ``-c openai_base_url=`` works, and the
    private ``CODEX_HOME`` hides the user's config.toml) and ``codex exec`` sends no key from
    ``OPENAI_API_KEY`` alone: the key goes in ``CODEX_API_KEY``."""
    codex_home = Path(ctx.home) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    _copy_login(".codex/auth.json", codex_home / "auth.json")
    argv = [prog, "exec", "--json", "--skip-git-repo-check", "--color", "never",
            "--dangerously-bypass-approvals-and-sandbox", "-C", str(ctx.worktree),
            "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false"]
    if access.base_url:
        argv += ["-c", f"openai_base_url={json.dumps(access.base_url)}"]
    if model:
        argv += ["-m", model]
    argv.append(prompt_arg(ctx.prompt))
    env = {"CODEX_HOME": str(codex_home)}
    if access.api_key:
        env["CODEX_API_KEY"] = access.api_key
    return argv, env


def build_gemini(prog: str, ctx: AttemptContext, model: str | None,
                 access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """gemini 0.61 treats ``GOOGLE_GEMINI_BASE_URL`` as a gateway auth type that headless mode
    rejects (exit 41) unless settings select ``gemini-api-key``: with a key, the private
    settings select it."""
    gemini_dir = Path(ctx.home) / ".gemini"
    gemini_dir.mkdir(parents=True, exist_ok=True)
    for fname in ("oauth_creds.json", "google_accounts.json"):
        _copy_login(f".gemini/{fname}", gemini_dir / fname)
    settings: dict[str, Any] = {
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                    "disableAutoUpdate": True},
        "telemetry": {"enabled": False},
    }
    with contextlib.suppress(OSError, ValueError, AttributeError):  # keep the user's auth choice
        user = json.loads((Path.home() / ".gemini" / "settings.json").read_text(encoding="utf-8"))
        if isinstance(user.get("security", {}).get("auth"), dict):
            settings["security"] = {"auth": user["security"]["auth"]}
        if "selectedAuthType" in user:
            settings["selectedAuthType"] = user["selectedAuthType"]
    env = {"GEMINI_CLI_HOME": str(ctx.home), "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    if access.api_key:
        settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        env["GEMINI_API_KEY"] = access.api_key
    if access.base_url:
        env["GOOGLE_GEMINI_BASE_URL"] = access.base_url
    (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    argv = [prog, "--output-format", "stream-json", "--approval-mode", "yolo"]
    if model:
        argv += ["-m", model]
    argv += ["-p", prompt_arg(ctx.prompt)]
    return argv, env


def build_cursor(prog: str, ctx: AttemptContext, model: str | None,
                 access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    Path(ctx.home).mkdir(parents=True, exist_ok=True)
    for rel in (".cursor/cli-config.json", ".config/cursor/auth.json"):
        _copy_login(rel, Path(ctx.home) / rel)
    argv = [prog, "-p", "--output-format", "stream-json", "--force", "--trust",
            "--workspace", str(ctx.worktree)]
    if model:
        argv += ["--model", model]
    argv.append(prompt_arg(ctx.prompt))
    env = {"HOME": str(ctx.home)}
    if access.api_key:
        env["CURSOR_API_KEY"] = access.api_key
    return argv, env


AIDER_ANALYTICS_LOG = "aider-analytics.jsonl"  # in the private home: exact tokens per LLM call


def build_aider(prog: str, ctx: AttemptContext, model: str | None,
                access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """Aider prints rounded token counts; its local analytics log (``--analytics-log``, written
    even with ``--no-analytics``, which sends nothing) has the exact ones. It fetches a price list
    from the internet when its cache is empty: the private home gets a non-empty cache and
    ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps litellm on its bundled copy."""
    home = Path(ctx.home)
    cache = home / ".aider" / "caches"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "model_prices_and_context_window.json").write_text(
        json.dumps({"ledger-placeholder": {}}), encoding="utf-8")
    argv = [prog, "--message-file", str(ctx.prompt_file), "--yes-always", "--no-auto-commits",
            "--no-gitignore", "--no-analytics", "--analytics-log", str(home / AIDER_ANALYTICS_LOG),
            "--no-check-update", "--no-show-release-notes", "--no-pretty", "--no-fancy-input",
            "--no-stream",
            "--chat-history-file", str(home / ".aider.chat.history.md"),
            "--input-history-file", str(home / ".aider.input.history")]
    if access.base_url:
        argv += ["--openai-api-base", access.base_url]
    if model:
        argv += ["--model", model]
    env = {"HOME": str(home), "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if access.api_key:
        env["OPENAI_API_KEY"] = access.api_key
    return argv, env


def qwen_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """Qwen Code's OpenAI-compatible providers: DashScope (its own models) and the OpenAI API;
    ``OPENAI_BASE_URL``."""
    return _with_base_urls(("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com",
                            "api.openai.com"), env, ("OPENAI_BASE_URL",))


def build_qwen(prog: str, ctx: AttemptContext, model: str | None,
               access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """Qwen Code 0.24 (a Gemini CLI fork whose stream-json has Claude Code's shape): yolo, the
    OpenAI auth type with ``--openai-base-url``; the key stays in ``OPENAI_API_KEY``."""
    home = Path(ctx.home)
    qwen_dir = home / ".qwen"
    qwen_dir.mkdir(parents=True, exist_ok=True)
    settings = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                "general": {"enableAutoUpdate": False, "disableAutoUpdate": True}}
    (qwen_dir / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    argv = [prog, "--output-format", "stream-json", "--approval-mode", "yolo"]
    if access.base_url or access.api_key:
        argv += ["--auth-type", "openai"]
    if access.base_url:
        argv += ["--openai-base-url", access.base_url]
    if model:
        argv += ["-m", model]
    argv.append(prompt_arg(ctx.prompt))
    env = {"HOME": str(home), "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1", "NO_COLOR": "1"}
    if access.api_key:
        env["OPENAI_API_KEY"] = access.api_key
    return argv, env


OPENCODE_PROVIDER_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com",
                           "google": "generativelanguage.googleapis.com",
                           "openrouter": "openrouter.ai", "opencode": "opencode.ai"}


def opencode_endpoints(model: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The API of the provider the ``provider/model`` names (OpenAI without a model);
    ``OPENAI_BASE_URL``; and the npm registry: a fresh config home makes opencode 1.18 install
    its ``@opencode-ai/plugin`` package there at start, whatever the flags say."""
    provider = (model or "openai/").split("/", 1)[0].lower()
    host = OPENCODE_PROVIDER_HOSTS.get(provider, "api.openai.com")
    return _with_base_urls((host, "registry.npmjs.org"), env, ("OPENAI_BASE_URL",))


def build_opencode(prog: str, ctx: AttemptContext, model: str | None,
                   access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """opencode 1.18 ``run --pure --format json``: its config (``OPENCODE_CONFIG_CONTENT``) allows
    edits, shell commands and paths outside the project (headless, a question is a rejection),
    turns auto-update, sharing, default plugins and LSP downloads off, and points the model's provider at the
    base URL; the session gets a title, so no second model call makes one; model-list downloads
    are off; every state folder is in the private home."""
    home = Path(ctx.home)
    home.mkdir(parents=True, exist_ok=True)
    provider = (model or "openai/").split("/", 1)[0] or "openai"
    config: dict[str, Any] = {"permission": {"edit": "allow", "bash": "allow", "webfetch": "allow",
                                             "external_directory": "allow"},
                              "autoupdate": False, "share": "disabled"}
    options: dict[str, Any] = {}
    if access.base_url:
        options["baseURL"] = access.base_url
    if access.api_key:
        options["apiKey"] = "{env:LEDGER_OPENCODE_API_KEY}"
    if options:
        config["provider"] = {provider: {"options": options}}
    argv = [prog, "run", "--pure", "--format", "json", "--title", f"ledger {ctx.task_id}"]
    if model:
        argv += ["-m", model]
    argv.append(prompt_arg(ctx.prompt))
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_STATE_HOME": str(home / ".local" / "state"), "OPENCODE_DISABLE_MODELS_FETCH": "1",
           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "NO_COLOR": "1",
           "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
           "OPENCODE_CONFIG_CONTENT": json.dumps(config)}
    if access.api_key:
        env["LEDGER_OPENCODE_API_KEY"] = access.api_key
        if provider == "openai":
            env["OPENAI_API_KEY"] = access.api_key
    return argv, env


def venv_dist_version(program: str, dist: str) -> str | None:
    """``DIST VERSION`` from the metadata of the virtualenv a program lives in (``mini --version``
    imports litellm first: often slower than the version timeout)."""
    import glob

    venv = Path(os.path.realpath(program)).parent.parent
    pattern = str(venv / "lib" / "python*" / "site-packages" / f"{dist.replace('-', '_')}-*.dist-info")
    for folder in sorted(glob.glob(pattern)):
        with contextlib.suppress(OSError):
            for line in (Path(folder) / "METADATA").read_text(encoding="utf-8").splitlines():
                if line.startswith("Version:"):
                    return f"{dist} {line.split(':', 1)[1].strip()}"
    return None


def build_mini(prog: str, ctx: AttemptContext, model: str | None,
               access: ModelAccess) -> tuple[list[str], dict[str, str]]:
    """mini-swe-agent 2.x: yolo mode, its stock ``mini.yaml``, no confirmation at exit, the
    trajectory (what the parser reads) written into the private home. The key goes to litellm
    through ``OPENAI_API_KEY``, never on the command line."""
    home = Path(ctx.home)
    home.mkdir(parents=True, exist_ok=True)
    argv = [prog, "-y", "-c", "mini.yaml", "-c", "agent.confirm_exit=false",
            "-o", str(home / MINI_TRAJECTORY)]
    if access.base_url:
        argv += ["-c", f"model.model_kwargs.api_base={access.base_url}"]
    if model:
        argv += ["-m", model]
    argv += ["-t", prompt_arg(ctx.prompt)]
    env = {"HOME": str(home), "MSWEA_CONFIGURED": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "NO_COLOR": "1"}
    if access.api_key:
        env["OPENAI_API_KEY"] = access.api_key
    return argv, env


PRESETS: dict[str, Preset] = {
    "claude": Preset("claude", ("claude",), ("claude",), build_claude, ClaudeParser,
                     "Claude Code, -p with stream-json transcript; cost reported",
                     claude_endpoints, ("ANTHROPIC_BASE_URL",), ("ANTHROPIC_API_KEY",),
                     "anthropic"),
    "codex": Preset("codex", ("codex",), ("codex",), build_codex, CodexParser,
                    "OpenAI Codex CLI, codex exec --json; tokens, priced", codex_endpoints,
                    ("OPENAI_BASE_URL",), ("CODEX_API_KEY", "OPENAI_API_KEY"), "openai"),
    "gemini": Preset("gemini", ("gemini",), ("gemini",), build_gemini, GeminiParser,
                     "Google Gemini CLI, -p with stream-json; tokens, priced", gemini_endpoints,
                     ("GOOGLE_GEMINI_BASE_URL",), ("GEMINI_API_KEY",), "gemini"),
    "cursor-agent": Preset("cursor-agent", ("cursor-agent", "agent"), ("cursor-agent",),
                           build_cursor, CursorParser,
                           "Cursor agent CLI, -p with stream-json; tokens when reported "
                           "(untested: no installable package)",
                           cursor_endpoints, (), ("CURSOR_API_KEY",), "openai", tested=False),
    "aider": Preset("aider", ("aider",), ("aider",), build_aider, AiderParser,
                    "Aider, --message-file; exact tokens from its analytics log, cost reported",
                    aider_endpoints, ("OPENAI_API_BASE", "OPENAI_BASE_URL"), ("OPENAI_API_KEY",),
                    "openai"),
    "opencode": Preset("opencode", ("opencode",), ("opencode",), build_opencode, OpencodeParser,
                       "opencode, run --format json; exact tokens and cost per step",
                       opencode_endpoints, ("OPENAI_BASE_URL",), ("OPENAI_API_KEY",), "openai"),
    "qwen": Preset("qwen", ("qwen",), ("qwen",), build_qwen, ClaudeParser,
                   "Qwen Code, stream-json (Claude Code's shape); exact tokens, priced",
                   qwen_endpoints, ("OPENAI_BASE_URL",), ("OPENAI_API_KEY",), "openai"),
    "mini-swe-agent": Preset("mini-swe-agent", ("mini", "mini-swe-agent"), ("mini-swe-agent",),
                             build_mini,
                             MiniSweAgentParser,
                             "mini-swe-agent, mini -y; trajectory file: tool calls, exact "
                             "tokens, cost reported, exit status",
                             aider_endpoints, ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
                             ("OPENAI_API_KEY",), "openai",
                             installed_version=lambda p: venv_dist_version(p, "mini-swe-agent")),
}
PRESET_ORDER = ("claude", "codex", "gemini", "cursor-agent", "aider", "opencode", "qwen",
                "mini-swe-agent")
