"""Fake agent: leaves a daemon that scrubbed its environment and called setsid, then exits 0.

The daemon's pid goes to argv[1]. Only the tracer can still tell it belongs to the attempt.
"""
import os
import sys

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    if os.fork() == 0:
        os.setsid()
        os.write(w, f"{os.getpid()}\n".encode())
        os.close(w)
        os.execve("/bin/sleep", ["sleep", "303"], {})
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
daemon = int(os.read(r, 100).decode().strip())
with open(sys.argv[1], "w") as fh:
    fh.write(f"{daemon}\n")
