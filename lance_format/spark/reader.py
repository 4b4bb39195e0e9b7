"""The read side of the ``lance`` data source: planning input partitions and reading them.

Planning (on the driver, once per DataFrame) pins the version, resolves the columns and cuts
the version's fragments into input partitions: one per fragment, or several row ranges when
a fragment has more than ``max_rows_per_partition`` physical rows (without that option: only
a fragment far larger than the median one, or a table's only fragment, is cut — see
:func:`auto_partition_rows`). Each task opens the
pinned version (cached per Python worker), reads its row range ``batch_size`` rows at a
time, drops deleted rows with the fragment's deletion vector, applies the ``filter`` option
and hands Arrow record batches to the JVM — so memory per task is one batch.

What PySpark's Python data source API (4.3) lets a source see, and what this reader does
about the rest:

* **Filters.** ``DataSourceReader.pushFilters`` exists, but Spark keeps the reader planned
  during pushdown on the relation (``PythonScanBuilder.pushFilters`` calls
  ``PythonDataSourceV2.setReadInfo``), and a later query of the *same DataFrame* whose
  filters cannot be serialized (none, an ``OR``, ...) reuses that filtered reader: it
  silently misses rows. No reader state can tell the two queries apart, so this reader
  takes no filters from Spark; Spark evaluates every ``df.filter`` itself (always
  correct, NaN and nulls included). The ``filter`` option filters inside the scan: it is
  part of the DataFrame's own options, so no other query can inherit it.
* **Columns.** There is no column-pruning hook (``SupportsPushDownRequiredColumns``):
  ``select`` never reaches the source. The ``columns`` option, or a user schema
  (``spark.read.schema("id bigint, x double")``), is the projection that is read.
* **Limit and aggregates.** No ``SupportsPushDownLimit`` / ``SupportsPushDownAggregates``:
  ``df.limit(n)`` and ``count()`` read every row. The ``limit`` option reads the first
  ``n`` rows in dataset order (pylance's ``limit``) and
  :func:`lance_format.spark.count_rows` counts from the manifest.
* **Size statistics.** A Python source cannot report a size: ``DataSourceReader`` has no
  statistics method and the JVM's ``PythonScan`` does not implement
  ``SupportsReportStatistics``, so Spark sizes every Lance scan at
  ``spark.sql.defaultSizeInBytes`` (``Long.MaxValue``) and never broadcasts it by itself —
  raising ``spark.sql.autoBroadcastJoinThreshold`` cannot help. For a small table in a
  join, hint it: ``big.join(F.broadcast(small_lance_df), "k")`` plans a
  ``BroadcastHashJoin``. Measured on ``local[2]`` (a 70-row dimension against
  ``spark.range(1e8)``): 11-12 s unhinted on a quiet machine and 53-67 s under load, where
  adaptive execution switches to a broadcast only after shuffling both sides; 1.4-2.4 s hinted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from lance_format.errors import InvalidInputError, SchemaError
from lance_format.spark.options import METADATA_COLUMNS, ReadOptions
from lance_format.spark.types import spark_arrow_schema, spark_schema, to_spark_batch
from lance_format.storage import check_storage_options, open_store, uri_text
from lance_format.table.blobs import bytes_field
from lance_format.table.manifest import Manifest
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import DEFAULT_BATCH_SIZE, ROW_ADDR, ROW_ID, ReadContext
from lance_format.table.scan import Scan, ScanOptions, filter_expression
from lance_format.table.versions import load_manifest

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """Physical rows ``[start, stop)`` of fragment ``fragment_id`` (one Spark input partition).

    Attributes:
        limit: At most this many live rows are read (the ``limit`` option's last partition).
        version: Read the fragment as it is in this version instead of the reader's
            (streaming reads plan partitions of several versions).
    """

    fragment_id: int
    start: int
    stop: int
    limit: int | None = None
    version: int | None = None

    @property
    def value(self) -> tuple[int, int, int]:
        """``(fragment_id, start, stop)`` (what ``InputPartition.value`` shows in plans)."""
        return (self.fragment_id, self.start, self.stop)


@dataclass(frozen=True)
class OrderedPartition(InputPartition):
    """Fragments read one after the other until ``limit`` rows matched (a filtered ``limit``).

    Which fragments hold the first matching rows is only known by reading them, so a
    filtered limit is one task, exactly as pylance's ``to_table(filter=..., limit=n)``.
    """

    fragment_ids: tuple[int, ...]
    limit: int

    @property
    def value(self) -> tuple[tuple[int, ...], int]:
        """``(fragment_ids, limit)``."""
        return (self.fragment_ids, self.limit)


@dataclass(frozen=True)
class SearchPartition(InputPartition):
    """The whole vector search of the ``nearest`` option, in one task.

    The ``k`` nearest rows are a global answer: the index spans fragments and the flat part
    must be merged with it, and PySpark's Python source API has no reduce step after the
    tasks, so one task runs ``to_batches(nearest=...)`` on an executor (the result is ``k``
    rows; the work is the index's probes, not a scan).
    """

    nearest_column: str

    @property
    def value(self) -> str:
        """The searched column (what ``InputPartition.value`` shows in plans)."""
        return self.nearest_column


FRAG_ID = "_fragid"
#: The column a ``nearest`` read adds (pylance's name and type).
DISTANCE = "_distance"


class PinnedVersion:
    """What a read task needs of one dataset version: its manifest and read context.

    Spark's Python workers unpickle the reader for every task, and its planner workers plan
    each query; opening the version through the table layer keeps ``lance_format.dataset``
    (and the index, search and maintenance code it loads, ~0.3-0.5 s of CPU per cold worker)
    out of them. Only tags, timestamps and ``nearest`` searches open a
    :class:`~lance_format.dataset.LanceDataset` (:func:`open_version`).
    """

    def __init__(self, uri: str, version: int | None, storage_options: dict[str, str] | None = None) -> None:
        check_storage_options(storage_options)
        self.uri = uri_text(uri)
        store = open_store(self.uri, storage_options)
        self._ctx = ReadContext(store, load_manifest(store, version), storage_options)

    @property
    def manifest(self) -> Manifest:
        """The pinned manifest (row counts filled in)."""
        return self._ctx.manifest

    @property
    def version(self) -> int:
        """The pinned version number."""
        return self._ctx.manifest.version

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of the version."""
        return self._ctx.arrow_schema


def open_version(opts: ReadOptions, version: int | None = None) -> LanceDataset | PinnedVersion:
    """What planning a read needs of ``version`` (else the one ``opts`` asks for, else the latest).

    A :class:`PinnedVersion` for a version number or the latest; a tag or a timestamp is
    resolved by :func:`open_dataset`.
    """
    if opts.timestamp is None and (version is not None or opts.tag is None):
        return PinnedVersion(opts.uri, version if version is not None else opts.version,
                             dict(opts.storage_options) or None)
    return open_dataset(opts, version)


def open_dataset(opts: ReadOptions, version: int | None = None) -> LanceDataset:
    """Open ``version`` if given, else the version, tag or timestamp ``opts`` asks for, else the latest."""
    # Deferred: the driver plans with a LanceDataset, the workers read through PinnedVersion.
    from lance_format.dataset import LanceDataset
    from lance_format.dataset import dataset as open_lance

    storage = dict(opts.storage_options) or None
    if version is not None:
        return LanceDataset(opts.uri, version, storage_options=storage)
    if opts.timestamp is not None:
        return open_lance(opts.uri, storage_options=storage, asof=opts.timestamp)
    return LanceDataset(opts.uri, opts.version if opts.version is not None else opts.tag,
                        storage_options=storage)


def search_schema(ds: LanceDataset | PinnedVersion, columns: Sequence[str] | None) -> pa.Schema:
    """:func:`projected_schema` plus the ``_distance`` column a ``nearest`` read adds."""
    base = projected_schema(ds, columns)
    return base.append(pa.field(DISTANCE, pa.float32()))


def projected_schema(ds: LanceDataset | PinnedVersion, columns: Sequence[str] | None) -> pa.Schema:
    """Arrow schema of what a scan of ``columns`` yields (all columns when ``None``).

    ``"*"`` stands for every column of the table; the metadata columns ``_rowid``,
    ``_rowaddr`` (int64) and ``_fragid`` (int32) may be named unless the table has columns
    of those names.

    Raises:
        InvalidInputError: a requested column does not exist.
    """
    # blob columns (v1 and v2) reach Spark as binary: their bytes (lance_format.table.blobs)
    schema = pa.schema([bytes_field(f) for f in ds.schema])
    if columns is None:
        return pa.schema(list(schema))
    names: list[str] = []
    for c in columns:
        names.extend(schema.names if c == "*" else [c])
    fields, missing = [], []
    for name in names:
        if name in schema.names:
            fields.append(schema.field(name))
        elif name in METADATA_COLUMNS:
            fields.append(pa.field(name, pa.type_for_alias(METADATA_COLUMNS[name]), nullable=False))
        else:
            missing.append(name)
    if missing:
        raise InvalidInputError(f"{ds.uri}: column(s) {missing} are not in the dataset (columns: {schema.names}; "
                                f"metadata columns: {sorted(METADATA_COLUMNS)})")
    return pa.schema(fields)


def schema_projection(ds: LanceDataset | PinnedVersion, spark_fields: Any, *, search: bool = False) -> pa.Schema:
    """The stored columns named by the Spark schema a query reads (a user schema prunes).

    Raises:
        InvalidInputError: a name is not a column of the dataset.
        SchemaError: a column's Spark type is not the one its Arrow type maps to.
    """
    names = [f.name for f in spark_fields]
    if search and DISTANCE in names and DISTANCE not in ds.schema.names:
        projected = search_schema(ds, [n for n in names if n != DISTANCE])
        names = [n for n in names if n != DISTANCE] + [DISTANCE]
        if [f.name for f in spark_fields] != names:
            raise SchemaError(f"{ds.uri}: a nearest read yields {DISTANCE!r} last; the schema given to "
                              f"spark.read lists it elsewhere")
    else:
        projected = projected_schema(ds, names)
    expected = spark_schema(projected)
    for got, want in zip(spark_fields, expected.fields, strict=True):
        if got.dataType != want.dataType:
            raise SchemaError(f"{ds.uri}: column {got.name!r} is read as {want.dataType.simpleString()}, "
                              f"not {got.dataType.simpleString()} (fix the schema given to spark.read)")
    return projected


@functools.lru_cache(maxsize=8)
def _cached(uri: str, version: int, storage: tuple[tuple[str, str], ...]) -> PinnedVersion:
    # Python workers are reused across tasks: decode each pinned manifest once per worker.
    return PinnedVersion(uri, version, dict(storage) or None)



def _fragments(ds: LanceDataset | PinnedVersion, fragment_ids: Sequence[int] | None) -> list[FragmentMetadata]:
    if fragment_ids is None:
        return list(ds.manifest.fragments)
    frags = []
    for fid in fragment_ids:
        frag = ds.manifest.fragment(fid)
        if frag is None:
            raise InvalidInputError(f"{ds.uri}: version {ds.version} has no fragment {fid} (fragments: "
                                    f"{[f.id for f in ds.manifest.fragments]})")
        frags.append(frag)
    return frags


#: Automatic partitioning (no ``max_rows_per_partition`` option): a fragment is split only when
#: it holds more than this many times the median fragment's rows ...
FAR_LARGER = 4
#: ... or when splitting is needed for this many partitions (a one-fragment table keeps two
#: cores busy) ...
MIN_PARTITIONS = 2
#: ... and never into pieces smaller than this (a task costs ~50-100 ms of CPU on its own).
MIN_PARTITION_ROWS = 1 << 17


def auto_partition_rows(physical_rows: Sequence[int]) -> int:
    """Most physical rows per input partition when the user gave no ``max_rows_per_partition``.

    One partition per fragment whenever that is balanced: each task costs a Python worker
    round trip, a pickled reader and a fragment open, so cutting fragments into ranges costs
    CPU (measured on local[2], 2M rows in 2 fragments, group-by of 2 columns: 8 range
    partitions 2.80 CPU s, one per fragment 2.05, the pylance-backed anchor 2.45). Only a
    fragment far larger than the median one is cut (so one task does not hold the job up),
    and a table of one fragment gets :data:`MIN_PARTITIONS` pieces.
    """
    sizes = sorted(r for r in physical_rows if r)
    if not sizes:
        return 1
    median = sizes[len(sizes) // 2]
    spread = -(-sum(sizes) // MIN_PARTITIONS)
    return max(MIN_PARTITION_ROWS, min(FAR_LARGER * median, spread))


def plan_partitions(ds: LanceDataset | PinnedVersion, max_rows: int | None, *, limit: int | None = None,
                    filtered: bool = False, fragment_ids: Sequence[int] | None = None) -> list[InputPartition]:
    """Input partitions of a scan of ``ds``.

    One partition per fragment, fragments above ``max_rows`` physical rows cut into equal
    ranges (``None``: :func:`auto_partition_rows` decides). Under a ``limit`` without a
    filter, only the leading fragments holding the first ``limit`` live rows (the last one
    capped); with a filter, one :class:`OrderedPartition`.
    """
    frags = [f for f in _fragments(ds, fragment_ids) if f.num_rows]
    if limit is not None:
        if filtered:
            return [OrderedPartition(tuple(f.id for f in frags), limit)] if frags and limit else []
        parts: list[InputPartition] = []
        left = limit
        for frag in frags:
            if left <= 0:
                break
            parts.append(RangePartition(frag.id, 0, frag.physical_rows, min(left, frag.num_rows)))
            left -= frag.num_rows
        return parts
    if max_rows is None:
        max_rows = auto_partition_rows([f.physical_rows for f in frags])
    parts = []
    for frag in frags:
        rows = frag.physical_rows
        pieces = max(1, -(-rows // max_rows))
        step = -(-rows // pieces)  # equal ranges rather than a short tail
        for start in range(0, rows, step):
            parts.append(RangePartition(frag.id, start, min(start + step, rows)))
    return parts


#: Stored bytes a default batch aims at, and its bounds in rows.
TARGET_BATCH_BYTES = 16 << 20
MIN_BATCH_ROWS, MAX_BATCH_ROWS = 1024, 65536


def default_batch_rows(frag: Any, columns: int, total_columns: int) -> int:
    """Rows per batch so one batch holds about ``TARGET_BATCH_BYTES`` of the projected columns.

    Larger batches cost less per row on the way to the JVM (measured: 8x less Python time
    per row at 65,536 than at 8,192 rows on the benchmark table); the byte target keeps
    tables of wide rows (embeddings) bounded per task.
    """
    stored = sum(df.file_size_bytes for df in frag.files)
    if not stored or not frag.physical_rows or any(not df.file_size_bytes for df in frag.files):
        return DEFAULT_BATCH_SIZE  # sizes unknown (older writers): the scanner's default
    per_row = stored / frag.physical_rows * columns / max(1, total_columns)
    return int(min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, TARGET_BATCH_BYTES // max(1.0, per_row))))


def read_range(ds: LanceDataset | PinnedVersion, part: InputPartition, columns: Sequence[str], filter: Any,
               batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
    """Live rows of ``part`` with ``columns``, ``batch_size`` physical rows at a time, filtered.

    ``columns`` may include the metadata columns (see :func:`projected_schema`); they come
    back as the scan computes them (unsigned; the Spark conversion narrows them).

    Raises:
        InvalidInputError: a fragment of the partition is not in the dataset version.
    """
    stored = [c for c in columns if c in ds.schema.names]
    meta = {c for c in columns if c not in ds.schema.names}
    with_id, with_addr = ROW_ID in meta, bool(meta & {ROW_ADDR, FRAG_ID})
    if isinstance(part, OrderedPartition):
        frags = _fragments(ds, part.fragment_ids)
        options = ScanOptions(stored, filter=filter, limit=part.limit, with_row_id=with_id,
                              with_row_address=with_addr, batch_size=batch_size or DEFAULT_BATCH_SIZE,
                              fragments=frags)
    else:
        assert isinstance(part, RangePartition)
        frag = _fragments(ds, [part.fragment_id])[0]
        if batch_size is None:
            batch_size = default_batch_rows(frag, max(1, len(stored)), len(ds.schema.names))
        # The table layer's scan (deletions, filter, projection) restricted to the partition's rows.
        options = ScanOptions(stored, filter=filter, limit=part.limit, with_row_id=with_id,
                              with_row_address=with_addr, batch_size=batch_size, fragments=[frag],
                              row_range=(part.start, part.stop))
    for batch in Scan(ds._ctx, options).to_batches():
        yield batch if not meta else _in_order(batch, columns)


def _search(ds: LanceDataset, opts: ReadOptions, names: Sequence[str]) -> Any:
    """The scanner of a ``nearest`` read: the stored columns asked for, ``_distance`` added by the search."""
    assert opts.nearest is not None
    nearest = dict(opts.nearest)
    prefilter = bool(nearest.pop("prefilter", False))
    stored = [n for n in names if n in ds.schema.names]
    return ds.scanner(stored, filter=opts.filter, limit=opts.limit, nearest=nearest, prefilter=prefilter,
                      with_row_id=ROW_ID in names)


def _in_order(batch: pa.RecordBatch, columns: Sequence[str]) -> pa.RecordBatch:
    # The scan appends _rowid / _rowaddr last; _fragid is the row address's upper half.
    arrays = []
    for name in columns:
        if name == FRAG_ID:
            arrays.append(pc.shift_right(batch.column(ROW_ADDR), 32).cast(pa.uint32()))
        else:
            arrays.append(batch.column(name))
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))


def sql_filter(text: str, table: pa.Schema) -> Any:
    """The ``filter`` option (Lance SQL over any column of the table) as an Arrow expression.

    Raises:
        InvalidInputError: the predicate does not parse or names unknown columns.
    """
    # The table layer's parser: common predicates without importing sqlglot (~0.1-0.3 s a worker).
    return filter_expression(text, table)


class LanceReader(DataSourceReader):
    """Reads one pinned version of a Lance dataset (created by ``LanceDataSource.reader``).

    Args:
        options: Parsed read options.
        spark_fields: The fields of the schema Spark reads (inferred, or the user's: a
            projection).
        version: The version to read (pinned when the DataFrame was created), else the
            options' version, tag or the latest.
        auto_partitions: The user gave no ``max_rows_per_partition``: size partitions with
            :func:`auto_partition_rows` (one per fragment unless unbalanced).
    """

    def __init__(self, options: ReadOptions, spark_fields: Any, version: int | None = None, *,
                 auto_partitions: bool = False) -> None:
        ds = open_dataset(options, version) if options.nearest is not None else open_version(options, version)
        self.options = options
        self.version = ds.version  # pinned: later commits do not change what this DataFrame reads
        self.schema = schema_projection(ds, spark_fields, search=options.nearest is not None)
        if options.filter:
            sql_filter(options.filter, ds.schema)  # a bad predicate fails the query, not a task
        self._partitions: list[InputPartition]
        if options.nearest is not None:
            # Planned on the driver so a bad query (column, dimension, k) fails the query, not a task.
            assert not isinstance(ds, PinnedVersion)
            _search(ds, options, self.schema.names).explain_plan()
            self._partitions = [SearchPartition(str(options.nearest["column"]))]
        else:
            max_rows = None if auto_partitions else options.max_rows_per_partition
            self._partitions = plan_partitions(ds, max_rows, limit=options.limit,
                                               filtered=bool(options.filter), fragment_ids=options.fragment_ids)

    def partitions(self) -> list[InputPartition]:
        """The input partitions (fragments or fragment row ranges) of the pinned version."""
        return list(self._partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Stream the partition's live, filtered rows as Arrow batches in Spark's schema."""
        if isinstance(partition, SearchPartition):
            return self._search(partition)
        if not isinstance(partition, (RangePartition, OrderedPartition)):
            return iter(())  # no rows: Spark substitutes one empty partition
        return self._read(partition)

    def _search(self, partition: SearchPartition) -> Iterator[pa.RecordBatch]:
        opts = self.options
        ds = open_dataset(opts, self.version)  # the index's scanner; one task per query
        target = spark_arrow_schema(self.schema)
        for batch in _search(ds, opts, self.schema.names).to_batches():
            if batch.num_rows:
                yield to_spark_batch(batch.select(self.schema.names), target)

    def _read(self, partition: RangePartition | OrderedPartition) -> Iterator[pa.RecordBatch]:
        opts = self.options
        version = partition.version if isinstance(partition, RangePartition) and partition.version else self.version
        ds = _cached(opts.uri, version, tuple(sorted(opts.storage_options.items())))
        target = spark_arrow_schema(self.schema)
        expr = sql_filter(opts.filter, ds.schema) if opts.filter else None
        for batch in read_range(ds, partition, self.schema.names, expr, opts.batch_size):
            yield to_spark_batch(batch, target)


__all__ = ["LanceReader", "OrderedPartition", "PinnedVersion", "auto_partition_rows", "RangePartition", "SearchPartition", "default_batch_rows",
           "open_dataset", "open_version", "plan_partitions", "projected_schema", "read_range", "schema_projection",
           "search_schema", "sql_filter"]
