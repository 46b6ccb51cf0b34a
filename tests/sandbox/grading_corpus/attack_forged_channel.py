#!/usr/bin/python3
"""The residual (docs/ATTESTATION.md): graded code in the test process writes forged records to
the reporter's own channel. It finds the pipe among its descriptors, registers a plugin object
that, once collection is done, sends a start record, a passed record for every collected test and
an end record with status 0, then exits 0 (and under `python -c`, the signal's end record). Only
canaries (issue 20, part 2) can tell."""

HOOK = r'''import sys as _s
if "pytest" in _s.modules or _s.argv[:1] == ["-c"]:
    import gc as _gc, json as _j, os as _o, stat as _st, struct as _k

    def _fds():
        out = []
        for n in _o.listdir("/proc/self/fd"):
            try:
                if int(n) > 2 and _st.S_ISFIFO(_o.fstat(int(n)).st_mode):
                    out.append(int(n))
            except OSError:
                pass
        return out

    class _Forger:
        def pytest_collection_finish(self, session):
            def send(rec):
                body = _j.dumps(rec).encode()
                for fd in _fds():
                    try:
                        _o.write(fd, _k.pack(">I", len(body)) + body)
                    except OSError:
                        pass
            for item in session.items:
                send({"k": "test", "id": item.nodeid, "outcome": "passed",
                      "reported": "passed", "message": ""})
            send({"k": "end", "exitstatus": 0, "failed": 0, "collected": len(session.items)})
            _o._exit(0)

    if _s.argv[:1] == ["-c"]:  # the completion signal: its end record, then exit 0
        _b = b'{"k":"end","exitstatus":0}'
        for _fd in _fds():
            _o.write(_fd, _k.pack(">I", len(_b)) + _b)
        _o._exit(0)
    for _obj in _gc.get_objects():
        if type(_obj).__name__ == "Config" and hasattr(_obj, "pluginmanager"):
            _obj.pluginmanager.register(_Forger(), "forger")
            break
'''
path = "mathx/__init__.py"
text = open(path).read()
open(path, "w").write(HOOK + text)
print("ATTACK forged-channel: forged records written to the reporter's pipe, then exit 0")
