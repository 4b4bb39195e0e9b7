"""Column evolution without rewriting existing data: add, drop, alter (rename, nullability, cast).

What pylance 14.0.2 commits for each (read back from its transactions):

* ``add_columns`` with SQL expressions or a function: a ``Merge`` whose fragments each
  gain one new data file holding only the new fields (computed over every physical row,
  deleted ones included, so row offsets line up); ``preserves_nullability`` is set.
  New field ids continue after the largest id ever used (schema, data files, and the
  manifest's ``max_allocated_field_id``), so an id whose data still sits in old files
  is never reused.
* ``add_columns`` with an Arrow schema/field(s): the same ``Merge`` with no new files;
  the columns read as nulls.
* ``drop_columns``, renames and nullability changes: a ``Project`` (schema only).
* a type change: a ``Merge``; the column gets a new field id and a new data file per
  fragment, and the old id becomes ``-2`` (tombstone) in the old files' field lists;
  files left with only tombstones are dropped (``remove_tombstoned_data_files``,
  lance ``rust/lance/src/dataset/transaction.rs``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from lance_format.errors import (
    InvalidInputError,
    NotSupportedError,
    RetryableCommitConflictError,
    SchemaError,
)
from lance_format.evolution.arguments import U32_MAX, optional_integer, string, string_list, string_map
from lance_format.evolution.sqlexpr import compile_expressions, evaluate, value_expression
from lance_format.evolution.udf import checkpoint_of, checkpointed_batches, save_files, saved_files
from lance_format.scanner import FragmentScan, referenced_columns
from lance_format.schema import LanceField, LanceSchema
from lance_format.table.commit import commit_transaction
from lance_format.table.discard import discard_keys
from lance_format.table.models import DataFile, FragmentMetadata
from lance_format.table.naming import data_file_key
from lance_format.table.rowids import encode_uniform_versions
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.writing import write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

TOMBSTONE = -2
_BATCH = 8192
_SQL_BATCH = 65536
#: Fragments whose SQL-computed columns are written at the same time.
ADD_COLUMNS_THREADS = 2

Transforms: TypeAlias = Mapping[str, str] | Callable[[pa.RecordBatch], pa.RecordBatch] | pa.Schema | pa.Field | Sequence[pa.Field]


def next_field_id(ds: LanceDataset) -> int:
    """First field id never used by this dataset (schema, data files or the manifest's high-water mark)."""
    top = ds.lance_schema.max_field_id()
    for frag in ds.manifest.fragments:
        for df in frag.files:
            if df.fields:
                top = max(top, max(df.fields))
    if ds.manifest.max_allocated_field_id is not None:
        top = max(top, ds.manifest.max_allocated_field_id)
    return top + 1


def _commit(ds: LanceDataset, op: LanceOperation.BaseOperation, keys: Sequence[str],
            properties: Mapping[str, str] | None = None) -> None:

    txn = Transaction(ds.version, op, transaction_properties=dict(properties or {}))
    try:
        manifest = commit_transaction(ds._store, txn, base=ds.manifest)
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    ds._set_manifest(manifest)


def _retrying(ds: LanceDataset, run: Callable[[LanceDataset], None], retries: int = 10) -> None:
    # Merge conflicts with concurrent appends, deletes and rewrites (retryable in lance's
    # matrix): the new columns are computed again on the newest version.
    for n in range(retries + 1):
        current = ds if n == 0 else ds.checkout_latest()
        try:
            run(current)
        except RetryableCommitConflictError:
            if n == retries:
                raise
            continue
        if current is not ds:
            ds._set_manifest(current.manifest)
        return


# -- add ------------------------------------------------------------------------------


def add_columns(ds: LanceDataset, transforms: Transforms, read_columns: Sequence[str] | None = None, *,
                batch_size: int | None = None, transaction_properties: Mapping[str, str] | None = None) -> None:
    """Add columns to ``ds`` as one ``Merge`` commit (the handle moves to the new version).

    A concurrent append, delete or rewrite (retryable conflicts for a ``Merge``) makes it
    compute the columns again on the newest version.

    Args:
        ds: The dataset.
        transforms: ``{name: SQL expression}``; a function from a record batch (of
            ``read_columns``, all columns by default) to a record batch of new columns;
            or an Arrow schema / field / list of fields for all-null columns.
        read_columns: Columns the function reads.
        batch_size: Rows per call of the function.
        transaction_properties: Stored with the commit's transaction (e.g. Dagster lineage).

    Raises:
        SchemaError: a new name collides with an existing column.
        InvalidInputError: bad expressions, or a function returning the wrong row count.
    """
    batch_size = optional_integer(batch_size, "add_columns(): batch_size", minimum=1, maximum=U32_MAX)
    if read_columns is not None:
        read_columns = string_list(read_columns, "add_columns(): read_columns")
    if transaction_properties is not None:
        string_map(transaction_properties, "add_columns(): transaction_properties")
    if isinstance(transforms, Mapping):
        transforms = string_map(transforms, "add_columns(): transforms")
        if not transforms:  # pylance commits an unchanged schema (a Merge with the same files)
            _commit(ds, LanceOperation.Merge(list(ds.manifest.fragments), ds.lance_schema,
                                             preserves_nullability=True), (), transaction_properties)
            return
    _retrying(ds, lambda current: _add_columns(current, transforms, read_columns, batch_size=batch_size,
                                               properties=transaction_properties))


def _add_columns(ds: LanceDataset, transforms: Transforms, read_columns: Sequence[str] | None = None, *,
                 batch_size: int | None = None, properties: Mapping[str, str] | None = None) -> None:
    """One attempt of :func:`add_columns` on ``ds``'s version."""
    if isinstance(transforms, pa.Field):
        transforms = [transforms]
    if isinstance(transforms, pa.Schema) or (isinstance(transforms, Sequence)
                                              and all(isinstance(f, pa.Field) for f in transforms)):
        schema = _with_null_fields(ds, list(transforms))
        _commit(ds, LanceOperation.Merge(list(ds.manifest.fragments), schema, preserves_nullability=True), (),
                properties)
        return
    step = max(1, batch_size or _BATCH)
    if isinstance(transforms, Mapping):

        exprs = {str(k): str(v) for k, v in transforms.items()}
        _check_new_names(ds, list(exprs))

        cols: list[str] = []
        for text in exprs.values():  # parsed now: a bad expression fails before any file is written
            expr = value_expression(text, ds.schema)[0]
            cols += [c for c in referenced_columns(expr, ds.schema.names) if c not in cols]

        compiled = compile_expressions(exprs, ds.schema.empty_table().select(cols).schema)

        def compute(batch: pa.RecordBatch) -> pa.RecordBatch:
            out = evaluate(pa.Table.from_batches([batch]), compiled)
            return pa.RecordBatch.from_arrays(list(out.values()), names=list(out))

        # Expressions run vectorized: large batches (one compute plan per 64Ki rows).
        _add_computed(ds, compute, cols, batch_size or _SQL_BATCH, sql=True, properties=properties)
        return
    if callable(transforms):
        cols = list(read_columns) if read_columns is not None else list(ds.schema.names)
        for c in cols:
            if c not in ds.schema.names:
                raise InvalidInputError(f"{ds.uri}: read_columns names unknown column {c!r}")
        _add_computed(ds, transforms, cols, step, sql=False, properties=properties)
        return
    raise InvalidInputError(f"add_columns: unsupported transforms {type(transforms).__name__}")


def _with_null_fields(ds: LanceDataset, fields: Sequence[pa.Field]) -> LanceSchema:
    """The schema after adding all-null ``fields``: new columns go last, and a struct field named like
    an existing struct adds its new children to it (pylance 14 merges the schemas the same way).

    Raises:
        SchemaError: a field (or child) is not nullable, or its name is taken by a non-struct.
    """
    next_id = [next_field_id(ds)]
    top = list(ds.lance_schema.fields)
    names = [f.name for f in top]
    added: list[pa.Field] = []
    for f in fields:
        if f.name in names and pa.types.is_struct(f.type) and top[names.index(f.name)].logical_type == "struct":
            top[names.index(f.name)] = _merged_struct(ds, top[names.index(f.name)], f, next_id, f.name)
        else:
            added.append(f)
    if added or not fields:
        _check_new_names(ds, [f.name for f in added])
    for f in added:
        if not f.nullable:
            raise SchemaError(f"{ds.uri}: column {f.name!r} added without data must be nullable")
    new = LanceSchema.from_arrow(pa.schema(added), start_id=next_id[0])
    return LanceSchema(tuple(top) + new.fields, ds.lance_schema.metadata)


def _merged_struct(ds: LanceDataset, have: LanceField, add: pa.Field, next_id: list[int], path: str) -> LanceField:
    """``have`` (a struct) with the children of ``add`` it lacks, as all-null fields with new ids."""
    children = list(have.children)
    names = [c.name for c in children]
    if tuple(int(p) for p in ds.data_storage_version.split(".")) < (2, 2):
        # pylance 14 refuses too ("add sub column is not supported in Lance file version 2.1").
        raise NotSupportedError(f"{ds.uri}: column {path!r} is a struct; adding a field to a struct needs "
                                f"data storage version 2.2 or later, the dataset has {ds.data_storage_version}")
    for child in add.type:
        where = f"{path}.{child.name}"
        if child.name in names:
            old = children[names.index(child.name)]
            if not (pa.types.is_struct(child.type) and old.logical_type == "struct"):
                raise SchemaError(f"{ds.uri}: cannot add column {where!r}: the name is taken")
            children[names.index(child.name)] = _merged_struct(ds, old, child, next_id, where)
            continue
        if not child.nullable:
            raise SchemaError(f"{ds.uri}: column {where!r} added without data must be nullable")
        made = LanceSchema.from_arrow(pa.schema([child]), start_id=next_id[0]).fields[0]
        next_id[0] = max(f.id for f in made.flat()) + 1
        children.append(dataclasses.replace(made, parent_id=have.id))
    return dataclasses.replace(have, children=tuple(children))


def _check_new_names(ds: LanceDataset, names: Sequence[str]) -> None:
    clash = [n for n in names if n in ds.schema.names]
    if clash or len(set(names)) != len(names):
        raise SchemaError(f"{ds.uri}: cannot add column(s) {clash or list(names)}: the name is taken")
    if not names:
        raise InvalidInputError("add_columns(): transforms adds no columns")
    if "" in names:
        raise InvalidInputError(f"{ds.uri}: add_columns(): a new column name is empty")


def _physical_batches(ds: LanceDataset, frag: FragmentMetadata, cols: Sequence[str], step: int
                      ) -> Iterator[pa.RecordBatch]:
    """Every physical row of ``frag`` (deleted ones too), ``step`` rows at a time."""

    read = list(cols) or ds.schema.names[:1]  # zero columns would lose the row count
    scan = FragmentScan(ds._ctx, frag, read)
    for start in range(0, frag.physical_rows, step):
        batch = scan.read(start, min(start + step, frag.physical_rows))
        yield batch.select(list(cols)) if len(cols) != len(read) else batch


def _add_computed(ds: LanceDataset, fn: Callable[[pa.RecordBatch], pa.RecordBatch], cols: Sequence[str],
                  step: int, *, sql: bool, properties: Mapping[str, str] | None = None) -> None:

    out_schema: pa.Schema | None = None
    lance_new: LanceSchema | None = None
    frags: list[FragmentMetadata] = []
    keys: list[str] = []
    stable = ds.has_stable_row_ids

    def results(frag: FragmentMetadata) -> Iterator[pa.RecordBatch]:
        nonlocal out_schema
        # a batch_udf with a checkpoint reuses the results saved by an earlier attempt (evolution/udf.py)
        for batch, res in checkpointed_batches(fn, frag.id, _physical_batches(ds, frag, cols, step)):
            if isinstance(res, pa.Table):
                res = res.combine_chunks().to_batches()[0] if res.num_rows else \
                    pa.RecordBatch.from_pylist([], schema=res.schema)
            if not isinstance(res, pa.RecordBatch) or res.num_rows != batch.num_rows:
                raise InvalidInputError(f"add_columns: the function must return a RecordBatch with "
                                        f"{batch.num_rows} rows, got {type(res).__name__}")
            if out_schema is None:
                out_schema = _nullable(res.schema) if sql else res.schema
            yield res if res.schema.equals(out_schema) else res.select(out_schema.names).cast(out_schema)

    def one(frag: FragmentMetadata) -> FragmentMetadata:
        nonlocal lance_new, out_schema
        done = saved_files(fn, frag.id)
        if done is not None and lance_new is None and getattr(fn, "output_schema", None) is not None:
            out_schema = fn.output_schema  # type: ignore[attr-defined]
            _check_new_names(ds, out_schema.names)
            lance_new = LanceSchema.from_arrow(out_schema, start_id=next_field_id(ds))
        if done is not None and lance_new is not None:  # written by an earlier attempt: kept as is
            new_files = done
        else:
            stream = results(frag)
            first = next(stream, None)
            assert first is not None and out_schema is not None  # fragments hold at least one row
            if lance_new is None:
                _check_new_names(ds, out_schema.names)
                lance_new = LanceSchema.from_arrow(out_schema, start_id=next_field_id(ds))
            written = write_fragment_files(ds._store, lance_new.to_arrow(), _chain(first, stream), lance_new,
                                           max_rows_per_file=2**62, data_storage_version=ds.data_storage_version)
            new_files = tuple(df for w in written for df in w.files)
            if checkpoint_of(fn) is None:
                keys.extend(data_file_key(df.path) for df in new_files)
            else:  # the checkpoint owns the files now: a failure later keeps them for the next attempt
                save_files(fn, frag, new_files)
        new_frag = dataclasses.replace(frag, files=frag.files + new_files)
        if stable:  # every row of the fragment now has new values (as pylance records it)
            new_frag = dataclasses.replace(new_frag, last_updated_at_version_meta=encode_uniform_versions(
                frag.physical_rows, ds.version + 1))
        return new_frag

    try:
        todo = list(ds.manifest.fragments)
        if todo:
            frags.append(one(todo[0]))  # fixes the output schema and the new field ids
        if sql and len(todo) > 2:
            # SQL expressions are ours to run concurrently: fragments are independent, and
            # decoding/encoding spends most of its time in numpy/pyarrow outside the GIL.
            with ThreadPoolExecutor(max_workers=ADD_COLUMNS_THREADS) as pool:
                frags.extend(pool.map(one, todo[1:]))
        else:  # a user function may not be thread-safe: one fragment after the other
            frags.extend(one(frag) for frag in todo[1:])
        if lance_new is None:  # no fragments: learn the schema from an empty batch
            empty = ds.schema.empty_table().select(list(cols)).to_batches()
            batch = empty[0] if empty else pa.RecordBatch.from_pylist([], schema=ds.schema.empty_table()
                                                                     .select(list(cols)).schema)
            res = fn(batch)
            out = _nullable(res.schema) if sql else res.schema
            _check_new_names(ds, out.names)
            lance_new = LanceSchema.from_arrow(out, start_id=next_field_id(ds))
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    schema = LanceSchema(ds.lance_schema.fields + lance_new.fields, ds.lance_schema.metadata)
    _commit(ds, LanceOperation.Merge(frags, schema, preserves_nullability=True), keys, properties)
    checkpoint = checkpoint_of(fn)
    if checkpoint is not None:  # committed: nothing left to resume
        checkpoint.cleanup()


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


# -- drop -------------------------------------------------------------------------------


def _without(fields: tuple[LanceField, ...], path: list[str]) -> tuple[tuple[LanceField, ...], bool]:
    out: list[LanceField] = []
    found = False
    for f in fields:
        if f.name != path[0]:
            out.append(f)
        elif len(path) == 1:
            found = True
        else:
            kids, found = _without(f.children, path[1:])
            if not kids:
                raise SchemaError(f"cannot drop every child of struct {f.name!r}; drop the struct instead")
            out.append(dataclasses.replace(f, children=kids))
    return tuple(out), found


def drop_columns(ds: LanceDataset, columns: Sequence[str]) -> None:
    """Drop columns (top-level names or ``"struct.field"`` paths) with a ``Project`` commit.

    Data files are untouched (compaction removes the bytes later).

    Raises:
        SchemaError: an unknown column, or dropping every column.
    """
    # A lone string is refused as pylance refuses it (it is not a list of names); a name given
    # twice is dropped once.
    columns = list(dict.fromkeys(string_list(columns, "drop_columns(): columns")))
    fields = ds.lance_schema.fields
    for name in columns:
        fields, found = _without(fields, name.split("."))
        if not found:
            raise SchemaError(f"{ds.uri}: cannot drop column {name!r}: no such column in {ds.schema.names}")
    if not fields:
        raise SchemaError(f"{ds.uri}: cannot drop every column of the dataset")
    schema = LanceSchema(fields, ds.lance_schema.metadata)
    _commit(ds, LanceOperation.Project(schema, preserves_nullability=True), ())


# -- alter ------------------------------------------------------------------------------


def _replace_field(fields: tuple[LanceField, ...], field_id: int, new: LanceField) -> tuple[LanceField, ...]:
    out = []
    for f in fields:
        if f.id == field_id:
            out.append(new)
        else:
            out.append(dataclasses.replace(f, children=_replace_field(f.children, field_id, new)))
    return tuple(out)


def alter_columns(ds: LanceDataset, *alterations: Mapping[str, Any],
                  transaction_properties: Mapping[str, str] | None = None) -> None:
    """Rename columns, change nullability or cast types (pylance's ``alter_columns``).

    Each alteration is a dict with ``path`` and any of ``name``, ``nullable`` and
    ``data_type``. Without a type change the commit is a ``Project``; with one it is a
    ``Merge`` that rewrites only the cast columns into new data files. The commit's
    transaction carries ``transaction_properties`` (beyond pylance 14, whose
    ``alter_columns`` takes none; add_columns does).

    Raises:
        SchemaError: unknown path, name clash, making a column with nulls non-nullable,
            or a cast that fails on the data.
    """
    if transaction_properties is not None:
        string_map(transaction_properties, "alter_columns(): transaction_properties")
    schema = ds.lance_schema
    casts: dict[int, pa.DataType] = {}
    fields = schema.fields
    for alt in alterations:
        _check_alteration(alt)
        path = alt["path"]
        try:
            field = LanceSchema(fields, schema.metadata).field(path)
        except SchemaError:
            raise SchemaError(f"{ds.uri}: alter_columns: no column {path!r}") from None
        new = field
        if alt.get("name") is not None:
            siblings = fields if field.parent_id == -1 else \
                LanceSchema(fields, schema.metadata).field_by_id(field.parent_id).children
            if any(s.name == alt["name"] and s.id != field.id for s in siblings):
                raise SchemaError(f"{ds.uri}: cannot rename {path!r} to {alt['name']!r}: the name is taken")
            new = dataclasses.replace(new, name=str(alt["name"]))
        if alt.get("nullable") is not None:
            nullable = bool(alt["nullable"])
            if not nullable and field.nullable and ds.count_rows(f"{_quoted(path)} IS NULL"):
                raise SchemaError(f"{ds.uri}: cannot make {path!r} non-nullable: it contains nulls")
            new = dataclasses.replace(new, nullable=nullable)
        if alt.get("data_type") is not None:
            if field.parent_id != -1 or field.children:
                raise NotSupportedError(f"{ds.uri}: alter_columns can only cast top-level primitive columns "
                                        f"({path!r})")
            casts[field.id] = alt["data_type"]
        fields = _replace_field(fields, field.id, new)
    if not casts:
        _commit(ds, LanceOperation.Project(LanceSchema(fields, schema.metadata), preserves_nullability=True), (),
                transaction_properties)
        return
    renamed = LanceSchema(fields, schema.metadata)
    _retrying(ds, lambda current: _cast_columns(current, renamed, casts, transaction_properties))


def _check_alteration(alt: Any) -> None:
    """One ``alter_columns`` dict: keys and value types as pylance's ``AlterColumn``.

    Raises:
        InvalidInputError: naming the key (``path``, ``name``, ``nullable``, ``data_type``).
    """
    if not isinstance(alt, Mapping):
        raise InvalidInputError(f"alter_columns(): each alteration must be a dict with a 'path', got "
                                f"{type(alt).__name__} {alt!r:.80}")
    if "path" not in alt:
        raise InvalidInputError(f"alter_columns(): each alteration needs a 'path', got {dict(alt)}")
    unknown = set(alt) - {"path", "name", "nullable", "data_type"}
    if unknown:
        raise InvalidInputError(f"alter_columns(): unknown keys {sorted(unknown)}")
    string(alt["path"], "alter_columns(): path")
    if "name" in alt and not string(alt["name"], f"alter_columns(): name of {alt['path']!r}"):
        # pylance writes a schema it cannot open again ("No field named ."): refused here.
        raise InvalidInputError(f"alter_columns(): name of {alt['path']!r} must not be empty")
    if "nullable" in alt and not isinstance(alt["nullable"], bool):
        raise InvalidInputError(f"alter_columns(): nullable of {alt['path']!r} must be a bool, got "
                                f"{type(alt['nullable']).__name__}")
    if "data_type" in alt and not isinstance(alt["data_type"], pa.DataType):
        raise InvalidInputError(f"alter_columns(): data_type of {alt['path']!r} must be a pyarrow DataType, got "
                                f"{type(alt['data_type']).__name__} {alt['data_type']!r:.40}")


def _quoted(path: str) -> str:
    return ".".join(f"`{p}`" for p in path.split("."))


def _cast_columns(ds: LanceDataset, renamed: LanceSchema, casts: dict[int, pa.DataType],
                  properties: Mapping[str, str] | None = None) -> None:

    start = next_field_id(ds)
    new_fields: dict[int, LanceField] = {}
    for i, (old_id, typ) in enumerate(sorted(casts.items())):
        old = renamed.field_by_id(old_id)
        arrow = pa.field(old.name, typ, nullable=old.nullable, metadata=dict(old.metadata) or None)
        made = LanceSchema.from_arrow(pa.schema([arrow]), start_id=start + i).fields[0]
        new_fields[old_id] = made
    fields = renamed.fields
    for old_id, made in new_fields.items():
        fields = _replace_field(fields, old_id, made)
    final = LanceSchema(fields, renamed.metadata)
    old_names = [ds.lance_schema.field_by_id(i).name for i in sorted(casts)]
    file_schema = LanceSchema(tuple(new_fields[i] for i in sorted(casts)), {})
    target = file_schema.to_arrow()
    keys: list[str] = []
    frags: list[FragmentMetadata] = []
    try:
        for frag in ds.manifest.fragments:
            def cast(frag: FragmentMetadata = frag) -> Iterator[pa.RecordBatch]:
                for batch in _physical_batches(ds, frag, old_names, _BATCH):
                    try:
                        yield pa.RecordBatch.from_arrays([batch.column(i).cast(target.field(i).type)
                                                          for i in range(len(old_names))], schema=target)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                        raise SchemaError(f"{ds.uri}: cannot cast {old_names} to {target}: {exc}") from exc
            written = write_fragment_files(ds._store, target, cast(), file_schema, max_rows_per_file=2**62,
                                           data_storage_version=ds.data_storage_version)
            keys += [data_file_key(df.path) for w in written for df in w.files]
            files = [_tombstoned(df, set(casts)) for df in frag.files]
            kept = tuple(df for df in files if any(f != TOMBSTONE for f in df.fields))
            new_frag = dataclasses.replace(frag, files=kept + tuple(df for w in written for df in w.files))
            if ds.has_stable_row_ids:

                new_frag = dataclasses.replace(new_frag, last_updated_at_version_meta=encode_uniform_versions(
                    frag.physical_rows, ds.version + 1))
            frags.append(new_frag)
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    _commit(ds, LanceOperation.Merge(frags, final, preserves_nullability=True), keys, properties)


def _tombstoned(df: DataFile, ids: set[int]) -> DataFile:
    if not ids & set(df.fields):
        return df
    return dataclasses.replace(df, fields=tuple(TOMBSTONE if f in ids else f for f in df.fields))


__all__ = ["add_columns", "alter_columns", "drop_columns", "next_field_id"]

