"""The C2SP tlog-tiles layout of a published journal (c2sp.org/tlog-tiles), pure code.

    checkpoint                      the signed note (text/plain; charset=utf-8), mutable
    tile/<L>/<N>                    a full tile: 256 hashes (8,192 bytes), immutable
    tile/<L>/<N>.p/<W>              a partial tile of W (1..255) hashes
    tile/entries/<N>[.p/<W>]        the entry bundle of level-0 tile N: each entry as a big-endian
                                    uint16 length, then its bytes
    large/<64 hex>                  an entry longer than 65,535 bytes, named by its leaf hash

``<N>`` is written in zero-padded 3-digit path elements, all but the last prefixed with ``x``
(1234067 -> ``x001/x234/067``). Tiles are 8 levels high, as the spec fixes: level-0 tiles hold
leaf hashes, a level-``l`` hash is the root of a full tile at level ``l - 1``.

A bundle slot whose entry cannot or may not be published holds a *marker* instead, recognisable
because a journal entry (a canonical msgpack map) never starts with the byte 0x00:

    0x00 'L' <32-byte leaf hash> <u64 big-endian size>    the entry is at large/<leaf hex>
    0x00 'W' <32-byte leaf hash> <msgpack [kind, run]>    withheld by the publisher's policy

Hash tiles are exactly the spec's (a marker changes no hash); a generic tlog-tiles client that
hashes bundle slots sees a marker slot disagree with its leaf and knows the slot is not the entry.
A withheld marker's kind and run are the publisher's unauthenticated hints (they are not under
any hash): a monitor uses them only to tell which views it cannot replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgpack

from ledger.errors import MalformedInput, VerificationError
from ledger.journal.merkle import leaf_hash
from ledger.journal.tiles import HASH_SIZE, hash_up

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
TILE_BYTES = HASH_SIZE * TILE_WIDTH
MAX_SLOT = 0xFFFF
MAX_LEVEL = 63
LARGE_DIR = "large"
LARGE_TAG = b"\x00L"
WITHHELD_TAG = b"\x00W"
MAX_LARGE = 16 << 20  # the journal's own entry limit


def encode_index(n: int) -> str:
    """``n`` as zero-padded 3-digit path elements, all but the last prefixed with ``x``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise MalformedInput(f"tile index must be a non-negative integer, got {n!r}")
    parts = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        parts.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(parts))


def _width_suffix(width: int) -> str:
    if not 1 <= width <= TILE_WIDTH:
        raise MalformedInput(f"tile width must be 1..{TILE_WIDTH}, got {width}")
    return "" if width == TILE_WIDTH else f".p/{width}"


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``."""
    if not 0 <= level <= MAX_LEVEL:
        raise MalformedInput(f"tile level must be 0..{MAX_LEVEL}, got {level}")
    return f"tile/{level}/{encode_index(index)}{_width_suffix(width)}"


def bundle_path(index: int, width: int = TILE_WIDTH) -> str:
    """``tile/entries/<N>[.p/<W>]``."""
    return f"tile/entries/{encode_index(index)}{_width_suffix(width)}"


def large_path(leaf: bytes) -> str:
    return f"{LARGE_DIR}/{leaf.hex()}"


def partial_widths(size: int) -> list[int]:
    """Per level, the width of its partial tile in a tree of ``size`` (0: none)."""
    out = []
    count = size
    while count:
        out.append(count % TILE_WIDTH)
        count >>= TILE_HEIGHT
    return out


def level_count(size: int, level: int) -> int:
    """How many hashes level ``level`` of the tiles holds in a tree of ``size``."""
    return size >> (TILE_HEIGHT * level)


# --------------------------------------------------------------------------- bundles


def large_marker(leaf: bytes, size: int) -> bytes:
    return LARGE_TAG + leaf + size.to_bytes(8, "big")


def withheld_marker(leaf: bytes, kind: str, run: str | None) -> bytes:
    return WITHHELD_TAG + leaf + msgpack.packb([kind, run], use_bin_type=True)


@dataclass(frozen=True)
class Slot:
    """One bundle slot as read: an entry's bytes, or a marker naming its leaf hash."""

    form: str  # "entry" | "large" | "withheld"
    leaf: bytes
    body: bytes | None = None  # the entry's bytes ("entry"; "large" once fetched)
    size: int | None = None  # "large": the entry's length
    kind: str | None = None  # "withheld": the publisher's hints
    run: str | None = None


def read_slot(raw: bytes) -> Slot:
    """What a bundle slot holds (MalformedInput for a marker that is not one)."""
    if raw[:1] != b"\x00":
        return Slot("entry", leaf_hash(raw), raw)
    tag, leaf = raw[:2], raw[2:2 + HASH_SIZE]
    if tag == LARGE_TAG and len(raw) == 2 + HASH_SIZE + 8:
        size = int.from_bytes(raw[2 + HASH_SIZE:], "big")
        if not MAX_SLOT < size <= MAX_LARGE:
            raise MalformedInput(f"large-entry marker names a size of {size} bytes")
        return Slot("large", leaf, size=size)
    if tag == WITHHELD_TAG and len(raw) > 2 + HASH_SIZE:
        try:
            kind, run = msgpack.unpackb(raw[2 + HASH_SIZE:], raw=False)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise MalformedInput("withheld-entry marker has unreadable hints") from exc
        if not isinstance(kind, str) or not (run is None or isinstance(run, str)):
            raise MalformedInput("withheld-entry marker hints are not (kind, run) strings")
        return Slot("withheld", leaf, kind=kind, run=run)
    raise MalformedInput("bundle slot starts with 0x00 but is no marker this format knows")


def encode_bundle(slots: Sequence[bytes]) -> bytes:
    out = bytearray()
    for s in slots:
        if len(s) > MAX_SLOT:
            raise MalformedInput(f"a bundle slot holds at most {MAX_SLOT} bytes, got {len(s)}")
        out += len(s).to_bytes(2, "big")
        out += s
    return bytes(out)


def split_bundle(data: bytes, count: int, where: str) -> list[bytes]:
    """The ``count`` slots of a bundle; VerificationError("entry-bundle") when it holds fewer,
    more, or a length that runs past its end."""
    slots: list[bytes] = []
    pos = 0
    end = len(data)
    view = memoryview(data)
    append = slots.append
    for i in range(count):
        if pos + 2 > end:
            raise VerificationError("entry-bundle", f"{where} ends after {i} of its {count} entries (truncated)")
        n = (data[pos] << 8) | data[pos + 1]
        pos += 2
        if pos + n > end:
            raise VerificationError("entry-bundle", f"{where}: entry {i} runs past the end of the bundle (truncated)")
        append(bytes(view[pos:pos + n]))
        pos += n
    if pos != end:
        raise VerificationError("entry-bundle", f"{where} holds {end - pos} bytes after its {count} entries")
    return slots


# --------------------------------------------------------------------------- tiles


@dataclass(frozen=True)
class TileOut:
    level: int
    index: int
    width: int
    data: bytes

    @property
    def path(self) -> str:
        return tile_path(self.level, self.index, self.width)


NodeRange = Callable[[int, int, int], bytes]
"""``(tree_level, lo, hi)`` -> the packed hashes of complete subtrees ``lo..hi-1`` at that tree
level (the publisher's journal answers, for the few hashes an incremental publish does not
recompute)."""


def tiles_between(old_size: int, size: int, leaves: bytes, fetch: NodeRange) -> list[TileOut]:
    """The tiles a tree of ``size`` has that one of ``old_size`` lacks (new full tiles, and the
    partial tiles that grew), and the tree's top-level hashes for the root.

    ``leaves`` holds the packed leaf hashes from ``(old_size // 256) * 256`` to ``size``; at each
    higher level the hashes left of what the new leaves complete (at most 255 per level) come
    from ``fetch``.
    """
    out: list[TileOut] = []
    level = 0
    cur = leaves
    cur_lo = (old_size >> TILE_HEIGHT) << TILE_HEIGHT
    while True:
        count = level_count(size, level)
        if count == 0:
            break
        old_count = level_count(old_size, level)
        lo = (old_count >> TILE_HEIGHT) << TILE_HEIGHT
        if cur_lo > lo:
            cur = fetch(TILE_HEIGHT * level, lo, cur_lo) + cur
            cur_lo = lo
        if len(cur) != (count - cur_lo) * HASH_SIZE:
            raise VerificationError("publish-tiles", f"level {level} has {len(cur) // HASH_SIZE} hashes from "
                                    f"{cur_lo}, {count - cur_lo} expected")
        first, last = lo >> TILE_HEIGHT, count >> TILE_HEIGHT
        base = (first << TILE_HEIGHT) - cur_lo
        for t in range(first, last):
            off = (base + ((t - first) << TILE_HEIGHT)) * HASH_SIZE
            out.append(TileOut(level, t, TILE_WIDTH, cur[off:off + TILE_BYTES]))
        width = count % TILE_WIDTH
        if width and count != old_count:
            off = (base + ((last - first) << TILE_HEIGHT)) * HASH_SIZE
            out.append(TileOut(level, last, width, cur[off:off + width * HASH_SIZE]))
        full_region = cur[base * HASH_SIZE:(base + ((last - first) << TILE_HEIGHT)) * HASH_SIZE]
        cur = hash_up(full_region, TILE_HEIGHT) if full_region else b""
        cur_lo = first
        level += 1
    return out
