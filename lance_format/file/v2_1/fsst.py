"""FSST symbol-table decoding (format of lance's `fsst` crate), vectorized over a whole buffer.

Symbol table bytes: ``u64`` header (``"FSST"`` magic in the high 32 bits, bit 24 = data is
compressed, low 8 bits = number of symbols), then ``n`` little-endian ``u64`` symbols, then ``n``
symbol lengths (one byte each).  Compressed data: a byte ``c != 255`` emits symbol ``c``;
``255`` escapes the next byte, which is emitted literally.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import arrow_array, pool_empty
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1.blocks import pool_take
from lance_format.file.workers import num_threads, run_all
from lance_format.session import CacheKind, LruCache

_MAGIC = 0x46535354
ESC = 255


#: Two-code tables by symbol table, shared by the pages and re-reads of a file. Process-wide
#: rather than per session: an entry is a pure function of a 2.3 KB symbol table, at most
#: 65536 x 16 bytes plus offsets (~1.5 MiB), so this fixed bound holds whatever is read.
PAIR_TABLE: CacheKind[pa.Array] = CacheKind("fsst_pairs")
PAIR_CACHE_BYTES = 24 * 1024 * 1024
_PAIR_CACHE = LruCache(PAIR_CACHE_BYTES)


class SymbolTable:
    """A parsed FSST symbol table."""

    def __init__(self, raw: bytes) -> None:
        if len(raw) < 8:
            raise CorruptFileError("FSST symbol table shorter than its 8-byte header")
        header = int.from_bytes(raw[:8], "little")
        if header >> 32 != _MAGIC:
            raise CorruptFileError("FSST symbol table has a bad magic number")
        self.compressed = bool((header >> 24) & 1)
        n = header & 0xFF
        if len(raw) < 8 + 9 * n:
            raise CorruptFileError("FSST symbol table is truncated")
        self.symbols = np.zeros((256, 8), np.uint8)
        self.lens = np.zeros(256, np.uint8)
        if n:
            self.symbols[:n] = np.frombuffer(raw, np.uint8, 8 * n, 8).reshape(n, 8)
            self.lens[:n] = np.frombuffer(raw, np.uint8, n, 8 + 8 * n)
        if (self.lens[:n] > 8).any() or (self.lens[:n] == 0).any():
            raise CorruptFileError("FSST symbol length out of range")
        self.n = n
        self.words = self.symbols.reshape(-1).view(np.uint64).copy()
        self._arrow: dict[bool, pa.Array] = {}
        self._pairs: dict[bool, pa.Array] = {}
        self._lock = threading.Lock()

    def arrow(self, large: bool) -> pa.Array:
        """The symbols (codes 0..255) and literal bytes (256..511) as an Arrow binary array."""
        arr = self._arrow.get(large)
        if arr is None:
            lens = np.concatenate([self.lens.astype(np.int64), np.ones(256, np.int64)])
            offs = np.zeros(513, np.int64)
            np.cumsum(lens, out=offs[1:])
            sym_bytes = self.symbols[np.arange(256)[:, None], np.arange(8)[None, :]]
            keep = np.arange(8)[None, :] < self.lens[:, None]
            data = np.concatenate([sym_bytes[keep], np.arange(256, dtype=np.uint8)])
            typ = pa.large_binary() if large else pa.binary()
            ob = pa.py_buffer(offs if large else offs.astype(np.int32))
            arr = pa.Array.from_buffers(typ, 512, [None, ob, pa.py_buffer(data)])
            self._arrow[large] = arr
        return arr

    def pairs(self, large: bool) -> pa.Array:
        """Every two-code sequence as one Arrow binary value: entry ``lo | hi << 8`` is
        ``symbol(lo) + symbol(hi)``, so a little-endian uint16 view of escape-free codes indexes it."""
        with self._lock:
            arr = self._pairs.get(large)
            if arr is None:
                key = (self.symbols.tobytes(), self.lens.tobytes(), large)
                arr = _PAIR_CACHE.get(PAIR_TABLE, key)
                if arr is None:
                    arr = self._build_pairs(large)
                    _PAIR_CACHE.put(PAIR_TABLE, key, arr, arr.nbytes + len(key[0]) + len(key[1]))
                self._pairs[large] = arr
        return arr

    def has_pairs(self, large: bool) -> bool:
        """Whether the pair table is built already (here or in the process-wide cache)."""
        if large in self._pairs:
            return True
        key = (self.symbols.tobytes(), self.lens.tobytes(), large)
        return _PAIR_CACHE.get(PAIR_TABLE, key) is not None

    def worth_pairs(self, codes: int, large: bool) -> bool:
        """Whether ``codes`` more codes decoded with this table should go through the pair table.

        Yes once the codes decoded with this symbol table in this process (any page, any file)
        reach :data:`_PAIR_MIN_CODES`, where the build has paid for itself, or when the table is
        built already. A rule on one call's size alone never built it for pylance's text pages
        (~2.5M codes each, decoded in one piece per thread, with the same table page after page).
        """
        if codes >= _PAIR_MIN_CODES:
            return True
        if codes < _PAIR_REUSE_MIN_CODES:
            return False
        if self.has_pairs(large):
            return True
        key = self.symbols.tobytes() + self.lens.tobytes()
        with _USES_LOCK:
            seen = _USES.pop(key, 0) + codes
            _USES[key] = seen  # re-inserted last: the dict's order is least recently used first
            while len(_USES) > _USES_MAX:
                del _USES[next(iter(_USES))]
        return seen >= _PAIR_MIN_CODES

    def _build_pairs(self, large: bool) -> pa.Array:
        keep = np.arange(8, dtype=np.uint8)[None, :] < self.lens[:, None]
        words = np.where(keep, self.symbols, 0).reshape(-1).view(np.uint64)  # zero past each length
        code = np.arange(65536, dtype=np.int64)
        lo, hi = code & 255, code >> 8
        lo_bits = self.lens[lo].astype(np.uint64) * np.uint64(8)
        hi_words = words[hi]
        # the 16-byte concatenation as two uint64 words; shifts kept < 64 (C shift semantics)
        first = words[lo] | np.where(lo_bits < 64, hi_words << (lo_bits & np.uint64(63)), np.uint64(0))
        spill = np.uint64(64) - lo_bits
        second = np.where((lo_bits > 0) & (spill < 64), hi_words >> (spill & np.uint64(63)), np.uint64(0))
        second = np.where(lo_bits == 64, hi_words, second)
        mat = np.stack([first, second], axis=1).view(np.uint8).reshape(65536, 16)
        total = self.lens[lo].astype(np.int64) + self.lens[hi]
        data = mat[np.arange(16)[None, :] < total[:, None]]
        offs = np.zeros(65537, np.int64)
        np.cumsum(total, out=offs[1:])
        typ = pa.large_binary() if large else pa.binary()
        ob = pa.py_buffer(offs if large else offs.astype(np.int32))
        return pa.Array.from_buffers(typ, 65536, [None, ob, pa.py_buffer(data)])


_PARALLEL_MIN_BYTES = 4 << 20
# Building the 65536-entry pair table costs ~4 ms and saves ~4.5 ms per million codes decoded, so
# it is built once ~2M codes were decoded with one symbol table: in one call, or summed over the
# calls that share it (the thread pieces of one page; the pages of a pylance file, which come out
# with the same table when their text has one distribution). A table built already (a file read
# again) is used from _PAIR_REUSE_MIN_CODES on. (Compaction decodes each small page once, each
# page with its own table: building per page doubled its FSST decode.)
_PAIR_MIN_CODES = 1 << 21
_PAIR_REUSE_MIN_CODES = 1 << 16
#: Codes decoded so far per symbol table (its bytes), for :meth:`SymbolTable.worth_pairs`;
#: bounded, least recently used dropped first (a dropped table just starts counting again).
_USES: dict[bytes, int] = {}
_USES_MAX = 1024
_USES_LOCK = threading.Lock()


def decode(table: SymbolTable, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decompress concatenated FSST strings, splitting large inputs across threads.

    Args:
        table: the page's symbol table.
        data: uint8 compressed bytes of all strings.
        offsets: int64 string boundaries into ``data`` (``len = strings + 1``).

    Returns:
        (decoded uint8 bytes, int64 offsets into them).
    """
    workers = num_threads()
    nstr = len(offsets) - 1
    if not table.compressed or workers < 2 or len(data) < _PARALLEL_MIN_BYTES or nstr < 2 * workers:
        return _decode(table, data, offsets)
    if not (data == ESC).any() and len(data) >= _PAIR_MIN_CODES:
        table.pairs(len(data) * 8 >= 1 << 31)  # build once, before the workers share it
    cuts = np.linspace(0, nstr, workers + 1).astype(np.int64)
    pieces = [(int(offsets[a]), offsets[a : b + 1]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    results = run_all([partial(_decode_piece, table, data, start, offs) for start, offs in pieces], "fsst")
    out = np.concatenate([r[0] for r in results])
    offs = [results[0][1]]
    base = int(results[0][1][-1])
    for r in results[1:]:
        offs.append(r[1][1:] + base)
        base += int(r[1][-1])
    return out, np.concatenate(offs)


def _decode_piece(table: SymbolTable, data: np.ndarray, start: int, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _decode(table, data[start : int(offs[-1])], offs - start)


def decode_serial(table: SymbolTable, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`decode` on the calling thread only (for callers that already split the work)."""
    return _decode(table, data, offsets)


def _escape_mask(b: np.ndarray) -> np.ndarray | None:
    """Which bytes of FSST codes are escapes (the next byte is a literal), or ``None`` if none is.

    A 255 is an escape unless an escape precedes it: in a run of 255s, every other one is. The
    mask lives in Arrow's pool (a page's codes can be megabytes)."""
    n = len(b)
    is255 = pool_empty(n, np.bool_)
    np.equal(b, ESC, out=is255)
    if not is255.any():
        return None
    if not (is255[1:] & is255[:-1]).any():  # every 255 is an escape: no literal 255 follows one
        return is255
    pos = np.arange(n, dtype=np.int64)
    prev255 = np.concatenate([[False], is255[:-1]])
    run_start = np.maximum.accumulate(np.where(is255 & ~prev255, pos, 0))
    is_esc: np.ndarray = is255 & (((pos - run_start) & 1) == 0)
    return is_esc


def _drop_escapes(
    b: np.ndarray, offsets: np.ndarray, is_esc: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """The codes without their escape bytes, which of them are literals (``None`` when none is),
    and each string's first code in that shorter array."""
    if is_esc is None:
        return b, None, offsets
    keep = ~is_esc
    is_lit = np.concatenate([[False], is_esc[:-1]])[keep]
    esc_cum = np.concatenate([[0], np.cumsum(is_esc.astype(np.int64))])
    return b[keep], is_lit, offsets - esc_cum[offsets]


def _decode(
    table: SymbolTable, data: np.ndarray, offsets: np.ndarray, pairs: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Decode one piece; ``pairs=False`` forces the one-code-at-a-time path (tests compare both)."""
    if not table.compressed:
        return data, offsets
    b = data.astype(np.uint8, copy=False)
    n = len(b)
    if n == 0:
        return b, np.zeros_like(offsets)
    is_esc = _escape_mask(b)
    if is_esc is not None and is_esc[-1]:
        raise CorruptFileError("FSST data ends with an escape byte")
    kept, is_lit, kidx = _drop_escapes(b, offsets, is_esc)
    if is_lit is None:
        if int(kept.max()) >= table.n:
            raise CorruptFileError("FSST code refers to a missing symbol")
        if pairs and table.worth_pairs(len(kept), len(kept) * 8 >= 1 << 31):
            return _decode_pairs(table, kept, offsets)
        codes = kept
    else:
        if (kept[~is_lit] >= table.n).any():
            raise CorruptFileError("FSST code refers to a missing symbol")
        codes = np.where(is_lit, kept.astype(np.uint16) + np.uint16(256), kept)
    # Arrow's take over a 512-entry binary array (256 symbols + 256 literal bytes) writes the
    # decoded bytes contiguously: its data buffer is the output, its offsets the code boundaries.
    large = len(codes) * 8 >= 1 << 31
    taken = pc.take(table.arrow(large), arrow_array(codes))  # pa.array(ndarray) imports pandas
    bufs = taken.buffers()
    offs_all = np.frombuffer(bufs[1], np.int64 if large else np.int32)[: len(codes) + 1]
    total = int(offs_all[-1])
    out = np.frombuffer(bufs[2], np.uint8, total) if total else np.zeros(0, np.uint8)
    return out, pool_take(offs_all, kidx, np.int64)


def _decode_pairs(
    table: SymbolTable, codes: np.ndarray, offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Escape-free codes decoded two at a time: half the gathers of the one-code path.

    Pairs may straddle strings (the output is one contiguous buffer); a string starting at an
    odd code begins one symbol after its pair's output offset.
    """
    n = len(codes)
    even = n - (n & 1)
    large = n * 8 >= 1 << 31
    idx = np.ascontiguousarray(codes[:even]).view(np.uint16)
    if n & 1:
        # the odd last code pairs with code 255, which no table holds (at most 255 symbols), so
        # its entry is the last symbol alone: no copy of the whole output to append it
        padded = pool_empty(len(idx) + 1, np.uint16)
        padded[:-1] = idx
        padded[-1] = int(codes[-1]) | ESC << 8
        idx = padded
    # a uint16 index cannot leave the 65536 entries: Arrow's bounds check (~7% of the take) is moot
    taken = pc.take(table.pairs(large), arrow_array(idx), boundscheck=False)
    bufs = taken.buffers()
    offs_all = np.frombuffer(bufs[1], np.int64 if large else np.int32)[: len(idx) + 1]
    total = int(offs_all[-1])
    out = np.frombuffer(bufs[2], np.uint8, total) if total else np.zeros(0, np.uint8)
    starts: np.ndarray[Any, np.dtype[np.signedinteger[Any]]] = np.asarray(
        offsets, np.int32 if n < 1 << 31 else np.int64
    )
    half = pool_empty(len(starts), starts.dtype)
    np.right_shift(starts, 1, out=half)
    res = pool_take(offs_all, half, np.int64)
    # a string starting at an odd code starts after the first symbol of its pair (starts[0] - 1
    # may wrap to the last code, but then the odd flag is 0)
    extra = table.lens[codes[starts - 1]]
    extra *= (starts & 1).astype(np.uint8)
    res += extra
    return out, res


_LANE = np.arange(8, dtype=np.uint8)[None, :]


def decode_many(tables: list[SymbolTable], data: np.ndarray, offsets: np.ndarray,
                bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`decode` of the strings of several pages at once, each page with its own table.

    Strings ``bounds[k]`` to ``bounds[k + 1]`` (indices into ``offsets``) were compressed with
    ``tables[k]``. All the pages' codes go through one ``take`` over the tables laid end to end
    (512 entries each), instead of one per page. The code-sized temporaries live in Arrow's pool
    (numpy's would fault in fresh pages on every call at these sizes). None when a table holds
    uncompressed data (the caller decodes page by page).

    Raises:
        CorruptFileError: a page's data ends with an escape byte, or a code has no symbol.
    """
    if not all(t.compressed for t in tables):
        return None
    b = data.astype(np.uint8, copy=False)
    n = len(b)
    if n == 0:
        return b, np.zeros_like(offsets)
    seg_bytes = offsets[bounds]  # where each page's bytes start (and the last one ends)
    is_esc = _escape_mask(b)
    if is_esc is not None:
        ends = seg_bytes[1:][seg_bytes[1:] > seg_bytes[:-1]] - 1  # each non-empty page's last byte
        if is_esc[ends].any():
            raise CorruptFileError("FSST data ends with an escape byte")
    kept, is_lit, kidx = _drop_escapes(b, offsets, is_esc)
    cuts = kidx[bounds].tolist()  # each page's first kept code
    codes = pool_empty(len(kept), np.int32)
    codes[:] = kept
    for k, (a, z) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        if z <= a:
            continue
        page = codes[a:z]
        top = int(page.max()) if is_lit is None else int(np.max(page, where=~is_lit[a:z], initial=0))
        if top >= tables[k].n and (is_lit is None or (page[~is_lit[a:z]] >= tables[k].n).any()):
            raise CorruptFileError("FSST code refers to a missing symbol")
        page += k << 9  # the page's table: entries 512 k .. 512 k + 511
    if is_lit is not None:
        np.add(codes, 256, out=codes, where=is_lit)  # literal bytes: entries 256..511 of their table
    large = len(codes) * 8 >= 1 << 31
    table = pa.concat_arrays([t.arrow(large) for t in tables])
    taken = pc.take(table, pa.Array.from_buffers(pa.int32(), len(codes), [None, pa.py_buffer(codes)]))
    bufs = taken.buffers()
    offs_all = np.frombuffer(bufs[1], np.int64 if large else np.int32)[: len(codes) + 1]
    total = int(offs_all[-1])
    out = np.frombuffer(bufs[2], np.uint8, total) if total else np.zeros(0, np.uint8)
    return out, pool_take(offs_all, kidx, np.int64)
