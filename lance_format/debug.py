"""pylance's ``lance.debug`` formatters: a dataset's schema, manifest, fragments and transactions as text.

pylance prints its Rust structures with Rust's pretty ``Debug`` format (``{:#?}``); these
functions print ours in that layout, with pylance's structure and field names, so the text
reads (and, for schemas, fragments, manifests and the common transactions, compares) the same.
Positions pylance knows from the manifest file's bytes and this library does not keep
(``version_aux_data``, ``index_section``, ``transaction_section``) print as pylance prints them for a
manifest without those sections. Map entries are sorted (Rust's hash maps print in no set order).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lance_format.rust_debug import NONE as _NONE
from lance_format.rust_debug import S as _S
from lance_format.rust_debug import T as _T
from lance_format.rust_debug import U as _U
from lance_format.rust_debug import some as _some
from lance_format.rust_debug import text as _text

__all__ = ["format_fragment", "format_manifest", "format_schema", "list_transactions"]

_ENCODINGS = {1: "Plain", 2: "VarBinary", 3: "Dictionary", 4: "RLE"}


# -- our models as pylance's Rust structures --------------------------------------------------


def _field(f: Any) -> _S:
    metadata = {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for k, v in f.metadata.items()}
    encoding = _ENCODINGS.get(int(f.encoding))
    pk = metadata.get("lance-schema:unenforced-primary-key:position")
    position = int(pk) if pk is not None and pk.isdigit() else (0 if f.unenforced_primary_key else None)
    return _S("Field", [
        ("name", f.name), ("id", f.id), ("parent_id", f.parent_id),
        ("logical_type", _T("LogicalType", [f.logical_type])), ("metadata", metadata),
        ("encoding", _some(None if encoding is None else _U(encoding))), ("nullable", f.nullable),
        ("children", [_field(c) for c in f.children]), ("dictionary", _NONE),
        ("unenforced_primary_key_position", _some(position)), ("unenforced_clustering_key_position", _NONE),
    ])


def _schema(schema: Any) -> _S:
    metadata = {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                for k, v in schema.metadata.items()}
    return _S("Schema", [("fields", [_field(f) for f in schema.fields]), ("metadata", metadata)])


def _deletion(d: Any) -> Any:
    if d is None:
        return _NONE
    return _some(_S("DeletionFile", [
        ("read_version", d.read_version), ("id", d.id), ("file_type", _U(str(d.file_type).capitalize())),
        ("num_deleted_rows", _some(d.num_deleted_rows)), ("base_id", _some(d.base_id))]))


def _data_file(df: Any) -> _S:
    return _S("DataFile", [
        ("path", df.path), ("fields", list(df.fields)), ("column_indices", list(df.column_indices)),
        ("file_major_version", df.file_major_version), ("file_minor_version", df.file_minor_version),
        ("file_size_bytes", _T("CachedFileSize", [df.file_size_bytes or 0])), ("base_id", _some(df.base_id))])


def _meta_bytes(data: bytes | None) -> Any:
    return _NONE if data is None else _some(_T("Inline", [list(data)]))


def _fragment(frag: Any) -> _S:
    return _S("Fragment", [
        ("id", frag.id), ("files", [_data_file(df) for df in frag.files]), ("overlays", []),
        ("deletion_file", _deletion(frag.deletion_file)), ("row_id_meta", _meta_bytes(frag.row_id_meta)),
        ("physical_rows", _some(frag.physical_rows)),
        ("last_updated_at_version_meta", _meta_bytes(frag.last_updated_at_version_meta)),
        ("created_at_version_meta", _meta_bytes(frag.created_at_version_meta)),
    ])


def _projected(schema: Any, ids: set[int]) -> _S:
    def keep(f: Any) -> Any:
        children = [c for c in (keep(c) for c in f.children) if c is not None]
        if f.id not in ids and not children:
            return None
        return dataclasses.replace(f, children=tuple(children))

    fields = [k for k in (keep(f) for f in schema.fields) if k is not None]
    return _schema(dataclasses.replace(schema, fields=tuple(fields)))


def _writer_version(wv: Any) -> Any:
    if wv is None:
        return _NONE
    return _some(_S("WriterVersion", [("library", wv.library), ("version", wv.version),
                                      ("prerelease", _some(wv.prerelease)),
                                      ("build_metadata", _some(wv.build_metadata))]))


def _storage_version(version: str) -> _U:
    return _U("Legacy" if version in ("legacy", "0.1") else "V" + version.replace(".", "_"))


def _value(value: Any) -> Any:
    """Any operation field: fragments, schemas and index entries as pylance prints them."""
    if hasattr(value, "physical_rows") and hasattr(value, "files"):
        return _fragment(value)
    if hasattr(value, "fields") and hasattr(value, "flat"):
        return _schema(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _S(type(value).__name__, [(f.name, _value(getattr(value, f.name)))
                                         for f in dataclasses.fields(value) if f.repr and f.name != "kind"])
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_value(v) for v in value]
    if value is None:
        return _NONE
    return value


def _operation(op: Any) -> _S:
    name = type(op).__name__
    if name == "Overwrite":
        return _S("Overwrite", [
            ("fragments", [_fragment(f) for f in op.fragments]),
            ("schema", _value(op.new_schema)),
            ("config_upsert_values", _some(dict(op.config_upsert_values) if op.config_upsert_values else None)),
            ("initial_bases", _some([_value(b) for b in op.initial_bases] if op.initial_bases else None))])
    if name == "Append":
        return _S("Append", [("fragments", [_fragment(f) for f in op.fragments])])
    if name == "Delete":
        return _S("Delete", [("updated_fragments", [_fragment(f) for f in op.updated_fragments]),
                             ("deleted_fragment_ids", list(op.deleted_fragment_ids)),
                             ("predicate", op.predicate)])
    return _value(op)  # type: ignore[no-any-return]


def _transaction(txn: Any) -> str:
    props = dict(txn.transaction_properties) if txn.transaction_properties else None
    return _text(_S("Transaction", [
        ("read_version", txn.read_version), ("uuid", txn.uuid), ("operation", _operation(txn.operation)),
        ("tag", _some(txn.tag or None)), ("transaction_properties", _some(props))]), 0)


# -- the public functions -----------------------------------------------------------------------


def format_schema(dataset: Any) -> str:
    """The Lance schema of ``dataset`` (field ids, logical types, encodings) as pylance prints it."""
    return _text(_schema(dataset.lance_schema), 0)


def format_manifest(dataset: Any) -> str:
    """The whole manifest of ``dataset``'s checked-out version as pylance prints it."""
    m = dataset.manifest
    offsets = [0]
    for frag in m.fragments:
        deleted = frag.deletion_file.num_deleted_rows if frag.deletion_file is not None else 0
        offsets.append(offsets[-1] + frag.physical_rows - deleted)
    bases = {b.id: _value(b) for b in m.base_paths}
    return _text(_S("Manifest", [
        ("schema", _schema(m.schema)), ("version", m.version), ("branch", _some(m.branch)),
        ("writer_version", _writer_version(m.writer_version)),
        ("fragments", [_fragment(f) for f in m.fragments]), ("version_aux_data", 0),
        ("index_section", _NONE), ("timestamp_nanos", m.timestamp_ns), ("tag", _some(m.tag or None)),
        ("reader_feature_flags", m.reader_feature_flags), ("writer_feature_flags", m.writer_feature_flags),
        ("max_fragment_id", _some(m.max_fragment_id)), ("max_allocated_field_id", _some(m.max_allocated_field_id)),
        ("transaction_file", _some(m.transaction_file or None)),
        ("transaction_section", _some(0 if m.transaction_bytes is not None else None)),
        ("fragment_offsets", offsets), ("next_row_id", m.next_row_id),
        ("data_storage_format", _S("DataStorageFormat", [("file_format", m.data_format[0]),
                                                          ("version", _storage_version(m.data_format[1]))])),
        ("config", dict(m.config)), ("table_metadata", dict(m.table_metadata)), ("base_paths", bases),
    ]), 0)


def format_fragment(fragment: Any, dataset: Any) -> str:
    """One fragment (a ``FragmentMetadata``) with each data file's schema, as pylance prints it."""
    schema = dataset.lance_schema
    files = [_S("PrettyPrintableDataFile", [
        ("path", df.path), ("fields", list(df.fields)), ("column_indices", list(df.column_indices)),
        ("schema", _projected(schema, set(df.fields))), ("major_version", df.file_major_version),
        ("minor_version", df.file_minor_version)]) for df in fragment.files]
    return _text(_S("PrettyPrintableFragment", [
        ("id", fragment.id), ("files", files), ("deletion_file", _deletion(fragment.deletion_file)),
        ("physical_rows", _some(fragment.physical_rows))]), 0)


def list_transactions(dataset: Any, /, max_transactions: int = 10) -> list[str | None]:
    """The transactions of the checked-out version and the ones before it, newest first, as text
    (``None`` for a version without one)."""
    return [None if t is None else _transaction(t) for t in dataset.get_transactions(max_transactions)]
