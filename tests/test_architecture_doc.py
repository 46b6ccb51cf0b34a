"""docs/ARCHITECTURE.md names only files and modules that exist (the page follows the code)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def test_every_path_named_exists() -> None:
    """Each `pkg/file.py` or `pkg/dir/` in backticks is a file or folder of the repository."""
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:ledger|evaluators|attest|cli|tests|docs)/[\w/.]*)`", text))
    assert len(paths) > 10
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []


def test_every_module_named_exists() -> None:
    """Each dotted `ledger.x.y` / `evaluators.x.y` name resolves to a module or its attribute."""
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for name in sorted(set(re.findall(r"`((?:ledger|evaluators|attest)(?:\.\w+)+)`", text))):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            try:
                spec = importlib.util.find_spec(module)
            except ModuleNotFoundError:  # a parent is a module, not a package
                spec = None
            if spec is not None:
                obj = __import__(module, fromlist=["_"])
                for attr in parts[cut:]:
                    obj = getattr(obj, attr, None)
                if obj is None:
                    missing.append(name)
                break
        else:
            missing.append(name)
    assert missing == []


def _packages() -> list[str]:
    """Every product package: ``ledger/x/`` folders with an ``__init__.py`` (golden task data
    left out), and the top-level ones."""
    found = ["evaluators/", "attest/", "cli/", "ledger/"]
    for init in sorted((ROOT / "ledger").rglob("__init__.py")):
        rel = init.parent.relative_to(ROOT)
        if "golden" not in rel.parts and rel != Path("ledger"):
            found.append(rel.as_posix() + "/")
    return found


def test_every_package_is_named() -> None:
    """The other direction: each package of the product appears in the page as `path/`, so a
    new package cannot land without its place in the architecture."""
    text = DOC.read_text(encoding="utf-8")
    unnamed = [p for p in _packages() if f"`{p}`" not in text]
    assert not unnamed, "docs/ARCHITECTURE.md does not name: " + ", ".join(unnamed)
