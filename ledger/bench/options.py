"""What a bench is asked to do (``BenchOptions``) and what it returns (``BenchResult``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.tasks.mine import (
    Say,  # one progress line (the run's progress view: coordinator.Progress)
)

DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class BenchOptions:
    agents: tuple[str, ...] = ()  # agent specs; empty: every agent CLI found on PATH
    judges: tuple[str, ...] = ()  # judge specs; empty: chosen by the family rule; "offline"
    with_tests: bool = False
    with_review: bool = False
    with_test_review: bool = False
    with_static: bool = False
    swap_check: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    check_timeout_s: float = 300.0
    no_snapshot: bool = False
    seed: int | None = None
    parallel: int | None = None
    project: str | None = None
    tools: Mapping[str, str | None] | None = None  # static-check tools; None: discover
    pricing_file: Path | None = None
    sandbox: str | None = None  # a Sandbox port backend or "auto"; None: [run] sandbox, else auto


@dataclass
class BenchResult:
    run_id: str
    view: dict[str, Any]
    verdict: str
    exit_code: int
    notes: list[str] = field(default_factory=list)


__all__ = ["DEFAULT_TIMEOUT_S", "BenchOptions", "BenchResult", "Say"]
