"""Inspect AI on the five smoke tasks, for ``benchmarks/run.py`` to compare harness time with.

Each task becomes one Inspect sample in the ``local`` sandbox (a temporary folder holding the task's
repo): a scripted model (``mockllm/model`` with fixed outputs) calls Inspect's ``bash`` tool once
to write the reference fix and run the task's public tests, then answers; the scorer copies the
hidden tests in and runs the hidden and regression commands, as eval-ledger's attempt does.
Per sample: Inspect's ``total_time`` and the time its sandbox spent in ``exec`` (child processes,
from the sample's sandbox events); harness time is the difference, the same definition
``run.py`` applies to eval-ledger (wall minus child processes).

Needs ``inspect-ai`` (0.3.285 measured); ``run.py`` reports a skip without it.
"""

from __future__ import annotations

import base64
import shlex
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

from ledger.tasks.loader import iter_files, load_tier

PY = sys.executable


def _argv(command: tuple[str, ...]) -> list[str]:
    return [PY if command[0] == "python" else command[0], *command[1:]]


def _fix_script(task: Any) -> str:
    """Write every file of the reference solution, then run the public tests."""
    parts = []
    for rel, path in iter_files(task.solution_dir):
        b64 = base64.b64encode(path.read_bytes()).decode()
        parts.append(f"mkdir -p {shlex.quote(str(Path(rel).parent))} && "
                     f"echo {b64} | base64 -d > {shlex.quote(rel)}")
    parts.append(shlex.join(_argv(task.regression_command)) + " || true")
    return " && ".join(parts)


@scorer(metrics=[accuracy()])
def hidden_tests(task: Any) -> Any:
    async def score(state: TaskState, target: Target) -> Score:
        box = sandbox()
        for rel, path in iter_files(task.tests_dir):
            await box.write_file(f"{task.hidden_tests_dir}/{rel}", path.read_bytes())
        hidden = await box.exec(_argv(task.hidden_test_command), timeout=120)
        regression = await box.exec(_argv(task.regression_command), timeout=120)
        ok = hidden.success and regression.success
        return Score(value=1 if ok else 0, explanation=hidden.stdout[-200:])

    return score


def inspect_task(task: Any) -> Task:
    files = {rel: str(path) for rel, path in iter_files(task.repo_dir)}
    outputs = [ModelOutput.for_tool_call("mockllm/model", "bash", {"command": _fix_script(task)}),
               ModelOutput.from_content("mockllm/model", "done")]
    for out in outputs:  # given usage: mockllm would otherwise fetch a tokenizer (network)
        out.usage = ModelUsage(input_tokens=100, output_tokens=20, total_tokens=120)
    model = get_model("mockllm/model", custom_outputs=outputs)
    return Task(
        dataset=[Sample(input=task.prompt, target="pass", files=files, id=task.id)],
        solver=[use_tools([bash(timeout=120)]), generate()],
        scorer=hidden_tests(task),
        sandbox="local",
        model=model,
    )


def measure() -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="ledger-bench-inspect-") as logs:
        for task in load_tier("smoke"):
            log, = eval(inspect_task(task), log_dir=logs, display="none", log_format="json",
                        max_samples=1)
            sample, = log.samples or []
            execs = 0.0
            for ev in sample.events:
                if getattr(ev, "event", None) == "sandbox" and ev.action == "exec" \
                        and ev.completed is not None:
                    execs += (ev.completed - ev.timestamp).total_seconds()
            total = float(sample.total_time or 0.0)
            score = next(iter(sample.scores.values())).value if sample.scores else None
            rows.append({"task": task.id, "total_ms": round(1000 * total, 1),
                         "children_ms": round(1000 * execs, 1),
                         "harness_ms": round(1000 * (total - execs), 1), "score": score})
    return {
        "samples": len(rows),
        "total_ms_median": round(statistics.median(r["total_ms"] for r in rows), 1),
        "harness_ms_median": round(statistics.median(r["harness_ms"] for r in rows), 1),
        "per_sample": rows,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=2))
