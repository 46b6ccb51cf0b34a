"""Command lines for the agent CLIs (facts in /work/shared/AGENT-CLIS.md; re-check them often).

Each preset builds the non-interactive argv, the environment overrides (a private config home per
attempt under ``ctx.home``, telemetry and auto-update off) and names its transcript parser. The
attempt's config home starts empty, so user settings cannot change the output format; the login
file of the CLI (if the user has one) is copied in with mode 0600 so that subscription logins
keep working. API keys in the environment pass through and are redacted from everything captured.

A prompt that begins with ``-`` gets a leading space so that no CLI reads it as an option.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.run.agents.parsers import (
    AiderParser,
    ClaudeParser,
    CodexParser,
    CursorParser,
    GeminiParser,
)
from ledger.run.contracts import AttemptContext, OutputParser

Build = Callable[[str, AttemptContext, "str | None"], tuple[list[str], dict[str, str]]]


@dataclass(frozen=True)
class Preset:
    name: str
    programs: tuple[str, ...]  # tried in order on PATH
    detect: tuple[str, ...]  # names that count as "installed" for auto-detection
    build: Build
    parser: Callable[[str | None], OutputParser]
    doc: str


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


def build_claude(prog: str, ctx: AttemptContext, model: str | None) -> tuple[list[str], dict[str, str]]:
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
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_UPDATES": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # bypass mode refuses to run as root otherwise
    return argv, env


def build_codex(prog: str, ctx: AttemptContext, model: str | None) -> tuple[list[str], dict[str, str]]:
    codex_home = Path(ctx.home) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    _copy_login(".codex/auth.json", codex_home / "auth.json")
    argv = [prog, "exec", "--json", "--skip-git-repo-check", "--color", "never",
            "--dangerously-bypass-approvals-and-sandbox", "-C", str(ctx.worktree),
            "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false"]
    if model:
        argv += ["-m", model]
    argv.append(prompt_arg(ctx.prompt))
    return argv, {"CODEX_HOME": str(codex_home)}


def build_gemini(prog: str, ctx: AttemptContext, model: str | None) -> tuple[list[str], dict[str, str]]:
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
    (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    argv = [prog, "--output-format", "stream-json", "--approval-mode", "yolo"]
    if model:
        argv += ["-m", model]
    argv += ["-p", prompt_arg(ctx.prompt)]
    return argv, {"GEMINI_CLI_HOME": str(ctx.home), "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def build_cursor(prog: str, ctx: AttemptContext, model: str | None) -> tuple[list[str], dict[str, str]]:
    Path(ctx.home).mkdir(parents=True, exist_ok=True)
    for rel in (".cursor/cli-config.json", ".config/cursor/auth.json"):
        _copy_login(rel, Path(ctx.home) / rel)
    argv = [prog, "-p", "--output-format", "stream-json", "--force", "--trust",
            "--workspace", str(ctx.worktree)]
    if model:
        argv += ["--model", model]
    argv.append(prompt_arg(ctx.prompt))
    return argv, {"HOME": str(ctx.home)}


def build_aider(prog: str, ctx: AttemptContext, model: str | None) -> tuple[list[str], dict[str, str]]:
    home = Path(ctx.home)
    home.mkdir(parents=True, exist_ok=True)
    argv = [prog, "--message-file", str(ctx.prompt_file), "--yes-always", "--no-auto-commits",
            "--no-gitignore", "--no-analytics", "--no-check-update", "--no-show-release-notes",
            "--no-pretty", "--no-fancy-input", "--no-stream",
            "--chat-history-file", str(home / ".aider.chat.history.md"),
            "--input-history-file", str(home / ".aider.input.history")]
    if model:
        argv += ["--model", model]
    return argv, {"HOME": str(home), "NO_COLOR": "1"}


PRESETS: dict[str, Preset] = {
    "claude": Preset("claude", ("claude",), ("claude",), build_claude, ClaudeParser,
                     "Claude Code, -p with stream-json transcript; cost reported"),
    "codex": Preset("codex", ("codex",), ("codex",), build_codex, CodexParser,
                    "OpenAI Codex CLI, codex exec --json; tokens only"),
    "gemini": Preset("gemini", ("gemini",), ("gemini",), build_gemini, GeminiParser,
                     "Google Gemini CLI, -p with stream-json; tokens only"),
    "cursor-agent": Preset("cursor-agent", ("cursor-agent", "agent"), ("cursor-agent",),
                           build_cursor, CursorParser,
                           "Cursor agent CLI, -p with stream-json; tokens when reported"),
    "aider": Preset("aider", ("aider",), ("aider",), build_aider, AiderParser,
                    "Aider, --message-file; text output with tokens and cost"),
}
PRESET_ORDER = ("claude", "codex", "gemini", "cursor-agent", "aider")
