"""Path names as strings, never the file system: the one ``under`` (is a path a root or below
it), shared by the scan's scope (``attest.scope``), the sandbox's path knowledge
(``ledger.sandbox.paths``) and the run. Pure.
"""

from __future__ import annotations


def under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it, by name (both normalised; no link is followed). ``/``
    (or an empty root) holds every path."""
    root = root.rstrip("/")
    return not root or path == root or path.startswith(root + "/")


__all__ = ["under"]
