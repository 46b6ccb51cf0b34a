"""ledger.textbound: the one text bounding, in its three uses (a run's bytes, the bench's characters, an engine's log tail)."""

from __future__ import annotations

from ledger.textbound import bound_text


def test_head_and_tail_in_characters() -> None:
    """The bench's form: 90% head and 10% tail with a marker naming what was cut."""
    text = "a" * 900 + "b" * 200 + "c" * 100
    kept, cut, total = bound_text(text, 1000, tail=0.1, unit="chars")
    assert cut and total == 1200 and kept.startswith("a" * 900) and kept.endswith("c" * 100)
    assert "\n[... 200 characters cut ...]\n" in kept and "b" not in kept
    assert bound_text("short", 1000, tail=0.1, unit="chars") == ("short", False, 5)


def test_tail_only() -> None:
    """``tail=1.0``: only the end is kept (a process's stderr ends in its error)."""
    kept, cut, total = bound_text("x" * 50 + "the error", 9, tail=1.0, unit="chars")
    assert (kept, cut, total) == ("\n[... 50 characters cut ...]\nthe error", True, 59)


def test_bytes_head_never_splits_a_character_and_has_no_marker() -> None:
    """The run's form: the first ``limit`` UTF-8 bytes, a cut character left out, total in bytes."""
    assert bound_text("é" * 10, 5) == ("éé", True, 20)
    assert bound_text("abc", 3) == ("abc", False, 3)


def test_bytes_tail_drops_a_split_character() -> None:
    """A tail in bytes starts after a character cut in two, and the marker counts bytes."""
    kept, cut, total = bound_text("é" * 10, 5, tail=0.5)
    assert cut and total == 20 and kept == "é\n[... 15 bytes cut ...]\né"


def test_an_engine_log_keeps_its_last_characters() -> None:
    """An image build's log is cut at its head: the error at its end is what a user needs."""
    from ledger.sandbox.container.images import LOG_LIMIT

    log = "step\n" * LOG_LIMIT + "Error: no such file: requirements.txt"
    kept, cut, total = bound_text(log, LOG_LIMIT, tail=1.0, unit="chars")
    assert cut and total == len(log) and kept.endswith("Error: no such file: requirements.txt")
    assert len(kept) - len(f"\n[... {total - LOG_LIMIT} characters cut ...]\n") == LOG_LIMIT
