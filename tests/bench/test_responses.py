"""Answers out of each agent CLI's output format, and files out of answers."""

from __future__ import annotations

import json

import pytest

from evaluators.responses import (
    code_blocks,
    code_files,
    extract_answer,
    language_of,
    python_syntax_ok,
    render_files,
)

ANSWER = "Here it is.\n```python\n# FILE: a.py\nx = 1\n```"


def jl(*objs: object) -> str:
    return "\n".join(json.dumps(o) for o in objs) + "\n"


@pytest.mark.parametrize("stdout,fmt", [
    (jl({"type": "system", "subtype": "init", "model": "m"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "draft"}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": ANSWER,
         "total_cost_usd": 0.1}), "result-json"),
    (json.dumps([{"type": "system"}, {"type": "result", "subtype": "success", "result": ANSWER}]),
     "result-json"),
    (json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": ANSWER}),
     "result-json"),
    (jl({"type": "thread.started", "thread_id": "t"},
        {"type": "item.completed", "item": {"id": "1", "type": "agent_message", "text": "first"}},
        {"type": "item.completed", "item": {"id": "2", "type": "agent_message", "text": ANSWER}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}}), "codex-jsonl"),
    (json.dumps({"session_id": "s", "response": ANSWER, "stats": {}}, indent=2), "gemini-json"),
    (jl({"type": "init", "model": "g"},
        {"type": "message", "role": "user", "content": "ignored"},
        {"type": "message", "role": "assistant", "content": ANSWER[:10], "delta": True},
        {"type": "message", "role": "assistant", "content": ANSWER[10:], "delta": True},
        {"type": "result", "status": "success", "stats": {}}), "gemini-stream"),
    (ANSWER, "text"),
])
def test_extract_answer_from_each_format(stdout: str, fmt: str) -> None:
    """The final answer is found in Claude, Cursor, Codex and Gemini output, and in plain text."""
    answer = extract_answer(stdout)
    assert answer.text == ANSWER and answer.error is None and answer.format == fmt


@pytest.mark.parametrize("stdout,needle", [
    (jl({"type": "result", "subtype": "success", "is_error": True, "result": "429",
         "terminal_reason": "api_error"}), "api_error"),
    (jl({"type": "result", "subtype": "error_max_turns", "is_error": True}), "error_max_turns"),
    (jl({"type": "thread.started"}, {"type": "turn.failed", "error": {"message": "quota"}}), "quota"),
    (json.dumps({"session_id": "s", "error": {"type": "x", "message": "bad key"}, "stats": {}}),
     "bad key"),
    (jl({"type": "init"}, {"type": "result", "status": "error", "error": {"message": "boom"}}),
     "boom"),
])
def test_errors_reported_in_the_output_are_kept(stdout: str, needle: str) -> None:
    """An error the CLI reports (even with exit 0) becomes the answer's error."""
    answer = extract_answer(stdout)
    assert answer.error is not None and needle in answer.error


def test_code_blocks_name_their_files_in_every_supported_way() -> None:
    """FILE comment, info string, heading and bold name all name a block's file."""
    text = "\n".join([
        "```python", "# FILE: pkg/one.py", "a = 1", "```",
        "```ts", "// FILE: two.ts", "let b = 2", "```",
        "```python title=three.py", "c = 3", "```",
        "### `four.py`", "```python", "d = 4", "```",
        "**five.py**", "", "```", "e = 5", "```",
        "```python", "print('unnamed')", "```",
        "````markdown", "```python", "# FILE: inner.py", "```", "````",
    ])
    files = code_files(text)
    assert files == {"pkg/one.py": "a = 1\n", "two.ts": "let b = 2\n", "three.py": "c = 3\n",
                     "four.py": "d = 4\n", "five.py": "e = 5\n"}
    assert [b.name for b in code_blocks(text)][-2:] == [None, None]


def test_file_names_cannot_escape() -> None:
    """Absolute paths and .. segments are not file names."""
    text = "```python\n# FILE: ../evil.py\nx = 1\n```\n```python\n# FILE: /etc/passwd\nx\n```"
    assert code_files(text) == {}


def test_last_block_for_a_name_wins() -> None:
    """A file given twice keeps its later version."""
    text = "```python\n# FILE: a.py\nold = 1\n```\n```python\n# FILE: a.py\nnew = 2\n```"
    assert code_files(text) == {"a.py": "new = 2\n"}


def test_render_files_round_trips() -> None:
    """Files rendered into the answer format parse back to the same files."""
    files = {"a.py": "x = 1\n", "b.ts": "let y = 2\n"}
    assert code_files(render_files(files)) == files


def test_language_and_syntax() -> None:
    """The language follows the file names; syntax errors are found without running code."""
    assert language_of({"a.py": "", "b.py": "", "c.ts": ""}) == "python"
    assert language_of({}, "```typescript\nlet a = 1\n```") == "typescript"
    assert language_of({}) == "unknown"
    assert python_syntax_ok({"a.py": "def f(:\n"}) is False
    assert python_syntax_ok({"a.py": "x = 1\n"}) is True
    assert python_syntax_ok({"a.ts": "x"}) is None
