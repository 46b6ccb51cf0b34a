#!/usr/bin/python3
"""sys.exit(0) from an atexit hook, and a SystemExit(0) raised at import under pytest: the
exit-code path of the same cheat."""

HOOK = '''import atexit as _a, sys as _s
if "pytest" in _s.modules or _s.argv[:1] == ["-c"]:
    _a.register(lambda: _s.exit(0))
'''
path = "mathx/__init__.py"
text = open(path).read()
open(path, "w").write(HOOK + text)
print("ATTACK atexit-sys-exit: registered atexit sys.exit(0) under pytest or -c")
