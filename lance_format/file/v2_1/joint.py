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

from lance_format.errors import CorruptFileError
from lance_format.file.bytesource import pooled_bytes
from lance_format.file.v2_1.arrow import page_to_arrow
from lance_format.file.v2_1.decoder import PAGE_LAYOUT_URL, Decoder21, _Leaf, _page_layout
from lance_format.file.v2_1.layout import decode_miniblock_page, miniblock_plan


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
    joint: dict[int, list[Any]] = {}  # projected field position -> each file's page layout
    for pos in range(len(first.projection)):
        layouts = _joint_layouts(decoders, pos)
        if layouts is not None:
            joint[pos] = layouts
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


def _joint_layouts(decoders: Sequence[Decoder21], pos: int) -> list[Any] | None:
    """Each file's page layout of projected field ``pos`` if the field can be decoded jointly."""
    layouts = []
    key = None
    for d in decoders:
        leaves = d._leaves[pos]
        if len(leaves) != 1 or len(leaves[0].path) != 1 or len(leaves[0].column.pages) != 1:
            return None
        page = leaves[0].column.pages[0]
        if page.type_url != PAGE_LAYOUT_URL or len(page.buffer_offsets) != 2 or page.length == 0:
            return None
        layout = d._guard(leaves[0], 0, _page_layout, page)
        if layout.WhichOneof("layout") != "mini_block_layout":
            return None
        m = layout.mini_block_layout
        if m.HasField("dictionary") or m.HasField("rep_compression") or m.repetition_index_depth:
            return None
        this = (
            m.value_compression.SerializeToString(deterministic=True),
            m.def_compression.SerializeToString(deterministic=True) if m.HasField("def_compression") else None,
            list(m.layers), m.has_large_chunk, m.num_buffers,
        )
        if key is None:
            key = this
        elif this != key:
            return None
        layouts.append(layout)
    return layouts


def _read_joint_pages(decoders: Sequence[Decoder21], positions: list[int]) -> dict[int, _Pages]:
    """Each joint field's page buffers in every file.

    The data buffers of one field land back to back in one buffer from Arrow's pool, read
    straight into place: no per-file buffers concatenated afterwards, no fresh pages faulted in.
    """
    out: dict[int, _Pages] = {}
    for pos in positions:
        pages = [d._leaves[pos][0].column.pages[0] for d in decoders]
        meta_sizes = [int(p.buffer_sizes[0]) for p in pages]
        data_sizes = [int(p.buffer_sizes[1]) for p in pages]
        data_total = sum(data_sizes)
        buf = pooled_bytes(data_total + sum(meta_sizes))
        data_at, meta_at = 0, data_total
        metas = []
        for d, page, mn, dn in zip(decoders, pages, meta_sizes, data_sizes, strict=True):
            d.source.read_into(np.array(list(page.buffer_offsets[:2]), np.int64), np.array([mn, dn], np.int64),
                               buf, np.array([meta_at, data_at], np.int64), "page buffer")
            metas.append(buf[meta_at : meta_at + mn])
            meta_at += mn
            data_at += dn
        buf.flags.writeable = False
        out[pos] = _Pages(buf[:data_total], metas, data_sizes)
    return out


@dataclass
class _Pages:
    """One field's pages in every file: the data buffers back to back, each file's chunk metadata."""

    data: np.ndarray
    metas: list[np.ndarray]
    data_sizes: list[int]


def _decode_joint(decoders: Sequence[Decoder21], pos: int, layouts: list[Any], pages: _Pages) -> pa.Array:
    """Field ``pos`` of every file: all pages' chunks decoded as the chunks of one page."""
    leaf: _Leaf = decoders[0]._leaves[pos][0]
    counts: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    base = 0
    for d, layout, meta, nbytes in zip(decoders, layouts, pages.metas, pages.data_sizes, strict=True):
        try:
            c, s = miniblock_plan(layout.mini_block_layout, meta)
        except CorruptFileError:
            return _file_by_file(decoders, pos)  # whose errors name the file and page
        if int(s.sum()) > nbytes or int(c.sum()) != int(d._leaves[pos][0].column.pages[0].length):
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
    total = sum(int(d._leaves[pos][0].column.pages[0].length) for d in decoders)
    selected = (np.concatenate(counts), np.concatenate(sizes))
    try:
        page = decode_miniblock_page(layouts[0].mini_block_layout, [pages.metas[0], pages.data], total, selected,
                                     chunk_starts=np.concatenate(starts))
        return page_to_arrow(page, leaf.path)
    except Exception:  # noqa: BLE001 - decoded page by page instead, whose errors name the file and page
        return _file_by_file(decoders, pos)


def _file_by_file(decoders: Sequence[Decoder21], pos: int) -> pa.Array:
    parts = [d.read_fields([pos])[pos] for d in decoders]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
