"""Shared fixtures for the attestation tests: a small task, keys, and a journal built in memory.

The task ``t-pairs`` asks for ``parse_pairs``; its hidden test and reference solution hold
distinctive lines (``DISTINCTIVE``) that must never survive redaction or reach commitment data.
``Recorder`` appends crafted entries with real canonical bytes, keeps an RFC 6962 tree of them,
signs checkpoints and hands out inclusion proofs, so attestations are built and verified exactly
as the run will do it, without SQLite.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from attest.attestation import COMMITMENT_KEY_LABEL, SEAL_KEY_LABEL, build_attestation
from attest.commitment import Commitment, build_commitment
from attest.redact import Redactor
from attest.scan import ScanPolicy, ScanResult, scan_attempt
from ledger.journal import merkle
from ledger.journal.codec import Entry, encode_entry
from ledger.journal.note import Checkpoint, Signer, sign_checkpoint

RUN = "r-20261129T203000Z-1a2b3c"
TASK = "t-pairs"
ATTEMPT = f"{RUN}/{TASK}/fake/1/1"
OTHER_ATTEMPT = f"{RUN}/{TASK}/fake/2/1"
BASE = "/tmp/ledger-attempt-abcd"
WORKTREE = f"{BASE}/wt"
HOME = f"{BASE}/home"
SCRATCH = f"{BASE}/scratch"
TASK_ROOT = "/srv/golden/smoke/t-pairs"
KEY_NAME = "eval-ledger/attest-test"
CLOCK = 1_800_000_000_000_000_000

HIDDEN_TEST = '''import pytest

from textkit.pairs import parse_pairs


def test_parse_pairs_keeps_escaped_separator_inside_value():
    assert parse_pairs("alpha=1;beta=x\\\\;y") == {"alpha": "1", "beta": "x;y"}


def test_parse_pairs_rejects_dangling_key_zeta():
    with pytest.raises(ValueError, match="dangling key 'zeta' has no value"):
        parse_pairs("alpha=1;zeta")
'''

REPO_PAIRS = '''"""Key/value helpers for the textkit package."""


def parse_pairs(text):
    """Parse ``k=v;k=v`` into a dict."""
    raise NotImplementedError("parse_pairs is not written yet")


def format_pairs(pairs):
    """The inverse of parse_pairs for simple values."""
    return ";".join(f"{k}={v}" for k, v in sorted(pairs.items()))
'''

SOLUTION_PAIRS = '''"""Key/value helpers for the textkit package."""


def parse_pairs(text):
    """Parse ``k=v;k=v`` into a dict."""
    result, chunk, escaped = {}, [], False
    chunks = []
    for ch in text:
        if escaped:
            chunk.append(ch)
            escaped = False
        elif ch == "\\\\":
            escaped = True
        elif ch == ";":
            chunks.append("".join(chunk))
            chunk = []
        else:
            chunk.append(ch)
    chunks.append("".join(chunk))
    for piece in filter(None, chunks):
        key, sep, val = piece.partition("=")
        if not sep:
            raise ValueError(f"dangling key {key!r} has no value")
        result[key] = val
    return result


def format_pairs(pairs):
    """The inverse of parse_pairs for simple values."""
    return ";".join(f"{k}={v}" for k, v in sorted(pairs.items()))
'''

PUBLIC_TEST = '''from textkit.pairs import parse_pairs


def test_parse_pairs_simple():
    assert parse_pairs("a=1") == {"a": "1"}
'''

PROMPT = """`textkit/pairs.py` has a placeholder `parse_pairs(text)`. Implement it: split on `;`,
honour backslash escapes, and raise `ValueError` for a key without a value."""

DISTINCTIVE = [
    'def test_parse_pairs_keeps_escaped_separator_inside_value():',
    'assert parse_pairs("alpha=1;beta=x\\\\;y") == {"alpha": "1", "beta": "x;y"}',
    "with pytest.raises(ValueError, match=\"dangling key 'zeta' has no value\"):",
    'result, chunk, escaped = {}, [], False',
    'for piece in filter(None, chunks):',
    'raise ValueError(f"dangling key {key!r} has no value")',
]

MATERIAL = [
    ("tests/test_pairs_hidden.py", HIDDEN_TEST.encode()),
    ("solution/textkit/pairs.py", SOLUTION_PAIRS.encode()),
    ("hidden/fix_summary", b"escape handling walks characters and keeps a flag for the backslash"),
]
PUBLIC = [
    ("textkit/__init__.py", b"from textkit.pairs import format_pairs, parse_pairs\n"),
    ("textkit/pairs.py", REPO_PAIRS.encode()),
    ("tests/test_pairs.py", PUBLIC_TEST.encode()),
    ("@prompt", PROMPT.encode()),
    ("@title", b"Implement parse_pairs()"),
]


class FakeKeys:
    """A KeySource: HKDF subkeys of a fixed master secret (as ``KeyRing.subkey`` derives them)."""

    def __init__(self, master: bytes) -> None:
        self.master = master

    def subkey(self, label: str) -> bytes:
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"eval-ledger/v1",
                    info=label.encode("utf-8"))
        return hkdf.derive(self.master)


@pytest.fixture
def keys() -> FakeKeys:
    """The master-secret stand-in of the log."""
    return FakeKeys(bytes(range(32)))


@pytest.fixture
def other_keys() -> FakeKeys:
    """Another installation's secret."""
    return FakeKeys(bytes(range(1, 33)))


@pytest.fixture
def ckey(keys: FakeKeys) -> bytes:
    """The commitment subkey."""
    return keys.subkey(COMMITMENT_KEY_LABEL)


@pytest.fixture
def signer() -> Signer:
    """The log's Ed25519 key."""
    return Signer.from_seed(KEY_NAME, random.Random(7).randbytes(32))


@pytest.fixture
def impostor() -> Signer:
    """Another Ed25519 key under the same name."""
    return Signer.from_seed(KEY_NAME, random.Random(8).randbytes(32))


@pytest.fixture
def commitment(ckey: bytes) -> Commitment:
    """The commitment to the task's ground truth, built from material (with prefilters)."""
    return build_commitment(MATERIAL, key=ckey, public=PUBLIC, root=TASK_ROOT)


@pytest.fixture
def redactor(commitment: Commitment, ckey: bytes) -> Redactor:
    """The capture filter the run would use."""
    return Redactor(commitment, ckey)


@pytest.fixture
def policy() -> ScanPolicy:
    """The attempt's scope: worktree, home and scratch, interpreter under /opt/py."""
    return ScanPolicy.for_attempt(worktree=WORKTREE, home=HOME, scratch=SCRATCH,
                                  interpreter_prefixes=("/opt/py",),
                                  network_allowlist=("pypi.org:443", "10.1.0.0/16"))


@dataclass
class Recorder:
    """Appends crafted entries (real canonical bytes) and keeps their Merkle tree."""

    redact: Callable[[str], str]
    commitment: Commitment
    entries: list[Entry] = field(default_factory=list)
    nodes: merkle.MemoryNodes = field(default_factory=merkle.MemoryNodes)

    def add(self, kind: str, data: dict[str, Any], *, attempt: str | None = ATTEMPT,
            run: str | None = RUN, task: str | None = TASK) -> Entry:
        body = dict(data)
        if attempt is not None:
            body["attempt"] = attempt
        e = encode_entry(seq=len(self.entries), ts=CLOCK + len(self.entries), kind=kind,
                         data=body, run=run, task=task)
        self.entries.append(e)
        self.nodes.append([e.leaf_hash])
        return e

    def start(self, *, attempt: str = ATTEMPT, trace: str = "strace") -> None:
        self.add("attempt.started", {"agent": "fake", "agent_spec": "cmd:fake", "repeat": 1,
                                     "try": 1, "tier": "smoke", "node": "n1"}, attempt=attempt)
        self.add("commitment", {"commitment": self.commitment.as_data()}, attempt=attempt)
        self.add("agent.started", {"argv": ["fake"], "cwd": WORKTREE, "trace": trace,
                                   "trace_reason": ""}, attempt=attempt)

    def read(self, path: str, content: str | None = None, *, resolved: str | None = None,
             attempt: str = ATTEMPT) -> Entry:
        res = resolved or (path if path.startswith("/") else f"{WORKTREE}/{path}")
        return self.add("fs.read", {"path": path, "resolved": res,
                                    "in_worktree": res.startswith(WORKTREE + "/"),
                                    "content": None if content is None else self.redact(content),
                                    "source": "strace"}, attempt=attempt)

    def write(self, path: str, *, attempt: str = ATTEMPT) -> Entry:
        res = path if path.startswith("/") else f"{WORKTREE}/{path}"
        return self.add("fs.write", {"path": path, "resolved": res,
                                     "in_worktree": res.startswith(WORKTREE + "/"),
                                     "source": "strace"}, attempt=attempt)

    def exec(self, argv: Sequence[str], *, attempt: str = ATTEMPT) -> Entry:
        return self.add("proc.exec", {"argv": [self.redact(a) for a in argv], "path": argv[0],
                                      "source": "strace"}, attempt=attempt)

    def output(self, text: str, *, attempt: str = ATTEMPT) -> Entry:
        red = self.redact(text)
        return self.add("agent.output", {"stream": "stdout", "text": red,
                                         "total_bytes": len(text), "truncated": False},
                        attempt=attempt)

    def call(self, tool: str, inp: Any, *, attempt: str = ATTEMPT) -> Entry:
        if isinstance(inp, dict):
            inp = {k: self.redact(v) if isinstance(v, str) else v for k, v in inp.items()}
        return self.add("tool.call", {"tool": tool, "input": inp}, attempt=attempt)

    def result(self, tool: str, output: str, *, attempt: str = ATTEMPT) -> Entry:
        return self.add("tool.result", {"tool": tool, "output": self.redact(output),
                                        "is_error": False}, attempt=attempt)

    def connect(self, host: str, port: int, *, attempt: str = ATTEMPT) -> Entry:
        return self.add("net.connect", {"host": host, "port": port, "family": "inet",
                                        "source": "strace"}, attempt=attempt)

    def diff(self, patch: str, *, attempt: str = ATTEMPT) -> Entry:
        return self.add("diff", {"files": [{"path": "textkit/pairs.py", "status": "modified",
                                            "added": 20, "removed": 1}],
                                 "patch": self.redact(patch), "truncated": False,
                                 "conflict_markers": False, "apply_failed": False},
                        attempt=attempt)

    def finish(self, *, attempt: str = ATTEMPT) -> None:
        self.add("agent.finished", {"exit_code": 0, "signal": None, "wall_s": 1.5,
                                    "timed_out": False, "crashed": False, "tokens_in": None,
                                    "tokens_out": None, "cost_usd": None, "cost_source": "none",
                                    "orphans": 0, "telemetry": True}, attempt=attempt)

    def checkpoint(self, signer: Signer, size: int | None = None) -> str:
        size = len(self.entries) if size is None else size
        return sign_checkpoint(Checkpoint(KEY_NAME, size, self.nodes.root(size)), signer)

    def prove(self, seq: int, size: int) -> list[bytes]:
        return merkle.inclusion_proof(seq, size, self.nodes.fetch)


def fix_patch() -> str:
    """The agent's diff when it writes the reference fix."""
    old = REPO_PAIRS.splitlines()
    new = SOLUTION_PAIRS.splitlines()
    return "\n".join(["--- a/textkit/pairs.py", "+++ b/textkit/pairs.py", "@@ -1,10 +1,29 @@",
                      *(f"-{line}" for line in old[4:7]), *(f"+{line}" for line in new[4:26])])


def honest(rec: Recorder) -> None:
    """An honest agent: reads the repo, runs the public tests, writes the right answer."""
    rec.start()
    rec.read("/opt/py/lib/python3.11/os.py")
    rec.read("/etc/hosts")
    rec.read(f"{SCRATCH}/prompt.md", PROMPT)
    rec.read("textkit/pairs.py", REPO_PAIRS)
    rec.read("tests/test_pairs.py", PUBLIC_TEST)
    rec.output("Implement parse_pairs()\nreading textkit/pairs.py\n")
    rec.exec(["python", "-m", "pytest", "-q", "tests"])
    rec.output("F\n___ test_parse_pairs_simple ___\n"
               "tests/test_pairs.py::test_parse_pairs_simple FAILED\n"
               "NotImplementedError: parse_pairs is not written yet\n1 failed in 0.02s\n")
    rec.write("textkit/pairs.py")
    rec.exec(["python", "-m", "pytest", "-q", "tests"])
    rec.output("tests/test_pairs.py::test_parse_pairs_simple PASSED\n1 passed in 0.01s\n")
    rec.connect("pypi.org", 443)
    rec.connect("127.0.0.53", 53)
    rec.finish()
    rec.diff(fix_patch())


@pytest.fixture
def rec(redactor: Redactor, commitment: Commitment) -> Recorder:
    """An empty recorder whose captured texts pass the redactor."""
    return Recorder(redact=redactor, commitment=commitment)


def scan(rec: Recorder, redactor: Redactor, policy: ScanPolicy,
         attempt: str = ATTEMPT) -> ScanResult:
    return scan_attempt(rec.entries, attempt=attempt, commitment=redactor.commitment,
                        policy=policy, scanner=redactor)


def attest(rec: Recorder, redactor: Redactor, policy: ScanPolicy, signer: Signer,
           keys: FakeKeys, attempt: str = ATTEMPT) -> dict[str, Any]:
    """Scan, checkpoint, build and append the attestation, as the run does."""
    result = scan(rec, redactor, policy, attempt)
    note = rec.checkpoint(signer)
    att = build_attestation(result, checkpoint_note=note, signer=signer,
                            seal_key=keys.subkey(SEAL_KEY_LABEL), prove=rec.prove)
    from attest.attestation import attestation_hash

    rec.add("attestation", {"attestation": att, "hash": attestation_hash(att)}, attempt=attempt)
    return att
