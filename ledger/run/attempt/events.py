"""What an attempt sends to the coordinator: its entries (the attempt id and the capture time
added) and its phase updates, and the small entry shapes more than one step writes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.agents.contracts import CaptureFilter
from ledger.run.contracts import AttemptEvent, AttemptPlan

Emit = Callable[[AttemptEvent], None]
Redact = CaptureFilter  # text -> text, applied to every captured text before it is emitted


class Out:
    """Adds the attempt id to every event and sends it to the coordinator."""

    def __init__(self, plan: AttemptPlan, emit: Emit) -> None:
        self.plan = plan
        self._emit = emit

    def entry(self, kind: str, data: Mapping[str, Any]) -> None:
        # ``at``: when the worker captured the event (unix ns); the envelope ``ts`` is append time.
        self._emit(AttemptEvent(self.plan.attempt_id, self.plan.task_id, kind,
                                {"attempt": self.plan.attempt_id, "at": time.time_ns(), **data}))

    def phase(self, name: str, **extra: Any) -> None:
        self._emit(AttemptEvent(self.plan.attempt_id, self.plan.task_id, "phase",
                                {"phase": name, **extra}))


def limit_hits(out: Out, phase: str, hits: Sequence[Mapping[str, Any]]) -> None:
    for hit in hits:
        out.entry("limit.hit", {"phase": phase, **hit})


def emit_result(out: Out, kind: str, data: Mapping[str, Any]) -> None:
    """A ``test.result`` or ``signal.result``, then one ``grading.anomaly`` per anomaly it found."""
    out.entry(kind, data)
    for anomaly in data.get("anomalies") or ():
        where = {"suite": data["suite"]} if kind == "test.result" else {"signal": data["index"]}
        out.entry("grading.anomaly", {**where, "reason": anomaly["reason"],
                                      "detail": anomaly["detail"]})


def sandbox_failed_data(stage: str, message: str, backend: str) -> dict[str, Any]:
    """The data of a ``sandbox.failed`` entry: the harness's sandbox did not start (an infra
    failure, never the agent's). ``message`` is the backend's, bounded and redacted by the caller."""
    return {"stage": stage, "backend": backend, "message": message}
