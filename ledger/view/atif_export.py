"""``ledger export --format atif``: each attempt of a run as a Harbor ATIF trajectory.

ATIF (Agent Trajectory Interchange Format, Harbor RFC 0001, written here as ``ATIF-v1.6``: no
field of a later version is used) is one JSON document per agent run. Harbor writes one per trial,
at ``<trial>/agent/trajectory.json``; this export does the same, so ``-o DIR`` gets one folder per
attempt, ``DIR/<task>__<agent>__r<repeat>__t<try>__<attempt id[:8]>/agent/trajectory.json``.
The mapping is from the report model (:class:`evaluators.explore.RunReport`), like the Inspect
export, not a second parser of the journal:

    session_id       the attempt id (unique in the journal)
    agent            name: the agent; version: the harness version; model_name: the model that
                     answered the journaled model calls (None for a CLI agent that names none)
    steps            a ``user`` step with the prompt; per journaled model call an ``agent`` step
                     (content, tool calls, prompt/completion tokens, latency, model); tool calls
                     the journal holds outside model calls as ``agent`` steps of their own; tool
                     results as the observation of the step whose call they answer; the agent's
                     own output (stdout/stderr) as ``agent`` steps, marked in ``extra``
    timestamps       the capture (or append) time of the journal entry behind each step
    final_metrics    the attempt's tokens and cost as the report counts them; total_steps
    extra            under ``eval_ledger``: run, attempt, task, repeat, try, outcome, category,
                     golden score, diff digest, the run's content digest, the covering signed
                     checkpoint, the attestation hash, verdict and its inclusion proof

Steps are numbered from 1 in journal order (the format requires sequential ids).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evaluators.explore import AttemptDetail, RunReport
from ledger.view.inspect_export import model_name as _model_name

SCHEMA_VERSION = "ATIF-v1.6"
ProofFn = Callable[[int, int], dict[str, Any] | None]


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


def _arguments(text: str) -> dict[str, Any]:
    """Tool arguments as a JSON object: the JSON object the agent sent (a model turn's call), else
    the journaled call as the report renders it, ``{"input": text}``."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return {"input": text}
    return value if isinstance(value, dict) else {"input": value}


def _steps(d: AttemptDetail) -> list[dict[str, Any]]:
    by_seq = {t.seq: t.when for t in d.timeline}
    steps: list[dict[str, Any]] = []
    pending: dict[str, list[tuple[dict[str, Any], str]]] = {}  # function -> (step, call id)

    def add(step: dict[str, Any], seq: int | None, at: int | None = None) -> dict[str, Any]:
        step["step_id"] = len(steps) + 1
        ts = _iso(at if at is not None else by_seq.get(seq) if seq is not None else None)
        if ts is not None:
            step["timestamp"] = ts
        steps.append(step)
        return step

    if d.prompt is not None:
        add({"source": "user", "message": d.prompt}, None, d.started_at or d.first_ts)
    turns = sorted(d.model_turns, key=lambda t: t.seq)
    items: list[tuple[int, int, Any]] = [(t.seq, 0, t) for t in turns]
    items += [(i.seq, 1, i) for i in d.transcript]
    covered_calls: dict[str, int] = {}  # calls announced by a model turn, by function
    for _seq, which, obj in sorted(items, key=lambda x: (x[0], x[1])):
        if which == 0:
            turn = obj
            step: dict[str, Any] = {"source": "agent", "message": turn.content or ""}
            name = turn.model or turn.requested_model
            if name:
                step["model_name"] = name
            calls = []
            for i, (cid, fn, args) in enumerate(turn.tool_calls):
                call_id = cid or f"call-{turn.seq}-{i}"
                calls.append({"tool_call_id": call_id, "function_name": fn or "tool",
                              "arguments": _arguments(args)})
                pending.setdefault(fn or "tool", []).append((step, call_id))
                covered_calls[fn or "tool"] = covered_calls.get(fn or "tool", 0) + 1
            if calls:
                step["tool_calls"] = calls
            if turn.input_tokens is not None or turn.output_tokens is not None:
                step["metrics"] = {"prompt_tokens": turn.input_tokens,
                                   "completion_tokens": turn.output_tokens}
            extra: dict[str, Any] = {"journal_seq": turn.seq}
            if turn.finish_reason:
                extra["finish_reason"] = turn.finish_reason
            if turn.latency_s is not None:
                extra["latency_s"] = turn.latency_s
            if turn.error:
                extra["error"] = turn.error
            step["extra"] = extra
            add(step, turn.seq)
            continue
        item = obj
        fn = item.tool or "tool"
        if item.kind == "tool.call":
            if covered_calls.get(fn):  # the model turn that asked for it already holds it
                covered_calls[fn] -= 1
                continue
            call_id = f"call-{item.seq}"
            step = {"source": "agent", "message": "",
                    "tool_calls": [{"tool_call_id": call_id, "function_name": fn,
                                    "arguments": _arguments(item.text)}],
                    "extra": {"journal_seq": item.seq}}
            pending.setdefault(fn, []).append((step, call_id))
            add(step, item.seq)
        elif item.kind == "tool.result":
            queue = pending.get(fn) or []
            result: dict[str, Any] = {"content": item.text,
                                      "extra": {"journal_seq": item.seq, "is_error": item.is_error}}
            if queue:
                owner, call_id = queue.pop(0)
                result["source_call_id"] = call_id
                owner.setdefault("observation", {"results": []})["results"].append(result)
            else:  # a result with no journaled call: the environment's feedback on its own
                add({"source": "system", "message": f"result of {fn}",
                     "observation": {"results": [result]}}, item.seq)
        elif item.kind in ("model.request", "model.response"):
            if turns:  # already a step of its model call
                continue
            if item.kind == "model.response":
                add({"source": "agent", "message": item.text,
                     "extra": {"journal_seq": item.seq}}, item.seq)
        elif item.kind == "agent.message" or item.role == "assistant":
            add({"source": "agent", "message": item.text,
                 "extra": {"journal_seq": item.seq}}, item.seq)
        else:  # agent.output: the agent's own stdout/stderr, its final output
            add({"source": "agent", "message": item.text,
                 "extra": {"journal_seq": item.seq, "agent_output": item.tool}}, item.seq)
    return steps


def trajectory(report: RunReport, row: dict[str, Any], proof: ProofFn) -> dict[str, Any]:
    """The ATIF trajectory of one attempt (a row of the run's ``attempts`` view)."""
    d = report.attempts.get(row["attempt"]) or AttemptDetail(attempt=row["attempt"])
    steps = _steps(d)
    model = _model_name(d, row["agent"]) if d.model_turns else None
    agent: dict[str, Any] = {"name": row["agent"] or "unknown",
                             "version": report.harness_version or "unknown",
                             "extra": {"harness": "eval-ledger"}}
    if model:
        agent["model_name"] = model
    final: dict[str, Any] = {"total_steps": len(steps)}
    if d.tokens_in is not None:
        final["total_prompt_tokens"] = d.tokens_in
    if d.tokens_out is not None:
        final["total_completion_tokens"] = d.tokens_out
    if row["cost_usd"] is not None:
        final["total_cost_usd"] = row["cost_usd"]
    att = d.attestation
    cp = report.checkpoint
    provenance = {
        "run": report.run_id, "attempt": row["attempt"], "task": row["task"],
        "repeat": row["repeat"], "try": row["try"], "tier": row["tier"],
        "status": row["status"], "passed": row["passed"], "category": row["category"],
        "golden": d.golden, "wall_s": row["wall_s"], "diff_sha256": d.diff_sha256,
        "content_digest": report.content_digest,
        "checkpoint": cp.get("note") if cp else None,
        "attestation_hash": att.hash if att else None,
        "attestation_verdict": att.verdict if att else None,
        "attestation_seq": att.seq if att else None,
        "attestation_proof": proof(att.seq, cp["size"]) if att and cp else None,
        "verify": f"ledger verify {att.hash}" if att else "ledger verify",
    }
    return {"schema_version": SCHEMA_VERSION, "session_id": row["attempt"], "agent": agent,
            "steps": steps, "final_metrics": final,
            "notes": "exported by eval-ledger from its verified journal; provenance in "
                     "extra.eval_ledger",
            "extra": {"eval_ledger": provenance}}


def _trial_name(row: dict[str, Any]) -> str:
    raw = f"{row['task']}__{row['agent']}__r{row['repeat'] or 1}__t{row['try'] or 1}__{row['attempt'][:8]}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)


def write_trajectories(report: RunReport, folder: Path, proof: ProofFn) -> dict[str, Any]:
    """Write ``folder/<trial>/agent/trajectory.json`` per attempt (each through a temporary file
    renamed into place); what was written."""
    folder.mkdir(exist_ok=True)
    files = []
    for row in report.views["attempts"]:
        path = folder / _trial_name(row) / "agent" / "trajectory.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(trajectory(report, row, proof), ensure_ascii=False, indent=2) + "\n"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(data, encoding="utf-8")
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
        files.append(str(path.relative_to(folder)))
    return {"path": str(folder), "format": "atif", "schema_version": SCHEMA_VERSION,
            "trajectories": len(files), "files": files, "run": report.run_id}
