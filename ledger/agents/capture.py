"""What of an agent's output is kept: secrets redacted, captured texts filtered and bounded.

Every captured text (output, transcript, file contents, argv) has the invocation's secrets replaced
by ``[REDACTED]`` (and anything shaped like a well-known API key) and then passes through the
capture filter before it enters an event or the outcome. Texts in events are bounded to
``EVENT_TEXT_LIMIT`` bytes with ``truncated`` and ``total_bytes`` saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ledger.agents.contracts import CaptureFilter, Event, ProcessOutcome
from ledger.textbound import bound_text

EVENT_TEXT_LIMIT = 64 * 1024
REDACTED = "[REDACTED]"
# Shapes of well-known credentials, redacted even when they were not in the environment.
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|xox[abpr]-[A-Za-z0-9\-]{20,})"
)


def secret_redactor(secret_values: Iterable[str]) -> Callable[[str], str]:
    """``redact_secrets`` for one set of secret values, prepared once (a trace redacts thousands
    of paths with the same values)."""
    values = sorted({s for s in secret_values if s and len(s) >= 6}, key=len, reverse=True)
    sub = _KEY_SHAPES.sub

    def redact(text: str) -> str:
        for value in values:
            if value in text:
                text = text.replace(value, REDACTED)
        # every key shape starts with one of these: most texts skip the expression
        if "sk-" in text or "AIza" in text or "gh" in text or "xox" in text:
            return sub(REDACTED, text)
        return text

    return redact


def redact_secrets(text: str, secret_values: Iterable[str]) -> str:
    """Replace each secret value (and anything shaped like a known API key) by ``[REDACTED]``."""
    return secret_redactor(secret_values)(text)


def _clean_value(value: Any, clean: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        return {str(k): _clean_value(v, clean) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_value(v, clean) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    return clean(str(value))


EVENT_DEPTH = 32  # a value nested deeper (a model's tool input) is kept as its JSON text


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests maps or lists more than ``limit`` levels (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _flat(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (RecursionError, ValueError, TypeError):
        return "<nested too deeply to record>"


def sanitize_event(event: Event, clean: Callable[[str], str], limit: int = EVENT_TEXT_LIMIT) -> Event:
    """Redact and filter every text of an event, and bound its long texts. A value nested more
    than ``EVENT_DEPTH`` levels (the journal's codec refuses 64) becomes its JSON text."""
    kind, data = event
    out: dict[str, Any] = {}
    total = 0
    truncated = False
    for key, value in data.items():
        if _deeper_than(value, EVENT_DEPTH):
            value = _flat(value)
        value = _clean_value(value, clean)
        if key in ("text", "output", "content") and isinstance(value, str):
            value, cut, n = bound_text(value, limit)
            if cut:
                truncated, total = True, n
        elif key == "input" and not isinstance(value, str):
            encoded = json.dumps(value, ensure_ascii=False, sort_keys=True)
            if len(encoded.encode("utf-8")) > limit:
                value, _cut, n = bound_text(encoded, limit)
                truncated, total = True, n
        elif key == "input" and isinstance(value, str):
            value, cut, n = bound_text(value, limit)
            if cut:
                truncated, total = True, n
        out[key] = value
    if kind == "agent.output":
        out.setdefault("total_bytes", len(str(out.get("text", "")).encode("utf-8")))
        out.setdefault("truncated", False)
        out.setdefault("stream", "stdout")
    if truncated:
        out["truncated"] = True
        out["total_bytes"] = max(total, int(out.get("total_bytes") or 0))
    return kind, out


def make_cleaner(secret_values: Iterable[str], capture_filter: CaptureFilter) -> Callable[[str], str]:
    redact = secret_redactor(secret_values)

    def clean(text: str) -> str:
        return capture_filter(redact(text))

    return clean


def output_events(outcome: ProcessOutcome, output_limit: int = 64 * 1024,
                  limit: int = EVENT_TEXT_LIMIT) -> list[Event]:
    """``agent.output`` events for the raw stdout/stderr heads of an outcome (empty streams skipped).

    The texts are already redacted and filtered by ``run_agent_process``; ``output_limit`` is the
    one it was called with.
    """
    events: list[Event] = []
    for stream, text, total in (("stdout", outcome.stdout_text, outcome.stdout_total),
                                ("stderr", outcome.stderr_text, outcome.stderr_total)):
        if total == 0:
            continue
        head, cut, _n = bound_text(text, limit)
        events.append(("agent.output", {"stream": stream, "text": head, "total_bytes": total,
                                        "truncated": cut or total > output_limit}))
    return events


__all__ = ["EVENT_DEPTH", "EVENT_TEXT_LIMIT", "REDACTED", "make_cleaner",
           "output_events", "redact_secrets", "sanitize_event", "secret_redactor"]
