"""Benchmark of the built-in HTTP agent: harness overhead per model step, journal bytes per step.

    python benchmarks/http_agent.py [--json] [--steps 48] [--server-delay-ms 0]

A full ``ledger run --agent http:MODEL@URL --trace none`` on the packaged smoke task ``add-clamp``
against the scripted Chat Completions server (tests/agents/scripted_model.py) on 127.0.0.1. The
script makes ``--steps`` model calls; every answer but the last calls a tool the agent does not
have (it answers "unknown tool" at once, so no shell command runs and the step is the harness's
own work), the last calls ``submit``.

* overhead per model step: on the server's clock, the time from one request arriving to the next
  one arriving, minus the server's own time on the first (``received_at``, ``server_s``): what the
  agent spent beyond the model (HTTP client, JSON, transcript lines, the next body). Median, p90
  and mean over the steps (target: median <= 5 ms).
* baseline, same run: a bare ``urllib`` client in this process posting the same request bodies,
  in the same order, to a second scripted server; the same measure. ``ratio`` = harness median /
  baseline median.
* journal bytes per step: the stored bytes of the attempt's ``model.request`` +
  ``model.response`` entries per step, of its ``tool.call`` + ``tool.result`` entries per step,
  and of every entry of the attempt per step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.home import LedgerHome  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402
from ledger.run.coordinator import execute_run  # noqa: E402
from ledger.run.plan import RunRequest  # noqa: E402
from tests.agents.scripted_model import ScriptedModel, ScriptedRequest, tool_call  # noqa: E402

MODEL = "gpt-4o-mini"


def script(steps: int, delay_s: float) -> list[Any]:
    turns = [tool_call("think", {"note": f"step {i}"}, input_tokens=300, output_tokens=20,
                       delay_s=delay_s) for i in range(steps - 1)]
    return [*turns, tool_call("submit", {"summary": "done"}, delay_s=delay_s)]


def step_overheads(requests: list[ScriptedRequest]) -> list[float]:
    """Seconds between consecutive requests minus the server's time on the first of each pair."""
    reqs = sorted((r for r in requests if r.turn is not None), key=lambda r: r.received_at)
    return [b.received_at - a.received_at - a.server_s for a, b in zip(reqs, reqs[1:], strict=False)]


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1e3, 3),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e3, 3),
            "mean_ms": round(statistics.fmean(ordered) * 1e3, 3), "steps": len(ordered)}


def raw_client(bodies: list[bytes], turns: list[Any]) -> list[float]:
    """The same bodies posted by a bare urllib client: the baseline."""
    with ScriptedModel(turns) as server:
        url = server.base_url + "/chat/completions"
        opener = urllib.request.build_opener()
        for body in bodies:
            req = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            with opener.open(req, timeout=30) as resp:
                json.loads(resp.read())
        return step_overheads(server.requests)


def journal_bytes(home: LedgerHome, run_id: str, steps: int) -> dict[str, float]:
    with Journal.open(home.journal_path) as j:
        entries = [e for e in j.entries(run=run_id) if isinstance(e.data.get("attempt"), str)]
    size = {k: sum(len(e.raw) for e in entries if e.kind in k)
            for k in (("model.request", "model.response"), ("tool.call", "tool.result"))}
    return {
        "model_entries_per_step": round(size[("model.request", "model.response")] / steps, 1),
        "tool_entries_per_step": round(size[("tool.call", "tool.result")] / steps, 1),
        "attempt_total_per_step": round(sum(len(e.raw) for e in entries) / steps, 1),
        "attempt_entries": len(entries),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--steps", type=int, default=48)  # the agent stops at 50
    parser.add_argument("--server-delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    turns = script(args.steps, args.server_delay_ms / 1e3)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp, ScriptedModel(turns) as server:
        home = LedgerHome(Path(tmp) / ".ledger")
        req = RunRequest(task_ids=("add-clamp",), agents=(f"http:{MODEL}@{server.base_url}",),
                         trace="none")
        t0 = time.perf_counter()
        summary = execute_run(home, req)
        wall = time.perf_counter() - t0
        attempt = summary.results[0]
        if server.used != args.steps or attempt.agent_error:
            print(f"error: the agent made {server.used} of {args.steps} model calls "
                  f"({attempt.outcome})", file=sys.stderr)
            return 1
        harness = step_overheads(server.requests)
        bodies = [r.body for r in server.model_requests()]
        volume = journal_bytes(home, summary.run_id, args.steps)
    baseline = raw_client(bodies, script(args.steps, args.server_delay_ms / 1e3))
    h, b = stats(harness), stats(baseline)
    result = {
        "benchmark": "http_agent",
        "steps": args.steps,
        "server_delay_ms": args.server_delay_ms,
        "overhead_per_step": h,
        "baseline_raw_urllib_per_step": b,
        "ratio_median": round(h["median_ms"] / b["median_ms"], 2) if b["median_ms"] else None,
        "target_median_ms": 5.0,
        "meets_target": h["median_ms"] <= 5.0,
        "journal_bytes_per_step": volume,
        "run_wall_s": round(wall, 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"harness overhead per model step: median {h['median_ms']} ms, p90 {h['p90_ms']} ms "
              f"(raw urllib {b['median_ms']} ms; x{result['ratio_median']}); target <= 5 ms")
        print(f"journal bytes per step: {volume}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
