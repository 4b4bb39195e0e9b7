"""Transactions: a commit described as data (an operation applied to a read version).

``LanceOperation`` mirrors pylance's namespace of operation classes. Operations we
do not execute ourselves (e.g. ``DataReplacement`` or ``Clone`` written by pylance) are
decoded as :class:`UnknownOperation` so conflict checks can still see them. Plain
models: ``lance_format.table.codec.transaction`` reads and writes them.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata
from lance_format.table.models import BasePath, DataFile, FragmentMetadata
from lance_format.table.naming import transaction_file_name

#: pylance's name for :class:`IndexMetadata` in ``LanceOperation.CreateIndex``.
Index = IndexMetadata

COMMIT_MESSAGE_KEY = "__lance_commit_message"


def _frags(items: Sequence[FragmentMetadata]) -> tuple[FragmentMetadata, ...]:
    out = tuple(items)
    for f in out:
        if not isinstance(f, FragmentMetadata):
            raise TypeError(f"fragments must be FragmentMetadata, got {type(f).__name__}")
    return out


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
        #: Base paths a new multi-base dataset registers.
        initial_bases: Sequence[BasePath] = ()
        kind = "overwrite"

        def __post_init__(self) -> None:
            object.__setattr__(self, "fragments", _frags(self.fragments))
            object.__setattr__(self, "initial_bases", tuple(self.initial_bases))
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
        """An index segment rewritten (remapped) to follow a Rewrite.

        Attributes:
            old_id: Uuid of the segment being replaced.
            new_id: Uuid of the remapped segment (files under ``_indices/{new_id}/``).
            new_index_details: Details of the new segment, when they change.
            new_index_version: Index format version of the new segment.
            new_index_files: Files of the new segment with sizes, if recorded.
            covered_before: MAINT2 (issue 9): the fragments the old segment answered for
                when its stored bitmap still names the sources of a deferred compaction
                (as read through ``__lance_frag_reuse``); the new bitmap is computed from
                it. In memory only, never encoded.
        """

        old_id: str
        new_id: str
        new_index_details: IndexDetails | None = None
        new_index_version: int = 0
        new_index_files: tuple[IndexFile, ...] | None = None
        covered_before: frozenset[int] | None = field(default=None, compare=False)

    @dataclass(frozen=True)
    class Rewrite(BaseOperation):
        """Compaction: groups of rewritten fragments and remapped indices.

        Attributes:
            groups: Old fragments and the new fragments holding their rows.
            rewritten_indices: Index segments remapped to the new row addresses.
            frag_reuse_index: MAINT2 (issue 9): the ``__lance_frag_reuse`` entry of a
                compaction with ``defer_index_remap=True``; it replaces the current one.
                In memory only, never encoded into the ``.txn`` file: pylance 14.0.2 has
                the same field on its ``Operation::Rewrite`` and puts it in the manifest
                only (``rust/lance/src/dataset/transaction.rs``, decoded as ``None``).
        """

        groups: Sequence[LanceOperation.RewriteGroup]
        rewritten_indices: Sequence[LanceOperation.RewrittenIndex] = ()
        frag_reuse_index: IndexMetadata | None = field(default=None, compare=False)
        kind = "rewrite"

        def __post_init__(self) -> None:
            object.__setattr__(self, "groups", tuple(self.groups))
            object.__setattr__(self, "rewritten_indices", tuple(self.rewritten_indices))

    @dataclass(frozen=True)
    class CreateIndex(BaseOperation):
        """Add and/or remove index segments."""

        new_indices: Sequence[IndexMetadata]
        removed_indices: Sequence[IndexMetadata] = ()
        kind = "create_index"

        def __post_init__(self) -> None:
            object.__setattr__(self, "new_indices", tuple(self.new_indices))
            object.__setattr__(self, "removed_indices", tuple(self.removed_indices))


    @dataclass(frozen=True)
    class UpdateMap:
        """Edits of one string map (config, table, schema or field metadata), as pylance's.

        Attributes:
            updates: Key to new value; ``None`` deletes the key (ignored when ``replace``).
            replace: Replace the whole map by the entries that have a value.
        """

        updates: Mapping[str, str | None]
        replace: bool = False

        def __post_init__(self) -> None:
            updates = dict(self.updates)
            for key, value in updates.items():
                if not isinstance(key, str) or not (value is None or isinstance(value, str)):
                    raise InvalidInputError(f"UpdateMap entries must be str -> str | None, got "
                                            f"{key!r:.40} -> {value!r:.40}")
            object.__setattr__(self, "updates", updates)
            object.__setattr__(self, "replace", bool(self.replace))

        def apply(self, target: Mapping[str, str]) -> dict[str, str]:
            """The map ``target`` becomes (as ``apply_update_map`` in lance's ``update_map.rs``)."""
            if self.replace:
                return {k: v for k, v in self.updates.items() if v is not None}
            out = dict(target)
            for key, value in self.updates.items():
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = value
            return out

    @dataclass(frozen=True)
    class UpdateConfig(BaseOperation):
        """Change table config, table metadata, schema metadata and/or field metadata.

        Attributes:
            config_updates: Edits of the table config.
            table_metadata_updates: Edits of the table metadata.
            schema_metadata_updates: Edits of the schema metadata.
            field_metadata_updates: Edits of field metadata by field id.
        """

        config_updates: LanceOperation.UpdateMap | None = None
        table_metadata_updates: LanceOperation.UpdateMap | None = None
        schema_metadata_updates: LanceOperation.UpdateMap | None = None
        field_metadata_updates: Mapping[int, LanceOperation.UpdateMap] | None = None
        kind = "update_config"

        def __post_init__(self) -> None:
            fields = {int(k): v for k, v in (self.field_metadata_updates or {}).items()}
            for name in ("config_updates", "table_metadata_updates", "schema_metadata_updates"):
                value = getattr(self, name)
                if value is not None and not isinstance(value, LanceOperation.UpdateMap):
                    raise InvalidInputError(f"UpdateConfig.{name} must be an UpdateMap, got {type(value).__name__}")
            for fid, value in fields.items():
                if not isinstance(value, LanceOperation.UpdateMap):
                    raise InvalidInputError(f"UpdateConfig.field_metadata_updates[{fid}] must be an UpdateMap, "
                                            f"got {type(value).__name__}")
            object.__setattr__(self, "field_metadata_updates", fields)

        @property
        def touches_schema(self) -> bool:
            """Whether schema or field metadata changes (what conflicts with schema changes)."""
            return self.schema_metadata_updates is not None or bool(self.field_metadata_updates)


@dataclass(frozen=True)
class UnknownOperation(LanceOperation.BaseOperation):
    """An operation this library decodes but does not execute.

    Attributes:
        kind: The operation's name in the transaction (e.g. ``"data_replacement"``).
        payload: The operation message's wire bytes, re-encoded unchanged.
        fragment_ids: Existing fragment ids it modifies (what conflict checks need).
        config_keys: Table config keys it changes (what conflict checks need).
    """

    kind: str
    payload: bytes = field(default=b"", repr=False)
    fragment_ids: frozenset[int] = frozenset()
    config_keys: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Transaction:
    """One commit attempt: ``operation`` built against ``read_version``."""

    read_version: int
    operation: LanceOperation.BaseOperation
    uuid: str = field(default_factory=lambda: str(_uuid.uuid4()))
    transaction_properties: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""

    @property
    def file_name(self) -> str:
        """``.txn`` file name relative to ``_transactions/``."""
        return transaction_file_name(self.read_version, self.uuid)


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
    "IndexDetails",
    "IndexFile",
    "IndexMetadata",
    "LanceOperation",
    "Transaction",
    "UnknownOperation",
    "data_files_of",
]
