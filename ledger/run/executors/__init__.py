"""Executors run attempts somewhere and stream their events back to the coordinator.

    protocol.py   the Executor protocol, AttemptStopped, the worker's Stopper (shared)
    local.py      LocalExecutor: worker processes on this machine
    ray.py        RayExecutor: Ray tasks on a cluster (optional extra: eval-ledger[ray])

``make_executor(kind, parallel)`` is the one factory; the implementations are imported only when
one is made, so the coordinator and the CLI never import Ray or multiprocessing up front.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ledger.errors import UsageError
from ledger.run.executors.protocol import Executor

KINDS = ("local", "ray")
INSTALL_HINT = "pip install 'eval-ledger[ray]'"


def make_executor(kind: str, parallel: int, *, ray_address: str | None = None,
                  **ray_options: Any) -> Executor:
    """``local``: the process pool; ``ray``: attempts on a Ray cluster (``ray_address`` optional;
    a missing Ray is one clear error naming ``pip install 'eval-ledger[ray]'``)."""
    if kind == "local":
        from ledger.run.executors.local import LocalExecutor

        return LocalExecutor(parallel=parallel)
    if kind == "ray":
        from ledger.run.executors.ray import RayExecutor

        return RayExecutor(parallel, address=ray_address, **ray_options)
    raise UsageError(f"unknown executor {kind!r}; available: {', '.join(KINDS)}")


def check_available(kind: str) -> None:
    """Before a run writes anything: ``UsageError`` when ``kind`` cannot be made here (Ray not
    installed), so a refused start leaves no empty run behind. Imports nothing heavy."""
    import importlib.util

    if kind == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}")
    if kind not in KINDS:
        raise UsageError(f"unknown executor {kind!r}; available: {', '.join(KINDS)}")


def executor_factory(*, ray_address: str | None = None,
                     **ray_options: Any) -> Callable[[str, int], Executor]:
    """An ``executor_factory`` for ``execute_run`` that knows ``ray`` (and its options)."""
    return functools.partial(make_executor, ray_address=ray_address, **ray_options)


__all__ = ["KINDS", "Executor", "check_available", "executor_factory", "make_executor"]
