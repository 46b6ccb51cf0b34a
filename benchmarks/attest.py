"""Benchmark of the clean-run attestation: scan throughput, attestation size, verify time.

    python benchmarks/attest.py [--json] [--entries 10000] [--words 34] [--repeat 3]

An attempt with N activity entries of about W words each (tool results, file reads with content,
agent output, tool calls, commands) is scanned against the commitment of a packaged golden task.
Reported, best of ``--repeat`` runs:

- raw HMAC throughput: HMAC-SHA256 over window-sized messages, and what it would give in
  entries/s if every window of every entry were HMACed (the older design's approach);
- scan throughput in entries/s with the capture-time commitment (keyed prefilter) and with a
  commitment read back from the journal (no prefilter: every window HMACed), each with its ratio
  to the raw-HMAC entries/s of the same run;
- redaction (capture filter) throughput;
- the attestation's size (canonical msgpack, JSON, DSSE envelope) for that attempt, CLEAN, and
  for a DIRTY attempt with the maximum of embedded matches;
- verify time at the public-key, journal and secret-key levels.

A benchmark, not a timed test: ``ok`` marks each target met or missed and the exit code is 0.
``tests/attest/test_bench_smoke.py`` runs ``--quick --json`` and checks the figures are there.
"""

from __future__ import annotations

import argparse
import hmac
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attest import digests as dg  # noqa: E402
from attest.attestation import (  # noqa: E402
    COMMITMENT_KEY_LABEL,
    SEAL_KEY_LABEL,
    attestation_hash,
    build_attestation,
    to_dsse,
    verify_attestation,
)
from attest.commitment import Commitment  # noqa: E402
from attest.redact import Redactor  # noqa: E402
from attest.scan import ScanPolicy, scan_attempt  # noqa: E402
from ledger.journal import merkle  # noqa: E402
from ledger.journal.codec import Entry, canonical_bytes, encode_entry  # noqa: E402
from ledger.journal.keys import KeyRing  # noqa: E402
from ledger.journal.note import Checkpoint, Signer, sign_checkpoint  # noqa: E402
from ledger.tasks.loader import load_tier  # noqa: E402
from ledger.tasks.material import commitment_for_task  # noqa: E402

TASK_ID = "ini-interpolation"
WORKTREE = "/tmp/ledger-attempt-bench/wt"
ATTEMPT = "r-bench/ini-interpolation/bench/1/1"
RUN = "r-bench"
SCAN_TARGET = 20_000  # entries/s (issue 5)
SIZE_TARGET = 64 * 1024  # bytes, for an attempt with 10,000 activity entries
ENGLISH = (
    "the", "a", "to", "of", "and", "in", "is", "it", "that", "for", "on", "with", "as", "this",
    "be", "are", "was", "not", "but", "can", "will", "file", "line", "test", "value", "function",
    "return", "error", "check", "run", "output", "should", "now", "next", "fix", "change", "look",
    "read", "write", "parse", "result", "config", "section", "option", "key", "default",
    "missing",
)


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


class Journal:
    """Entries plus their Merkle tree, in memory (the store is not what is measured here)."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.nodes = merkle.MemoryNodes()

    def add(self, kind: str, data: dict[str, Any], attempt: str = ATTEMPT) -> Entry:
        e = encode_entry(seq=len(self.entries), ts=len(self.entries), kind=kind,
                         data={**data, "attempt": attempt}, run=RUN, task=TASK_ID)
        self.entries.append(e)
        self.nodes.append([e.leaf_hash])
        return e

    def note(self, signer: Signer) -> str:
        size = len(self.entries)
        return sign_checkpoint(Checkpoint(signer.name, size, self.nodes.root(size)), signer)

    def prove(self, seq: int, size: int) -> list[bytes]:
        return merkle.inclusion_proof(seq, size, self.nodes.fetch)


def _attempt(commitment: Commitment, redact: Redactor, n: int, words: int, seed: int,
             dirty: int = 0) -> Journal:
    task = next(t for t in load_tier("stretch") if t.id == TASK_ID)
    vocab = sorted(set(dg.tokens("\n".join(p.read_text() for p in task.repo_dir.rglob("*.py")))))
    vocab += list(ENGLISH)
    rng = random.Random(seed)
    j = Journal()
    j.add("attempt.started", {"agent": "bench"})
    j.add("commitment", {"commitment": commitment.as_data()})
    j.add("agent.started", {"argv": ["bench"], "cwd": WORKTREE, "trace": "strace",
                            "trace_reason": ""})
    hidden = next(p for p in task.tests_dir.rglob("*.py")).read_text()
    for i in range(n):
        text = " ".join(rng.choice(vocab) for _ in range(words))
        k = i % 5
        if i < dirty:  # tool output that carries the hidden test (redacted at capture)
            text, k = redact(hidden), 0
        if k == 0:
            j.add("tool.result", {"tool": "Bash", "output": text, "is_error": False})
        elif k == 1:
            j.add("fs.read", {"path": f"pkg/m{i}.py", "resolved": f"{WORKTREE}/pkg/m{i}.py",
                              "in_worktree": True, "content": text, "source": "strace"})
        elif k == 2:
            j.add("agent.output", {"stream": "stdout", "text": text, "total_bytes": len(text),
                                   "truncated": False})
        elif k == 3:
            j.add("tool.call", {"tool": "Bash", "input": {"command": text}})
        else:
            j.add("proc.exec", {"argv": text.split(), "path": "/usr/bin/python3",
                                "source": "strace"})
    j.add("agent.finished", {"exit_code": 0})
    return j


def _text_of(e: Entry) -> str:
    d = e.data
    if e.kind == "tool.call":
        return str(d["input"]["command"])
    if e.kind == "proc.exec":
        return " ".join(d["argv"])
    return str(d.get("output") or d.get("content") or d.get("text") or "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--words", type=int, default=34)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1,000 entries, one round (smoke run)")
    args = ap.parse_args(argv)
    if args.quick:
        args.entries, args.repeat = min(args.entries, 1_000), 1

    keys = KeyRing(master_secret=bytes(range(32)),
                   signer=Signer.from_seed("eval-ledger/bench", bytes(range(1, 33))),
                   key_name="eval-ledger/bench")
    ckey = keys.subkey(COMMITMENT_KEY_LABEL)
    task = next(t for t in load_tier("stretch") if t.id == TASK_ID)
    commitment = commitment_for_task(task, key=ckey)
    fast = Redactor(commitment, ckey)
    journal = _attempt(commitment, fast, args.entries, args.words, seed=1)
    policy = ScanPolicy.for_attempt(worktree=WORKTREE)
    activity = [e for e in journal.entries if e.kind in ("tool.result", "fs.read", "agent.output",
                                                         "tool.call", "proc.exec")]
    texts = [_text_of(e) for e in activity]
    n_windows = sum(max(0, len(dg.tokens(t)) - commitment.window + 1) for t in texts)
    per_entry = n_windows / max(1, len(activity))

    # raw HMAC over window-sized messages, as many as the attempt has windows
    sample = [dg.window_message([dg.encode_token(t) for t in dg.tokens(x)[:commitment.window]])
              for x in texts]
    msgs = (sample * (n_windows // max(1, len(sample)) + 1))[:n_windows]

    def raw() -> None:
        for m in msgs:
            hmac.digest(ckey, m, "sha256")

    t_raw, _ = _best(raw, args.repeat)
    raw_windows_s = n_windows / t_raw
    raw_entries_s = raw_windows_s / per_entry

    def run_scan(red: Redactor) -> Any:
        return scan_attempt(journal.entries, attempt=ATTEMPT, commitment=red.commitment,
                            policy=policy, scanner=red)

    t_scan, result = _best(lambda: run_scan(Redactor(commitment, ckey)), args.repeat)
    slow_commitment = Commitment.from_data(commitment.as_data())
    t_slow, slow_result = _best(lambda: run_scan(Redactor(slow_commitment, ckey)),
                                max(1, args.repeat - 1))
    assert result.verdict == slow_result.verdict == "CLEAN", result.verdict
    capture = Redactor(commitment, ckey)  # one per attempt, as the run holds it
    t_redact, _ = _best(lambda: [capture(t) for t in texts], args.repeat)

    note = journal.note(keys.signer)
    att = build_attestation(result, checkpoint_note=note, signer=keys.signer,
                            seal_key=keys.subkey(SEAL_KEY_LABEL), prove=journal.prove)
    journal.add("attestation", {"attestation": att, "hash": attestation_hash(att)})
    t_pub, _ = _best(lambda: verify_attestation(att, verifier_public_key=keys.verifier),
                     args.repeat)
    t_jour, _ = _best(lambda: verify_attestation(att, verifier_public_key=keys.verifier,
                                                 journal_entries=journal.entries), args.repeat)
    t_secret, rep = _best(lambda: verify_attestation(att, verifier_public_key=keys.verifier,
                                                     journal_entries=journal.entries,
                                                     secret_key=keys), 1)
    assert rep.level == "secret-key"

    dirty_j = _attempt(commitment, fast, args.entries, args.words, seed=2, dirty=64)
    dirty_scan = scan_attempt(dirty_j.entries, attempt=ATTEMPT, commitment=commitment,
                              policy=policy, scanner=fast)
    dirty_att = build_attestation(dirty_scan, checkpoint_note=dirty_j.note(keys.signer),
                                  signer=keys.signer, seal_key=keys.subkey(SEAL_KEY_LABEL),
                                  prove=dirty_j.prove)

    n = len(activity)
    words = statistics.mean(len(t.split()) for t in texts)
    out = {
        "entries": n,
        "mean_words_per_entry": round(words, 1),
        "windows_per_entry": round(per_entry, 1),
        "commitment": {"windows": len(commitment.windows), "files": len(commitment.files),
                       "paths": len(commitment.paths), "context": len(commitment.context),
                       "entry_bytes": len(canonical_bytes(commitment.as_data()))},
        "raw_hmac_windows_per_s": round(raw_windows_s),
        "raw_hmac_entries_per_s": round(raw_entries_s),
        "scan_entries_per_s": round(n / t_scan),
        "scan_ratio_to_raw_hmac": round((n / t_scan) / raw_entries_s, 2),
        "scan_no_prefilter_entries_per_s": round(n / t_slow),
        "scan_no_prefilter_ratio_to_raw_hmac": round((n / t_slow) / raw_entries_s, 2),
        "redact_texts_per_s": round(n / t_redact),
        "attestation_bytes_msgpack": len(canonical_bytes(att)),
        "attestation_bytes_json": len(json.dumps(att, separators=(",", ":"))),
        "attestation_bytes_dsse": len(json.dumps(to_dsse(att), separators=(",", ":"))),
        "dirty_matches": dirty_att["match_count"],
        "dirty_attestation_bytes_msgpack": len(canonical_bytes(dirty_att)),
        "verify_public_key_ms": round(t_pub * 1000, 2),
        "verify_journal_ms": round(t_jour * 1000, 1),
        "verify_secret_key_ms": round(t_secret * 1000, 1),
        "python": sys.version.split()[0],
    }
    out["targets"] = {"scan_entries_per_s": SCAN_TARGET, "attestation_bytes": SIZE_TARGET}
    out["ok"] = {
        "scan_entries_per_s": out["scan_entries_per_s"] >= SCAN_TARGET,
        "attestation_bytes": max(out["attestation_bytes_msgpack"],
                                 out["dirty_attestation_bytes_msgpack"]) < SIZE_TARGET,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        width = max(len(k) for k in out)
        for k, v in out.items():
            print(f"{k:<{width}}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
