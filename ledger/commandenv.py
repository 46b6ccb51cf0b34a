"""The environment a command runs with, spelled once: a task's tests, signals and solution
command (``ledger run``'s grading, ``ledger tasks validate``), the bench's checks, and what any
command, an agent's too, sees inside a box.

    command_env(home=H, scratch=S)         a fresh environment, for grading and the bench's checks
    command_env(os.environ)                tasks validate on this host: the caller's environment
    command_env(path=IMAGE_PATH)           tasks validate inside a task's image: nothing of this host
    command_env(env, home=H, scratch=S, harness=False)
                                           a box's inside (``ledger.sandbox.attempt_boxes``): ``env``
                                           as it is, re-homed

The parts, applied in this order:

    start      ``base`` (without PYTHONPATH, PYTEST_ADDOPTS, PYTHONSTARTUP when ``harness``), or a
               fresh environment: C.UTF-8, hash seed 0, UTF-8 standard streams, and this host's PATH
    harness    this interpreter's bin folder first on PATH (``path``: exactly that PATH instead),
               no bytecode written, no pytest plugin autoload unless ``pytest_plugins``
    home       the variables that point at the operator's own folders dropped, HOME set
    scratch    TMPDIR, TMP and TEMP set

Pure apart from reading ``os.environ``'s PATH and ``sys.executable`` for a fresh environment.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

# Variables that would point a command back at the operator's own folders.
HOME_VARS = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
             "XDG_RUNTIME_DIR", "PIP_CACHE_DIR", "npm_config_cache", "VIRTUAL_ENV")
# Variables that would steer the harness's interpreter or pytest from outside.
STEERING_VARS = ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTHONSTARTUP")
_FRESH = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8"}


def command_env(base: Mapping[str, str] | None = None, *, home: str | Path | None = None,
                scratch: str | Path | None = None, harness: bool = True, path: str | None = None,
                pytest_plugins: bool = False) -> dict[str, str]:
    """The environment of one command (see the module docstring for the parts and their order)."""
    if base is None:
        env = {"PATH": os.environ.get("PATH", os.defpath), **_FRESH}
    else:
        env = {k: v for k, v in base.items() if not (harness and k in STEERING_VARS)}
    if harness:
        env["PATH"] = path if path is not None else os.pathsep.join(
            [str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if not pytest_plugins:  # task tests are plain pytest: the harness's own plugins stay out
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if home is not None:
        env = {k: v for k, v in env.items() if k not in HOME_VARS}
        env["HOME"] = str(home)
    if scratch is not None:
        for name in ("TMPDIR", "TMP", "TEMP"):
            env[name] = str(scratch)
    return env


__all__ = ["HOME_VARS", "STEERING_VARS", "command_env"]
