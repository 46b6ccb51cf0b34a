"""Fake agent: kills itself with SIGKILL (a crash by signal)."""
import os
import signal

print("about to die", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
