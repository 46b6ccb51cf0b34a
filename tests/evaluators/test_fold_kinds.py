"""Every kind the harness documents is known to the readers: read by the golden fold, or named as
the harness's own entry the score does not read; never "unknown" (issue 24)."""

from __future__ import annotations

from pathlib import Path

from evaluators.fold import KNOWN_KINDS, UNSCORED_HARNESS_KINDS
from tests.doc_tables import documented_fields

VOCAB = Path(__file__).resolve().parents[2] / "docs" / "VOCABULARY.md"


def test_every_documented_kind_is_known_to_the_readers() -> None:
    """Each kind of docs/VOCABULARY.md's tables is in KNOWN_KINDS or UNSCORED_HARNESS_KINDS."""
    documented = set(documented_fields(VOCAB)) - {"test.baseline"}
    missing = documented - KNOWN_KINDS - UNSCORED_HARNESS_KINDS
    assert not missing, f"documented kinds a reader would call unknown: {sorted(missing)}"
    assert not KNOWN_KINDS & UNSCORED_HARNESS_KINDS


def test_report_names_the_http_agents_model_turns_as_harness_entries() -> None:
    """A view counting model.request entries renders them as the harness's, not as unknown."""
    from cli.report_cmds import render_report
    from evaluators.views import compute_views
    from tests.evaluators.builders import RunBuilder, task

    b = RunBuilder(run="r-20261202T000000Z-cccccc")
    b.started([task("t1")])
    b.attempt("t1", hidden=(1, 0, 0))
    b.add("model.request", {"step": 1})
    b.add("grading", {"isolation": "sandbox"})  # documented, read by no handler of the score
    b.add("future.kind", {"x": 1})
    b.finished()
    text = render_report(compute_views(b.entries, b.run), None, False)
    assert "Harness entries the score does not read: " in text
    line = next(x for x in text.splitlines() if x.startswith("Harness entries"))
    assert "model.request x1" in line and "grading x1" in line
    assert "Ignored entries of unknown kinds: future.kind x1" in text
