"""Fake agent: writes bytes that are not UTF-8 to stdout and stderr."""
import sys

sys.stdout.buffer.write(b"ok \xff\xfe bad \x80 end\n")
sys.stderr.buffer.write(b"\xc3\x28 broken\n")
