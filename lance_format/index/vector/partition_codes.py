"""Row ids and code rows of a vector segment's partitions, read from ``auxiliary.idx`` on first use.

A search probes a few partitions of a segment; :class:`PartitionCodes` reads theirs when a query
first reaches them (``read_segment(lazy=True)`` in :mod:`.layout` hands it the unfilled arrays).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import distinct, matrix, numbers
from lance_format.errors import CorruptFileError

ROW_ID = "_rowid"
U64 = npt.NDArray[np.uint64]


def fsl_matrix(col: pa.ChunkedArray | pa.Array, where: str) -> npt.NDArray[Any]:
    """A fixed-size-list column of codes or vectors as ``[rows, width]``.

    Raises:
        CorruptFileError: null vectors (index storage has none).
    """
    out = matrix(col)  # from the buffers: no pandas import on a first query
    if out is None:
        raise CorruptFileError(f"{where}: null vectors in index storage")
    return out


class PartitionCodes:
    """Reads the row ids and code rows of a segment's partitions from ``auxiliary.idx`` when first asked for.

    The row id and storage arrays of a lazily read segment are allocated unfilled (untouched
    pages cost no memory); each partition's rows are one contiguous row range of the file (the
    IVF lengths), read, decoded and written in place once, so a first query decodes only the
    partitions it probes, where pylance too loads only the partitions it searches. Row ids alone
    can be read for partitions a search only counts (:meth:`load_ids`).
    """

    def __init__(self, reader: Any, column: str, lengths: npt.NDArray[np.uint32], out: npt.NDArray[Any],
                 decode: Callable[[npt.NDArray[Any]], npt.NDArray[Any]], row_ids: U64,
                 id_reader: Callable[[], Any], *,
                 put: Callable[[pa.Table, list[tuple[int, int, int]]], None] | None = None) -> None:
        self._reader = reader  # the row id and code columns
        self._id_reader = id_reader  # opens a reader of the row id column alone
        self._ids_only: Any = None
        self._column = column
        self._starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)[:-1]]).astype(np.int64).tolist()
        self._lengths = lengths.astype(np.int64).tolist()
        self._total = int(sum(self._lengths))
        #: The partition starting at each first row (partitions of no rows never start a run).
        self._part_at = {lo: p for p, (lo, n) in enumerate(zip(self._starts, self._lengths, strict=True)) if n}
        self._out = out
        self._row_ids = row_ids
        self._decode = decode
        #: Stores several columns' rows itself (RaBitQ): called per read range with the table and
        #: its partitions as ``(first row in the table, first row in the segment, rows)``.
        self._put = put
        self._loaded = np.zeros(lengths.size, bool)
        self._ids = np.zeros(lengths.size, bool)
        self._lock = threading.Lock()  # one reader per segment; queries may run in threads

    @property
    def loaded(self) -> npt.NDArray[np.bool_]:
        """Which partitions' code rows (and row ids) are read (a copy)."""
        return self._loaded.copy()

    @property
    def row_ids(self) -> U64:
        """The segment's row id array, filled per partition as it is read."""
        return self._row_ids

    @property
    def ids_loaded(self) -> npt.NDArray[np.bool_]:
        """Which partitions' row ids are read (a copy)."""
        return self._ids.copy()

    def _runs(self, reader: Any, todo: list[int]) -> list[tuple[int, pa.Table]]:
        """The rows of the partitions ``todo`` (ascending), one range read per run of adjacent
        partitions: ``(first row, table)`` each. Range reads decode the mini-block chunks of the
        range in bulk, 2-5x less CPU than a take of the same rows (measured on pylance's 100k x
        128 IVF_PQ and IVF_HNSW_SQ files, 1 to 64 of 64 partitions), and read the same pages."""
        runs: list[list[int]] = []
        for p in todo:
            lo, n = self._starts[p], self._lengths[p]
            if runs and runs[-1][1] == lo:
                runs[-1][1] = lo + n
            else:
                runs.append([lo, lo + n])
        return [(lo, reader.read_range(lo, hi - lo, batch_size=hi - lo).to_table()) for lo, hi in runs if hi > lo]

    def load(self, parts: npt.NDArray[np.int64]) -> None:
        """Read the row ids and code rows of the partitions of ``parts`` not read yet.

        Raises:
            CorruptFileError: null code rows in the file.
        """
        if self._loaded[parts].all():
            return
        with self._lock:
            todo = distinct(parts[~self._loaded[parts]]).tolist()
            if 3 * sum(self._lengths[p] for p in todo) >= 2 * self._total:
                # two thirds of the segment or more: every unread partition, in fewer and longer
                # range reads (100k x 128 IVF_PQ, 50 of 64 partitions: ~2x less CPU than 10 runs)
                todo = np.flatnonzero(~self._loaded).tolist()
            for lo, table in self._runs(self._reader, todo):
                self._row_ids[lo:lo + table.num_rows] = numbers(table.column(ROW_ID))
                spans = []
                at = lo
                while at < lo + table.num_rows:  # partition by partition: PQ codes transpose per partition
                    n = self._lengths[self._part_at[at]]
                    spans.append((at - lo, at, n))
                    at += n
                if self._put is not None:
                    self._put(table, spans)
                    continue
                got = fsl_matrix(table.column(self._column), self._reader.path)
                for off, at, n in spans:
                    self._out[at:at + n] = self._decode(got[off:off + n])
            self._ids[todo] = True
            self._loaded[todo] = True  # after the rows: a concurrent reader never sees them early

    def load_ids(self, parts: npt.NDArray[np.int64]) -> None:
        """Read the row ids of the partitions of ``parts`` whose row ids are not read yet."""
        if self._ids[parts].all():
            return
        with self._lock:
            todo = distinct(parts[~self._ids[parts]]).tolist()
            if self._ids_only is None:
                self._ids_only = self._id_reader()
            for lo, table in self._runs(self._ids_only, todo):
                self._row_ids[lo:lo + table.num_rows] = numbers(table.column(ROW_ID))
            self._ids[todo] = True
