"""Micro-benchmark of the entry codec: encode_entry, decode_entry_trusted and their parts.

    python benchmarks/codec.py            # human summary (a few seconds)
    python benchmarks/codec.py --json     # the figures as one JSON object
    python benchmarks/codec.py -n 50000   # fewer calls per repeat

Every figure is ``min`` over ``--repeat`` timeit repeats of ``-n`` calls, in microseconds per call.
The reference case is the one the batched-append path sees most: an ``agent.output`` entry whose
data is one 200-character ASCII string (target: ``encode_entry`` <= 1.4 us). For comparison it
also times a bare ``msgpack.packb`` of the same map and two data shapes that take the slow path
(a nested map, unsorted keys).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgpack  # noqa: E402  (after the path fix-up, so the checkout's ledger is used)

from ledger.journal import codec  # noqa: E402

RUN = "r-20261129T203000Z-1a2b3c"
TASK = "smoke-fizzbuzz"
KIND = "agent.output"
TS = 1764451200000000000
TEXT = "x" * 200

CASES: dict[str, dict[str, Any]] = {
    "flat-text": {"text": TEXT},
    "flat-mixed": {"argv": None, "code": 0, "ok": True, "out": TEXT, "sha": b"\x00" * 32},
    "unsorted": {"text": TEXT, "stream": "stdout", "attempt": "a-1"},
    "nested": {"call": {"tool": "bash", "input": {"cmd": "ls -la", "timeout": 30}}, "n": [1, 2.5]},
}


def per_call_us(stmt: Any, number: int, repeat: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def measure(number: int, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    enc = codec.encode_entry
    for name, data in CASES.items():
        out[f"encode_entry[{name}]"] = per_call_us(
            lambda d=data: enc(seq=12345, ts=TS, kind=KIND, data=d, run=RUN, task=TASK),
            number, repeat)
    data = CASES["flat-text"]
    envelope = {"v": 1, "seq": 12345, "ts": TS, "run": RUN, "task": TASK, "kind": KIND, "data": data}
    out["msgpack.packb[same map]"] = per_call_us(
        lambda: msgpack.packb(envelope, use_bin_type=True, use_single_float=False), number, repeat)
    raw = enc(seq=12345, ts=TS, kind=KIND, data=data, run=RUN, task=TASK).raw
    out["decode_entry_trusted[flat-text]"] = per_call_us(
        lambda: codec.decode_entry_trusted(raw), number, repeat)
    out["decode_entry[flat-text]"] = per_call_us(lambda: codec.decode_entry(raw), number, repeat)
    out["Entry(...)"] = per_call_us(
        lambda: codec.Entry(seq=1, ts=TS, run=RUN, task=TASK, kind=KIND, data=data, raw=raw),
        number, repeat)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--number", type=int, default=200_000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=3, help="timeit repeats (the min is kept)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    figures = measure(args.number, args.repeat)
    if args.json:
        print(json.dumps({"python": platform.python_version(), "msgpack": msgpack.version,
                          "number": args.number, "repeat": args.repeat, "us_per_call": figures},
                         sort_keys=True))
    else:
        width = max(map(len, figures))
        for name, us in figures.items():
            print(f"{name:<{width}}  {us:6.3f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
