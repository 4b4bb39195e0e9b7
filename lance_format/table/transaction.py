"""Transactions: a commit described as data (an operation applied to a read version).

``LanceOperation`` mirrors pylance's namespace of operation classes. Operations we
do not execute ourselves (e.g. ``UpdateConfig`` or ``Clone`` written by pylance) are
decoded as :class:`UnknownOperation` so conflict checks can still see them.
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError
from pyroaring import BitMap

from lance_format._pb import table_pb2, transaction_pb2
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_from_pb, schema_to_pb
from lance_format.table.fragment import (
    DataFile,
    FragmentMetadata,
    PicklableModel,
    data_file_from_pb,
    data_file_to_pb,
    fragment_from_pb,
    fragment_to_pb,
)

COMMIT_MESSAGE_KEY = "__lance_commit_message"


def _frags(items: Sequence[FragmentMetadata]) -> tuple[FragmentMetadata, ...]:
    out = tuple(items)
    for f in out:
        if not isinstance(f, FragmentMetadata):
            raise TypeError(f"fragments must be FragmentMetadata, got {type(f).__name__}")
    return out


@dataclass(frozen=True)
class Index(PicklableModel):
    """Metadata of one index segment (``lance.table.IndexMetadata``)."""

    uuid: str
    name: str
    fields: tuple[int, ...]
    dataset_version: int
    fragment_ids: frozenset[int] | None
    index_version: int = 0
    created_at: dt.datetime | None = None
    base_id: int | None = None
    index_details: tuple[str, bytes] | None = None
    raw: Any = field(default=None, compare=False, repr=False)


def index_from_pb(pb: Any) -> Index:
    """Decode an ``IndexMetadata`` message."""
    frag_ids = frozenset(BitMap.deserialize(pb.fragment_bitmap)) if pb.fragment_bitmap else None
    created = None
    if pb.HasField("created_at"):
        created = dt.datetime.fromtimestamp(pb.created_at / 1000, tz=dt.UTC)
    details = None
    if pb.HasField("index_details"):
        details = (pb.index_details.type_url, pb.index_details.value)
    return Index(
        uuid=str(_uuid.UUID(bytes=pb.uuid.uuid)) if len(pb.uuid.uuid) == 16 else pb.uuid.uuid.hex(),
        name=pb.name,
        fields=tuple(pb.fields),
        dataset_version=pb.dataset_version,
        fragment_ids=frag_ids,
        index_version=pb.index_version if pb.HasField("index_version") else 0,
        created_at=created,
        base_id=pb.base_id if pb.HasField("base_id") else None,
        index_details=details,
        raw=pb,
    )


def index_to_pb(index: Index) -> Any:
    """Encode an :class:`Index` (unknown fields of ``raw`` are kept)."""
    pb = table_pb2.IndexMetadata()
    if index.raw is not None:
        pb.CopyFrom(index.raw)
    pb.uuid.uuid = _uuid.UUID(index.uuid).bytes
    pb.name = index.name
    del pb.fields[:]
    pb.fields.extend(index.fields)
    pb.dataset_version = index.dataset_version
    pb.fragment_bitmap = BitMap(sorted(index.fragment_ids)).serialize() if index.fragment_ids is not None else b""
    pb.index_version = index.index_version
    if index.created_at is not None:
        pb.created_at = int(index.created_at.timestamp() * 1000)
    if index.base_id is not None:
        pb.base_id = index.base_id
    if index.index_details is not None:
        pb.index_details.type_url, pb.index_details.value = index.index_details
    return pb


class LanceOperation:
    """Namespace of commit operations, named as in pylance."""

    class BaseOperation:
        """Base class of every operation."""

        kind: str = "base"

    @dataclass(frozen=True)
    class Append(BaseOperation):
        """Add fragments (their ids are assigned at commit)."""

        fragments: Sequence[FragmentMetadata]
        kind = "append"

        def __post_init__(self) -> None:
            object.__setattr__(self, "fragments", _frags(self.fragments))

    @dataclass(frozen=True)
    class Overwrite(BaseOperation):
        """Create the table, or replace its schema and all fragments."""

        new_schema: LanceSchema | pa.Schema
        fragments: Sequence[FragmentMetadata]
        config_upsert_values: Mapping[str, str] | None = None
        kind = "overwrite"

        def __post_init__(self) -> None:
            object.__setattr__(self, "fragments", _frags(self.fragments))
            for f in self.fragments:
                if f.deletion_file is not None:
                    raise InvalidInputError("Overwrite fragments must not carry deletion files "
                                            f"(fragment {f.id}); use Delete")

    @dataclass(frozen=True)
    class Delete(BaseOperation):
        """Replace fragments by new deletion vectors, or drop them entirely."""

        updated_fragments: Sequence[FragmentMetadata]
        deleted_fragment_ids: Sequence[int]
        predicate: str
        kind = "delete"

        def __post_init__(self) -> None:
            object.__setattr__(self, "updated_fragments", _frags(self.updated_fragments))
            object.__setattr__(self, "deleted_fragment_ids", tuple(int(i) for i in self.deleted_fragment_ids))

    @dataclass(frozen=True)
    class Update(BaseOperation):
        """Remove, update and add fragments in one step."""

        removed_fragment_ids: Sequence[int] = ()
        updated_fragments: Sequence[FragmentMetadata] = ()
        new_fragments: Sequence[FragmentMetadata] = ()
        fields_modified: Sequence[int] = ()
        fields_for_preserving_frag_bitmap: Sequence[int] = ()
        update_mode: str = ""
        kind = "update"

        def __post_init__(self) -> None:
            object.__setattr__(self, "removed_fragment_ids", tuple(int(i) for i in self.removed_fragment_ids))
            object.__setattr__(self, "updated_fragments", _frags(self.updated_fragments))
            object.__setattr__(self, "new_fragments", _frags(self.new_fragments))
            object.__setattr__(self, "fields_modified", tuple(self.fields_modified))
            object.__setattr__(self, "fields_for_preserving_frag_bitmap",
                               tuple(self.fields_for_preserving_frag_bitmap))

    @dataclass(frozen=True)
    class Merge(BaseOperation):
        """Replace the fragment list and schema (adds columns)."""

        fragments: Sequence[FragmentMetadata]
        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False
        kind = "merge"

        def __post_init__(self) -> None:
            object.__setattr__(self, "fragments", _frags(self.fragments))

    @dataclass(frozen=True)
    class Project(BaseOperation):
        """Replace the schema without touching data (drop / rename columns)."""

        schema: LanceSchema | pa.Schema
        preserves_nullability: bool = False
        kind = "project"

    @dataclass(frozen=True)
    class Restore(BaseOperation):
        """Make an old version the latest again."""

        version: int
        kind = "restore"

    @dataclass(frozen=True)
    class ReserveFragments(BaseOperation):
        """Reserve fragment ids (for a later Rewrite)."""

        num_fragments: int
        kind = "reserve_fragments"

    @dataclass(frozen=True)
    class RewriteGroup:
        """Fragments replaced by new fragments holding the same rows."""

        old_fragments: Sequence[FragmentMetadata]
        new_fragments: Sequence[FragmentMetadata]

        def __post_init__(self) -> None:
            object.__setattr__(self, "old_fragments", _frags(self.old_fragments))
            object.__setattr__(self, "new_fragments", _frags(self.new_fragments))

    @dataclass(frozen=True)
    class RewrittenIndex:
        """An index rewritten to follow a Rewrite."""

        old_id: str
        new_id: str
        new_details_type_url: str = ""
        new_details_value: bytes = b""
        new_index_version: int = 0

    @dataclass(frozen=True)
    class Rewrite(BaseOperation):
        """Compaction: groups of rewritten fragments and remapped indices."""

        groups: Sequence[LanceOperation.RewriteGroup]
        rewritten_indices: Sequence[LanceOperation.RewrittenIndex] = ()
        kind = "rewrite"

        def __post_init__(self) -> None:
            object.__setattr__(self, "groups", tuple(self.groups))
            object.__setattr__(self, "rewritten_indices", tuple(self.rewritten_indices))

    @dataclass(frozen=True)
    class CreateIndex(BaseOperation):
        """Add and/or remove index segments."""

        new_indices: Sequence[Index]
        removed_indices: Sequence[Index] = ()
        kind = "create_index"

        def __post_init__(self) -> None:
            object.__setattr__(self, "new_indices", tuple(self.new_indices))
            object.__setattr__(self, "removed_indices", tuple(self.removed_indices))


@dataclass(frozen=True)
class UnknownOperation(LanceOperation.BaseOperation, PicklableModel):
    """An operation this library decodes but does not execute (kept as protobuf)."""

    kind: str
    raw: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Transaction(PicklableModel):
    """One commit attempt: ``operation`` built against ``read_version``."""

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = field(default_factory=lambda: str(_uuid.uuid4()))
    transaction_properties: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def file_name(self) -> str:
        """``.txn`` file name relative to ``_transactions/``."""
        return f"{self.read_version}-{self.uuid}.txn"


# --- codec -------------------------------------------------------------------


def _lance_schema(schema: LanceSchema | pa.Schema) -> LanceSchema:
    return schema if isinstance(schema, LanceSchema) else LanceSchema.from_arrow(schema)


def _set_schema(msg: Any, schema: LanceSchema | pa.Schema, field_name: str, meta_name: str | None) -> None:
    fields, metadata = schema_to_pb(_lance_schema(schema))
    getattr(msg, field_name).extend(fields)
    if meta_name is not None:
        for k, v in metadata.items():
            getattr(msg, meta_name)[k] = v if isinstance(v, bytes) else str(v).encode()


def transaction_to_pb(txn: Transaction) -> Any:
    """Build the ``lance.table.Transaction`` message."""
    pb = transaction_pb2.Transaction()
    pb.read_version = txn.read_version
    pb.uuid = txn.uuid
    pb.tag = txn.tag
    pb.transaction_properties.update(dict(txn.transaction_properties))
    op = txn.operation
    L = LanceOperation
    if isinstance(op, L.Append):
        pb.append.fragments.extend(fragment_to_pb(f) for f in op.fragments)
    elif isinstance(op, L.Overwrite):
        pb.overwrite.fragments.extend(fragment_to_pb(f) for f in op.fragments)
        _set_schema(pb.overwrite, op.new_schema, "schema", "schema_metadata")
        pb.overwrite.config_upsert_values.update(dict(op.config_upsert_values or {}))
    elif isinstance(op, L.Delete):
        pb.delete.updated_fragments.extend(fragment_to_pb(f) for f in op.updated_fragments)
        pb.delete.deleted_fragment_ids.extend(op.deleted_fragment_ids)
        pb.delete.predicate = op.predicate
    elif isinstance(op, L.Update):
        u = pb.update
        u.removed_fragment_ids.extend(op.removed_fragment_ids)
        u.updated_fragments.extend(fragment_to_pb(f) for f in op.updated_fragments)
        u.new_fragments.extend(fragment_to_pb(f) for f in op.new_fragments)
        u.fields_modified.extend(op.fields_modified)
        u.fields_for_preserving_frag_bitmap.extend(op.fields_for_preserving_frag_bitmap)
        u.update_mode = (transaction_pb2.Transaction.REWRITE_COLUMNS if op.update_mode == "rewrite_columns"
                         else transaction_pb2.Transaction.REWRITE_ROWS)
    elif isinstance(op, L.Merge):
        pb.merge.fragments.extend(fragment_to_pb(f) for f in op.fragments)
        _set_schema(pb.merge, op.schema, "schema", "schema_metadata")
        pb.merge.preserves_nullability = op.preserves_nullability
    elif isinstance(op, L.Project):
        _set_schema(pb.project, op.schema, "schema", None)
        pb.project.preserves_nullability = op.preserves_nullability
    elif isinstance(op, L.Restore):
        pb.restore.version = op.version
    elif isinstance(op, L.ReserveFragments):
        pb.reserve_fragments.num_fragments = op.num_fragments
    elif isinstance(op, L.Rewrite):
        for g in op.groups:
            grp = pb.rewrite.groups.add()
            grp.old_fragments.extend(fragment_to_pb(f) for f in g.old_fragments)
            grp.new_fragments.extend(fragment_to_pb(f) for f in g.new_fragments)
        for ri in op.rewritten_indices:
            r = pb.rewrite.rewritten_indices.add()
            r.old_id.uuid = _uuid.UUID(ri.old_id).bytes
            r.new_id.uuid = _uuid.UUID(ri.new_id).bytes
            r.new_index_details.type_url = ri.new_details_type_url
            r.new_index_details.value = ri.new_details_value
            r.new_index_version = ri.new_index_version
    elif isinstance(op, L.CreateIndex):
        pb.create_index.new_indices.extend(index_to_pb(i) for i in op.new_indices)
        pb.create_index.removed_indices.extend(index_to_pb(i) for i in op.removed_indices)
    elif isinstance(op, UnknownOperation) and op.raw is not None:
        getattr(pb, op.kind).CopyFrom(op.raw)
    else:
        raise InvalidInputError(f"cannot encode operation {type(op).__name__}")
    return pb


def encode_transaction(txn: Transaction) -> bytes:
    """Serialize a transaction (raw protobuf, as in ``.txn`` files)."""
    return bytes(transaction_to_pb(txn).SerializeToString())


def parse_transaction_pb(data: bytes, where: str) -> Any:
    """Parse ``.txn`` / inline transaction bytes into the protobuf message only (no models).

    Raises:
        CorruptFileError: if the bytes are not a protobuf ``Transaction``.
    """
    pb = transaction_pb2.Transaction()
    try:
        pb.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: malformed transaction: {exc}") from exc
    return pb


def decode_transaction(data: bytes, where: str) -> Transaction:
    """Parse ``.txn`` / inline transaction bytes.

    Raises:
        CorruptFileError: if the bytes are not a valid transaction.
    """
    pb = parse_transaction_pb(data, where)
    kind = pb.WhichOneof("operation")
    if kind is None:
        raise CorruptFileError(f"{where}: transaction has no operation")
    try:
        op = _operation_from_pb(kind, getattr(pb, kind), where)
    except CorruptFileError:
        raise
    except Exception as exc:
        raise CorruptFileError(f"{where}: invalid {kind} transaction: {exc}") from exc
    return Transaction(pb.read_version, op, pb.uuid, dict(pb.transaction_properties), pb.tag, raw=pb)


def _schema(fields: Any, metadata: Any) -> LanceSchema:
    return schema_from_pb(list(fields), dict(metadata))


def _operation_from_pb(kind: str, m: Any, where: str) -> LanceOperation.BaseOperation:
    L = LanceOperation

    def frags(items: Any) -> list[FragmentMetadata]:
        return [fragment_from_pb(f, where) for f in items]

    if kind == "append":
        return L.Append(frags(m.fragments))
    if kind == "overwrite":
        return L.Overwrite(_schema(m.schema, m.schema_metadata), frags(m.fragments),
                           dict(m.config_upsert_values))
    if kind == "delete":
        return L.Delete(frags(m.updated_fragments), list(m.deleted_fragment_ids), m.predicate)
    if kind == "update":
        return L.Update(list(m.removed_fragment_ids), frags(m.updated_fragments), frags(m.new_fragments),
                        list(m.fields_modified), list(m.fields_for_preserving_frag_bitmap),
                        "rewrite_columns" if m.update_mode == 1 else "rewrite_rows")
    if kind == "merge":
        return L.Merge(frags(m.fragments), _schema(m.schema, m.schema_metadata), m.preserves_nullability)
    if kind == "project":
        return L.Project(_schema(m.schema, {}), m.preserves_nullability)
    if kind == "restore":
        return L.Restore(m.version)
    if kind == "reserve_fragments":
        return L.ReserveFragments(m.num_fragments)
    if kind == "rewrite":
        groups = [L.RewriteGroup(frags(g.old_fragments), frags(g.new_fragments)) for g in m.groups]
        if len(m.old_fragments) or len(m.new_fragments):  # legacy single-group form
            groups.append(L.RewriteGroup(frags(m.old_fragments), frags(m.new_fragments)))
        rewritten = [
            L.RewrittenIndex(str(_uuid.UUID(bytes=r.old_id.uuid)), str(_uuid.UUID(bytes=r.new_id.uuid)),
                             r.new_index_details.type_url, r.new_index_details.value, r.new_index_version)
            for r in m.rewritten_indices
        ]
        return L.Rewrite(groups, rewritten)
    if kind == "create_index":
        return L.CreateIndex([index_from_pb(i) for i in m.new_indices],
                             [index_from_pb(i) for i in m.removed_indices])
    return UnknownOperation(kind, raw=m)


def data_files_of(op: LanceOperation.BaseOperation) -> list[DataFile]:
    """Every data file an operation introduces (for validation)."""
    out: list[DataFile] = []
    for name in ("fragments", "new_fragments", "updated_fragments"):
        for frag in getattr(op, name, ()):
            out.extend(frag.files)
    return out


__all__ = [
    "COMMIT_MESSAGE_KEY",
    "Index",
    "LanceOperation",
    "Transaction",
    "UnknownOperation",
    "data_file_from_pb",
    "data_file_to_pb",
    "decode_transaction",
    "encode_transaction",
    "index_from_pb",
    "index_to_pb",
    "parse_transaction_pb",
    "transaction_to_pb",
]
