"""Reading 2.1 / 2.2 files: the per-version decoder plugged into ``lance_format.file.reader``."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError, LanceError, UnsupportedEncodingError
from lance_format.file.v2_1.arrow import leaf_paths, merge, page_to_arrow
from lance_format.file.v2_1.blocks import BlobRefs, Var, gather_ranges
from lance_format.file.v2_1.fsst import num_threads, pool
from lance_format.file.v2_1.layout import decode_miniblock_page, decode_page, miniblock_plan
from lance_format.session import CacheKind, LruCache

PAGE_LAYOUT_URL = "/lance.encodings21.PageLayout"
#: Decoded pages one reader keeps for later batches of the same pages. Per reader (it dies with
#: the reader), not per session: the pages are only useful to the reader that decoded them.
_CACHE_BYTES = 256 * 1024 * 1024
_PAGE: CacheKind[pa.Array] = CacheKind("decoded_page")
_PARALLEL_MIN_ROWS = 16384
_MAX_PAGE_ROWS = 1 << 32  # sanity bound: a corrupt length must not make us allocate terabytes
_PARTIAL_READS_BEFORE_CACHING = 2
_PARTIAL_MIN_BYTES = 16 * 1024  # smaller pages are simply decoded whole
_WHOLE_BUFFER_FRACTION = 8  # take: read the whole data buffer when >= 1/8 of it is wanted
_PARTIAL_MAX_ROWS = 32768  # longer ranges (a scan's chunks) decode the page whole: cheaper per row


class _Leaf:
    """One leaf column of a projected field."""

    def __init__(self, column: Any, path: list[pa.Field]) -> None:
        self.column = column
        self.path = path
        lengths = np.array([p.length for p in column.pages], np.int64)
        self.page_starts = np.concatenate([[0], np.cumsum(lengths)])
        leaf_type = path[-1].type
        is_var = pa.types.is_string(leaf_type) or pa.types.is_binary(leaf_type)
        is_var = is_var or pa.types.is_large_string(leaf_type) or pa.types.is_large_binary(leaf_type)
        nbytes = sum(sum(p.buffer_sizes) for p in column.pages)
        self.cost_rank = (not is_var, -nbytes)  # decode order in parallel reads: lowest first


class Decoder21:
    """Decoder for 2.1 and 2.2 files (leaf columns, structural rep/def page layouts).

    Args:
        meta: Parsed container metadata (``lance_format.file.container.FileMetadata``).
        source: ``ByteSource`` of the file.
        schema: Arrow schema of the whole file.
        projection: Indices of the requested top-level fields, in output order.
    """

    def __init__(self, meta: Any, source: Any, schema: pa.Schema, projection: Sequence[int]) -> None:
        self.meta = meta
        self.source = source
        self.schema = schema
        self.projection = list(projection)
        self.path = getattr(meta, "path", "<file>")
        version = getattr(meta, "version", (2, 1))
        self.version = f"{version[0]}.{version[1]}"
        self._pages = LruCache(_CACHE_BYTES)
        self._partial_reads: dict[tuple[int, int], int] = {}
        self._last: dict[int, tuple[int, pa.Array]] = {}
        self._next_start: dict[int, int] = {}  # per column: where the previous read_range stopped
        self._lock = threading.Lock()
        col = 0
        self._leaves: list[list[_Leaf]] = []
        per_field: list[list[_Leaf]] = []
        wanted = set(self.projection)
        ncols = len(meta.columns)
        for fi, f in enumerate(schema):
            leaves = []
            for p in leaf_paths(f):
                if col >= ncols:
                    raise CorruptFileError(f"{self.path}: schema needs more columns than the file's {ncols}")
                if fi in wanted:  # other columns' metadata is never parsed
                    leaves.append(_Leaf(meta.columns[col], p))
                col += 1
            per_field.append(leaves)
        self._leaves = [per_field[i] for i in self.projection]
        self.num_rows = int(meta.num_rows)
        for leaves in self._leaves:
            for leaf in leaves:
                for pi, page in enumerate(leaf.column.pages):
                    if page.length > _MAX_PAGE_ROWS:
                        raise CorruptFileError(f"{self._where(leaf, pi)}: page claims {page.length} rows")
        for leaves in self._leaves:
            for leaf in leaves:
                if int(leaf.page_starts[-1]) != self.num_rows:
                    raise CorruptFileError(
                        f"{self.path} (v{self.version}) column {leaf.column.index} "
                        f"({'.'.join(f.name for f in leaf.path)}): pages hold {int(leaf.page_starts[-1])} "
                        f"rows, file has {self.num_rows}"
                    )

    # ------------------------------------------------------------------ pages

    def _where(self, leaf: _Leaf, page_idx: int) -> str:
        name = ".".join(f.name for f in leaf.path)
        return f"{self.path} (v{self.version}) column {leaf.column.index} ({name}) page {page_idx}"

    def _cached(self, key: tuple[int, int]) -> pa.Array | None:
        with self._lock:
            last = self._last.get(key[0])
            if last is not None and last[0] == key[1]:
                return last[1]
        return self._pages.get(_PAGE, key)

    def _remember(self, key: tuple[int, int], arr: pa.Array, *, forward: bool = False) -> None:
        """Keep the newest page of every column regardless of size, older ones within a budget.

        ``forward``: the read continues where the previous one of this column stopped (a scan);
        the pages behind it will not be read again, so they are dropped rather than cached
        (a scan's memory then stays at about one page per column, not one file's worth).
        """
        with self._lock:
            prev = self._last.get(key[0])
            self._last[key[0]] = (key[1], arr)
        if prev is not None and prev[0] != key[1] and not (forward and prev[0] < key[1]):
            self._pages.put(_PAGE, (key[0], prev[0]), prev[1], prev[1].nbytes)

    def _decode_pages(self, leaf: _Leaf, page_ids: list[int], *, forward: bool = False) -> list[pa.Array]:
        col = leaf.column.index
        out: dict[int, pa.Array] = {}
        missing = []
        for p in page_ids:
            arr = self._cached((col, p))
            if arr is None:
                missing.append(p)
            else:
                out[p] = arr
        ranges: list[tuple[int, int]] = []
        for p in missing:
            page = leaf.column.pages[p]
            ranges.extend(zip(page.buffer_offsets, page.buffer_sizes, strict=False))
        raw = self.source.read_arrays(ranges, "page buffer") if ranges else []
        pos = 0
        for p in missing:
            page = leaf.column.pages[p]
            nb = len(page.buffer_offsets)
            bufs = raw[pos : pos + nb]
            pos += nb
            out[p] = self._decode_one(leaf, p, page, bufs)
            self._remember((col, p), out[p], forward=forward)
        return [out[p] for p in page_ids]

    def _decode_one(self, leaf: _Leaf, idx: int, page: Any, bufs: list[np.ndarray]) -> pa.Array:
        where = self._where(leaf, idx)
        if page.type_url != PAGE_LAYOUT_URL:
            raise UnsupportedEncodingError(
                f"{where}: page encoding {page.type_url!r} is not a 2.1 PageLayout"
            )
        layout = pb.PageLayout()
        try:
            layout.ParseFromString(page.encoding)
            data = decode_page(layout, bufs, int(page.length))
            if isinstance(data.values, BlobRefs):
                data.values = self._read_blobs(data.values)
            return page_to_arrow(data, leaf.path, where)
        except LanceError as exc:
            msg = str(exc)
            if msg.startswith(self.path):
                raise
            raise type(exc)(f"{where}: {msg}") from exc
        except (ValueError, IndexError, TypeError, KeyError, OverflowError, pa.ArrowException) as exc:
            raise CorruptFileError(f"{where}: malformed page ({type(exc).__name__}: {exc})") from exc
        except Exception as exc:  # protobuf DecodeError and other parse failures
            raise CorruptFileError(f"{where}: malformed page ({type(exc).__name__}: {exc})") from exc

    def _read_blobs(self, refs: BlobRefs) -> Var:
        sizes = refs.sizes
        lens = np.where(sizes > 0, sizes, 0)
        offsets = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        keep = np.flatnonzero(lens > 0)
        if not len(keep):
            return Var(offsets, np.zeros(0, np.uint8))
        blob, pos = self.source.gather(refs.positions[keep], lens[keep], "blob")
        total = int(offsets[-1])
        idx = np.repeat(pos - offsets[keep], lens[keep]) + np.arange(total, dtype=np.int64)
        return Var(offsets, blob[idx])

    # ------------------------------------------------------------------ public

    def _leaf_range(self, leaf: _Leaf, start: int, stop: int) -> pa.Array:
        starts = leaf.page_starts
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop, side="left"))
        pages = list(range(max(first, 0), min(last, len(leaf.column.pages))))
        if len(pages) == 1:
            partial = self._small_range(
                leaf, pages[0], start - int(starts[pages[0]]), stop - int(starts[pages[0]]), start
            )
            if partial is not None:
                with self._lock:
                    self._next_start[leaf.column.index] = stop
                return partial
        with self._lock:
            forward = self._next_start.get(leaf.column.index) == start
        arrays = self._decode_pages(leaf, pages, forward=forward)
        with self._lock:
            self._next_start[leaf.column.index] = stop
        if not arrays:
            return pa.array([], type=leaf.path[0].type)
        if len(arrays) == 1:
            return arrays[0].slice(start - int(starts[pages[0]]), stop - start)
        # slice before concatenating: only the requested rows of each page are copied
        parts = [
            arr.slice(
                max(start - int(starts[p]), 0), min(stop, int(starts[p + 1])) - max(start, int(starts[p]))
            )
            for p, arr in zip(pages, arrays, strict=True)
        ]
        return pa.concat_arrays(parts)

    def _small_range(self, leaf: _Leaf, p: int, lo: int, hi: int, start: int) -> pa.Array | None:
        """A few rows of a big page: decode just their mini-block chunks.

        A page read this way a few times is decoded whole (and cached) instead, so sequential
        small batches do not keep re-reading chunk metadata.
        """
        length = int(leaf.column.pages[p].length)
        if (hi - lo) * 8 > length or hi - lo > _PARTIAL_MAX_ROWS:
            return None
        key = (leaf.column.index, p)
        if self._cached(key) is not None:
            return None
        with self._lock:
            if self._next_start.get(key[0]) == start:
                return None  # a sequential scan will read the rest of the page: decode it whole
            touches = self._partial_reads.get(key, 0) + 1
            self._partial_reads[key] = touches
        if touches > _PARTIAL_READS_BEFORE_CACHING:
            return None
        part = self._page_take(leaf, p, np.arange(lo, hi, dtype=np.int64))
        if part is None:
            return None
        arr, pos = part
        if len(pos) == len(arr) and (len(pos) == 0 or (pos[0] == 0 and bool((np.diff(pos) == 1).all()))):
            return arr
        return arr.take(pa.array(pos))

    def read_range(self, start: int, stop: int) -> pa.RecordBatch:
        """Decode rows ``[start, stop)`` of the projected fields."""
        start = max(0, int(start))
        stop = min(int(stop), self.num_rows)
        stop = max(stop, start)
        columns = []
        fields = []
        for fi in self.projection:
            fields.append(self.schema.field(fi))
        all_leaves = [leaf for leaves in self._leaves for leaf in leaves]
        if stop == start:
            decoded: list[pa.Array] = []
        elif len(all_leaves) > 1 and stop - start >= _PARALLEL_MIN_ROWS and num_threads() > 1:
            # the slowest leaves first (strings: FSST / offsets work), so they do not finish last
            order = sorted(range(len(all_leaves)), key=lambda i: all_leaves[i].cost_rank)
            futures = {i: pool().submit(self._leaf_range, all_leaves[i], start, stop) for i in order}
            decoded = [futures[i].result() for i in range(len(all_leaves))]
        else:
            decoded = [self._leaf_range(leaf, start, stop) for leaf in all_leaves]
        pos = 0
        for field, leaves in zip(fields, self._leaves, strict=True):
            if stop == start:
                columns.append(pa.array([], type=field.type))
            else:
                columns.append(merge(field, decoded[pos : pos + len(leaves)]))
            pos += len(leaves)
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=self.schema.metadata))

    def take(self, indices: np.ndarray) -> pa.RecordBatch:
        """Decode the rows at ``indices`` (any order, repeats allowed)."""
        idx = np.asarray(indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.num_rows):
            raise IndexError(f"{self.path}: row index out of range (file has {self.num_rows} rows)")
        all_leaves = [leaf for leaves in self._leaves for leaf in leaves]
        if len(all_leaves) > 1 and len(idx) >= 1024 and num_threads() > 1:
            results = list(pool().map(lambda leaf: self._leaf_take(leaf, idx), all_leaves))
        else:
            results = [self._leaf_take(leaf, idx) for leaf in all_leaves]
        decoded = {id(leaf): arr for leaf, arr in zip(all_leaves, results, strict=True)}
        columns = []
        fields = []
        for fi, leaves in zip(self.projection, self._leaves, strict=False):
            field = self.schema.field(fi)
            arrays = [decoded[id(leaf)] for leaf in leaves]
            columns.append(merge(field, arrays) if len(idx) else pa.array([], type=field.type))
            fields.append(field)
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=self.schema.metadata))

    def _leaf_take(self, leaf: _Leaf, idx: np.ndarray) -> pa.Array:
        if not len(idx):
            return pa.array([], type=leaf.path[0].type)
        starts = leaf.page_starts
        page_of = np.searchsorted(starts, idx, side="right") - 1
        pages = np.unique(page_of)
        arrays = []
        local = np.empty(len(idx), np.int64)
        base = 0
        for p in pages.tolist():
            sel = page_of == p
            rows = idx[sel] - int(starts[p])
            part = self._page_take(leaf, p, rows)
            if part is None:  # decode the whole page
                arr = self._decode_pages(leaf, [p])[0]
                local[sel] = rows + base
            else:
                arr, pos = part
                local[sel] = pos + base
            arrays.append(arr)
            base += len(arr)
        arr = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        return arr.take(pa.array(local))

    def _page_take(self, leaf: _Leaf, p: int, rows: np.ndarray) -> tuple[pa.Array, np.ndarray] | None:
        """Decode only the mini-block chunks holding ``rows`` (pages without repetition)."""
        if self._cached((leaf.column.index, p)) is not None:
            return None
        page = leaf.column.pages[p]
        if page.type_url != PAGE_LAYOUT_URL or len(page.buffer_offsets) < 2:
            return None
        where = self._where(leaf, p)
        layout = pb.PageLayout()
        try:
            layout.ParseFromString(page.encoding)
        except Exception as exc:
            raise CorruptFileError(f"{where}: malformed page encoding ({exc})") from exc
        if layout.WhichOneof("layout") != "mini_block_layout":
            return None
        m = layout.mini_block_layout
        if m.HasField("rep_compression") or page.buffer_sizes[1] < _PARTIAL_MIN_BYTES:
            return None
        try:
            extra = [(page.buffer_offsets[0], page.buffer_sizes[0])]
            if m.HasField("dictionary"):
                extra.append((page.buffer_offsets[2], page.buffer_sizes[2]))
            raw = self.source.read_arrays(extra, "page buffer")
            meta = raw[0]
            counts, sizes = miniblock_plan(m, meta)
            first_row = np.concatenate([[0], np.cumsum(counts)])
            if int(first_row[-1]) != int(page.length):
                raise CorruptFileError(
                    f"chunks hold {int(first_row[-1])} values, page has {page.length} rows"
                )
            chunk_of = np.searchsorted(first_row, rows, side="right") - 1
            chunks = np.unique(chunk_of)
            offs = np.concatenate([[0], np.cumsum(sizes)])
            if int(offs[-1]) > page.buffer_sizes[1]:
                raise CorruptFileError("mini-block chunks run past the end of the data buffer")
            # the chosen chunks, read with few requests (vectorized merging) and packed back to back
            lens = sizes[chunks].astype(np.int64)
            if int(lens.sum()) * _WHOLE_BUFFER_FRACTION >= int(offs[-1]):
                # many chunks: one large read of the data buffer beats thousands of small ones
                whole = self.source.read_arrays([(int(page.buffer_offsets[1]), int(offs[-1]))], "page buffer")[0]
                data = gather_ranges(whole, offs[chunks], lens)
            else:
                blob, at = self.source.gather(int(page.buffer_offsets[1]) + offs[chunks], lens, "page buffer")
                data = gather_ranges(blob, at, lens)
            bufs = [meta, data] + ([raw[1]] if len(raw) > 1 else [])
            sel_counts = counts[chunks]
            sel_base = np.concatenate([[0], np.cumsum(sel_counts)[:-1]])
            pos = rows - first_row[chunk_of] + sel_base[np.searchsorted(chunks, chunk_of)]
            if m.HasField("dictionary"):
                decoded = decode_miniblock_page(m, bufs, int(sel_counts.sum()), (sel_counts, sizes[chunks]))
            else:  # decode just the wanted rows (FSST then only expands those strings)
                decoded = decode_miniblock_page(m, bufs, len(pos), (sel_counts, sizes[chunks]), pos)
                pos = np.arange(len(pos), dtype=np.int64)
            arr = page_to_arrow(decoded, leaf.path, where)
        except LanceError as exc:
            msg = str(exc)
            if msg.startswith(self.path):
                raise
            raise type(exc)(f"{where}: {msg}") from exc
        except Exception as exc:
            raise CorruptFileError(f"{where}: malformed page ({type(exc).__name__}: {exc})") from exc
        return arr, pos


def make_decoder(meta: Any, source: Any, schema: pa.Schema, projection: Sequence[int]) -> Decoder21:
    """Factory matching the container's decoder protocol."""
    return Decoder21(meta, source, schema, projection)
