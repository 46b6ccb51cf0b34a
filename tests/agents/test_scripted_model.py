"""The scripted model server itself: turns in order, usage, injected failures, auth, records."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.agents.scripted_model import (
    ScriptedModel,
    drop,
    fail,
    say,
    script_totals,
    tool_call,
)


def post(url: str, body: dict[str, Any], key: str | None = None) -> tuple[int, Any, dict[str, str]]:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def test_turns_come_in_order_with_tool_calls_and_usage(scripted_model: Any) -> None:
    """Each request gets the next turn: a tool call with JSON arguments, then a final answer."""
    server = scripted_model([tool_call("bash", {"command": "ls"}, input_tokens=11, output_tokens=3),
                             say("done", input_tokens=7, output_tokens=2)])
    url = server.base_url + "/chat/completions"
    status, first, _ = post(url, {"model": "m1", "messages": []})
    assert status == 200
    msg = first["choices"][0]["message"]
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["tool_calls"][0]["function"]["name"] == "bash"
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    assert first["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    assert first["model"] == "m1"
    status, second, _ = post(url, {"model": "m1", "messages": []})
    assert second["choices"][0]["message"]["content"] == "done"
    assert second["choices"][0]["finish_reason"] == "stop"
    assert [r.turn for r in server.requests] == [0, 1]
    assert server.requests[0].json() == {"model": "m1", "messages": []}
    assert script_totals(server.script) == (18, 5)


def test_exhausted_script_answers_500(scripted_model: Any) -> None:
    """A call beyond the script fails loudly instead of hanging or repeating a turn."""
    server = scripted_model([say("only")])
    url = server.base_url + "/chat/completions"
    assert post(url, {})[0] == 200
    status, body, _ = post(url, {})
    assert status == 500 and "no more turns" in body["error"]["message"]
    assert server.requests[-1].turn is None


def test_injected_failures_and_retry_after(scripted_model: Any) -> None:
    """429 (with Retry-After) and 500 turns answer with that status and count as turns."""
    server = scripted_model([fail(429, "slow down", retry_after=0.5), fail(500), say("ok")])
    url = server.base_url + "/chat/completions"
    status, body, headers = post(url, {})
    assert status == 429 and body["error"]["message"] == "slow down"
    assert headers.get("Retry-After") == "0.5"
    assert post(url, {})[0] == 500
    assert post(url, {})[0] == 200
    assert script_totals(server.script) == (100, 20)


def test_api_key_required(scripted_model: Any) -> None:
    """With api_key set, a missing or wrong key gets 401 and consumes no turn."""
    server = scripted_model([say("hi")], api_key="k-123456789")
    url = server.base_url + "/chat/completions"
    assert post(url, {})[0] == 401
    assert post(url, {}, key="wrong-key-000")[0] == 401
    assert server.used == 0
    assert post(url, {}, key="k-123456789")[0] == 200
    assert server.requests[-1].headers["authorization"] == "Bearer k-123456789"


def test_delay_is_counted_in_server_time(scripted_model: Any) -> None:
    """A delayed turn takes at least its delay, and server_s says so."""
    server = scripted_model([say("slow", delay_s=0.2)])
    start = time.perf_counter()
    post(server.base_url + "/chat/completions", {})
    assert time.perf_counter() - start >= 0.2
    assert server.requests[0].server_s >= 0.2


def test_dropped_connection(scripted_model: Any) -> None:
    """A drop turn closes the connection without any answer."""
    server = scripted_model([drop()])
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        post(server.base_url + "/chat/completions", {})


def test_unknown_path_is_404_and_recorded(scripted_model: Any) -> None:
    """A path no protocol claims gets 404, is recorded, and consumes no turn."""
    server = scripted_model([say("x")])
    status, _body, _ = post(server.origin + "/v1/responses", {})
    assert status == 404
    assert server.requests[0].protocol is None and server.used == 0


def test_stop_frees_the_port() -> None:
    """After stop() nothing listens on the port any more."""
    server = ScriptedModel([say("x")]).start()
    url = server.base_url + "/chat/completions"
    server.stop()
    with pytest.raises(urllib.error.URLError):
        post(url, {})
