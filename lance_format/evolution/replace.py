"""Replace the rows matching a predicate with new rows, in one commit.

This is what a partition overwrite needs: ``DELETE WHERE partition = x`` and the
append of the new partition data become one ``Update`` transaction (REWRITE_ROWS, the
kind pylance writes for merge_insert), so readers see either the old or the new
partition, never both or neither. Rows are removed through deletion vectors (whole
fragments are dropped when all their rows go); the new rows are new fragments.

The new data is streamed into data files once; a retry after a concurrent
delete/update of the same rows only recomputes the deletion vectors on the newest version.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution import rowops
from lance_format.scanner import apply_filter
from lance_format.table.delete import matching_offsets
from lance_format.table.discard import discard_fragment_files
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.models import FragmentMetadata
from lance_format.table.scan import filter_expression as _filter_expression
from lance_format.table.transaction import COMMIT_MESSAGE_KEY
from lance_format.table.writing import to_batch_stream, write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


@dataclass(frozen=True)
class ReplaceResult:
    """Outcome of :func:`replace_where`.

    Attributes:
        dataset: The dataset at the new version.
        version: The new version number.
        rows_deleted: Rows of the old version that matched the predicate.
        rows_written: Rows added.
        predicate: The predicate as recorded.
    """

    dataset: LanceDataset
    version: int
    rows_deleted: int
    rows_written: int
    predicate: str


def checked_batches(batches: Iterable[pa.RecordBatch], expr: pc.Expression, *, where: str
                    ) -> Iterator[pa.RecordBatch]:
    """Yield ``batches`` unchanged, checking that every row satisfies ``expr``.

    Raises:
        InvalidInputError: naming ``where`` and the number of rows of the first offending
            batch that do not satisfy ``expr`` (null counts as not satisfied).
    """

    for batch in batches:
        if batch.num_rows:
            kept = apply_filter(batch, expr).num_rows
            if kept != batch.num_rows:
                raise InvalidInputError(f"{where}: {batch.num_rows - kept} row(s) of the data do not satisfy "
                                        f"{expr}; every written row must belong to the replaced slice")
        yield batch


def replace_where(ds: LanceDataset, predicate: str | pc.Expression, data: Any, *,
                  conflict_retries: int = 10, transaction_properties: Mapping[str, str] | None = None,
                  commit_message: str | None = None, check_data: bool = True) -> ReplaceResult:
    """Delete the rows of ``ds`` matching ``predicate`` and add ``data``, as one new version.

    ``data`` must have the dataset's columns (any order; types are cast). The handle
    ``ds`` moves to the new version. A concurrent append or a concurrent delete of other
    rows does not conflict; a concurrent delete/update of the same rows recomputes the
    deletions on the newest version (up to ``conflict_retries`` times).

    Args:
        ds: The dataset (its checked-out version is the read version).
        predicate: SQL predicate or pyarrow expression selecting the rows to replace.
        data: Anything :func:`lance_format.write_dataset` accepts (streamed); may be empty.
        conflict_retries: Re-runs after retryable commit conflicts.
        transaction_properties: Stored with the transaction.
        commit_message: Stored as the commit message.
        check_data: Refuse data rows that do not satisfy ``predicate`` (they would not be
            replaced by the next ``replace_where`` with the same predicate).

    Returns:
        A :class:`ReplaceResult`.

    Raises:
        InvalidInputError: for a bad predicate, or (``check_data``) rows outside it.
        SchemaError: if ``data`` lacks dataset columns or has extra ones.
        CommitConflictError: for an incompatible concurrent commit. Nothing written by
            this call is left behind.
    """

    expr = _filter_expression(predicate, ds.schema)
    if expr is None:
        raise InvalidInputError("replace_where() needs a predicate")
    check_feature_flags(ds.manifest, ds._store.uri(""), for_write=True)
    schema, batches = to_batch_stream(data)
    names = ds.schema.names
    missing = [n for n in names if n not in schema.names]
    extra = [n for n in schema.names if n not in names]
    if missing or extra:
        raise SchemaError(f"{ds.uri}: replace_where data must have the dataset's columns {names} "
                          f"(missing {missing}, unexpected {extra})")
    stream: Iterable[pa.RecordBatch] = batches
    if check_data:
        stream = checked_batches(batches, expr, where=ds.uri)
    frags = write_fragment_files(ds._store, ds.schema, iter(stream), ds.lance_schema,
                                 max_rows_per_file=rowops.MAX_ROWS_PER_FILE,
                                 data_storage_version=ds.data_storage_version)
    props = dict(transaction_properties or {})
    if commit_message is not None:
        props[COMMIT_MESSAGE_KEY] = commit_message
    return replace_with_fragments(ds, expr, frags, conflict_retries=conflict_retries, transaction_properties=props,
                                  predicate_text=predicate if isinstance(predicate, str) else str(predicate))


def replace_with_fragments(ds: LanceDataset, expr: pc.Expression, fragments: Sequence[FragmentMetadata], *,
                           conflict_retries: int = 10, transaction_properties: Mapping[str, str] | None = None,
                           predicate_text: str | None = None) -> ReplaceResult:
    """Commit already written ``fragments`` in place of the rows of ``ds`` matching ``expr``.

    The commit half of :func:`replace_where`, for data files written elsewhere (Spark executors).
    One ``Update``: deletion vectors for the matching rows plus the new fragments. A retry after
    a concurrent delete/update of the same rows recomputes only the deletions on the newest
    version; the data files serve every attempt. The handle ``ds`` moves to the new version.

    Raises:
        CommitConflictError: for an incompatible concurrent commit; the fragments' data files
            are deleted then, as nothing references them.
    """

    props = dict(transaction_properties or {})

    def attempt(current: LanceDataset) -> tuple[Manifest, int]:
        parts = [(np.uint64(fid) << np.uint64(32)) | offs.astype(np.uint64)
                 for fid, offs in matching_offsets(current._ctx, expr)]
        addresses = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        updated, removed, keys = rowops.delete_addresses(current, addresses)
        # Only the deletion files are this attempt's own: the data files are kept for a retry.
        changes = rowops.RowChanges(tuple(updated), tuple(removed), tuple(fragments), tuple(keys))
        manifest = rowops.commit_changes(current, changes, fields_for_preserving_frag_bitmap=(), properties=props)
        return manifest, int(addresses.size)

    try:
        manifest, deleted = rowops.with_retries(ds, attempt, conflict_retries)
    except BaseException:
        discard_fragment_files(ds._store, fragments)
        raise
    ds._set_manifest(manifest)
    return ReplaceResult(ds, int(manifest.version), deleted, sum(f.physical_rows for f in fragments),
                         predicate_text if predicate_text is not None else str(expr))
