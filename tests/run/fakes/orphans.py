"""Fake agent: leaves three processes behind and exits 0.

1. ``sleep`` in its own process group (normal environment);
2. ``sleep`` with an empty environment, still in the group;
3. a double-forked daemon that called setsid (new session, inherited environment).
The pids go to argv[1], one per line, once all three are running.
"""
import os
import subprocess
import sys
import time

a = subprocess.Popen(["sleep", "300"])
b = subprocess.Popen(["/bin/sleep", "301"], env={})
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    if os.fork() == 0:
        os.setsid()
        os.write(w, f"{os.getpid()}\n".encode())
        os.close(w)
        os.execv("/bin/sleep", ["sleep", "302"])
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
daemon = int(os.read(r, 100).decode().strip())
with open(sys.argv[1], "w") as fh:
    fh.write(f"{a.pid}\n{b.pid}\n{daemon}\n")
time.sleep(0.05)
print("bye", flush=True)
