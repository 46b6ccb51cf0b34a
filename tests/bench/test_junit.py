"""The bench reads its checks' pytest JUnit reports (the run's grading never reads one)."""

from __future__ import annotations

from pathlib import Path

from ledger.bench.checks import parse_junit


def test_parse_junit_reads_every_outcome(tmp_path: Path) -> None:
    """failure, error, skipped and passed cases are counted and listed; messages are redacted."""
    xml = tmp_path / "r.xml"
    xml.write_text("""<?xml version="1.0"?><testsuites><testsuite>
      <testcase classname="t.m" name="a"/>
      <testcase classname="t.m" name="b"><failure message="assert SECRET == 1&#10;more">x</failure></testcase>
      <testcase classname="t.m" name="c"><error message="boom"/></testcase>
      <testcase classname="t.m" name="d"><skipped message="later"/></testcase>
    </testsuite></testsuites>""")
    parsed = parse_junit(xml, lambda s: s.replace("SECRET", "[redacted]"))
    assert parsed is not None
    counts, tests = parsed
    assert counts == {"passed": 1, "failed": 1, "error": 1, "skipped": 1}
    assert tests[1] == {"id": "t.m::b", "outcome": "failed", "message": "assert [redacted] == 1"}
    assert parse_junit(tmp_path / "missing.xml", str) is None
    (tmp_path / "bad.xml").write_text("<testsuite")
    assert parse_junit(tmp_path / "bad.xml", str) is None
