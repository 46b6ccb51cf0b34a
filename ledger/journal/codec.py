"""Canonical msgpack encoding of journal entries.

An entry is one msgpack map ``{"data", "kind", "run", "seq", "task", "ts", "v"}`` stored as the
exact bytes that are hashed. Canonical means: every map key is a ``str`` and keys are sorted by
their UTF-8 bytes; integers take their smallest msgpack form; floats are float64 and finite;
strings are ``str`` (valid UTF-8), binary data is ``bin``; no extension types. ``decode`` re-encodes
what it parsed and refuses bytes that differ, so one value has exactly one byte string.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgpack

from ledger.errors import CodecError
from ledger.journal.merkle import leaf_hash  # the RFC 6962 leaf hash of stored entry bytes

FORMAT_VERSION = 1
ENVELOPE_KEYS = frozenset({"v", "seq", "ts", "run", "task", "kind", "data"})
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
MAX_DEPTH = 64
MAX_ENTRY_BYTES = 16 * 1024 * 1024
"""The largest entry (its encoded bytes) a journal accepts: 16 MiB (docs/FORMAT.md)."""


class _Packers(threading.local):
    """One reusable ``msgpack.Packer`` per thread.

    A reused Packer's ``pack`` costs about a quarter of ``msgpack.packb`` (which builds a Packer
    on every call), but a Packer keeps an internal buffer and is not safe to share between
    threads; the journal is appended to from more than one thread (recorder, coordinator), so
    each thread gets its own. Reading the attribute of a ``threading.local`` costs ~40 ns, once
    per call. A Packer that raises empties its buffer, so it stays usable after an error.
    """

    def __init__(self) -> None:
        self.pack = msgpack.Packer(use_bin_type=True, use_single_float=False).pack


_PACKERS = _Packers()


def _pack(value: Any) -> bytes:
    """msgpack bytes of an already canonical value (exact types, sorted keys)."""
    return _PACKERS.pack(value)  # type: ignore[no-any-return]


# Exact types whose msgpack form needs no canonicalization (ints only a range check, which the
# Packer does by raising OverflowError). bool is listed on its own: ``type(True) is bool``.
_PLAIN_SCALARS = frozenset({str, bytes, int, bool, type(None)})
_KEPT_SCALARS = frozenset({str, bytes, bool, type(None)})  # no check at all
_isfinite = math.isfinite
_new_entry = tuple.__new__
_ENVELOPE_CACHE_MAX = 4096
_envelope_cache: dict[tuple[str | None, str | None, str], tuple[bytes, bytes]] = {}


def _canon(value: Any, depth: int) -> Any:
    """Return ``value`` with maps key-sorted; raise CodecError on any non-canonical type.

    Python orders ``str`` by code point, which is also the order of their UTF-8 bytes, so
    ``sorted(keys)`` is the canonical order. Exact-type checks come first: they are the hot path.
    """
    t = type(value)
    if t is str or t is bytes or value is None or t is bool:
        return value
    if t is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise CodecError(f"integer {value} outside the msgpack range")
        return value
    if t is float:
        if not math.isfinite(value):
            raise CodecError("NaN and infinite floats are not allowed in entries")
        return value
    if depth >= MAX_DEPTH:
        raise CodecError(f"value nested deeper than {MAX_DEPTH} levels")
    depth += 1
    if t is dict or isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if type(key) is not str:
                raise CodecError(f"map key {key!r} is not a string")
        keys.sort()
        out = {}
        for key in keys:  # str/bytes/bool/None are kept as they are without a call
            item = value[key]
            out[key] = item if type(item) in _KEPT_SCALARS else _canon(item, depth)
        return out
    if t is list or t is tuple or (isinstance(value, list | tuple) and not isinstance(value, Entry)):
        return [item if type(item) in _KEPT_SCALARS else _canon(item, depth) for item in value]
    # subclasses of the scalar types (IntEnum, str subclasses) are stored as their base value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return _canon(int(value), depth)
    if isinstance(value, float):
        return _canon(float(value), depth)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    raise CodecError(f"type {t.__name__} cannot be stored in an entry")


def _is_canonical(value: Any, depth: int) -> bool:
    """True when ``value`` is already what ``_canon`` would return, so it can be packed as it is.

    Mirrors ``_canon`` without building a copy: exact types only, str keys in sorted order,
    finite floats, the same depth limit. Out-of-range ints pass here and make the Packer raise.
    Values decoded by msgpack pass whenever their bytes were canonical.
    """
    t = type(value)
    if t in _PLAIN_SCALARS:
        return True
    if t is float:
        return _isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    depth += 1
    if t is dict:
        prev = ""
        for key, item in value.items():
            if type(key) is not str or key < prev:
                return False
            prev = key
            if type(item) not in _PLAIN_SCALARS and not _is_canonical(item, depth):
                return False
        return True
    if t is list:
        for item in value:
            if type(item) not in _PLAIN_SCALARS and not _is_canonical(item, depth):
                return False
        return True
    return False


def canonical_bytes(value: Any) -> bytes:
    """Encode any storable value canonically (used for entries and for hashed sub-objects)."""
    if _is_canonical(value, 0):
        try:
            return _pack(value)
        except (OverflowError, ValueError, TypeError):
            pass  # an out-of-range int or a lone surrogate: the path below raises as before
    try:
        return _pack(_canon(value, 0))
    except (OverflowError, ValueError, TypeError) as exc:
        raise CodecError(f"cannot encode value: {exc}") from exc


def _reject_ext(code: int, data: bytes) -> Any:
    raise CodecError(f"extension type {code} is not allowed in entries")


def unpack_canonical(raw: bytes) -> Any:
    """Decode bytes that must be the canonical encoding of their own value."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise CodecError("entry bytes must be bytes")
    raw = bytes(raw)
    try:
        value = msgpack.unpackb(
            raw, raw=False, strict_map_key=True, use_list=True, ext_hook=_reject_ext, timestamp=0
        )
    except CodecError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise CodecError(f"not valid msgpack: {exc}") from exc
    if isinstance(value, msgpack.Timestamp):
        raise CodecError("timestamp extension is not allowed in entries")
    if canonical_bytes(value) != raw:
        raise CodecError("bytes are not the canonical encoding of their value")
    return value


class Entry(NamedTuple):
    """One decoded journal entry together with the exact bytes that were hashed.

    A NamedTuple rather than a frozen dataclass: it is built once per entry on the append and
    replay hot paths, and a tuple costs a third of a frozen dataclass's ``__init__``. It is just as
    immutable (no field or new attribute can be set), compares and prints field by field, and
    pickles. Unlike a dataclass it is also a tuple; ``_canon`` refuses to store one in an entry.
    """

    seq: int
    ts: int
    run: str | None
    task: str | None
    kind: str
    data: dict[str, Any]
    raw: bytes

    @property
    def leaf_hash(self) -> bytes:
        return leaf_hash(self.raw)

    def as_json(self, *, raw: bool = False) -> dict[str, Any]:
        """A JSON-ready view (bytes inside ``data`` become ``{"$bytes": base64}``)."""
        import base64

        out: dict[str, Any] = {
            "seq": self.seq,
            "ts": self.ts,
            "run": self.run,
            "task": self.task,
            "kind": self.kind,
            "data": jsonable(self.data),
            "leaf_hash": self.leaf_hash.hex(),
        }
        if raw:
            out["bytes"] = base64.b64encode(self.raw).decode("ascii")
        return out


def jsonable(value: Any) -> Any:
    """Turn an entry value into something ``json.dumps`` accepts (bytes as base64 objects)."""
    import base64

    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def _check_envelope(obj: Any) -> None:
    """Refuse a decoded map that is not an entry envelope.

    ``obj`` comes from msgpack, which builds only the exact types (never a subclass), so exact
    type checks say the same as ``isinstance`` would, and ``type(x) is int`` also refuses bools.
    """
    if type(obj) is not dict:
        raise CodecError("an entry must be a msgpack map")
    if obj.keys() != ENVELOPE_KEYS:
        keys = set(obj)
        missing = sorted(ENVELOPE_KEYS - keys)
        extra = sorted(str(k) for k in keys - ENVELOPE_KEYS)
        raise CodecError(f"entry fields wrong: missing={missing} extra={extra}")
    v = obj["v"]
    if type(v) is not int or v != FORMAT_VERSION:
        raise CodecError(f"unknown entry format version {v!r}")
    seq = obj["seq"]
    if type(seq) is not int or seq < 0:
        raise CodecError("entry seq must be a non-negative integer")
    if type(obj["ts"]) is not int:
        raise CodecError("entry ts must be an integer (unix nanoseconds)")
    run, task = obj["run"], obj["task"]
    if run is not None and type(run) is not str:
        raise CodecError("entry run must be a string or nil")
    if task is not None and type(task) is not str:
        raise CodecError("entry task must be a string or nil")
    kind = obj["kind"]
    if type(kind) is not str or not kind:
        raise CodecError("entry kind must be a non-empty string")
    if type(obj["data"]) is not dict:
        raise CodecError("entry data must be a map")


def _entry_from(obj: Any, raw: bytes) -> Entry:
    """The Entry for a decoded envelope ``obj`` and its bytes; CodecError if it is no envelope.

    The common case is checked in one expression (seven keys, all of them the envelope's,
    exact types); anything else goes to ``_check_envelope`` for the error that names the field.
    """
    if type(obj) is dict and len(obj) == 7:
        try:
            v, seq, ts = obj["v"], obj["seq"], obj["ts"]
            run, task, kind, data = obj["run"], obj["task"], obj["kind"], obj["data"]
        except KeyError:
            pass
        else:
            if (type(v) is int and v == FORMAT_VERSION and type(seq) is int and seq >= 0
                    and type(ts) is int and (run is None or type(run) is str)
                    and (task is None or type(task) is str) and type(kind) is str and kind
                    and type(data) is dict):
                return _new_entry(Entry, (seq, ts, run, task, kind, data, bytes(raw)))
    _check_envelope(obj)
    raise CodecError("not an entry envelope")  # not reached: _check_envelope raised


def encode_entry(
    *, seq: int, ts: int, kind: str, data: Mapping[str, Any], run: str | None = None,
    task: str | None = None,
) -> Entry:
    """Build the canonical bytes of an entry and return it decoded alongside them.

    The envelope's keys are fixed, so its bytes are laid out directly in canonical order
    (data, kind, run, seq, task, ts, v); only ``data`` goes through canonicalization.
    """
    return encode_entries(seq, ts, ((kind, data, run, task),))[0]


def encode_entries(
    first_seq: int, ts: int,
    items: Iterable[tuple[str, Mapping[str, Any], str | None, str | None]],
) -> list[Entry]:
    """``encode_entry`` for items ``(kind, data, run, task)`` at seqs first_seq, first_seq + 1, ...
    sharing one ``ts`` (the journal's append path); byte for byte the same entries.

    Fast path: a plain ``dict`` whose keys are ``str`` in sorted order and whose values are all
    exact scalars (str, bytes, int, bool, None, finite float) is already canonical, so it is
    copied shallowly and packed as it is, with no recursive rebuild. Anything else
    (nested values, unsorted or non-str keys, NaN, subclasses, other mappings, bad envelope
    fields) takes ``_encode_checked``, as does a fast-path pack that fails, so errors are the same.
    """
    if type(first_seq) is not int or first_seq < 0:
        raise CodecError("entry seq must be a non-negative integer")
    if type(ts) is not int:
        raise CodecError("entry ts must be an integer (unix nanoseconds)")
    pack = _PACKERS.pack
    try:
        ts_bytes = pack(ts)
    except OverflowError as exc:
        raise CodecError(f"cannot encode entry: {exc}") from exc
    cache = _envelope_cache
    plain = _PLAIN_SCALARS
    isfinite = _isfinite
    join = b"".join
    new = _new_entry
    out: list[Entry] = []
    add = out.append
    seq = first_seq
    for kind, data, run, task in items:
        body = None
        if (type(data) is dict and type(kind) is str and kind and (run is None or type(run) is str)
                and (task is None or type(task) is str)):
            # copy first: what is checked and packed is the very map the Entry keeps, even if the
            # caller's map changes later (or meanwhile, from another thread)
            canon = data.copy()
            prev = ""
            for key, value in canon.items():
                # str order is code point order, which is UTF-8 byte order; keys are unique
                if type(key) is not str or key < prev:
                    break
                prev = key
                t = type(value)
                if t not in plain and (t is not float or not isfinite(value)):
                    break
            else:
                parts = cache.get((run, task, kind))
                try:
                    body = pack(canon)
                    if parts is None:
                        parts = _envelope_parts(run, task, kind)
                    raw = join((b"\x87\xa4data", body, parts[0], pack(seq), parts[1], ts_bytes, b"\xa1v\x01"))
                except (OverflowError, ValueError, TypeError):
                    body = None  # out-of-range int, lone surrogate: the checked path says which
        if body is None:
            add(_encode_checked(seq, ts, kind, data, run, task))
        else:
            add(new(Entry, (seq, ts, run, task, kind, canon, raw)))
        seq += 1
    return out


def _encode_checked(seq: int, ts: int, kind: Any, data: Any, run: Any, task: Any) -> Entry:
    """One entry through the full checks and ``_canon``; CodecError names what is wrong."""
    if type(kind) is not str or not kind:
        raise CodecError("entry kind must be a non-empty string")
    if run is not None and type(run) is not str:
        raise CodecError("entry run must be a string or nil")
    if task is not None and type(task) is not str:
        raise CodecError("entry task must be a string or nil")
    if not isinstance(data, Mapping):
        raise CodecError("entry data must be a map")
    pack = _PACKERS.pack
    try:
        canon = _canon(data, 1)
        body = pack(canon)
        parts = _envelope_cache.get((run, task, kind))
        if parts is None:
            parts = _envelope_parts(run, task, kind)
        raw = b"".join((b"\x87\xa4data", body, parts[0], pack(seq), parts[1], pack(ts),
                        b"\xa1v\x01"))
    except (OverflowError, ValueError, TypeError) as exc:  # UnicodeEncodeError is a ValueError
        raise CodecError(f"cannot encode entry: {exc}") from exc
    return _new_entry(Entry, (seq, ts, run, task, kind, canon, raw))


def envelope_around_seq(run: bytes | None, task: bytes | None, kind: bytes) -> tuple[bytes, bytes]:
    """The envelope bytes just before and just after the seq value of a canonical entry.

    A canonical entry ends with ``<before><seq><after><ts>\\xa1v\\x01``, where ``<seq>`` is
    ``pack_uint(seq)``. ``run``/``task``/``kind`` are UTF-8 bytes (as an index stores them).
    ``verify`` uses this to check an index against the entry bytes without decoding them.
    """
    return _suffix_parts(run, task, kind)


def _envelope_parts(run: str | None, task: str | None, kind: str) -> tuple[bytes, bytes]:
    """The envelope bytes around seq for given run/task/kind, kept in ``_envelope_cache``.

    They repeat a lot (one run, a few tasks and kinds). The cache is a plain dict, read without
    a call on the hot path and emptied when full; concurrent threads at worst compute one twice.
    """
    parts = _suffix_parts(None if run is None else run.encode("utf-8"),
                          None if task is None else task.encode("utf-8"), kind.encode("utf-8"))
    if len(_envelope_cache) >= _ENVELOPE_CACHE_MAX:
        _envelope_cache.clear()
    _envelope_cache[(run, task, kind)] = parts
    return parts


@functools.lru_cache(maxsize=4096)
def _suffix_parts(run: bytes | None, task: bytes | None, kind: bytes) -> tuple[bytes, bytes]:
    return (b"\xa4kind" + _str_header(kind) + b"\xa3run" + _str_header(run) + b"\xa3seq",
            b"\xa4task" + _str_header(task) + b"\xa2ts")


def pack_uint(n: int) -> bytes:
    """msgpack's smallest form of a non-negative integer."""
    if n < 0x80:
        return _SMALL_INTS[n]
    if n < 0x100:
        return b"\xcc" + n.to_bytes(1, "big")
    if n < 0x10000:
        return b"\xcd" + n.to_bytes(2, "big")
    if n < 0x100000000:
        return b"\xce" + n.to_bytes(4, "big")
    if n < 0x10000000000000000:
        return b"\xcf" + n.to_bytes(8, "big")
    raise CodecError(f"integer {n} outside the msgpack range")


_SMALL_INTS = [bytes([i]) for i in range(0x80)]


def _str_header(b: bytes | None) -> bytes:
    if b is None:
        return b"\xc0"
    n = len(b)
    if n < 32:
        head = bytes([0xA0 | n])
    elif n < 256:
        head = b"\xd9" + bytes([n])
    elif n < 65536:
        head = b"\xda" + n.to_bytes(2, "big")
    else:
        head = b"\xdb" + n.to_bytes(4, "big")
    return head + b


_ENVELOPE_ORDER = ("data", "kind", "run", "seq", "task", "ts", "v")  # canonical: sorted


def decode_entry(raw: bytes) -> Entry:
    """Decode stored entry bytes, refusing anything that is not canonical.

    Fast path, for an envelope whose seven keys come in canonical order and whose fields have
    the envelope's types: then ``_is_canonical`` of the whole map is ``_is_canonical`` of its
    ``data`` (every other field is a plain scalar), so only ``data`` is walked and the decoded
    map packed once and compared with ``raw``: the same test ``unpack_canonical`` makes
    (``canonical_bytes`` is that pack whenever ``_is_canonical`` holds). Anything else, and any
    bytes that fail it, take ``unpack_canonical`` for the same answer and error as before.
    """
    if type(raw) is bytes:
        try:
            obj = msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True,
                                  ext_hook=_reject_ext, timestamp=0)
        except Exception:  # noqa: BLE001 - the slow path below raises the CodecError
            obj = None
        # a decoded key is an exact str or bytes, and bytes never equal a str: the tuple is
        # equal only to the very keys, in that order
        if type(obj) is dict and len(obj) == 7 and tuple(obj) == _ENVELOPE_ORDER:
            v, seq, ts = obj["v"], obj["seq"], obj["ts"]
            run, task, kind, data = obj["run"], obj["task"], obj["kind"], obj["data"]
            if (type(v) is int and v == FORMAT_VERSION and type(seq) is int and seq >= 0
                    and type(ts) is int and (run is None or type(run) is str)
                    and (task is None or type(task) is str) and type(kind) is str and kind
                    and type(data) is dict and _is_canonical(data, 1)):
                try:
                    same = _pack(obj) == raw
                except (OverflowError, ValueError, TypeError):
                    same = False
                if same:
                    return _new_entry(Entry, (seq, ts, run, task, kind, data, raw))
    obj = unpack_canonical(raw)
    return _entry_from(obj, raw)


def decode_entry_trusted(raw: bytes) -> Entry:
    """Decode bytes already proven to be a stored entry (``verify`` passed, hashes pin them).

    Skips the canonical re-encoding check of ``decode_entry``; everything else is the same.
    Use it only on bytes read from a journal that was verified in the same process.
    """
    obj = msgpack.unpackb(raw, raw=False, strict_map_key=True, ext_hook=_reject_ext, timestamp=0)
    return _entry_from(obj, raw)


def decode_entries_trusted(bodies: Iterable[bytes]) -> list[Entry]:
    """``[decode_entry_trusted(raw) for raw in bodies]``, with the common envelope checked inline
    (the audit of ``ledger verify`` decodes every entry of the journal this way).

    ``run``, ``task`` and ``kind`` are interned: a journal repeats a few of each thousands of
    times, and every pass of the audit compares them or looks them up; one shared string each
    is less memory to allocate, walk and free than one per entry."""
    unpackb, new_entry, version, intern = msgpack.unpackb, _new_entry, FORMAT_VERSION, sys.intern
    out: list[Entry] = []
    append = out.append
    for raw in bodies:
        obj = unpackb(raw, raw=False, strict_map_key=True, ext_hook=_reject_ext, timestamp=0)
        if type(obj) is dict and len(obj) == 7:  # what _entry_from checks first, inline
            try:
                v, seq, ts = obj["v"], obj["seq"], obj["ts"]
                run, task, kind, data = obj["run"], obj["task"], obj["kind"], obj["data"]
            except KeyError:
                pass
            else:
                if (type(v) is int and v == version and type(seq) is int and seq >= 0
                        and type(ts) is int and (run is None or type(run) is str)
                        and (task is None or type(task) is str) and type(kind) is str and kind
                        and type(data) is dict):
                    append(new_entry(Entry, (seq, ts, None if run is None else intern(run),
                                             None if task is None else intern(task), intern(kind),
                                             data, bytes(raw))))
                    continue
        append(_entry_from(obj, raw))
    return out
