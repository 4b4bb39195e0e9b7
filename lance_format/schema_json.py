"""pylance's ``schema_to_json`` / ``json_to_schema``: an Arrow schema as a JSON-compatible dict.

The layout is upstream's ``rust/lance/src/arrow/json.rs`` (checked field by field against pylance
14.0.2): ``{"fields": [...], "metadata": {...}}``; a field is ``{"name", "type", "nullable"}`` plus
``"metadata"`` when it has any; a type is ``{"type": <Lance logical type>}`` for leaves,
``{"type": "struct" | "list" | "large_list", "fields": [...]}`` for nested types,
``{"type": "fixed_size_list", "fields": [item], "length": n}`` and
``{"type": "fixed_size_binary", "length": n}``. Maps have no JSON form (pylance refuses them too);
extension types are their storage type with the ``ARROW:extension:*`` metadata.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedTypeError
from lance_format.schema import arrow_type_to_logical, logical_to_arrow_type
from lance_format.schema_ext import EXT_META_KEY, EXT_NAME_KEY, extension_metadata

__all__ = ["json_to_schema", "schema_to_json"]


def _text_map(metadata: Any) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in (metadata or {}).items()}


def _type_json(t: pa.DataType, path: str) -> dict[str, Any]:
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_json(t.field(i), f"{path}.{t.field(i).name}")
                                             for i in range(t.num_fields)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        name = "list" if pa.types.is_list(t) else "large_list"
        return {"type": name, "fields": [_field_json(t.value_field, f"{path}.item")]}
    if pa.types.is_fixed_size_list(t):
        return {"type": "fixed_size_list", "fields": [_field_json(t.value_field, f"{path}.item")],
                "length": t.list_size}
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return {"type": "fixed_size_binary", "length": t.byte_width}
    if pa.types.is_map(t):
        raise UnsupportedTypeError(f"field {path!r}: maps have no JSON schema form (pylance refuses them too)")
    return {"type": arrow_type_to_logical(t, path)}


def _field_json(field: pa.Field, path: str) -> dict[str, Any]:
    t = field.type
    metadata = _text_map(field.metadata)
    if isinstance(t, pa.BaseExtensionType):
        metadata[EXT_NAME_KEY] = t.extension_name
        metadata[EXT_META_KEY] = extension_metadata(t, path).decode()
        t = t.storage_type
    out: dict[str, Any] = {"name": field.name, "type": _type_json(t, path), "nullable": field.nullable}
    if metadata:
        out["metadata"] = metadata
    return out


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """A pyarrow schema as a JSON-compatible dict (pylance's layout).

    Raises:
        UnsupportedTypeError: for a type with no JSON form (maps) or that Lance cannot store.
    """
    out: dict[str, Any] = {"fields": [_field_json(f, f.name) for f in schema]}
    if schema.metadata:
        out["metadata"] = _text_map(schema.metadata)
    return out


def _type_from(spec: Any, path: str) -> pa.DataType:
    if not isinstance(spec, dict) or not isinstance(spec.get("type"), str):
        raise InvalidInputError(f"field {path!r}: a type must be an object with a \"type\" string, got {spec!r}")
    name = spec["type"]
    children = [_field_from(c, path) for c in spec.get("fields", [])]
    if name == "struct":
        return pa.struct(children)
    if name in ("list", "large_list", "fixed_size_list"):
        if len(children) != 1:
            raise InvalidInputError(f"field {path!r}: a {name} needs exactly one item field")
        if name == "fixed_size_list":
            return pa.list_(children[0], int(spec.get("length", -1)))
        return pa.list_(children[0]) if name == "list" else pa.large_list(children[0])
    if name == "fixed_size_binary":
        return pa.binary(int(spec.get("length", -1)))
    return logical_to_arrow_type(name, path)


def _field_from(spec: Any, parent: str) -> pa.Field:
    if not isinstance(spec, dict):
        raise InvalidInputError(f"{parent or 'schema'}: a field must be an object, got {spec!r}")
    for key in ("name", "type", "nullable"):
        if key not in spec:
            raise InvalidInputError(f"{parent or 'schema'}: field {spec!r} is missing {key!r}")
    path = f"{parent}.{spec['name']}" if parent else str(spec["name"])
    field = pa.field(spec["name"], _type_from(spec["type"], path), bool(spec["nullable"]),
                     metadata=spec.get("metadata") or None)
    if spec.get("metadata") and EXT_NAME_KEY in spec["metadata"]:
        # a registered extension type comes back as itself (an IPC round trip resolves it)
        field = pa.ipc.read_schema(pa.py_buffer(pa.schema([field]).serialize())).field(0)
    return field


def json_to_schema(schema_json: dict[str, Any]) -> pa.Schema:
    """A pyarrow schema from :func:`schema_to_json`'s dict.

    Raises:
        InvalidInputError: for a malformed dict (a field without ``name``, ``type`` or ``nullable``).
    """
    if not isinstance(schema_json, dict) or not isinstance(schema_json.get("fields"), list):
        raise InvalidInputError(f"a JSON schema is an object with a \"fields\" list, got {schema_json!r:.80}")
    fields = [_field_from(f, "") for f in schema_json["fields"]]
    return pa.schema(fields, metadata=schema_json.get("metadata") or None)
