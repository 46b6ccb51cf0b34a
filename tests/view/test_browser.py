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
from tests.view.fixtures import HOSTILE, RUN, build, write

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
