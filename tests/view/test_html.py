"""The report's HTML without a browser: badges of attempts that did not run to their end, the
"no cost recorded" chart, the summary data of each attempt's detail block, hostile text escaped."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from ledger.journal.journal import Journal
from ledger.view import load_report
from ledger.view.html import render_html
from tests.view.fixtures import CRASH_RUN, HOSTILE, RUN, build, build_crashes, write


def _page(tmp_path: Path, builder_run: str) -> str:
    home = tmp_path / "L"
    home.mkdir()
    write(home, build_crashes() if builder_run == CRASH_RUN else build())
    with Journal.open(home / "journal.db") as j:
        return render_html([load_report(j, builder_run)])


def _rows(page: str) -> dict[str, str]:
    return {m.group(1).split("/")[1]: m.group(0) for m in
            re.finditer(r'<tr class="row"[^>]*data-attempt="([^"]+)".*?</tr>', page)}


def _block(page: str, i: int) -> dict:
    m = re.search(rf'<script type="application/json" id="a-{i}">(.*?)</script>', page)
    assert m is not None
    return json.loads(m.group(1))


def test_rows_badge_crashed_interrupted_and_harness_failed_attempts(tmp_path: Path) -> None:
    page = _page(tmp_path, CRASH_RUN)
    rows = _rows(page)
    assert re.findall(r'data-badge="([^"]+)"', rows["t0"]) == []
    assert re.findall(r'data-badge="([^"]+)"', rows["t1"]) == ["crashed"]
    assert re.findall(r'data-badge="([^"]+)"', rows["t2"]) == ["interrupted"]
    assert re.findall(r'data-badge="([^"]+)"', rows["t3"]) == ["harness failure"]
    for t in ("t1", "t2", "t3"):  # no bare CLEAN next to an attempt that did not complete
        assert "<td class='ok'>CLEAN</td>" not in rows[t]
        assert "CLEAN <span class=meta>(attempt " in rows[t]
    assert "<td class='ok'>CLEAN</td>" in rows["t0"]
    assert [b[0] for b in _block(page, 3)["summary"]["badges"]] == ["harness failure"]
    assert re.findall(r'data-badge="([^"]+)"', rows["t4"]) == ["harness failure"]
    assert "sandbox.failed" in _block(page, 4)["summary"]["badges"][0][2]
    assert _block(page, 2)["summary"]["status"] is None


def test_zero_cost_run_has_no_cost_chart(tmp_path: Path) -> None:
    page = _page(tmp_path, CRASH_RUN)
    assert 'data-testid="no-cost">no cost recorded' in page
    assert 'aria-label="score against cost"' not in page


def test_run_with_costs_keeps_its_cost_chart(tmp_path: Path) -> None:
    page = _page(tmp_path, RUN)
    assert "no cost recorded" not in page and 'aria-label="score against cost"' in page
    assert not any("data-badge" in r for r in _rows(page).values())


def test_hostile_error_text_stays_escaped(tmp_path: Path) -> None:
    page = _page(tmp_path, CRASH_RUN)
    assert HOSTILE not in page  # neither in a row, a badge title nor a JSON block
    assert escape(HOSTILE, quote=True) in page  # the harness failure's error, in its badge title
    assert page.count("<script") == page.count("</script>")
    assert "<img" not in page
