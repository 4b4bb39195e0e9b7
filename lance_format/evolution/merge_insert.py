"""``merge_insert``: upsert / insert-if-absent / delete-not-matched in one commit.

Semantics follow pylance 14.0.2 (``rust/lance/src/dataset/write/merge_insert.rs``):

* source and target rows match when every ``on`` column is equal; a null key never
  matches (SQL equality);
* a target row matched by more than one source row is refused when matched rows are
  updated ("ambiguous merge insert");
* an updated row is deleted from its fragment (deletion vector) and written again in a
  new fragment, after it the inserted rows (REWRITE_ROWS ``Update`` transaction, as
  pylance writes it); with stable row ids the updated rows keep their ids;
* columns missing from the source keep the target's values on update and are null on
  insert; a source column must have the table's type (nested types are cast), so a string
  key is never cast into an int64 one;
* keys may be structs (matched field by field); a key named twice is one key;
* the operation commits a version even when nothing changed, as pylance does, but a
  builder without any ``when_`` clause is refused before anything is read.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import CommitConflictError, InvalidInputError
from lance_format.evolution import rowops
from lance_format.evolution.arguments import U32_MAX, integer, string, string_list, string_map
from lance_format.evolution.arguments import schema as check_schema
from lance_format.evolution.merge_plan import MergeClauses, check_source_schema, explain
from lance_format.projection import row_versions
from lance_format.table.read import ROW_ADDR, ROW_ID
from lance_format.table.scan import ScanOptions, apply_filter, referenced_columns
from lance_format.table.scan import filter_expression as _filter_expression
from lance_format.table.writing import to_batch_stream

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

_SRC = "__lf_src_row"
_TGT = "__lf_tgt_row"
_RESULT_KEYS = ("num_inserted_rows", "num_updated_rows", "num_deleted_rows")


@dataclass(frozen=True, eq=False)
class MergeInsertResult(Mapping[str, int]):
    """Counts of a merge_insert; also readable with pylance's dict keys (``result["num_updated_rows"]``)."""

    num_inserted_rows: int
    num_updated_rows: int
    num_deleted_rows: int

    def __getitem__(self, key: str) -> int:
        if key not in _RESULT_KEYS:
            raise KeyError(key)
        return int(getattr(self, key))

    def __iter__(self) -> Iterator[str]:
        return iter(_RESULT_KEYS)

    def __len__(self) -> int:
        return len(_RESULT_KEYS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # equal to dicts, so not hashable


def primary_key(ds: LanceDataset) -> list[str]:
    """The unenforced primary key columns of ``ds`` (empty if none)."""
    return [f.name for f in ds.lance_schema.fields if f.unenforced_primary_key]


class MergeInsertBuilder:
    """Configures and runs one merge_insert (``ds.merge_insert(on)``)."""

    def __init__(self, ds: LanceDataset, on: str | Sequence[str] | None = None):
        keys = _join_keys(on) if on is not None else primary_key(ds)
        if not keys:
            raise InvalidInputError(f"{ds.uri}: merge_insert needs join keys: pass on= or set an unenforced "
                                    "primary key in the schema")
        for k in keys:
            if k not in ds.schema.names:
                raise InvalidInputError(f"{ds.uri}: merge_insert key {k!r} is not a column of {ds.schema.names}")
        self._ds = ds
        self._on = keys
        self._matched: Literal["keep", "update", "delete", "fail"] = "keep"
        self._update_condition: str | None = None
        self._insert = False
        self._delete = False
        self._delete_expr: str | pc.Expression | None = None
        self._retries = 10
        self._retry_timeout = dt.timedelta(seconds=30)  # pylance's default

    def when_matched_update_all(self, condition: str | None = None) -> MergeInsertBuilder:
        """Replace matched target rows by their source rows (only where ``condition`` holds).

        ``condition`` is SQL over ``source.<col>`` and ``target.<col>``.
        """
        if condition is not None:
            string(condition, "merge_insert when_matched_update_all(): condition")
        self._matched, self._update_condition = "update", condition
        return self

    def when_matched_delete(self) -> MergeInsertBuilder:
        """Delete matched target rows (counted in ``num_deleted_rows``)."""
        self._matched, self._update_condition = "delete", None
        return self

    def when_matched_fail(self) -> MergeInsertBuilder:
        """Refuse the whole merge (nothing is committed) if any source row matches a target row."""
        self._matched, self._update_condition = "fail", None
        return self

    def when_not_matched_insert_all(self) -> MergeInsertBuilder:
        """Insert source rows that match no target row."""
        self._insert = True
        return self

    def when_not_matched_by_source_delete(self, expr: str | pc.Expression | None = None) -> MergeInsertBuilder:
        """Delete target rows no source row matches (only those matching ``expr`` if given)."""
        self._delete, self._delete_expr = True, expr
        return self

    def use_index(self, use_index: bool) -> MergeInsertBuilder:
        """Accepted for pylance compatibility; the join here never uses an index."""
        del use_index
        return self

    def conflict_retries(self, max_retries: int) -> MergeInsertBuilder:
        """How often to re-run after a retryable commit conflict (default 10)."""
        self._retries = integer(max_retries, "merge_insert conflict_retries(): max_retries", maximum=U32_MAX)
        return self

    def retry_timeout(self, timeout: dt.timedelta) -> MergeInsertBuilder:
        """Stop retrying after conflicts once ``timeout`` has passed (default 30 s; one attempt always runs).

        Raises:
            InvalidInputError: ``timeout`` is not a ``timedelta`` (a ``TypeError`` too) or is negative.
        """
        if not isinstance(timeout, dt.timedelta):
            raise InvalidInputError(f"merge_insert retry_timeout(): timeout must be a datetime.timedelta, got "
                                    f"{type(timeout).__name__}")
        if timeout < dt.timedelta(0):
            raise InvalidInputError(f"merge_insert retry_timeout(): timeout must not be negative, got {timeout}")
        self._retry_timeout = timeout
        return self

    def _clauses(self) -> MergeClauses:
        return MergeClauses(tuple(self._on), self._matched, self._update_condition, self._insert, self._delete,
                            self._delete_expr)

    def explain_plan(self, schema: pa.Schema | None = None, verbose: bool = False) -> str:
        """The merge's plan for a source of ``schema`` (default: the dataset's), as text; nothing is written.

        The first line is pylance's; the rest describes this library's steps (``evolution/merge_plan.py``).

        Raises:
            InvalidInputError: no ``when_`` clause, or a source schema the merge cannot run on.
        """
        clauses = self._clauses()
        if clauses.changes_nothing:
            raise InvalidInputError(f"{self._ds.uri}: merge_insert on {self._on} is not configured to change the "
                                    "data in any way (no when_ clause)")
        source = check_schema(schema, "merge_insert explain_plan(): schema") or self._ds.schema
        check_source_schema(self._ds.uri, clauses, source, self._ds.schema)
        return explain(self._ds.uri, len(self._ds.manifest.fragments), clauses, source, self._ds.schema,
                       bool(verbose))

    def execute(self, data: Any, *, schema: pa.Schema | None = None,
                transaction_properties: Mapping[str, str] | None = None,
                file_limits: Mapping[str, int] | None = None) -> MergeInsertResult:
        """Run the merge against ``data`` and commit one version; the dataset handle moves to it.

        Args:
            data: Source rows (anything ``write_dataset`` accepts).
            schema: Schema to read ``data`` with.
            transaction_properties: Stored with the commit's transaction (e.g. the Dagster run
                that made it), as ``write_dataset`` stores them.
            file_limits: ``max_rows_per_file`` / ``max_rows_per_group`` / ``max_bytes_per_file``
                of the new data files (our extra; pylance's merge always uses its defaults).

        Raises:
            InvalidInputError: ambiguous matches, missing key columns or unknown columns.
            CommitConflictError: an incompatible concurrent commit (or retries ran out).
        """

        if self._matched == "keep" and not self._insert and not self._delete:
            raise InvalidInputError(f"{self._ds.uri}: merge_insert on {self._on} has no when_ clause "
                                    "(when_matched_update_all, when_not_matched_insert_all, ...): it would "
                                    "change nothing")
        check_schema(schema, "merge_insert execute(): schema")
        limits = _file_limits(file_limits)
        if transaction_properties is not None:
            string_map(transaction_properties, "merge_insert execute(): transaction_properties")
        src_schema, batches = to_batch_stream(data, schema)
        source = pa.Table.from_batches(list(batches), schema=src_schema)
        self._check_source(source)
        holder: list[MergeInsertResult] = []

        props = dict(transaction_properties or {})

        deadline = time.monotonic() + self._retry_timeout.total_seconds()
        attempts = 0

        def attempt(ds: LanceDataset) -> Any:
            nonlocal attempts
            # As pylance: the first attempt always runs; a retry only before retry_timeout has passed.
            if attempts and time.monotonic() >= deadline:
                raise CommitConflictError(f"{ds.uri}: merge_insert on {self._on} gave up after {attempts} "
                                          f"attempt(s): retryable commit conflicts outlasted retry_timeout "
                                          f"({self._retry_timeout})")
            attempts += 1
            manifest, result = self._run(ds, source, props, limits)
            holder.append(result)
            return manifest

        manifest = rowops.with_retries(self._ds, attempt, self._retries)
        self._ds._set_manifest(manifest)
        return holder[-1]

    # -- internals --------------------------------------------------------------------

    def _check_source(self, source: pa.Table) -> None:
        target = self._ds.schema
        names = target.names
        for k in self._on:
            if k not in source.schema.names:
                raise InvalidInputError(f"merge_insert source lacks key column {k!r}")
        extra = [n for n in source.schema.names if n not in names]
        if extra:
            raise InvalidInputError(f"merge_insert source has columns {extra} that the dataset {names} lacks")
        for field in source.schema:
            want = target.field(field.name).type
            # As pylance (the schema check of lance's merge_insert): a column's type must be the
            # table's; a key of another type (a string id for an int64 one) would otherwise be
            # cast, or its values silently become other keys. Nested types may be cast (pylance
            # takes a subset of a struct's fields).
            if not pa.types.is_nested(want) and field.type != want:
                raise InvalidInputError(f"{self._ds.uri}: merge_insert source column {field.name!r} has type "
                                        f"{field.type}, the dataset's has type {want}")

    def _run(self, ds: LanceDataset, source: pa.Table, properties: dict[str, str],
             limits: Mapping[str, int] | None = None) -> tuple[Any, MergeInsertResult]:
        target_schema = ds.schema
        src = _conform_source(source, target_schema)
        src = src.append_column(_SRC, pa.array(np.arange(src.num_rows, dtype=np.int64)))
        update = self._matched == "update"
        need_full = update and (self._update_condition is not None or src.num_columns - 1 < len(target_schema))
        tgt_cols = list(target_schema.names) if need_full else list(self._on)
        if self._delete and self._delete_expr is not None:

            dexpr = _filter_expression(self._delete_expr, target_schema)
            assert dexpr is not None
            tgt_cols += [c for c in referenced_columns(dexpr, target_schema.names) if c not in tgt_cols]
        else:
            dexpr = None
        stable = ds.has_stable_row_ids and update
        opts = ScanOptions(tgt_cols, with_row_id=stable, with_row_address=True, batch_size=rowops.SCAN_BATCH)
        target = rowops.scan_fragments_concurrently(ds, opts)
        target = target.append_column(_TGT, pa.array(np.arange(target.num_rows, dtype=np.int64)))

        pairs = _match(target, src, self._on)
        tgt_i = pairs.column(_TGT).to_numpy()
        src_i = pairs.column(_SRC).to_numpy()
        if self._matched == "fail" and tgt_i.size:
            row = int(tgt_i[0])
            key = ", ".join(f"{k} = {target.column(k)[row].as_py()!r}" for k in self._on)
            raise InvalidInputError(f"{ds.uri}: merge_insert failed (when_matched_fail): a source row matches "
                                    f"the target row with {key}")
        if update and tgt_i.size:
            uniq, counts = np.unique(tgt_i, return_counts=True)
            if (counts > 1).any():
                row = int(uniq[np.argmax(counts > 1)])
                key = ", ".join(f"{k} = {target.column(k)[row].as_py()!r}" for k in self._on)
                raise InvalidInputError(f"{ds.uri}: ambiguous merge_insert: several source rows match the "
                                        f"target row with {key}; each target row may match at most one source row")
        if update and self._update_condition is not None and tgt_i.size:
            keep = _condition(self._update_condition, target, src, tgt_i, src_i, target_schema)
            upd_t, upd_s = tgt_i[keep], src_i[keep]
        elif update:
            upd_t, upd_s = tgt_i, src_i
        else:
            upd_t = upd_s = np.empty(0, dtype=np.int64)
        order = np.argsort(upd_t, kind="stable")  # updated rows keep target order, as pylance
        upd_t, upd_s = upd_t[order], upd_s[order]

        deleted_t = np.unique(tgt_i) if self._matched == "delete" else np.empty(0, dtype=np.int64)
        if self._delete:
            unmatched = np.ones(target.num_rows, dtype=bool)
            unmatched[tgt_i] = False
            if dexpr is not None:
                hit = apply_filter(target.select([c for c in target.column_names if c != ROW_ID]), dexpr)
                flag = np.zeros(target.num_rows, dtype=bool)
                flag[hit.column(_TGT).to_numpy()] = True
                unmatched &= flag
            deleted_t = np.concatenate([deleted_t, np.flatnonzero(unmatched)])

        inserted_s = np.empty(0, dtype=np.int64)
        if self._insert:
            matched_src = np.zeros(src.num_rows, dtype=bool)
            matched_src[src_i] = True
            inserted_s = np.flatnonzero(~matched_src)

        new_rows = _updated_rows(ds, src, target, upd_t, upd_s)
        ins = src.take(pa.array(inserted_s)).drop_columns([_SRC])
        if ins.num_rows:
            ins = _fill_missing(ins, target_schema)
            new_rows = pa.concat_tables([new_rows, ins]) if new_rows.num_rows else ins
        addr = target.column(ROW_ADDR).to_numpy()
        gone = np.concatenate([addr[upd_t], addr[deleted_t]]).astype(np.uint64)
        kept_ids = created = None
        if stable and upd_t.size:
            kept_ids = target.column(ROW_ID).to_numpy()[upd_t].astype(np.uint64)
            created = row_versions(ds.manifest, addr[upd_t].astype(np.uint64))
        field_ids = [f.id for f in ds.lance_schema.fields]
        manifest = rowops.rewrite_rows(ds, gone, new_rows, row_ids=kept_ids, created_at=created,
                                       fields_for_preserving_frag_bitmap=field_ids, properties=properties,
                                       file_limits=limits)
        return manifest, MergeInsertResult(int(inserted_s.size), int(upd_t.size), int(deleted_t.size))


_FILE_LIMITS = ("max_rows_per_file", "max_rows_per_group", "max_bytes_per_file")


def _file_limits(given: Mapping[str, int] | None) -> dict[str, int]:
    """Checked ``file_limits`` of :meth:`MergeInsertBuilder.execute` (positive integers, known keys)."""
    if given is None:
        return {}
    unknown = sorted(set(given) - set(_FILE_LIMITS))
    if unknown:
        raise InvalidInputError(f"merge_insert execute(): unknown file_limits {unknown} (accepted: {list(_FILE_LIMITS)})")
    out = {}
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidInputError(f"merge_insert execute(): file_limits[{key!r}] must be a positive integer, "
                                    f"got {value!r}")
        out[key] = value
    return out


def _join_keys(on: Any) -> list[str]:
    """``on=`` as a list of distinct column names (pylance takes a name or an iterable of names)."""
    if isinstance(on, str):
        return [on]
    if isinstance(on, (bytes, Mapping)) or not isinstance(on, Iterable):
        raise InvalidInputError(f"merge_insert: on must be a column name or a list of them, got "
                                f"{type(on).__name__} {on!r:.80}")
    keys = string_list(list(on), "merge_insert: on")
    return list(dict.fromkeys(keys))  # a key named twice is one key, as in pylance


def _conform_source(source: pa.Table, target: pa.Schema) -> pa.Table:
    fields = [target.field(n) for n in source.schema.names]
    if source.schema.equals(pa.schema(fields)):
        return source
    try:
        return source.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"merge_insert source cannot be cast to the dataset schema: {exc}") from exc


def _match(target: pa.Table, src: pa.Table, on: list[str]) -> pa.Table:
    """``(_TGT, _SRC)`` index pairs of rows equal on every key (nulls never match)."""
    if target.num_rows == 0 or src.num_rows == 0:
        return pa.table({_TGT: pa.array([], pa.int64()), _SRC: pa.array([], pa.int64())})
    left_cols: dict[str, pa.ChunkedArray] = {}
    right_cols: dict[str, pa.ChunkedArray] = {}
    for k in on:  # joins key neither on dictionaries nor on structs: compare decoded leaf values
        _join_columns(f"k{len(left_cols)}", target.column(k), src.column(k), left_cols, right_cols)
    keys = list(left_cols)
    left = pa.table({**left_cols, _TGT: target.column(_TGT)})
    right = pa.table({**right_cols, _SRC: src.column(_SRC)})
    # The hash table is built on the source (right); threads halve the probe of a large target.
    try:
        joined = left.join(right, keys=keys, join_type="inner", use_threads=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"merge_insert cannot join on {on}: {exc}") from exc
    return joined.select([_TGT, _SRC])


def _join_columns(name: str, left: pa.ChunkedArray, right: pa.ChunkedArray, out_left: dict[str, pa.ChunkedArray],
                  out_right: dict[str, pa.ChunkedArray]) -> None:
    """Add the join columns of one key: itself, its decoded values, or a struct's leaf fields.

    A null struct's fields read as null (``flatten`` applies the parent's validity), so it
    matches nothing, as a null key of any other type.
    """
    typ = left.type
    if pa.types.is_dictionary(typ):
        left, right = left.cast(typ.value_type), right.cast(typ.value_type)
        typ = typ.value_type
    if not pa.types.is_struct(typ):
        out_left[name], out_right[name] = left, right
        return
    lefts = _flatten(left)
    rights = _flatten(right.cast(typ) if right.type != typ else right)
    for i in range(typ.num_fields):
        _join_columns(f"{name}_{i}", lefts[i], rights[i], out_left, out_right)


def _flatten(column: pa.ChunkedArray) -> list[pa.ChunkedArray]:
    chunks = [c.flatten() for c in column.chunks]
    return [pa.chunked_array([c[i] for c in chunks], type=column.type.field(i).type)
            for i in range(column.type.num_fields)]


def _condition(text: str, target: pa.Table, src: pa.Table, tgt_i: npt.NDArray[np.int64],
               src_i: npt.NDArray[np.int64], schema: pa.Schema) -> npt.NDArray[np.bool_]:
    # Start-up cost: lance_format.sql loads sqlglot, only needed once a condition is given.
    from lance_format.sql import to_expression

    t = target.take(pa.array(tgt_i)).select(schema.names)
    s = _fill_missing(src.take(pa.array(src_i)).drop_columns([_SRC]), schema)
    s, t = s.combine_chunks(), t.combine_chunks()
    both = pa.table({
        "source": pa.StructArray.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                              for c in s.columns], fields=list(s.schema)),
        "target": pa.StructArray.from_arrays([c.chunk(0) if c.num_chunks else pa.array([], c.type)
                                              for c in t.columns], fields=list(t.schema)),
    })
    expr = to_expression(text, both.schema)
    assert expr is not None
    mask = both.append_column(_TGT, pa.array(np.arange(both.num_rows, dtype=np.int64)))
    hit = apply_filter(mask, expr).column(_TGT).to_numpy()
    keep = np.zeros(both.num_rows, dtype=bool)
    keep[hit] = True
    return keep


def _fill_missing(table: pa.Table, schema: pa.Schema) -> pa.Table:
    for i, f in enumerate(schema):
        if f.name not in table.column_names:
            if not f.nullable:
                raise InvalidInputError(f"merge_insert source lacks non-nullable column {f.name!r}")
            table = table.add_column(i, f, pa.nulls(table.num_rows, f.type))
    return table.select(schema.names)


def _updated_rows(ds: LanceDataset, src: pa.Table, target: pa.Table, upd_t: npt.NDArray[np.int64],
                  upd_s: npt.NDArray[np.int64]) -> pa.Table:
    schema = ds.schema
    if not upd_s.size:  # nothing updated: the target holds only the key columns then
        return schema.empty_table()
    rows = src.take(pa.array(upd_s)).drop_columns([_SRC])
    missing = [n for n in schema.names if n not in rows.column_names]
    if missing:  # partial source: the other columns keep the target's values
        old = target.take(pa.array(upd_t))
        for name in missing:
            rows = rows.append_column(schema.field(name), old.column(name))
    return rows.select(schema.names)


