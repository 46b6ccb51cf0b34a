"""The public journal API: append, read, prove, checkpoint, verify.

    j = Journal.open(home.journal_path, create=True)   # an outside tool: only ext.* kinds
    j.append("ext.note", {...})
    h = Journal.open(home.journal_path, create=True, harness=True)   # the harness's own writer
    e = h.append("run.started", {...}, run=run_id)
    j.append_many([{"kind": ..., "data": ..., "run": ..., "task": ...}, ...])
    note = j.checkpoint(keys)            # signed C2SP checkpoint of the current head
    j.inclusion_proof(seq, size)         # RFC 6962 audit path, bottom-up
    j.consistency_proof(old, new)
    j.verify(since=note_text, verifier=v)   # None, or raises VerificationError (first bad seq)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import MalformedInput, NotFound, UsageError
from ledger.journal import merkle
from ledger.journal.codec import Entry, decode_entry, decode_entry_trusted
from ledger.journal.store import Item, Store
from ledger.journal.tiles import DEFAULT_HEIGHT

if TYPE_CHECKING:  # verify.py is imported when a verify runs
    from ledger.journal.verify import StoreCheck

MAX_BATCH = 100_000
EXTERNAL_PREFIX = "ext."
"""Entry kinds outside tools may append; every other kind is reserved for the harness
(docs/VOCABULARY.md, "Who may write what")."""


def is_external_kind(kind: object) -> bool:
    """True for a kind an outside tool may append (``ext.<name>``)."""
    return isinstance(kind, str) and kind.startswith(EXTERNAL_PREFIX) and len(kind) > len(EXTERNAL_PREFIX)


def check_external_kinds(kinds: Iterable[object]) -> None:
    """Refuse (UsageError, exit 2) any kind an outside tool may not append."""
    for kind in kinds:
        if not is_external_kind(kind):
            raise UsageError(
                f"entry kind {kind!r} is reserved for the harness: outside tools append only "
                f"'{EXTERNAL_PREFIX}<name>' kinds (e.g. '{EXTERNAL_PREFIX}note')")


@dataclass(frozen=True)
class InclusionProof:
    leaf_index: int
    tree_size: int
    leaf_hash: bytes
    root: bytes
    hashes: tuple[bytes, ...]

    def as_json(self) -> dict[str, Any]:
        return {"leaf_index": self.leaf_index, "tree_size": self.tree_size,
                "leaf_hash": self.leaf_hash.hex(), "root": self.root.hex(),
                "hashes": [h.hex() for h in self.hashes]}


@dataclass(frozen=True)
class ConsistencyProof:
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]

    def as_json(self) -> dict[str, Any]:
        return {"old_size": self.old_size, "new_size": self.new_size,
                "old_root": self.old_root.hex(), "new_root": self.new_root.hex(),
                "hashes": [h.hex() for h in self.hashes]}


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    started_ts: int
    started_seq: int
    config: dict[str, Any]
    state: str  # "finished" | "interrupted" | "running"
    finished_ts: int | None


_body = itemgetter(1)  # (seq, body) -> body: bytes, as sqlite3 returns a BLOB


class Journal:
    """One journal database plus the ledger directory around it (keys, checkpoints)."""

    def __init__(self, store: Store, home: Path | None, clock: Callable[[], int], *,
                 harness: bool = False) -> None:
        self._store = store
        self.home = home
        self._clock = clock
        self._harness = harness

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False, readonly: bool = False,
             clock: Callable[[], int] = time.time_ns, synchronous: str = "FULL",
             tile_height: int = DEFAULT_HEIGHT, harness: bool = False) -> Journal:
        """Open the journal at ``path`` (a journal.db file, or a ledger directory).

        ``tile_height`` sets how a new journal stores its tree (docs/FORMAT.md); an existing
        journal keeps its own. ``harness=True`` is the harness's own writer (run, bench): it may
        append the reserved kinds of docs/VOCABULARY.md; any other caller appends only
        ``ext.*`` kinds and is refused the rest (UsageError).
        """
        p = Path(path)
        if str(path) != ":memory:" and (p.is_dir() or p.suffix != ".db"):
            p = p / "journal.db"
        store = Store.open(p if str(path) != ":memory:" else ":memory:", create=create,
                           readonly=readonly, synchronous=synchronous, tile_height=tile_height)
        home = None if str(path) == ":memory:" else p.parent
        return cls(store, home, clock, harness=harness)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        return self._store

    # ------------------------------------------------------------------ writing

    def append(self, kind: str, data: Mapping[str, Any], *, run: str | None = None,
               task: str | None = None) -> Entry:
        """Append one entry in its own transaction; it is durable when this returns."""
        if not self._harness:
            check_external_kinds((kind,))
        # encode_entries copies a plain dict before it checks and packs it
        return self._store.append([(kind, data if type(data) is dict else dict(data), run, task)],
                                  self._clock)[0]

    def append_many(self, items: Iterable[Mapping[str, Any] | Item]) -> list[Entry]:
        """Append several entries in one transaction (all or none).

        Items are maps ``{"kind", "data", "run"?, "task"?}`` or tuples (kind, data, run, task).
        """
        batch: list[Item] = []
        add = batch.append
        for item in items:
            # the common case, checked with exact types: a (kind, dict, str|None, str|None) tuple
            if item.__class__ is tuple and len(item) == 4:
                kind, data, run, task = item
                if (kind.__class__ is str and kind and data.__class__ is dict
                        and (run is None or run.__class__ is str) and (task is None or task.__class__ is str)):
                    add(item)  # encode_entry copies the data map before it checks and packs it
                    continue
            add(_checked_item(item))
            if len(batch) > MAX_BATCH:
                raise UsageError(f"a batch holds at most {MAX_BATCH} entries")
        if len(batch) > MAX_BATCH:
            raise UsageError(f"a batch holds at most {MAX_BATCH} entries")
        if not self._harness:
            check_external_kinds(item[0] for item in batch)
        return self._store.append(batch, self._clock)

    # ------------------------------------------------------------------ reading

    @property
    def size(self) -> int:
        return self._store.head()[0]

    def head(self) -> tuple[int, bytes]:
        """The latest committed tree head (size, root)."""
        return self._store.head()

    def entries(self, *, start: int = 0, stop: int | None = None, run: str | None = None,
                task: str | None = None, kind: str | Collection[str] | None = None,
                check_canonical: bool = True) -> Iterator[Entry]:
        """Decoded entries in seq order; filters combine (``kind``: one, or any of several).

        ``check_canonical=False`` skips the canonical re-encoding check; use it only right after
        ``verify()`` passed on this journal (the hashes then pin the bytes), as ``replay`` does.
        """
        decode = decode_entry if check_canonical else decode_entry_trusted
        # map over map: no Python frame per entry between the store's rows and the decoder
        rows = self._store.rows(start=start, stop=stop, run=run, task=task, kind=kind)
        return map(decode, map(_body, rows))

    def entry(self, seq: int) -> Entry:
        for e in self.entries(start=seq, stop=seq + 1):
            return e
        raise NotFound(f"no entry at seq {seq} (journal size {self.size})")

    def find_leaf(self, leaf: bytes) -> int | None:
        """The seq of the entry with this leaf hash, if any."""
        return self._store.find_leaf(leaf)

    def root_at(self, size: int) -> bytes:
        self._check_size(size)
        return merkle.root(size, self._store.fetch_nodes)

    def _check_size(self, size: int) -> None:
        current = self.size
        if size < 0 or size > current:
            raise UsageError(f"tree size {size} is outside 0..{current}")

    def inclusion_proof(self, seq: int, size: int | None = None) -> InclusionProof:
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 <= seq < size:
            raise UsageError(f"seq {seq} is not in a tree of size {size}")
        hashes = merkle.inclusion_proof(seq, size, self._store.fetch_nodes)
        leaf = self._store.fetch_nodes([(0, seq)])[(0, seq)]
        return InclusionProof(seq, size, leaf, self.root_at(size), tuple(hashes))

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new_size = self.size if new_size is None else new_size
        self._check_size(new_size)
        if not 0 <= old_size <= new_size:
            raise UsageError(f"old size {old_size} must be between 0 and {new_size}")
        hashes = merkle.consistency_proof(old_size, new_size, self._store.fetch_nodes)
        return ConsistencyProof(old_size, new_size, self.root_at(old_size), self.root_at(new_size),
                                tuple(hashes))

    # ------------------------------------------------------------------ runs

    def runs(self) -> list[RunInfo]:
        """Runs, newest first, from the run-level entries."""
        infos: dict[str, dict[str, Any]] = {}
        for seq, body in self._store.run_level_rows():
            e = decode_entry(bytes(body))
            if e.run is None:
                continue
            if e.kind == "run.started":
                infos[e.run] = {"run_id": e.run, "started_ts": e.ts, "started_seq": seq,
                                "config": dict(e.data.get("config", {})), "state": "interrupted",
                                "finished_ts": None}
            elif e.kind == "run.resumed" and e.run in infos:
                infos[e.run]["state"] = "interrupted"
            elif e.kind == "run.finished" and e.run in infos:
                infos[e.run]["state"] = str(e.data.get("status", "finished"))
                infos[e.run]["finished_ts"] = e.ts
        out = [RunInfo(**v) for v in infos.values()]
        out.sort(key=lambda r: r.started_seq, reverse=True)
        return out

    def resolve_run(self, prefix: str | None) -> str:
        """A full run id from a unique prefix; the latest run when prefix is None."""
        runs = self.runs()
        if not runs:
            raise NotFound("the journal has no runs yet: start one with `ledger run`")
        if prefix is None:
            return runs[0].run_id
        exact = [r.run_id for r in runs if r.run_id == prefix]
        if exact:
            return exact[0]
        matches = [r.run_id for r in runs if r.run_id.startswith(prefix)]
        if not matches:
            raise NotFound(f"no run matches {prefix!r}; `ledger runs` lists them")
        if len(matches) > 1:
            raise NotFound(f"run prefix {prefix!r} is ambiguous: {', '.join(matches[:5])}")
        return matches[0]

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, keys: Any, *, force: bool = False) -> str:
        """Sign the current head (unless the latest checkpoint already covers it); return the note.

        The head is read after its transaction committed (synchronous=FULL), so what is signed is
        durable. The note is stored in the database and written to ``checkpoints/<size>.note``.
        """
        from ledger.journal.note import Checkpoint, sign_checkpoint

        size, root = self.head()
        existing = dict(self._store.checkpoints())
        if size in existing and not force:
            note = existing[size]
        else:
            note = sign_checkpoint(Checkpoint(origin=keys.key_name, size=size, root=root),
                                   keys.signer)
            if not self._store.add_checkpoint(size, note, self._clock()):
                note = dict(self._store.checkpoints())[size]
        self._write_checkpoint_file(size, note)
        return note

    def add_cosignature(self, note: str, verifier: Any) -> tuple[int, str]:
        """Keep a cosigned note of one of this journal's checkpoints in ``cosigned/<size>.note``.

        The log's own signature is re-checked with ``verifier``, the note must sign the very text
        of the checkpoint the journal holds at that size, and its signature lines are merged with
        those kept before. Returns (size, merged note).
        """
        from ledger.journal.note import merge_signatures, open_checkpoint, parse_note

        cp = open_checkpoint(note, verifier)
        stored = dict(self._store.checkpoints()).get(cp.size)
        if stored is None:
            raise NotFound(f"the journal holds no checkpoint of size {cp.size} to add a cosignature to")
        if parse_note(stored)[0] != parse_note(note)[0]:
            raise UsageError(f"the cosigned note is not the journal's checkpoint of size {cp.size}")
        if self.home is None:
            raise UsageError("an in-memory journal keeps no cosigned notes")
        merged = merge_signatures(self.cosigned_note(cp.size) or stored, note)
        folder = self.home / "cosigned"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{cp.size}.note.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(merged)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / f"{cp.size}.note")
        return cp.size, merged

    def cosigned_note(self, size: int) -> str | None:
        """The cosigned note kept for the checkpoint of ``size``, if any."""
        if self.home is None:
            return None
        path = self.home / "cosigned" / f"{size}.note"
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def latest_checkpoint(self) -> tuple[int, str] | None:
        cps = self._store.checkpoints()
        return cps[-1] if cps else None

    def _write_checkpoint_file(self, size: int, note: str) -> None:
        if self.home is None:
            return
        folder = self.home / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{size}.note"
        if target.exists() and target.read_text(encoding="utf-8") == note:
            return
        tmp = folder / f".{size}.note.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(note)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    # ------------------------------------------------------------------ verification

    def verify(self, *, since: str | None = None, verifier: Any = None,
               external_dir: Path | None = None, deep: bool = False,
               progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Check everything; return a summary of what was checked, or raise VerificationError."""
        return self.check(since=since, verifier=verifier, external_dir=external_dir, deep=deep,
                          progress=progress).summary

    def check(self, *, since: str | None = None, verifier: Any = None,
              external_dir: Path | None = None, deep: bool = False,
              progress: Callable[[int, int], None] | None = None,
              retain: bool = False) -> StoreCheck:
        """Check everything, as :meth:`verify`; return the typed ``StoreCheck`` (``retain``: with
        the entry bytes it read, so a caller that reads on need not read them again)."""
        from ledger.journal.verify import check_store

        ext = external_dir if external_dir is not None else (
            self.home / "checkpoints" if self.home is not None else None)
        return check_store(self._store, verifier=verifier, since=since, external_dir=ext,
                           deep=deep, progress=progress, retain=retain)


def _checked_item(item: Any) -> Item:
    """One append item, a map ``{"kind", "data", "run"?, "task"?}`` or a 4-tuple, checked."""
    if isinstance(item, tuple):
        if len(item) != 4:
            raise MalformedInput("append item tuple must be (kind, data, run, task)")
        kind, data, run, task = item
    elif isinstance(item, Mapping):
        unknown = set(item) - {"kind", "data", "run", "task"}
        if unknown:
            raise MalformedInput(f"append item has unknown fields {sorted(unknown)}")
        if "kind" not in item or "data" not in item:
            raise MalformedInput("append item needs 'kind' and 'data'")
        kind, data = item["kind"], item["data"]
        run, task = item.get("run"), item.get("task")
    else:
        raise MalformedInput("append item must be a map or a tuple")
    if not isinstance(kind, str) or not kind:
        raise MalformedInput("append item 'kind' must be a non-empty string")
    if not isinstance(data, Mapping):
        raise MalformedInput("append item 'data' must be a map")
    for name, value in (("run", run), ("task", task)):
        if value is not None and not isinstance(value, str):
            raise MalformedInput(f"append item '{name}' must be a string")
    return (kind, dict(data), run, task)
