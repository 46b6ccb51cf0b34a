"""The canonical msgpack codec: one value, one byte string; everything else is refused."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import CodecError, MalformedInput
from ledger.journal.codec import (
    FORMAT_VERSION,
    MAX_DEPTH,
    Entry,
    canonical_bytes,
    decode_entries_trusted,
    decode_entry,
    decode_entry_trusted,
    encode_entry,
    leaf_hash,
    unpack_canonical,
)

TS = 1_700_000_000_000_000_000


def envelope(**overrides: Any) -> dict[str, Any]:
    """A valid entry envelope as a plain dict, with fields replaced or removed (value ...)."""
    obj: dict[str, Any] = {"v": FORMAT_VERSION, "seq": 3, "ts": TS, "run": "r1", "task": None,
                           "kind": "agent.tool", "data": {"n": 5}}
    for key, value in overrides.items():
        if value is ...:
            del obj[key]
        else:
            obj[key] = value
    return obj


def packed_in_order(pairs: list[tuple[Any, Any]]) -> bytes:
    """A msgpack map written with its pairs in the given order (duplicates kept)."""
    out = bytearray([0x80 | len(pairs)])
    for key, value in pairs:
        out += msgpack.packb(key, use_bin_type=True)
        out += msgpack.packb(value, use_bin_type=True, use_single_float=False)
    return bytes(out)


# --------------------------------------------------------------------------- round trip


def test_entry_round_trip_keeps_fields_and_bytes() -> None:
    """encode_entry then decode_entry returns the same fields and the very same bytes."""
    e = encode_entry(seq=7, ts=TS, kind="run.started", data={"b": [1, 2.5, None], "a": b"\x00"},
                     run="run-1", task="t-9")
    back = decode_entry(e.raw)
    assert back == e
    assert (back.seq, back.ts, back.run, back.task, back.kind) == (7, TS, "run-1", "t-9", "run.started")
    assert back.data == {"a": b"\x00", "b": [1, 2.5, None]}
    assert back.raw == e.raw
    assert back.leaf_hash == leaf_hash(e.raw)


def test_entry_bytes_are_a_sorted_map_of_the_seven_fields() -> None:
    """The stored bytes are one msgpack map whose keys are the seven fields in byte order."""
    e = encode_entry(seq=0, ts=1, kind="k", data={})
    pairs = msgpack.Unpacker(raw=False, object_pairs_hook=lambda p: p)
    pairs.feed(e.raw)
    decoded = next(pairs)
    assert [k for k, _ in decoded] == ["data", "kind", "run", "seq", "task", "ts", "v"]
    assert dict(decoded)["v"] == 1


def test_key_order_of_input_does_not_matter() -> None:
    """Maps built in different orders encode to identical bytes."""
    a = canonical_bytes({"z": 1, "a": {"y": 2, "b": 3}, "B": 4})
    b = canonical_bytes({"B": 4, "a": {"b": 3, "y": 2}, "z": 1})
    assert a == b


def test_keys_sort_by_utf8_bytes() -> None:
    """Keys are ordered by their UTF-8 bytes: 'B' < 'a' < 'z' < 'é' < '中'."""
    raw = canonical_bytes({"中": 1, "é": 2, "z": 3, "a": 4, "B": 5})
    unpacker = msgpack.Unpacker(raw=False, object_pairs_hook=lambda p: p)
    unpacker.feed(raw)
    assert [k for k, _ in next(unpacker)] == ["B", "a", "z", "é", "中"]


def test_integers_take_smallest_form() -> None:
    """Integers use the shortest msgpack encoding (fixint, uint8, int16 ...)."""
    assert canonical_bytes(5) == b"\x05"
    assert canonical_bytes(200) == b"\xcc\xc8"
    assert canonical_bytes(-1) == b"\xff"
    assert canonical_bytes(-200) == b"\xd1\xff\x38"
    assert canonical_bytes(2**64 - 1) == b"\xcf" + b"\xff" * 8


def test_floats_are_float64() -> None:
    """Floats are always written as float64, even when float32 would hold them exactly."""
    assert canonical_bytes(1.5) == b"\xcb" + struct.pack(">d", 1.5)


def test_str_and_bytes_stay_distinct() -> None:
    """A str encodes as msgpack str and bytes as bin, and each decodes back to its own type."""
    assert unpack_canonical(canonical_bytes({"s": "ab", "b": b"ab"})) == {"s": "ab", "b": b"ab"}
    assert canonical_bytes("ab")[0] == 0xA2
    assert canonical_bytes(b"ab")[0] == 0xC4


def test_tuples_encode_as_lists() -> None:
    """A tuple is stored as an array and comes back as a list."""
    assert canonical_bytes((1, 2)) == canonical_bytes([1, 2])
    assert unpack_canonical(canonical_bytes((1, 2))) == [1, 2]


def test_as_json_turns_bytes_into_base64_objects() -> None:
    """Entry.as_json is JSON-ready: bytes become {"$bytes": base64}, raw adds the bytes."""
    e = encode_entry(seq=1, ts=2, kind="k", data={"blob": b"\xff", "xs": [b"\x00"]})
    view = e.as_json(raw=True)
    assert view["data"] == {"blob": {"$bytes": "/w=="}, "xs": [{"$bytes": "AA=="}]}
    assert view["leaf_hash"] == e.leaf_hash.hex()
    assert "bytes" in view and "bytes" not in e.as_json()


# --------------------------------------------------------------------------- encoder refusals


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_encoder_refuses_non_finite_floats(value: float) -> None:
    """NaN and infinities cannot be stored, at any depth."""
    with pytest.raises(CodecError, match="NaN"):
        canonical_bytes({"x": [1, {"y": value}]})


@pytest.mark.parametrize("key", [1, b"k", None, 1.5, ("a",)], ids=["int", "bytes", "nil", "float", "tuple"])
def test_encoder_refuses_non_string_keys(key: Any) -> None:
    """Map keys must be str."""
    with pytest.raises(CodecError, match="not a string"):
        canonical_bytes({key: 1})


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1], ids=["too-big", "too-small"])
def test_encoder_refuses_out_of_range_integers(value: int) -> None:
    """Integers outside [-2**63, 2**64) have no msgpack encoding."""
    with pytest.raises(CodecError, match="range"):
        canonical_bytes(value)


@pytest.mark.parametrize("value", [{1, 2}, object(), msgpack.Timestamp(1, 0), bytearray(b"x")],
                         ids=["set", "object", "timestamp", "bytearray"])
def test_encoder_refuses_other_types(value: Any) -> None:
    """Sets, arbitrary objects, timestamps and bytearrays cannot be stored."""
    with pytest.raises(CodecError):
        canonical_bytes({"x": value})


def test_encoder_never_writes_extension_types() -> None:
    """msgpack.ExtType is a tuple, so it is stored as a plain array: no ext byte reaches disk."""
    raw = canonical_bytes({"x": msgpack.ExtType(5, b"x")})
    assert raw == canonical_bytes({"x": [5, b"x"]})
    assert unpack_canonical(raw) == {"x": [5, b"x"]}


def test_encoder_refuses_lone_surrogates() -> None:
    """A str that is not valid Unicode (a lone surrogate) has no UTF-8 form."""
    with pytest.raises(CodecError):
        canonical_bytes({"x": "\ud800"})
    with pytest.raises(CodecError):
        canonical_bytes({"\ud800": 1})


def test_encoder_refuses_excessive_nesting() -> None:
    """Values nested deeper than MAX_DEPTH are refused instead of exhausting the stack."""
    value: Any = 1
    for _ in range(MAX_DEPTH + 1):
        value = [value]
    with pytest.raises(CodecError, match="deeper"):
        canonical_bytes(value)
    ok: Any = 1
    for _ in range(MAX_DEPTH):
        ok = [ok]
    assert unpack_canonical(canonical_bytes(ok)) == ok


def test_codec_error_is_malformed_input() -> None:
    """CodecError is a MalformedInput, so the CLI reports it as unusable input (exit 2)."""
    assert issubclass(CodecError, MalformedInput)
    assert CodecError.exit_code == 2


# --------------------------------------------------------------------------- decoder refusals

NON_CANONICAL: dict[str, bytes] = {
    "unsorted-keys": packed_in_order([("b", 1), ("a", 2)]),
    "duplicate-keys": packed_in_order([("a", 1), ("a", 1)]),
    "duplicate-keys-differing": packed_in_order([("a", 1), ("a", 2)]),
    "non-minimal-uint8": b"\xcc\x05",
    "non-minimal-uint16": b"\xcd\x00\x05",
    "non-minimal-uint64": b"\xcf" + (200).to_bytes(8, "big"),
    "non-minimal-int8-for-positive": b"\xd0\x05",
    "non-minimal-negative": b"\xd3" + (-1).to_bytes(8, "big", signed=True),
    "float32": b"\xca" + struct.pack(">f", 1.5),
    "str8-for-short-string": b"\xd9\x01a",
    "map16-for-small-map": b"\xde\x00\x01\xa1a\x01",
    "array16-for-small-array": b"\xdc\x00\x01\x01",
    "bin16-for-short-bytes": b"\xc5\x00\x01x",
    "trailing-byte": canonical_bytes({"a": 1}) + b"\x00",
    "two-values": canonical_bytes(1) + canonical_bytes(2),
    "truncated": canonical_bytes({"a": "hello"})[:-1],
    "empty": b"",
    "nan-float64": b"\xcb" + struct.pack(">d", math.nan),
    "inf-float64": b"\xcb" + struct.pack(">d", math.inf),
    "nested-nan": packed_in_order([("x", [math.nan])]),
    "int-map-key": b"\x81\x01\x02",
    "bin-map-key": b"\x81\xc4\x01k\x01",
    "nil-map-key": b"\x81\xc0\x01",
    "array-map-key": b"\x81\x91\x01\x01",
    "fixext1": b"\xd4\x05\x00",
    "ext8": b"\xc7\x01\x07\x00",
    "nested-ext": packed_in_order([("x", msgpack.ExtType(3, b"abc"))]),
    "timestamp32": msgpack.packb(msgpack.Timestamp(1, 0)),
    "timestamp96": msgpack.packb(msgpack.Timestamp(2**40, 5)),
    "nested-timestamp": b"\x81\xa1t" + msgpack.packb(msgpack.Timestamp(1, 0)),
    "invalid-utf8-str": b"\xa1\xff",
    "reserved-byte": b"\xc1",
}


@pytest.mark.parametrize("raw", NON_CANONICAL.values(), ids=list(NON_CANONICAL))
def test_decoder_refuses_non_canonical_bytes(raw: bytes) -> None:
    """unpack_canonical refuses every byte string that is not the canonical form of its value."""
    with pytest.raises(CodecError):
        unpack_canonical(raw)


def test_decoder_accepts_canonical_counterparts() -> None:
    """The canonical twins of the refused strings decode (the refusals are about form, not value)."""
    assert unpack_canonical(b"\x82\xa1a\x02\xa1b\x01") == {"a": 2, "b": 1}
    assert unpack_canonical(b"\x05") == 5
    assert unpack_canonical(b"\xcb" + struct.pack(">d", 1.5)) == 1.5
    assert unpack_canonical(b"\xa1a") == "a"
    assert unpack_canonical(b"\x91\x01") == [1]
    assert unpack_canonical(b"\xc4\x01x") == b"x"


@pytest.mark.parametrize("raw", [b"\x82\xa1a\x01\xa1b\x02", b"\xcc\x05", b"\xca\x3f\xc0\x00\x00"],
                         ids=["canonical-map", "non-canonical-int", "float32"])
def test_decode_entry_refuses_what_is_not_a_canonical_entry(raw: bytes) -> None:
    """decode_entry refuses canonical non-entries and non-canonical bytes alike."""
    with pytest.raises(CodecError):
        decode_entry(raw)


def test_decoder_refuses_non_bytes() -> None:
    """Only bytes-like input is decoded."""
    with pytest.raises(CodecError):
        unpack_canonical("\x80")  # type: ignore[arg-type]


def test_decoder_refuses_non_canonical_entry_with_valid_envelope() -> None:
    """An otherwise valid entry whose data holds a non-minimal integer is refused."""
    good = encode_entry(seq=1, ts=TS, kind="k", data={"n": 5}).raw
    assert b"\xa1n\x05" in good
    bad = good.replace(b"\xa1n\x05", b"\xa1n\xcc\x05")
    assert msgpack.unpackb(bad, raw=False)["data"] == {"n": 5}  # same value, other bytes
    with pytest.raises(CodecError, match="canonical"):
        decode_entry(bad)


# --------------------------------------------------------------------------- envelope


ENVELOPES: dict[str, dict[str, Any]] = {
    "missing-v": envelope(v=...),
    "missing-seq": envelope(seq=...),
    "missing-data": envelope(data=...),
    "missing-run": envelope(run=...),
    "extra-field": {**envelope(), "extra": 1},
    "v-2": envelope(v=2),
    "v-0": envelope(v=0),
    "v-true": envelope(v=True),
    "v-string": envelope(v="1"),
    "v-float": envelope(v=1.0),
    "seq-negative": envelope(seq=-1),
    "seq-string": envelope(seq="3"),
    "seq-bool": envelope(seq=True),
    "ts-float": envelope(ts=1.5),
    "ts-nil": envelope(ts=None),
    "run-int": envelope(run=7),
    "task-bytes": envelope(task=b"t"),
    "kind-empty": envelope(kind=""),
    "kind-nil": envelope(kind=None),
    "data-list": envelope(data=[1]),
    "data-nil": envelope(data=None),
    "not-a-map": None,
}


@pytest.mark.parametrize("obj", ENVELOPES.values(), ids=list(ENVELOPES))
def test_decode_entry_refuses_wrong_envelope(obj: Any) -> None:
    """Canonical bytes with a wrong envelope (missing/extra field, v=2, bad types) are refused."""
    raw = canonical_bytes(obj if obj is not None else [1, 2])
    unpack_canonical(raw)  # the bytes themselves are canonical
    with pytest.raises(CodecError):
        decode_entry(raw)


@pytest.mark.parametrize("obj", ENVELOPES.values(), ids=list(ENVELOPES))
def test_batch_trusted_decode_refuses_wrong_envelope(obj: Any) -> None:
    """decode_entries_trusted (the audit's decode) refuses every envelope decode_entry refuses,
    also behind a valid entry."""
    raw = canonical_bytes(obj if obj is not None else [1, 2])
    with pytest.raises(CodecError):
        decode_entries_trusted([canonical_bytes(envelope()), raw])


def test_batch_trusted_decode_matches_one_by_one() -> None:
    """decode_entries_trusted gives the entries decode_entry gives, in order."""
    entries = [encode_entry(seq=i, ts=-3 + i, kind=k, data=d, run=r, task=t)
               for i, (k, d, r, t) in enumerate([("k", {"b": 1.5, "a": None}, RUN, None),
                                                 ("x.y", {}, None, "t"),
                                                 ("z", {"n": [1, {"m": b"\x00"}]}, RUN, "t")])]
    raws = [e.raw for e in entries]
    assert decode_entries_trusted(raws) == [decode_entry(r) for r in raws] == entries
    assert decode_entries_trusted([]) == []
    first, _, last = decode_entries_trusted(raws)
    assert first.run is last.run  # interned: one string per run, task and kind


def test_valid_envelope_decodes() -> None:
    """The unmodified envelope used by the refusal cases decodes (so each refusal is its field's)."""
    e = decode_entry(canonical_bytes(envelope()))
    assert isinstance(e, Entry) and e.seq == 3 and e.data == {"n": 5}


@pytest.mark.parametrize("kwargs", [
    {"kind": ""}, {"seq": -1}, {"run": 5}, {"data": {"x": math.nan}}, {"data": {1: 2}},
], ids=["empty-kind", "negative-seq", "int-run", "nan-data", "int-key-data"])
def test_encode_entry_refuses_bad_fields(kwargs: dict[str, Any]) -> None:
    """encode_entry refuses what decode_entry would refuse."""
    base: dict[str, Any] = {"seq": 0, "ts": TS, "kind": "k", "data": {}}
    base.update(kwargs)
    with pytest.raises(CodecError):
        encode_entry(**base)


# --------------------------------------------------------------------------- properties

KEYS = st.text(max_size=8)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells -0.0 from 0.0 and int from float from bool."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_canonical_round_trip(value: Any) -> None:
    """Any storable value decodes to itself, and re-encoding gives the same bytes."""
    raw = canonical_bytes(value)
    back = unpack_canonical(raw)
    assert _same(back, value)
    assert canonical_bytes(back) == raw


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6), st.randoms(use_true_random=False))
def test_encoding_ignores_insertion_order(value: dict[str, Any], rnd: Any) -> None:
    """Shuffling a map's insertion order never changes its bytes."""
    items = list(value.items())
    rnd.shuffle(items)
    assert canonical_bytes(dict(items)) == canonical_bytes(value)


@settings(max_examples=100, deadline=None)
@given(
    seq=st.integers(min_value=0, max_value=2**63 - 1),
    ts=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    run=st.none() | st.text(max_size=10),
    task=st.none() | st.text(max_size=10),
    kind=st.text(min_size=1, max_size=10),
    data=st.dictionaries(KEYS, VALUES, max_size=6),
)
def test_entry_round_trip_property(seq: int, ts: int, run: str | None, task: str | None, kind: str,
                                   data: dict[str, Any]) -> None:
    """Every valid entry survives encode then decode with identical fields and bytes."""
    e = encode_entry(seq=seq, ts=ts, kind=kind, data=data, run=run, task=task)
    back = decode_entry(e.raw)
    assert back.raw == e.raw
    assert (back.seq, back.ts, back.run, back.task, back.kind) == (seq, ts, run, task, kind)
    assert _same(back.data, data)


@settings(max_examples=150, deadline=None)
@given(VALUES, st.data())
def test_any_single_byte_change_is_refused_or_changes_the_value(value: Any, data: st.DataObject) -> None:
    """Changing one byte of canonical bytes never yields another encoding of the same value."""
    raw = canonical_bytes(value)
    pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    xor = data.draw(st.integers(min_value=1, max_value=255))
    mutated = bytearray(raw)
    mutated[pos] ^= xor
    try:
        back = unpack_canonical(bytes(mutated))
    except CodecError:
        return
    assert not _same(back, value)
    assert canonical_bytes(back) == bytes(mutated)


# --------------------------------------------------------------------------- fast path


RUN = "r-20261129T203000Z-1a2b3c"


def reference_bytes(value: Any) -> bytes:
    """An independent canonical encoder: sort every map's keys, then one plain msgpack.packb."""
    def canon(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: canon(v[k]) for k in sorted(v)}
        if isinstance(v, list | tuple):
            return [canon(x) for x in v]
        return v
    return msgpack.packb(canon(value), use_bin_type=True, use_single_float=False)  # type: ignore[no-any-return]


def envelope_of(seq: int, ts: int, run: str | None, task: str | None, kind: str,
                data: Any) -> dict[str, Any]:
    """The plain map an entry's bytes must be the canonical encoding of."""
    return {"v": FORMAT_VERSION, "seq": seq, "ts": ts, "run": run, "task": task, "kind": kind,
            "data": data}


FLAT = st.dictionaries(KEYS, SCALARS, max_size=8)  # what the fast path takes (or NaN-free floats)


@settings(max_examples=300, deadline=None)
@given(
    seq=st.integers(min_value=0, max_value=2**64 - 1),
    ts=st.integers(min_value=-(2**63), max_value=2**64 - 1),
    run=st.none() | st.text(max_size=40),
    task=st.none() | st.text(max_size=300),
    kind=st.text(min_size=1, max_size=40),
    data=FLAT | st.dictionaries(KEYS, VALUES, max_size=6),
)
def test_entry_bytes_equal_canonical_bytes_of_the_envelope(
        seq: int, ts: int, run: str | None, task: str | None, kind: str, data: dict[str, Any]) -> None:
    """encode_entry's bytes are exactly canonical_bytes (and a plain sorted packb) of the envelope."""
    e = encode_entry(seq=seq, ts=ts, kind=kind, data=data, run=run, task=task)
    env = envelope_of(seq, ts, run, task, kind, data)
    assert e.raw == canonical_bytes(env)
    assert e.raw == reference_bytes(env)
    assert _same(e.data, unpack_canonical(canonical_bytes(data)))
    assert decode_entry_trusted(e.raw) == e


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6) | VALUES)
def test_canonical_bytes_equal_a_plain_sorted_packb(value: Any) -> None:
    """canonical_bytes agrees byte for byte with an independent sort-then-packb encoder."""
    assert canonical_bytes(value) == reference_bytes(value)


@pytest.mark.parametrize("data", [
    {"a": "x", 1: "y"},
    {"a": math.nan},
    {"a": 1, "b": -math.inf},
    {"a": 2**64},
    {"a": -(2**63) - 1},
    {"z": 2**64, "a": 1},  # unsorted as well, so the slow path is the one that refuses
    {"a": "\ud800"},
    {"\ud800": 1},
    {"a": {1, 2}},
    {"a": bytearray(b"x")},
], ids=["int-key", "nan", "inf", "int-2**64", "int-below-int64", "unsorted-big-int", "lone-surrogate",
        "lone-surrogate-key", "set", "bytearray"])
def test_flat_data_the_slow_path_refuses_is_refused(data: dict[Any, Any]) -> None:
    """Flat sorted data the fast path would pack as is is refused with CodecError all the same."""
    with pytest.raises(CodecError):
        encode_entry(seq=1, ts=TS, kind="k", data=data)
    with pytest.raises(CodecError):
        canonical_bytes(data)


@pytest.mark.parametrize("value", [2**64 - 1, -(2**63), 0, -1, 127, 128, -33, 1.5, -0.0, True, None, b""],
                         ids=repr)
def test_flat_boundary_values_are_stored(value: Any) -> None:
    """The int range ends and other plain scalars take the fast path and decode back unchanged."""
    e = encode_entry(seq=1, ts=TS, kind="k", data={"a": value})
    assert e.raw == reference_bytes(envelope_of(1, TS, None, None, "k", {"a": value}))
    assert _same(decode_entry(e.raw).data["a"], value)


@pytest.mark.parametrize("kwargs", [
    {"seq": 2**64}, {"ts": 2**64}, {"ts": -(2**63) - 1}, {"seq": True}, {"ts": 1.0},
    {"run": "\ud800"}, {"task": b"t"}, {"kind": None}, {"data": [("a", 1)]}, {"data": None},
], ids=["seq-2**64", "ts-2**64", "ts-below-int64", "seq-bool", "ts-float", "run-surrogate",
        "task-bytes", "kind-nil", "data-list", "data-nil"])
def test_encode_entry_refuses_bad_envelope_fields(kwargs: dict[str, Any]) -> None:
    """Envelope fields outside their type or the msgpack int range raise CodecError."""
    base: dict[str, Any] = {"seq": 0, "ts": TS, "kind": "k", "data": {"a": 1}}
    base.update(kwargs)
    with pytest.raises(CodecError):
        encode_entry(**base)


def test_encoder_recovers_after_a_refused_value() -> None:
    """A refused value leaves nothing behind: the next entry's bytes are exactly canonical."""
    with pytest.raises(CodecError):
        encode_entry(seq=1, ts=TS, kind="k", data={"a": "x" * 100, "b": 2**64})
    e = encode_entry(seq=2, ts=TS, kind="k", data={"a": 1})
    assert e.raw == canonical_bytes(envelope_of(2, TS, None, None, "k", {"a": 1}))


def test_other_mappings_take_the_slow_path() -> None:
    """A dict subclass or another Mapping encodes like the plain dict with the same items."""
    from collections import OrderedDict
    from types import MappingProxyType

    plain = encode_entry(seq=1, ts=TS, kind="k", data={"a": 1, "b": [2]}).raw
    assert encode_entry(seq=1, ts=TS, kind="k", data=OrderedDict([("b", [2]), ("a", 1)])).raw == plain
    assert encode_entry(seq=1, ts=TS, kind="k", data=MappingProxyType({"a": 1, "b": [2]})).raw == plain


@pytest.mark.parametrize("data", [{"a": 1, "b": "x"}, {"b": "x", "a": 1}, {"a": [1], "b": {"c": 2}}],
                         ids=["fast", "unsorted", "nested"])
def test_entry_data_is_not_the_callers_map(data: dict[str, Any]) -> None:
    """Changing the caller's map after encode_entry leaves the entry's data matching its bytes."""
    e = encode_entry(seq=1, ts=TS, kind="k", data=data)
    data["zz"] = "changed"
    assert "zz" not in e.data
    assert _same(decode_entry(e.raw).data, e.data)


def test_entries_encoded_from_many_threads_are_canonical() -> None:
    """Threads encoding at once (each with its own Packer) all produce the canonical bytes."""
    import threading

    results: dict[int, list[bytes]] = {}

    def work(n: int) -> None:
        results[n] = [encode_entry(seq=i, ts=TS + n, kind="k", run=f"run-{n}",
                                   data={"n": n, "text": str(i) * (i % 50)}).raw for i in range(400)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, raws in results.items():
        for i, raw in enumerate(raws):
            env = envelope_of(i, TS + n, f"run-{n}", None, "k", {"n": n, "text": str(i) * (i % 50)})
            assert raw == reference_bytes(env)
    assert len(results) == 4


# --------------------------------------------------------------------------- Entry


def test_entry_is_immutable() -> None:
    """Neither a field nor a new attribute can be set on an Entry."""
    e = encode_entry(seq=1, ts=TS, kind="k", data={"a": 1})
    with pytest.raises(AttributeError):
        e.seq = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        e.extra = 1  # type: ignore[attr-defined]
    assert e.seq == 1


def test_entry_pickles() -> None:
    """An Entry survives a pickle round trip with equal fields and the same bytes."""
    import pickle

    e = encode_entry(seq=9, ts=TS, kind="k", data={"a": [1, b"\x00"]}, run="r", task="t")
    back = pickle.loads(pickle.dumps(e))
    assert back == e and type(back) is Entry
    assert back.raw == e.raw and back.leaf_hash == e.leaf_hash


def test_entry_positional_and_keyword_construction_agree() -> None:
    """Entry takes its fields positionally in the order seq, ts, run, task, kind, data, raw."""
    by_kw = Entry(seq=1, ts=2, run="r", task="t", kind="k", data={"a": 1}, raw=b"x")
    by_pos = Entry(1, 2, "r", "t", "k", {"a": 1}, b"x")
    assert by_kw == by_pos
    assert (by_pos.seq, by_pos.ts, by_pos.run, by_pos.task, by_pos.kind, by_pos.data, by_pos.raw) == (
        1, 2, "r", "t", "k", {"a": 1}, b"x")
    assert by_kw != Entry(seq=1, ts=2, run="r", task="t", kind="k", data={"a": 2}, raw=b"x")
    assert repr(by_kw) == ("Entry(seq=1, ts=2, run='r', task='t', kind='k', data={'a': 1}, "
                           "raw=b'x')")


def test_an_entry_cannot_be_stored_inside_an_entry() -> None:
    """An Entry is refused as a value (as it was when it was not a tuple), not stored as an array."""
    e = encode_entry(seq=1, ts=TS, kind="k", data={"a": 1})
    with pytest.raises(CodecError, match="cannot be stored"):
        encode_entry(seq=2, ts=TS, kind="k", data={"prev": e})
    with pytest.raises(CodecError, match="cannot be stored"):
        canonical_bytes([e])


def test_decode_entry_trusted_matches_decode_entry() -> None:
    """The trusted decode gives the same Entry as the checked one, and refuses a non-envelope."""
    e = encode_entry(seq=5, ts=-3, kind="k", data={"b": 1.5, "a": None}, run=RUN, task=None)
    assert decode_entry_trusted(e.raw) == decode_entry(e.raw) == e
    with pytest.raises(CodecError):
        decode_entry_trusted(canonical_bytes(envelope(seq=True)))


# ------------------------------------------------- decode_entry's fast path refuses the same


def _entry_bytes(data_raw: bytes, *, order: tuple[str, ...] | None = None) -> bytes:
    """Entry bytes with ``data`` given as raw msgpack and the envelope's keys in ``order``."""
    fields = {"data": None, "kind": "k", "run": "r1", "seq": 3, "task": None, "ts": TS,
              "v": FORMAT_VERSION}
    out = bytearray([0x87])
    for key in order or tuple(fields):
        out += msgpack.packb(key, use_bin_type=True)
        out += data_raw if key == "data" else msgpack.packb(fields[key], use_bin_type=True)
    return bytes(out)


def _nested(depth: int) -> bytes:
    return b"\x81\xa1a" * depth + b"\x01"


NON_CANONICAL_ENTRIES: dict[str, bytes] = {
    "envelope-keys-unsorted": _entry_bytes(b"\x81\xa1n\x05", order=(
        "kind", "data", "run", "seq", "task", "ts", "v")),
    "data-keys-unsorted": _entry_bytes(packed_in_order([("b", 1), ("a", 2)])),
    "nested-keys-unsorted": _entry_bytes(b"\x81\xa1x" + packed_in_order([("b", 1), ("a", 2)])),
    "data-bytes-key": _entry_bytes(packed_in_order([(b"a", 1)])),
    "data-nan": _entry_bytes(packed_in_order([("x", math.nan)])),
    "data-infinity": _entry_bytes(packed_in_order([("x", math.inf)])),
    "data-float32": _entry_bytes(b"\x81\xa1x\xca" + struct.pack(">f", 1.5)),
    "data-wide-int": _entry_bytes(b"\x81\xa1n\xcc\x05"),
    "nested-timestamp": _entry_bytes(b"\x81\xa1t\xd6\xff\x00\x00\x00\x01"),
    "list-timestamp": _entry_bytes(b"\x81\xa1t\x91\xd6\xff\x00\x00\x00\x01"),
    "str8-for-short-str": _entry_bytes(b"\x81\xa1s\xd9\x01x"),
    "too-deep": _entry_bytes(_nested(MAX_DEPTH)),
}


@pytest.mark.parametrize("raw", NON_CANONICAL_ENTRIES.values(), ids=NON_CANONICAL_ENTRIES.keys())
def test_decode_entry_refuses_each_non_canonical_entry(raw: bytes) -> None:
    """Each case is a well-formed envelope msgpack decodes (the attack reaches the canonical
    check, not the parser), which the reference check (``unpack_canonical``) refuses too; the
    fast path of ``decode_entry`` must refuse it as well, with the same error."""
    msgpack.unpackb(raw, raw=False, strict_map_key=False, timestamp=0)
    with pytest.raises(CodecError) as reference:
        unpack_canonical(raw)
    with pytest.raises(CodecError) as got:
        decode_entry(raw)
    assert str(got.value) == str(reference.value)


def test_decode_entry_accepts_the_deepest_canonical_nesting() -> None:
    raw = _entry_bytes(_nested(MAX_DEPTH - 1))
    assert decode_entry(raw).raw == raw
