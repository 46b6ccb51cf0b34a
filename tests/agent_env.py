"""What environment the tests give ``ledger``: no agent CLI and no model key unless a test means it.

The machine (a developer's, or CI, which installs the real CLIs) may have ``claude``, ``codex``,
``gemini``, ``aider``, ... on PATH and vendor keys in the environment. A test that let ``ledger``
see them would depend on the machine: ``ledger run`` with no ``--agent`` picks the first CLI found,
and a real CLI with no reachable model retries for minutes. So ``tests/conftest.py`` strips them
for the whole test session (``hide_agents``), and a test that wants a real CLI asks for it by name
(``find_real_cli``) and puts exactly that program on the PATH it gives ``ledger``.

A PATH folder that holds an agent CLI (``/usr/bin`` after ``npm install -g``) is replaced by a
mirror of symlinks to everything else in it, so the tools the tests need stay reachable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

# Program names of the agent CLIs the presets know (and their aliases).
AGENT_PROGRAMS = frozenset({
    "claude", "codex", "gemini", "cursor-agent", "agent", "aider", "opencode", "qwen", "mini",
    "mini-swe-agent", "mini-extra",
})

# Variables that pick a model endpoint, a key or a CLI's behaviour; never inherited by tests.
_AGENT_VAR = re.compile(
    r"^(ANTHROPIC|CLAUDE|OPENAI|CODEX|GEMINI|GOOGLE|CURSOR|AIDER|OPENROUTER|DEEPSEEK|XAI|"
    r"MISTRAL|GROQ|OLLAMA|DASHSCOPE|QWEN|OPENCODE|MSWEA|LITELLM|AZURE|VERTEX|TOGETHER|"
    r"FIREWORKS|HF|HUGGINGFACE)_|API_?KEY|_TOKEN$", re.IGNORECASE)

# Where CI and developers install the real CLIs outside npm's global prefix (see .ci/run).
AGENTS_ROOT = Path(os.environ.get("LEDGER_AGENTS_ROOT", "/opt/ledger-agents"))

_ORIGINAL_PATH = os.environ.get("PATH", os.defpath)
_mirrors: dict[str, str] = {}


def agent_vars(env: Mapping[str, str]) -> list[str]:
    """Names of the variables in ``env`` that choose a model, a key or an agent's behaviour."""
    return sorted(k for k in env if _AGENT_VAR.search(k))


def _has_agent(folder: str) -> bool:
    return any(os.path.lexists(os.path.join(folder, name)) for name in AGENT_PROGRAMS)


def _mirror(folder: str, root: Path) -> str:
    """A folder of symlinks to every entry of ``folder`` but the agent CLIs (made once)."""
    real = os.path.realpath(folder)
    if real in _mirrors:
        return _mirrors[real]
    out = root / ("bin-" + re.sub(r"[^A-Za-z0-9]+", "-", real).strip("-"))
    out.mkdir(parents=True, exist_ok=True)
    with os.scandir(real) as it:
        for entry in it:
            if entry.name not in AGENT_PROGRAMS and not (out / entry.name).exists():
                os.symlink(os.path.join(real, entry.name), out / entry.name)
    _mirrors[real] = str(out)
    return str(out)


def clean_path(path: str, root: Path) -> str:
    """``path`` with every folder that holds an agent CLI replaced by an agent-free mirror."""
    out: list[str] = []
    for folder in path.split(os.pathsep):
        if not folder or not os.path.isdir(folder):
            continue
        out.append(_mirror(folder, root) if _has_agent(folder) else folder)
    return os.pathsep.join(dict.fromkeys(out))


_root: Path | None = None


def system_path() -> str:
    """``/usr/bin:/bin`` without the agent CLIs (for tests that build their own PATH)."""
    if _root is None:
        raise RuntimeError("tests/conftest.py's hide_agents fixture has not run")
    return clean_path(f"/usr/bin{os.pathsep}/bin", _root)


def hide(environ: MutableMapping[str, str], root: Path) -> None:
    """Strip the agent CLIs from ``environ['PATH']`` and every agent variable from ``environ``."""
    global _root
    _root = root
    for name in agent_vars(environ):
        del environ[name]
    environ["PATH"] = clean_path(environ.get("PATH", os.defpath), root)


def find_real_cli(name: str) -> str | None:
    """The real CLI ``name`` as the machine has it (PATH before the tests hid it, or
    ``AGENTS_ROOT/bin``); None when it is not installed."""
    for folder in [*_ORIGINAL_PATH.split(os.pathsep), str(AGENTS_ROOT / "bin")]:
        candidate = os.path.join(folder, name)
        if folder and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def install_note(name: str) -> str:
    """Why ``name`` is missing: CI's install log says whether its install failed."""
    status = AGENTS_ROOT / "status" / name
    try:
        text = status.read_text(encoding="utf-8").strip().splitlines()
    except OSError:
        return f"{name} is not installed (no install record under {AGENTS_ROOT / 'status'})"
    return f"{name} is not installed: {text[0] if text else 'install failed'}"
