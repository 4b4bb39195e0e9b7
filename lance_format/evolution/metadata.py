"""Table config and metadata edits: pylance's ``update_config`` family, one ``UpdateConfig`` commit each.

pylance 14.0.2 commits every such call as an ``UpdateConfig`` transaction, even one with no
entries (a new version either way), and writes only the newer ``UpdateMap`` fields; a ``None``
value deletes a key unless ``replace=True`` (then the map becomes exactly the listed keys with
values). Field metadata is addressed by dotted path (``"s.x"``) and stored by field id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution.arguments import as_text, string_list
from lance_format.schema import LanceSchema
from lance_format.storage import ObjectStore
from lance_format.table.commit import commit_transaction
from lance_format.table.manifest import Manifest
from lance_format.table.transaction import LanceOperation, Transaction

UpdateMap = LanceOperation.UpdateMap


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def update_map(values: Any, replace: Any, name: str) -> LanceOperation.UpdateMap:
    """``values`` (``{key: str | None}``) checked as pylance's native layer does, as an ``UpdateMap``.

    Raises:
        InvalidInputError: naming ``name`` and the offending key or value (a ``TypeError`` too).
    """
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"{name}: values must be a dict of str -> str | None, got "
                                f"{type(values).__name__} {_show(values)}")
    for key, value in values.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{name}: keys must be strings, got {_show(key)} ({type(key).__name__})")
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"{name}: value of {key!r} must be a string or None, got "
                                    f"{type(value).__name__} {_show(value)}")
    return UpdateMap(dict(values), bool(replace))


def field_id_of(schema: LanceSchema, path: str) -> int:
    """The id of the field at dotted ``path``.

    Raises:
        SchemaError: naming the path and the available fields (an ``OSError`` too, as pylance's).
    """
    try:
        return schema.field(path).id
    except SchemaError:
        available = [schema.path_of(f.id) for f in schema.flat()]
        raise SchemaError(f"Field {path!r} not found. Available fields: {available}") from None


def commit_update_config(store: ObjectStore, manifest: Manifest, op: LanceOperation.UpdateConfig) -> Manifest:
    """Commit ``op`` on top of ``manifest`` (the handle's version) and return the new manifest.

    Raises:
        CommitConflictError: when a concurrent commit edits the same keys (see ``table/conflicts``).
    """
    return commit_transaction(store, Transaction(manifest.version, op), base=manifest)


def config_op(values: Any, replace: Any) -> LanceOperation.UpdateConfig:
    """The operation of ``update_config(values, replace=...)``."""
    return LanceOperation.UpdateConfig(config_updates=update_map(values, replace, "update_config()"))


def delete_keys_op(keys: Any) -> LanceOperation.UpdateConfig:
    """The operation of ``delete_config_keys(keys)``: one valueless entry per key."""
    names = string_list(keys, "delete_config_keys(): keys")
    return LanceOperation.UpdateConfig(config_updates=UpdateMap(dict.fromkeys(names)))


def table_metadata_op(values: Any, replace: Any) -> LanceOperation.UpdateConfig:
    """The operation of ``update_metadata(values, replace=...)``."""
    return LanceOperation.UpdateConfig(table_metadata_updates=update_map(values, replace, "update_metadata()"))


def schema_metadata_op(values: Any, replace: Any) -> LanceOperation.UpdateConfig:
    """The operation of ``update_schema_metadata(values, replace=...)``."""
    return LanceOperation.UpdateConfig(
        schema_metadata_updates=update_map(values, replace, "update_schema_metadata()"))


def field_metadata_op(schema: LanceSchema, field_updates: Any, replace: Any) -> LanceOperation.UpdateConfig:
    """The operation of ``update_field_metadata({path: {key: value}}, replace=...)``.

    Raises:
        InvalidInputError: for a malformed argument.
        SchemaError: for a path the schema lacks.
    """
    if not isinstance(field_updates, Mapping):
        raise InvalidInputError(f"update_field_metadata(): field_updates must be a dict of field path -> dict, got "
                                f"{type(field_updates).__name__} {_show(field_updates)}")
    edits: dict[int, LanceOperation.UpdateMap] = {}
    for path, values in field_updates.items():
        if not isinstance(path, str):
            raise InvalidInputError(f"update_field_metadata(): field paths must be strings, got {_show(path)}")
        edits[field_id_of(schema, path)] = update_map(values, replace, f"update_field_metadata() of {path!r}")
    return LanceOperation.UpdateConfig(field_metadata_updates=edits)


__all__ = [
    "as_text",
    "commit_update_config",
    "config_op",
    "delete_keys_op",
    "field_id_of",
    "field_metadata_op",
    "schema_metadata_op",
    "table_metadata_op",
    "update_map",
]
