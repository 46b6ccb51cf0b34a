"""Fake agent: writes argv[1] MiB to stdout (lines of 1 KiB), then a little to stderr."""
import sys

mib = int(sys.argv[1])
line = b"x" * 1023 + b"\n"
block = line * 1024
out = sys.stdout.buffer
for _ in range(mib):
    out.write(block)
out.flush()
sys.stderr.write("done\n")
