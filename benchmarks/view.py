"""Report benchmark: `ledger view` generation time, page size and first render in headless Chromium.

    python benchmarks/view.py              # human summary, 1,000 attempts
    python benchmarks/view.py --json       # the figures as one JSON object
    python benchmarks/view.py --quick      # 100 attempts, a smoke run of a few seconds

A synthetic run (50 tasks x 2 agents x 10 repeats = 1,000 attempts by default; each with 40 file
reads, a diff, hidden and regression tests, a tool call and its result, an attestation: about 53
entries per attempt) is written to a journal in a temporary folder. Measured in the same process, medians over ``--rounds``:

- ``generate_s``  read the run from the journal, build the report model and render the page
  (what ``ledger view -o`` does; target < 3 s for 1,000 attempts); baseline ``report_json_s``:
  read the run and compute the views ``ledger report --json`` prints, serialised as JSON
  (``ratio`` = generate / report_json);
- ``size_bytes``  the page (target < 10 MB); ``detail_bytes`` the part that is per-attempt detail
  JSON, parsed only when an attempt is opened;
- ``browser``     headless Chromium over the DevTools pipe: ``first_render_s`` from navigation to
  the load event of the page (its script has run; target < 2 s), ``open_attempt_s`` to open one
  attempt (click to detail rendered), against ``baseline_load_s`` for a near-empty HTML file in the
  same browser; ``null`` with a reason when Chromium is not installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluators.views import compute_views  # noqa: E402
from ledger.journal.journal import Journal  # noqa: E402
from ledger.view.browser import Browser, BrowserError, find_chromium  # noqa: E402
from ledger.view.html import page_size, render_html  # noqa: E402
from ledger.view.model import load_reports  # noqa: E402
from tests.view.fixtures import RUN, build, write  # noqa: E402

READS = 40  # fs.read entries per attempt (about 53 entries per attempt in all)
TARGETS = {"generate_s": 3.0, "size_bytes": 10 * 1024 * 1024, "first_render_s": 2.0}


def _median(fn: Any, rounds: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _browser(page_path: Path, rounds: int) -> dict[str, Any] | None:
    if find_chromium() is None:
        return {"skipped": "chromium is not installed (apt-get install chromium)"}
    blank = page_path.with_name("blank.html")
    blank.write_text("<!doctype html><title>x</title><p>x</p>", encoding="utf-8")
    loads, blanks, opens = [], [], []
    try:
        with Browser() as b:
            b.load(blank.as_uri())  # warm the browser once
            for _ in range(rounds):
                blanks.append(b.load(blank.as_uri()))
                loads.append(b.load(page_path.as_uri()))
                t0 = time.perf_counter()
                b.evaluate("document.querySelector('tr.row').click();"
                           "document.querySelector('tr.detail [data-testid=verdict]') !== null")
                opens.append(time.perf_counter() - t0)
            errors = b.console_errors()
    except BrowserError as exc:
        return {"skipped": f"chromium failed: {exc}"}
    first = statistics.median(loads)
    base = statistics.median(blanks)
    return {"first_render_s": first, "open_attempt_s": statistics.median(opens),
            "baseline_load_s": base, "ratio": first / base if base else None,
            "console_errors": len(errors),
            "ok": first < TARGETS["first_render_s"]}


def run(attempts: int, rounds: int) -> dict[str, Any]:
    tasks = max(1, attempts // 20)
    repeats = max(1, attempts // (tasks * 2))
    with tempfile.TemporaryDirectory(prefix="ledger-view-bench-") as tmp:
        home = Path(tmp)
        b = build(tasks=tasks, repeats=repeats, reads=READS)
        t0 = time.perf_counter()
        write(home, b)
        build_s = time.perf_counter() - t0
        journal_path = home / "journal.db"

        def report_json() -> str:
            with Journal.open(journal_path, readonly=True) as j:
                return json.dumps(compute_views(j.entries(run=RUN), RUN), sort_keys=True)

        def generate() -> str:
            with Journal.open(journal_path, readonly=True) as j:
                return render_html(load_reports(j, [RUN]))

        base_s, _ = _median(report_json, rounds)
        gen_s, page = _median(generate, rounds)
        page_path = home / "report.html"
        page_path.write_text(page, encoding="utf-8")
        size = page_size(page)
        detail = sum(len(chunk.split("</script>", 1)[0].encode("utf-8"))
                     for chunk in page.split('<script type="application/json"')[1:])
        n = tasks * 2 * repeats
        return {
            "attempts": n, "entries": len(b.entries), "rounds": rounds, "build_s": build_s,
            "report_json_s": base_s, "generate_s": gen_s,
            "ratio": gen_s / base_s if base_s else None,
            "generate_ok": gen_s < TARGETS["generate_s"] * n / 1000 if n else True,
            "size_bytes": size, "size_ok": size < TARGETS["size_bytes"] * n / 1000,
            "detail_bytes": detail, "bytes_per_attempt": size / n if n else None,
            "browser": _browser(page_path, rounds),
            "targets": TARGETS,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="100 attempts, one round")
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    attempts, rounds = (100, 1) if args.quick else (args.attempts, args.rounds)
    out = run(attempts, rounds)
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return
    br = out["browser"] or {}
    print(f"{out['attempts']} attempts, {out['entries']} entries")
    print(f"generate  {out['generate_s']:.3f} s (report --json {out['report_json_s']:.3f} s, "
          f"ratio {out['ratio']:.2f}) {'ok' if out['generate_ok'] else 'MISS'} (< 3 s per 1,000)")
    print(f"size      {out['size_bytes'] / 1e6:.2f} MB, detail JSON {out['detail_bytes'] / 1e6:.2f}"
          f" MB {'ok' if out['size_ok'] else 'MISS'} (< 10 MB per 1,000)")
    if "skipped" in br:
        print(f"browser   skipped: {br['skipped']}")
    else:
        print(f"browser   first render {br['first_render_s']:.3f} s (blank page "
              f"{br['baseline_load_s']:.3f} s), open one attempt {br['open_attempt_s'] * 1000:.1f} ms"
              f" {'ok' if br['ok'] else 'MISS'} (< 2 s)")


if __name__ == "__main__":
    main()
