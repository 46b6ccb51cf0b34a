"""Looking at runs: the report model read from the journal, the HTML page, the Inspect AI export.

    reports = load_reports(journal, ["r-2026..."])    # RunReport per run (evaluators.explore)
    page = render_html(reports)                        # one self-contained HTML document (str)

The model is a pure projection (``evaluators.explore``); this package only reads the journal to
feed it, renders the page and writes exports. ``cli/view_cmds.py`` parses and calls these.
"""

from __future__ import annotations

from ledger.view.model import load_report, load_reports

__all__ = ["load_report", "load_reports"]
