"""Fake agent: prints its argv[1:] and LEDGER_* / FAKE_* environment as one JSON object."""
import json
import os
import sys

env = {k: v for k, v in os.environ.items() if k.startswith(("LEDGER_", "FAKE_"))}
print(json.dumps({"argv": sys.argv[1:], "env": env, "cwd": os.getcwd()}))
