#!/usr/bin/python3
"""os._exit(0) from an atexit hook: the tests run and fail, pytest ends its session honestly,
then the hook turns the exit code into 0."""

HOOK = '''import atexit as _a, os as _o, sys as _s
if "pytest" in _s.modules or _s.argv[:1] == ["-c"]:
    _a.register(lambda: _o._exit(0))
'''
path = "mathx/__init__.py"
text = open(path).read()
open(path, "w").write(HOOK + text)
print("ATTACK atexit-os-exit: registered atexit os._exit(0) under pytest or -c")
