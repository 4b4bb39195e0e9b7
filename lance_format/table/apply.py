"""Building the next manifest: one registered function per operation applied to a base.

:func:`build_manifest` is pure (base manifest + transaction -> next manifest). The
operation-specific part is :func:`apply_operation`, a ``functools.singledispatch``
with one function per operation class (as pyiceberg's ``_apply_table_update``): it
turns a :class:`Draft` of the next version into the updated draft. What every
operation shares (fragment order, id high-water marks, stable row ids, feature flags,
commit metadata) is done once around it.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_format.errors import (
    CommitConflictError,
    DatasetNotFoundError,
    InvalidInputError,
    RetryableCommitConflictError,
)
from lance_format.schema import LanceField, LanceSchema
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.manifest import (
    FLAG_STABLE_ROW_IDS,
    OUR_WRITER_VERSION,
    Manifest,
    compute_feature_flags,
)
from lance_format.table.models import BasePath, FragmentMetadata, check_data_path
from lance_format.table.rowids import (
    decode_row_ids,
    decode_versions,
    encode_row_id_range,
    encode_row_ids,
    encode_uniform_versions,
    encode_versions,
)
from lance_format.table.transaction import LanceOperation, Transaction, data_files_of

#: Default data storage version for new datasets: 2.2, pylance 14.0.2's "stable" default.
DEFAULT_DATA_STORAGE_VERSION = "2.2"

L = LanceOperation


@dataclass(frozen=True)
class ApplyContext:
    """What applying an operation may need besides the base manifest.

    Attributes:
        version: Version number of the manifest being built.
        load_version: Loads an old manifest (needed by Restore).
        data_storage_version: ``data_format`` for a new/overwritten dataset whose
            fragments do not reveal it.
    """

    version: int
    load_version: Callable[[int], Manifest] | None = None
    data_storage_version: str | None = None


@dataclass(frozen=True)
class Draft:
    """The next version while operations are applied to it.

    Attributes:
        base: The manifest the operation applies to (``None`` for a new dataset).
        schema: Table schema.
        fragments: Fragments (any order; sorted once at the end).
        data_format: ``(file_format, version)``.
        config: Table config.
        indices: Index segments.
        next_id: Next unused fragment id.
        high_water: Highest fragment id handed out so far (``None`` = none).
        restored: A complete manifest that replaces the base as it is (Restore).
        moved: Ids of new fragments that carry stable row ids of rows they moved (Update).
        base_paths: Extra roots of a multi-base dataset.
        table_metadata: Table metadata (``update_metadata``).
    """

    base: Manifest | None
    schema: LanceSchema | None
    fragments: tuple[FragmentMetadata, ...]
    data_format: tuple[str, str] | None
    config: Mapping[str, str]
    indices: tuple[IndexMetadata, ...]
    next_id: int
    high_water: int | None
    restored: Manifest | None = None
    moved: frozenset[int] = frozenset()
    base_paths: tuple[BasePath, ...] = ()
    table_metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _assign_ids(frags: Sequence[FragmentMetadata], next_id: int, *, keep_nonzero: bool = False
                ) -> tuple[tuple[FragmentMetadata, ...], int]:
    out = []
    for frag in frags:
        if keep_nonzero and frag.id != 0:
            out.append(frag)
            continue
        out.append(frag.with_id(next_id))
        next_id += 1
    return tuple(out), next_id


def _resolve_schema(schema: LanceSchema | object, base: Manifest | None) -> LanceSchema:
    if isinstance(schema, LanceSchema):
        return schema
    if not isinstance(schema, pa.Schema):
        raise InvalidInputError(f"expected a pyarrow or Lance schema, got {type(schema).__name__}")
    if base is None:
        return LanceSchema.from_arrow(schema)
    # Project/Merge with an Arrow schema: keep the ids of fields that already exist.
    known = {f.name: f for f in base.schema.fields}
    new_fields = [f for f in schema if f.name not in known]
    extra = LanceSchema.from_arrow(pa.schema(new_fields), start_id=base.schema.max_field_id() + 1)
    extra_by_name = {f.name: f for f in extra.fields}
    fields = tuple(known[f.name] if f.name in known else extra_by_name[f.name] for f in schema)
    meta = {k.decode() if isinstance(k, bytes) else k: v for k, v in (schema.metadata or {}).items()}
    return LanceSchema(fields=fields, metadata=meta)


def _format_of(frags: tuple[FragmentMetadata, ...], fallback: str) -> str:
    for frag in frags:
        for df in frag.files:
            major, minor = df.file_version
            if (major, minor) in ((0, 3), (2, 0)):
                return "2.0"
            if major == 0:  # legacy files (footer 0.1/0.2): pylance records the table as "0.1"
                return "0.1"
            return f"{major}.{minor}"
    return fallback


# --- one function per operation ---------------------------------------------------------------


@functools.singledispatch
def apply_operation(op: LanceOperation.BaseOperation, draft: Draft, ctx: ApplyContext) -> Draft:
    """Return ``draft`` with ``op`` applied.

    Raises:
        InvalidInputError: for an operation this library cannot commit.
    """
    raise InvalidInputError(f"this library cannot commit a {op.kind} operation")


@apply_operation.register
def _(op: L.Append, draft: Draft, ctx: ApplyContext) -> Draft:
    new, next_id = _assign_ids(op.fragments, draft.next_id)
    return dataclasses.replace(draft, fragments=draft.fragments + new, next_id=next_id)


@apply_operation.register
def _(op: L.Overwrite, draft: Draft, ctx: ApplyContext) -> Draft:
    frags, next_id = _assign_ids(op.fragments, draft.next_id)
    fmt = ("lance", _format_of(frags, ctx.data_storage_version or DEFAULT_DATA_STORAGE_VERSION))
    return dataclasses.replace(draft, schema=_resolve_schema(op.new_schema, None), fragments=frags,
                               next_id=next_id, data_format=fmt, indices=(),
                               config={**draft.config, **(op.config_upsert_values or {})},
                               base_paths=tuple(op.initial_bases) or draft.base_paths)


def _require_fragments(draft: Draft, ids: Iterable[int], op: L.BaseOperation) -> None:
    """Refuse an operation that names fragments the target manifest lacks.

    Dropping such a change silently would undo a delete or duplicate rows (a compaction
    and a cleanup landed between the operation's read and its commit): it is a conflict.
    """
    missing = set(ids) - {f.id for f in draft.fragments}
    if missing:
        version = draft.base.version if draft.base is not None else 0
        raise RetryableCommitConflictError(
            f"commit conflict: {op.kind} changes fragments {sorted(missing)}, which version {version} "
            "no longer has (rewritten or removed meanwhile); retry the operation on the new version")


@apply_operation.register
def _(op: L.Delete, draft: Draft, ctx: ApplyContext) -> Draft:
    updated = {f.id: f for f in op.updated_fragments}
    gone = set(op.deleted_fragment_ids)
    _require_fragments(draft, updated.keys() | gone, op)
    return dataclasses.replace(draft, fragments=tuple(updated.get(f.id, f) for f in draft.fragments
                                                      if f.id not in gone))


@apply_operation.register
def _(op: L.Update, draft: Draft, ctx: ApplyContext) -> Draft:
    updated = {f.id: f for f in op.updated_fragments}
    gone = set(op.removed_fragment_ids)
    _require_fragments(draft, updated.keys() | gone, op)
    new, next_id = _assign_ids(op.new_fragments, draft.next_id)
    kept = tuple(updated.get(f.id, f) for f in draft.fragments if f.id not in gone)
    # EVOLUTION (issue 11): new fragments of an Update (update / merge_insert) may carry
    # the stable ids of the rows they moved; see _complete_moved_rows.
    return dataclasses.replace(draft, fragments=kept + new, next_id=next_id,
                               moved=frozenset(f.id for f in new))


@apply_operation.register
def _(op: L.Merge, draft: Draft, ctx: ApplyContext) -> Draft:
    # Existing fragments keep their ids (0 is a real id here). A Merge restates every
    # fragment: one it lacks would vanish, one the target lacks would come back.
    if draft.base is not None:
        ids = {f.id for f in op.fragments}
        _require_fragments(draft, ids, op)
        dropped = {f.id for f in draft.fragments} - ids
        if dropped:
            raise RetryableCommitConflictError(
                f"commit conflict: merge does not carry fragments {sorted(dropped)} of version "
                f"{draft.base.version} (added meanwhile); retry the operation on the new version")
    return dataclasses.replace(draft, schema=_resolve_schema(op.schema, draft.base), fragments=tuple(op.fragments))


@apply_operation.register
def _(op: L.Project, draft: Draft, ctx: ApplyContext) -> Draft:
    schema = _resolve_schema(op.schema, draft.base)
    # As lance's Project: a data file none of whose fields is left leaves its fragment (the
    # bytes go at cleanup). Unlike pylance 14.0.2, a fragment keeps its last file (its rows).
    keep = set(schema.field_ids())
    frags = []
    for frag in draft.fragments:
        files = tuple(df for df in frag.files if keep.intersection(df.fields))
        frags.append(frag if len(files) == len(frag.files) or not files else dataclasses.replace(frag, files=files))
    return dataclasses.replace(draft, schema=schema, fragments=tuple(frags))


@apply_operation.register
def _(op: L.ReserveFragments, draft: Draft, ctx: ApplyContext) -> Draft:
    if op.num_fragments < 0:
        raise InvalidInputError("ReserveFragments needs a non-negative count")
    next_id = draft.next_id + op.num_fragments
    return dataclasses.replace(draft, next_id=next_id,
                               high_water=next_id - 1 if op.num_fragments else draft.high_water)


@apply_operation.register
def _(op: L.Rewrite, draft: Draft, ctx: ApplyContext) -> Draft:
    old_ids = {f.id for g in op.groups for f in g.old_fragments}
    missing = old_ids - {f.id for f in draft.fragments}
    if missing:
        raise CommitConflictError(f"rewrite of fragments {sorted(missing)} that no longer exist")
    next_id = draft.next_id
    rewritten: tuple[FragmentMetadata, ...] = ()
    moves: list[tuple[frozenset[int], frozenset[int]]] = []  # (old ids, new ids) per group
    for g in op.groups:
        assigned, next_id = _assign_ids(g.new_fragments, next_id, keep_nonzero=True)
        rewritten += assigned
        moves.append((frozenset(f.id for f in g.old_fragments), frozenset(f.id for f in assigned)))
    swap = {r.old_id: r for r in op.rewritten_indices}
    # MAINT2 (issue 9): with stable row ids every index still holds valid row ids, so
    # each one's fragment bitmap moves to the new fragments even when it was not
    # rewritten (lance's ``Transaction::build_manifest``, Rewrite arm).
    stable = draft.base is not None and draft.base.uses_stable_row_ids
    indices = tuple(_swap_index(i, swap.get(i.uuid), moves, move_bitmap=stable) for i in draft.indices)
    if op.frag_reuse_index is not None:
        # A deferred compaction's ``__lance_frag_reuse`` entry replaces the current one.
        reuse = op.frag_reuse_index
        indices = tuple(i for i in indices if i.name != reuse.name) + (reuse,)
    return dataclasses.replace(draft, fragments=tuple(f for f in draft.fragments if f.id not in old_ids) + rewritten,
                               next_id=next_id, indices=indices)


def _swap_index(index: IndexMetadata, r: LanceOperation.RewrittenIndex | None,
                moves: list[tuple[frozenset[int], frozenset[int]]], *, move_bitmap: bool = False) -> IndexMetadata:
    # A remapped index now covers the new fragments of every group it covered, as lance's
    # ``Transaction::recalculate_fragment_bitmap`` (rust/lance/src/dataset/transaction.rs)
    # re-points it; indices that were not remapped keep their bitmap unless ``move_bitmap``
    # (stable row ids).
    if r is None and not move_bitmap:
        return index
    bitmap = r.covered_before if r is not None and r.covered_before is not None else index.fragment_bitmap
    if bitmap is not None:
        covered = set(bitmap)
        for old, new in moves:
            hit = old & bitmap
            if hit and hit != old:
                raise InvalidInputError(f"rewrite of index {index.name!r} ({index.uuid}): a rewrite group "
                                        f"mixes indexed fragments {sorted(hit)} with unindexed ones "
                                        f"{sorted(old - hit)}")
            if hit:
                covered = (covered - old) | new
        bitmap = frozenset(covered)
    if r is None:
        return dataclasses.replace(index, fragment_bitmap=bitmap)
    details = r.new_index_details if r.new_index_details is not None else index.index_details
    return dataclasses.replace(index, uuid=r.new_id, index_details=details, index_version=r.new_index_version,
                               files=r.new_index_files, fragment_bitmap=bitmap)


@apply_operation.register
def _(op: L.CreateIndex, draft: Draft, ctx: ApplyContext) -> Draft:
    removed = {i.uuid for i in op.removed_indices}
    kept = tuple(i for i in draft.indices if i.uuid not in removed)
    return dataclasses.replace(draft, indices=kept + tuple(op.new_indices))


def _apply_bytes_map(current: Mapping[str, bytes], m: LanceOperation.UpdateMap) -> dict[str, bytes]:
    # Schema and field metadata hold bytes values; the edits are strings (UTF-8, as lance stores them).
    out = {} if m.replace else dict(current)
    for key, value in m.updates.items():
        if value is not None:
            out[key] = value.encode()
        elif not m.replace:
            out.pop(key, None)
    return out


def _with_field_metadata(field: LanceField, edits: Mapping[int, LanceOperation.UpdateMap], seen: set[int]
                         ) -> LanceField:
    children = tuple(_with_field_metadata(c, edits, seen) for c in field.children)
    edit = edits.get(field.id)
    if edit is None and children == field.children:
        return field
    metadata = field.metadata
    if edit is not None:
        seen.add(field.id)
        metadata = _apply_bytes_map(field.metadata, edit)
    return dataclasses.replace(field, metadata=metadata, children=children)


@apply_operation.register
def _(op: L.UpdateConfig, draft: Draft, ctx: ApplyContext) -> Draft:
    # As lance's ``build_manifest`` UpdateConfig arm: each map is edited in place; fields are found
    # by id anywhere in the tree; an id the schema lacks (dropped meanwhile) is refused, as lance does.
    schema = draft.schema
    assert schema is not None  # build_manifest refuses anything but Overwrite on a missing dataset
    if op.schema_metadata_updates is not None:
        schema = dataclasses.replace(schema, metadata=_apply_bytes_map(schema.metadata, op.schema_metadata_updates))
    if op.field_metadata_updates:
        seen: set[int] = set()
        schema = dataclasses.replace(schema, fields=tuple(_with_field_metadata(f, op.field_metadata_updates, seen)
                                                          for f in schema.fields))
        missing = sorted(set(op.field_metadata_updates) - seen)
        if missing:
            raise InvalidInputError(f"UpdateConfig: field with id {missing[0]} does not exist in the schema of "
                                    f"version {draft.base.version if draft.base is not None else 0}")
    config = op.config_updates.apply(draft.config) if op.config_updates is not None else draft.config
    table_meta = (op.table_metadata_updates.apply(draft.table_metadata) if op.table_metadata_updates is not None
                  else draft.table_metadata)
    return dataclasses.replace(draft, schema=schema, config=config, table_metadata=table_meta)


@apply_operation.register
def _(op: L.Restore, draft: Draft, ctx: ApplyContext) -> Draft:
    if ctx.load_version is None:
        raise InvalidInputError("Restore needs access to old versions")
    base = draft.base
    assert base is not None  # build_manifest refuses Restore on a missing dataset
    old = ctx.load_version(op.version)
    hw = max((x for x in (base.max_fragment_id, old.max_fragment_id) if x is not None), default=None)
    # Keep the high-water marks: ids handed out after ``old`` must never be reused.
    return dataclasses.replace(draft, restored=old.replace(max_fragment_id=hw,
                                                           next_row_id=max(base.next_row_id, old.next_row_id)))


# --- the shared part ----------------------------------------------------------------------------


def _next_fragment_id(base: Manifest | None) -> int:
    if base is None:
        return 0
    if base.max_fragment_id is not None:
        return base.max_fragment_id + 1
    return max((f.id for f in base.fragments), default=-1) + 1


def build_manifest(base: Manifest | None, txn: Transaction, *, version: int,
                   load_version: Callable[[int], Manifest] | None = None,
                   data_storage_version: str | None = None,
                   enable_stable_row_ids: bool = False) -> Manifest:
    """Apply ``txn`` to ``base`` (``None`` for a new dataset) and return the next manifest.

    Args:
        base: The newest committed manifest, or ``None`` when creating the dataset.
        txn: The transaction to apply.
        version: Version number of the new manifest.
        load_version: Loads an old manifest (needed by Restore).
        data_storage_version: ``data_format`` for a new/overwritten dataset whose
            fragments do not reveal it.
        enable_stable_row_ids: Turn on stable row ids (only when creating the dataset).

    Raises:
        DatasetNotFoundError: for operations other than Overwrite on a missing dataset.
        InvalidInputError: for an operation that does not fit the base.
    """
    op = txn.operation
    for df in data_files_of(op):
        check_data_path(df.path, f"transaction {txn.uuid}")
    if base is None and not isinstance(op, L.Overwrite):
        raise DatasetNotFoundError(f"cannot apply {op.kind} to a dataset that does not exist yet")
    draft = Draft(
        base=base,
        schema=base.schema if base is not None else None,
        fragments=base.fragments if base is not None else (),
        data_format=base.data_format if base is not None else None,
        config=dict(base.config) if base is not None else {},
        indices=base.indices if base is not None else (),
        next_id=_next_fragment_id(base),
        high_water=base.max_fragment_id if base is not None else None,
        base_paths=base.base_paths if base is not None else (),
        table_metadata=dict(base.table_metadata) if base is not None else {},
    )
    draft = apply_operation(op, draft, ApplyContext(version, load_version, data_storage_version))
    if draft.restored is not None:
        return _finish(draft.restored, base, txn, version)
    schema, data_format, next_id = draft.schema, draft.data_format, draft.next_id
    assert schema is not None and data_format is not None
    frags = tuple(sorted(draft.fragments, key=operator.attrgetter("id")))
    ids = [f.id for f in frags]
    if len(set(ids)) != len(ids):
        raise InvalidInputError(f"duplicate fragment ids in the new version: {ids}")
    top = max([x for x in (draft.high_water, max(ids, default=None), next_id - 1 if next_id else None)
               if x is not None], default=None)
    if top is not None and top < 0:
        top = None
    stable = base.uses_stable_row_ids if base is not None else enable_stable_row_ids
    next_row_id = base.next_row_id if base is not None else 0
    if stable:
        frags, next_row_id = _assign_row_ids(frags, next_row_id, version, set(draft.moved))
    new = Manifest(
        schema=schema,
        fragments=frags,
        version=version,
        max_fragment_id=top,
        data_format=data_format,
        config=dict(draft.config),
        table_metadata=dict(draft.table_metadata),
        indices=draft.indices,
        base_paths=draft.base_paths,
        branch=base.branch if base is not None else None,
        max_allocated_field_id=base.max_allocated_field_id if base is not None else None,
        unknown_fields=base.unknown_fields if base is not None else b"",
        next_row_id=next_row_id,
        reader_feature_flags=FLAG_STABLE_ROW_IDS if stable else 0,
    )
    return _finish(new, base, txn, version)


def _assign_row_ids(frags: tuple[FragmentMetadata, ...], next_row_id: int, version: int,
                    moved: set[int] | None = None) -> tuple[tuple[FragmentMetadata, ...], int]:
    # Fragments new in this commit get the next contiguous range of stable row ids
    # (done here, at build time, so a retried commit re-assigns them; ``Transaction::assign_row_ids``
    # in rust/lance/src/dataset/transaction.rs).

    out = []
    for frag in frags:
        if not frag.has_row_ids:
            end = next_row_id + frag.physical_rows
            versions = encode_uniform_versions(frag.physical_rows, version)
            frag = dataclasses.replace(frag, row_id_meta=encode_row_id_range(next_row_id, end),
                                       created_at_version_meta=versions, last_updated_at_version_meta=versions)
            next_row_id = end
        elif moved and frag.id in moved:
            frag, next_row_id = _complete_moved_rows(frag, next_row_id, version)
        out.append(frag)
    return tuple(out), next_row_id


def _complete_moved_rows(frag: FragmentMetadata, next_row_id: int, version: int
                         ) -> tuple[FragmentMetadata, int]:
    # EVOLUTION (issue 11). An Update's new fragment lists the stable ids of the rows it
    # moved first; the rows after them (inserts) get fresh ids here, as lance appends the
    # remainder of a partial sequence (``Transaction::assign_row_ids``,
    # rust/lance/src/dataset/transaction.rs). Moved rows keep the creation versions the
    # fragment carries; every row was last updated by this version.
    assert frag.row_id_meta is not None
    ids = decode_row_ids(frag.row_id_meta, where=f"fragment {frag.id} row ids")
    missing = frag.physical_rows - int(ids.size)
    if missing > 0:
        ids = np.concatenate([ids, np.arange(next_row_id, next_row_id + missing, dtype=np.uint64)])
        next_row_id += missing
    created = np.full(frag.physical_rows, version, dtype=np.uint64)
    if frag.created_at_version_meta is not None:
        kept = decode_versions(frag.created_at_version_meta)[: frag.physical_rows]
        created[: kept.size] = kept
    return dataclasses.replace(frag, row_id_meta=encode_row_ids(ids), created_at_version_meta=encode_versions(created),
                               last_updated_at_version_meta=encode_uniform_versions(frag.physical_rows, version)
                               ), next_row_id


def _finish(new: Manifest, base: Manifest | None, txn: Transaction, version: int) -> Manifest:
    # The flags depend only on fields this final replace leaves alone.
    base_flags = base.reader_feature_flags if base is not None else 0
    reader, writer = compute_feature_flags(new, base_flags)
    return new.replace(version=version, timestamp_ns=time.time_ns(), writer_version=OUR_WRITER_VERSION,
                       transaction_file=txn.file_name, tag="", transaction_bytes=None,
                       reader_feature_flags=reader, writer_feature_flags=writer)


__all__ = ["DEFAULT_DATA_STORAGE_VERSION", "ApplyContext", "Draft", "apply_operation", "build_manifest"]
