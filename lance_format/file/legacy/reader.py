"""The legacy (v1) file decoder behind :class:`lance_format.file.LanceFileReader`.

``LanceFileReader`` parses the footer; for version 0.1/0.2 it hands the parsed tail to
:class:`LegacyFileDecoder`, which serves the same ``read_range`` / ``take`` calls the 2.x decoders
serve, so datasets whose fragments are legacy, or mixed with 2.x files, read through one path.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.file.legacy.decode import LegacyColumnReader
from lance_format.file.legacy.format import LegacyTail, Page
from lance_format.file.legacy.gather import Pieces, read_fields, vectorizable


class LegacyFileDecoder:
    """Decoder of one legacy file for a projection of its top-level fields.

    Args:
        meta: Container metadata whose ``legacy`` attribute holds the parsed :class:`LegacyTail`.
        source: ``ByteSource`` over the file.
        full: Arrow schema of the whole file.
        projection: Indices of the top-level fields to read, in output order.
    """

    def __init__(self, meta: Any, source: Any, full: pa.Schema, projection: list[int]) -> None:
        tail: LegacyTail = meta.legacy
        self.tail = tail
        self.path = meta.path
        self.schema = pa.schema([full.field(i) for i in projection], metadata=full.metadata)
        self.fields = [tail.schema.fields[i] for i in projection]
        self.source = source
        self.blocks = _BlockReader(source)
        self.columns = LegacyColumnReader(tail, self._direct, source.size, meta.path)
        self.scan_columns = LegacyColumnReader(tail, self.blocks.read, source.size, meta.path)
        self.offsets = list(tail.batch_offsets)
        self._offsets = np.asarray(tail.batch_offsets, dtype=np.int64)
        # plain values and strings are read for all pieces at once (gather.py); the rest per batch
        self._fast = [i for i, af in enumerate(self.schema) if vectorizable(af.type)]
        self._slow = [i for i, af in enumerate(self.schema) if not vectorizable(af.type)]

    def _read_fast(self, pieces: Pieces) -> list[pa.Array]:
        return read_fields(self.source, self.tail, self.path, [self.fields[i] for i in self._fast],
                           [self.schema.field(i).type for i in self._fast], pieces)

    def _direct(self, pos: int, n: int) -> bytes:
        return bytes(self.source.read_range(pos, n, "legacy page"))

    def _batches(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """``(batch, start, stop)`` pieces covering file rows ``[start, stop)``."""
        out = []
        b = max(0, bisect.bisect_right(self.offsets, start) - 1)
        while start < stop and b < len(self.offsets) - 1:
            lo, hi = self.offsets[b], self.offsets[b + 1]
            s, e = max(start, lo), min(stop, hi)
            if e > s:
                out.append((b, s - lo, e - lo))
            start = max(start, hi)
            b += 1
        return out

    def read_range(self, start: int, stop: int) -> pa.RecordBatch:
        """File rows ``[start, stop)`` of the projected fields."""
        pieces = self._batches(start, stop)
        cols: list[pa.Array | None] = [None] * len(self.fields)
        if self._fast and pieces:
            for i, arr in zip(self._fast, self._read_fast(Pieces.of(pieces)), strict=True):
                cols[i] = arr
        for i in self._slow:
            # pages of one batch sit together and batches follow each other: sequential reads go
            # through large cached blocks instead of one small request per page
            cols[i] = self.scan_columns.read_batches(self.fields[i], self.schema.field(i).type, pieces)
        if not cols:
            return pa.RecordBatch.from_pydict({}, schema=self.schema)
        return pa.RecordBatch.from_arrays([c if c is not None else pa.array([], type=self.schema.field(i).type)
                                           for i, c in enumerate(cols)], schema=self.schema)

    def take(self, indices: npt.NDArray[np.int64]) -> pa.RecordBatch:
        """Rows at ``indices`` (any order, repeats allowed)."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size == 0:
            return self.schema.empty_table().to_batches()[0] if self.schema else pa.record_batch([])
        uniq, inverse = np.unique(idx, return_inverse=True)
        batch_of = np.searchsorted(self._offsets[1:], uniq, side="right")
        cols: list[pa.Array | None] = [None] * len(self.fields)
        if self._fast:
            # one piece per row: every row's bytes of every plain/string field in one gather
            local = uniq - self._offsets[batch_of]
            for i, arr in zip(self._fast, self._read_fast(Pieces(batch_of, local, local + 1)), strict=True):
                cols[i] = arr
        if self._slow:
            # read each touched batch's covered span once, then pick the rows
            parts: list[list[pa.Array]] = [[] for _ in self._slow]
            for b in np.unique(batch_of):
                sel = uniq[batch_of == b]
                lo = int(self.offsets[b])
                s, e = int(sel[0]) - lo, int(sel[-1]) - lo + 1
                picks = pa.array(sel - lo - s)
                for k, i in enumerate(self._slow):
                    arr = self.columns.read_batch(self.fields[i], self.schema.field(i).type, int(b), s, e)
                    parts[k].append(arr.take(picks))
            for k, i in enumerate(self._slow):
                typ = self.schema.field(i).type
                chunked = pa.chunked_array(parts[k], type=typ)
                if pa.types.is_dictionary(typ):
                    chunked = chunked.unify_dictionaries()
                cols[i] = chunked.combine_chunks()
        rb = pa.RecordBatch.from_arrays(cols, schema=self.schema)
        if uniq.size == idx.size and bool((uniq == idx).all()):
            return rb  # sorted unique indices (what dataset takes ask): already in order
        return rb.take(pa.array(inverse.reshape(-1)))


class _BlockReader:
    """Reads through a few large aligned blocks, so a sequential scan fetches each byte once."""

    BLOCK = 8 << 20
    KEEP = 4

    def __init__(self, source: Any) -> None:
        self.source = source
        self.blocks: dict[int, bytes] = {}

    def _block(self, index: int) -> bytes:
        data = self.blocks.get(index)
        if data is None:
            start = index * self.BLOCK
            data = bytes(self.source.read_range(start, min(self.BLOCK, self.source.size - start), "legacy pages"))
            if len(self.blocks) >= self.KEEP:
                self.blocks.pop(next(iter(self.blocks)))
            self.blocks[index] = data
        return data

    def read(self, pos: int, n: int) -> bytes:
        if n <= 0:
            return b""
        if pos < 0 or pos + n > self.source.size:  # let the source name the bad range
            return bytes(self.source.read_range(pos, n, "legacy page"))
        first, last = pos // self.BLOCK, (pos + n - 1) // self.BLOCK
        if last != first:  # straddles a block boundary (rare): read it directly
            return bytes(self.source.read_range(pos, n, "legacy page"))
        off = pos - first * self.BLOCK
        return self._block(first)[off : off + n]


def page_statistics(reader: Any) -> dict[int, pa.StructArray]:
    """Page-level statistics of a legacy file, for pruning: field id → one row per on-disk batch.

    Each row is ``{null_count, min_value, max_value}``, as the writer collected them
    (``rust/lance-file/src/previous/writer/statistics.rs``); fields without statistics are absent,
    and a 2.x file or a legacy file written without statistics gives ``{}``.

    Args:
        reader: An open :class:`lance_format.file.LanceFileReader`.
    """
    meta = reader.metadata()
    tail: LegacyTail | None = meta.legacy
    if tail is None or tail.statistics is None:
        return {}
    stats = tail.statistics
    batches = max(0, len(tail.batch_offsets) - 1)
    stats_tail = LegacyTail((0, batches), stats.page_table, stats.schema)
    source = reader._source  # the reader's own byte source: statistics pages live in the same file
    columns = LegacyColumnReader(stats_tail, lambda pos, n: bytes(source.read_range(pos, n, "legacy statistics")),
                                 source.size, meta.path)
    arrow = stats.schema.to_arrow()
    out: dict[int, pa.StructArray] = {}
    for field, af in zip(stats.schema.fields, arrow, strict=True):
        arr = columns.read_batch(field, af.type, 0, 0, batches)
        assert isinstance(arr, pa.StructArray)
        out[int(field.name)] = arr
    return out

__all__ = ["LegacyFileDecoder", "Page", "page_statistics"]
