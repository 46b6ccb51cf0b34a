"""Answers out of agent output, and files out of answers: pure text functions.

    extract_answer(stdout)   the final answer in any agent CLI's non-interactive JSON output
    code_blocks(text)        fenced blocks with the file each one names (``# FILE: x.py``)
    code_files(text)         {file name: content}; the last block for a name wins
    language_of(files)       "python" | "typescript" | "javascript" | "unknown"
    python_syntax_ok(files)  every .py file parses (ast; nothing is executed)

The output formats are those of /work/shared/AGENT-CLIS.md: Claude Code and Cursor ``json`` /
``stream-json`` (the ``result`` event), Codex ``exec --json`` (the last ``agent_message`` item),
Gemini ``json`` (``response``) and ``stream-json`` (assistant message deltas). Anything else is
taken as plain text.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_FILE_COMMENT = re.compile(r"^\s*(?:#|//|--|/\*)\s*FILE\s*:\s*`?(?P<name>[^\s`*]+)`?", re.IGNORECASE)
_FILE_HEADER = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*)?\s*(?:FILE\s*:\s*)?`?(?P<name>[\w./-]+\.[A-Za-z0-9]{1,5})`?\s*(?:\*\*)?\s*:?\s*$",
    re.IGNORECASE)
_INFO_NAME = re.compile(r"(?:title|file|filename)\s*=\s*\"?(?P<name>[^\s\"]+)\"?|(?P<bare>[\w./-]+\.[A-Za-z0-9]{1,5})$")
_LANG_BY_INFO = {"python": "python", "py": "python", "python3": "python",
                 "typescript": "typescript", "ts": "typescript", "tsx": "typescript",
                 "javascript": "javascript", "js": "javascript", "jsx": "javascript"}
_LANG_BY_EXT = {".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript",
                ".jsx": "javascript", ".mjs": "javascript"}


# ------------------------------------------------------------------------------- agent output

@dataclass(frozen=True)
class Answer:
    text: str
    error: str | None  # the agent reported a failure in its own output
    format: str  # "claude-json" | "codex-jsonl" | "gemini-json" | "gemini-stream" | "result-json" | "text"


def _json_items(stdout: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    stripped = stdout.strip()
    if stripped.startswith("[") or (stripped.startswith("{") and "\n{" not in stripped):
        try:
            whole = json.loads(stripped)
        except ValueError:
            whole = None
        if isinstance(whole, dict):
            return [whole]
        if isinstance(whole, list):
            return [x for x in whole if isinstance(x, dict)]
    for line in stdout.splitlines():
        line = line.strip()
        if not line or line[0] not in "[{":
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        for item in obj if isinstance(obj, list) else [obj]:
            if isinstance(item, dict):
                items.append(item)
    return items


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b["text"] for b in content
                       if isinstance(b, dict) and b.get("type") in (None, "text")
                       and isinstance(b.get("text"), str))
    return ""


def extract_answer(stdout: str) -> Answer:
    """The agent's final answer text, and any failure its own output reports."""
    items = _json_items(stdout)
    if not items:
        return Answer(stdout.strip(), None, "text")
    results = [i for i in items if i.get("type") == "result"]
    # Claude Code and Cursor: the terminal ``result`` event (or the single json object).
    for res in reversed(results):
        if "result" in res or "subtype" in res or "is_error" in res:
            text = res.get("result") if isinstance(res.get("result"), str) else ""
            error = None
            if res.get("is_error") or str(res.get("subtype", "success")) != "success":
                error = (f"result {res.get('subtype', 'error')}"
                         f"{' (' + str(res.get('terminal_reason')) + ')' if res.get('terminal_reason') else ''}")
            if not text:
                text = _last_assistant(items)
            return Answer(text.strip(), error, "result-json")
    # Codex exec --json.
    if any(str(i.get("type", "")).startswith(("thread.", "turn.", "item.")) for i in items):
        texts = [i["item"]["text"] for i in items
                 if i.get("type") == "item.completed" and isinstance(i.get("item"), dict)
                 and i["item"].get("type") == "agent_message" and isinstance(i["item"].get("text"), str)]
        failed = [i for i in items if i.get("type") == "turn.failed"]
        error = None
        if failed:
            err = failed[-1].get("error")
            error = "turn failed: " + (str(err.get("message", "")) if isinstance(err, dict) else str(err))
        return Answer(texts[-1].strip() if texts else "", error, "codex-jsonl")
    # Gemini json: {response, stats, error?}.
    for obj in items:
        if "response" in obj or ("stats" in obj and "error" in obj):
            err = obj.get("error")
            error = None
            if err:
                error = str(err.get("message", err)) if isinstance(err, dict) else str(err)
            response = obj.get("response")
            return Answer(response.strip() if isinstance(response, str) else "", error, "gemini-json")
    # Gemini stream-json: assistant message deltas, then a result with a status.
    messages = [i for i in items if i.get("type") == "message" and i.get("role") == "assistant"]
    if messages or any(i.get("type") == "init" for i in items):
        text = "".join(m["content"] for m in messages if isinstance(m.get("content"), str))
        error = None
        for res in results:
            if res.get("status") == "error":
                err = res.get("error")
                error = "result error: " + (str(err.get("message", "")) if isinstance(err, dict) else str(err))
        return Answer(text.strip(), error, "gemini-stream")
    text = _last_assistant(items)
    return Answer(text.strip() if text else stdout.strip(), None, "text")


def _last_assistant(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("type") == "assistant":
            msg = item.get("message")
            text = _content_text(msg.get("content") if isinstance(msg, dict) else None)
            if text:
                return text
    return ""


# ------------------------------------------------------------------------------- code blocks

@dataclass(frozen=True)
class CodeBlock:
    info: str
    language: str  # from the info string or the file extension
    name: str | None
    body: str


def _language(info: str, name: str | None) -> str:
    word = info.strip().split()[0].lower() if info.strip() else ""
    if word in _LANG_BY_INFO:
        return _LANG_BY_INFO[word]
    if name:
        for ext, lang in _LANG_BY_EXT.items():
            if name.lower().endswith(ext):
                return lang
    return "unknown"


def code_blocks(text: str) -> list[CodeBlock]:
    """Fenced code blocks, each with the file it names.

    A block names its file in its first line (``# FILE: order_service.py`` or
    ``// FILE: x.ts``), in its info string (``python title=x.py`` or ``python x.py``), or in the
    line just before the fence (``FILE: x.py``, ``### x.py``, ``**x.py**``).
    """
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                closed = True
                break
            body.append(lines[j])
            j += 1
        name = _block_name(info, body, lines[:i])
        if name is not None and body and _FILE_COMMENT.match(body[0]):
            body = body[1:]
        blocks.append(CodeBlock(info, _language(info, name), name,
                                "\n".join(body) + ("\n" if body else "")))
        i = j + 1 if closed else j
    return blocks


def _block_name(info: str, body: list[str], before: list[str]) -> str | None:
    if body:
        m = _FILE_COMMENT.match(body[0])
        if m:
            return _clean_name(m.group("name"))
    words = info.split(None, 1)
    if len(words) == 2:
        m2 = _INFO_NAME.search(words[1].strip())
        if m2:
            return _clean_name(m2.group("name") or m2.group("bare"))
    elif len(words) == 1 and "." in words[0] and words[0].lower() not in _LANG_BY_INFO:
        return _clean_name(words[0])
    for prev in reversed(before[-2:]):
        if not prev.strip():
            continue
        m3 = _FILE_HEADER.match(prev)
        if m3:
            return _clean_name(m3.group("name"))
        break
    return None


def _clean_name(name: str) -> str | None:
    name = name.strip().strip("`'\"*:,").replace("\\", "/")
    while name.startswith("./"):
        name = name[2:]
    parts = [p for p in name.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts) or name.startswith("/"):
        return None
    return "/".join(parts)


def code_files(text: str) -> dict[str, str]:
    """``{file name: content}`` for every block that names a file (the last block wins)."""
    out: dict[str, str] = {}
    for block in code_blocks(text):
        if block.name:
            out[block.name] = block.body
    return out


def language_of(files: Mapping[str, str], text: str = "") -> str:
    """The main language of an answer: by file extensions, else by the fence info strings."""
    counts: dict[str, int] = {}
    for name in files:
        lang = _language("", name)
        if lang != "unknown":
            counts[lang] = counts.get(lang, 0) + 1
    if not counts and text:
        for block in code_blocks(text):
            if block.language != "unknown":
                counts[block.language] = counts.get(block.language, 0) + 1
    if not counts:
        return "unknown"
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]


def python_syntax_ok(files: Mapping[str, str]) -> bool | None:
    """True when every ``.py`` file parses, False when one does not, None when there is none."""
    py = [body for name, body in files.items() if name.endswith(".py")]
    if not py:
        return None
    for body in py:
        try:
            ast.parse(body)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


def render_files(files: Mapping[str, str], comment: str = "#") -> str:
    """Files back into the answer format: one fenced block per file, ``# FILE:`` first."""
    out = []
    for name, body in files.items():
        lang = _language("", name)
        mark = "//" if lang in ("typescript", "javascript") else comment
        info = {"python": "python", "typescript": "typescript", "javascript": "javascript"}.get(lang, "")
        out.append(f"```{info}\n{mark} FILE: {name}\n{body.rstrip()}\n```")
    return "\n\n".join(out)


__all__ = ["Answer", "CodeBlock", "code_blocks", "code_files", "extract_answer", "language_of",
           "python_syntax_ok", "render_files"]
