"""Convert :class:`~lance_format.schema.LanceSchema` to and from ``lance.file.Field`` messages.

Used for the manifest schema (``Manifest.fields`` / ``schema_metadata``), transaction
schemas and the ``FileDescriptor`` of data files. The field list is flat, in pre-order,
children pointing at their parent through ``parent_id``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lance_format._pb import file_pb2
from lance_format.errors import SchemaError
from lance_format.pbwire import check_wire_types
from lance_format.schema import (
    BLOB_DESCRIPTION_TYPE,
    BLOB_METADATA_KEY,
    PRIMARY_KEY_METADATA_KEY,
    LanceField,
    LanceSchema,
    is_truthy_flag,
)

__all__ = ["schema_from_pb", "schema_to_pb"]

# lance.file.Field.Type PARENT: the only value current writers use.
_FIELD_TYPE = 0
_BLOB_FIELDS = frozenset(f.name for f in BLOB_DESCRIPTION_TYPE)


def schema_to_pb(schema: LanceSchema) -> tuple[list[Any], dict[str, bytes]]:
    """Return ``(fields, metadata)``: pre-order ``file_pb2.Field`` messages and schema metadata."""
    fields: list[Any] = []
    for f in schema.flat():
        msg: Any = file_pb2.Field()
        msg.type = _FIELD_TYPE
        msg.name = f.name
        msg.id = f.id
        msg.parent_id = f.parent_id
        msg.logical_type = f.logical_type
        msg.nullable = f.nullable
        msg.encoding = f.encoding
        msg.extension_name = f.extension_name
        msg.unenforced_primary_key = f.unenforced_primary_key
        for key, value in f.metadata.items():
            msg.metadata[key] = value
        fields.append(msg)
    return fields, dict(schema.metadata)


def schema_from_pb(fields: Iterable[Any], metadata: Mapping[str, bytes] | None = None, *,
                   where: str = "schema") -> LanceSchema:
    """Rebuild a schema from a pre-order ``lance.file.Field`` list and schema metadata.

    Raises:
        SchemaError: a field refers to a parent that does not precede it, or ids repeat.
        UnsupportedTypeError: a logical type string is unknown (raised when the Arrow type
            is requested, or here for malformed nested types).
        CorruptFileError: a field message carries a known field with the wrong wire type.
    """
    # Each entry: the field's own arguments plus its (mutable) child list.
    nodes: dict[int, tuple[dict[str, Any], list[int]]] = {}
    top: list[int] = []
    blob_children = 0
    for msg in fields:
        check_wire_types(msg, where)
        fid = int(msg.id)
        if fid == -1 and int(msg.parent_id) == -1 and msg.name in _BLOB_FIELDS and blob_children:
            # pylance 14.0.2 lists a blob-v2 column's descriptor fields after its packed struct
            # with id -1 (data files only); the struct alone stands for the descriptor.
            blob_children -= 1
            continue
        blob_children = 0
        if fid in nodes:
            raise SchemaError(f"field {msg.name!r}: duplicate field id {fid}")
        parent = int(msg.parent_id)
        field_metadata = dict(msg.metadata)
        args: dict[str, Any] = {
            "name": msg.name,
            "id": fid,
            "parent_id": parent,
            "logical_type": msg.logical_type,
            "nullable": bool(msg.nullable),
            "metadata": field_metadata,
            "encoding": int(msg.encoding),
            "unenforced_primary_key": bool(msg.unenforced_primary_key)
            or is_truthy_flag(field_metadata.get(PRIMARY_KEY_METADATA_KEY)),
            "extension_name": msg.extension_name,
        }
        nodes[fid] = (args, [])
        if msg.logical_type == "struct" and is_truthy_flag(field_metadata.get(BLOB_METADATA_KEY)):
            blob_children = len(_BLOB_FIELDS)
        if parent == -1:
            top.append(fid)
        elif parent in nodes:
            nodes[parent][1].append(fid)
        else:
            raise SchemaError(f"field {msg.name!r} (id {fid}): parent id {parent} does not precede it")

    def build(fid: int) -> LanceField:
        args, kids = nodes[fid]
        return LanceField(children=tuple(build(k) for k in kids), **args)

    return LanceSchema(tuple(build(fid) for fid in top), dict(metadata or {}))
