"""Codec of transactions (``lance.table.Transaction``, ``protos/transaction.proto``).

One encoder per operation class, registered on :func:`encode_operation` (a
``functools.singledispatch``), and one decoder per operation name in ``_DECODERS``; a
new operation registers both here and its manifest update in
``lance_format.table.apply``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from lance_format._pb import transaction_pb2
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_from_pb, schema_to_pb
from lance_format.table.codec.fragments import (
    base_path_from_pb,
    base_path_to_pb,
    fragment_from_pb,
    fragment_to_pb,
)
from lance_format.table.codec.indices import (
    details_from_pb,
    index_files_from_pb,
    index_from_pb,
    index_to_pb,
    uuid_from_pb,
    uuid_to_pb,
)
from lance_format.table.codec.wire import parse
from lance_format.table.models import FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction, UnknownOperation

L = LanceOperation


def _lance_schema(schema: Any) -> LanceSchema:
    return schema if isinstance(schema, LanceSchema) else LanceSchema.from_arrow(schema)


def _set_schema(msg: Any, schema: Any, with_metadata: bool) -> None:
    fields, metadata = schema_to_pb(_lance_schema(schema))
    msg.schema.extend(fields)
    if with_metadata:
        for k, v in metadata.items():
            msg.schema_metadata[k] = v if isinstance(v, bytes) else str(v).encode()


def _frags_to(target: Any, frags: Iterable[FragmentMetadata]) -> None:
    target.extend([fragment_to_pb(f) for f in frags])


# --- encoders, one per operation class ------------------------------------------------------


@functools.singledispatch
def encode_operation(op: LanceOperation.BaseOperation, pb: Any) -> None:
    """Write ``op`` into its field of the ``Transaction`` message ``pb``.

    Raises:
        InvalidInputError: for an operation class without a registered encoder.
    """
    raise InvalidInputError(f"cannot encode operation {type(op).__name__}")


@encode_operation.register
def _(op: L.Append, pb: Any) -> None:
    _frags_to(pb.append.fragments, op.fragments)


@encode_operation.register
def _(op: L.Overwrite, pb: Any) -> None:
    _frags_to(pb.overwrite.fragments, op.fragments)
    _set_schema(pb.overwrite, op.new_schema, True)
    pb.overwrite.config_upsert_values.update(dict(op.config_upsert_values or {}))
    pb.overwrite.initial_bases.extend(base_path_to_pb(b) for b in op.initial_bases)


@encode_operation.register
def _(op: L.Delete, pb: Any) -> None:
    _frags_to(pb.delete.updated_fragments, op.updated_fragments)
    pb.delete.deleted_fragment_ids.extend(op.deleted_fragment_ids)
    pb.delete.predicate = op.predicate


@encode_operation.register
def _(op: L.Update, pb: Any) -> None:
    u = pb.update
    u.removed_fragment_ids.extend(op.removed_fragment_ids)
    _frags_to(u.updated_fragments, op.updated_fragments)
    _frags_to(u.new_fragments, op.new_fragments)
    u.fields_modified.extend(op.fields_modified)
    u.fields_for_preserving_frag_bitmap.extend(op.fields_for_preserving_frag_bitmap)
    u.update_mode = (transaction_pb2.Transaction.REWRITE_COLUMNS if op.update_mode == "rewrite_columns"
                     else transaction_pb2.Transaction.REWRITE_ROWS)


@encode_operation.register
def _(op: L.Merge, pb: Any) -> None:
    _frags_to(pb.merge.fragments, op.fragments)
    _set_schema(pb.merge, op.schema, True)
    pb.merge.preserves_nullability = op.preserves_nullability


@encode_operation.register
def _(op: L.Project, pb: Any) -> None:
    _set_schema(pb.project, op.schema, False)
    pb.project.preserves_nullability = op.preserves_nullability


@encode_operation.register
def _(op: L.Restore, pb: Any) -> None:
    pb.restore.version = op.version


@encode_operation.register
def _(op: L.ReserveFragments, pb: Any) -> None:
    pb.reserve_fragments.num_fragments = op.num_fragments


@encode_operation.register
def _(op: L.Rewrite, pb: Any) -> None:
    pb.rewrite.SetInParent()
    for g in op.groups:
        grp = pb.rewrite.groups.add()
        _frags_to(grp.old_fragments, g.old_fragments)
        _frags_to(grp.new_fragments, g.new_fragments)
    for ri in op.rewritten_indices:
        r = pb.rewrite.rewritten_indices.add()
        r.old_id.uuid = uuid_to_pb(ri.old_id)
        r.new_id.uuid = uuid_to_pb(ri.new_id)
        if ri.new_index_details is not None:
            r.new_index_details.type_url = ri.new_index_details.type_url
            r.new_index_details.value = ri.new_index_details.value
        r.new_index_version = ri.new_index_version
        for f in ri.new_index_files or ():
            r.new_index_files.add(path=f.path, size_bytes=f.size_bytes)


@encode_operation.register
def _(op: L.CreateIndex, pb: Any) -> None:
    pb.create_index.SetInParent()
    pb.create_index.new_indices.extend(index_to_pb(i) for i in op.new_indices)
    pb.create_index.removed_indices.extend(index_to_pb(i) for i in op.removed_indices)


def _update_map_to(target: Any, m: LanceOperation.UpdateMap) -> None:
    target.SetInParent()  # an empty map with replace=False is still "set" (pylance writes it so)
    for key, value in m.updates.items():
        entry = target.update_entries.add(key=key)
        if value is not None:
            entry.value = value
    target.replace = m.replace


@encode_operation.register
def _(op: L.UpdateConfig, pb: Any) -> None:
    # pylance 14.0.2 writes only the newer fields (6-9), never upsert_values / delete_keys.
    u = pb.update_config
    u.SetInParent()
    for name in ("config_updates", "table_metadata_updates", "schema_metadata_updates"):
        value = getattr(op, name)
        if value is not None:
            _update_map_to(getattr(u, name), value)
    for fid, value in (op.field_metadata_updates or {}).items():
        _update_map_to(u.field_metadata_updates[fid], value)


@encode_operation.register
def _(op: UnknownOperation, pb: Any) -> None:
    target = getattr(pb, op.kind, None)
    if target is None:
        raise InvalidInputError(f"cannot encode unknown operation {op.kind!r}")
    target.SetInParent()
    target.MergeFromString(op.payload)


# --- decoders, one per operation name -------------------------------------------------------

_Decoder = Callable[[Any, str], LanceOperation.BaseOperation]


def _schema(fields: Any, metadata: Any) -> LanceSchema:
    return schema_from_pb(list(fields), dict(metadata))


def _frags(items: Any, where: str) -> list[FragmentMetadata]:
    return [fragment_from_pb(f, where) for f in items]


def _decode_rewrite(m: Any, where: str) -> LanceOperation.BaseOperation:
    groups = [L.RewriteGroup(_frags(g.old_fragments, where), _frags(g.new_fragments, where)) for g in m.groups]
    if len(m.old_fragments) or len(m.new_fragments):  # legacy single-group form
        groups.append(L.RewriteGroup(_frags(m.old_fragments, where), _frags(m.new_fragments, where)))
    rewritten = [
        L.RewrittenIndex(
            uuid_from_pb(r.old_id.uuid),
            uuid_from_pb(r.new_id.uuid),
            details_from_pb(r.new_index_details) if r.HasField("new_index_details") else None,
            r.new_index_version,
            index_files_from_pb(r.new_index_files) if len(r.new_index_files) else None,
        )
        for r in m.rewritten_indices
    ]
    return L.Rewrite(groups, rewritten)


def _update_map(m: Any) -> LanceOperation.UpdateMap:
    return L.UpdateMap({e.key: e.value if e.HasField("value") else None for e in m.update_entries}, m.replace)


def _decode_update_config(m: Any, where: str) -> LanceOperation.BaseOperation:
    # Older writers used fields 1-4; lance reads them as the newer maps (``translate_config_updates``
    # and ``translate_schema_metadata_updates`` in rust/lance-table/src/transaction/update_map.rs):
    # upserts and deletes merge, schema and field metadata replace.
    config = _update_map(m.config_updates) if m.HasField("config_updates") else None
    if config is None and (len(m.upsert_values) or len(m.delete_keys)):
        config = L.UpdateMap({**dict(m.upsert_values), **{k: None for k in m.delete_keys}})
    schema_meta = _update_map(m.schema_metadata_updates) if m.HasField("schema_metadata_updates") else None
    if schema_meta is None and len(m.schema_metadata):
        schema_meta = L.UpdateMap(dict(m.schema_metadata), replace=True)
    fields = {int(k): _update_map(v) for k, v in m.field_metadata_updates.items()}
    if not fields:
        fields = {int(k): L.UpdateMap(dict(v.metadata), replace=True) for k, v in m.field_metadata.items()}
    table_meta = _update_map(m.table_metadata_updates) if m.HasField("table_metadata_updates") else None
    return L.UpdateConfig(config, table_meta, schema_meta, fields)


def _unknown(kind: str, m: Any) -> UnknownOperation:
    # What conflict checks need to know about operations this library does not execute.
    frag_ids: frozenset[int] = frozenset()
    if kind == "data_replacement":
        frag_ids = frozenset(r.fragment_id for r in m.replacements)
    return UnknownOperation(kind, bytes(m.SerializeToString()), frag_ids)


_DECODERS: dict[str, _Decoder] = {
    "append": lambda m, w: L.Append(_frags(m.fragments, w)),
    "overwrite": lambda m, w: L.Overwrite(_schema(m.schema, m.schema_metadata), _frags(m.fragments, w),
                                          dict(m.config_upsert_values),
                                          [base_path_from_pb(b) for b in m.initial_bases]),
    "delete": lambda m, w: L.Delete(_frags(m.updated_fragments, w), list(m.deleted_fragment_ids), m.predicate),
    "update": lambda m, w: L.Update(
        list(m.removed_fragment_ids), _frags(m.updated_fragments, w), _frags(m.new_fragments, w),
        list(m.fields_modified), list(m.fields_for_preserving_frag_bitmap),
        "rewrite_columns" if m.update_mode == transaction_pb2.Transaction.REWRITE_COLUMNS else "rewrite_rows"),
    "merge": lambda m, w: L.Merge(_frags(m.fragments, w), _schema(m.schema, m.schema_metadata),
                                  m.preserves_nullability),
    "project": lambda m, w: L.Project(_schema(m.schema, {}), m.preserves_nullability),
    "restore": lambda m, w: L.Restore(m.version),
    "reserve_fragments": lambda m, w: L.ReserveFragments(m.num_fragments),
    "rewrite": _decode_rewrite,
    "update_config": _decode_update_config,
    "create_index": lambda m, w: L.CreateIndex([index_from_pb(i, w) for i in m.new_indices],
                                               [index_from_pb(i, w) for i in m.removed_indices]),
}


# --- transactions ---------------------------------------------------------------------------


def transaction_to_pb(txn: Transaction) -> Any:
    """Build the ``lance.table.Transaction`` message."""
    pb = transaction_pb2.Transaction(read_version=txn.read_version, uuid=txn.uuid, tag=txn.tag)
    pb.transaction_properties.update(dict(txn.transaction_properties))
    encode_operation(txn.operation, pb)
    return pb


def encode_transaction(txn: Transaction) -> bytes:
    """Serialize a transaction (raw protobuf, as in ``.txn`` files)."""
    return bytes(transaction_to_pb(txn).SerializeToString())


def decode_transaction(data: bytes, where: str) -> Transaction:
    """Parse ``.txn`` / inline transaction bytes.

    Raises:
        CorruptFileError: if the bytes are not a valid transaction.
    """
    pb = parse(transaction_pb2.Transaction, data, where, "transaction")
    kind = pb.WhichOneof("operation")
    if kind is None:
        raise CorruptFileError(f"{where}: transaction has no operation")
    msg = getattr(pb, kind)
    decoder = _DECODERS.get(kind)
    try:
        op = _unknown(kind, msg) if decoder is None else decoder(msg, where)
    except CorruptFileError:
        raise
    except Exception as exc:
        raise CorruptFileError(f"{where}: invalid {kind} transaction: {exc}") from exc
    return Transaction(pb.read_version, op, pb.uuid, dict(pb.transaction_properties), pb.tag)


def clone_operation(*, ref_version: int, ref_path: str, ref_name: str | None = None,
                    branch_name: str | None = None, is_shallow: bool = True) -> UnknownOperation:
    """A ``Clone`` operation (executed by the branch/clone code, not by ``build_manifest``)."""
    clone = transaction_pb2.Transaction.Clone(is_shallow=is_shallow, ref_version=ref_version, ref_path=ref_path)
    if ref_name is not None:
        clone.ref_name = ref_name
    if branch_name is not None:
        clone.branch_name = branch_name
    return UnknownOperation("clone", bytes(clone.SerializeToString()))


def operation_kind(data: bytes, where: str) -> str | None:
    """The operation name of serialized transaction bytes, without decoding the operation."""
    kind: str | None = parse(transaction_pb2.Transaction, data, where, "transaction").WhichOneof("operation")
    return kind


__all__ = [
    "clone_operation",
    "decode_transaction",
    "encode_operation",
    "encode_transaction",
    "operation_kind",
    "transaction_to_pb",
]
