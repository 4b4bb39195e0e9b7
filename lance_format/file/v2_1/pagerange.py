"""Reading part of a mini-block page: only the chunks that hold the wanted rows.

A mini-block page stores its values as a run of independently decodable chunks, described by
one small metadata word each (chunk size and log2 value count; ``MiniBlockLayout`` in
``protos/encodings_v2_1.proto`` and ``rust/lance-encoding/src/encodings/logical/primitive.rs``
upstream). Pages without repetition hold one value per row, so the chunk metadata alone says
which chunks a row range or a set of rows lives in. A scan of a big page then reads and decodes
it in pieces (memory stays at one read's worth instead of a whole decoded page per column) and
a take reads just the chunks of its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import Block, Fixed, Fsl, gather_into, gather_ranges
from lance_format.file.v2_1.fullzip import control_word_bytes, decode_fullzip, rep_index
from lance_format.file.v2_1.layout import PageData, decode_miniblock_page, miniblock_plan

#: Below this data-buffer size a page is simply decoded whole.
PARTIAL_MIN_BYTES = 16 * 1024
#: take: read the whole data buffer when at least 1/8 of it is wanted (one read beats many).
_WHOLE_BUFFER_FRACTION = 8


@dataclass(frozen=True)
class MiniPlan:
    """Where every chunk of one mini-block page (without repetition) lives.

    Attributes:
        layout: The page's ``MiniBlockLayout``.
        meta: The chunk metadata buffer (buffer 0).
        dictionary: The decoded dictionary of a dictionary page, else None.
        counts: Values (= rows) per chunk.
        sizes: Bytes per chunk.
        first_row: ``first_row[i]`` is the page row where chunk ``i`` starts (one extra at the end).
        first_byte: Offset of chunk ``i`` in the data buffer (one extra at the end).
        data_pos: File offset of the data buffer (buffer 1).
        row_width: Bytes per row when every chunk holds just one buffer of non-null, uncompressed
            fixed-width values (flat, or fixed-size lists of flat items), so rows can be copied
            straight into a caller's buffer (:func:`fill_rows`); 0 otherwise.
    """

    layout: pb.MiniBlockLayout
    meta: np.ndarray
    dictionary: Block | None
    counts: np.ndarray
    sizes: np.ndarray
    first_row: np.ndarray
    first_byte: np.ndarray
    data_pos: int
    row_width: int = 0


def plan_buffers(page: Any, layout: pb.PageLayout) -> list[tuple[int, int]] | None:
    """The ``(offset, size)`` buffers a page's chunk plan is built from (chunk metadata, then the
    dictionary if any); None for a page that has no plan: not a mini-block page, one with
    repetition, or one small enough to decode whole.

    Raises:
        CorruptFileError: a dictionary page without its dictionary buffer.
    """
    if layout.WhichOneof("layout") != "mini_block_layout" or len(page.buffer_offsets) < 2:
        return None
    m = layout.mini_block_layout
    if m.HasField("rep_compression") or page.buffer_sizes[1] < PARTIAL_MIN_BYTES:
        return None
    wanted = [(int(page.buffer_offsets[0]), int(page.buffer_sizes[0]))]
    if m.HasField("dictionary"):
        if len(page.buffer_offsets) < 3:
            raise CorruptFileError("dictionary page lacks its dictionary buffer")
        wanted.append((int(page.buffer_offsets[2]), int(page.buffer_sizes[2])))
    return wanted


def build_plan(page: Any, layout: pb.PageLayout, raw: list[np.ndarray]) -> MiniPlan:
    """The chunk plan of a page from the buffers :func:`plan_buffers` named, read into ``raw``.

    Raises:
        CorruptFileError: the chunk metadata disagrees with the page (row count, data size).
    """
    m = layout.mini_block_layout
    counts, sizes = miniblock_plan(m, raw[0])
    first_row = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=first_row[1:])
    if int(first_row[-1]) != int(page.length):
        raise CorruptFileError(f"chunks hold {int(first_row[-1])} values, page has {page.length} rows")
    first_byte = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=first_byte[1:])
    if int(first_byte[-1]) > int(page.buffer_sizes[1]):
        raise CorruptFileError("mini-block chunks run past the end of the data buffer")
    dictionary = None
    if len(raw) > 1:  # decoded once per page, not once per piece
        dictionary = comp.decode_block(m.dictionary, raw[1], int(m.num_dictionary_items))
    width = _row_width(m)
    return MiniPlan(m, raw[0], dictionary, counts, sizes, first_row, first_byte, int(page.buffer_offsets[1]), width)


def _row_width(m: pb.MiniBlockLayout) -> int:
    """Bytes per row of a page whose chunks hold only raw fixed-width values, else 0."""
    if m.HasField("def_compression") or m.HasField("dictionary") or int(m.num_buffers) != 1:
        return 0
    enc = m.value_compression
    dim = 1
    while enc.WhichOneof("compression") == "fixed_size_list":
        fsl = enc.fixed_size_list
        if fsl.has_validity or fsl.items_per_value <= 0:
            return 0
        dim *= int(fsl.items_per_value)
        enc = fsl.values
    if enc.WhichOneof("compression") != "flat" or enc.flat.HasField("data"):
        return 0
    bits = int(enc.flat.bits_per_value)
    return bits // 8 * dim if bits % 8 == 0 and 0 < bits * dim <= 1 << 20 else 0


#: Chunk header of a one-buffer chunk without levels: u16 level count, the buffer's size (u16,
#: or u32 with ``has_large_chunk``), padded to 8 bytes; the values follow (``MiniBlockLayout``).
_VALUES_AT = 8


def filled_block(plan: MiniPlan, out: np.ndarray, n: int) -> Block:
    """The block that ``n`` rows copied by :func:`fill_rows` into ``out`` form."""
    enc = plan.layout.value_compression
    dims: list[int] = []
    while enc.WhichOneof("compression") == "fixed_size_list":
        dims.append(int(enc.fixed_size_list.items_per_value))
        enc = enc.fixed_size_list.values
    bits = int(enc.flat.bits_per_value)
    if not dims:
        return Fixed(bits, out, n)
    return Fsl(dims, [None] * len(dims), Fixed(bits, out, n * int(np.prod(dims))), n)


def fill_rows(plan: MiniPlan, source: Any, lo: int, hi: int, out: np.ndarray) -> None:
    """Copy the values of page rows ``[lo, hi)`` into ``out`` (``(hi - lo) * row_width`` bytes).

    Only for plans with a ``row_width``: one read of the chunks, one copy of just the wanted
    values (no chunk decoded whole, no per-page array to concatenate afterwards).

    Raises:
        CorruptFileError: a chunk's header disagrees with its value count or size.
    """
    width = plan.row_width
    c0 = int(np.searchsorted(plan.first_row, lo, side="right")) - 1
    c1 = int(np.searchsorted(plan.first_row, hi, side="left"))
    b0, b1 = int(plan.first_byte[c0]), int(plan.first_byte[c1])
    data = source.read_arrays([(plan.data_pos + b0, b1 - b0)], "page buffer")[0]
    local = plan.first_byte[c0:c1] - b0
    counts = plan.counts[c0:c1]
    large = plan.layout.has_large_chunk
    stated = np.zeros(len(local), np.int64)
    for k in range(4 if large else 2):  # the value buffer's size, from every chunk header
        stated |= data[local + 2 + k].astype(np.int64) << (8 * k)
    if bool((stated < counts * width).any()) or bool((_VALUES_AT + stated > plan.sizes[c0:c1]).any()):
        raise CorruptFileError("fixed-width mini-block chunk disagrees with its value count")
    row0 = plan.first_row[c0:c1]
    first = np.maximum(lo - row0, 0)
    last = np.minimum(hi - row0, counts)
    gather_into(data, local + _VALUES_AT + first * width, (last - first) * width, out)


def read_rows(plan: MiniPlan, source: Any, lo: int, hi: int) -> tuple[PageData, int]:
    """Decode the chunks holding page rows ``[lo, hi)`` (one contiguous read of their bytes).

    Returns:
        The decoded chunks and the position of row ``lo`` among their values.
    """
    c0 = int(np.searchsorted(plan.first_row, lo, side="right")) - 1
    c1 = int(np.searchsorted(plan.first_row, hi, side="left"))
    b0, b1 = int(plan.first_byte[c0]), int(plan.first_byte[c1])
    data = source.read_arrays([(plan.data_pos + b0, b1 - b0)], "page buffer")[0]
    counts = plan.counts[c0:c1]
    decoded = decode_miniblock_page(
        plan.layout,
        [plan.meta, data],
        int(plan.first_row[c1] - plan.first_row[c0]),
        (counts, plan.sizes[c0:c1]),
        dictionary=plan.dictionary,
    )
    return decoded, lo - int(plan.first_row[c0])


@dataclass(frozen=True)
class TakeRequest:
    """The chunks a take of some page rows reads (see :func:`take_request`).

    Attributes:
        rows: The wanted page rows (any order, repeats allowed).
        chunks: The chunks holding them (ascending, distinct).
        chunk_of: ``chunks``-position of each row's chunk.
        starts: File offsets to read: one per chunk, or just the data buffer's when ``whole``.
        lens: Bytes to read at each of ``starts``.
        whole: The whole data buffer is read (enough of it is wanted that one read beats many).
    """

    rows: np.ndarray
    chunks: np.ndarray
    chunk_of: np.ndarray
    starts: np.ndarray
    lens: np.ndarray
    whole: bool


def take_request(plan: MiniPlan, rows: np.ndarray) -> TakeRequest:
    """What to read for page ``rows``, so that many pages can be read with one gather."""
    chunk_of = np.searchsorted(plan.first_row, rows, side="right") - 1
    if len(rows) > 1 and bool((rows[1:] >= rows[:-1]).all()):
        # rows in order (a take's usual case): chunks and positions from where the chunk changes,
        # no hash-unique or second binary search
        new = np.empty(len(rows), bool)
        new[0] = True
        np.not_equal(chunk_of[1:], chunk_of[:-1], out=new[1:])
        chunks = chunk_of[new]
        where = np.cumsum(new) - 1
    else:
        chunks = distinct(chunk_of)
        where = np.searchsorted(chunks, chunk_of)
    lens = plan.sizes[chunks]
    total = int(plan.first_byte[-1])
    if int(lens.sum()) * _WHOLE_BUFFER_FRACTION >= total:
        return TakeRequest(rows, chunks, where, np.array([plan.data_pos], np.int64), np.array([total], np.int64),
                           True)
    return TakeRequest(rows, chunks, where, plan.data_pos + plan.first_byte[chunks], lens, False)


def decode_taken(plans: Sequence[MiniPlan], reqs: Sequence[TakeRequest], data: np.ndarray,
                 ats: Sequence[np.ndarray]) -> PageData:
    """Decode the rows of ``reqs`` (one per page of ``plans``) from ``data``, where each request's
    ranges were read to positions ``ats``.

    Several pages decode as one when their chunks decode alike (:func:`same_chunks`) and lie in
    ``data`` in page order: a chunk carries its own sizes, so the chunks of a run of pages are
    one set of chunks to the decoder. Only the wanted values are decoded (FSST expands only
    those strings, bit-packed chunks are not unpacked whole), in the order of the requests' rows.
    """
    counts, sizes, starts, pos = [], [], [], []
    base = 0
    for plan, req, at in zip(plans, reqs, ats, strict=True):
        chunks = req.chunks
        starts.append(at[0] + plan.first_byte[chunks] if req.whole else at)
        sel_counts = plan.counts[chunks]
        sel_base = np.zeros(len(chunks), np.int64)
        np.cumsum(sel_counts[:-1], out=sel_base[1:])
        pos.append(req.rows - plan.first_row[chunks[req.chunk_of]] + sel_base[req.chunk_of] + base)
        base += int(sel_counts.sum())
        counts.append(sel_counts)
        sizes.append(plan.sizes[chunks])
    one = len(plans) == 1
    rows = pos[0] if one else np.concatenate(pos)
    # the chunks are decoded where they were read (no copy packing them together first)
    return decode_miniblock_page(
        plans[0].layout,
        [plans[0].meta, data],
        len(rows),
        (counts[0], sizes[0]) if one else (np.concatenate(counts), np.concatenate(sizes)),
        rows,
        dictionary=plans[0].dictionary,
        chunk_starts=starts[0] if one else np.concatenate(starts),
    )


def same_chunks(a: MiniPlan, b: MiniPlan) -> bool:
    """Whether the chunks of two pages decode alike, so one call can decode from both
    (no dictionary: each page has its own; the same encodings and structure otherwise)."""
    la, lb = a.layout, b.layout
    return (
        a.dictionary is None
        and b.dictionary is None
        and la.has_large_chunk == lb.has_large_chunk
        and la.num_buffers == lb.num_buffers
        and la.value_compression == lb.value_compression
        and la.def_compression == lb.def_compression
        and la.rep_compression == lb.rep_compression
        and list(la.layers) == list(lb.layers)
    )


def fullzip_rows(page: Any, layout: pb.PageLayout, source: Any, rows: np.ndarray) -> PageData | None:
    """Decode just the full-zip rows ``rows`` (sorted, unique page rows); None for other pages.

    Every row of a full-zip page is a byte range of the data buffer: ``stride`` bytes per row for
    fixed-width values without repetition, else the range the repetition index (buffer 1) gives.
    Only those ranges are read, then decoded as a small page of their own.

    Raises:
        CorruptFileError: the page is smaller than its rows need, or its index is malformed.
    """
    if layout.WhichOneof("layout") != "full_zip_layout" or not page.buffer_offsets:
        return None
    fz = layout.full_zip_layout
    if page.buffer_sizes[0] < PARTIAL_MIN_BYTES:
        return None
    bits_rep = int(fz.bits_rep)
    data_size = int(page.buffer_sizes[0])
    if bits_rep == 0 and fz.WhichOneof("details") == "bits_per_value":
        if fz.bits_per_value % 8 or fz.bits_def > 16:
            return None  # the whole-page decoder reports what is wrong
        stride = control_word_bytes(int(fz.bits_def)) + int(fz.bits_per_value) // 8
        if stride * int(page.length) > data_size:
            raise CorruptFileError("full-zip fixed-width data is truncated")
        starts = rows * stride
        lens = np.full(len(rows), stride, np.int64)
    else:
        if len(page.buffer_offsets) < 2:
            return None
        starts, lens = _row_ranges(page, source, rows, data_size)
    keep = np.flatnonzero(lens > 0)
    if len(keep):
        blob, at = source.gather(int(page.buffer_offsets[0]) + starts[keep], lens[keep], "page buffer")
        data = gather_ranges(blob, at, lens[keep])
    else:
        data = np.zeros(0, np.uint8)
    sub_index = np.zeros(len(rows) + 1, np.uint64)
    np.cumsum(lens, out=sub_index[1:])
    sub = pb.FullZipLayout()
    sub.CopyFrom(fz)
    if bits_rep == 0:
        sub.num_items = len(rows)
    return decode_fullzip(sub, [data, sub_index.view(np.uint8)], len(rows), exact_items=bits_rep == 0)


def _row_ranges(page: Any, source: Any, rows: np.ndarray, data_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte start and length of each row, from just the two index entries around it."""
    n = int(page.length) + 1
    size = int(page.buffer_sizes[1])
    width = size // n if size % n == 0 else 0
    if width not in (1, 2, 4, 8):
        raise CorruptFileError("full-zip repetition index has a bad size")
    base = int(page.buffer_offsets[1])
    if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):  # one run (a scan's range)
        lo = int(rows[0])
        raw = source.read_arrays([(base + lo * width, (len(rows) + 1) * width)], "page buffer")[0]
        entries = rep_index([raw, raw], len(rows), data_size)
        return entries[:-1], np.diff(entries)
    blob, at = source.gather(base + rows * width, 2 * width, "page buffer")
    pairs = blob[at[:, None] + np.arange(2 * width, dtype=np.int64)[None, :]]
    dt = np.dtype(f"<u{width}")
    both = np.ascontiguousarray(pairs).view(dt).reshape(len(rows), 2).astype(np.int64)
    starts, ends = both[:, 0], both[:, 1]
    if len(rows) and (int(ends.max()) > data_size or bool((ends < starts).any())):
        raise CorruptFileError("full-zip repetition index is out of range")
    return starts, ends - starts


__all__ = [
    "PARTIAL_MIN_BYTES",
    "MiniPlan",
    "TakeRequest",
    "build_plan",
    "decode_taken",
    "fill_rows",
    "filled_block",
    "fullzip_rows",
    "plan_buffers",
    "read_rows",
    "same_chunks",
    "take_request",
]
