"""``ledger monitor URL|DIR``: follow a published journal and re-derive what it claims.

One check, in order (the first structural failure raises VerificationError, exit 1):

1. ``checkpoint`` verifies with the log's key (and, given witness keys, carries at least
   ``threshold`` of their cosignatures: ``witness.check_witnesses``).
2. The level-0 tiles the checkpoint's size requires are fetched (each exactly its width in
   hashes: ``tile-size``) and the whole tree is recomputed from them; its root must be the
   checkpoint's (``tile-hash``), and every published higher-level tile must hold exactly the
   recomputed hashes (``tile-hash``).
3. Every entry bundle holds one slot per leaf (``entry-bundle``); each entry hashes to its leaf
   in the level-0 tile, each large entry (``large/<leaf>``) too, each withheld marker names it.
4. The tree is proved consistent with the checkpoint remembered last time (``seen.py``, shared
   with ``ledger verify``): a log rewritten or rolled back fails ``remembered-checkpoint``.
5. Entries are decoded; every run that recorded a view and has none of its entries withheld is
   replayed (a view counts every entry of its run, unknown kinds too) (``evaluators.registry``): a view that does not replay is
   a ``view-replay`` finding, an entry set aside by ``evaluators.structure`` an ``injected`` one.

The report names the runs and recorded views that are new since the remembered checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import MalformedInput, NotFound, UsageError, VerificationError
from ledger.journal import merkle
from ledger.journal.codec import Entry, decode_entries_trusted
from ledger.journal.note import Checkpoint, Verifier, open_checkpoint
from ledger.journal.tiles import HASH_SIZE
from ledger.journal.verify import fetch_from, levels_from_leaves
from ledger.publish import layout


class Source:
    """Where a published log is read from: ``get(rel)`` -> bytes, or None when it is absent."""

    name: str

    def get(self, rel: str) -> bytes | None:
        raise NotImplementedError

    def get_many(self, rels: Sequence[str]) -> list[bytes | None]:
        return [self.get(r) for r in rels]


class DirSource(Source):
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.name = str(root)
        if not self.root.is_dir():
            raise NotFound(f"{root} is not a directory (give a published directory or an http(s) URL)")

    def get(self, rel: str) -> bytes | None:
        try:
            return (self.root / rel).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            raise UsageError(f"cannot read {self.root / rel}: {exc.strerror}") from None


class HttpSource(Source):
    def __init__(self, base: str, workers: int = 8) -> None:
        self.base = base.rstrip("/")
        self.name = base
        self.workers = workers

    def get(self, rel: str) -> bytes | None:
        from ledger.publish.http import http_get

        return http_get(f"{self.base}/{rel}")

    def get_many(self, rels: Sequence[str]) -> list[bytes | None]:
        if len(rels) < 4:
            return [self.get(r) for r in rels]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self.get, rels))


def open_source(where: str) -> Source:
    if where.startswith(("http://", "https://")):
        return HttpSource(where)
    return DirSource(Path(where))


@dataclass
class MonitorReport:
    source: str
    origin: str
    size: int
    root: str
    previous_size: int | None = None
    cosigned_by: list[str] = field(default_factory=list)
    entries: int = 0
    withheld: int = 0
    large: int = 0
    new_runs: list[dict[str, Any]] = field(default_factory=list)
    new_views: list[dict[str, Any]] = field(default_factory=list)
    replayed: list[dict[str, Any]] = field(default_factory=list)
    not_replayed: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    remembered: str | None = None
    verified: Verified | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "source": self.source, "origin": self.origin, "size": self.size, "root": self.root,
                "previous_size": self.previous_size, "cosigned_by": self.cosigned_by, "entries": self.entries,
                "withheld": self.withheld, "large": self.large, "new_runs": self.new_runs,
                "new_views": self.new_views, "replayed": self.replayed, "not_replayed": self.not_replayed,
                "findings": self.findings, "remembered": self.remembered}


@dataclass(frozen=True)
class Verified:
    """What one check proved, kept by a follower (``--follow``) so that its next check fetches,
    hashes and decodes only what the log added: the entries below the last full level-0 tile of
    this size are not read again (a tailing monitor, as tlog-tiles describes one)."""

    note: str
    size: int
    root: bytes
    leaves: bytes
    bodies: list[bytes | None]
    marks: list[layout.Slot | None]
    entries: list[Entry | None]


def _need(data: bytes | None, rel: str, check: str = "tile-missing") -> bytes:
    if data is None:
        raise VerificationError(check, f"{rel} is missing, and the checkpoint's size requires it")
    return data


def _tile_specs(size: int, level: int) -> list[tuple[int, int]]:
    """(index, width) of every tile level ``level`` has in a tree of ``size``."""
    count = layout.level_count(size, level)
    specs = [(i, layout.TILE_WIDTH) for i in range(count >> layout.TILE_HEIGHT)]
    if count % layout.TILE_WIDTH:
        specs.append((count >> layout.TILE_HEIGHT, count % layout.TILE_WIDTH))
    return specs


def check_tree(source: Source, cp: Checkpoint, prior: Verified | None = None
               ) -> tuple[list[bytes], list[bytes | None], list[layout.Slot | None]]:
    """Steps 2 and 3: the recomputed levels, and per seq the entry bytes (None when withheld) and
    the marker slot (None for a plain entry). With ``prior``, the full level-0 tiles and bundles
    it covers are taken from it and only the rest is fetched and checked."""
    n = cp.size
    base = 0 if prior is None else prior.size >> layout.TILE_HEIGHT  # first level-0 tile to fetch
    specs0 = _tile_specs(n, 0)[base:]
    rels = [layout.tile_path(0, i, w) for i, w in specs0]
    tiles0 = source.get_many(rels)
    for rel, (_i, w), data in zip(rels, specs0, tiles0, strict=True):
        data = _need(data, rel)
        if len(data) != w * HASH_SIZE:
            raise VerificationError("tile-size", f"{rel} holds {len(data)} bytes, {w * HASH_SIZE} expected "
                                    f"({w} hashes){' (truncated)' if len(data) < w * HASH_SIZE else ''}")
    kept = base * layout.TILE_BYTES
    leaves = (prior.leaves[:kept] if prior is not None else b"") + b"".join(tiles0)  # type: ignore[arg-type]
    levels = levels_from_leaves(leaves)
    root = merkle.root(n, fetch_from(levels)) if n else merkle.EMPTY_ROOT
    if root != cp.root:
        raise VerificationError("tile-hash", f"the level-0 tiles do not hash to the checkpoint's root at size {n}",
                                expected=cp.root.hex(), computed=root.hex())
    level = 1
    while layout.level_count(n, level):
        done = 0 if prior is None else layout.level_count(prior.size, level) >> layout.TILE_HEIGHT
        specs = _tile_specs(n, level)[done:]
        rels = [layout.tile_path(level, i, w) for i, w in specs]
        got = source.get_many(rels)
        want_level = levels[layout.TILE_HEIGHT * level]
        for rel, (i, w), data in zip(rels, specs, got, strict=True):
            data = _need(data, rel)
            want = want_level[i * layout.TILE_BYTES:i * layout.TILE_BYTES + w * HASH_SIZE]
            if len(data) != w * HASH_SIZE:
                raise VerificationError("tile-size", f"{rel} holds {len(data)} bytes, {w * HASH_SIZE} expected")
            if data != want:
                j = next(j for j in range(w) if data[j * 32:j * 32 + 32] != want[j * 32:j * 32 + 32])
                raise VerificationError("tile-hash", f"{rel}: hash {j} disagrees with the tiles below it",
                                        expected=want[j * 32:j * 32 + 32].hex(), computed=data[j * 32:j * 32 + 32].hex())
        level += 1

    first = base << layout.TILE_HEIGHT
    bodies: list[bytes | None] = prior.bodies[:first] if prior is not None else []
    marks: list[layout.Slot | None] = prior.marks[:first] if prior is not None else []
    brels = [layout.bundle_path(i, w) for i, w in specs0]
    bundles = source.get_many(brels)
    leaf_hashes = merkle.leaf_hashes
    for (i, w), rel, data in zip(specs0, brels, bundles, strict=True):
        slots = layout.split_bundle(_need(data, rel, "entry-bundle"), w, rel)
        tile = leaves[i * layout.TILE_BYTES:i * layout.TILE_BYTES + w * HASH_SIZE]
        if not any(s[:1] == b"\x00" for s in slots) and b"".join(leaf_hashes(slots)) == tile:
            bodies.extend(slots)
            marks.extend([None] * w)
            continue
        for j, raw in enumerate(slots):
            seq = (i << layout.TILE_HEIGHT) + j
            want = tile[j * HASH_SIZE:(j + 1) * HASH_SIZE]
            try:
                slot = layout.read_slot(raw)
            except MalformedInput as exc:
                raise VerificationError("entry-bundle", f"{rel}: entry {seq}: {exc}", seq=seq) from exc
            if slot.leaf != want:
                what = "does not hash to" if slot.form == "entry" else "names a leaf other than"
                raise VerificationError("entry-bundle", f"{rel}: entry {seq} {what} its leaf in "
                                        f"{layout.tile_path(0, i, w)}: the bundle does not match the tile", seq=seq,
                                        expected=want.hex(), computed=slot.leaf.hex())
            if slot.form == "large":
                lrel = layout.large_path(slot.leaf)
                body = _need(source.get(lrel), lrel, "entry-bundle")
                if len(body) != slot.size or merkle.leaf_hash(body) != slot.leaf:
                    raise VerificationError("entry-bundle", f"{lrel} is not the entry {seq} its marker names", seq=seq)
                bodies.append(body)
                marks.append(slot)
            elif slot.form == "withheld":
                bodies.append(None)
                marks.append(slot)
            else:
                bodies.append(slot.body)
                marks.append(None)
    return levels, bodies, marks


def _decode(bodies: Sequence[bytes | None], start: int = 0) -> tuple[list[Entry | None], list[dict[str, Any]]]:
    """Decode the published entries from ``start`` (their bytes are pinned by the verified tree);
    a body that does not decode, or whose envelope seq is not its place, is a finding."""
    findings: list[dict[str, Any]] = []
    present = [(seq, bodies[seq]) for seq in range(start, len(bodies)) if bodies[seq] is not None]
    try:
        decoded = decode_entries_trusted(b for _s, b in present)
    except Exception:  # noqa: BLE001 (one bad body: decode one by one below to name it)
        decoded = []
        for seq, b in present:
            try:
                decoded.extend(decode_entries_trusted([b]))
            except Exception as exc:  # noqa: BLE001
                decoded.append(None)  # type: ignore[arg-type]
                findings.append({"check": "entry-decode", "seq": seq, "message": f"entry {seq} does not decode: "
                                 f"{type(exc).__name__}"})
    out: list[Entry | None] = [None] * (len(bodies) - start)
    for (seq, _b), e in zip(present, decoded, strict=True):
        if e is None:
            continue
        if e.seq != seq:
            findings.append({"check": "entry-decode", "seq": seq,
                             "message": f"entry {seq} says it is entry {e.seq}"})
            continue
        out[seq - start] = e
    return out, findings


def check_log(source: Source, verifier: Verifier, *, witnesses: Sequence[Verifier] = (), threshold: int = 0,
              state_dir: Path | None = None, remember: bool = True,
              replay: Callable[[list[Entry], str], Any] | None = None,
              prior: Verified | None = None) -> MonitorReport:
    """One check of the published log (module docstring); findings in the report, structural
    failures raised as VerificationError. ``prior`` (the ``verified`` of the previous report of
    the same source, for ``--follow``): only what the log added since is fetched and checked, and
    only the runs with new entries are replayed; a smaller tree or another one of the same size
    is a rollback or a fork (``remembered-checkpoint``) even with ``remember=False``."""
    from ledger.journal import seen
    from ledger.journal.witness import check_witnesses

    raw = source.get("checkpoint")
    if raw is None:
        raise NotFound(f"{source.name} has no checkpoint: not a published log")
    try:
        note = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("checkpoint-signature", f"{source.name}/checkpoint is not UTF-8") from None
    try:
        cp = open_checkpoint(note, verifier)
    except MalformedInput as exc:
        raise VerificationError("checkpoint-signature", f"{source.name}/checkpoint is malformed: {exc}") from exc
    report = MonitorReport(source.name, cp.origin, cp.size, cp.root.hex())
    if witnesses:
        report.cosigned_by = check_witnesses(note, verifier, witnesses, threshold)
    if prior is not None:
        if cp.size < prior.size:
            raise VerificationError("remembered-checkpoint", f"{source.name} now publishes {cp.size} entries, "
                                    f"{prior.size} before: the log was truncated or rolled back", seq=cp.size)
        if cp.size == prior.size and cp.root != prior.root:
            raise VerificationError("remembered-checkpoint", f"{source.name} publishes another tree of size "
                                    f"{cp.size} than before: the history was rewritten", seq=max(cp.size - 1, 0))
    levels, bodies, marks = check_tree(source, cp, prior)
    if prior is not None and prior.size:
        # the new tree, built on the leaves checked before, must extend the tree checked before
        proof = merkle.consistency_proof(prior.size, cp.size, fetch_from(levels))
        try:
            merkle.verify_consistency(prior.size, cp.size, prior.root, cp.root, proof)
        except VerificationError as exc:
            raise VerificationError("remembered-checkpoint", f"the log does not extend the checkpoint of size "
                                    f"{prior.size} checked before: the history was rewritten ({exc})",
                                    seq=prior.size - 1) from exc
    report.entries = len(bodies)
    report.withheld = sum(1 for m in marks if m is not None and m.form == "withheld")
    report.large = sum(1 for m in marks if m is not None and m.form == "large")

    previous = None
    if remember:
        fetch = fetch_from(levels)
        got = seen.check_and_remember(
            verifier=verifier, size=cp.size, root=cp.root,
            consistency=lambda old: merkle.consistency_proof(old, cp.size, fetch), latest_note=note,
            directory=state_dir)
        previous = got.previous_size
        report.remembered = got.path
    if previous is None and prior is not None:
        previous = prior.size
    report.previous_size = previous
    since = previous or 0

    start = 0 if prior is None else (prior.size >> layout.TILE_HEIGHT) << layout.TILE_HEIGHT
    new_entries, report.findings = _decode(bodies, start)
    entries = (prior.entries[:start] if prior is not None else []) + new_entries
    changed = None if prior is None else {e.run for e in entries[prior.size:] if e is not None}
    _runs_and_views(entries, marks, since, report, replay, changed)
    report.verified = Verified(note, cp.size, cp.root, levels[0], bodies, marks, entries)
    return report


def _runs_and_views(entries: Sequence[Entry | None], marks: Sequence[layout.Slot | None], since: int,
                    report: MonitorReport, replay: Callable[[list[Entry], str], Any] | None,
                    changed: set[str | None] | None = None) -> None:
    """New runs and views since ``since``; replay (and structure-check) every run, or with
    ``changed`` only those runs (the ones with entries the previous check did not see)."""
    from evaluators.registry import replay_run
    from evaluators.structure import trusted

    by_run: dict[str, list[Entry]] = {}
    views: dict[str, list[Entry]] = {}
    for e in entries:
        if e is None or e.run is None:
            continue
        by_run.setdefault(e.run, []).append(e)
        if e.kind == "run.started" and e.seq >= since:
            report.new_runs.append({"run": e.run, "seq": e.seq})
        elif e.kind == "view.recorded":
            views.setdefault(e.run, []).append(e)
            if e.seq >= since:
                view = e.data.get("view")
                view = view if isinstance(view, dict) else {}
                report.new_views.append({"run": e.run, "seq": e.seq, "evaluator": e.data.get("evaluator"),
                                         "version": e.data.get("version"), "score": view.get("score"),
                                         "status": view.get("status")})
    withheld: dict[str | None, dict[str, int]] = {}
    for m in marks:
        if m is not None and m.form == "withheld":
            kinds = withheld.setdefault(m.run, {})
            kinds[str(m.kind)] = kinds.get(str(m.kind), 0) + 1
    run_replay = replay or replay_run
    for run in views:
        if changed is not None and run not in changed:
            continue
        # a view counts every entry of its run (unknown kinds too): any withheld one blocks it
        hidden = withheld.get(run, {})
        if hidden:
            report.not_replayed.append({"run": run, "reason": "entries of the run are withheld",
                                        "withheld_kinds": dict(sorted(hidden.items()))})
            continue
        result = run_replay(by_run[run], run)
        report.replayed.append({"run": run, "evaluator": result.evaluator, "reproduced": result.reproduced,
                                "views": len(result.views), "injected": len(result.injected)})
        if not result.reproduced:
            bad = next((v for v in result.views if v.diff_count), None)
            report.findings.append({"check": "view-replay", "seq": bad.seq if bad else None,
                                    "message": f"run {run}: a recorded view does not replay from the published "
                                    f"entries ({result.message})"})
        _injected(report, run, result.injected)
    for run, mine in by_run.items():
        if run not in views and (changed is None or run in changed):  # no view to replay: the run's structure is still checked
            _injected(report, run, trusted(mine, run).findings)


def _injected(report: MonitorReport, run: str, findings: Sequence[Any]) -> None:
    for f in findings:
        report.findings.append({"check": "injected", "seq": f.seq,
                                "message": f"run {run}: entry {f.seq} ({f.kind}) is injected: {f.reason}"})
