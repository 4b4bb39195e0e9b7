"""Row-level writes from Spark: ``merge_insert``, ``update`` and ``delete`` by a DataFrame of keys.

``merge_insert(df, uri, on=["id"], when_matched="update_all", when_not_matched="insert_all")``
does what ``ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all()
.execute(rows)`` does, with the work on the executors:

1. The driver pins the latest version and joins ``df`` with the target's key columns
   (and ``_rowaddr``, read through the ``lance`` source at that version) in Spark.
2. Each task of the join writes its updated and inserted rows as uncommitted fragments
   (moved rows keep their stable row ids and creation versions, as locally) and returns
   them with the row addresses its rows replace or delete.
3. The driver writes the deletion vectors and commits ONE ``Update`` transaction
   (``update_mode`` rewrite_rows, as pylance 14 commits a merge_insert); a retryable
   conflict re-runs the job on the newest version.

The result counts are pylance's ``num_inserted_rows``, ``num_updated_rows`` and
``num_deleted_rows`` (a :class:`~lance_format.evolution.merge_insert.MergeInsertResult`).
Rows are written in the join's order, so the table equals the local verb's result as a
set of rows (the fragment layout differs). A conditional ``when_matched_update_all`` is
not offered. A task that fails removes the files it wrote; when the job fails after other
tasks finished, their files stay unreferenced until ``cleanup_old_versions(delete_unverified=True)``
(``mapInArrow`` has no job-abort hook, unlike the data source writer).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lance_format.dataset import LanceDataset
from lance_format.errors import InvalidInputError
from lance_format.evolution import rowops
from lance_format.evolution.merge_insert import MergeInsertResult
from lance_format.projection import row_versions
from lance_format.spark.types import convert_column
from lance_format.table.discard import discard_keys
from lance_format.table.models import FragmentMetadata

_T = "__lt_"          # prefix of the target's columns in the join
_SRC = "__ls_present"  # a non-null marker on every source row
_ADDR, _ROWID = _T + "_rowaddr", _T + "_rowid"


@dataclass(frozen=True)
class MergePlan:
    """What every task needs (shipped with the job)."""

    uri: str
    version: int
    storage: tuple[tuple[str, str], ...]
    on: tuple[str, ...]
    when_matched: str
    insert: bool
    delete_by_source: bool
    source_columns: tuple[str, ...]
    stable: bool


@dataclass(frozen=True)
class TaskResult:
    """One task's fragments, written keys and row addresses (``uint64`` bytes)."""

    fragments: tuple[FragmentMetadata, ...]
    keys: tuple[str, ...]
    updated: bytes
    deleted: bytes
    inserted: int


def _addresses(data: bytes) -> np.ndarray[Any, np.dtype[np.uint64]]:
    return np.frombuffer(data, dtype=np.uint64)


def _new_rows(ds: LanceDataset, plan: MergePlan, joined: pa.Table, mask: np.ndarray[Any, Any],
              from_target: bool) -> pa.Table:
    """Rows of ``joined`` at ``mask`` in the table's schema: source values, the target's where missing."""
    rows = joined.filter(pa.array(mask))
    columns = []
    for field in ds.schema:
        if field.name in plan.source_columns:
            columns.append(convert_column(rows.column(field.name).combine_chunks(), field.type, field.name))
        elif from_target:
            columns.append(convert_column(rows.column(_T + field.name).combine_chunks(), field.type, field.name))
        elif field.nullable:
            columns.append(pa.nulls(rows.num_rows, field.type))
        else:
            raise InvalidInputError(f"merge_insert source lacks non-nullable column {field.name!r}")
    return pa.Table.from_arrays(columns, schema=ds.schema)


def run_task(plan: MergePlan, batches: Iterator[pa.RecordBatch]) -> TaskResult:
    """Write one join partition's new rows; return them with the addresses they replace (on an executor)."""
    ds = LanceDataset(plan.uri, plan.version, storage_options=dict(plan.storage) or None)
    received = [b for b in batches if b.num_rows]
    if not received:  # an empty partition of the join: Spark may hand it no batch at all
        return TaskResult((), (), b"", b"", 0)
    joined = pa.Table.from_batches(received)
    src = joined.column(_SRC).is_valid().to_numpy(zero_copy_only=False)
    tgt = joined.column(_ADDR).is_valid().to_numpy(zero_copy_only=False)
    addr = joined.column(_ADDR).fill_null(0).to_numpy().astype(np.uint64)
    matched = src & tgt
    if plan.when_matched == "fail" and matched.any():
        row = int(np.flatnonzero(matched)[0])
        key = ", ".join(f"{k} = {joined.column(_T + k)[row].as_py()!r}" for k in plan.on)
        raise InvalidInputError(f"{plan.uri}: merge_insert failed (when_matched_fail): a source row matches "
                                f"the target row with {key}")
    update = plan.when_matched == "update_all"
    updated = addr[matched] if update else np.empty(0, np.uint64)
    deleted = addr[matched] if plan.when_matched == "delete" else np.empty(0, np.uint64)
    if plan.delete_by_source:
        deleted = np.concatenate([deleted, addr[tgt & ~src]])
    inserts = src & ~tgt if plan.insert else np.zeros(joined.num_rows, bool)
    parts = []
    kept_ids = created = None
    if update and matched.any():
        order = np.argsort(addr[matched], kind="stable")  # target order, as the local verb writes them
        upd = _new_rows(ds, plan, joined, matched, from_target=True).take(pa.array(order))
        updated = updated[order]
        parts.append(upd)
        if plan.stable:
            kept_ids = joined.column(_ROWID).to_numpy()[matched][order].astype(np.uint64)
            created = row_versions(ds.manifest, updated)
    if inserts.any():
        parts.append(_new_rows(ds, plan, joined, inserts, from_target=False))
    frags: list[FragmentMetadata] = []
    keys: list[str] = []
    if parts:
        try:
            frags, keys = rowops.write_rows(ds, pa.concat_tables(parts), row_ids=kept_ids, created_at=created)
        except BaseException:
            discard_keys(ds._store, keys)
            raise
    return TaskResult(tuple(frags), tuple(keys), updated.tobytes(), deleted.tobytes(), int(inserts.sum()))


def _task_fn(plan: MergePlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"result": pa.array([pickle.dumps(run_task(plan, batches))], pa.binary())})

    return run


def _join(df: Any, ds: LanceDataset, plan: MergePlan, storage: Mapping[str, str] | None) -> Any:
    from pyspark.sql import functions as F

    spark = df.sparkSession
    read = list(plan.on)
    if plan.when_matched == "update_all":  # columns the source lacks keep the target's values
        read += [n for n in ds.schema.names if n not in plan.source_columns and n not in read]
    read += ["_rowaddr"] + (["_rowid"] if plan.stable else [])
    reader = spark.read.format("lance").option("version", str(plan.version)).option("columns", ",".join(read))
    for key, value in (storage or {}).items():
        reader = reader.option(f"storage.{key}", value)
    target = reader.load(plan.uri)
    target = target.select([F.col(f"`{c}`").alias(_T + c) for c in target.columns])
    source = df.select(*[F.col(f"`{c}`") for c in plan.source_columns], F.lit(True).alias(_SRC))
    how = {(True, True): "full_outer", (True, False): "left_outer", (False, True): "right_outer",
           (False, False): "inner"}[(plan.insert, plan.delete_by_source)]
    cond = [source[f"`{k}`"] == target[f"`{_T + k}`"] for k in plan.on]
    return source.join(target, on=cond, how=how)


def merge_insert(df: Any, uri: str, on: str | Sequence[str], *,
                 when_matched: Literal["update_all", "delete", "fail", "do_nothing"] = "do_nothing",
                 when_not_matched: Literal["insert_all", "do_nothing"] = "do_nothing",
                 when_not_matched_by_source: Literal["keep", "delete"] = "keep",
                 storage_options: Mapping[str, str] | None = None,
                 transaction_properties: Mapping[str, str] | None = None,
                 conflict_retries: int = 10) -> MergeInsertResult:
    """Merge the rows of Spark DataFrame ``df`` into the dataset at ``uri`` as one commit.

    Args:
        df: Source rows; its columns must be columns of the dataset and include ``on``.
        uri: Dataset location.
        on: Key column(s).
        when_matched: What a target row matched by a source row becomes.
        when_not_matched: ``insert_all`` inserts source rows without a match.
        when_not_matched_by_source: ``delete`` removes target rows no source row matches.
        storage_options: Backend options for driver and executors.
        transaction_properties: Stored with the commit.
        conflict_retries: Re-runs after a retryable conflict with a concurrent commit.

    Returns:
        pylance's counts of inserted, updated and deleted rows.

    Raises:
        InvalidInputError: no clause, unknown or missing key columns, ambiguous matches,
            or ``when_matched="fail"`` and a match.
    """
    keys = (on,) if isinstance(on, str) else tuple(on)
    if when_matched == "do_nothing" and when_not_matched == "do_nothing" and when_not_matched_by_source == "keep":
        raise InvalidInputError(f"{uri}: merge_insert on {list(keys)} has no clause: it would change nothing")
    ds = LanceDataset(uri, storage_options=storage_options)
    names = ds.schema.names
    columns = tuple(df.columns)
    missing = [k for k in keys if k not in columns or k not in names]
    extra = [c for c in columns if c not in names]
    if missing or extra:
        raise InvalidInputError(f"{uri}: merge_insert source columns {list(columns)}: key(s) {missing} missing, "
                                f"{extra} not in the dataset (columns: {names})")
    field_ids = [f.id for f in ds.lance_schema.fields]
    holder: list[MergeInsertResult] = []

    def attempt(current: LanceDataset) -> Any:
        plan = MergePlan(uri, current.version, tuple(sorted((storage_options or {}).items())), keys, when_matched,
                         when_not_matched == "insert_all", when_not_matched_by_source == "delete", columns,
                         current.has_stable_row_ids and when_matched == "update_all")
        rows = _join(df, current, plan, storage_options).mapInArrow(_task_fn(plan), "result binary").collect()
        results = [pickle.loads(r["result"]) for r in rows]
        written = [k for r in results for k in r.keys]
        try:
            updated = np.concatenate([_addresses(r.updated) for r in results] or [np.empty(0, np.uint64)])
            uniq, counts = np.unique(updated, return_counts=True)
            if (counts > 1).any():
                raise InvalidInputError(f"{uri}: ambiguous merge_insert: several source rows match the target "
                                        f"row at address {int(uniq[np.argmax(counts > 1)])}; each target row may "
                                        "match at most one source row")
            deleted = np.concatenate([_addresses(r.deleted) for r in results] or [np.empty(0, np.uint64)])
            gone = np.unique(np.concatenate([updated, deleted]))
            upd_frags, removed, del_keys = rowops.delete_addresses(current, gone)
        except BaseException:
            discard_keys(current._store, written)
            raise
        changes = rowops.RowChanges(tuple(upd_frags), tuple(removed), tuple(f for r in results for f in r.fragments),
                                    tuple(written + del_keys))
        manifest = rowops.commit_changes(current, changes, fields_for_preserving_frag_bitmap=field_ids,
                                         properties=dict(transaction_properties or {}))
        holder.append(MergeInsertResult(sum(r.inserted for r in results), int(updated.size),
                                        int(np.unique(deleted).size)))
        return manifest

    rowops.with_retries(ds, attempt, conflict_retries)
    return holder[-1]


def update(df: Any, uri: str, on: str | Sequence[str], **kwargs: Any) -> MergeInsertResult:
    """Set the rows of ``uri`` whose keys appear in ``df`` to ``df``'s values (a matched-only merge).

    Keyword arguments as :func:`merge_insert`.
    """
    return merge_insert(df, uri, on, when_matched="update_all", **kwargs)


def delete(df: Any, uri: str, on: str | Sequence[str], **kwargs: Any) -> MergeInsertResult:
    """Delete the rows of ``uri`` whose keys appear in ``df`` (``df`` may hold only the keys).

    Keyword arguments as :func:`merge_insert`.
    """
    return merge_insert(df, uri, on, when_matched="delete", **kwargs)


__all__ = ["MergePlan", "TaskResult", "delete", "merge_insert", "run_task", "update"]
