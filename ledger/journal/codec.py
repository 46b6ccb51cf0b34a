"""Canonical msgpack encoding of journal entries.

An entry is one msgpack map ``{"data", "kind", "run", "seq", "task", "ts", "v"}`` stored as the
exact bytes that are hashed. Canonical means: every map key is a ``str`` and keys are sorted by
their UTF-8 bytes; integers take their smallest msgpack form; floats are float64 and finite;
strings are ``str`` (valid UTF-8), binary data is ``bin``; no extension types. ``decode`` re-encodes
what it parsed and refuses bytes that differ, so one value has exactly one byte string.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from ledger.errors import CodecError

FORMAT_VERSION = 1
ENVELOPE_KEYS = frozenset({"v", "seq", "ts", "run", "task", "kind", "data"})
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
MAX_DEPTH = 64


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
    if t is dict or isinstance(value, Mapping):
        keys = list(value)
        for key in keys:
            if type(key) is not str:
                raise CodecError(f"map key {key!r} is not a string")
        keys.sort()
        return {key: _canon(value[key], depth + 1) for key in keys}
    if t is list or t is tuple or isinstance(value, list | tuple):
        return [_canon(item, depth + 1) for item in value]
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


def canonical_bytes(value: Any) -> bytes:
    """Encode any storable value canonically (used for entries and for hashed sub-objects)."""
    try:
        return msgpack.packb(_canon(value, 0), use_bin_type=True, use_single_float=False)  # type: ignore[no-any-return]
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


def leaf_hash(raw: bytes) -> bytes:
    """RFC 6962 leaf hash of stored entry bytes."""
    return hashlib.sha256(b"\x00" + raw).digest()


@dataclass(frozen=True, slots=True)
class Entry:
    """One decoded journal entry together with the exact bytes that were hashed."""

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
    if not isinstance(obj, dict):
        raise CodecError("an entry must be a msgpack map")
    keys = set(obj)
    if keys != ENVELOPE_KEYS:
        missing = sorted(ENVELOPE_KEYS - keys)
        extra = sorted(str(k) for k in keys - ENVELOPE_KEYS)
        raise CodecError(f"entry fields wrong: missing={missing} extra={extra}")
    if type(obj["v"]) is not int or obj["v"] != FORMAT_VERSION:
        raise CodecError(f"unknown entry format version {obj['v']!r}")
    if not isinstance(obj["seq"], int) or isinstance(obj["seq"], bool) or obj["seq"] < 0:
        raise CodecError("entry seq must be a non-negative integer")
    if not isinstance(obj["ts"], int) or isinstance(obj["ts"], bool):
        raise CodecError("entry ts must be an integer (unix nanoseconds)")
    for field in ("run", "task"):
        if obj[field] is not None and not isinstance(obj[field], str):
            raise CodecError(f"entry {field} must be a string or nil")
    if not isinstance(obj["kind"], str) or not obj["kind"]:
        raise CodecError("entry kind must be a non-empty string")
    if not isinstance(obj["data"], dict):
        raise CodecError("entry data must be a map")


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, use_single_float=False)  # type: ignore[no-any-return]


def encode_entry(
    *, seq: int, ts: int, kind: str, data: Mapping[str, Any], run: str | None = None,
    task: str | None = None,
) -> Entry:
    """Build the canonical bytes of an entry and return it decoded alongside them.

    The envelope's keys are fixed, so its bytes are laid out directly in canonical order
    (data, kind, run, seq, task, ts, v); only ``data`` goes through canonicalization.
    """
    if type(seq) is not int or seq < 0:
        raise CodecError("entry seq must be a non-negative integer")
    if type(ts) is not int:
        raise CodecError("entry ts must be an integer (unix nanoseconds)")
    if type(kind) is not str or not kind:
        raise CodecError("entry kind must be a non-empty string")
    for name, value in (("run", run), ("task", task)):
        if value is not None and type(value) is not str:
            raise CodecError(f"entry {name} must be a string or nil")
    if not isinstance(data, Mapping):
        raise CodecError("entry data must be a map")
    canon = _canon(data, 1)
    try:
        head, tail = _envelope_parts(run, task, kind)
        raw = b"".join((b"\x87\xa4data", _pack(canon), head, _pack_uint(seq), tail,
                        _pack_uint(ts) if ts >= 0 else _pack(ts), b"\xa1v\x01"))
    except (OverflowError, ValueError, TypeError, UnicodeEncodeError) as exc:
        raise CodecError(f"cannot encode entry: {exc}") from exc
    return Entry(seq=seq, ts=ts, run=run, task=task, kind=kind, data=canon, raw=raw)


def envelope_suffix(seq: int, run: bytes | None, task: bytes | None, kind: bytes) -> bytes:
    """The bytes that follow ``data`` in a canonical entry, up to (not including) the ts value.

    ``run``/``task``/``kind`` are the UTF-8 bytes of the stored columns. Used by ``verify`` to
    check that the indexed columns agree with the entry bytes without decoding every entry.
    """
    head, tail = _suffix_parts(run, task, kind)
    return head + _pack_uint(seq) + tail


@functools.lru_cache(maxsize=4096)
def _envelope_parts(run: str | None, task: str | None, kind: str) -> tuple[bytes, bytes]:
    """The envelope bytes around seq for given run/task/kind (cached: they repeat a lot)."""
    return _suffix_parts(None if run is None else run.encode("utf-8"),
                         None if task is None else task.encode("utf-8"), kind.encode("utf-8"))


@functools.lru_cache(maxsize=4096)
def _suffix_parts(run: bytes | None, task: bytes | None, kind: bytes) -> tuple[bytes, bytes]:
    return (b"\xa4kind" + _str_header(kind) + b"\xa3run" + _str_header(run) + b"\xa3seq",
            b"\xa4task" + _str_header(task) + b"\xa2ts")


def _pack_uint(n: int) -> bytes:
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


def decode_entry(raw: bytes) -> Entry:
    """Decode stored entry bytes, refusing anything that is not canonical."""
    obj = unpack_canonical(raw)
    _check_envelope(obj)
    return Entry(seq=obj["seq"], ts=obj["ts"], run=obj["run"], task=obj["task"], kind=obj["kind"],
                 data=obj["data"], raw=bytes(raw))


def decode_entry_trusted(raw: bytes) -> Entry:
    """Decode bytes already proven to be a stored entry (``verify`` passed, hashes pin them).

    Skips the canonical re-encoding check of ``decode_entry``; everything else is the same.
    Use it only on bytes read from a journal that was verified in the same process.
    """
    obj = msgpack.unpackb(raw, raw=False, strict_map_key=True, ext_hook=_reject_ext, timestamp=0)
    _check_envelope(obj)
    return Entry(seq=obj["seq"], ts=obj["ts"], run=obj["run"], task=obj["task"], kind=obj["kind"],
                 data=obj["data"], raw=bytes(raw))
