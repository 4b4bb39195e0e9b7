"""Public fragment API (pylance's ``lance.fragment``): ``write_fragments``, ``FragmentMetadata``,
``LanceFragment``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.scanner import (
    DEFAULT_BATCH_SIZE,
    ROW_ADDR,
    ROW_ID,
    LanceScanner,
    ScanOptions,
    apply_filter,
    referenced_columns,
)
from lance_format.storage import open_store
from lance_format.table import deletion as _deletion
from lance_format.table.fragment import DataFile, DeletionFile, FragmentMetadata
from lance_format.write import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
    prepare_write,
    write_fragment_files,
)

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


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

    Returns:
        Uncommitted fragments with id 0 (ids are assigned at commit).

    Raises:
        SchemaError: appending data with an incompatible schema.
    """
    from lance_format.dataset import LanceDataset

    if isinstance(dataset_uri, LanceDataset):
        storage_options = storage_options or dataset_uri._storage_options
        dataset_uri = dataset_uri.uri
    store = open_store(str(dataset_uri), storage_options)
    effective = "overwrite" if mode == "create" else mode
    target, batches, data_schema, _full, _read_version, version = prepare_write(
        data, store, schema=schema, mode=effective, data_storage_version=data_storage_version)
    return write_fragment_files(store, target, batches, data_schema, max_rows_per_file=max_rows_per_file,
                                max_rows_per_group=max_rows_per_group, max_bytes_per_file=max_bytes_per_file,
                                data_storage_version=version)


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

    def scanner(self, columns: Sequence[str] | None = None, filter: str | pc.Expression | None = None,
                limit: int | None = None, offset: int | None = None, *, with_row_id: bool | None = None,
                with_row_address: bool | None = None, batch_size: int | None = None) -> LanceScanner:
        """A scanner restricted to this fragment."""
        return self._ds.scanner(columns, filter, limit, offset, batch_size=batch_size or DEFAULT_BATCH_SIZE,
                                fragments=[self._meta],
                                with_row_id=with_row_id, with_row_address=with_row_address)

    def to_table(self, columns: Sequence[str] | None = None, filter: str | pc.Expression | None = None,
                 limit: int | None = None, offset: int | None = None, *, with_row_id: bool | None = None,
                 with_row_address: bool | None = None) -> pa.Table:
        """Read this fragment's live rows."""
        return self.scanner(columns, filter, limit, offset, with_row_id=with_row_id,
                            with_row_address=with_row_address).to_table()

    def to_batches(self, columns: Sequence[str] | None = None, filter: str | pc.Expression | None = None,
                   batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """Stream this fragment's live rows."""
        return self.scanner(columns, filter, batch_size=batch_size).to_batches()

    def head(self, num_rows: int) -> pa.Table:
        """First ``num_rows`` live rows."""
        return self.to_table(limit=num_rows)

    def count_rows(self, filter: str | pc.Expression | None = None) -> int:
        """Live rows (matching ``filter``)."""
        if filter is None:
            return self._meta.num_rows
        return self.scanner(filter=filter).count_rows()

    def delete(self, predicate: str | pc.Expression) -> FragmentMetadata | None:
        """Write a deletion file for rows matching ``predicate``; return the new metadata.

        Returns ``None`` when every row is deleted (commit the id in
        ``LanceOperation.Delete.deleted_fragment_ids``). Nothing is committed.
        """
        from lance_format.dataset import _filter_expression

        expr = _filter_expression(predicate, self._ds.schema)
        if expr is None:
            raise InvalidInputError("delete() needs a predicate")
        return delete_from_fragment(self._ds, self._meta, expr)[0]


def delete_from_fragment(ds: LanceDataset, frag: FragmentMetadata, expr: pc.Expression
                         ) -> tuple[FragmentMetadata | None, int]:
    """Write the deletion file for rows of ``frag`` matching ``expr`` (nothing is committed).

    Returns:
        ``(metadata, rows newly deleted)``; metadata is ``None`` when every row is now
        deleted (the fragment is to be dropped) and ``frag`` itself when nothing matched.
    """
    opts = ScanOptions(referenced_columns(expr, ds.schema.names), expr, with_row_address=True, fragments=[frag])
    hits = [b.column(ROW_ADDR).to_numpy() for b in LanceScanner(ds._ctx, opts).to_batches()]
    new = (np.concatenate(hits) & np.uint64(0xFFFFFFFF)).astype(np.uint32) if hits else None
    return apply_deletions(ds, frag, new)


def apply_deletions(ds: LanceDataset, frag: FragmentMetadata, new: npt.NDArray[np.uint32] | None
                    ) -> tuple[FragmentMetadata | None, int]:
    """Add the (live) row offsets ``new`` to ``frag``'s deletion vector and write its file.

    Returns:
        As :func:`delete_from_fragment`.
    """
    if new is None or new.size == 0:
        return frag, 0
    merged = np.union1d(ds._ctx.deleted_offsets(frag), new)
    if merged.size >= frag.physical_rows:
        return None, int(new.size)
    deletion, _key = _deletion.write_fragment_deletions(ds._store, frag.id, ds.version, merged, frag.deletion_file)
    return dataclasses.replace(frag, deletion_file=deletion), int(new.size)


#: Rows (and bytes) gathered before the delete predicate is evaluated once over all
#: of them: one compute plan per chunk instead of one per fragment, bounded memory.
DELETE_CHUNK_ROWS = 1 << 20
DELETE_CHUNK_BYTES = 64 << 20


def matching_offsets(ds: LanceDataset, expr: pc.Expression) -> Iterator[tuple[int, npt.NDArray[np.uint32]]]:
    """Yield ``(fragment id, sorted live row offsets matching expr)`` for fragments with matches.

    Only the columns ``expr`` references are read; deleted rows are skipped. Matches
    of one fragment are yielded together, in fragment order.
    """
    names = ds.schema.names
    text = str(expr)
    opts = ScanOptions(referenced_columns(expr, names), None, with_row_id=ROW_ID in text,
                       with_row_address=True)
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    carry: tuple[int, list[npt.NDArray[np.uint64]]] | None = None

    def flush() -> Iterator[tuple[int, npt.NDArray[np.uint32]]]:
        nonlocal carry
        table = pa.Table.from_batches(pending)
        pending.clear()
        hit = apply_filter(table, expr).column(ROW_ADDR).to_numpy()
        if hit.size == 0:
            return
        frag_ids = (hit >> np.uint64(32)).astype(np.int64)
        cuts = np.flatnonzero(np.diff(frag_ids)) + 1
        for part in np.split(hit, cuts):
            fid = int(part[0] >> np.uint64(32))
            if carry is not None and carry[0] != fid:
                yield carry[0], (np.concatenate(carry[1]) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                carry = None
            if carry is None:
                carry = (fid, [])
            carry[1].append(part)

    for batch in LanceScanner(ds._ctx, opts).to_batches():
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= DELETE_CHUNK_ROWS or size >= DELETE_CHUNK_BYTES:
            yield from flush()
            rows = size = 0
    if pending:
        yield from flush()
    if carry is not None:
        yield carry[0], (np.concatenate(carry[1]) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


__all__ = ["DataFile", "DeletionFile", "FragmentMetadata", "LanceFragment", "write_fragments"]
