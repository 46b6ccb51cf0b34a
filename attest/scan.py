"""The activity scan of one attempt: pure, over decoded journal entries.

    entries of the attempt --scan_attempt(commitment, policy, scanner)--> ScanResult
        activity count + digest over the leaf hashes of every activity entry (seq order)
        matches (seq, class): content | path | read-scope | write-scope | network |
                              canary-passed (graded code passed a canary: attest/canary.py)
        verdict: DIRTY (any match) / UNOBSERVED (activity not captured) / CLEAN

Inflow (what reached the agent) is matched against the commitment: ``fs.read`` content and
``evidence`` (the markers a read outside the worktree keeps instead of its content),
``tool.result`` output, ``net.response`` content, and ``agent.output`` text (the agent process's
stdout/stderr, which carries what its subprocesses printed: ``cat``, test output). Outflow (what
the agent authored) is not contamination: ``tool.call`` input, ``proc.exec`` argv, ``fs.write``
content when captured, the final ``diff`` patch. Writing the right answer is the agent's job;
reading it is contamination.

Echo rule (so that an agent reading back its own work stays CLEAN):

- a read of a worktree file (``fs.read`` inside the worktree, or the result of a tool whose input
  names a worktree path and no command) is never contamination: the worktree starts as the public
  repo, and ground truth can only enter it through the agent's own writes or through a copy whose
  source read, path or network connection is itself scanned. Its digests join the *echoed* set;
- any other inflow counts only with the digests that the agent had not produced (outflow) or
  read back from the worktree in an **earlier** entry; reading first and writing later does not
  excuse the read;
- ``agent.output`` is one aggregate per stream with no timing inside, so it is matched against
  everything produced or echoed in the whole attempt.

Folded reads (``fs.read.summary``: interpreter and system files, each with a digest and a count,
kept only when their content matched nothing; past the first ones, counted by folder) are checked
for path and read scope, one match per class for the whole entry (a folder is read scope unless
everything below it is allowed). Its ``worktree`` count (unwritten files of the starting tree)
is never contamination and is not scanned.

Canary rule: the attempt's ``canary.result`` is checked against its ``canary.commitment``: a
canary whose outcome is ``passed`` (or a result that does not list exactly the committed canaries)
is a ``canary-passed`` match on the result entry, whatever the activity was. A correct solution
fails every canary, so passing one proves the graded code forged its outcomes, exited early or
read the expected values. Journals without canary entries scan as before.

Path rule: a read outside the worktree whose resolved path (or an ancestor directory, a suffix
of two or more components, or a hidden test's basename) is committed is a ``path`` match, as is
an absolute or ``..`` path to it in a command line or tool input. Redaction markers in any inflow
count exactly like the plaintext they replaced (the marker carries the digest).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from attest import digests as dg
from attest.grading_scan import GRADING_CLASSES, GradingSeen, grading_observed, judge_grading
from attest.scope import ScanPolicy
from ledger.errors import MalformedInput, VerificationError
from ledger.journal.codec import Entry, canonical_bytes

if TYPE_CHECKING:
    from attest.commitment import Commitment

ACTIVITY_KINDS = frozenset({
    "fs.read", "fs.read.summary", "fs.write", "proc.exec", "net.connect", "net.response",
    "tool.call", "tool.result", "agent.output", "diff",
})
MATCH_CLASSES = ("content", "path", "read-scope", "write-scope", "network", "canary-passed",
                 *GRADING_CLASSES)
CANARY_KINDS = frozenset({"canary.commitment", "canary.result"})
SCOPE_CLASSES = frozenset({"read-scope", "write-scope", "network"})
VERDICTS = ("CLEAN", "DIRTY", "UNOBSERVED")
OBSERVED_TRACES = frozenset({"strace", "transcript"})
# The agent's box said its processes cannot be traced from outside (a container box: its record's
# ``trace`` is "not captured"): whatever the trace mode, nothing was observed, transcript or not
# (the agent's own account is not evidence of what it did not do). Older journals never say so.
NOT_CAPTURED = "not-captured"


def observed_trace(obs: Mapping[str, Any]) -> bool:
    """Whether an attestation's ``observation`` says the agent's activity was observed."""
    trace = obs.get("trace")
    return bool(obs.get("agent_started")) and trace != "partial" and trace != NOT_CAPTURED and (
        trace in OBSERVED_TRACES or bool(obs.get("transcript")))

_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file")
_COMMAND_KEYS = ("command", "cmd", "script", "code", "argv", "url")
_TEXT_KEYS = {"fs.read": "content", "tool.result": "output", "agent.output": "text",
              "net.response": "content", "diff": "patch", "fs.write": "content"}
_ACTIVITY_LABEL = b"activity"
_MATCHES_LABEL = b"matches"
_REFUSALS_LABEL = b"refusals"


class TextScanner(Protocol):
    """What the scan needs from a matcher: ``Redactor`` (with the key) or ``MarkerScanner``."""

    def digests(self, text: str) -> set[bytes]: ...

    def path_digests(self, paths: Iterable[str], *, ancestors: bool = True) -> set[bytes]: ...


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Match:
    """One piece of evidence: entry ``seq`` (whose leaf hash is ``leaf_hash``) is ``cls``."""

    seq: int
    cls: str
    kind: str
    leaf_hash: bytes
    digests: tuple[bytes, ...] = ()
    detail: str = ""

    @property
    def key(self) -> tuple[int, str]:
        return (self.seq, self.cls)


@dataclass(frozen=True)
class Refusal:
    """A request the harness's proxy refused (denied by the allowlist, or malformed): a finding
    of the attestation, not a match (it moved no byte, so it cannot carry ground truth in)."""

    seq: int
    leaf_hash: bytes
    detail: str  # "host:port reason"


def refusals_digest(refusals: Iterable[Refusal]) -> str:
    """SHA-256 over the leaf hashes of the refused requests' entries, in seq order."""
    return dg.sha256_hex(_REFUSALS_LABEL, b"".join(r.leaf_hash for r in sorted(
        refusals, key=lambda r: r.seq)))


@dataclass(frozen=True)
class ScanResult:
    attempt: str
    run: str | None
    task: str | None
    commitment_seq: int
    commitment_digest: str
    first_seq: int
    last_seq: int
    activity_count: int
    activity_digest: str
    kinds: Mapping[str, int]
    observation: Mapping[str, Any]
    matches: tuple[Match, ...]
    echoes: int
    answer_digests: int
    verdict: str
    policy: ScanPolicy = field(repr=False)
    isolation: str = "none"  # "sandbox" when agent.started reports the agent ran sandboxed
    sandbox: Mapping[str, Any] | None = None  # the sandbox policy agent.started recorded
    refusals: tuple[Refusal, ...] = ()  # requests the proxy refused, in seq order
    limits: Mapping[str, Any] | None = None  # the resource limits agent.started recorded
    grading: Mapping[str, Any] | None = None  # attest.grading_scan.judge_grading's summary
    environment: Mapping[str, Any] | None = None  # the images the attempt's boxes ran (``images``)

    @property
    def matches_digest(self) -> str:
        return matches_digest(m.key for m in self.matches)


class ImagesSeen:
    """The container images the attempt's boxes recorded (``agent.started`` and ``grading``
    ``sandbox``: ``image_id`` and ``digest``); the attestation binds them (``environment``)."""

    def __init__(self) -> None:
        self.digests: set[str] = set()
        self.ids: set[str] = set()

    def see(self, box: Any) -> None:
        if isinstance(box, Mapping) and isinstance(box.get("digest"), str):
            self.digests.add(box["digest"])
            if isinstance(box.get("image_id"), str):
                self.ids.add(box["image_id"])

    def summary(self) -> dict[str, Any] | None:
        """``{digests, image_ids}`` (sorted), or None when no box ran an image."""
        if not self.digests:
            return None
        return {"digests": sorted(self.digests), "image_ids": sorted(self.ids)}


def derive_verdict(match_count: int, observed: bool) -> str:
    """DIRTY with any match; otherwise CLEAN only when the activity was observed."""
    if match_count > 0:
        return "DIRTY"
    return "CLEAN" if observed else "UNOBSERVED"


def matches_digest(keys: Iterable[tuple[int, str]]) -> str:
    """SHA-256 over the sorted (seq, class) pairs of every match."""
    pairs = [list(k) for k in sorted(keys)]
    if not pairs:  # a clean attempt's (most attestations'): the same every time
        return _NO_MATCHES_DIGEST
    return dg.sha256_hex(_MATCHES_LABEL, canonical_bytes(pairs))


_NO_MATCHES_DIGEST = dg.sha256_hex(_MATCHES_LABEL, canonical_bytes([]))


class ActivityDigest:
    """Running digest over the leaf hashes of the scanned activity entries, in seq order."""

    def __init__(self) -> None:
        self._h = hashlib.sha256(b"eval-ledger/attest/v1/" + _ACTIVITY_LABEL + b"\x00")
        self.count = 0

    def add(self, leaf: bytes) -> None:
        self._h.update(leaf)
        self.count += 1

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def is_activity(entry: Entry, attempt: str) -> bool:
    return entry.kind in ACTIVITY_KINDS and entry.data.get("attempt") == attempt


# --------------------------------------------------------------------------- the scan


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _outflow_text(value: Any) -> str:
    return "\n".join(dg.strings_in(value))


def _worktree_target(call_input: Any, policy: ScanPolicy) -> bool:
    """Does a tool call read a worktree path (and run no command)?"""
    if not isinstance(call_input, Mapping):
        return False
    if any(k in call_input for k in _COMMAND_KEYS):
        return False
    for k in _PATH_KEYS:
        value = call_input.get(k)
        if isinstance(value, str) and value:
            if value.startswith("/"):
                return policy.in_worktree(value)
            norm = dg.normalize_path(value)
            return bool(norm) and not norm.startswith("..")
    return False


def _escaping_refs(text: str) -> list[str]:
    """Path references that can leave the worktree: absolute, or climbing with ``..``."""
    return [p for p in dg.path_references(text)
            if p.startswith("/") or p.startswith("~") or dg.normalize_path(p).startswith("..")]


class _Scan:
    def __init__(self, attempt: str, policy: ScanPolicy, scanner: TextScanner) -> None:
        self.attempt = attempt
        self.policy = policy
        self.scanner = scanner
        self.produced: set[bytes] = set()
        self.echoed: set[bytes] = set()
        self.matches: dict[tuple[int, str], Match] = {}
        self.deferred: list[tuple[Entry, set[bytes]]] = []
        self.last_call: dict[str, Any] = {}
        self.echoes = 0
        self.transcript = False
        self.isolated = False  # agent.started says the agent ran in a sandbox
        self.refusals: list[Refusal] = []

    def add(self, e: Entry, cls: str, digests: Iterable[bytes] = (), detail: str = "") -> None:
        if (e.seq, cls) not in self.matches:
            self.matches[(e.seq, cls)] = Match(e.seq, cls, e.kind, e.leaf_hash,
                                               tuple(sorted(digests)), detail)

    def inflow(self, e: Entry, found: set[bytes]) -> None:
        if not found:
            return
        fresh = found - self.produced - self.echoed
        if fresh:
            self.add(e, "content", fresh)
        else:
            self.echoes += 1

    def echo(self, found: set[bytes]) -> None:
        if found:
            self.echoed |= found
            self.echoes += 1

    def refs(self, e: Entry, text: str) -> None:
        refs = _escaping_refs(text)
        if refs:
            hit = self.scanner.path_digests(refs)
            if hit:
                self.add(e, "path", hit)

    def summary(self, e: Entry) -> None:
        """Folded reads (no content, no evidence by construction): paths and scope only. A file
        inside the worktree has no place here and counts as read outside it."""
        files = e.data.get("files")
        paths = [_text(item[0]) if isinstance(item, list) and item else ""
                 for item in (files if isinstance(files, list) else ())]
        hits = self.scanner.path_digests([p for p in paths if p])
        allowed_dirs: set[str] = set()  # folders wholly on the read allowlist
        for where in paths:
            folder = where.rpartition("/")[0]
            if not where or folder in allowed_dirs:
                continue
            if self.policy.read_allowed_below(folder):
                allowed_dirs.add(folder)
            elif not self.policy.read_allowed(where):
                self.add(e, "read-scope", detail=where)
        # Past its first files a summary counts system files by folder (``folders``): each
        # folder is judged as a whole, and the capture listed any file whose path is committed.
        folders = e.data.get("folders")
        names = [_text(item[0]) if isinstance(item, list) and item else ""
                 for item in (folders if isinstance(folders, list) else ())]
        for folder in names:
            if folder and not self.policy.read_allowed_below(folder):
                self.add(e, "read-scope", detail=folder)
        hits |= self.scanner.path_digests([f for f in names if f])
        if hits:
            self.add(e, "path", hits)

    def entry(self, e: Entry) -> None:
        d, kind, pol = e.data, e.kind, self.policy
        if d.get("source") == "transcript":
            self.transcript = True
        if kind == "fs.read":
            where = _text(d.get("resolved")) or _text(d.get("path"))
            inside = pol.in_worktree(where) if where.startswith("/") else bool(d.get("in_worktree"))
            found = self.scanner.digests(_text(d.get("content")))
            found |= self.scanner.digests(_text(d.get("evidence")))
            if inside:
                self.echo(found)
                return
            hit = self.scanner.path_digests([where]) if where else set()
            if hit:
                self.add(e, "path", hit)
            if where and not pol.read_allowed(where):
                self.add(e, "read-scope", detail=where)
            self.inflow(e, found)
        elif kind == "fs.read.summary":
            self.summary(e)
        elif kind == "fs.write":
            where = _text(d.get("resolved")) or _text(d.get("path"))
            inside = pol.in_worktree(where) if where.startswith("/") else bool(d.get("in_worktree"))
            if not inside and not (where and pol.write_allowed(where)):
                self.add(e, "write-scope", detail=where or "?")
            self.produced |= self.scanner.digests(_text(d.get("content")))
        elif kind == "proc.exec":
            text = _outflow_text([d.get("argv"), d.get("path")])
            self.produced |= self.scanner.digests(text)
            self.refs(e, text)
        elif kind == "net.connect":
            if d.get("source") == "proxy":
                # The harness's proxy: a denied request moved no byte (not contamination), but
                # it is a finding: the agent tried to reach something it was not given.
                if d.get("allowed") is False and not d.get("bytes_in") and not d.get("bytes_out"):
                    reason = d.get("reason")
                    port = d.get("port")
                    self.refusals.append(Refusal(e.seq, e.leaf_hash, (
                        f"{_text(d.get('host'))}:{port if isinstance(port, int) else '?'} "
                        f"{_text(reason) if isinstance(reason, str) and reason else 'denied'}")[:512]))
                    return
            elif self.isolated:
                return  # a sandbox has no network: its only way out is the proxy, recorded
            host, port, family = d.get("host"), d.get("port"), d.get("family")
            port_i = port if isinstance(port, int) and not isinstance(port, bool) else None
            fam = family if isinstance(family, str) else None
            if not pol.endpoint_allowed(_text(host), port_i, fam):
                self.add(e, "network", detail=f"{_text(host)}:{port_i}")
        elif kind == "net.response":
            self.inflow(e, self.scanner.digests(_text(d.get("content"))))
        elif kind == "tool.call":
            self.transcript = True
            tool = _text(d.get("tool"))
            self.last_call[tool] = d.get("input")
            text = _outflow_text(d.get("input"))
            self.produced |= self.scanner.digests(text)
            self.refs(e, text)
        elif kind == "tool.result":
            self.transcript = True
            call = self.last_call.pop(_text(d.get("tool")), None)
            found = self.scanner.digests(_text(d.get("output")))
            if _worktree_target(call, pol):
                self.echo(found)
            else:
                self.inflow(e, found)
        elif kind == "agent.output":
            found = self.scanner.digests(_text(d.get("text")))
            if found:
                self.deferred.append((e, found))
        elif kind == "diff":
            self.produced |= self.scanner.digests(_text(d.get("patch")))

    def finish(self) -> None:
        for e, found in self.deferred:
            self.inflow(e, found)


def scan_attempt(
    entries: Iterable[Entry],
    *,
    attempt: str,
    commitment: Commitment,
    policy: ScanPolicy,
    scanner: TextScanner,
) -> ScanResult:
    """Scan every entry of ``attempt`` in ``entries`` (seq order; other attempts are skipped).

    The attempt's ``commitment`` entry must be present, come before any activity, and carry
    ``commitment`` (check ``commitment``). The covered range runs from the commitment entry to the
    attempt's last entry seen (``attestation`` entries excluded).
    """
    scan = _Scan(attempt, policy, scanner)
    activity = ActivityDigest()
    kinds: dict[str, int] = {}
    run: str | None = None
    task: str | None = None
    commitment_seq: int | None = None
    last_seq = -1
    trace: str | None = None
    started = False
    isolation, sandbox = "none", None
    canary_entries: dict[str, Entry] = {}
    limits: Mapping[str, Any] | None = None
    grading = GradingSeen()
    images = ImagesSeen()
    prev = -1
    for e in entries:
        if e.seq <= prev:
            raise MalformedInput(f"entries are not in seq order at seq {e.seq}")
        prev = e.seq
        if e.data.get("attempt") != attempt or e.kind == "attestation":
            continue
        if e.kind == "commitment":
            _check_commitment_entry(e, commitment, twice=commitment_seq is not None)
            commitment_seq = e.seq
            run, task = e.run, e.task
        elif commitment_seq is None and (e.kind in ACTIVITY_KINDS or e.kind == "agent.started"):
            raise VerificationError("commitment-order", "activity before the commitment entry",
                                    seq=e.seq)
        if commitment_seq is None:
            continue
        last_seq = e.seq
        if grading.see(e):
            continue
        if e.kind == "agent.started":
            started = True
            trace, sandbox, limits = _agent_started(e, scan, images)
            isolation = "sandbox" if sandbox is not None else isolation
            continue
        if e.kind == "grading":
            images.see(e.data.get("sandbox"))
        if e.kind == "sandbox.failed" and e.data.get("stage") == "agent":
            started = False  # the sandbox never ran the agent: nothing was observed
        if e.kind in CANARY_KINDS:
            canary_entries[e.kind] = e
            continue
        if e.kind == "agent.finished" and e.data.get("trace_partial") is True and trace:
            trace = "partial"  # the tracer let go before the agent ended: not observed
            continue
        if e.kind not in ACTIVITY_KINDS:
            continue
        activity.add(e.leaf_hash)
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
        scan.entry(e)
    if commitment_seq is None:
        raise VerificationError("commitment", f"no commitment entry for attempt {attempt}")
    scan.finish()
    _canary_matches(scan, canary_entries)
    graded = judge_grading(scan, grading)
    observation = {"trace": trace, "transcript": scan.transcript, "agent_started": started}
    observed = observed_trace(observation)
    matches = tuple(sorted(scan.matches.values(), key=lambda m: m.key))
    return ScanResult(
        attempt=attempt,
        run=run,
        task=task,
        commitment_seq=commitment_seq,
        commitment_digest=commitment.digest,
        first_seq=commitment_seq,
        last_seq=last_seq,
        activity_count=activity.count,
        activity_digest=activity.hexdigest(),
        kinds=dict(sorted(kinds.items())),
        observation=observation,
        matches=matches,
        echoes=scan.echoes,
        answer_digests=len(scan.produced),
        verdict=derive_verdict(len(matches), observed and grading_observed(graded)),
        policy=policy,
        isolation=isolation,
        sandbox=sandbox,
        refusals=tuple(scan.refusals),
        limits=limits,
        grading=graded,
        environment=images.summary(),
    )


def _agent_started(e: Entry, scan: _Scan, images: ImagesSeen
                   ) -> tuple[str | None, Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """(trace mode, sandbox record or None, limits or None) of an ``agent.started`` entry. A box
    whose record says its trace is "not captured" (a container's) makes the trace ``NOT_CAPTURED``."""
    t = e.data.get("trace")
    trace = t if isinstance(t, str) else None
    box = e.data.get("sandbox")
    sandbox = None
    if e.data.get("isolation") == "sandbox" and isinstance(box, Mapping):
        sandbox = box
        scan.isolated = True
        if box.get("trace") == "not captured":
            trace = NOT_CAPTURED
        images.see(box)
    lim = e.data.get("limits")
    return trace, sandbox, lim if isinstance(lim, Mapping) else None


def _check_commitment_entry(e: Entry, commitment: Commitment, *, twice: bool) -> None:
    if twice:
        raise VerificationError("commitment", "the attempt has two commitment entries", seq=e.seq)
    stored = e.data.get("commitment")
    digest = stored.get("digest") if isinstance(stored, Mapping) else None
    if digest != commitment.digest:
        raise VerificationError("commitment", "the journal's commitment for this attempt "
                                "is not the one given", seq=e.seq,
                                expected=str(digest), computed=commitment.digest)


def _canary_matches(scan: _Scan, found: Mapping[str, Entry]) -> None:
    """A ``canary-passed`` match on the ``canary.result`` entry when a committed canary passed,
    or when the result does not account for exactly the committed canaries."""
    from attest.canary import check_commitment, passed_items

    res = found.get("canary.result")
    if res is None:
        return
    com = found.get("canary.commitment")
    problem: str | None = None
    passed: list[str] = []
    try:
        committed = check_commitment(com.data.get("canaries") if com is not None else None)
    except MalformedInput as exc:
        problem = f"no valid canary commitment: {exc}"
    else:
        data = res.data.get("canaries")
        passed, problem = passed_items(committed, data if isinstance(data, Mapping) else {})
    if passed or problem:
        items = tuple(bytes.fromhex(i) for i in passed if isinstance(i, str)
                      and len(i) == 32 and all(ch in "0123456789abcdef" for ch in i))
        detail = problem or f"{len(passed)} canary test(s) or signal(s) passed"
        scan.add(res, "canary-passed", items, detail)
