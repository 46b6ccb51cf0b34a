"""The container backend's figures for ``benchmarks/sandbox.py`` (``--containers``, or alone:
``python benchmarks/sandbox_containers.py [--json] [--pairs 10]``).

* added per attempt: one agent box and one grading box, each running ``/bin/true`` over an
  attempt's folders (what the harness adds around an agent and its grading: box set-up, the
  container's start and removal, the folders handed over and back), with the ``podman`` backend
  and with ``bwrap``, alternating pair by pair so load hits both alike. Reported: both medians and
  their difference (target <= 1.0 s). Measured at the level of the boxes: ``ledger run`` does not
  use the container backend yet.
* cached rebuild: ``ensure_image`` of a Harbor-style Dockerfile and context that was built before
  (target: 0 builds, < 1 s).

Without an engine that runs containers the figures are skipped with the probe's reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.sandbox import registry  # noqa: E402
from ledger.sandbox.container import engine, images  # noqa: E402
from ledger.sandbox.port import AgentRequest, GradingRequest  # noqa: E402

PATH = "/usr/local/bin:/usr/bin:/bin"


def _attempt(backend: Any, tmp: Path) -> float:
    """Seconds for an agent box and a grading box, each running /bin/true once (made to closed)."""
    f = {n: tmp / n for n in ("wt", "home", "scratch")}
    for p in f.values():
        p.mkdir(parents=True)
    start = time.perf_counter()
    for box in (backend.agent_box(AgentRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                               argv=("/bin/true",), path_env=PATH)),
                backend.grading_box(GradingRequest(worktree=f["wt"], home=f["home"], scratch=f["scratch"],
                                                   path_env=PATH))):
        try:
            cmd = box.command(["/bin/true"], {"PATH": PATH, "HOME": str(f["home"])})
            proc = subprocess.run(cmd.argv, env=cmd.env, pass_fds=cmd.pass_fds, preexec_fn=cmd.preexec,
                                  capture_output=True, timeout=120, cwd=f["wt"])
            box.started()
            if proc.returncode != 0 or box.failure(proc.returncode, proc.stderr.decode()):
                raise RuntimeError(f"{box.backend}: /bin/true failed: {proc.stderr.decode()[-300:]}")
        finally:
            box.close()
    return time.perf_counter() - start


def added(pairs: int) -> dict[str, Any]:
    podman, bwrap = registry.get("podman"), registry.get("bwrap")
    times: dict[str, list[float]] = {"podman": [], "bwrap": []}
    with tempfile.TemporaryDirectory(prefix="ledger-bench-containers-") as tmp:
        _attempt(podman, Path(tmp) / "warm")  # the engine's first start outside the figures
        for i in range(pairs):
            for name, backend in (("podman", podman), ("bwrap", bwrap)):
                times[name].append(_attempt(backend, Path(tmp) / f"{name}-{i}"))
    med = {k: statistics.median(v) for k, v in times.items()}
    diff = med["podman"] - med["bwrap"]
    return {"pairs": pairs, "agent_plus_grading_s_median_podman": round(med["podman"], 3),
            "agent_plus_grading_s_median_bwrap": round(med["bwrap"], 3), "added_s_median": round(diff, 3),
            "ratio_podman_vs_bwrap": round(med["podman"] / med["bwrap"], 2), "added_target_s": 1.0,
            "added_ok": diff <= 1.0}


def cached_rebuild(podman: engine.Engine) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ledger-bench-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\nCOPY wordcount.py /app/\n")
        (ctx / "wordcount.py").write_text("def count_words(text):\n    return len(text.split(' '))\n")
        request = images.ImageRequest(dockerfile=ctx / "Dockerfile", context=ctx)
        first = images.ensure_image(podman, request)
        start = time.perf_counter()
        second = images.ensure_image(podman, request)
        took = time.perf_counter() - start
    return {"first_cached": first.cached, "first_s": round(first.seconds, 2), "rebuild_builds": int(not second.cached),
            "rebuild_s": round(took, 3), "rebuild_target_s": 1.0, "rebuild_ok": second.cached and took < 1.0}


def measure(pairs: int) -> dict[str, Any]:
    found = engine.probe()
    if not found.runs:
        return {"skipped": found.reason}
    podman = engine.find_engine(found.engine)
    assert podman is not None
    return {"engine": found.engine, "version": found.version, "added_per_attempt": added(pairs),
            "cached_rebuild": cached_rebuild(podman)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()
    result = {"benchmark": "sandbox-containers", **measure(args.pairs)}
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
