"""Fake agent CLIs for the bench tests: small Python programs put on PATH as ``claude``,
``codex``, ``gemini`` and ``cursor-agent``.

Each one speaks its real CLI's non-interactive JSON output format (stream-json for claude, gemini
and cursor-agent, ``exec --json`` JSONL for codex, as the presets invoke them), including the
usage and cost fields, and plays a role chosen from the prompt: contestant (code, tests,
revision), reviewer, or judge. What it does is baked into the script as a JSON config:

    code:   "good" | "bad" | "hang" | "crash" | "garbage" | "empty" | "text:<answer>"
            | "attack:<path>" (tries to read <path> and to write beside it; answers with what
              it tried and what happened, so a test sees the attacker ran)
    judge:  "fair" | "garbage" | "partial" | "self_favor" | "first_best" | "hang" | "crash"
    tests:  "good" | "failing" | "none"
    self_eval: N (the SELF_EVAL_SUMMARY it claims), usage: "report" | "none"

A "good" answer carries ``# impl: solid`` and a "bad" one ``# impl: sloppy``; the fair judge scores
by those markers (20 vs 11 of 20), so the expected leaderboard is known in advance. Every answer
is signed ``# author: <name>`` so a test can see which judge saw which answer.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from tests import agent_env

FIXTURES = Path(__file__).resolve().parent / "fixtures"

SCRIPT = r'''#!__PYTHON__ -S
import json, os, re, signal, sys, time

CONFIG = json.loads(__CONFIG__)
NAME = __NAME__
FIXTURE_TEXT = json.loads(__FIXTURES__)  # embedded: a sandboxed fake sees only its own folder
argv = sys.argv[1:]

if argv and argv[0] == "--version":
    print(f"{NAME} 9.9.9 (fake)")
    sys.exit(0)

prompt = argv[-1] if argv else ""
log = CONFIG.get("log")
if log:
    try:  # outside its sandbox the log is not there: tests that read it run with --sandbox none
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"agent": NAME, "prompt": prompt}) + "\n")
    except OSError:
        pass


def read(name):
    return FIXTURE_TEXT[name]


def attack(path):
    """What an agent that goes for the harness's secrets would do: the outcome of each try."""
    tried = []
    try:
        with open(path, "rb") as fh:
            tried.append("read %s: GOT %d bytes %s" % (path, len(fh.read()), fh.name))
    except OSError as exc:
        tried.append("read %s: %s" % (path, type(exc).__name__))
    try:
        tried.append("listdir %s: %s" % (os.path.dirname(path), sorted(os.listdir(os.path.dirname(path)))))
    except OSError as exc:
        tried.append("listdir %s: %s" % (os.path.dirname(path), type(exc).__name__))
    try:
        with open(os.path.join(os.path.dirname(path), "planted"), "w") as fh:
            fh.write("x")
        tried.append("write beside it: WROTE")
    except OSError as exc:
        tried.append("write beside it: %s" % type(exc).__name__)
    return "ATTACKER RAN\n" + "\n".join(tried) + "\n\n" + block("solution.py", "x = 1\n")


def block(fname, body):
    return "```python\n# FILE: " + fname + "\n" + body.rstrip() + "\n```"


def code_answer(quality):
    marker = "# impl: " + quality + "\n# author: " + NAME + "\n"
    order = read("ref_order_service.py")
    search = read("ref_search_products.py")
    if quality == "sloppy":
        # a real bug the corpus checks catch: any forward jump is allowed
        order = order.replace("ok = _NEXT.get(current) == new_status",
                              "ok = STATUSES.index(new_status) > STATUSES.index(current)")
    if CONFIG.get("corpus_like") or "order_service.py" in prompt:
        body = block("order_service.py", marker + order) + "\n\n" + block("search_products.py", marker + search)
        claim = CONFIG.get("self_eval", 18)
        return body + "\n\nSELF_EVAL_SUMMARY\norder_service: %s/20\nsearch_products: %s/20\n" % (claim, claim)
    body = block("solution.py", marker + "def add(a, b):\n    return a + b\n")
    return body + "\n\nSELF_EVAL_SUMMARY: %s/20\n" % CONFIG.get("self_eval", 18)


def tests_answer():
    mode = CONFIG.get("tests", "good")
    if mode == "none":
        return "I would rather not write tests."
    if "order_service.py" in prompt:
        expect = "pending" if mode == "good" else "shipped"
        t1 = ("import order_service as osvc\n\n\ndef test_create_is_pending():\n"
              "    svc = osvc.OrderService()\n"
              "    order = svc.create('o', 'c', [{'product_id': 'p', 'quantity': 1, 'unit_price': 2}], 'USD')\n"
              "    assert order['status'] == %r\n\n\n"
              "def test_total():\n"
              "    svc = osvc.OrderService()\n"
              "    order = svc.create('o', 'c', [{'product_id': 'p', 'quantity': 2, 'unit_price': 2}], 'USD')\n"
              "    assert order['total'] == 4\n") % expect
        t2 = ("import asyncio\n\nimport search_products as sp\n\n\n"
              "def test_empty_query_fetches_nothing():\n"
              "    calls = []\n\n"
              "    async def fetch(q, o, n):\n"
              "        calls.append(q)\n"
              "        return {'items': [], 'total': 0}\n\n"
              "    async def main():\n"
              "        s = sp.ProductSearch(fetch, debounce_s=0.01)\n"
              "        s.set_query('  ')\n"
              "        await s.wait()\n\n"
              "    asyncio.run(main())\n"
              "    assert calls == []\n")
        return (block("test_order_service.py", t1) + "\n\n" + block("test_search_products.py", t2)
                + "\n\nTEST_EVAL_SUMMARY\nFile count: 2\nTest count: 3\nEdge cases covered: status, total, empty query\n")
    expect = 3 if mode == "good" else 4
    t = "from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == %d\n" % expect
    return block("test_solution.py", t) + "\n\nTEST_EVAL_SUMMARY\nFile count: 1\nTest count: 1\n"


def judge_answer():
    mode = CONFIG.get("judge", "fair")
    if mode == "hang":
        time.sleep(120)
    if mode == "crash":
        sys.stderr.write("Traceback (most recent call last):\nRuntimeError: judge exploded\n")
        sys.exit(3)
    if mode == "garbage":
        return "All of these answers look great to me, well done everyone!"
    parts = re.split(r"^=== Response ([A-Z]+) ===$", prompt, flags=re.M)
    bodies = {}
    for i in range(1, len(parts) - 1, 2):
        bodies[parts[i]] = parts[i + 1]
    labels = sorted(bodies)
    out = {}
    for pos, label in enumerate(labels):
        body = bodies[label]
        if mode == "self_favor":
            s = 5 if ("# author: " + NAME) in body else 0
            scores = [s, s, s, s]
        elif mode == "first_best":
            scores = [5, 5, 5, 5] if pos == 0 else [2, 2, 2, 2]
        elif "# impl: solid" in body or "def test_" in body and "shipped" not in body:
            scores = [5, 5, 5, 5]
        elif "# impl: sloppy" in body or "shipped" in body:
            scores = [3, 3, 2, 3]
        else:
            scores = [4, 4, 4, 4]
        out[label] = dict(zip(["completeness", "accuracy", "actionability", "no_hallucinations"], scores))
        if mode == "partial":
            break
    return "Here are my scores:\n```json\n" + json.dumps(out) + "\n```"


def answer():
    if prompt.startswith("You are an impartial judge"):
        return judge_answer()
    if prompt.startswith("You are reviewing another agent"):
        return "1. The cancellation rule skips a check.\n2. Consider validating inputs earlier."
    if prompt.startswith("Your answer to the task below was reviewed"):
        if "Benchmark corpus task: write tests" in prompt or "write tests" in prompt[:400]:
            return tests_answer()
        return code_answer(CONFIG.get("revised", "solid"))
    if "write tests" in prompt[:200]:
        return tests_answer()
    mode = CONFIG.get("code", "good")
    if mode == "hang":
        time.sleep(120)
    if mode == "crash":
        sys.stderr.write("Segmentation fault (pretend)\n")
        sys.exit(139)
    if mode == "garbage":
        return "\x00\x01 not an answer"
    if mode == "empty":
        return ""
    if mode.startswith("text:"):
        return mode[5:]
    if mode.startswith("attack:"):
        return attack(mode[7:])
    return code_answer("solid" if mode == "good" else "sloppy")


text = answer()
delay = CONFIG.get("delay", 0)
if delay:
    time.sleep(delay)
usage = CONFIG.get("usage", "report") == "report"
tin, tout = 1200 + len(prompt) // 4, 300 + len(text) // 4
emit = lambda obj: print(json.dumps(obj), flush=True)

if NAME == "claude":
    emit({"type": "system", "subtype": "init", "model": "claude-sonnet-4-5", "session_id": "s1",
          "cwd": os.getcwd(), "tools": []})
    emit({"type": "assistant", "message": {"role": "assistant", "model": "claude-sonnet-4-5",
          "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                       "input": {"command": "ls"}}]}, "session_id": "s1"})
    emit({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
          "tool_use_id": "toolu_1", "content": "README.md", "is_error": False}]},
          "session_id": "s1", "tool_use_result": {"stdout": "README.md", "stderr": "",
                                                  "interrupted": False}})
    emit({"type": "assistant", "message": {"role": "assistant", "model": "claude-sonnet-4-5",
          "content": [{"type": "text", "text": text}]}, "session_id": "s1"})
    result = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1200,
              "num_turns": 1, "result": text, "session_id": "s1", "terminal_reason": "completed"}
    if usage:
        result.update({"total_cost_usd": 0.0123,
                       "usage": {"input_tokens": tin, "output_tokens": tout},
                       "modelUsage": {"claude-sonnet-4-5": {"inputTokens": tin, "outputTokens": tout,
                                      "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0,
                                      "costUSD": 0.0123}}})
    emit(result)
elif NAME == "codex":
    emit({"type": "thread.started", "thread_id": "t-1"})
    emit({"type": "turn.started"})
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "thinking"}})
    emit({"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": text}})
    done = {"type": "turn.completed"}
    if usage:
        done["usage"] = {"input_tokens": tin, "cached_input_tokens": 0, "output_tokens": tout}
    emit(done)
elif NAME == "gemini":
    emit({"type": "init", "timestamp": "t", "session_id": "g1", "model": "gemini-2.5-pro"})
    for i in range(0, len(text), 400):
        emit({"type": "message", "timestamp": "t", "role": "assistant", "content": text[i:i + 400],
              "delta": True})
    stats = {"duration_ms": 900, "tool_calls": 0}
    if usage:
        stats.update({"total_tokens": tin + tout, "input_tokens": tin, "output_tokens": tout})
    emit({"type": "result", "timestamp": "t", "status": "success", "stats": stats})
else:
    emit({"type": "system", "subtype": "init", "apiKeySource": "env", "cwd": os.getcwd(),
          "session_id": "c1", "model": "Cursor Composer", "permissionMode": "default"})
    emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
          "session_id": "c1"})
    result = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 800,
              "duration_api_ms": 800, "result": text, "session_id": "c1"}
    if usage:
        result["usage"] = {"inputTokens": tin, "outputTokens": tout, "cacheReadTokens": 0,
                           "cacheWriteTokens": 0}
    emit(result)
'''

CLI_NAMES = ("claude", "codex", "gemini", "cursor-agent")


def write_fake(bin_dir: Path, name: str, **config: Any) -> Path:
    """Write the fake ``name`` into ``bin_dir`` with the given behaviour; return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    text = (SCRIPT.replace("__PYTHON__", sys.executable)
            .replace("__CONFIG__", repr(json.dumps(config)))
            .replace("__NAME__", repr(name))
            .replace("__FIXTURES__", repr(json.dumps(
                {p.name: p.read_text(encoding="utf-8") for p in FIXTURES.glob("ref_*.py")}))))
    path = bin_dir / name
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def install(bin_dir: Path, monkeypatch: Any, fakes: dict[str, dict[str, Any]]) -> Path:
    """Put fakes on PATH (and nothing else that looks like an agent CLI)."""
    for name, config in fakes.items():
        write_fake(bin_dir, name, **config)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), agent_env.system_path()]))
    return bin_dir


def prompts_seen(log: Path) -> list[dict[str, str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
