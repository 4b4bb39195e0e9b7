"""Reading a row range of a list mini-block page: only the chunks that hold its rows.

The rows of a page with repetition (a list column) do not line up with its chunks: a row's items
may begin in one chunk and end in a later one. The page's repetition index (its last buffer,
``repetition_index_depth + 1`` ``u64`` per chunk: rows that end in the chunk, then the items left
over after the chunk's last row end, i.e. the start of a row that continues in the next chunk;
``MiniBlockRepIndex`` in ``rust/lance-encoding/src/encodings/logical/primitive.rs`` upstream)
says how many rows begin before each chunk, so a range of rows maps to one run of chunks. A
range read then reads that run with one request and decodes it, instead of decoding whole pages
(a random range of a few thousand rows touched up to two pages of ~5,000 rows each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import Block
from lance_format.file.v2_1.layout import PageData, decode_miniblock_page, miniblock_plan

#: Below this data-buffer size a page is simply decoded whole (as ``pagerange.PARTIAL_MIN_BYTES``).
LIST_PARTIAL_MIN_BYTES = 16 * 1024


@dataclass(frozen=True)
class ListPlan:
    """Where the chunks and rows of one list mini-block page lie.

    Attributes:
        layout: The page's ``MiniBlockLayout``.
        meta: The chunk metadata buffer (buffer 0).
        dictionary: The page's decoded dictionary, else None.
        counts: Items per chunk.
        sizes: Bytes per chunk.
        first_byte: Offset of chunk ``i`` in the data buffer (one extra at the end).
        begun: ``begun[i]``: rows that begin before chunk ``i`` (one extra at the end: all rows).
        done: ``done[i]``: rows that end in chunks ``0..i``.
        trailer: Whether chunk ``i`` ends inside a row (that row continues in chunk ``i + 1``).
        data_pos: File offset of the data buffer (buffer 1).
    """

    layout: pb.MiniBlockLayout
    meta: np.ndarray
    dictionary: Block | None
    counts: np.ndarray
    sizes: np.ndarray
    first_byte: np.ndarray
    begun: np.ndarray
    done: np.ndarray
    trailer: np.ndarray
    data_pos: int


def list_plan_buffers(page: Any, layout: pb.PageLayout) -> list[tuple[int, int]] | None:
    """The ``(offset, size)`` buffers a list page's plan is built from: chunk metadata, the
    dictionary if any, then the repetition index. None for pages without such a plan: not a
    mini-block page with one level of repetition and its index, or one small enough to decode whole.
    """
    if layout.WhichOneof("layout") != "mini_block_layout":
        return None
    m = layout.mini_block_layout
    nbuf = len(page.buffer_offsets)
    has_dict = m.HasField("dictionary")
    if (not m.HasField("rep_compression") or int(m.repetition_index_depth) != 1 or nbuf != 3 + has_dict
            or int(page.buffer_sizes[1]) < LIST_PARTIAL_MIN_BYTES):
        return None
    picked = [0, 2, 3] if has_dict else [0, 2]
    return [(int(page.buffer_offsets[i]), int(page.buffer_sizes[i])) for i in picked]


def build_list_plan(page: Any, layout: pb.PageLayout, raw: list[np.ndarray]) -> ListPlan | None:
    """The plan of a list page from the buffers :func:`list_plan_buffers` named, read into ``raw``;
    None when the repetition index does not describe the page as expected (the page is then
    decoded whole, which does not rely on the index).

    Raises:
        CorruptFileError: the chunk metadata disagrees with the page (decoding it whole fails too).
    """
    m = layout.mini_block_layout
    meta, index = raw[0], raw[-1]
    counts, sizes = miniblock_plan(m, meta)
    nchunks = len(counts)
    if len(index) != 16 * nchunks:
        return None
    entries = np.ascontiguousarray(index).view("<u8").reshape(nchunks, 2).astype(np.int64)
    done = np.cumsum(entries[:, 0])
    trailer = entries[:, 1] > 0
    begun = np.zeros(nchunks + 1, np.int64)
    np.add(done, trailer, out=begun[1:])  # a trailing row has begun in its chunk but not ended
    # every row ends in the page, and counts never go down (u64 counts past 2**63 turn negative)
    if int(done[-1]) != int(page.length) or bool(trailer[-1]) or (entries < 0).any() or (np.diff(begun) < 0).any():
        return None
    first_byte = np.zeros(nchunks + 1, np.int64)
    np.cumsum(sizes, out=first_byte[1:])
    if int(first_byte[-1]) > int(page.buffer_sizes[1]):
        raise CorruptFileError("mini-block chunks run past the end of the data buffer")
    dictionary = None
    if m.HasField("dictionary"):  # decoded once per page, not once per range
        dictionary = comp.decode_block(m.dictionary, raw[1], int(m.num_dictionary_items))
    return ListPlan(m, meta, dictionary, counts, sizes, first_byte, begun, done, trailer,
                    int(page.buffer_offsets[1]))


def list_rows(plan: ListPlan, source: Any, lo: int, hi: int) -> tuple[PageData, int]:
    """Decode the chunks holding page rows ``[lo, hi)`` (``lo < hi``; one read of their bytes).

    The first chunk may begin with the end of an earlier row (its preamble): its first level is
    made a row start, so the decoded chunks form whole rows plus, in front, one partial row that
    is never returned; likewise the last chunk may end inside a row after ``hi``.

    Returns:
        The decoded chunks and the Arrow row of page row ``lo`` in them.

    Raises:
        CorruptFileError: the chunks disagree with the repetition index (then the row count
            that ``page_to_arrow`` checks differs).
    """
    c0 = int(np.searchsorted(plan.begun[1:], lo, side="right"))  # the chunk where row lo begins
    c1 = int(np.searchsorted(plan.done, hi - 1, side="right"))  # the chunk where row hi - 1 ends
    if c1 >= len(plan.counts) or c0 > c1:
        raise CorruptFileError(f"repetition index has no chunks for rows {lo}..{hi}")
    b0, b1 = int(plan.first_byte[c0]), int(plan.first_byte[c1 + 1])
    data = source.read_arrays([(plan.data_pos + b0, b1 - b0)], "page buffer")[0]
    preamble = c0 > 0 and bool(plan.trailer[c0 - 1])
    rows = int(plan.begun[c1 + 1] - plan.begun[c0]) + preamble
    decoded = decode_miniblock_page(plan.layout, [plan.meta, data], rows,
                                    (plan.counts[c0 : c1 + 1], plan.sizes[c0 : c1 + 1]),
                                    dictionary=plan.dictionary)
    rep = decoded.rep
    assert rep is not None
    if preamble and len(rep):
        if not rep.flags.writeable:
            rep = rep.copy()
        rep[0] = sum(1 for layer in decoded.layers if layer.is_list)
    decoded.rep = rep
    return decoded, lo - int(plan.begun[c0]) + preamble


__all__ = ["LIST_PARTIAL_MIN_BYTES", "ListPlan", "build_list_plan", "list_plan_buffers", "list_rows"]
