"""The report in a real browser: headless Chromium over the DevTools protocol (tests/view)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from ledger.view.browser import Browser, find_chromium
from tests.view.fixtures import CRASH_RUN, HOST_PATH, HOSTILE, RUN, build, build_crashes, write

pytestmark = pytest.mark.skipif(find_chromium() is None,
                                reason="chromium is not installed (apt-get install chromium)")
ARTIFACTS = Path(os.environ.get("LEDGER_TEST_ARTIFACTS", "")) if os.environ.get(
    "LEDGER_TEST_ARTIFACTS") else None


def _ledger(home: Path, *args: str) -> str:
    res = CliRunner().invoke(cli, ["--ledger", str(home), *args])
    assert res.exit_code == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    home = tmp_path_factory.mktemp("view") / "L"
    home.mkdir()
    write(home, build())
    out = home.parent / "report.html"
    _ledger(home, "view", "-o", str(out))
    return home, out


@pytest.fixture(scope="module")
def browser(page: tuple[Path, Path]) -> Iterator[Browser]:
    with Browser() as b:
        b.load(page[1].as_uri())
        yield b


def test_page_loads_without_console_errors_or_network(browser: Browser, page: tuple[Path, Path]
                                                     ) -> None:
    """The page's script ran, nothing was logged as an error, only the file itself was fetched."""
    assert browser.evaluate("document.body.getAttribute('data-ready')") == "1"
    assert browser.console_errors() == []
    assert browser.requests() == [page[1].as_uri()]


def test_numbers_shown_equal_report_json(browser: Browser, page: tuple[Path, Path]) -> None:
    """Every number marked with a report field equals `ledger report --json` (value and text)."""
    report = json.loads(_ledger(page[0], "report", "--json"))
    shown = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-k]')).map(e => "
        "[e.getAttribute('data-k'), e.getAttribute('data-v'), e.textContent.trim()])")
    assert len(shown) > 30
    for key, value, text in shown:
        want = report
        for part in key.split("."):
            if isinstance(want, list):
                want = next(x["value"] for x in want if str(x["k"]) == part)
            else:
                want = want[part]
        assert json.loads(value) == want, key
        expected = "-" if want is None else f"{want:.4f}" if isinstance(want, float) else str(want)
        if key.endswith("wall_s_total"):
            expected = f"{want:.1f}"
        assert text == expected, key
    assert browser.evaluate("document.querySelector('[data-k=score]').textContent") == \
        f"{report['score']:.4f}"


def test_opening_an_attempt_shows_its_diff_and_verdict(browser: Browser) -> None:
    """A click on a row renders the attempt's diff, verdict, tests and transcript; hostile text stays text."""
    attempt = f"{RUN}/t1/beta/1/1"
    browser.evaluate(f"document.querySelector('tr.row[data-attempt=\"{attempt}\"]').click()")
    verdict = browser.evaluate("document.querySelector('tr.detail [data-testid=verdict]').textContent")
    diff = browser.evaluate("document.querySelector('tr.detail [data-testid=diff]').textContent")
    assert "DIRTY" in verdict
    assert "+    return a + b" in diff and "-    return a - b" in diff
    detail = browser.evaluate("document.querySelector('tr.detail').textContent")
    assert "tests_hidden/test_h.py::f0" in detail and HOSTILE in detail
    assert browser.evaluate("window.__pwned === undefined") is True
    assert browser.evaluate("document.querySelectorAll('tr.detail img').length") == 0
    browser.evaluate(f"document.querySelector('tr.row[data-attempt=\"{attempt}\"]').click()")
    assert browser.evaluate("document.querySelectorAll('tr.detail').length") == 0
    assert browser.console_errors() == []


def test_screenshot_is_saved_as_an_artifact(browser: Browser, tmp_path: Path) -> None:
    """A PNG screenshot of the page with one attempt open (LEDGER_TEST_ARTIFACTS keeps it)."""
    browser.evaluate("document.querySelector('tr.row').click()")
    target = (ARTIFACTS or tmp_path) / "ledger-view.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    browser.screenshot(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 10_000


def test_filter_hides_rows_that_do_not_match(browser: Browser) -> None:
    """Typing in the filter box hides the attempts of other agents."""
    visible = browser.evaluate(
        "(() => { const f = document.getElementById('filter'); f.value = 'alpha';"
        " f.dispatchEvent(new Event('input'));"
        " const rows = Array.from(document.querySelectorAll('#attempts tr.row'));"
        " const n = rows.filter(r => r.style.display !== 'none').length;"
        " f.value = ''; f.dispatchEvent(new Event('input')); return n; })()")
    assert visible == 6


TABS = ["summary", "diff", "tests", "transcript", "timeline", "raw"]
VISIBLE_PANELS = ("Array.from(document.querySelectorAll('tr.detail [role=tabpanel]'))"
                  ".filter(p => p.offsetParent !== null).map(p => p.getAttribute('data-panel'))")


def _open(browser: Browser, attempt: str) -> None:
    browser.evaluate("document.querySelectorAll('tr.detail').forEach(d => "
                     "d.previousElementSibling.click())")
    browser.evaluate(f"document.querySelector('tr.row[data-attempt=\"{attempt}\"]').click()")


def test_opened_attempt_is_in_tabs_one_panel_shown_at_a_time(browser: Browser) -> None:
    """The opened attempt has six tabs (buttons, role=tab); each click shows its panel alone, with
    aria-selected on its tab; the arrow keys move between tabs; raw holds the JSON."""
    _open(browser, f"{RUN}/t1/beta/1/1")
    tabs = browser.evaluate("Array.from(document.querySelectorAll('tr.detail [role=tab]'))"
                            ".map(t => [t.tagName, t.textContent, t.getAttribute('aria-selected')])")
    assert [t[1] for t in tabs] == TABS
    assert {t[0] for t in tabs} == {"BUTTON"}
    assert [t[2] for t in tabs] == ["true"] + ["false"] * 5
    assert browser.evaluate(VISIBLE_PANELS) == ["summary"]
    for name in TABS:
        browser.evaluate(f"document.querySelector('tr.detail [role=tab][data-tab={name}]').click()")
        assert browser.evaluate(VISIBLE_PANELS) == [name]
        assert browser.evaluate("Array.from(document.querySelectorAll('tr.detail "
                                "[aria-selected=true]')).map(t => t.textContent)") == [name]
    raw = browser.evaluate("document.querySelector('tr.detail [data-panel=raw]').textContent")
    assert json.loads(raw)["attempt"] == f"{RUN}/t1/beta/1/1"
    browser.evaluate("document.querySelector('tr.detail [role=tab][data-tab=diff]').click()")
    diff = browser.evaluate("document.querySelector('tr.detail [data-panel=diff]').innerText")
    assert "+    return a + b" in diff
    # keyboard: ArrowRight from diff selects and focuses tests; End goes to raw
    browser.evaluate("(() => { const t = document.querySelector('tr.detail [data-tab=diff]');"
                     " t.focus(); t.dispatchEvent(new KeyboardEvent('keydown',"
                     " {key: 'ArrowRight', bubbles: true})); })()")
    assert browser.evaluate(VISIBLE_PANELS) == ["tests"]
    assert browser.evaluate("document.activeElement.getAttribute('data-tab')") == "tests"
    tests_text = browser.evaluate("document.querySelector('tr.detail [data-panel=tests]')"
                                  ".innerText")
    assert "tests_hidden/test_h.py::f0" in tests_text and HOSTILE in tests_text
    assert browser.evaluate("window.__pwned === undefined") is True
    assert browser.console_errors() == []


@pytest.fixture(scope="module")
def crash_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    home = tmp_path_factory.mktemp("crash") / "L"
    home.mkdir()
    write(home, build_crashes())
    out = home.parent / "crash.html"
    _ledger(home, "view", "-o", str(out))
    with Browser() as b:
        b.load(out.as_uri())
        yield b


def test_crashed_interrupted_and_harness_failed_attempts_have_badges(crash_browser: Browser
                                                                    ) -> None:
    """Row and summary tab badge a crash, an interrupted attempt and a harness failure; their
    CLEAN verdict never stands bare; the completed attempt has no badge."""
    b = crash_browser
    badges = b.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#attempts tr.row')).map(r =>"
        " [r.getAttribute('data-attempt').split('/')[1], Array.from(r.querySelectorAll("
        "'[data-badge]')).map(x => x.getAttribute('data-badge'))]))")
    assert badges == {"t0": [], "t1": ["crashed"], "t2": ["interrupted"],
                      "t3": ["harness failure"], "t4": ["harness failure"]}
    verdicts = b.evaluate("Array.from(document.querySelectorAll('#attempts tr.row'))"
                          ".map(r => r.children[6].textContent)")
    assert verdicts == ["CLEAN", "CLEAN (attempt crashed)", "CLEAN (attempt interrupted)",
                        "CLEAN (attempt harness failure)", "none (attempt harness failure)"]
    for t, label in (("t1", "crashed"), ("t2", "interrupted"), ("t3", "harness failure")):
        _open(b, f"{CRASH_RUN}/{t}/demo/1/1")
        summary = b.evaluate("document.querySelector('tr.detail [data-panel=summary]').innerText")
        assert b.evaluate("Array.from(document.querySelectorAll('tr.detail [data-panel=summary] "
                          "[data-badge]')).map(x => x.getAttribute('data-badge'))")[0] == label
        assert "did not run to its end" in summary
    assert b.evaluate("window.__pwned === undefined") is True
    assert b.console_errors() == []


def test_summary_tab_shows_no_host_paths_raw_keeps_them(crash_browser: Browser) -> None:
    """Host paths of the attestation scope and the timeline appear as counts or shortened in the
    summary tab; the raw tab keeps the full data."""
    b = crash_browser
    _open(b, f"{CRASH_RUN}/t2/demo/1/1")
    summary = b.evaluate("document.querySelector('tr.detail [data-panel=summary]').innerText")
    assert "read_allowlist" in summary and "2 item(s)" in summary
    assert "/home/someone" not in summary and HOST_PATH not in summary
    assert "wt-1234" in summary  # the worktree, shortened to its name
    b.evaluate("document.querySelector('tr.detail [role=tab][data-tab=raw]').click()")
    raw = b.evaluate("document.querySelector('tr.detail [data-panel=raw]').innerText")
    assert HOST_PATH in raw and "/home/someone/work/wt-1234" in raw


def test_zero_cost_run_says_no_cost_recorded(crash_browser: Browser) -> None:
    """Every cost zero or missing: the cost chart is a sentence, not a chart of one dot."""
    b = crash_browser
    text = b.evaluate("document.querySelector('[data-testid=no-cost]').textContent")
    assert text.startswith("no cost recorded")
    assert b.evaluate("document.querySelectorAll('svg[aria-label=\"score against cost\"]')"
                      ".length") == 0


def test_run_with_costs_draws_the_cost_chart(browser: Browser) -> None:
    assert browser.evaluate("document.querySelectorAll('[data-testid=no-cost]').length") == 0
    assert browser.evaluate("document.querySelectorAll('svg[aria-label=\"score against cost\"]')"
                            ".length") == 1
