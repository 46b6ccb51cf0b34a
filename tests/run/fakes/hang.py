"""Fake agent: starts a child in its group, writes both pids to argv[1], then hangs.

With --ignore-term it ignores SIGTERM (so only SIGKILL stops it).
"""
import os
import signal
import subprocess
import sys
import time

if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])
with open(sys.argv[1], "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}\n")
print("hanging", flush=True)
while True:
    time.sleep(1)
