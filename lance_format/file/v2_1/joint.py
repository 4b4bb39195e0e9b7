"""Many small 2.1 / 2.2 files read whole at once: one decode per column instead of one per page.

A compaction reads a hundred small files, each holding one page per column. Decoding a page
costs a fixed ~0.3-0.6 ms of Python and numpy calls whatever its size, which for small pages is
most of the read. Mini-block decoding is chunk-local: every chunk is decoded from its own bytes
and the page's encoding (``CompressiveEncoding``) alone. So when the pages of one column in
several files share the same encoding message byte for byte (same compression, same FSST symbol
table, same bit widths declared...), their chunks can be laid end to end and decoded as the
chunks of one page; the values come out in file order, exactly as the per-page decodes would
give them. Pages that differ, or need per-page state (dictionaries, repetition levels), are
decoded file by file as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import pool_empty
from lance_format.errors import CorruptFileError
from lance_format.file.bytesource import pooled_bytes
from lance_format.file.v2_1.arrow import block_to_arrow, page_to_arrow
from lance_format.file.v2_1.blocks import Constant, Fixed, Var, fixed_to_uint
from lance_format.file.v2_1.compression import decode_block
from lance_format.file.v2_1.decoder import PAGE_LAYOUT_URL, Decoder21, _Leaf, _page_layout
from lance_format.file.v2_1.fsst import SymbolTable, decode_many
from lance_format.file.v2_1.layout import decode_miniblock_page, miniblock_plan
from lance_format.file.v2_1.repdef import Layer


def read_whole_files(decoders: Sequence[Any]) -> list[pa.Array] | None:
    """Every projected field of all rows of every file, concatenated in file order.

    Args:
        decoders: Decoders of files with the same schema and projection.

    Returns:
        One array per projected field (rows of file 0, then file 1, ...), or None when the
        files are not all 2.1 / 2.2 files of one projected schema (the caller reads them itself).
    """
    if not decoders or not all(isinstance(d, Decoder21) for d in decoders):
        return None
    first: Decoder21 = decoders[0]
    shape = [[(leaf.column.index, [f.name for f in leaf.path]) for leaf in leaves] for leaves in first._leaves]
    for d in decoders[1:]:
        if d.projection != first.projection or not d.schema.equals(first.schema) or [
            [(leaf.column.index, [f.name for f in leaf.path]) for leaf in leaves] for leaves in d._leaves
        ] != shape:
            return None
    joint: dict[int, _Joint] = {}  # projected field position -> how its pages decode together
    for pos in range(len(first.projection)):
        found = _joint_layouts(decoders, pos)
        if found is not None:
            joint[pos] = found
    per_file = [d.read_fields([p for p in range(len(d.projection)) if p not in joint]) for d in decoders]
    raw = _read_joint_pages(decoders, sorted(joint))
    out: list[pa.Array] = []
    for pos in range(len(first.projection)):
        if pos in joint:
            out.append(_decode_joint(decoders, pos, joint[pos], raw[pos]))
        else:
            parts = [p[pos] for p in per_file]
            out.append(parts[0] if len(parts) == 1 else pa.concat_arrays(parts))
    return out


def _joint_layouts(decoders: Sequence[Decoder21], pos: int) -> _Joint | None:
    """Each file's page layout of projected field ``pos`` if the field can be decoded jointly.

    The pages must share their encoding message byte for byte, except what is kept per page
    and joined afterwards: an FSST symbol table (``kind`` "fsst"), a dictionary ("dictionary",
    non-null values only).
    """
    layouts = []
    key = None
    kind = "plain"
    for d in decoders:
        leaves = d._leaves[pos]
        if len(leaves) != 1 or len(leaves[0].path) != 1 or len(leaves[0].column.pages) != 1:
            return None
        page = leaves[0].column.pages[0]
        if page.type_url != PAGE_LAYOUT_URL or len(page.buffer_offsets) not in (2, 3) or page.length == 0:
            return None
        layout = d._guard(leaves[0], 0, _page_layout, page)
        if layout.WhichOneof("layout") != "mini_block_layout":
            return None
        m = layout.mini_block_layout
        if m.HasField("rep_compression") or m.repetition_index_depth:
            return None
        values = m.value_compression
        if m.HasField("dictionary"):
            if list(m.layers) != [int(Layer.ALL_VALID_ITEM)] or len(page.buffer_offsets) != 3 \
                    or pa.types.is_dictionary(leaves[0].path[-1].type):
                return None
            kind = "dictionary"
        elif values.WhichOneof("compression") == "fsst":
            values = values.fsst.values  # the symbol table may differ per page
            kind = "fsst"
        elif len(page.buffer_offsets) != 2:
            return None
        this = (
            kind,
            values.SerializeToString(deterministic=True),
            m.def_compression.SerializeToString(deterministic=True) if m.HasField("def_compression") else None,
            list(m.layers), m.has_large_chunk, m.num_buffers,
        )
        if key is None:
            key = this
        elif this != key:
            return None
        layouts.append(layout)
    return _Joint(kind, layouts)


@dataclass
class _Joint:
    """How a field's pages are decoded together: ``kind`` plain / fsst / dictionary."""

    kind: str
    layouts: list[Any]


def _read_joint_pages(decoders: Sequence[Decoder21], positions: list[int]) -> dict[int, _Pages]:
    """Each joint field's page buffers in every file, with one read request list per file.

    Everything lands in one buffer from Arrow's pool, read straight into place (no per-file
    buffers concatenated afterwards, no fresh pages faulted in): field by field, the data
    buffers of all files back to back, then every page's chunk metadata and dictionary.
    """
    pages = {pos: [d._leaves[pos][0].column.pages[0] for d in decoders] for pos in positions}
    data_base: dict[int, int] = {}
    total = 0
    for pos in positions:
        data_base[pos] = total
        total += sum(int(p.buffer_sizes[1]) for p in pages[pos])
    other = total
    total += sum(int(p.buffer_sizes[0]) + sum(int(x) for x in p.buffer_sizes[2:]) for pos in positions
                 for p in pages[pos])
    buf = pooled_bytes(total)
    data_at = dict(data_base)
    metas: dict[int, list[np.ndarray]] = {pos: [] for pos in positions}
    extras: dict[int, list[list[np.ndarray]]] = {pos: [] for pos in positions}
    sizes_of: dict[int, list[int]] = {pos: [] for pos in positions}
    for k, d in enumerate(decoders):
        starts: list[int] = []
        lens: list[int] = []
        dest: list[int] = []
        for pos in positions:
            page = pages[pos][k]
            sizes = [int(x) for x in page.buffer_sizes]
            starts.extend(int(x) for x in page.buffer_offsets)
            lens.extend(sizes)
            dest.append(other)  # chunk metadata
            dest.append(data_at[pos])
            metas[pos].append(buf[other : other + sizes[0]])
            other += sizes[0]
            more = []
            for n in sizes[2:]:  # the dictionary
                dest.append(other)
                more.append(buf[other : other + n])
                other += n
            extras[pos].append(more)
            sizes_of[pos].append(sizes[1])
            data_at[pos] += sizes[1]
        d.source.read_into(np.array(starts, np.int64), np.array(lens, np.int64), buf, np.array(dest, np.int64),
                           "page buffer")
    buf.flags.writeable = False
    return {pos: _Pages(buf[data_base[pos] : data_at[pos]], metas[pos], sizes_of[pos], extras[pos])
            for pos in positions}


@dataclass
class _Pages:
    """One field's pages in every file: the data buffers back to back, each file's chunk metadata."""

    data: np.ndarray
    metas: list[np.ndarray]
    data_sizes: list[int]
    extras: list[list[np.ndarray]]  # each file's buffers after the data (its dictionary)


def _decode_joint(decoders: Sequence[Decoder21], pos: int, joint: _Joint, pages: _Pages) -> pa.Array:
    """Field ``pos`` of every file: all pages' chunks decoded as the chunks of one page."""
    leaf: _Leaf = decoders[0]._leaves[pos][0]
    counts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    rows = [int(d._leaves[pos][0].column.pages[0].length) for d in decoders]
    base = 0
    for layout, meta, nbytes, n in zip(joint.layouts, pages.metas, pages.data_sizes, rows, strict=True):
        try:
            c, s = miniblock_plan(layout.mini_block_layout, meta)
        except CorruptFileError:
            return _file_by_file(decoders, pos)  # whose errors name the file and page
        if int(s.sum()) > nbytes or int(c.sum()) != n:
            # chunks past the buffer, or holding another number of values than the page's rows:
            # the per-page decode reports it where it is
            return _file_by_file(decoders, pos)
        st = np.zeros(len(s), np.int64)
        np.cumsum(s[:-1], out=st[1:])
        st += base
        counts.append(c)
        sizes.append(s)
        starts.append(st)
        base += nbytes
    selected = (np.concatenate(counts), np.concatenate(sizes))
    m0 = joint.layouts[0].mini_block_layout
    try:
        if joint.kind == "fsst":
            inner = pb.MiniBlockLayout()
            inner.CopyFrom(m0)
            inner.value_compression.CopyFrom(m0.value_compression.fsst.values)
            m0 = inner
        if joint.kind == "dictionary":
            # the indices alone (any block stands in for the dictionary: it is not decoded)
            page = decode_miniblock_page(m0, [pages.metas[0], pages.data], sum(rows), selected,
                                         dictionary=Constant(None, 0), chunk_starts=np.concatenate(starts))
            return _resolve_dictionaries(decoders, pos, joint, pages, page.values, rows)
        page = decode_miniblock_page(m0, [pages.metas[0], pages.data], sum(rows), selected,
                                     chunk_starts=np.concatenate(starts))
        if joint.kind == "fsst":
            var = page.values
            if not isinstance(var, Var):
                raise CorruptFileError("FSST must wrap variable-width data")
            bounds = np.zeros(len(rows) + 1, np.int64)
            np.cumsum(rows, out=bounds[1:])
            tables = [SymbolTable(x.mini_block_layout.value_compression.fsst.symbol_table) for x in joint.layouts]
            got = decode_many(tables, var.data, var.offsets, bounds)
            if got is None:
                return _file_by_file(decoders, pos)
            page.values = Var(got[1], got[0])
        return page_to_arrow(page, leaf.path)
    except Exception:  # noqa: BLE001 - decoded page by page instead, whose errors name the file and page
        return _file_by_file(decoders, pos)


def _resolve_dictionaries(decoders: Sequence[Decoder21], pos: int, joint: _Joint, pages: _Pages,
                          indices: Any, rows: list[int]) -> pa.Array:
    """Every file's dictionary decoded (they are small), laid end to end; each file's indices
    shifted past the dictionaries before its own; one ``take``."""
    if not isinstance(indices, Fixed) or indices.n != sum(rows):
        return _file_by_file(decoders, pos)
    t = decoders[0]._leaves[pos][0].path[-1].type
    dicts = []
    for layout, extra in zip(joint.layouts, pages.extras, strict=True):
        m = layout.mini_block_layout
        block = decode_block(m.dictionary, extra[0], int(m.num_dictionary_items))
        dicts.append(block_to_arrow(block, t, None, block.n))
    local = fixed_to_uint(indices)
    # shifted indices in Arrow's pool (numpy's would fault in fresh pages at this size), file by file
    idx = pool_empty(len(local), np.int32)
    at = shift = 0
    for d, n in zip(dicts, rows, strict=True):
        part = local[at : at + n]
        if n and int(part.max()) >= len(d):
            return _file_by_file(decoders, pos)  # an index out of range: reported where it is
        np.add(part, shift, out=idx[at : at + n], casting="unsafe")
        at += n
        shift += len(d)
    if shift >= 1 << 31:
        return _file_by_file(decoders, pos)
    table = pa.concat_arrays(dicts)
    return table.take(pa.Array.from_buffers(pa.int32(), len(idx), [None, pa.py_buffer(idx)]))


def _file_by_file(decoders: Sequence[Decoder21], pos: int) -> pa.Array:
    parts = [d.read_fields([pos])[pos] for d in decoders]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
