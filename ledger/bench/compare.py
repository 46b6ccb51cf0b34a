"""``ledger bench --compare [RUN_A RUN_B]`` and ``--replay-last``: earlier bench runs.

A run is found in the journal (a run id or unique prefix; its leaderboard is recomputed from the
entries) or as a v2.0 report file of the existing tool's format (a path, the file's NNN number,
or the run id in a ``benchmark-NNN-<run_id>.json`` name in the report folder), so exports written
before switching compare too. With no ids the last two bench runs are compared (journal first,
else the two newest report files). :func:`compare_exports` is pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from evaluators.leaderboard import export_v2, leaderboard_from_entries
from ledger.errors import MalformedInput, NotFound, UsageError
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal

# The report files `ledger bench` writes (cli/bench_report.py): benchmark-NNN-<slug>.md|json
REPORT_NAME = re.compile(r"^benchmark-(\d{3,})-(.+)\.(md|json)$")


def _journal_bench_runs(journal: Journal | None) -> list[str]:
    if journal is None:
        return []
    runs = [str(e.run) for e in journal.entries(kind="bench.started") if e.run is not None]
    runs.reverse()
    return runs  # newest first


def _report_files(out_dir: Path) -> list[tuple[int, Path]]:
    if not out_dir.is_dir():
        return []
    found = []
    for p in out_dir.iterdir():
        m = REPORT_NAME.match(p.name)
        if m and m.group(3) == "json":
            found.append((int(m.group(1)), p))
    return sorted(found, reverse=True)  # newest first


def load_export_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise NotFound(f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise MalformedInput(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("leaderboard"), list):
        raise MalformedInput(f"{path} is not a benchmark report (no leaderboard)")
    if str(data.get("version")) != "2.0":
        raise MalformedInput(f"{path}: report version {data.get('version')!r}; expected '2.0'")
    return data


Read = Callable[[Journal, str], Iterable[Entry]]
"""How a run's entries are read: verified first (cli/reading.py ``Reader.entries``), or as stored."""


def _as_stored(journal: Journal, run: str) -> Iterable[Entry]:
    return journal.entries(run=run)


def load_run(ref: str, journal: Journal | None, out_dir: Path, read: Read = _as_stored) -> dict[str, Any]:
    """The v2.0 export of a bench run named by ``ref`` (see the module docstring)."""
    path = Path(ref)
    if ref.endswith(".json") and path.is_file():
        return load_export_file(path)
    if journal is not None:
        bench = _journal_bench_runs(journal)
        exact = [r for r in bench if r == ref]
        matches = exact or [r for r in bench if r.startswith(ref)]
        if len(matches) > 1:
            raise NotFound(f"bench run prefix {ref!r} is ambiguous: {', '.join(matches[:5])}")
        if matches:
            return export_v2(leaderboard_from_entries(read(journal, matches[0])))
    for number, p in _report_files(out_dir):
        m = REPORT_NAME.match(p.name)
        assert m is not None
        if (ref.isdigit() and int(ref) == number) or m.group(2) == ref or m.group(2).startswith(ref):
            return load_export_file(p)
    raise NotFound(f"no bench run or report matches {ref!r} (journal, or {out_dir}/)")


def default_pair(journal: Journal | None, out_dir: Path, read: Read = _as_stored
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The last two bench runs, older first."""
    runs = _journal_bench_runs(journal)
    if len(runs) >= 2 and journal is not None:
        return (export_v2(leaderboard_from_entries(read(journal, runs[1]))),
                export_v2(leaderboard_from_entries(read(journal, runs[0]))))
    files = _report_files(out_dir)
    if len(files) >= 2:
        return load_export_file(files[1][1]), load_export_file(files[0][1])
    raise NotFound("--compare needs two earlier bench runs (in the journal, or report files in "
                   f"{out_dir}/); found {max(len(runs), len(files))}")


def _delta(a: Any, b: Any) -> float | None:
    if a is None or b is None:
        return None
    return round(float(b) - float(a), 6)


def compare_exports(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Per-agent deltas (quality, time_s, cost_usd) from run A to run B, and warnings."""
    rows_a = {str(r.get("provider")): r for r in a.get("leaderboard", []) if isinstance(r, dict)}
    rows_b = {str(r.get("provider")): r for r in b.get("leaderboard", []) if isinstance(r, dict)}
    warnings = []
    if a.get("task_hash") != b.get("task_hash"):
        warnings.append(f"task hashes differ ({str(a.get('task_hash'))[:12]} vs "
                        f"{str(b.get('task_hash'))[:12]}): the runs benchmarked different tasks, "
                        "so the comparison may be misleading")
    if a.get("mode") != b.get("mode"):
        warnings.append(f"modes differ ({a.get('mode')} vs {b.get('mode')})")
    if a.get("options") != b.get("options"):
        warnings.append("options differ (tests/review rounds change the quality formula)")
    only_a = sorted(set(rows_a) - set(rows_b))
    only_b = sorted(set(rows_b) - set(rows_a))
    agents = []
    for name in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(name, {}), rows_b.get(name, {})
        agents.append({
            "provider": name,
            "quality_a": ra.get("quality"), "quality_b": rb.get("quality"),
            "quality_delta": _delta(ra.get("quality"), rb.get("quality")),
            "time_a": ra.get("time_s"), "time_b": rb.get("time_s"),
            "time_delta": _delta(ra.get("time_s"), rb.get("time_s")),
            "cost_a": ra.get("cost_usd"), "cost_b": rb.get("cost_usd"),
            "cost_delta": _delta(ra.get("cost_usd"), rb.get("cost_usd")),
            "status_a": ra.get("status"), "status_b": rb.get("status"),
        })
    return {"run_a": a.get("run_id"), "run_b": b.get("run_id"),
            "task_hash_a": a.get("task_hash"), "task_hash_b": b.get("task_hash"),
            "same_task": a.get("task_hash") == b.get("task_hash"),
            "agents": agents, "only_in_a": only_a, "only_in_b": only_b, "warnings": warnings}


def compare_runs(refs: tuple[str, ...], journal: Journal | None, out_dir: Path,
                 read: Read = _as_stored) -> dict[str, Any]:
    """The leaderboards of two bench runs compared; runs in the journal are read through ``read``."""
    if len(refs) == 0:
        a, b = default_pair(journal, out_dir, read)
    elif len(refs) == 2:
        a, b = load_run(refs[0], journal, out_dir, read), load_run(refs[1], journal, out_dir, read)
    else:
        raise UsageError("--compare takes no run ids (the last two runs) or exactly two")
    return compare_exports(a, b)


def latest_task(journal: Journal | None, out_dir: Path) -> tuple[str, str | None, str, int]:
    """``(source, snapshot, run_id, task_chars)`` of the most recent bench run."""
    if journal is not None:
        for e in reversed(list(journal.entries(kind="bench.started"))):
            d = e.data
            return (str(d.get("task_source")), d.get("task_snapshot"), str(e.run),
                    int(d.get("task_chars") or 0))
    files = _report_files(out_dir)
    if files:
        data = load_export_file(files[0][1])
        snap = data.get("task_snapshot")
        return (str(data.get("task_source")), snap if isinstance(snap, str) else None,
                str(data.get("run_id")), len(snap) if isinstance(snap, str) else 0)
    raise NotFound("--replay-last: no earlier bench run (journal or report files) to replay")


__all__ = ["compare_exports", "compare_runs", "default_pair", "latest_task", "load_export_file",
           "load_run"]
