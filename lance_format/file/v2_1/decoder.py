"""Reading 2.1 / 2.2 files: the per-version decoder plugged into ``lance_format.file.reader``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct, pool_empty
from lance_format.errors import CorruptFileError, LanceError, UnsupportedEncodingError
from lance_format.file.v2_0.buffers import gather_ranges
from lance_format.file.v2_1.arrow import merge, page_to_arrow
from lance_format.file.v2_1.blocks import BlobRefs, Var
from lance_format.file.v2_1.layout import PageData, decode_page, repeated_rows
from lance_format.file.v2_1.listrange import ListPlan, build_list_plan, list_plan_buffers, list_rows
from lance_format.file.v2_1.pagerange import (
    MiniPlan,
    TakeRequest,
    build_plan,
    decode_taken,
    fill_rows,
    filled_block,
    fullzip_rows,
    plan_buffers,
    read_rows,
    same_chunks,
    take_request,
)
from lance_format.file.v2_1.repdef import layers_from_pb
from lance_format.file.v2_1.types21 import leaf_paths
from lance_format.file.workers import num_threads, pool, result_or_run, run_all
from lance_format.pbwire import check_varints
from lance_format.session import CacheKind, LruCache

PAGE_LAYOUT_URL = "/lance.encodings21.PageLayout"
#: Decoded pages one reader keeps for later batches of the same pages. Per reader (it dies with
#: the reader), not per session: the pages are only useful to the reader that decoded them.
_CACHE_BYTES = 256 * 1024 * 1024
_PAGE: CacheKind[pa.Array] = CacheKind("decoded_page")
_PARALLEL_MIN_ROWS = 16384
_MAX_PAGE_ROWS = 1 << 32  # sanity bound: a corrupt length must not make us allocate terabytes
_SMALL_READ_ROWS = 32768
#: Most page bytes read in one request for a range of whole pages (see ``_read_whole_pages``).
_JOINT_READ_BYTES = 8 * 1024 * 1024
_T = TypeVar("_T")
_VAR_TYPE_IDS = frozenset(t.id for t in (pa.string(), pa.binary(), pa.large_string(), pa.large_binary()))


def _page_layout(page: Any) -> Any:
    """The page's ``PageLayout``, refused where prost would refuse it (varints over 64 bits)."""
    layout = pb.PageLayout()
    layout.ParseFromString(page.encoding)
    check_varints(pb.PageLayout, page.encoding, "page layout")
    return layout


class _Leaf:
    """One leaf column of a projected field."""

    def __init__(self, column: Any, path: list[pa.Field]) -> None:
        self.column = column
        self.path = path
        # built once per file opened: plain Python over the few pages is cheaper than numpy calls
        starts = [0]
        nbytes = 0
        for p in column.pages:
            starts.append(starts[-1] + p.length)
            nbytes += sum(p.buffer_sizes)
        self.page_starts = np.array(starts, np.int64)
        self.nbytes = nbytes
        is_var = path[-1].type.id in _VAR_TYPE_IDS
        self.cost_rank = (not is_var, -nbytes)  # decode order in parallel reads: lowest first


class Decoder21:
    """Decoder for 2.1 and 2.2 files (leaf columns, structural rep/def page layouts).

    Args:
        meta: Parsed container metadata (``lance_format.file.container.FileMetadata``).
        source: ``ByteSource`` of the file.
        schema: Arrow schema of the whole file.
        projection: Indices of the requested top-level fields, in output order.
    """

    #: String pages are checked for UTF-8 as they are decoded (``arrow.block_to_arrow``), so the
    #: file reader does not check the decoded batches again.
    validates_strings = True

    def __init__(self, meta: Any, source: Any, schema: pa.Schema, projection: Sequence[int]) -> None:
        self.meta = meta
        self.source = source
        self.schema = schema
        self.projection = list(projection)
        self.path = getattr(meta, "path", "<file>")
        version = getattr(meta, "version", (2, 1))
        self.version = f"{version[0]}.{version[1]}"
        self._pages = LruCache(_CACHE_BYTES)
        self._plans: dict[tuple[int, int], MiniPlan | None] = {}
        self._list_plans: dict[tuple[int, int], ListPlan | None] = {}
        #: The range decoded ahead in the background (see ``read_range``), and where the last read stopped.
        self._ahead: tuple[tuple[int, int], Future[pa.RecordBatch]] | None = None
        self._range_stop = -1
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

    @property
    def projected_bytes(self) -> int:
        """Stored page bytes of the projected fields' columns (blob values stored outside the
        pages not included)."""
        return sum(leaf.nbytes for leaves in self._leaves for leaf in leaves)

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

    def _decode_pages(self, leaf: _Leaf, page_ids: list[int], *, forward: bool = False,
                      read: dict[int, list[np.ndarray]] | None = None) -> list[pa.Array]:
        """Decode (or find in the cache) pages of ``leaf``; ``read``: buffers already read, by page."""
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
            if read is None or p not in read:
                page = leaf.column.pages[p]
                ranges.extend(zip(page.buffer_offsets, page.buffer_sizes, strict=False))
        raw = self.source.read_arrays(ranges, "page buffer") if ranges else []
        pos = 0
        for p in missing:
            page = leaf.column.pages[p]
            if read is not None and p in read:
                bufs = read[p]
            else:
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
        return self._guard(leaf, idx, self._decode_layout, leaf, page, bufs, where)

    def _decode_layout(self, leaf: _Leaf, page: Any, bufs: list[np.ndarray], where: str) -> pa.Array:
        data = decode_page(_page_layout(page), bufs, int(page.length))
        if isinstance(data.values, BlobRefs):
            data.values = self._read_blobs(data.values)
        return page_to_arrow(data, leaf.path, where)

    def _read_blobs(self, refs: BlobRefs) -> Var:
        sizes = refs.sizes
        lens = np.where(sizes > 0, sizes, 0)
        offsets = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        keep = np.flatnonzero(lens > 0)
        if not len(keep):
            return Var(offsets, np.zeros(0, np.uint8))
        blob, pos = self.source.gather(refs.positions[keep], lens[keep], "blob")
        return Var(offsets, gather_ranges(blob, pos, lens[keep]))

    def blob_descriptions(self, name: str, rows: np.ndarray) -> pa.StructArray:
        """Stored (position, size) of a projected blob column's values at sorted ``rows`` (nulls null).

        Only the small description pages are read, never the blob bytes.
        """
        names = [self.schema.field(i).name for i in self.projection]
        leaf = self._leaves[names.index(name)][0]
        pos = np.zeros(len(rows), np.uint64)
        size = np.zeros(len(rows), np.uint64)
        valid = np.ones(len(rows), bool)
        page_of = np.searchsorted(leaf.page_starts, rows, side="right") - 1
        for p in distinct(page_of).tolist():
            page = leaf.column.pages[p]
            bufs = self.source.read_arrays(list(zip(page.buffer_offsets, page.buffer_sizes, strict=False)), "page buffer")
            data = decode_page(_page_layout(page), bufs, int(page.length))
            if not isinstance(data.values, BlobRefs):
                raise CorruptFileError(f"{self._where(leaf, p)}: not a blob page")
            at = np.flatnonzero(page_of == p)
            local = rows[at] - leaf.page_starts[p]
            pos[at] = data.values.positions[local]
            size[at] = data.values.sizes[local]
            if data.defs is not None:
                valid[at] = data.defs[local] == 0
        null = None if valid.all() else ~valid
        return pa.StructArray.from_arrays(
            [pa.array(pos, mask=null), pa.array(size, mask=null)], names=["position", "size"],
            mask=None if null is None else pa.array(null),
        )

    # ------------------------------------------------------------------ public

    def _plan(self, leaf: _Leaf, p: int) -> MiniPlan | None:
        """The chunk plan of page ``p`` (cached per reader), None if it cannot be read in parts."""
        key = (leaf.column.index, p)
        with self._lock:
            if key in self._plans:
                return self._plans[key]
        self._load_plans([(leaf, p)])
        with self._lock:
            return self._plans[key]

    def _guard(self, leaf: _Leaf, p: int, fn: Callable[..., _T], *args: Any) -> _T:
        """Run a decode step of page ``p``; errors name the file, column and page."""
        try:
            return fn(*args)
        except LanceError as exc:
            msg = str(exc)
            if msg.startswith(self.path):
                raise
            raise type(exc)(f"{self._where(leaf, p)}: {msg}") from exc
        except Exception as exc:  # numpy / Arrow / protobuf failures on malformed bytes
            raise CorruptFileError(f"{self._where(leaf, p)}: malformed page ({type(exc).__name__}: {exc})") from exc

    def _page_part(self, leaf: _Leaf, p: int, plan: MiniPlan, lo: int, hi: int) -> pa.Array:
        """Rows ``[lo, hi)`` of page ``p``, decoded from just the chunks that hold them."""

        def run() -> pa.Array:
            data, skip = read_rows(plan, self.source, lo, hi)
            arr = page_to_arrow(data, leaf.path, self._where(leaf, p))
            return arr.slice(skip, hi - lo)

        return self._guard(leaf, p, run)

    def _list_part(self, leaf: _Leaf, p: int, lo: int, hi: int) -> pa.Array | None:
        """Rows ``[lo, hi)`` of a list mini-block page from just their chunks; None for other pages."""
        page = leaf.column.pages[p]
        key = (leaf.column.index, p)
        with self._lock:
            known = key in self._list_plans
            plan = self._list_plans.get(key)
        if not known:
            if page.type_url != PAGE_LAYOUT_URL:
                return None
            layout = self._guard(leaf, p, _page_layout, page)
            wanted = self._guard(leaf, p, list_plan_buffers, page, layout)
            if wanted is not None:
                raw = self.source.read_arrays(wanted, "page buffer")
                plan = self._guard(leaf, p, build_list_plan, page, layout, raw)
            with self._lock:
                self._list_plans[key] = plan
        if plan is None:
            return None
        found = plan

        def run() -> pa.Array:
            data, skip = list_rows(found, self.source, lo, hi)
            return page_to_arrow(data, leaf.path, self._where(leaf, p)).slice(skip, hi - lo)

        return self._guard(leaf, p, run)

    def _fullzip_part(self, leaf: _Leaf, p: int, rows: np.ndarray) -> pa.Array | None:
        """Page rows ``rows`` (sorted, unique) of a full-zip page, reading only their bytes."""
        page = leaf.column.pages[p]
        if page.type_url != PAGE_LAYOUT_URL:
            return None

        def run() -> pa.Array | None:
            data = fullzip_rows(page, _page_layout(page), self.source, rows)
            return None if data is None else page_to_arrow(data, leaf.path, self._where(leaf, p))

        return self._guard(leaf, p, run)

    def _repeated_part(self, leaf: _Leaf, p: int, rows: np.ndarray) -> tuple[pa.Array, np.ndarray] | None:
        """Page rows ``rows`` of a list mini-block page, decoded from just their chunks."""
        page = leaf.column.pages[p]
        if page.type_url != PAGE_LAYOUT_URL:
            return None

        def run() -> tuple[pa.Array, np.ndarray] | None:
            got = repeated_rows(page, _page_layout(page), self.source, rows)
            return None if got is None else (page_to_arrow(got[0], leaf.path, self._where(leaf, p)), got[1])

        return self._guard(leaf, p, run)

    @staticmethod
    def _whole_or_sequential(leaf: _Leaf, pages: list[int], start: int, stop: int, forward: bool) -> bool:
        """One whole page, or a small sequential read inside one: these decode the page whole
        (and keep it for the next reads) rather than copy rows out of it piece by piece."""
        if len(pages) != 1:
            return False
        p0, p1 = int(leaf.page_starts[pages[0]]), int(leaf.page_starts[pages[0] + 1])
        if start == p0 and stop == p1:
            return True
        return forward and _small_read(start - p0, stop - p0, p1 - p0)

    def _fixed_range(self, leaf: _Leaf, pages: list[int], start: int, stop: int) -> pa.Array | None:
        """Rows ``[start, stop)`` of raw fixed-width pages, copied once into one output buffer.

        Decoding each page and concatenating the parts would copy a range that spans pages twice;
        here every page writes its rows straight into their place. None when a page is not so.
        """
        plans: list[MiniPlan] = []
        for p in pages:
            plan = None if self._cached((leaf.column.index, p)) is not None else self._plan(leaf, p)
            if plan is None or not plan.row_width:
                return None
            if plans and (
                plan.row_width != plans[0].row_width
                or plan.layout.value_compression != plans[0].layout.value_compression
                or list(plan.layout.layers) != list(plans[0].layout.layers)
            ):
                return None
            plans.append(plan)
        width = plans[0].row_width
        n = stop - start
        out = pool_empty(n * width, np.uint8)
        at = 0
        for p, plan in zip(pages, plans, strict=True):
            p0, p1 = int(leaf.page_starts[p]), int(leaf.page_starts[p + 1])
            lo, hi = max(start, p0) - p0, min(stop, p1) - p0
            self._guard(leaf, p, fill_rows, plan, self.source, lo, hi, out[at : at + (hi - lo) * width])
            at += (hi - lo) * width
        data = PageData(filled_block(plans[0], out, n), None, None, layers_from_pb(plans[0].layout.layers), n)
        return self._guard(leaf, pages[0], page_to_arrow, data, leaf.path, self._where(leaf, pages[0]))

    def _leaf_range(self, leaf: _Leaf, start: int, stop: int,
                    read: dict[int, list[np.ndarray]] | None = None) -> pa.Array:
        starts = leaf.page_starts
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop, side="left"))
        pages = list(range(max(first, 0), min(last, len(leaf.column.pages))))
        with self._lock:
            forward = self._next_start.get(leaf.column.index) == start
            self._next_start[leaf.column.index] = stop
        if pages and not self._whole_or_sequential(leaf, pages, start, stop, forward):
            direct = self._fixed_range(leaf, pages, start, stop)
            if direct is not None:
                return direct
        ready = self._whole_pages_at_once(leaf, pages, start, stop)
        parts = []
        for p in pages:
            p0, p1 = int(starts[p]), int(starts[p + 1])
            lo, hi = max(start, p0) - p0, min(stop, p1) - p0
            if p in ready:
                self._remember((leaf.column.index, p), ready[p], forward=forward)
                parts.append(ready[p])
                continue
            cached = self._cached((leaf.column.index, p))
            if cached is not None:
                parts.append(cached.slice(lo, hi - lo))
                continue
            # part of a page: decode only its chunks when the layout allows, except for small
            # sequential reads that more will follow, which decode the page once and slice it
            # (far less work per read)
            if hi - lo < p1 - p0 and not (forward and _small_read(lo, hi, p1 - p0)):
                plan = self._plan(leaf, p)
                if plan is not None:
                    parts.append(self._page_part(leaf, p, plan, lo, hi))
                    continue
                listed = self._list_part(leaf, p, lo, hi)
                if listed is not None:
                    parts.append(listed)
                    continue
                zipped = self._fullzip_part(leaf, p, np.arange(lo, hi, dtype=np.int64))
                if zipped is not None:
                    parts.append(zipped)
                    continue
            whole = self._decode_pages(leaf, [p], forward=forward, read=read)[0]
            parts.append(whole if hi - lo == p1 - p0 else whole.slice(lo, hi - lo))
        if not parts:
            return pa.array([], type=leaf.path[0].type)
        return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)

    def _whole_pages_at_once(self, leaf: _Leaf, pages: list[int], start: int, stop: int) -> dict[int, pa.Array]:
        """The pages of ``pages`` that ``[start, stop)`` covers whole, decoded side by side.

        A long range of one column (a projection of few columns reads the whole file in one
        window) would otherwise decode its pages one after another on one thread. Each page is
        read and decoded by its own task on the ``pages`` pool: the heavy steps (bit unpacking,
        dictionary ``take``, decompression) are numpy / Arrow calls that release the GIL, so on
        a loaded machine several runnable threads get their share of both cores. Empty when
        fewer than two pages qualify or there is one decode thread; the caller decodes the rest.
        """
        if len(pages) < 2 or num_threads() <= 1:
            return {}
        starts = leaf.page_starts
        whole = [p for p in pages if start <= int(starts[p]) and int(starts[p + 1]) <= stop
                 and self._cached((leaf.column.index, p)) is None]
        if len(whole) < 2:
            return {}
        decoded = run_all([partial(self._read_and_decode, leaf, p) for p in whole], "pages")
        return dict(zip(whole, decoded, strict=True))

    def _read_and_decode(self, leaf: _Leaf, p: int) -> pa.Array:
        page = leaf.column.pages[p]
        ranges = list(zip(page.buffer_offsets, page.buffer_sizes, strict=False))
        bufs = self.source.read_arrays(ranges, "page buffer") if ranges else []
        return self._decode_one(leaf, p, page, bufs)

    def read_range(self, start: int, stop: int) -> pa.RecordBatch:
        """Decode rows ``[start, stop)`` of the projected fields.

        A big read that starts the file or continues the previous one has the next range of the
        same size decoded in the background meanwhile (a scan: the caller's work on this batch
        and the idle moments of the column workers overlap decoding the next one). Errors of
        that read surface when (and only if) the caller asks for that range.
        """
        start = max(0, int(start))
        stop = min(int(stop), self.num_rows)
        stop = max(stop, start)
        with self._lock:
            ahead, self._ahead = self._ahead, None
            sequential = start == 0 or start == self._range_stop
            self._range_stop = stop
        if ahead is not None and ahead[0] == (start, stop):
            # not started yet (the worker not scheduled: a busy machine): decode it here, now
            batch = result_or_run(ahead[1], lambda: self._read_range(start, stop))
        else:
            batch = self._read_range(start, stop)
        n = stop - start
        if sequential and n >= _PARALLEL_MIN_ROWS and stop < self.num_rows and num_threads() > 1:
            nxt = (stop, min(self.num_rows, stop + n))
            future = pool("readahead").submit(self._read_range, *nxt)
            with self._lock:
                self._ahead = (nxt, future)
        return batch

    def _read_range(self, start: int, stop: int) -> pa.RecordBatch:
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
            results = run_all([partial(self._leaf_range, all_leaves[i], start, stop) for i in order])
            by_leaf = dict(zip(order, results, strict=True))
            decoded = [by_leaf[i] for i in range(len(all_leaves))]
        else:
            read = self._read_whole_pages(all_leaves, start, stop)
            decoded = [self._leaf_range(leaf, start, stop, read.get(id(leaf))) for leaf in all_leaves]
        pos = 0
        for field, leaves in zip(fields, self._leaves, strict=True):
            if stop == start:
                columns.append(pa.array([], type=field.type))
            else:
                columns.append(merge(field, decoded[pos : pos + len(leaves)]))
            pos += len(leaves)
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=self.schema.metadata))

    def read_fields(self, positions: list[int]) -> dict[int, pa.Array]:
        """Every row of the projected fields at ``positions`` (indices into the projection).

        For readers of many small files (``joint.read_whole_files``) that decode some fields
        of all files together and the others file by file here.
        """
        out: dict[int, pa.Array] = {}
        if not positions:
            return out
        n = self.num_rows
        leaves = [leaf for pos in positions for leaf in self._leaves[pos]]
        read = self._read_whole_pages(leaves, 0, n) if n else {}
        for pos in positions:
            field = self.schema.field(self.projection[pos])
            if n == 0:
                out[pos] = pa.array([], type=field.type)
                continue
            decoded = [self._leaf_range(leaf, 0, n, read.get(id(leaf))) for leaf in self._leaves[pos]]
            out[pos] = merge(field, decoded)
        return out

    def _read_whole_pages(self, leaves: list[_Leaf], start: int, stop: int) -> dict[int, dict[int, list[np.ndarray]]]:
        """Buffers of the leaves whose one page ``[start, stop)`` is, read together (by ``id(leaf)``).

        A small file read whole (a compaction reads a hundred of them) holds one page per column;
        reading every column's page in one request instead of one request per column saves the
        calls. Bounded by :data:`_JOINT_READ_BYTES`: beyond that, pages are read as decoded.
        """
        if len(leaves) < 2:
            return {}
        picked: list[tuple[_Leaf, int]] = []
        ranges: list[tuple[int, int]] = []
        total = 0
        for leaf in leaves:
            starts = leaf.page_starts
            p = int(np.searchsorted(starts, start, side="right")) - 1
            if not (0 <= p < len(leaf.column.pages)) or int(starts[p]) != start or int(starts[p + 1]) != stop:
                continue
            if self._cached((leaf.column.index, p)) is not None:
                continue
            page = leaf.column.pages[p]
            total += sum(page.buffer_sizes)
            picked.append((leaf, p))
            ranges.extend(zip(page.buffer_offsets, page.buffer_sizes, strict=False))
        if len(picked) < 2 or total > _JOINT_READ_BYTES:
            return {}
        raw = self.source.read_arrays(ranges, "page buffer")
        out: dict[int, dict[int, list[np.ndarray]]] = {}
        pos = 0
        for leaf, p in picked:
            nb = len(leaf.column.pages[p].buffer_offsets)
            out[id(leaf)] = {p: raw[pos : pos + nb]}
            pos += nb
        return out

    def take(self, indices: np.ndarray) -> pa.RecordBatch:
        """Decode the rows at ``indices`` (any order, repeats allowed)."""
        idx = np.asarray(indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.num_rows):
            raise IndexError(f"{self.path}: row index out of range (file has {self.num_rows} rows)")
        all_leaves = [leaf for leaves in self._leaves for leaf in leaves]
        if len(all_leaves) > 1 and len(idx) >= 1024 and num_threads() > 1:
            tasks = [partial(self._take_leaves, [leaf], idx) for leaf in all_leaves]
            results = [r for rs in run_all(tasks) for r in rs]
        else:
            results = self._take_leaves(all_leaves, idx)
        decoded = {id(leaf): arr for leaf, arr in zip(all_leaves, results, strict=True)}
        columns = []
        fields = []
        for fi, leaves in zip(self.projection, self._leaves, strict=False):
            field = self.schema.field(fi)
            arrays = [decoded[id(leaf)] for leaf in leaves]
            columns.append(merge(field, arrays) if len(idx) else pa.array([], type=field.type))
            fields.append(field)
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=self.schema.metadata))

    def _take_leaves(self, leaves: list[_Leaf], idx: np.ndarray) -> list[pa.Array]:
        """Rows ``idx`` of each of ``leaves``.

        A take of scattered rows touches a few chunks in every page of every column. The chunk
        plans of all those pages are read with one request list, then all their chunks with one
        gather, and each page is decoded from where its chunks landed: per page, only the decoding
        is left (one gather per page cost more in Python than its reads cost in the kernel).
        """
        if not len(idx):
            return [pa.array([], type=leaf.path[0].type) for leaf in leaves]
        jobs: list[tuple[int, int, np.ndarray]] = []  # (leaf, page, mask of idx in the page)
        for li, leaf in enumerate(leaves):
            page_of = np.searchsorted(leaf.page_starts, idx, side="right") - 1
            for p in distinct(page_of).tolist():
                jobs.append((li, p, page_of == p))
        # pages decoded whole earlier are sliced from memory: no plan, no read
        cached = [self._cached((leaves[li].column.index, p)) is not None for li, p, _sel in jobs]
        self._load_plans([(leaves[li], p) for (li, p, _sel), c in zip(jobs, cached, strict=True) if not c])
        parts: list[tuple[pa.Array, np.ndarray] | None] = [None] * len(jobs)
        requests: list[tuple[int, MiniPlan, TakeRequest]] = []
        for j, (li, p, sel) in enumerate(jobs):
            leaf = leaves[li]
            rows = idx[sel] - int(leaf.page_starts[p])
            plan = None if cached[j] else self._plan(leaf, p)
            if plan is not None:
                requests.append((j, plan, self._guard(leaf, p, take_request, plan, rows)))
                continue
            if not cached[j]:
                wanted = distinct(rows)
                zipped = self._fullzip_part(leaf, p, wanted)
                if zipped is not None:
                    parts[j] = (zipped, np.searchsorted(wanted, rows))
                    continue
                listed = self._repeated_part(leaf, p, rows)
                if listed is not None:
                    parts[j] = listed
                    continue
            parts[j] = (self._decode_pages(leaf, [p])[0], rows)  # the whole page
        if requests:
            blob, at = self.source.gather(np.concatenate([r.starts for _j, _p, r in requests]),
                                          np.concatenate([r.lens for _j, _p, r in requests]), "page buffer")
            k = 0
            ats = []
            for _j, _plan, req in requests:
                ats.append(at[k : k + len(req.starts)])
                k += len(req.starts)
            for run in _runs(requests, ats, jobs):
                li, p, _sel = jobs[requests[run[0]][0]]
                leaf = leaves[li]
                data = self._guard(leaf, p, decode_taken, [requests[r][1] for r in run],
                                   [requests[r][2] for r in run], blob, [ats[r] for r in run])
                arr = self._guard(leaf, p, page_to_arrow, data, leaf.path)  # the guard names the page
                off = 0
                for r in run:  # each page's rows: a zero-copy slice of the run's values
                    j, _plan, req = requests[r]
                    parts[j] = (arr.slice(off, len(req.rows)), np.arange(len(req.rows), dtype=np.int64))
                    off += len(req.rows)
        out: list[pa.Array] = []
        j = 0
        for li in range(len(leaves)):
            arrays = []
            local = np.empty(len(idx), np.int64)
            base = 0
            while j < len(jobs) and jobs[j][0] == li:
                part = parts[j]
                assert part is not None
                arr, pos = part
                local[jobs[j][2]] = pos + base
                arrays.append(arr)
                base += len(arr)
                j += 1
            arr = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
            if len(local) == len(arr) and bool((local == np.arange(len(local))).all()):
                out.append(arr)  # sorted, distinct rows (the usual take) come out in order already
            else:
                # indices from the buffer: pa.array(ndarray) imports pandas (~0.3 s) on a first take
                out.append(arr.take(pa.Array.from_buffers(pa.int64(), len(local), [None, pa.py_buffer(local)])))
        return out

    def _load_plans(self, pages: list[tuple[_Leaf, int]]) -> None:
        """Build the chunk plans of ``pages`` not planned yet, reading their buffers together."""
        todo: list[tuple[_Leaf, int, Any, Any, list[tuple[int, int]]]] = []
        with self._lock:
            missing = [(leaf, p) for leaf, p in pages if (leaf.column.index, p) not in self._plans]
        for leaf, p in missing:
            page = leaf.column.pages[p]
            wanted = None
            if page.type_url == PAGE_LAYOUT_URL and len(page.buffer_offsets) >= 2:
                layout = self._guard(leaf, p, _page_layout, page)
                wanted = self._guard(leaf, p, plan_buffers, page, layout)
            if wanted is None:
                with self._lock:
                    self._plans[(leaf.column.index, p)] = None
            else:
                todo.append((leaf, p, page, layout, wanted))
        if not todo:
            return
        raw = self.source.read_arrays([r for *_x, wanted in todo for r in wanted], "page buffer")
        k = 0
        for leaf, p, page, layout, wanted in todo:
            plan = self._guard(leaf, p, build_plan, page, layout, raw[k : k + len(wanted)])
            k += len(wanted)
            with self._lock:
                self._plans[(leaf.column.index, p)] = plan


def _runs(requests: list[tuple[int, MiniPlan, TakeRequest]], ats: list[np.ndarray],
          jobs: list[tuple[int, int, np.ndarray]]) -> list[list[int]]:
    """``requests`` grouped into runs that decode as one: consecutive pages of the same leaf
    whose chunks decode alike and were read in page order (see ``pagerange.decode_taken``)."""
    runs: list[list[int]] = []
    last_end = -1
    for r, (j, plan, req) in enumerate(requests):
        at = ats[r]
        first = int(at[0]) + (int(plan.first_byte[req.chunks[0]]) if req.whole else 0)
        if runs:
            prev = runs[-1][-1]
            pj, pplan, _preq = requests[prev]
            if jobs[pj][0] == jobs[j][0] and first >= last_end and same_chunks(pplan, plan):
                runs[-1].append(r)
                last_end = _end(plan, req, at)
                continue
        runs.append([r])
        last_end = _end(plan, req, at)
    return runs


def _end(plan: MiniPlan, req: TakeRequest, at: np.ndarray) -> int:
    """Where the last chunk of a request ends in the gathered bytes."""
    last = int(req.chunks[-1])
    if req.whole:
        return int(at[0]) + int(plan.first_byte[last + 1])
    return int(at[-1]) + int(plan.sizes[last])


def _small_read(lo: int, hi: int, length: int) -> bool:
    """A read of page rows ``[lo, hi)`` small enough that a sequential reader will come back
    for more of the same page."""
    return (hi - lo) * 8 <= length and hi - lo <= _SMALL_READ_ROWS and hi < length


def make_decoder(meta: Any, source: Any, schema: pa.Schema, projection: Sequence[int]) -> Decoder21:
    """Factory matching the container's decoder protocol."""
    return Decoder21(meta, source, schema, projection)
