"""Fake agent: prints a little, then exits with status 3."""
import sys

print("starting work")
print("Traceback: something broke", file=sys.stderr)
sys.exit(3)
