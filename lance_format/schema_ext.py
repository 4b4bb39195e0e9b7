"""Arrow extension types in Lance files: their stored metadata and their storage arrays.

pylance keeps any Arrow extension type it is given (``arrow.fixed_shape_tensor``, ``arrow.uuid``,
``arrow.bool8``, ``arrow.opaque``, Python-defined ones ...) as its storage type plus two field
metadata entries, ``ARROW:extension:name`` and ``ARROW:extension:metadata``; reads give the
extension type back (checked against pylance 14.0.2 both ways). ``arrow.json`` is the exception:
it is stored as logical type ``json`` / extension ``lance.json`` with JSONB bytes
(:mod:`lance_format.jsonb`) and read back as ``arrow.json`` text.

Encoders and decoders only see storage types: the file writer converts batches with
:func:`to_storage` and the file reader decodes with :func:`storage_schema` and wraps the result
with :func:`from_storage`. Extension types are handled on top-level columns (where pylance users
put them); one nested inside a struct or list is stored as its storage type.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.errors import UnsupportedTypeError
from lance_format.lazy import OnFirstUse

if TYPE_CHECKING:
    from lance_format import jsonb as _jsonb
else:  # only JSON columns need the JSONB codec: a table without one never loads it
    _jsonb = OnFirstUse("lance_format.jsonb")

__all__ = [
    "ARROW_JSON",
    "EXT_META_KEY",
    "EXT_NAME_KEY",
    "LANCE_JSON",
    "extension_metadata",
    "from_storage",
    "is_json",
    "storage_schema",
    "to_storage",
]

EXT_NAME_KEY = "ARROW:extension:name"
EXT_META_KEY = "ARROW:extension:metadata"
#: Arrow's canonical JSON text type, and the name Lance stores JSONB columns under.
ARROW_JSON = "arrow.json"
LANCE_JSON = "lance.json"


class _CSchema(ctypes.Structure):
    # The Arrow C data interface's ArrowSchema (arrow/c/abi.h); only ``metadata`` is read.
    _fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_void_p),
                ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
                ("dictionary", ctypes.c_void_p), ("release", ctypes.c_void_p), ("private_data", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _c_metadata(data_type: pa.DataType) -> dict[bytes, bytes]:
    """The metadata Arrow exports with a type through the C data interface.

    pyarrow has no Python accessor for the serialized metadata of its C++ extension types
    (fixed_shape_tensor, opaque, ...); the exported schema carries exactly the
    ``ARROW:extension:*`` pair Arrow IPC would write. The capsule owns and releases it.
    """
    capsule = data_type.__arrow_c_schema__()
    schema = _CSchema.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    out: dict[bytes, bytes] = {}
    pos = schema.metadata
    if not pos:
        return out
    count = ctypes.c_int32.from_address(pos).value
    pos += 4
    for _ in range(count):
        parts = []
        for _part in range(2):
            size = ctypes.c_int32.from_address(pos).value
            parts.append(ctypes.string_at(pos + 4, size))
            pos += 4 + size
        out[parts[0]] = parts[1]
    return out


def extension_metadata(data_type: pa.BaseExtensionType, path: str = "<type>") -> bytes:
    """The ``ARROW:extension:metadata`` bytes of an extension type, as Arrow serializes them.

    Raises:
        UnsupportedTypeError: if pyarrow cannot serialize the type.
    """
    serialize = getattr(data_type, "__arrow_ext_serialize__", None)
    if serialize is not None:
        return bytes(serialize())
    try:
        meta = _c_metadata(data_type)
    except (AttributeError, ValueError, TypeError, pa.ArrowException) as exc:
        raise UnsupportedTypeError(f"field {path!r}: extension type {data_type} cannot be serialized: {exc}") from exc
    return meta.get(EXT_META_KEY.encode(), b"")


def is_json(data_type: Any) -> bool:
    """Whether ``data_type`` is Arrow's ``arrow.json`` extension type."""
    return isinstance(data_type, pa.BaseExtensionType) and data_type.extension_name == ARROW_JSON


def _has_extension(data_type: pa.DataType) -> bool:
    if isinstance(data_type, pa.BaseExtensionType):
        return True
    return any(_has_extension(data_type.field(i).type) for i in range(data_type.num_fields))


def _storage_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every extension type in it (nested too) replaced by what the file stores."""
    if is_json(data_type):
        return pa.large_binary()
    if isinstance(data_type, pa.BaseExtensionType):
        return _storage_type(data_type.storage_type)
    if not _has_extension(data_type):
        return data_type
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_storage_type(f.type)) for f in data_type])
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_storage_type(data_type.value_type)))
    if pa.types.is_large_list(data_type):
        return pa.large_list(data_type.value_field.with_type(_storage_type(data_type.value_type)))
    if pa.types.is_fixed_size_list(data_type):
        return pa.list_(data_type.value_field.with_type(_storage_type(data_type.value_type)), data_type.list_size)
    return data_type  # maps and the rest: their extension children are not converted


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with extension types (nested too) replaced by what the file stores (itself if none)."""
    if not any(_has_extension(f.type) for f in schema):
        return schema
    return pa.schema([f.with_type(_storage_type(f.type)) for f in schema], metadata=schema.metadata)


def _validity(array: pa.Array) -> pa.Array | None:
    return array.is_null() if array.null_count else None


def _convert(array: pa.Array, logical: pa.DataType, to_file: bool, where: str) -> pa.Array:
    """Convert ``array`` between ``logical`` (which holds extension types) and its stored form.

    ``to_file``: ``array`` is of ``logical`` and becomes storage; otherwise the reverse.
    """
    if not _has_extension(logical):
        return array
    if is_json(logical):
        return _jsonb.to_jsonb_array(array, where) if to_file else _jsonb.from_jsonb_array(array, where)
    if isinstance(logical, pa.BaseExtensionType):
        if to_file:
            inner = array.storage if isinstance(array, pa.ExtensionArray) else array
            return _convert(inner, logical.storage_type, True, where)
        return pa.ExtensionArray.from_storage(logical, _convert(array, logical.storage_type, False, where))
    out_type = _storage_type(logical) if to_file else logical
    if pa.types.is_struct(logical):
        children = [_convert(array.field(i), logical.field(i).type, to_file, f"{where}.{logical.field(i).name}")
                    for i in range(logical.num_fields)]
        # StructArray.field() applies the parent's slice already
        return pa.StructArray.from_arrays(children, fields=list(out_type), mask=_validity(array))
    if pa.types.is_list(logical) or pa.types.is_large_list(logical) or pa.types.is_fixed_size_list(logical):
        values = _convert(array.values, logical.value_type, to_file, f"{where}.item")
        if pa.types.is_fixed_size_list(logical):
            if array.offset:
                values = values.slice(array.offset * logical.list_size, len(array) * logical.list_size)
            return pa.FixedSizeListArray.from_arrays(values, type=out_type, mask=_validity(array))
        cls = pa.ListArray if pa.types.is_list(logical) else pa.LargeListArray
        return cls.from_arrays(array.offsets, values, type=out_type, mask=_validity(array))
    return array


def to_storage(batch: pa.RecordBatch, where: str = "") -> pa.RecordBatch:
    """``batch`` with its extension columns (nested too) as their stored arrays (JSON as JSONB).

    Raises:
        InvalidInputError: a JSON column holds text that is not JSON (names the column and row).
    """
    schema = batch.schema
    if not any(_has_extension(f.type) for f in schema):
        return batch
    columns = [_convert(batch.column(i), f.type, True, f"{where}column {f.name!r}") for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(columns, schema=storage_schema(schema))


def from_storage(batch: pa.RecordBatch, schema: pa.Schema, where: str = "") -> pa.RecordBatch:
    """A decoded ``batch`` of storage columns as the extension types of ``schema`` (same names).

    Raises:
        CorruptFileError: a JSON column's bytes are not JSONB.
    """
    if not any(_has_extension(f.type) for f in schema):
        return batch
    columns = [_convert(batch.column(i), f.type, False, f"{where}column {f.name!r}") for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
