"""Fake agent CLI: ``fake_cli.py NAME ARGS...`` prints samples/NAME.out and records its argv.

``--version`` prints a version line. The argv and a few environment variables are written as JSON
to ``$FAKE_ARGV_FILE`` when that is set.
"""
import json
import os
import sys
from pathlib import Path

name, args = sys.argv[1], sys.argv[2:]
if args == ["--version"]:
    print(f"{name} 9.9.9 (fake)")
    sys.exit(0)
record = os.environ.get("FAKE_ARGV_FILE")
if record:
    keys = ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "LEDGER_TASK_ID",
            "DISABLE_TELEMETRY", "NO_COLOR", "GEMINI_CLI_TRUST_WORKSPACE")
    Path(record).write_text(json.dumps({"argv": args, "env": {k: os.environ.get(k) for k in keys},
                                        "stdin_tty": os.isatty(0)}))
sys.stdout.write((Path(__file__).parent / "samples" / f"{name}.out").read_text())
sys.stdout.flush()
