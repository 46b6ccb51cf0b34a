"""The wire formats the scripted server speaks to the real CLIs (tests/agents/protocols.py)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.agents.protocols import all_protocols, find_worktree
from tests.agents.scripted_model import ScriptedModel, say, tool_call


def post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.headers.get("Content-Type", ""), resp.read()


def sse(body: bytes) -> list[tuple[str | None, Any]]:
    """(event name, decoded data) per SSE event."""
    out = []
    for block in body.decode().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    wt = tmp_path / "attempt" / "wt"
    (wt / "mathx").mkdir(parents=True)
    (wt / "mathx" / "ops.py").write_text("x = 1\n")
    return wt


def serve(worktree: Path, *turns: Any) -> ScriptedModel:
    solution = worktree.parent / "solution"
    (solution / "mathx").mkdir(parents=True)
    (solution / "mathx" / "ops.py").write_text("x = 2\n")
    return ScriptedModel(list(turns), protocols=all_protocols("mathx/ops.py",
                                                              avoid=(str(solution),)))


def test_anthropic_messages_stream_carries_tool_input_and_usage(worktree: Path) -> None:
    """SSE: message_start input usage, a tool_use block whose JSON delta names the worktree,
    message_delta output usage and stop reason, message_stop."""
    with serve(worktree, tool_call("Read", {"file_path": "{worktree}/mathx/ops.py"},
                                   input_tokens=11, output_tokens=3)) as server:
        kind, body = post(server.origin + "/v1/messages?beta=true", {
            "model": "claude-x", "stream": True, "system": f"Working directory: {worktree}",
            "messages": [{"role": "user", "content": f"cat {worktree.parent}/solution/mathx/ops.py"}]})
    events = sse(body)
    assert kind.startswith("text/event-stream")
    assert [n for n, _ in events] == ["message_start", "content_block_start",
                                      "content_block_delta", "content_block_stop",
                                      "message_delta", "message_stop"]
    assert events[0][1]["message"]["usage"]["input_tokens"] == 11
    assert json.loads(events[2][1]["delta"]["partial_json"]) == {
        "file_path": f"{worktree}/mathx/ops.py"}
    assert events[4][1]["usage"] == {"output_tokens": 3}
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"


def test_openai_responses_stream_ends_with_completed_usage(worktree: Path) -> None:
    """SSE: response.created, the function_call item added and done, response.completed usage."""
    with serve(worktree, tool_call("exec_command", {"cmd": "ls"}, input_tokens=7,
                                   output_tokens=2), say("done")) as server:
        _kind, body = post(server.base_url + "/responses", {"model": "gpt-x", "stream": True,
                                                            "input": []})
        _kind, final = post(server.base_url + "/responses", {"model": "gpt-x", "input": []})
    events = sse(body)
    assert [n for n, _ in events] == ["response.created", "response.output_item.added",
                                      "response.output_item.done", "response.completed"]
    item = events[2][1]["item"]
    assert (item["type"], item["name"], json.loads(item["arguments"])) == (
        "function_call", "exec_command", {"cmd": "ls"})
    assert events[-1][1]["response"]["usage"]["input_tokens"] == 7
    assert [e["sequence_number"] for _n, e in events] == [0, 1, 2, 3]
    assert json.loads(final)["output"][0]["content"][0]["text"] == "done"


def test_gemini_stream_and_plain_name_the_model_of_the_path(worktree: Path) -> None:
    """streamGenerateContent?alt=sse and generateContent: functionCall parts, usageMetadata,
    modelVersion taken from the request path."""
    with serve(worktree, tool_call("read_file", {"file_path": "{worktree}/mathx/ops.py"},
                                   input_tokens=5, output_tokens=1), say("ok")) as server:
        _k, body = post(server.origin + "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
                        "?alt=sse", {"contents": [{"parts": [{"text": f"cwd {worktree}"}]}]})
        _k, plain = post(server.origin + "/v1beta/models/gemini-2.5-pro:generateContent",
                         {"contents": []})
    (_, chunk), = sse(body)
    part = chunk["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {"name": "read_file",
                                    "args": {"file_path": f"{worktree}/mathx/ops.py"}}
    assert chunk["usageMetadata"]["promptTokenCount"] == 5
    assert chunk["modelVersion"] == "gemini-2.5-flash"
    assert json.loads(plain)["modelVersion"] == "gemini-2.5-pro"


def test_chat_completions_stream_puts_usage_in_a_last_chunk(worktree: Path) -> None:
    """Chunks: role/content, the tool call, finish_reason, usage with no choices, [DONE]."""
    with serve(worktree, tool_call("bash", {"command": "ls"}, input_tokens=9,
                                   output_tokens=4)) as server:
        _k, body = post(server.base_url + "/chat/completions",
                        {"model": "gpt-4o-mini", "stream": True, "messages": []})
    events = [d for _n, d in sse(body)]
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["prompt_tokens"] == 9
    calls = events[1]["choices"][0]["delta"]["tool_calls"]
    assert calls[0]["function"]["name"] == "bash"
    assert events[2]["choices"][0]["finish_reason"] == "tool_calls"


def test_worktree_is_the_named_folder_holding_the_marker_but_never_the_avoided_one(
        worktree: Path) -> None:
    """The solution folder (also holding the marker, named first) is skipped."""
    solution = worktree.parent / "solution"
    (solution / "mathx").mkdir(parents=True)
    (solution / "mathx" / "ops.py").write_text("x = 2\n")
    request = {"messages": [f"cat {solution}/mathx/ops.py", f"cwd: {worktree}"]}
    assert find_worktree(request, "mathx/ops.py") == str(solution)
    assert find_worktree(request, "mathx/ops.py", avoid=(str(solution),)) == str(worktree)
    assert find_worktree({"x": "/nowhere/at/all"}, "mathx/ops.py") is None
