"""BITMAP scalar index files, written and read as pylance 14.0.2 does.

Layout (``write_bitmap_index``, ``rust/lance-index/src/scalar/bitmap.rs``): one file
``bitmap_page_lookup.lance`` with a row per distinct value (a null key included):
``keys`` (the column type) and ``bitmaps`` (binary, the key's rows as a serialized
``RowIdTreeMap``, see :mod:`lance_format.index.rowset`). pylance 14.0.2 writes the
keys sorted (null first) and the schema metadata ``lance:index_stats`` =
``{"num_bitmaps": n}``.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import CorruptFileError, LanceError
from lance_format.index.btree import OPEN_READER_BYTES, arrow_ints, descents, truth
from lance_format.index.predicates import ValueQuery, value_mask
from lance_format.index.rowset import RowDomain, decode_row_set, encode_row_set
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile

LOOKUP = "bitmap_page_lookup.lance"
#: Schema metadata our writer adds: the keys are sorted (null first), so a reader can refuse
#: keys a damaged file put out of order. Lance's own writers sort too in 14.0.2, but others
#: write them in hash order, so only files saying so are held to it (pylance ignores the key).
SORTED_KEYS = "lance_format:sorted_keys"
#: Decoded keys' row ids an opened segment keeps for repeated queries (the least recent go first).
MEMO_BYTES = 4 << 20

U64 = npt.NDArray[np.uint64]


def group_rows(values: pa.Array, ids: U64) -> tuple[pa.Array, list[U64]]:
    """Distinct values (sorted, null first) and each one's sorted ids.

    Values are dictionary-encoded first, so only the distinct values are sorted and the
    rows are grouped by an integer sort (sorting millions of strings is far slower).
    """
    if len(values) == 0:
        return values, []
    enc = pc.dictionary_encode(values, null_encoding="mask")
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    dictionary = enc.dictionary
    # rank of each distinct value in sorted order; nulls get -1 so they come first
    by_value = pc.array_sort_indices(dictionary).to_numpy()
    rank = np.empty(len(dictionary), dtype=np.int64)
    rank[by_value] = np.arange(len(dictionary))
    indices = enc.indices
    if indices.null_count:
        codes = indices.fill_null(0).to_numpy(zero_copy_only=False)
        ranked = rank[codes] if len(dictionary) else np.zeros(len(codes), np.int64)  # all null: no ranks
        keyed = np.where(indices.is_null().to_numpy(zero_copy_only=False), -1, ranked)
    else:
        keyed = rank[indices.to_numpy()]
    if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])):  # scan order: a stable sort by key suffices
        # numpy's stable sort is a radix sort for 16-bit keys: the common low-cardinality case
        small = len(dictionary) < 2**15 - 1
        order = np.argsort(keyed.astype(np.int16 if small else np.int64), kind="stable")
    else:
        order = np.lexsort((ids, keyed))  # by key, then by id
    keyed, ids = keyed[order], ids[order]
    starts = np.concatenate(([0], np.flatnonzero(keyed[1:] != keyed[:-1]) + 1))
    stops = np.concatenate((starts[1:], [keyed.size]))
    first = keyed[starts]
    keys = dictionary.take(pa.array(by_value[first[first >= 0]], pa.int64()))  # empty when all null
    if first[0] == -1:  # the null key
        keys = pa.concat_arrays([pa.nulls(1, values.type), keys])
    return keys, [ids[a:b] for a, b in zip(starts, stops, strict=True)]


def write_bitmap(out: IndexDir, keys: pa.Array, rows: list[U64]) -> tuple[IndexFile, ...]:
    """Write the BITMAP file from distinct ``keys`` and each key's sorted row ids."""
    bitmaps = pa.array([encode_row_set(r) for r in rows], pa.binary())
    table = pa.table({"keys": keys, "bitmaps": bitmaps},
                     schema=pa.schema([pa.field("keys", keys.type), pa.field("bitmaps", pa.binary())]))
    meta = {"lance:index_stats": json.dumps({"num_bitmaps": len(keys)}, separators=(",", ":"))}
    if keys_sorted(keys):  # a remap keeps another writer's order, which need not be sorted
        meta[SORTED_KEYS] = "1"
    return (out.write(LOOKUP, table, meta),)


class BitmapIndex:
    """An opened BITMAP segment: keys in memory, a key's bitmap read when a query needs it.

    Opening checks the keys (each once, their count against ``lance:index_stats``); every
    bitmap read is checked as a row set (fragments ascending, valid roaring bitmaps) and,
    given a ``domain``, against the rows the segment covers.

    Args:
        index_dir: The segment's directory.
        fragment_rows: Physical rows of a fragment (``None`` if gone), for whole-fragment entries.
        domain: Ids the segment may hold (unchecked when ``None``).
    """

    def __init__(self, index_dir: IndexDir, fragment_rows: Callable[[int], int | None],
                 domain: RowDomain | None = None):
        probe = index_dir.reader(LOOKUP)
        self._where = probe.path
        if probe.schema.names[:2] != ["keys", "bitmaps"]:
            raise CorruptFileError(f"{probe.path}: expected columns keys, bitmaps")
        btype = probe.schema.field("bitmaps").type
        if not (pa.types.is_binary(btype) or pa.types.is_large_binary(btype)):
            raise CorruptFileError(f"{probe.path}: bitmaps of type {btype}, expected binary")
        self.keys = index_dir.reader(LOOKUP, ["keys"]).read_all(batch_size=1 << 20).to_table() \
            .column("keys").combine_chunks()
        _check_keys(self.keys, probe.schema.metadata or {}, probe.path)
        self._dir = index_dir
        self._fragment_rows = fragment_rows
        self._domain = domain
        self._memo: collections.OrderedDict[int, U64] = collections.OrderedDict()
        self._memo_bytes = 0

    @property
    def nbytes(self) -> int:
        """Memory this object holds (the keys, an open file reader, decoded keys at most), for caches."""
        return int(self.keys.nbytes) + OPEN_READER_BYTES + MEMO_BYTES

    @property
    def path(self) -> str:
        """URI of the segment's file (``bitmap_page_lookup.lance``)."""
        return self._where

    @property
    def num_bitmaps(self) -> int:
        """Distinct keys (a null key included)."""
        return len(self.keys)

    def _rows(self, which: npt.NDArray[np.int64]) -> list[U64]:
        # Keys asked before come from the decoded-rows memo: a long-lived process repeats queries,
        # and reading and decoding a key's bitmap costs more than the rest of such a query.
        keys = which.tolist()
        found = {k: self._memo[k] for k in keys if k in self._memo}  # before new keys may evict them
        for k in found:
            self._memo.move_to_end(k)  # least recently asked goes first
        todo = [k for k in dict.fromkeys(keys) if k not in found]
        if todo:
            # A reader per read: this object may live on in the session's cache, and a reader keeps
            # decoded file pages for later reads.
            reader = self._dir.reader(LOOKUP, ["bitmaps"])
            blobs = reader.take_rows(np.array(todo, np.int64), batch_size=1 << 20).to_table().column("bitmaps")
            if blobs.null_count:
                raise CorruptFileError(f"{self._where}: a null bitmap among keys {todo[:8]}")
            fresh = {i: decode_row_set(b, self._fragment_rows, where=f"{self._where} key {int(i)}",
                                       domain=self._domain)
                     for i, b in zip(todo, blobs.to_pylist(), strict=True)}
            self._remember(fresh)
            found.update(fresh)
        return [found[k] for k in keys]

    def _remember(self, fresh: dict[int, U64]) -> None:
        """Keep decoded keys within :data:`MEMO_BYTES` (the oldest go first)."""
        for k, rows in fresh.items():
            if rows.nbytes > MEMO_BYTES or k in self._memo:
                continue
            rows.setflags(write=False)  # handed to callers: shared, so read-only
            self._memo[k] = rows
            self._memo_bytes += rows.nbytes
        while self._memo_bytes > MEMO_BYTES:
            _, old = self._memo.popitem(last=False)
            self._memo_bytes -= old.nbytes

    def key_rows(self, which: npt.NDArray[np.int64]) -> list[U64]:
        """The ids of the keys at positions ``which``, each sorted (checked as :meth:`search_values` does).

        For callers combining bitmaps themselves: a LABEL_LIST row is under several keys.
        """
        return self._rows(which) if which.size else []

    def search(self, query: ValueQuery) -> U64:
        """Ids matching ``query``, sorted and unique."""
        return self.search_values(query)[0]

    def search_values(self, query: ValueQuery) -> tuple[U64, pa.Array]:
        """:meth:`search` with each id's key (aligned; dictionary-encoded over the keys).

        Raises:
            CorruptFileError: a bitmap is malformed, two keys hold the same row, or (with a
                ``domain``) a row is not one the segment covers.
        """
        hits = np.flatnonzero(truth(value_mask(self.keys, query)))  # to_numpy would import pandas
        if hits.size == 0:
            return np.empty(0, np.uint64), pa.nulls(0, self.keys.type)
        parts = self._rows(hits)
        counts = np.array([p.size for p in parts], dtype=np.int64)
        # each row's key as an index into the keys: a broad query does not copy a key per row
        codes = np.repeat(hits, counts).astype(np.int32)
        keys = pa.DictionaryArray.from_arrays(pa.Array.from_buffers(pa.int32(), codes.size, [None, pa.py_buffer(codes)]),
                                              self.keys)
        if len(parts) == 1:
            return parts[0], keys  # one key: a row set is sorted and unique already
        found = np.concatenate(parts)
        order = np.argsort(found, kind="stable")
        ids = found[order]
        if ids.size > 1 and bool((ids[1:] == ids[:-1]).any()):
            raise CorruptFileError(f"{self._where}: a row is in the bitmaps of two keys")
        return ids, keys.take(arrow_ints(order))

    def read_all(self) -> tuple[pa.Array, list[U64]]:
        """Every key with its ids."""
        return self.keys, self._rows(np.arange(len(self.keys)))


def _check_keys(keys: pa.Array, metadata: dict[bytes, bytes], where: str) -> None:
    """Each key once (pylance keeps one bitmap per value), as many as ``lance:index_stats`` says,
    and in order (null first) when the file says its keys are sorted (:data:`SORTED_KEYS`)."""
    if keys.null_count > 1 or len(pc.unique(keys)) != len(keys):
        raise CorruptFileError(f"{where}: the same key appears twice among {len(keys)} keys")
    flag = metadata.get(SORTED_KEYS.encode())
    if flag is not None:
        if flag != b"1":
            raise CorruptFileError(f"{where}: {SORTED_KEYS} is {flag[:20]!r}, expected '1'")
        if not keys_sorted(keys):
            raise CorruptFileError(f"{where}: the keys are not in order, but the file says they are sorted")
    raw = metadata.get(b"lance:index_stats")
    if raw is None:
        return
    try:
        stats = json.loads(raw)
        count = stats["num_bitmaps"] if isinstance(stats, dict) else None
    except (ValueError, KeyError) as exc:
        raise CorruptFileError(f"{where}: unreadable lance:index_stats {raw[:40]!r}") from exc
    if not isinstance(count, int) or isinstance(count, bool) or count != len(keys):
        raise CorruptFileError(f"{where}: lance:index_stats says {count!r} bitmaps but the file holds {len(keys)}")


def keys_sorted(keys: pa.Array) -> bool:
    """Whether ``keys`` are in order: a null (at most one) first, then ascending."""
    if keys.null_count > 1 or (keys.null_count and keys[0].is_valid):
        return False
    return not len(descents(keys.slice(1 if keys.null_count else 0)))


# --- LABEL_LIST -------------------------------------------------------------------------------
#: Schema metadata naming the global buffer that holds the rows whose list is null.
LABEL_LIST_NULLS = "lance:label_list_nulls"


def label_list_rows(lists: pa.Array, ids: U64) -> tuple[pa.Array, list[U64], U64]:
    """Distinct list elements with each one's sorted ids, and the ids of null lists.

    A LABEL_LIST segment is a BITMAP over the elements (a null element is a null key; an
    empty list is in no bitmap) plus the null lists (``LabelListIndex``,
    ``rust/lance-index/src/scalar/label_list.rs``).
    """
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    keys, rows = group_rows(flat, ids[parents])
    rows = [np.unique(r) for r in rows]  # a list may repeat an element
    nulls = np.sort(ids[lists.is_null().to_numpy(zero_copy_only=False)]) if lists.null_count else ids[:0]
    return keys, rows, nulls


def write_label_list(out: IndexDir, keys: pa.Array, rows: list[U64], nulls: U64) -> tuple[IndexFile, ...]:
    """Write a LABEL_LIST file as pylance 14.0.2 does: the BITMAP file + null lists in global buffer 1."""
    bitmaps = pa.array([encode_row_set(r) for r in rows], pa.binary())
    table = pa.table({"keys": keys, "bitmaps": bitmaps},
                     schema=pa.schema([pa.field("keys", keys.type), pa.field("bitmaps", pa.binary())]))
    meta = {LABEL_LIST_NULLS: "1",
            "lance:index_stats": json.dumps({"num_bitmaps": len(keys)}, separators=(",", ":"))}
    if keys_sorted(keys):
        meta[SORTED_KEYS] = "1"
    return (out.write(LOOKUP, table, meta, global_buffers=[encode_row_set(nulls)]),)


def read_label_list_nulls(index_dir: IndexDir, fragment_rows: Callable[[int], int | None],
                          domain: RowDomain | None = None) -> U64:
    """Ids of the rows whose list is null (empty when the file records none)."""
    reader = index_dir.reader(LOOKUP, ["keys"])
    raw = reader.schema.metadata.get(LABEL_LIST_NULLS.encode()) if reader.schema.metadata else None
    if raw is None:
        return np.empty(0, np.uint64)
    try:
        data = reader.read_global_buffer(int(raw))
    except (ValueError, LanceError) as exc:
        raise CorruptFileError(f"{reader.path}: bad {LABEL_LIST_NULLS} global buffer {raw!r}: {exc}") from exc
    return decode_row_set(data, fragment_rows, where=f"{reader.path} null lists", domain=domain)
