"""``ledger export --format inspect``: a run as an Inspect AI log file (``.eval``), no Inspect needed.

The ``.eval`` format is a zip archive of JSON members (Inspect AI 0.3.x, log version 2):
``header.json`` (the EvalLog without samples), ``samples/<id>_epoch_<n>.json`` (one EvalSample per
member), ``summaries.json`` and ``_journal/start.json``. This module writes them from the report
model (:class:`evaluators.explore.RunReport`), so it is a mapping, not a second parser:

    sample id     the task id (``task/agent`` when the run has more than one agent)
    epoch         the repeat
    input         the prompt as given to the agent (``agent.started.prompt``)
    messages      the prompt, then tool calls (assistant) and their results (tool), model turns
    events        tool events (call + result), sandbox events for fs.read/fs.write/proc.exec,
                  info events for network connections
    scores        golden (the attempt's golden score), hidden_tests, signals, attestation
    model_usage   tokens and cost of the agent
    metadata      attempt id, outcome, category, diff digest, and under ``ledger``: the run's
                  content digest, the covering checkpoint note, the attestation hash, verdict and
                  the inclusion proof of the attestation entry in that checkpoint

The target is empty: the hidden tests are committed in the journal, never written into it.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluators.explore import AttemptDetail, RunReport

LOG_VERSION = 2
ProofFn = Callable[[int, int], dict[str, Any] | None]  # (seq, tree size) -> inclusion proof JSON


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()


def _uuid(*parts: Any) -> str:
    """A stable 22-character id (Inspect uses shortuuid-like ids; any unique string is read)."""
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:22]


def _arguments(text: str) -> dict[str, Any]:
    return {"input": text}


def _messages_and_events(d: AttemptDetail) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    messages: list[dict[str, Any]] = []
    if d.prompt is not None:
        messages.append({"id": _uuid(d.attempt, "prompt"), "role": "user", "content": d.prompt,
                         "source": "input"})
    events: list[dict[str, Any]] = []
    by_seq = {t.seq: t for t in d.timeline}
    open_calls: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
    for item in d.transcript:
        ts = _iso(by_seq[item.seq].when) if item.seq in by_seq else None
        if item.kind == "tool.call":
            call_id = f"call-{item.seq}"
            args = _arguments(item.text)
            messages.append({"id": _uuid(d.attempt, item.seq), "role": "assistant", "content": "",
                             "tool_calls": [{"id": call_id, "function": item.tool or "tool",
                                             "arguments": args, "type": "function"}]})
            event: dict[str, Any] = {"uuid": _uuid(d.attempt, "ev", item.seq), "timestamp": ts, "event": "tool",
                     "type": "function", "id": call_id, "function": item.tool or "tool",
                     "arguments": args, "result": "", "events": []}
            events.append(event)
            open_calls.setdefault(item.tool or "tool", []).append((call_id, event))
        elif item.kind == "tool.result":
            pending = open_calls.get(item.tool or "tool") or []
            call_id, result_of = pending.pop(0) if pending else (f"call-{item.seq}", None)
            msg: dict[str, Any] = {"id": _uuid(d.attempt, item.seq), "role": "tool",
                                   "content": item.text, "tool_call_id": call_id,
                                   "function": item.tool or "tool"}
            if item.is_error:
                msg["error"] = {"type": "unknown", "message": item.text[:500]}
            messages.append(msg)
            if result_of is not None:
                result_of["result"] = item.text
                if item.is_error:
                    result_of["error"] = {"type": "unknown", "message": item.text[:500]}
        elif item.kind in ("model.response", "agent.message") or item.role == "assistant":
            messages.append({"id": _uuid(d.attempt, item.seq), "role": "assistant",
                             "content": item.text, "source": "generate"})
        elif item.kind == "model.request":
            events.append({"uuid": _uuid(d.attempt, "ev", item.seq), "timestamp": ts,
                           "event": "info", "source": "model.request", "data": item.text})
        else:  # agent.output: the agent's own stdout/stderr
            events.append({"uuid": _uuid(d.attempt, "ev", item.seq), "timestamp": ts,
                           "event": "info", "source": f"agent.output/{item.tool}",
                           "data": item.text})
    for t in d.timeline:
        ts = _iso(t.when)
        if t.kind in ("fs.read", "fs.write"):
            events.append({"uuid": _uuid(d.attempt, "ev", t.seq), "timestamp": ts,
                           "event": "sandbox",
                           "action": "read_file" if t.kind == "fs.read" else "write_file",
                           "file": t.summary})
        elif t.kind == "proc.exec":
            events.append({"uuid": _uuid(d.attempt, "ev", t.seq), "timestamp": ts,
                           "event": "sandbox", "action": "exec", "cmd": t.summary})
        elif t.kind == "net.connect":
            events.append({"uuid": _uuid(d.attempt, "ev", t.seq), "timestamp": ts,
                           "event": "info", "source": "net.connect", "data": t.summary})
    for turn in d.model_turns:
        ts = _iso(by_seq[turn.seq].when) if turn.seq in by_seq else None
        events.append(_model_event(d, turn, ts))
    events.sort(key=lambda e: e.get("timestamp") or "")
    return messages, events


_STOP = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls",
         "content_filter": "content_filter"}


def model_name(d: AttemptDetail, agent: str | None) -> str:
    """The model the attempt's journaled model calls name (the answering one first); else the
    agent's name under ``eval-ledger/`` (a CLI agent whose model the journal does not record)."""
    for turn in d.model_turns:
        if turn.model or turn.requested_model:
            return str(turn.model or turn.requested_model)
    return f"eval-ledger/{agent}"


def _model_event(d: AttemptDetail, turn: Any, ts: str | None) -> dict[str, Any]:
    """An Inspect ``model`` event for one journaled model call (request and response)."""
    name = turn.model or turn.requested_model or model_name(d, d.agent)
    calls = [{"id": cid or f"call-{turn.seq}-{i}", "function": fn or "tool",
              "arguments": _arguments(args), "type": "function"}
             for i, (cid, fn, args) in enumerate(turn.tool_calls)]
    message: dict[str, Any] = {"role": "assistant", "content": turn.content, "source": "generate"}
    if calls:
        message["tool_calls"] = calls
    output: dict[str, Any] = {"model": name, "choices": [
        {"message": message, "stop_reason": _STOP.get(turn.finish_reason or "", "unknown")}]}
    if turn.input_tokens is not None or turn.output_tokens is not None:
        output["usage"] = {"input_tokens": turn.input_tokens or 0,
                           "output_tokens": turn.output_tokens or 0,
                           "total_tokens": (turn.input_tokens or 0) + (turn.output_tokens or 0)}
    if turn.error:
        output["error"] = turn.error
    event: dict[str, Any] = {
        "uuid": _uuid(d.attempt, "model", turn.seq), "timestamp": ts, "event": "model",
        "model": name, "requested_model": turn.requested_model,
        "input": [{"role": role if role in ("system", "user", "assistant", "tool") else "user",
                   "content": text} for role, text in turn.input],
        "tools": [], "tool_choice": "auto", "config": {}, "output": output,
        "error": turn.error,
    }
    if turn.latency_s is not None:
        event["working_time"] = turn.latency_s
    return event


def _scores(d: AttemptDetail, row: dict[str, Any]) -> dict[str, Any]:
    hidden = row["hidden"]
    counts = hidden.get("counts") or {}
    sig = row["signals"]
    att = d.attestation
    return {
        "golden": {"value": d.golden if d.golden is not None else 0.0,
                   "explanation": "the golden score of this attempt alone (docs/SCORING.md)"},
        "hidden_tests": {"value": 1.0 if hidden["passed"] else 0.0,
                         "answer": "passed" if hidden["passed"] else "failed",
                         "explanation": ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                         or ("not run" if not hidden["ran"] else ""),
                         "metadata": {"tests": {t.id: t.outcome for t in d.tests
                                                if t.suite == "hidden"}}},
        "signals": {"value": (sig["passed"] / sig["total"]) if sig["total"] else 0.0,
                    "explanation": f"{sig['passed']} of {sig['total']} completion signals passed"},
        "attestation": {"value": att.verdict if att is not None else "NONE",
                        "explanation": (f"isolation {att.isolation}, {att.match_count} match(es)"
                                        if att is not None else "no attestation recorded")},
    }


def _sample(report: RunReport, row: dict[str, Any], multi_agent: bool,
            proof: ProofFn) -> dict[str, Any]:
    d = report.attempts.get(row["attempt"]) or AttemptDetail(attempt=row["attempt"])
    messages, events = _messages_and_events(d)
    sample_id = f"{row['task']}/{row['agent']}" if multi_agent else row["task"]
    model = model_name(d, row["agent"])
    usage: dict[str, Any] = {}
    if d.tokens_in is not None or d.tokens_out is not None or row["cost_usd"] is not None:
        usage[model] = {"input_tokens": d.tokens_in or 0, "output_tokens": d.tokens_out or 0,
                        "total_tokens": (d.tokens_in or 0) + (d.tokens_out or 0)}
        if row["cost_usd"] is not None:
            usage[model]["total_cost"] = row["cost_usd"]
    att = d.attestation
    cp = report.checkpoint
    ledger_meta: dict[str, Any] = {
        "run": report.run_id, "content_digest": report.content_digest,
        "checkpoint": cp.get("note") if cp else None,
        "attestation_hash": att.hash if att else None,
        "attestation_verdict": att.verdict if att else None,
        "attestation_seq": att.seq if att else None,
        "attestation_proof": proof(att.seq, cp["size"]) if att and cp else None,
        "verify": f"ledger verify {att.hash}" if att else "ledger verify",
    }
    completion = {"model": model, "choices": [], "completion": ""}
    return {
        "id": sample_id, "epoch": row["repeat"] or 1, "input": d.prompt or "", "target": "",
        "messages": messages, "output": completion, "scores": _scores(d, row),
        "metadata": {"attempt": row["attempt"], "agent": row["agent"], "try": row["try"],
                     "tier": row["tier"], "status": row["status"], "passed": row["passed"],
                     "category": row["category"], "wall_s": row["wall_s"],
                     "cost_usd": row["cost_usd"], "diff_sha256": d.diff_sha256,
                     "diff": d.patch, "prompt_recorded": d.prompt is not None,
                     "ledger": ledger_meta},
        "store": {}, "events": events, "model_usage": usage, "role_usage": {},
        "started_at": _iso(d.started_at or d.first_ts),
        "completed_at": _iso(d.finished_at or d.last_ts),
        "total_time": row["wall_s"], "working_time": row["wall_s"],
        "uuid": _uuid(report.run_id, row["attempt"]),
        "attachments": {}, "events_data": {"messages": [], "calls": []},
    }


def _summary(sample: dict[str, Any]) -> dict[str, Any]:
    keep = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage", "role_usage",
            "started_at", "completed_at", "total_time", "working_time", "uuid")
    out = {k: sample[k] for k in keep if k in sample}
    out["metadata"] = {k: v for k, v in sample["metadata"].items() if k not in ("diff",)}
    out["completed"] = True
    out["message_count"] = len(sample["messages"])
    return out


def _results(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scores = []
    for name in ("golden", "hidden_tests", "signals"):
        values = [float(s["scores"][name]["value"]) for s in samples]
        mean = sum(values) / len(values) if values else 0.0
        scores.append({"name": name, "scorer": name, "params": {},
                       "metrics": {"mean": {"name": "mean", "value": mean, "params": {}}}})
    return {"total_samples": len(samples), "completed_samples": len(samples), "scores": scores}


def eval_log_members(report: RunReport, proof: ProofFn) -> dict[str, Any]:
    """The JSON members of the ``.eval`` archive, by name."""
    rows = report.views["attempts"]
    multi = len({r["agent"] for r in rows}) > 1
    samples = [_sample(report, r, multi, proof) for r in rows]
    agents = sorted({r["agent"] for r in rows if r["agent"]})
    models = sorted({s["output"]["model"] for s in samples})
    # Inspect's log names one model: the one every sample used; with several, the first, and
    # every sample's own model stays in its output and usage
    model = models[0] if models else "eval-ledger/none"
    created = _iso(report.first_ts) or _iso(0)
    eval_spec = {
        "eval_id": _uuid(report.content_digest), "run_id": report.run_id, "created": created,
        "task": f"eval-ledger/{report.run_id}", "task_id": report.run_id, "task_version": 0,
        "task_attribs": {}, "task_args": {}, "task_args_passed": {}, "solver_args_passed": {},
        "dataset": {"name": "eval-ledger golden tasks", "samples": len(samples),
                    "sample_ids": sorted({s["id"] for s in samples})},
        "model": model, "model_generate_config": {}, "model_args": {}, "config": {},
        "packages": {"eval-ledger": report.harness_version or "unknown"},
        "metadata": {"agents": agents, "models": models, "content_digest": report.content_digest,
                     "checkpoint": report.checkpoint.get("note") if report.checkpoint else None,
                     "status": report.views["status"]},
    }
    usage: dict[str, dict[str, Any]] = {}
    for s in samples:
        for m, u in s["model_usage"].items():
            total = usage.setdefault(m, {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
            for k in ("input_tokens", "output_tokens", "total_tokens"):
                total[k] += u.get(k, 0)
            if "total_cost" in u:
                total["total_cost"] = total.get("total_cost", 0.0) + u["total_cost"]
    plan = {"name": "plan", "steps": [], "config": {}}
    start = {"version": LOG_VERSION, "eval": eval_spec, "plan": plan}
    header = {
        "version": LOG_VERSION,
        "status": "success" if report.views["status"] == "finished" else "started",
        "eval": eval_spec, "plan": plan, "results": _results(samples),
        "stats": {"started_at": created, "completed_at": _iso(report.last_ts) or created,
                  "model_usage": usage, "role_usage": {}},
        "invalidated": False, "tags": ["eval-ledger"], "metadata": {},
    }
    members: dict[str, Any] = {"_journal/start.json": start, "header.json": header,
                               "summaries.json": [_summary(s) for s in samples]}
    for s in samples:
        name = str(s["id"]).replace("/", "_")
        members[f"samples/{name}_epoch_{s['epoch']}.json"] = s
    return members


def write_eval(report: RunReport, path: Path, proof: ProofFn) -> dict[str, Any]:
    """Write the ``.eval`` archive (a temporary file renamed into place); what was written."""
    members = eval_log_members(report, proof)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, value in members.items():
                z.writestr(name, json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # no stray file when the write or the rename fails
    samples = [n for n in members if n.startswith("samples/")]
    return {"path": str(path), "format": "inspect", "samples": len(samples),
            "run": report.run_id, "size_bytes": path.stat().st_size}
