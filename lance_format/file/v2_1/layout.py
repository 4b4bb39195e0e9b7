"""Page layouts of 2.1/2.2 files: mini-block, full-zip, constant / all-null."""

from __future__ import annotations

from typing import Any

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import (
    BlobRefs,
    Block,
    ChunkSet,
    Constant,
    Fixed,
    PackedStruct,
    Var,
    fixed_to_uint,
)
from lance_format.file.v2_1.chunkset import decode_chunkset
from lance_format.file.v2_1.fullzip import decode_fullzip
from lance_format.file.v2_1.repdef import Layer, PageData, layers_from_pb


def decode_page(layout: pb.PageLayout, buffers: list[np.ndarray], num_rows: int) -> PageData:
    """Decode a whole page from its layout message and page buffers."""
    kind = layout.WhichOneof("layout")
    if kind == "mini_block_layout":
        return decode_miniblock_page(layout.mini_block_layout, buffers, num_rows)
    if kind == "constant_layout":
        return _decode_constant(layout.constant_layout, buffers, num_rows)
    if kind == "full_zip_layout":
        return decode_fullzip(layout.full_zip_layout, buffers, num_rows)
    if kind == "blob_layout":
        return _decode_blob(layout.blob_layout, buffers, num_rows)
    raise UnsupportedEncodingError(f"page layout {kind!r} is not supported")


def _decode_blob(blob: pb.BlobLayout, buffers: list[np.ndarray], num_rows: int) -> PageData:
    """Blob pages hold (position, size) descriptions; the bytes live elsewhere in the file."""
    inner = decode_page(blob.inner_layout, buffers, num_rows)
    layers = layers_from_pb(blob.layers)
    if len(layers) != 1 or inner.rep is not None:
        raise UnsupportedEncodingError("nested blob columns are not supported")
    desc = inner.values
    if not isinstance(desc, PackedStruct) or desc.bits != [64, 64]:
        raise CorruptFileError("blob descriptions must be packed (u64 position, u64 size) pairs")
    pairs = np.ascontiguousarray(desc.data[: desc.n * 16]).view(np.uint64).reshape(-1, 2).astype(np.int64)
    if len(pairs) != desc.n:
        raise CorruptFileError("blob descriptions are truncated")
    positions, sizes = pairs[:, 0], pairs[:, 1]
    # a null is smuggled in as size 0 with a non-zero position holding ``def << 16 | rep``
    defs = np.where((sizes == 0) & (positions != 0), positions >> 16, 0)
    if (defs > sum(layer.num_def_levels for layer in layers)).any():
        raise CorruptFileError("blob description holds an impossible definition level")
    refs = BlobRefs(np.where(defs > 0, 0, positions), np.where(defs > 0, 0, sizes), desc.n)
    return PageData(refs, None, defs.astype(np.uint16) if defs.any() else None, layers, num_rows)


def _decode_constant(msg: pb.ConstantLayout, buffers: list[np.ndarray], num_rows: int) -> PageData:
    """Constant / all-null page: ``[value buffer]`` (non-inline constants), then rep and def levels."""
    layers = layers_from_pb(msg.layers)
    value = msg.inline_value if msg.HasField("inline_value") else None
    bufs = list(buffers)
    if len(bufs) in (1, 3):
        if value is not None:
            raise CorruptFileError("constant page has both an inline value and a value buffer")
        value = _scalar_value(bufs.pop(0))
    rep = defs = None
    count = int(msg.num_rep_values) if msg.num_rep_values else None
    if len(bufs) >= 1 and len(bufs[0]):
        rep = _raw_levels(
            bufs[0],
            msg.rep_compression if msg.HasField("rep_compression") else None,
            count if count is not None else None,
        )
        count = len(rep)
    if len(bufs) >= 2 and len(bufs[1]):
        defs = _raw_levels(
            bufs[1],
            msg.def_compression if msg.HasField("def_compression") else None,
            count if count is not None else num_rows,
        )
    if rep is None and defs is None:
        return PageData(Constant(value, num_rows), None, None, layers, num_rows)
    n_levels = len(rep) if rep is not None else len(defs)  # type: ignore[arg-type]
    n_vis = _visible_count(rep, defs, layers, n_levels) if value is not None else n_levels
    return PageData(Constant(value, n_vis), rep, defs, layers, num_rows)


def _visible_count(rep: np.ndarray | None, defs: np.ndarray | None, layers: list[Layer], n: int) -> int:
    first_list = next((i for i, layer in enumerate(layers) if layer.is_list), None)
    if defs is None or first_list is None:
        return n
    max_visible = sum(layer.num_def_levels for layer in layers[:first_list])
    return int((defs <= max_visible).sum())


def _scalar_value(buf: np.ndarray) -> bytes:
    """A constant kept in a buffer: ``u32`` buffer count, ``u32`` size of each, then the buffers.

    For variable-width values the buffers are the offsets and the bytes; the last one is the value.
    """
    raw = buf.tobytes()
    if len(raw) < 4:
        raise CorruptFileError("constant value buffer is truncated")
    count = int.from_bytes(raw[:4], "little")
    if count == 0 or 4 + 4 * count > len(raw):
        raise CorruptFileError("constant value buffer has a bad buffer count")
    sizes = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "little") for i in range(count)]
    end = 4 + 4 * count + sum(sizes)
    if end > len(raw):
        raise CorruptFileError("constant value buffer is truncated")
    return raw[end - sizes[-1] : end]


def _raw_levels(buf: np.ndarray, enc: pb.CompressiveEncoding | None, count: int | None) -> np.ndarray:
    """Levels of a constant page: raw u16, or block-compressed (RLE knows its own length)."""
    if enc is None:
        if len(buf) % 2:
            raise CorruptFileError("level buffer has an odd size")
        return np.ascontiguousarray(buf).view(np.uint16)
    if enc.WhichOneof("compression") == "rle":
        vbytes = int.from_bytes(buf[:8].tobytes(), "little")
        n = int(buf[8 + vbytes :].astype(np.int64).sum())
        return comp.levels_from_block(comp.decode_block(enc, buf, n), n)
    if (
        enc.WhichOneof("compression") == "flat"
        and enc.flat.bits_per_value == 16
        and not enc.flat.HasField("data")
    ):
        count = len(buf) // 2 if count is None else count
    if count is None:
        raise CorruptFileError("compressed level buffer without a level count")
    if count > 64 * len(buf) + 1024:
        raise CorruptFileError("level count is implausible for its buffer")
    return comp.levels_from_block(comp.decode_block(enc, buf, count), count)


def _u16_or_u32(buf: np.ndarray, large: bool) -> np.ndarray:
    width = 4 if large else 2
    if len(buf) % width:
        raise CorruptFileError("mini-block metadata buffer has a partial word")
    return np.ascontiguousarray(buf).view(np.uint32 if large else np.uint16).astype(np.int64)


_BYTE_STEPS = {w: np.arange(w, dtype=np.int64) for w in (2, 4)}
_LE_WORDS: dict[int, np.dtype[Any]] = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


def _read_le(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    if len(starts) <= 4:  # the few chunks of a small page: cheaper than numpy's per-call overhead
        n = len(buf)
        st = starts.tolist()
        if all(s >= 0 and s + width <= n for s in st):
            return np.array([int.from_bytes(buf[s : s + width].tobytes(), "little") for s in st], np.int64)
    # one gather of every chunk's ``width`` bytes, read as little-endian words (a few numpy calls
    # per page instead of five per byte of the width)
    words = buf[starts[:, None] + _BYTE_STEPS[width]]
    return words.view(_LE_WORDS[width]).reshape(-1).astype(np.int64)


def _small_plan(raw: bytes, width: int, num_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``miniblock_plan`` of a page with a few chunks, in Python ints (no numpy call overhead)."""
    words = [int.from_bytes(raw[i : i + width], "little") for i in range(0, len(raw), width)]
    logs = [w & 0xF for w in words]
    if 0 in logs[:-1]:
        raise CorruptFileError("mini-block chunk other than the last has no value count")
    counts = [1 << g if g > 0 else 0 for g in logs]
    last = num_items - sum(counts[:-1])
    if last < 0 or last > 1 << 16:
        raise CorruptFileError("mini-block chunk value counts exceed num_items")
    counts[-1] = last
    return np.array(counts, np.int64), np.array([((w >> 4) + 1) * 8 for w in words], np.int64)


def miniblock_plan(m: pb.MiniBlockLayout, meta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values and byte size of every chunk, from the chunk metadata buffer."""
    width = 4 if m.has_large_chunk else 2
    # up to ~24 chunks plain Python ints beat a dozen numpy calls (measured: 10 chunks 10 vs 17 us)
    if 0 < len(meta) <= 24 * width and len(meta) % width == 0:
        return _small_plan(meta.tobytes(), width, int(m.num_items))
    words = _u16_or_u32(meta, m.has_large_chunk)
    num_items = int(m.num_items)
    nchunks = len(words)
    if nchunks == 0:
        raise CorruptFileError("mini-block page has no chunks")
    sizes = ((words >> 4) + 1) * 8
    logs = words & 0xF
    counts = np.where(logs > 0, np.int64(1) << logs, 0)
    if nchunks > 1 and (logs[:-1] == 0).any():
        raise CorruptFileError("mini-block chunk other than the last has no value count")
    last = num_items - int(counts[:-1].sum())
    if last < 0 or last > 1 << 16:
        raise CorruptFileError("mini-block chunk value counts exceed num_items")
    counts[-1] = last
    return counts, sizes


def decode_miniblock_page(
    m: pb.MiniBlockLayout,
    buffers: list[np.ndarray],
    num_rows: int,
    selected: tuple[np.ndarray, np.ndarray] | None = None,
    rows: np.ndarray | None = None,
    *,
    dictionary: Block | None = None,
    chunk_starts: np.ndarray | None = None,
) -> PageData:
    """Decode a mini-block page; with ``selected`` = (counts, sizes) of some chunks, buffer 1
    holds just those chunks back to back (random access without reading the whole page).

    ``dictionary``: the page's already decoded dictionary (pages read in pieces decode it once);
    buffer 2 is then not needed. ``chunk_starts``: where each selected chunk begins in buffer 1
    (ascending, not overlapping) when they are not back to back, so a take decodes its chunks
    where they were read instead of copying them together first."""
    layers = layers_from_pb(m.layers)
    if len(buffers) < 2:
        raise CorruptFileError("mini-block page needs metadata and data buffers")
    large = m.has_large_chunk
    data = buffers[1]
    counts, sizes = selected if selected is not None else miniblock_plan(m, buffers[0])
    if chunk_starts is None:
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        if int(sizes.sum()) > len(data):
            raise CorruptFileError("mini-block chunks run past the end of the data buffer")
    else:
        starts = np.asarray(chunk_starts, np.int64)
        ends = starts + sizes
        if len(starts) != len(sizes) or (len(starts) and (int(starts[0]) < 0 or int(ends.max()) > len(data))):
            raise CorruptFileError("mini-block chunks run past the end of the data buffer")
        if (starts[1:] < ends[:-1]).any():
            raise CorruptFileError("mini-block chunks overlap")
    has_rep = m.HasField("rep_compression")
    has_def = m.HasField("def_compression")
    nbuf = int(m.num_buffers)
    if nbuf > 64:
        raise CorruptFileError(f"mini-block claims {nbuf} buffers per chunk")
    vw = 4 if large else 2
    # Header: u16 levels, [u16 rep size], [u16 def size], value sizes (u16 | u32 in 2.2)
    pos = 2
    num_levels = _read_le(data, starts, 2)
    rep_size = def_size = None
    if has_rep:
        rep_size = _read_le(data, starts + pos, 2)
        pos += 2
    if has_def:
        def_size = _read_le(data, starts + pos, 2)
        pos += 2
    buf_sizes = []
    for _ in range(nbuf):
        buf_sizes.append(_read_le(data, starts + pos, vw))
        pos += vw
    cur = starts + ((pos + 7) // 8) * 8

    def take(size: np.ndarray) -> np.ndarray:
        nonlocal cur
        begin = cur
        cur = cur + ((size + 7) // 8) * 8
        if ((begin + size) > starts + sizes).any():
            raise CorruptFileError("mini-block chunk buffer runs past its chunk")
        return begin

    rep_start = take(rep_size) if rep_size is not None else None
    def_start = take(def_size) if def_size is not None else None
    buf_starts = [take(s) for s in buf_sizes]
    chunkset = ChunkSet(data, list(buf_starts), list(buf_sizes), counts)
    if not m.HasField("dictionary"):
        dictionary = None
    elif dictionary is None:
        if len(buffers) < 3:
            raise CorruptFileError("dictionary page lacks its dictionary buffer")
        dictionary = comp.decode_block(m.dictionary, buffers[2], int(m.num_dictionary_items))
    if rows is not None and has_rep:
        raise CorruptFileError("row selection needs a page without repetition")
    values = decode_chunkset(m.value_compression, chunkset, rows)
    rep = _chunk_levels(m.rep_compression, data, rep_start, rep_size, num_levels) if has_rep else None
    defs = _chunk_levels(m.def_compression, data, def_start, def_size, num_levels) if has_def else None
    if rows is not None and defs is not None:
        defs = defs[rows]
    return PageData(values, rep, defs, layers, num_rows, dictionary)


def _chunk_levels(
    enc: pb.CompressiveEncoding,
    data: np.ndarray,
    starts: np.ndarray | None,
    sizes: np.ndarray | None,
    num_levels: np.ndarray,
) -> np.ndarray:
    assert starts is not None and sizes is not None
    kind = enc.WhichOneof("compression")
    if kind == "flat" and enc.flat.bits_per_value == 16 and not enc.flat.HasField("data"):
        parts = [data[int(s) : int(s) + 2 * int(n)] for s, n in zip(starts, num_levels, strict=False)]
        for p, n in zip(parts, num_levels, strict=False):
            if len(p) != 2 * n:
                raise CorruptFileError("level buffer is truncated")
        return np.ascontiguousarray(np.concatenate(parts)).view(np.uint16)
    if kind == "out_of_line_bitpacking":
        fast = _ool_levels(enc, data, starts, sizes, num_levels)
        if fast is not None:
            return fast
    out = []
    for s, z, n in zip(starts, sizes, num_levels, strict=False):
        block = comp.decode_block(enc, data[int(s) : int(s + z)], int(n))
        out.append(comp.levels_from_block(block, int(n)))
    return np.concatenate(out) if out else np.zeros(0, np.uint16)


def _ool_levels(
    enc: pb.CompressiveEncoding,
    data: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    num_levels: np.ndarray,
) -> np.ndarray | None:
    """Out-of-line bit-packed u16 levels of every chunk, unpacked in one batch.

    Returns None for the rare layouts (raw tails, other widths) left to the generic path."""
    ool = enc.out_of_line_bitpacking
    if ool.uncompressed_bits_per_value != 16 or ool.values.WhichOneof("compression") != "flat":
        return None
    width = int(ool.values.flat.bits_per_value)
    if width == 0:  # every level is 0 (lance writes this for pages without any null / empty list)
        return np.zeros(int(num_levels.sum()), np.uint16)
    if not 0 < width <= 16:
        raise CorruptFileError(f"level bit width {width} out of range")
    per_block = 128 * width  # bytes of one packed 1024-level block
    nblk = (num_levels + 1023) // 1024
    if (sizes != nblk * per_block).any():
        return None  # some chunk keeps its tail unpacked
    rem = num_levels % 1024
    if ((rem > 0) & (2 * rem == per_block)).any():
        # A raw u16 tail exactly as long as a packed block: lance stores it raw (the
        # sizes cannot tell the two apart), so the generic path, which prefers raw, decodes it.
        return None
    parts = [data[a : a + b] for a, b in zip(starts.tolist(), (nblk * per_block).tolist(), strict=True)]
    words = np.concatenate(parts).view(np.uint16) if parts else np.zeros(0, np.uint16)
    vals = bitpack.unpack_blocks(words, width, 16).reshape(-1, 1024)
    valid = np.full(len(vals), 1024, np.int64)
    last_block = np.cumsum(nblk) - 1
    has_rem = (rem > 0) & (nblk > 0)
    valid[last_block[has_rem]] = rem[has_rem]
    if (valid == 1024).all():
        return vals.reshape(-1)
    return vals[np.arange(1024)[None, :] < valid[:, None]]


#: Below this many data bytes a page is decoded whole (as ``pagerange.PARTIAL_MIN_BYTES``).
_REPEATED_MIN_BYTES = 16 * 1024


def repeated_rows(page: Any, layout: pb.PageLayout, source: Any, rows: np.ndarray) -> tuple[PageData, np.ndarray] | None:
    """Decode only the chunks of a repeated (list) mini-block page that hold page rows ``rows``.

    The repetition index (the page's last buffer, ``repetition_index_depth + 1`` u64 per chunk:
    rows finished in the chunk, then items left over after its last finished row; see
    ``rust/lance-encoding/src/encodings/logical/primitive.rs``) tells which chunks a row's items
    span, so a take of a few rows reads and decodes those chunks instead of the whole page. A
    chunk that begins inside a row gets a row start on its first level: the decoded array then
    holds whole rows plus, where a span begins mid-row, one partial row that is never returned.

    Returns:
        The decoded chunks and, for every entry of ``rows``, its row in their Arrow array; None
        when the page is not such a page (or most of it is wanted: the whole page is cheaper).

    Raises:
        CorruptFileError: the repetition index disagrees with the page.
    """
    if layout.WhichOneof("layout") != "mini_block_layout":
        return None
    m = layout.mini_block_layout
    nbuf = len(page.buffer_offsets)
    if (not m.HasField("rep_compression") or m.HasField("dictionary") or int(m.repetition_index_depth) != 1
            or nbuf < 3 or int(page.buffer_sizes[1]) < _REPEATED_MIN_BYTES):
        return None
    depth = 1
    meta, index = source.read_arrays([(int(page.buffer_offsets[0]), int(page.buffer_sizes[0])),
                                      (int(page.buffer_offsets[nbuf - 1]), int(page.buffer_sizes[nbuf - 1]))],
                                     "page buffer")
    counts, sizes = miniblock_plan(m, meta)
    nchunks = len(counts)
    if len(index) != 8 * (depth + 1) * nchunks:
        raise CorruptFileError(f"repetition index holds {len(index)} bytes for {nchunks} chunks")
    entries = np.ascontiguousarray(index).view("<u8").reshape(nchunks, depth + 1).astype(np.int64)
    finished, left = entries[:, 0], entries[:, depth]
    done = np.cumsum(finished)  # rows finished up to and including each chunk
    if int(done[-1]) != int(page.length):
        raise CorruptFileError(f"repetition index finishes {int(done[-1])} rows, page has {page.length}")
    started = done + (left > 0)  # rows begun up to and including each chunk
    rows = np.asarray(rows, np.int64)
    first = np.searchsorted(started, rows, side="right")  # chunk where each row begins
    last = np.searchsorted(done, rows, side="right")  # chunk where it ends
    # The chunks of every wanted row, each run of consecutive chunks a span.
    chunks = distinct(np.concatenate([np.arange(a, b + 1) for a, b in zip(first.tolist(), last.tolist(), strict=True)]))
    if 2 * len(chunks) > nchunks:
        return None
    first_byte = np.concatenate([[0], np.cumsum(sizes)])
    if int(first_byte[-1]) > int(page.buffer_sizes[1]):
        raise CorruptFileError("mini-block chunks run past the end of the data buffer")
    blob, at = source.gather(int(page.buffer_offsets[1]) + first_byte[chunks], sizes[chunks], "page buffer")
    data = decode_miniblock_page(m, [meta, blob], int(page.length), (counts[chunks], sizes[chunks]),
                                 chunk_starts=at)
    assert data.rep is not None
    max_rep = sum(1 for layer in data.layers if layer.is_list)
    span_start = np.r_[True, chunks[1:] != chunks[:-1] + 1]
    before = np.r_[0, started][chunks]  # rows begun before each chunk
    mid_row = np.r_[0, left][chunks] > 0  # the chunk begins inside a row
    levels = _read_le(blob, np.asarray(at, np.int64), 2)
    level_at = np.concatenate([[0], np.cumsum(levels)[:-1]])
    rep = data.rep.copy()
    fix = span_start & mid_row & (levels > 0)
    rep[level_at[fix]] = max_rep
    # Arrow row of the first row begun in each span's first chunk: rows of earlier spans, plus
    # one partial row when the span begins inside a row.
    s_idx = np.flatnonzero(span_start)
    s_end = np.r_[s_idx[1:], len(chunks)] - 1
    span_rows = (np.r_[0, started][chunks[s_end] + 1] - before[s_idx]) + fix[s_idx]
    span_base = np.concatenate([[0], np.cumsum(span_rows)[:-1]]) + fix[s_idx]
    span_of = np.searchsorted(chunks[s_idx], first, side="right") - 1
    local = span_base[span_of] + rows - before[s_idx][span_of]
    total = int(span_rows.sum())
    if int((rep == max_rep).sum()) != total:
        raise CorruptFileError("repetition index disagrees with the chunks' repetition levels")
    return PageData(data.values, rep, data.defs, data.layers, total, data.dictionary), local


__all__ = ["PageData", "decode_page", "repeated_rows", "Fixed", "Var", "fixed_to_uint"]
