"""Bounding a text before it is kept (journal entries, events, logs), spelled once.

    bound_text(text, limit)                          the first ``limit`` UTF-8 bytes, cut on a
                                                     character (a run's patch, prompt, messages)
    bound_text(text, limit, tail=0.1, unit="chars")  the first 90% and the last 10% of ``limit``
                                                     characters, a marker between (the bench)
    bound_text(text, limit, tail=1.0, unit="chars")  the last ``limit`` characters after the marker
                                                     (an engine's log: it ends in its error)

Both give ``(kept, truncated, total)``, ``total`` counted in ``unit``. Pure.
"""

from __future__ import annotations

from typing import Literal


def bound_text(text: str, limit: int, *, tail: float = 0.0,
               unit: Literal["bytes", "chars"] = "bytes") -> tuple[str, bool, int]:
    """``(kept, truncated, total)``: ``text`` when it fits ``limit`` units, else its first
    ``int(limit * (1 - tail))`` units and, with a ``tail``, a ``[... N <unit> cut ...]`` line
    and the last ones. Bytes are UTF-8 and never split a character."""
    if unit == "bytes":
        raw = text.encode("utf-8", "replace")
        total = len(raw)
        if total <= limit:
            return text, False, total
        head = int(limit * (1 - tail))
        kept = raw[:head].decode("utf-8", "ignore")
        end = raw[total - (limit - head):].decode("utf-8", "ignore") if limit > head else ""
    else:
        total = len(text)
        if total <= limit:
            return text, False, total
        head = int(limit * (1 - tail))
        kept, end = text[:head], (text[total - (limit - head):] if limit > head else "")
    if tail > 0:
        word = "characters" if unit == "chars" else "bytes"
        kept += f"\n[... {total - limit} {word} cut ...]\n" + end
    return kept, True, total


__all__ = ["bound_text"]
