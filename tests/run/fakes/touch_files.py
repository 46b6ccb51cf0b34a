"""Fake agent: --write PATH TEXT writes a file; --read PATH reads one; --connect HOST PORT tries TCP.

Paths may be relative to the working directory (the worktree) or absolute.
"""
import contextlib
import socket
import sys

args = sys.argv[1:]
while args:
    op = args.pop(0)
    if op == "--write":
        path, text = args.pop(0), args.pop(0)
        with open(path, "w") as fh:
            fh.write(text)
    elif op == "--read":
        with open(args.pop(0)) as fh:
            fh.read()
    elif op == "--connect":
        host, port = args.pop(0), int(args.pop(0))
        s = socket.socket()
        s.settimeout(2)
        with contextlib.suppress(OSError):
            s.connect((host, port))
        s.close()
print("done")
