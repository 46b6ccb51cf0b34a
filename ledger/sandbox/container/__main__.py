"""``python -m ledger.sandbox.container probe|configure|base|setup [--json]``.

probe      whether a container runs here (exit 0) or why not (exit 3), one line
configure  write /etc/containers/containers.conf (runc, cgroupfs, no default ulimits)
base       build the base image unless present (``--rebuild`` forces it)
setup      configure, base, then probe: what ``.ci/run`` calls on a fresh machine
"""

from __future__ import annotations

import argparse
import json
import sys

from ledger.errors import LedgerError
from ledger.sandbox.container import base, engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledger.sandbox.container")
    parser.add_argument("action", choices=("probe", "configure", "base", "setup"))
    parser.add_argument("--engine", choices=engine.ENGINES, default=None)
    parser.add_argument("--rebuild", action="store_true", help="build the base image even if present")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        lines: list[str] = []
        if args.action in ("configure", "setup") and (args.engine or "podman") == "podman":
            lines.append(engine.configure())
        if args.action in ("base", "setup"):
            found = engine.find_engine(args.engine)
            if found is None:
                raise LedgerError(f"no container engine on PATH; {engine.INSTALL_HINT}")
            lines.append(base.build_base_image(found, rebuild=args.rebuild).line())
        result = engine.probe(args.engine) if args.action in ("probe", "setup") else None
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    if result is not None:
        lines.append(result.reason if result.runs else f"error: {result.reason}")
    if args.json:
        print(json.dumps({"lines": lines, "probe": result.as_data() if result else None}))
    else:
        for line in lines:
            print(line, file=sys.stdout if not line.startswith("error:") else sys.stderr)
    return 0 if result is None or result.runs else 3


if __name__ == "__main__":
    sys.exit(main())
