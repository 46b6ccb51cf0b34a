"""The scope of an attempt and its attestation step.

    scan_policy(agent.started, task allowlist)  the folders the worker reported, the interpreter
                                                (``ledger.sandbox.paths.interpreter_paths``),
                                                the network (task allowlist + model API endpoints)
    Attestor.attest(run, attempt, task)         scan the attempt against its commitment, sign a
                                                checkpoint, build the attestation entry's data

The run's session applies it as its attestation policy (``ledger.session.CleanRunAttestation``):
after an attempt's last entry the session's writer appends what ``Attestor.attest`` returns.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from attest.attestation import COMMITMENT_KEY_LABEL, SEAL_KEY_LABEL
from ledger.journal.codec import Entry
from ledger.journal.journal import Journal
from ledger.sandbox.paths import interpreter_paths
from ledger.tasks.model import Task


def _abs_path(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith("/") and value != "/" else None


def _ip_entries(text: Any, port: int) -> list[str]:
    """Allowlist entries for one resolved address at ``port``, in the form strace reports a
    connection: ``1.2.3.4:443`` (and ``[::ffff:1.2.3.4]:443``, the same address through an IPv6
    socket), ``[2001:db8::1]:443``. Nothing for what is not a single, specified address."""
    import ipaddress

    try:
        addr = ipaddress.ip_address(text) if isinstance(text, str) else None
    except ValueError:
        return []
    if addr is not None and addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr is None or addr.is_unspecified:
        return []
    if addr.version == 4:
        return [f"{addr}:{port}", f"[::ffff:{addr}]:{port}"]
    return [f"[{addr.compressed}]:{port}"]


def endpoint_allowlist(endpoints: Any) -> tuple[str, ...]:
    """Network allowlist entries for the model API endpoints an ``agent.started`` entry reports:
    each declared name at its port (``api.anthropic.com:443``; it matches a connection the trace
    names by host) and each address it resolved to, as an exact IP at that port. Malformed
    records allow nothing (a CIDR block, ``0.0.0.0`` or a non-integer port never widens the
    scope)."""
    from ledger.agents.presets import endpoint_host_ok

    out: list[str] = []
    for rec in endpoints if isinstance(endpoints, list) else ():
        if not isinstance(rec, Mapping):
            continue
        host, port = rec.get("host"), rec.get("port", 443)
        if (not isinstance(host, str) or not endpoint_host_ok(host) or isinstance(port, bool)
                or not isinstance(port, int) or not 0 < port < 65536):
            continue
        out.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        addresses = rec.get("addresses")
        for addr in addresses if isinstance(addresses, list) else ():
            out += _ip_entries(addr, port)
    return tuple(dict.fromkeys(out))


def scan_policy(started: Entry | None, network_allowlist: Sequence[str] = ()) -> Any:
    """The scope of one attempt: the folders its worker reported in ``agent.started``, the
    interpreter, and the network: the task's allowlist, then the agent's model API endpoints
    (names and resolved addresses, see ``endpoint_allowlist``).

    Without ``agent.started`` (the agent never ran) the worktree is unknown: a path that names no
    real folder stands in, so nothing counts as inside it.
    """
    from attest.scan import ScanPolicy

    data = started.data if started is not None else {}
    readable = [p for p in (data.get("readable") or []) if _abs_path(p)]
    network = tuple(dict.fromkeys([*network_allowlist,
                                   *endpoint_allowlist(data.get("endpoints"))]))
    return ScanPolicy.for_attempt(
        worktree=_abs_path(data.get("cwd")) or "/nonexistent/ledger-worktree",
        home=_abs_path(data.get("home")),
        scratch=_abs_path(data.get("scratch")),
        interpreter_prefixes=tuple(interpreter_paths()),
        network_allowlist=network,
        extra_read=tuple(readable),
    )


class Attestor:
    """The attestation step of a run (the session's writer stays the only journal writer).

    ``attest(run, attempt, task, task_obj, entries)`` scans the attempt's entries (handed over
    by the session's attestation policy, which kept them as they were appended) with the
    commitment key, signs a checkpoint, and returns the data of its ``attestation`` entry (not
    appended here), or None when the attempt journaled no commitment.
    """

    def __init__(self, journal: Journal, keys: Any) -> None:
        self.journal = journal
        self.keys = keys
        self._key = keys.subkey(COMMITMENT_KEY_LABEL)
        self._built: dict[str, Any] = {}  # task id -> commitment built from the task files

    def _commitment(self, task: Task | None, stored: Any) -> Any:
        """The journaled commitment; the one rebuilt from the task files when it is the same
        (it carries the prefilters that make the scan fast), else the stored one."""
        from attest.commitment import Commitment
        from ledger.tasks.material import commitment_for_task

        journaled = Commitment.from_data(stored)
        if task is not None:
            if task.id not in self._built:
                try:
                    self._built[task.id] = commitment_for_task(task, key=self._key)
                except Exception:  # the task folder changed or vanished: scan the stored one
                    self._built[task.id] = None
            built = self._built[task.id]
            if built is not None and built.digest == journaled.digest:
                return built
        return journaled

    def entries(self, run_id: str, attempt_id: str, task_id: str, start: int = 0) -> list[Entry]:
        """The attempt's entries read back from the journal (the coordinator keeps them as it
        appends them instead; this serves tools and tests)."""
        return [e for e in self.journal.entries(start=start, run=run_id, task=task_id)
                if e.data.get("attempt") == attempt_id]

    def attest(self, run_id: str, attempt_id: str, task_id: str, task: Task | None,
               entries: Sequence[Entry],
               written: Collection[int] | None = None) -> dict[str, Any] | None:
        """The attestation data of one attempt; ``written``: the seqs of the attempt's entries
        this coordinator appended itself (the results the attestation binds), None when the
        coordinator restarted (then every result entry of the attempt is bound)."""
        from attest.attestation import attestation_hash, build_attestation
        from attest.redact import Redactor
        from attest.scan import scan_attempt

        commit = next((e for e in entries if e.kind == "commitment"), None)
        if commit is None:
            return None
        commitment = self._commitment(task, commit.data.get("commitment"))
        started = next((e for e in entries if e.kind == "agent.started"), None)
        network = tuple(task.network_allowlist) if task is not None else ()
        scan = scan_attempt(
            entries, attempt=attempt_id, commitment=commitment,
            policy=scan_policy(started, network), scanner=Redactor(commitment, self._key),
        )
        note = self.journal.checkpoint(self.keys)
        att = build_attestation(
            scan, checkpoint_note=note, signer=self.keys.signer,
            seal_key=self.keys.subkey(SEAL_KEY_LABEL),
            prove=lambda seq, size: self.journal.inclusion_proof(seq, size).hashes,
            results=[e for e in entries if written is None or e.seq in written],
        )
        return {"attempt": attempt_id, "attestation": att, "hash": attestation_hash(att)}


def secret_patterns_of(keys: Any) -> list[list[Any]]:
    """Redaction patterns for the harness's own key bytes (master secret, signing seed, the
    commitment and seal subkeys, the signer key line), sent to the workers in the attempt plan
    instead of the keys themselves (``attest.redact.SecretPattern``: a prefix, a length, a hash)."""
    from attest.redact import secret_patterns

    signer = keys.signer
    secrets = [keys.master_secret, signer.seed, bytes([1]) + signer.seed,
               keys.subkey(COMMITMENT_KEY_LABEL), keys.subkey(SEAL_KEY_LABEL)]
    return [p.as_data() for p in secret_patterns(secrets, [signer.skey])]

