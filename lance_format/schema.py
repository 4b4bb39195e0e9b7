"""Lance schemas: Arrow schema <-> tree of Lance fields with ids and logical type strings.

Mirrors what pylance 14.0.2 writes into manifests and data files:

* ids are assigned in pre-order (a parent before its children), starting at ``start_id``;
  top-level fields have ``parent_id == -1``;
* every field carries a logical type string (``"int32"``, ``"timestamp:us:UTC"``,
  ``"list.struct"``, ``"dict:string:int8:false"``, ``"fixed_size_list:float:8"`` ...);
* fixed-size lists have no child field unless their item is a struct;
* dictionaries are leaves whose value and index types live in the logical type string;
* Arrow maps are logical type ``"map"`` with one non-null ``"entries"`` struct child holding
  ``key`` (non-null) and ``value`` (2.2 files only; ``keys_sorted`` maps are refused);
* blob-v2 columns (manifest: struct ``lance.blob.v2``<data, uri>; data files: a packed struct
  with ``lance-encoding:blob``) map to :data:`BLOB_DESCRIPTION_TYPE`, which is what pylance's
  scans return for them;
* field metadata is kept as bytes; ``lance-schema:unenforced-primary-key`` also sets
  :attr:`LanceField.unenforced_primary_key`.

This module is pure Python (no protobuf); ``schema_codec`` converts to/from ``lance.file.Field``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NoReturn

import pyarrow as pa

from lance_format.errors import SchemaError, UnsupportedTypeError
from lance_format.schema_ext import ARROW_JSON, LANCE_JSON, extension_metadata, is_json

__all__ = [
    "BLOB_DESCRIPTION_TYPE",
    "BLOB_V2_EXTENSION",
    "ENCODING_DICTIONARY",
    "ENCODING_NONE",
    "ENCODING_PLAIN",
    "ENCODING_VAR_BINARY",
    "FrozenMetadata",
    "PRIMARY_KEY_METADATA_KEY",
    "LanceField",
    "LanceSchema",
    "arrow_type_to_logical",
    "is_truthy_flag",
    "logical_to_arrow_type",
]

# Values of the lance.file.Encoding enum (informational for 2.x files).
ENCODING_NONE = 0
ENCODING_PLAIN = 1
ENCODING_VAR_BINARY = 2
ENCODING_DICTIONARY = 3

PRIMARY_KEY_METADATA_KEY = "lance-schema:unenforced-primary-key"
PRIMARY_KEY_POSITION_KEY = "lance-schema:unenforced-primary-key:position"
BLOB_METADATA_KEY = "lance-encoding:blob"
BLOB_V2_EXTENSION = "lance.blob.v2"
#: What pylance 14.0.2 stores in 2.2 data files for a blob-v2 column and returns from scans.
BLOB_DESCRIPTION_TYPE = pa.struct(
    [
        pa.field("kind", pa.uint8(), nullable=False),
        pa.field("position", pa.uint64(), nullable=False),
        pa.field("size", pa.uint64(), nullable=False),
        pa.field("blob_id", pa.uint32(), nullable=False),
        pa.field("blob_uri", pa.string(), nullable=False),
    ]
)
BLOB_DESCRIPTION_METADATA = {"lance-encoding:packed": b"true", BLOB_METADATA_KEY: b"true"}
_EXT_NAME_KEY = "ARROW:extension:name"
_EXT_META_KEY = "ARROW:extension:metadata"
# pylance treats these metadata values as "true" (checked against 14.0.2).
_TRUTHY = frozenset({"true", "1", "yes"})

_SIMPLE_TO_LOGICAL: dict[pa.DataType, str] = {
    pa.null(): "null",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.uint8(): "uint8",
    pa.int16(): "int16",
    pa.uint16(): "uint16",
    pa.int32(): "int32",
    pa.uint32(): "uint32",
    pa.int64(): "int64",
    pa.uint64(): "uint64",
    pa.float16(): "halffloat",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "binary",
    pa.large_string(): "large_string",
    pa.large_binary(): "large_binary",
    pa.date32(): "date32:day",
    pa.date64(): "date64:ms",
}
_LOGICAL_TO_SIMPLE: dict[str, pa.DataType] = {v: k for k, v in _SIMPLE_TO_LOGICAL.items()}
_BINARY_LIKE = frozenset({"string", "binary", "large_string", "large_binary"})


def _path(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _unsupported(path: str, what: object) -> UnsupportedTypeError:
    return UnsupportedTypeError(f"field {path!r}: Lance cannot store Arrow type {what}")


def arrow_type_to_logical(data_type: pa.DataType, path: str = "<type>") -> str:
    """Return the Lance logical type string of an Arrow type.

    Args:
        data_type: Arrow type (extension types: pass the storage type).
        path: Field path used in error messages.

    Raises:
        UnsupportedTypeError: the type has no Lance representation.
    """
    simple = _SIMPLE_TO_LOGICAL.get(data_type)
    if simple is not None:
        return simple
    t = pa.types
    if t.is_time32(data_type):
        return f"time32:{data_type.unit}"
    if t.is_time64(data_type):
        return f"time64:{data_type.unit}"
    if t.is_timestamp(data_type):
        return f"timestamp:{data_type.unit}:{data_type.tz or '-'}"
    if t.is_duration(data_type):
        return f"duration:{data_type.unit}"
    if t.is_decimal128(data_type):
        return f"decimal:128:{data_type.precision}:{data_type.scale}"
    if t.is_decimal256(data_type):
        return f"decimal:256:{data_type.precision}:{data_type.scale}"
    if t.is_fixed_size_binary(data_type):
        return f"fixed_size_binary:{data_type.byte_width}"
    if t.is_struct(data_type):
        return "struct"
    if t.is_map(data_type):
        if data_type.keys_sorted:
            # pylance 14.0.2 refuses these too ("Unsupported map field with keys_sorted=true").
            raise UnsupportedTypeError(f"field {path!r}: Lance cannot store maps with keys_sorted=true")
        return "map"
    if t.is_list(data_type) or t.is_large_list(data_type):
        base = "list" if t.is_list(data_type) else "large_list"
        return f"{base}.struct" if t.is_struct(data_type.value_type) else base
    if t.is_fixed_size_list(data_type):
        inner = data_type.value_type
        if isinstance(inner, pa.BaseExtensionType):
            raise _unsupported(_path(path, data_type.value_field.name), inner)
        if t.is_struct(inner):
            return f"fixed_size_list:struct:{data_type.list_size}"
        if t.is_list(inner) or t.is_large_list(inner) or t.is_map(inner):
            # pylance refuses lists nested in fixed-size lists as well.
            raise _unsupported(path, data_type)
        if t.is_fixed_size_list(inner) and t.is_struct(inner.value_type):
            raise _unsupported(path, data_type)
        item = arrow_type_to_logical(inner, _path(path, data_type.value_field.name))
        return f"fixed_size_list:{item}:{data_type.list_size}"
    if t.is_dictionary(data_type):
        value = data_type.value_type
        if t.is_nested(value) or t.is_dictionary(value) or isinstance(value, pa.BaseExtensionType):
            raise _unsupported(path, data_type)
        value_logical = arrow_type_to_logical(value, path)
        index_logical = arrow_type_to_logical(data_type.index_type, path)
        # The ordered flag is always written as false by pylance.
        return f"dict:{value_logical}:{index_logical}:false"
    raise _unsupported(path, data_type)


def logical_to_arrow_type(logical: str, path: str = "<type>") -> pa.DataType:
    """Return the Arrow type of a logical type string that needs no child fields.

    ``struct``, ``list``, ``large_list`` (and their ``.struct`` forms) and
    ``fixed_size_list:struct:N`` are built from child fields by :class:`LanceSchema`.

    Raises:
        UnsupportedTypeError: unknown or malformed logical type.
    """
    simple = _LOGICAL_TO_SIMPLE.get(logical)
    if simple is not None:
        return simple
    head, _, rest = logical.partition(":")
    try:
        if head == "time32" and rest in ("s", "ms"):
            return pa.time32(rest)
        if head == "time64" and rest in ("us", "ns"):
            return pa.time64(rest)
        if head == "duration" and rest in ("s", "ms", "us", "ns"):
            return pa.duration(rest)
        if head == "timestamp":
            # The timezone may itself contain ':' ("+05:30"), so split the unit off only.
            unit, _, tz = rest.partition(":")
            if unit in ("s", "ms", "us", "ns") and tz:
                return pa.timestamp(unit, None if tz == "-" else tz)
        if head == "decimal":
            bits, precision, scale = rest.split(":")
            if bits == "128":
                return pa.decimal128(int(precision), int(scale))
            if bits == "256":
                return pa.decimal256(int(precision), int(scale))
        if head == "fixed_size_binary":
            return pa.binary(int(rest))
        if head == "fixed_size_list":
            item, _, size = rest.rpartition(":")
            if item and item != "struct":
                return pa.list_(logical_to_arrow_type(item, path), int(size))
        if head == "dict":
            value, index, _ordered = rest.rsplit(":", 2)
            return pa.dictionary(logical_to_arrow_type(index, path), logical_to_arrow_type(value, path))
    except (ValueError, TypeError, pa.ArrowException) as exc:
        raise UnsupportedTypeError(
            f"field {path!r}: malformed Lance logical type {logical!r}: {exc}"
        ) from exc
    raise UnsupportedTypeError(f"field {path!r}: unsupported Lance logical type {logical!r}")


def _encoding_for(logical: str) -> int:
    if logical.startswith("dict:"):
        return ENCODING_DICTIONARY
    if logical in _BINARY_LIKE or logical == "json":
        return ENCODING_VAR_BINARY
    if logical in ("struct", "null"):
        return ENCODING_NONE
    return ENCODING_PLAIN


class FrozenMetadata(dict[str, bytes]):
    """Read-only ``dict[str, bytes]`` used for field and schema metadata (picklable, unlike a proxy)."""

    def _readonly(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Lance schema metadata is read-only; build a new field or schema instead")

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __reduce__(self) -> tuple[type[FrozenMetadata], tuple[dict[str, bytes]]]:
        return (FrozenMetadata, (dict(self),))


def _to_bytes_map(metadata: Mapping[Any, Any] | None) -> FrozenMetadata:
    out: dict[str, bytes] = {}
    for key, value in (metadata or {}).items():
        k = key.decode() if isinstance(key, bytes) else str(key)
        out[k] = value if isinstance(value, bytes) else str(value).encode()
    return FrozenMetadata(out)


def _check_utf8_metadata(metadata: Mapping[Any, Any] | None, where: str) -> None:
    """Refuse metadata keys or values that are not UTF-8, as pylance 14.0.2 does.

    Lance stores metadata as protobuf ``map<string, bytes>``, but pylance reads values back
    as text, altering any non-UTF-8 bytes: refused before anything is written.
    """
    for key, value in (metadata or {}).items():
        for what, item in (("key", key), ("value", value)):
            if isinstance(item, bytes):
                try:
                    item.decode("utf-8")
                except UnicodeDecodeError:
                    raise SchemaError(f"{where} metadata {what} {item!r:.60} is not valid UTF-8 (pylance refuses "
                                      "it too); encode binary metadata, e.g. as base64") from None


def _pk_position(metadata: Mapping[str, bytes]) -> int | None:
    """The 1-based place in a composite primary key that field metadata names, if it names one."""
    raw = metadata.get(PRIMARY_KEY_POSITION_KEY)
    if raw is None:
        return None
    text = raw.decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def is_truthy_flag(value: bytes | None) -> bool:
    """Return whether a metadata flag value counts as true for pylance ("true", "1", "yes")."""
    return value is not None and value.decode(errors="replace").strip().lower() in _TRUTHY


class CallableStr(str):
    """A field name that can also be called (pylance's ``field.name()``) and returns itself."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class CallableInt(int):
    """A field id that can also be called (pylance's ``field.id()``) and returns itself."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class FieldTuple(tuple["LanceField", ...]):
    """Child or top-level fields; calling it returns a list (pylance's ``fields()`` / ``children()``)."""

    __slots__ = ()

    def __call__(self) -> list[LanceField]:
        return list(self)


@dataclasses.dataclass(frozen=True)
class LanceField:
    """One node of a Lance schema tree.

    Attributes:
        name: Field name (``"item"`` for list items, as named in Arrow).
        id: Field id, unique in the dataset and never reused.
        parent_id: Id of the parent field, ``-1`` at top level.
        logical_type: Lance logical type string.
        nullable: Arrow nullability.
        metadata: Arrow field metadata, values as bytes (read-only mapping).
        encoding: ``lance.file.Encoding`` value (0 none, 1 plain, 2 var-binary, 3 dictionary).
        children: Child fields (struct members, list item, struct item of a fixed-size list).
        unenforced_primary_key: Part of the unenforced primary key.
        extension_name: Arrow extension name, ``""`` if none.
    """

    name: str
    id: int
    parent_id: int
    logical_type: str
    nullable: bool = True
    metadata: Mapping[str, bytes] = dataclasses.field(default_factory=dict, hash=False)
    encoding: int = ENCODING_PLAIN
    children: tuple[LanceField, ...] = ()
    unenforced_primary_key: bool = False
    extension_name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _to_bytes_map(self.metadata))
        # Wrapped so both our attribute style (``f.name``) and pylance's methods (``f.name()``) work.
        object.__setattr__(self, "name", CallableStr(self.name))
        object.__setattr__(self, "id", CallableInt(self.id))
        object.__setattr__(self, "children", FieldTuple(self.children))

    def flat(self) -> Iterator[LanceField]:
        """Yield this field and all descendants in pre-order."""
        yield self
        for child in self.children:
            yield from child.flat()

    def arrow_type(self, path: str | None = None) -> pa.DataType:
        """Return the Arrow type of this field (extension types as their storage type)."""
        path = path or self.name
        logical = self.logical_type
        if logical == "struct" and _is_blob_v2(self):
            return BLOB_DESCRIPTION_TYPE
        if logical == "struct":
            return pa.struct([c.to_arrow(_path(path, c.name)) for c in self.children])
        if logical in ("list", "list.struct", "large_list", "large_list.struct"):
            if len(self.children) != 1:
                raise SchemaError(
                    f"field {path!r}: {logical} needs exactly one child, has {len(self.children)}"
                )
            item = self.children[0].to_arrow(_path(path, self.children[0].name))
            return pa.list_(item) if logical.startswith("list") else pa.large_list(item)
        if logical.startswith("fixed_size_list:struct:"):
            if len(self.children) != 1:
                raise SchemaError(
                    f"field {path!r}: {logical} needs exactly one child, has {len(self.children)}"
                )
            size = logical.rsplit(":", 1)[1]
            if not size.isdigit():
                raise UnsupportedTypeError(f"field {path!r}: malformed Lance logical type {logical!r}")
            return pa.list_(self.children[0].to_arrow(_path(path, self.children[0].name)), int(size))
        if logical == "map":
            return _map_type(self, path)
        if logical == "json":  # JSONB bytes in the file, read back as arrow.json text
            return pa.utf8()
        if self.children:
            raise SchemaError(f"field {path!r}: logical type {logical!r} cannot have child fields")
        return logical_to_arrow_type(logical, path)

    def is_unenforced_primary_key(self) -> bool:
        """Whether this field is part of the unenforced primary key (pylance's method)."""
        return self.unenforced_primary_key

    def is_unenforced_clustering_key(self) -> bool:
        """Whether this field is part of the unenforced clustering key (none recorded here: False)."""
        return False

    def unenforced_primary_key_position(self) -> int | None:
        """The 1-based position given in the field's metadata, or None (pylance's method)."""
        return _pk_position(self.metadata) if self.unenforced_primary_key else None

    def unenforced_clustering_key_position(self) -> int | None:
        """Position in the unenforced clustering key (none recorded here: None)."""
        return None

    def to_arrow(self, path: str | None = None) -> pa.Field:
        """Return the Arrow field (with metadata, including extension markers)."""
        data_type = self.arrow_type(path)
        metadata = dict(self.metadata)
        if data_type.equals(BLOB_DESCRIPTION_TYPE):
            # What pylance's scans return for a blob-v2 column: the descriptor, not the bytes.
            metadata = dict(BLOB_DESCRIPTION_METADATA)
        elif self.logical_type == "json":
            metadata.update({_EXT_NAME_KEY: ARROW_JSON.encode(), _EXT_META_KEY: b""})
        return pa.field(self.name, data_type, self.nullable, metadata=metadata or None)


def _field_from_arrow(
    af: pa.Field, parent_id: int, next_id: list[int], path: str, force_nullable: bool | None = None
) -> LanceField:
    field_id = next_id[0]
    next_id[0] += 1
    data_type = af.type
    _check_utf8_metadata(af.metadata, f"field {path!r}")
    metadata = dict(_to_bytes_map(af.metadata))
    extension_name = ""
    logical = ""
    if is_json(data_type):
        # pylance stores arrow.json text as JSONB bytes under logical type "json" (lance_format.jsonb)
        extension_name = LANCE_JSON
        metadata[_EXT_NAME_KEY] = extension_name.encode()
        metadata[_EXT_META_KEY] = b""
        data_type = pa.large_binary()
        logical = "json"
    elif isinstance(data_type, pa.BaseExtensionType):
        # any other extension type: its storage type plus Arrow's two metadata entries
        extension_name = data_type.extension_name
        metadata[_EXT_NAME_KEY] = extension_name.encode()
        metadata[_EXT_META_KEY] = extension_metadata(data_type, path)
        data_type = data_type.storage_type
    logical = logical or arrow_type_to_logical(data_type, path)
    children: list[LanceField] = []
    t = pa.types
    if t.is_struct(data_type):
        child_names = [data_type.field(i).name for i in range(data_type.num_fields)]
        if len(set(child_names)) != len(child_names):
            raise SchemaError(f"field {path!r}: duplicate child field names {child_names}")
        children = [
            _field_from_arrow(data_type.field(i), field_id, next_id, _path(path, data_type.field(i).name))
            for i in range(data_type.num_fields)
        ]
    elif t.is_map(data_type):
        entries = data_type.field(0)
        children = [_field_from_arrow(entries, field_id, next_id, _path(path, entries.name))]
    elif (
        t.is_list(data_type)
        or t.is_large_list(data_type)
        or (t.is_fixed_size_list(data_type) and t.is_struct(data_type.value_type))
    ):
        vf = data_type.value_field
        children = [_field_from_arrow(vf, field_id, next_id, _path(path, vf.name))]
    # A position key alone also marks a key field (pylance 14.0.2 reads it that way).
    pk = is_truthy_flag(metadata.get(PRIMARY_KEY_METADATA_KEY)) or _pk_position(metadata) is not None
    return LanceField(
        name=af.name,
        id=field_id,
        parent_id=parent_id,
        logical_type=logical,
        nullable=af.nullable if force_nullable is None else force_nullable,
        metadata=metadata,
        encoding=_encoding_for(logical),
        children=tuple(children),
        unenforced_primary_key=pk,
        extension_name=extension_name,
    )


def _map_type(field: LanceField, path: str) -> pa.DataType:
    """Arrow map of a Lance ``map`` field: one non-null ``entries`` struct child of key and value."""
    entries = field.children[0] if len(field.children) == 1 else None
    if entries is None or entries.logical_type != "struct" or len(entries.children) != 2:
        raise SchemaError(f"field {path!r}: a map needs one struct child with a key and a value field")
    key, value = entries.children
    epath = _path(path, entries.name)
    key_field = key.to_arrow(_path(epath, key.name))
    if key_field.nullable:
        raise SchemaError(f"field {path!r}: map keys must not be nullable")
    return pa.map_(key_field, value.to_arrow(_path(epath, value.name)))


def _is_blob_v2(field: LanceField) -> bool:
    """A blob-v2 column: the manifest's ``lance.blob.v2`` struct<data, uri>, or a data file's packed
    blob struct (whose descriptor children ``schema_codec`` drops)."""
    ext = field.extension_name or field.metadata.get(_EXT_NAME_KEY, b"").decode(errors="replace")
    if ext == BLOB_V2_EXTENSION:
        return True
    return not field.children and is_truthy_flag(field.metadata.get(BLOB_METADATA_KEY))


def _validate_primary_key(fields: Iterable[LanceField]) -> None:
    def walk(field: LanceField, path: str, ancestors_nullable: bool) -> None:
        nullable = ancestors_nullable or field.nullable
        if field.unenforced_primary_key:
            if field.children or field.logical_type == "struct":
                raise SchemaError(f"field {path!r}: a primary key column must be a leaf")
            if nullable:
                raise SchemaError(
                    f"field {path!r}: a primary key column and its ancestors must not be nullable"
                )
        for child in field.children:
            walk(child, _path(path, child.name), nullable)

    for f in fields:
        walk(f, f.name, False)


def _is_single_column_struct(field: LanceField) -> bool:
    if field.logical_type != "struct":
        return False
    if _is_blob_v2(field):
        return True
    return is_truthy_flag(field.metadata.get("lance-encoding:packed")) or is_truthy_flag(
        field.metadata.get("packed")
    )


def _with_arrow_extensions(schema: pa.Schema) -> pa.Schema:
    # An IPC round trip turns ARROW:extension:* metadata into registered extension types
    # (e.g. arrow.uuid); unregistered ones stay as storage type + metadata.
    return pa.ipc.read_schema(pa.py_buffer(schema.serialize()))


@dataclasses.dataclass(frozen=True)
class LanceSchema:
    """A Lance schema: top-level field trees plus schema metadata (bytes values).

    Attributes:
        fields: Top-level fields, in column order.
        metadata: Schema metadata, values as bytes (read-only mapping).
    """

    fields: tuple[LanceField, ...]
    metadata: Mapping[str, bytes] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", FieldTuple(self.fields))
        object.__setattr__(self, "metadata", _to_bytes_map(self.metadata))
        seen: set[int] = set()
        for f in self.flat():
            if f.id in seen:
                raise SchemaError(f"field {f.name!r}: duplicate field id {f.id}")
            seen.add(f.id)

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_arrow(cls, schema: pa.Schema, *, start_id: int = 0) -> LanceSchema:
        """Build a Lance schema from Arrow, assigning pre-order ids from ``start_id``.

        Raises:
            UnsupportedTypeError: a field has a type Lance cannot store (names the field path).
            SchemaError: duplicate top-level names or an invalid primary key.
        """
        names = [f.name for f in schema]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaError(f"duplicate top-level field names: {', '.join(map(repr, dupes))}")
        next_id = [start_id]
        _check_utf8_metadata(schema.metadata, "schema")
        fields = tuple(_field_from_arrow(af, -1, next_id, af.name) for af in schema)
        _validate_primary_key(fields)
        return cls(fields, _to_bytes_map(schema.metadata))

    def to_arrow(self) -> pa.Schema:
        """Return the Arrow schema (field and schema metadata included)."""
        schema = pa.schema([f.to_arrow() for f in self.fields], metadata=dict(self.metadata) or None)
        if any(f.extension_name for f in self.flat()):
            schema = _with_arrow_extensions(schema)
        return schema

    # ----------------------------------------------------------------- lookup

    def flat(self) -> list[LanceField]:
        """Return every field in pre-order (the manifest order)."""
        return [f for top in self.fields for f in top.flat()]

    def field_ids(self) -> list[int]:
        """Return every field id in pre-order."""
        return [f.id for f in self.flat()]

    def max_field_id(self) -> int:
        """Return the largest field id, or ``-1`` for an empty schema."""
        return max((f.id for f in self.flat()), default=-1)

    def field_by_id(self, field_id: int) -> LanceField:
        """Return the field with this id.

        Raises:
            SchemaError: no such field.
        """
        for f in self.flat():
            if f.id == field_id:
                return f
        raise SchemaError(f"no field with id {field_id} in schema")

    def field(self, name: str) -> LanceField:
        """Return a field by top-level name or dotted path (``"a.b"``, ``"l.item.x"``).

        Raises:
            SchemaError: no such field (pylance returns None instead).
        """
        path = name
        for f in self.fields:
            if f.name == path:
                return f
        parts = path.split(".")
        candidates: tuple[LanceField, ...] = self.fields
        found: LanceField | None = None
        for part in parts:
            found = next((c for c in candidates if c.name == part), None)
            if found is None:
                raise SchemaError(f"no field {path!r} in schema")
            candidates = found.children
        assert found is not None
        return found

    def field_case_insensitive(self, name: str) -> LanceField:
        """A field by name or dotted path: an exact match first, else one ignoring case (pylance's).

        Raises:
            SchemaError: no such field.
        """
        try:
            return self.field(name)
        except SchemaError:
            pass
        candidates: tuple[LanceField, ...] = self.fields
        found: LanceField | None = None
        for part in name.split("."):
            found = next((c for c in candidates if c.name.lower() == part.lower()), None)
            if found is None:
                raise SchemaError(f"no field {name!r} in schema (case-insensitive)") from None
            candidates = found.children
        assert found is not None
        return found

    @classmethod
    def from_pyarrow(cls, schema: pa.Schema) -> LanceSchema:
        """pylance's name for :meth:`from_arrow` (ids assigned depth-first from 0)."""
        return cls.from_arrow(schema)

    def to_pyarrow(self) -> pa.Schema:
        """pylance's name for :meth:`to_arrow`."""
        return self.to_arrow()

    def unenforced_primary_key(self) -> list[LanceField]:
        """The fields of the unenforced primary key: those with a position by position, then the others
        by field id (pylance's order)."""
        keys = [f for f in self.flat() if f.unenforced_primary_key]
        positions = {f.id: f.unenforced_primary_key_position() for f in keys}
        return sorted(keys, key=lambda f: (positions[f.id] is None, positions[f.id] or 0, f.id))

    def unenforced_clustering_key(self) -> list[LanceField]:
        """The fields of the unenforced clustering key (this library records none: empty)."""
        return []

    def path_of(self, field_id: int) -> str:
        """Return the dotted path of a field id (for messages and projections)."""

        def walk(fields: tuple[LanceField, ...], prefix: str) -> str | None:
            for f in fields:
                p = _path(prefix, f.name)
                if f.id == field_id:
                    return p
                hit = walk(f.children, p)
                if hit is not None:
                    return hit
            return None

        hit = walk(self.fields, "")
        if hit is None:
            raise SchemaError(f"no field with id {field_id} in schema")
        return hit

    def arrow_type_of(self, field: LanceField | int) -> pa.DataType:
        """Return the Arrow type of a field (or field id) of this schema."""
        f = self.field_by_id(field) if isinstance(field, int) else field
        return f.arrow_type(self.path_of(f.id))

    def leaf_fields(self) -> list[LanceField]:
        """Return fields without children, in pre-order (the 2.1+ column owners, roughly)."""
        return [f for f in self.flat() if not f.children]

    def column_fields(self, version: str | tuple[int, int]) -> list[LanceField]:
        """Return the fields that own a column in a data file of ``version``, in pre-order.

        This is what ``DataFile.fields`` lists (checked against pylance 14.0.2): in 2.0 every
        field owns a column except the descendants of fixed-size lists and packed structs; in
        2.1+ only leaves do, plus packed structs and blob-v2 structs as single columns.

        Args:
            version: ``"2.0"``, ``"2.1"``, ``"2.2"`` or a ``(major, minor)`` pair as recorded
                in ``DataFile`` (``(0, 3)`` means 2.0).
        """
        if isinstance(version, str):
            major, _, minor = version.partition(".")
            if not (major.isdigit() and minor.isdigit()):
                raise SchemaError(f"unknown data storage version {version!r}")
            pair = (int(major), int(minor))
        else:
            pair = (int(version[0]), int(version[1]))
        legacy = pair in ((2, 0), (0, 3))
        out: list[LanceField] = []

        def walk(field: LanceField) -> None:
            if _is_single_column_struct(field):
                out.append(field)
                return
            if legacy:
                out.append(field)
                if field.logical_type.startswith("fixed_size_list:"):
                    return
            elif not field.children:
                out.append(field)
            for child in field.children:
                walk(child)

        for top in self.fields:
            walk(top)
        return out

    # ----------------------------------------------------------------- derivation

    def project(self, names: Iterable[str]) -> LanceSchema:
        """Keep only the named fields, in the given order; ids are unchanged.

        Names are top-level names or dotted paths into structs (``"s.x"``); a dotted path
        keeps the ancestors with only the selected children. Schema metadata is kept.

        Raises:
            SchemaError: a name is not in the schema.
        """
        result: list[LanceField] = []
        for name in names:
            if any(f.name == name for f in self.fields):
                result.append(self.field(name))
                continue
            leaf = self.field(name)
            chain = self._ancestors(leaf.id) + [leaf]
            node = chain[-1]
            for parent in reversed(chain[:-1]):
                node = dataclasses.replace(parent, children=(node,))
            result = _merge_projected(result, node)
        seen: set[int] = set()
        for f in result:
            if f.id in seen:
                raise SchemaError(f"field {f.name!r} selected more than once")
            seen.add(f.id)
        return LanceSchema(tuple(result), self.metadata)

    def _ancestors(self, field_id: int) -> list[LanceField]:
        chain: list[LanceField] = []
        f = self.field_by_id(field_id)
        while f.parent_id != -1:
            f = self.field_by_id(f.parent_id)
            chain.append(f)
        return list(reversed(chain))

    def with_ids_like(self, existing: LanceSchema, *, next_id: int | None = None) -> LanceSchema:
        """Return this schema with ids taken from ``existing`` where the field paths match.

        Fields missing from ``existing`` get fresh pre-order ids from ``next_id`` (default
        ``existing.max_field_id() + 1``), so ids are never reused.
        """
        counter = [existing.max_field_id() + 1 if next_id is None else next_id]
        by_path = {existing.path_of(f.id): f for f in existing.flat()}

        def remap(field: LanceField, parent_id: int, path: str) -> LanceField:
            old = by_path.get(path)
            if old is not None and old.logical_type == field.logical_type:
                new_id = old.id
            else:
                new_id = counter[0]
                counter[0] += 1
            kids = tuple(remap(c, new_id, _path(path, c.name)) for c in field.children)
            return dataclasses.replace(field, id=new_id, parent_id=parent_id, children=kids)

        return LanceSchema(tuple(remap(f, -1, f.name) for f in self.fields), self.metadata)

    def check_compatible(
        self,
        other: LanceSchema | pa.Schema,
        *,
        allow_missing_nullable: bool = True,
        check_nullability: bool = False,
        ignore_order: bool = True,
    ) -> None:
        """Check that data with schema ``other`` can be appended to a dataset with this schema.

        Defaults follow pylance 14.0.2: field order and metadata are ignored, nullable fields
        (also struct members) may be missing, extra fields and type changes are refused.

        Raises:
            SchemaError: naming the first field that differs.
        """
        theirs = other.to_arrow() if isinstance(other, LanceSchema) else other
        _check_fields(
            list(self.to_arrow()),
            list(theirs),
            "",
            allow_missing_nullable=allow_missing_nullable,
            check_nullability=check_nullability,
            ignore_order=ignore_order,
        )


def _merge_projected(result: list[LanceField], node: LanceField) -> list[LanceField]:
    """Add ``node`` (an ancestor chain) to ``result``, merging into an existing same-id tree."""
    for i, f in enumerate(result):
        if f.id == node.id:
            merged = f
            for child in node.children:
                merged = dataclasses.replace(
                    merged, children=tuple(_merge_projected(list(merged.children), child))
                )
            return result[:i] + [merged] + result[i + 1 :]
    return result + [node]


def _check_fields(
    ours: list[pa.Field],
    theirs: list[pa.Field],
    prefix: str,
    *,
    allow_missing_nullable: bool,
    check_nullability: bool,
    ignore_order: bool,
) -> None:
    our_names = [f.name for f in ours]
    their_names = [f.name for f in theirs]
    unexpected = [n for n in their_names if n not in our_names]
    if unexpected:
        raise SchemaError(f"field {_path(prefix, unexpected[0])!r} is not in the dataset schema")
    missing = [f for f in ours if f.name not in their_names]
    for f in missing:
        if not (allow_missing_nullable and f.nullable):
            raise SchemaError(f"field {_path(prefix, f.name)!r} is missing from the new data")
    if not ignore_order:
        present = [n for n in our_names if n in their_names]
        if present != their_names:
            raise SchemaError(f"fields under {prefix or '<root>'!r} are in a different order: {their_names}")
    by_name = {f.name: f for f in theirs}
    for mine in ours:
        other = by_name.get(mine.name)
        if other is None:
            continue
        path = _path(prefix, mine.name)
        if check_nullability and mine.nullable != other.nullable:
            raise SchemaError(
                f"field {path!r}: nullable={other.nullable} but the dataset has nullable={mine.nullable}"
            )
        a, b = mine.type, other.type
        t = pa.types
        if t.is_struct(a) and t.is_struct(b):
            _check_fields(
                list(a),
                list(b),
                path,
                allow_missing_nullable=allow_missing_nullable,
                check_nullability=check_nullability,
                ignore_order=ignore_order,
            )
        elif (
            (t.is_list(a) and t.is_list(b))
            or (t.is_large_list(a) and t.is_large_list(b))
            or (t.is_fixed_size_list(a) and t.is_fixed_size_list(b) and a.list_size == b.list_size)
        ):
            # Item names ("item" / "element") do not matter, only the item type.
            _check_fields(
                [a.value_field],
                [b.value_field.with_name(a.value_field.name)],
                path,
                allow_missing_nullable=False,
                check_nullability=check_nullability,
                ignore_order=ignore_order,
            )
        elif a != b:
            raise SchemaError(f"field {path!r} has type {b} but the dataset has type {a}")
