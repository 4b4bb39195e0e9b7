"""Public fragment API (pylance's ``lance.fragment``): ``write_fragments``, ``FragmentMetadata``,
``LanceFragment``.

Thin wrappers: the models live in ``lance_format.table.models``, the write pipeline in
``lance_format.table.writing`` and the delete pipeline in ``lance_format.table.delete``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, ObjectNotFoundError, PathEscapeError, SchemaError
from lance_format.evolution.arguments import integer
from lance_format.evolution.take_columns import fragment_positions
from lance_format.file.reader import LanceFileReader
from lance_format.lazy import OnFirstUse
from lance_format.scanner import LanceScanner
from lance_format.schema import LanceSchema
from lance_format.storage import open_store
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata, check_data_path
from lance_format.table.naming import data_file_key
from lance_format.table.scan import filter_expression
from lance_format.table.write_defaults import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
)

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.evolution import fragment_columns as _fragment_columns
    from lance_format.evolution import fragment_ops as _fragment_ops
    from lance_format.evolution import merge_columns as _merge_columns
    from lance_format.evolution import udf as _udf
    from lance_format.evolution.udf import BatchUDF  # noqa: F401 - pylance's lance.fragment.BatchUDF
    from lance_format.table import delete as _delete
    from lance_format.table import writing as _writing
else:  # writes load on first use: reading a fragment (get_fragments, to_table) loads no writer
    _fragment_columns = OnFirstUse("lance_format.evolution.fragment_columns")
    _fragment_ops = OnFirstUse("lance_format.evolution.fragment_ops")
    _merge_columns = OnFirstUse("lance_format.evolution.merge_columns")
    _udf = OnFirstUse("lance_format.evolution.udf")
    _delete = OnFirstUse("lance_format.table.delete")
    _writing = OnFirstUse("lance_format.table.writing")


def __getattr__(name: str) -> Any:
    # pylance's ``lance.fragment.BatchUDF``, loaded on first read
    if name == "BatchUDF":
        return _udf.BatchUDF
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def write_fragments(
    data: Any,
    dataset_uri: Union[str, Path, LanceDataset],
    schema: pa.Schema | None = None,
    *,
    mode: Literal["append", "create", "overwrite"] = "append",
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_storage_version: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    progress: Any = None,
) -> list[FragmentMetadata]:
    """Write data files for ``data`` without committing; returns their fragment metadata.

    Commit the result with ``LanceDataset.commit(uri, LanceOperation.Append(frags),
    read_version=...)`` (or ``Overwrite`` for a new dataset). With ``mode="append"``
    on an existing dataset the data must match its schema and the files carry its
    field ids; otherwise field ids are assigned from 0.

    Args:
        data: Same inputs as :func:`lance_format.write_dataset` (streamed).
        dataset_uri: Dataset location (or dataset); it need not exist yet.
        schema: Schema to cast the input to.
        mode: ``"append"`` uses the table's schema and field ids; ``"create"`` /
            ``"overwrite"`` assign new ids (commit with ``LanceOperation.Overwrite``).
        max_rows_per_file: Rows per data file; each file becomes one fragment.
        max_rows_per_group: Rows handed to the file writer at a time.
        max_bytes_per_file: Soft cap on a data file's size.
        data_storage_version: Lance file version (default: the table's, else the library default).
        storage_options: Backend options.
        data_cache_bytes: As :func:`lance_format.write_dataset`'s (where ``max_bytes_per_file``
            sees bytes written).
        max_page_bytes: Passed to the file writer.
        progress: A ``lance_format.progress.FragmentWriteProgress``, called as ``write_dataset`` calls it.

    Returns:
        Uncommitted fragments with id 0 (ids are assigned at commit).

    Raises:
        SchemaError: appending data with an incompatible schema.
    """
    if not isinstance(dataset_uri, (str, Path)):  # an open dataset: its store (a memory:// one is its own)
        store = dataset_uri._store if storage_options is None else open_store(dataset_uri.uri, storage_options)
    else:
        store = open_store(str(dataset_uri), storage_options)
    effective = "overwrite" if mode == "create" else mode
    target, batches, data_schema, _full, _read_version, version = _writing.prepare_write(
        data, store, schema=schema, mode=effective, data_storage_version=data_storage_version)
    return _writing.write_input_files(store, target, batches, data_schema, max_rows_per_file=max_rows_per_file,
                             max_rows_per_group=max_rows_per_group, max_bytes_per_file=max_bytes_per_file,
                             data_storage_version=version, max_page_bytes=max_page_bytes, progress=progress,
                             data_cache_bytes=data_cache_bytes, from_python=True)


class LanceFragment:
    """One fragment of a dataset version."""

    def __init__(self, dataset: LanceDataset, fragment: FragmentMetadata):
        self._ds = dataset
        self._meta = fragment

    def __repr__(self) -> str:
        return f"LanceFragment(id={self._meta.id}, physical_rows={self._meta.physical_rows})"

    @staticmethod
    def create(
        dataset_uri: Union[str, Path, LanceDataset],
        data: Any,
        fragment_id: int | None = None,
        schema: pa.Schema | None = None,
        *,
        mode: Literal["append", "create", "overwrite"] = "append",
        max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
        data_storage_version: str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> FragmentMetadata:
        """Write ``data`` as one uncommitted fragment (one data file) and return its metadata.

        As in pylance, the fragment id is only a placeholder: commits assign ids.

        Raises:
            InvalidInputError: if ``data`` is empty.
        """
        frags = write_fragments(data, dataset_uri, schema, mode=mode, max_rows_per_file=2**62,
                                max_rows_per_group=max_rows_per_group,
                                data_storage_version=data_storage_version, storage_options=storage_options)
        if not frags:
            raise InvalidInputError("LanceFragment.create: no rows to write")
        return frags[0].with_id(fragment_id or 0)

    @staticmethod
    def create_from_file(filename: str, dataset: LanceDataset, fragment_id: int) -> FragmentMetadata:
        """Describe a data file already in the dataset's ``data/`` directory as an uncommitted fragment.

        Commit the result with ``LanceOperation.Append`` (or ``Overwrite``). The file must hold
        exactly the dataset's columns (same order and types); its rows become the fragment's
        physical rows and its columns get the dataset's field ids.

        Args:
            filename: The file's name relative to ``data/`` (as ``DataFile.path`` records it).
            dataset: The dataset the fragment will belong to.
            fragment_id: Id recorded in the metadata (commits of an Append assign their own).

        Returns:
            The fragment's metadata, not yet committed.

        Raises:
            ObjectNotFoundError: no such file under ``data/``, or ``filename`` climbs out of it
                (an ``OSError``, as pylance's).
            SchemaError: the file's columns differ from the dataset's (an ``OSError`` too).
        """
        try:
            path = check_data_path(str(filename), "LanceFragment.create_from_file")
        except PathEscapeError as exc:
            # pylance escapes the name into data/ and reports it missing (an OSError): so do we.
            raise ObjectNotFoundError(f"{exc}: no such data file under data/") from None
        reader = LanceFileReader(store=dataset._store, key=data_file_key(path))
        ds_schema = dataset.lance_schema
        try:
            # pylance wants every field (even a nullable one), in the dataset's order.
            ds_schema.check_compatible(reader.schema, allow_missing_nullable=False, ignore_order=False)
        except SchemaError as exc:
            raise SchemaError(f"LanceFragment.create_from_file: data/{path} does not match the "
                              f"dataset schema: {exc}") from None
        file_schema = LanceSchema.from_arrow(reader.schema).with_ids_like(ds_schema)
        major, minor = reader.file_version
        # The fields that own a column, as pylance's writer records them. (pylance 14.0.2's
        # create_from_file lists every field id instead, which its own commit then refuses for
        # nested 2.1+ files: more ids than columns.)
        fields = [f.id for f in file_schema.column_fields((major, minor))]
        columns = list(range(len(fields)))
        # pylance leaves the size unrecorded here; readers look it up when they open the file.
        data_file = DataFile(path, tuple(fields), tuple(columns), major, minor, None)
        return FragmentMetadata(integer(fragment_id, "fragment_id"), (data_file,), int(reader.num_rows()), None)

    @property
    def fragment_id(self) -> int:
        """Fragment id."""
        return self._meta.id

    @property
    def metadata(self) -> FragmentMetadata:
        """Fragment metadata."""
        return self._meta

    @property
    def physical_rows(self) -> int:
        """Rows in the data files, deleted ones included."""
        return self._meta.physical_rows

    @property
    def num_deletions(self) -> int:
        """Deleted rows."""
        return self._meta.num_deletions

    @property
    def schema(self) -> pa.Schema:
        """Dataset schema."""
        return self._ds.schema

    def data_files(self) -> list[DataFile]:
        """Data files of this fragment."""
        return list(self._meta.files)

    def deletion_file(self) -> str | None:
        """Deletion file key relative to the dataset root, if any."""
        d = self._meta.deletion_file
        return None if d is None else d.path(self._meta.id)

    def scanner(self, columns: Sequence[str] | Mapping[str, str] | None = None,
                filter: str | pc.Expression | None = None, limit: int | None = None, offset: int | None = None,
                *, batch_size: int | None = None, with_row_id: bool = False, with_row_address: bool = False,
                batch_readahead: int = 16, blob_handling: str | None = None, order_by: Sequence[Any] | None = None,
                use_scalar_index: bool | None = None, io_buffer_size: int | None = None,
                late_materialization: Any = None, include_deleted_rows: bool | None = None,
                batch_size_bytes: int | None = None, strict_batch_size: bool | None = None) -> LanceScanner:
        """A scanner restricted to this fragment: ``LanceDataset.scanner``'s options (pylance's keywords;
        ``order_by``: names or ``ColumnOrdering`` values; ``include_deleted_rows`` with ``with_row_id``)."""
        return self._ds.scanner(columns, filter, limit, offset,  # type: ignore[arg-type]  # {name: SQL} works too
                                batch_size=batch_size, fragments=[self._meta], with_row_id=with_row_id, with_row_address=with_row_address, order_by=order_by,
                                batch_readahead=batch_readahead, blob_handling=blob_handling,
                                use_scalar_index=use_scalar_index, io_buffer_size=io_buffer_size,
                                late_materialization=late_materialization,
                                include_deleted_rows=include_deleted_rows, batch_size_bytes=batch_size_bytes,
                                strict_batch_size=strict_batch_size)

    def to_table(self, columns: Sequence[str] | Mapping[str, str] | None = None,
                 filter: str | pc.Expression | None = None, limit: int | None = None, offset: int | None = None,
                 with_row_id: bool = False, with_row_address: bool = False, blob_handling: str | None = None,
                 order_by: Sequence[Any] | None = None, use_scalar_index: bool | None = None,
                 io_buffer_size: int | None = None, late_materialization: Any = None,
                 include_deleted_rows: bool | None = None, batch_size_bytes: int | None = None,
                 strict_batch_size: bool | None = None) -> pa.Table:
        """Read this fragment's live rows (sorted by ``order_by`` before ``offset``/``limit``)."""
        return self.scanner(columns, filter, limit, offset, with_row_id=with_row_id,
                            with_row_address=with_row_address, blob_handling=blob_handling, order_by=order_by,
                            use_scalar_index=use_scalar_index, io_buffer_size=io_buffer_size,
                            late_materialization=late_materialization, include_deleted_rows=include_deleted_rows,
                            batch_size_bytes=batch_size_bytes, strict_batch_size=strict_batch_size).to_table()

    def to_pandas(self, columns: Sequence[str] | None = None, filter: str | pc.Expression | None = None,
                  limit: int | None = None, offset: int | None = None, batch_size: int | None = None,
                  with_row_id: bool = False, with_row_address: bool = False, blob_mode: str = "lazy",
                  order_by: Sequence[Any] | None = None, **kwargs: Any) -> Any:
        """This fragment's rows as a pandas DataFrame (``to_table(...).to_pandas(**kwargs)``).

        Blob columns come back as their descriptors (pylance's ``blob_mode="descriptions"``).
        """
        table = self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                             with_row_address=with_row_address, order_by=order_by).to_table()
        return table.to_pandas(**kwargs)

    def take(self, indices: Sequence[int] | pa.Array | Any,
             columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """Rows at this fragment's live positions ``indices`` (pylance's ``LanceFragment.take``)."""
        return self._ds.take(fragment_positions(self._ds, self._meta.id, self._meta.num_rows, indices), columns)

    def to_batches(self, columns: Sequence[str] | Mapping[str, str] | None = None,
                   filter: str | pc.Expression | None = None, batch_size: int | None = None, *,
                   limit: int | None = None, offset: int | None = None, with_row_id: bool = False,
                   with_row_address: bool = False, batch_readahead: int = 16, blob_handling: str | None = None,
                   order_by: Sequence[Any] | None = None, use_scalar_index: bool | None = None,
                   io_buffer_size: int | None = None, late_materialization: Any = None,
                   include_deleted_rows: bool | None = None, batch_size_bytes: int | None = None,
                   strict_batch_size: bool | None = None) -> Iterator[pa.RecordBatch]:
        """Stream this fragment's live rows (the options of :meth:`scanner`)."""
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address, batch_readahead=batch_readahead,
                            blob_handling=blob_handling, order_by=order_by, use_scalar_index=use_scalar_index,
                            io_buffer_size=io_buffer_size, late_materialization=late_materialization,
                            include_deleted_rows=include_deleted_rows, batch_size_bytes=batch_size_bytes,
                            strict_batch_size=strict_batch_size).to_batches()

    def head(self, num_rows: int) -> pa.Table:
        """First ``num_rows`` live rows."""
        return self.to_table(limit=integer(num_rows, "head(): num_rows"))

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:
        """Live rows (matching ``filter``)."""
        if filter is None:
            return self._meta.num_rows
        return self.scanner(filter=filter).count_rows()

    def merge_columns(self, value_func: Any, columns: Sequence[str] | None = None, batch_size: int | None = None,
                      reader_schema: pa.Schema | None = None) -> tuple[FragmentMetadata, Any]:
        """Compute new columns for this fragment (``{name: SQL}`` or a function / ``batch_udf`` over
        ``columns``) and write them as one data file; nothing is committed (commit every fragment's
        result with ``LanceOperation.Merge(fragments, schema)``, as pylance).

        ``reader_schema`` is accepted for pylance's signature; readers of values are taken by
        ``LanceDataset.add_columns`` (per dataset), not here.

        Returns:
            ``(new fragment metadata, the dataset's new LanceSchema)``.
        """
        return _fragment_columns.merge_fragment_columns(self._ds, self._meta, value_func, columns, batch_size)

    def merge(self, data_obj: Any, left_on: str, right_on: str | None = None,
              schema: pa.Schema | None = None) -> tuple[FragmentMetadata, Any]:
        """Left-join ``data_obj`` onto this fragment and write its other columns as one new data file.

        Nothing is committed: commit every fragment's result with
        ``LanceOperation.Merge(fragments, schema)`` (as in pylance).

        Returns:
            ``(new fragment metadata, the full new LanceSchema)``.
        """

        data = data_obj if schema is None else pa.Table.from_batches(list(data_obj), schema=schema) \
            if not isinstance(data_obj, pa.Table) else data_obj.cast(schema)
        return _merge_columns.merge_fragment(self._ds, self._meta, data, left_on, right_on)

    def update_columns(self, data_obj: Any, left_on: str = "_rowid", right_on: str | None = None
                       ) -> tuple[FragmentMetadata, list[int]]:
        """Rewrite the columns of ``data_obj`` for the rows matched on ``left_on`` = ``right_on``.

        The columns go into one new data file (same field ids; tombstoned in the old
        files). Nothing is committed: commit with ``LanceOperation.Update(updated_fragments=
        [...], fields_modified=ids, update_mode="rewrite_columns")`` (as in pylance).

        Returns:
            ``(new fragment metadata, modified field ids)``.
        """

        return _fragment_ops.update_fragment_columns(self._ds, self._meta, data_obj, left_on, right_on)

    def delete(self, predicate: str | pc.Expression) -> FragmentMetadata | None:
        """Write a deletion file for rows matching ``predicate``; return the new metadata.

        Returns ``None`` when every row is deleted (commit the id in
        ``LanceOperation.Delete.deleted_fragment_ids``). Nothing is committed.
        """
        expr = _delete.require_predicate(filter_expression(predicate, self._ds.schema))
        return _delete.delete_from_fragment(self._ds._ctx, self._meta, expr)[0]


def delete_from_fragment(ds: LanceDataset, frag: FragmentMetadata, expr: pc.Expression
                         ) -> tuple[FragmentMetadata | None, int]:
    """Write the deletion file for rows of ``frag`` matching ``expr`` (nothing is committed).

    See :func:`lance_format.table.delete.delete_from_fragment`.
    """
    return _delete.delete_from_fragment(ds._ctx, frag, expr)


__all__ = ["DataFile", "DeletionFile", "FragmentMetadata", "LanceFragment", "write_fragments"]
