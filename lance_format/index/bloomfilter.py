"""BLOOMFILTER scalar index files, written and read as pylance 14.0.2 does.

Layout (``BloomFilterIndexBuilder``, ``rust/lance-index/src/scalar/bloomfilter.rs``; verified on
files pylance 14.0.2 writes): one file ``bloomfilter.lance`` with a row per zone —
``fragment_id`` / ``zone_start`` / ``zone_length`` (``uint64``, zones cut as ZONEMAP cuts them,
:func:`lance_format.index.zones.cut_zones`, of ``bloomfilter_item`` rows), ``has_null``
(bool) and ``bloom_filter_data`` (binary: a split-block bloom filter) — schema metadata
``bloomfilter_item`` (rows per zone, also the filter's expected item count) and
``bloomfilter_probability`` (its false-positive rate, Rust's shortest float text), and the null
rows in global buffer 1 (``null_bitmap``), as ZONEMAP files.

The filter (``rust/lance-index/src/scalar/bloomfilter/sbbf.rs``, Parquet's SBBF): 32-byte
blocks of eight little-endian ``u32`` words; a value's 64-bit hash is XXH64 (seed 0) of its
bytes — little-endian for numbers, dates and times (``as_bytes.rs``), UTF-8 for strings (:mod:`lance_format.index.xxh64`) —
the high 32 bits pick the block (``(hash >> 32) * blocks >> 32``) and the low 32 bits set one
bit per word (``(low * SALT[i]) >> 27``). The block count is the smallest power of two whose
estimated false-positive rate for ``bloomfilter_item`` values is at most the probability.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError, UnsupportedIndexTypeError
from lance_format.index.predicates import IsNull, Range, ValueQuery
from lance_format.index.row_ranges import RowRanges, ZoneSpans
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.index.xxh64 import hashes, xxh64_few
from lance_format.index.zonemap import (
    NULL_BITMAP_KEY,
    OPEN_READER_BYTES,
    null_rows_buffer,
    read_null_rows,
    zone_bounds,
)
from lance_format.index.zones import Zones, cut_zones, sort_by_address, zone_rows
from lance_format.table.index_metadata import IndexFile

FILE = "bloomfilter.lance"
ITEMS_KEY = "bloomfilter_item"
PROBABILITY_KEY = "bloomfilter_probability"
#: Upstream's defaults (``LANCE_BLOOMFILTER_DEFAULT_NUMBER_OF_ITEMS`` / ``..._PROBABILITY``).
DEFAULT_ITEMS = 8192
DEFAULT_PROBABILITY = 0.00057

U64 = npt.NDArray[np.uint64]
_SALT = np.array([0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
                  0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31], dtype=np.uint32)
_MIN_LOG2, _MAX_LOG2 = 5, 27
_SALT_INTS = [int(x) for x in _SALT]


def check_type(column: str, typ: pa.DataType) -> None:
    """Refuse types the upstream builder has no byte form for (booleans, decimals, nested…).

    Raises:
        UnsupportedIndexTypeError: the column type cannot be hashed as pylance hashes it.
    """
    t = pa.types
    ok = (t.is_integer(typ) or t.is_float32(typ) or t.is_float64(typ) or t.is_string(typ)
          or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ) or t.is_date(typ)
          or t.is_timestamp(typ) or (t.is_time32(typ) and typ.unit in ("s", "ms"))
          or (t.is_time64(typ) and typ.unit in ("us", "ns")))
    if not ok:
        raise UnsupportedIndexTypeError(f"a BLOOMFILTER index cannot be built on column {column!r} of type {typ}")


#: ``ln(k!)`` for k = 749 down to 0, the Poisson terms ``_fpp`` sums (computed once).
_LOG_FACTORIALS = np.array([math.lgamma(k + 1) for k in range(749, -1, -1)])


def _fpp(ndv: int, log2_bytes: int) -> float:
    """Estimated false-positive rate of a filter of ``2**log2_bytes`` bytes holding ``ndv`` values."""
    nbytes = float(1 << log2_bytes)
    if ndv == 0:
        return 0.0
    if ndv / (nbytes * 8) > 2.0:
        return 1.0
    lam = 8 * 32.0 / ((nbytes * 8) / ndv)
    loglam = math.log(lam)
    i = np.arange(749, -1, -1, dtype=np.float64)  # summed from the largest term down, as upstream
    logp = i * loglam - lam - _LOG_FACTORIALS
    with np.errstate(divide="ignore"):
        logf = 8.0 * np.log(1.0 - (1.0 - 1.0 / 32.0) ** i)
    total = 0.0
    for term in np.exp(logp + logf).tolist():
        total += term
    return min(total, 1.0)


@functools.lru_cache(maxsize=64)  # a build asks once per run of zones, with the same two numbers
def filter_bytes(ndv: int, fpp: float) -> int:
    """Size in bytes of a new filter for ``ndv`` values at false-positive rate ``fpp``."""
    if not 0.0 <= fpp < 1.0:
        raise UnsupportedIndexTypeError(f"a BLOOMFILTER probability must be in [0, 1), got {fpp}")
    low, high = 0, 64
    while high > low + 1:
        mid = (high + low) // 2
        if _fpp(ndv, mid) <= fpp:
            high = mid
        else:
            low = mid
    return 1 << min(max(high, _MIN_LOG2), _MAX_LOG2)


def _block_and_positions(h: U64, blocks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    """Each hash's block and, for each of the block's eight words, which bit (0-31) it sets."""
    block = (((h >> np.uint64(32)) * np.uint64(blocks)) >> np.uint64(32)).astype(np.int64)
    low = (h & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return block, (low[:, None] * _SALT[None, :]) >> np.uint32(27)


def _block_and_bits(h: U64, blocks: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
    block, bits = _block_and_positions(h, blocks)
    return block, (np.uint32(1) << bits).astype(np.uint32)


def build_filter(h: U64, nbytes: int) -> bytes:
    """A split-block bloom filter of ``nbytes`` bytes holding hashes ``h``."""
    data, _ = build_filters(h, np.zeros(h.size, np.int64), 1, nbytes)
    return data.tobytes()


#: Filter bits set at once by :func:`build_filters`: a bool per bit, 1 MiB, stays in the CPU's cache
#: (scattering into a larger array measured ~2x slower).
_BITS_PER_PASS = 1 << 20
#: Each thread's bit array for :func:`build_filters` (``_BITS_PER_PASS`` bools), kept between calls:
#: a build calls it once per run of zones, and a new array's first writes (page faults) cost
#: more than setting its bits.
_SCRATCH = threading.local()


def _cleared_bits(n: int) -> npt.NDArray[np.bool_]:
    if n > _BITS_PER_PASS:  # one filter larger than a pass (over 128 KiB): not kept
        return np.zeros(n, bool)
    buf: npt.NDArray[np.bool_] | None = getattr(_SCRATCH, "bits", None)
    if buf is None:
        buf = np.zeros(_BITS_PER_PASS, bool)
        _SCRATCH.bits = buf
        return buf[:n]
    out = buf[:n]
    out.fill(False)
    return out


def build_filters(h: U64, zone: npt.NDArray[np.int64] | None, zones: int, nbytes: int,
                  counts: npt.NDArray[np.int64] | None = None) -> tuple[npt.NDArray[np.uint8], int]:
    """The filters of ``zones`` zones, ``nbytes`` each, concatenated; zone ``zone[i]`` holds hash ``h[i]``.

    All zones' bits are set in one pass (a few passes for very many zones) rather than one
    filter at a time: a zone holds only ``bloomfilter_item`` values, so per-zone numpy calls
    would cost more than the bits. Returns the bytes and the size of one filter.

    Args:
        h: The hashes.
        zone: Each hash's zone, or None with ``counts``.
        zones: How many zones.
        nbytes: Bytes of one filter.
        counts: Hashes of each zone when ``h`` comes zone after zone (a build's order): no zone
            number per hash is made or sorted.
    """
    out = np.zeros(zones * nbytes, np.uint8)
    per_pass = max(1, _BITS_PER_PASS // (nbytes * 8))
    if h.size:
        pass_zones = np.arange(0, zones + per_pass, per_pass).clip(max=zones)
        if counts is not None:
            bounds = np.concatenate(([0], np.cumsum(counts)))[pass_zones]
        else:
            assert zone is not None
            order = np.argsort(zone, kind="stable") if zone.size > 1 and bool(np.any(zone[1:] < zone[:-1])) else None
            if order is not None:
                h, zone = h[order], zone[order]
            bounds = np.searchsorted(zone, pass_zones)
        # One bit array (the thread's) and one position array serve every pass: fresh ones per
        # pass were new memory each time, whose first writes (page faults) cost more than setting the bits.
        most = int(np.diff(bounds).max()) if bounds.size > 1 else 0
        pos_buf = np.empty(8 * most, np.uint32)
        at_buf = np.empty(8 * most, np.intp)
        base = np.empty(most, np.uint32)
        word_bits = np.arange(0, 256, 32, dtype=np.uint32)[:, None]
        for k, z0 in enumerate(range(0, zones, per_pass)):  # one step per pass of up to per_pass zones
            z1 = min(zones, z0 + per_pass)
            a, b = int(bounds[k]), int(bounds[k + 1])
            if a == b:
                continue
            m = b - a
            hp = h[a:b]
            # bit b of little-endian word w is bit (w * 32 + b) of the filter read least significant
            # first; a pass spans under 2**31 bits (filters are at most 2**27 bytes), so uint32 indices.
            # Laid out [word][hash]: each step runs along the hashes (a [hash][word] layout ran
            # numpy's inner loops eight elements at a time, ~3x slower).
            block = (((hp >> np.uint64(32)) * np.uint64(nbytes // 32)) >> np.uint64(32)).astype(np.uint32)
            block *= np.uint32(256)
            zb = base[:m]
            if counts is not None:  # the pass's zones in a row: each zone's first bit, repeated
                zb[...] = np.repeat(np.arange(z1 - z0, dtype=np.uint32) * np.uint32(nbytes * 8), counts[z0:z1])
            else:
                assert zone is not None
                np.subtract(zone[a:b], z0, out=zb, casting="unsafe")
                zb *= np.uint32(nbytes * 8)
            zb += block
            pos = pos_buf[:8 * m].reshape(8, m)
            np.multiply(_SALT[:, None], (hp & np.uint64(0xFFFFFFFF)).astype(np.uint32)[None, :], out=pos)
            pos >>= np.uint32(27)
            pos += word_bits
            # the last step writes numpy's index type: an index array of any other type is
            # converted first, which cost as much as the bit setting itself
            at = at_buf[:8 * m].reshape(8, m)
            np.add(pos, zb[None, :], out=at, casting="unsafe")
            used = _cleared_bits((z1 - z0) * nbytes * 8)
            used[at.ravel()] = True
            out[z0 * nbytes:z1 * nbytes] = np.packbits(used, bitorder="little")
    return out, nbytes


def _stack(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], size: int) -> npt.NDArray[np.uint32]:
    """The filters of ``size`` bytes starting at ``starts`` in ``data`` as ``[filters, blocks, 8]`` words."""
    first = int(starts[0])
    if bool(np.all(np.diff(starts) == size)):  # back to back: a view, no copy
        words = data[first:first + size * starts.size].view("<u4")
    else:
        words = data[(starts[:, None] + np.arange(size)[None, :]).ravel()].view("<u4")
    out: npt.NDArray[np.uint32] = words.reshape(starts.size, size // 32, 8)
    return out


def filter_contains(data: bytes, h: U64) -> npt.NDArray[np.bool_]:
    """Whether each hash may be in the filter ``data``."""
    blocks = len(data) // 32
    if blocks == 0:
        return np.zeros(h.size, bool)
    words = np.frombuffer(data, "<u4").reshape(blocks, 8)
    block, masks = _block_and_bits(h, blocks)
    found: npt.NDArray[np.bool_] = np.all((words[block] & masks) != 0, axis=1)
    return found


def _float_text(p: float) -> str:
    """Rust's ``f64::to_string``: the shortest round-trip digits, never an exponent."""
    text = repr(float(p))
    if "e" in text or "E" in text:
        text = np.format_float_positional(p, trim="-")
    return text[:-2] if text.endswith(".0") else text


def write_bloomfilter(out: IndexDir, values: pa.Array, addrs: U64, number_of_items: int = DEFAULT_ITEMS,
                      probability: float = DEFAULT_PROBABILITY) -> tuple[IndexFile, ...]:
    """Write ``bloomfilter.lance`` from a column's values and their row addresses."""
    values, addrs = sort_by_address(values, addrs)
    table = bloom_table(values, addrs, number_of_items, probability)
    return write_table(out, table, number_of_items, probability, null_rows_buffer(values, addrs))


def bloom_table(values: pa.Array, addrs: U64, number_of_items: int, probability: float) -> pa.Table:
    """The rows of ``bloomfilter.lance`` for values sorted by row address."""
    return bloom_zones_table(values, cut_zones(addrs, int(number_of_items)), number_of_items, probability)


def bloom_zones_table(values: pa.Array, zones: Zones, number_of_items: int, probability: float) -> pa.Table:
    """The rows of ``bloomfilter.lance`` for values cut into ``zones``."""
    nbytes = filter_bytes(int(number_of_items), float(probability))
    nzones = zones.first.size
    counts = (zones.stop - zones.first).astype(np.int64)  # rows are in zone order: hashes per zone
    if values.null_count:
        valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
        has_null = np.logical_or.reduceat(~valid, zones.first) if nzones else np.zeros(0, bool)
        counts = np.add.reduceat(valid, zones.first).astype(np.int64) if nzones else counts
    else:
        has_null = np.zeros(nzones, bool)
    data, _ = build_filters(hashes(values), None, nzones, nbytes, counts=counts)
    # binary offsets are int32: zones go in chunks of under 2 GiB of filters
    per_chunk = max(1, ((1 << 31) - 1) // nbytes)
    blobs = pa.chunked_array([pa.Array.from_buffers(
        pa.binary(), min(per_chunk, nzones - z),
        [None, pa.py_buffer(np.arange(min(per_chunk, nzones - z) + 1, dtype=np.int32) * np.int32(nbytes)),
         pa.py_buffer(data[z * nbytes:(z + per_chunk) * nbytes])]) for z in range(0, nzones, per_chunk)],
        pa.binary())
    return pa.table({"fragment_id": pa.array(zones.fragment_id, pa.uint64()),
                     "zone_start": pa.array(zones.zone_start, pa.uint64()),
                     "zone_length": pa.array(zones.zone_length, pa.uint64()),
                     "has_null": pa.array(has_null, pa.bool_()),
                     "bloom_filter_data": blobs}, schema=SCHEMA)


SCHEMA = pa.schema([pa.field("fragment_id", pa.uint64(), False), pa.field("zone_start", pa.uint64(), False),
                    pa.field("zone_length", pa.uint64(), False), pa.field("has_null", pa.bool_(), False),
                    pa.field("bloom_filter_data", pa.binary(), False)])


def write_table(out: IndexDir, table: pa.Table, number_of_items: int, probability: float, nulls: bytes
                ) -> tuple[IndexFile, ...]:
    """Write ``bloomfilter.lance`` from its rows (the global buffer ``nulls`` as buffer 1)."""
    meta = {NULL_BITMAP_KEY: "1", PROBABILITY_KEY: _float_text(probability), ITEMS_KEY: str(int(number_of_items))}
    return (out.write(FILE, table, meta, global_buffers=[nulls]),)


class BloomFilterIndex:
    """An opened BLOOMFILTER segment: every zone's filter in memory.

    Args:
        index_dir: The segment's directory.
        domain: Rows the segment may cover (zones past a fragment's rows are refused).
    """

    def __init__(self, index_dir: IndexDir, domain: RowDomain | None = None):
        reader = index_dir.reader(FILE)
        self._where = reader.path
        names = SCHEMA.names
        if reader.schema.names[:5] != names:
            raise CorruptFileError(f"{self._where}: expected columns {names}, found {reader.schema.names}")
        self.table = reader.read_all(batch_size=1 << 20).to_table()
        md = reader.schema.metadata or {}
        try:
            self.number_of_items = int(md.get(ITEMS_KEY.encode(), DEFAULT_ITEMS))
            self.probability = float(md.get(PROBABILITY_KEY.encode(), DEFAULT_PROBABILITY))
        except ValueError as exc:
            raise CorruptFileError(f"{self._where}: unreadable {ITEMS_KEY} / {PROBABILITY_KEY}") from exc
        cols = {n: self.table.column(n) for n in names}
        if any(c.null_count for n, c in cols.items() if n != "bloom_filter_data"):
            raise CorruptFileError(f"{self._where}: a null zone entry")
        self.fragment_id, self.zone_start, self.zone_length = zone_bounds(self.table, domain, self._where)
        self.spans = ZoneSpans.of(self.fragment_id, self.zone_start, self.zone_length)
        self.has_null = cols["has_null"].to_numpy().astype(bool)
        blobs = cols["bloom_filter_data"].combine_chunks()
        if not pa.types.is_binary(blobs.type):
            blobs = blobs.cast(pa.large_binary())
        self._zones = len(blobs)
        # int32 offsets (binary, as written) are read as they are: casting copied every filter's bytes
        width = 4 if pa.types.is_binary(blobs.type) else 8
        offsets = np.frombuffer(blobs.buffers()[1], f"<i{width}", len(blobs) + 1, blobs.offset * width
                                ).astype(np.int64) if len(blobs) else np.zeros(1, np.int64)
        sizes = np.diff(offsets)
        if len(blobs) and blobs.null_count:  # a null filter holds nothing
            sizes[~pc.is_valid(blobs).to_numpy(zero_copy_only=False)] = 0
        if bool(np.any(sizes % 32)):
            raise CorruptFileError(f"{self._where}: a bloom filter whose length is not a multiple of 32")
        data = np.frombuffer(blobs.buffers()[2], np.uint8) if len(blobs) and blobs.buffers()[2] is not None \
            else np.empty(0, np.uint8)
        # Zones' filters stacked by size ([zones, blocks, 8] words), so a query probes them all at
        # once; filters of one size in a row (every zone, as written) are a view of the file's bytes.
        self._stacks = [(which, _stack(data, offsets[which], size)) for size in distinct(sizes[sizes > 0]).tolist()
                        for which in (np.flatnonzero(sizes == size),)]
        self._reader = reader
        self._domain = domain

    @property
    def nbytes(self) -> int:
        """Memory this object holds (zone table and stacked filters), for the session's index cache."""
        return int(self.table.nbytes) + sum(int(w.nbytes) for _, w in self._stacks) + 2 * int(self.spans.lo.nbytes) \
            + OPEN_READER_BYTES

    @property
    def path(self) -> str:
        """URI of ``bloomfilter.lance``."""
        return self._where

    @property
    def num_zones(self) -> int:
        """Zones in the segment."""
        return self._zones

    def candidate_zones(self, query: ValueQuery) -> npt.NDArray[np.bool_]:
        """Zones that may hold a row matching ``query`` (``=``, ``IN``, ``IS NULL``)."""
        if isinstance(query, IsNull):
            nulls: npt.NDArray[np.bool_] = self.has_null.copy()
            return nulls
        if isinstance(query, Range):
            if query.lo is None or query.hi is None or query.lo != query.hi:
                return np.ones(self._zones, bool)  # not a bloom question: every zone
            items = [query.lo]
        else:
            items = list(query.values)
        if not items:
            return np.zeros(self._zones, bool)
        typ = items[0].type
        if pa.types.is_integer(typ) and len(items) <= 4 and all(v.is_valid for v in items):
            # a point query on integers: their little-endian bytes hashed as Python ints (no arrays made)
            bits = typ.bit_width
            h = np.array(xxh64_few([v.as_py() & ((1 << bits) - 1) for v in items], bits // 8), np.uint64)
        else:
            probe = pa.array([v.as_py() for v in items], typ)
            if pa.types.is_floating(typ):  # -0.0 = 0.0 in SQL, but their bytes hash apart
                probe = pa.concat_arrays([probe, pc.negate(probe)])
            h = hashes(probe)
        hit = np.zeros(self._zones, bool)
        if h.size <= 4:  # a point query: each hash's block and bits in Python ints, a view per probe
            for zones, words in self._stacks:
                blocks = words.shape[1]
                for x in h.tolist():
                    low = x & 0xFFFFFFFF
                    masks = np.array([1 << (((low * s) & 0xFFFFFFFF) >> 27) for s in _SALT_INTS], np.uint32)
                    hit[zones] |= ((words[:, ((x >> 32) * blocks) >> 32, :] & masks) != 0).all(axis=1)
            return hit
        for zones, words in self._stacks:
            block, masks = _block_and_bits(h, words.shape[1])
            # [zones, hashes, 8]: a hash may be present where all eight of its bits are set
            hit[zones] = np.all((words[:, block, :] & masks[None, :, :]) != 0, axis=2).any(axis=1)
        return hit

    def search(self, query: ValueQuery) -> U64:
        """Every row address of the zones that may match ``query`` (sorted, unique)."""
        return zone_rows(self.fragment_id, self.zone_start, self.zone_length, self.candidate_zones(query))

    def search_ranges(self, query: ValueQuery) -> RowRanges:
        """The zones whose filter may hold a queried value, as row ranges."""
        return self.spans.pick(self.candidate_zones(query))

    def null_rows(self) -> U64 | None:
        """Rows recorded as null (pylance 14.0.2's global buffer), ``None`` if not recorded."""
        return read_null_rows(self._reader, self._where, self._domain)
