"""Checks of public-API arguments: type and range, before anything is read or written.

pylance's native layer refuses a wrong type or an out-of-range number when it converts
the Python value (``limit`` is an ``i64``, ``batch_size`` a ``u32``-sized count,
``fragment_id`` a ``u64``, ``storage_options`` a ``dict[str, str]``). These helpers
refuse the same values with an :class:`InvalidInputError` that names the argument,
instead of a bare ``TypeError``/``OverflowError`` from deep inside a read, or a silent
wrap-around. They only look at the value (no I/O), so they are cheap on hot paths.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_format.errors import InvalidInputError

I64_MAX = 2**63 - 1
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def integer(value: Any, name: str, *, minimum: int = 0, maximum: int = I64_MAX) -> int:
    """``value`` as an int in ``[minimum, maximum]`` (Python and NumPy integers; not floats or strings).

    Raises:
        InvalidInputError: naming ``name`` for another type or a value out of range.
    """
    if isinstance(value, int):  # the common case first (bool is an int, as in pylance)
        number = value
    else:
        try:
            number = operator.index(value)
        except TypeError:
            raise InvalidInputError(f"{name} must be an integer, got {type(value).__name__} {_show(value)}") from None
    if not minimum <= number <= maximum:
        raise InvalidInputError(f"{name} must be between {minimum} and {maximum}, got {number}")
    return int(number)


def optional_integer(value: Any, name: str, *, minimum: int = 0, maximum: int = I64_MAX) -> int | None:
    """:func:`integer`, with ``None`` passed through."""
    return None if value is None else integer(value, name, minimum=minimum, maximum=maximum)


def real(value: Any, name: str) -> float:
    """``value`` as a float (ints and floats; not strings).

    Raises:
        InvalidInputError: naming ``name``.
    """
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(operator.index(value)) if not hasattr(value, "__float__") else float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a number, got {type(value).__name__} {_show(value)}") from None


def flag(value: Any, name: str) -> bool | None:
    """A ``bool`` or ``None``; pylance refuses other truthy values (``"yes"``, ``1``).

    Raises:
        InvalidInputError: naming ``name``.
    """
    if value is None or isinstance(value, bool):
        return value
    raise InvalidInputError(f"{name} must be a bool, got {type(value).__name__} {_show(value)}")


def string(value: Any, name: str) -> str:
    """``value`` if it is a ``str``.

    Raises:
        InvalidInputError: naming ``name``.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__} {_show(value)}")
    return value


def string_list(value: Any, name: str) -> list[str]:
    """A list or tuple of strings (a lone string is refused: it is not a list of names).

    Raises:
        InvalidInputError: naming ``name`` and the offending item.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInputError(f"{name} must be a list of strings, got {type(value).__name__} {_show(value)}")
    for item in value:
        if not isinstance(item, str):
            raise InvalidInputError(f"{name} must be a list of strings, got item {_show(item)} "
                                    f"({type(item).__name__})")
    return list(value)


def string_map(value: Any, name: str) -> dict[str, str]:
    """A mapping of strings to strings (``storage_options``, ``transaction_properties``, ``updates``).

    Raises:
        InvalidInputError: naming ``name`` and the offending key or value.
    """
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{name} must be a dict of strings, got {type(value).__name__} {_show(value)}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{name} keys must be strings, got {_show(key)} ({type(key).__name__})")
        if not isinstance(item, str):
            raise InvalidInputError(f"{name}[{key!r}] must be a string, got {type(item).__name__} {_show(item)}")
    return dict(value)


def columns(value: Any, name: str = "columns") -> None:
    """Check the shape of a projection: ``None``, a list/tuple of names, or ``{name: SQL}``.

    Names themselves (unknown, duplicated) are checked by the projection planner.

    Raises:
        InvalidInputError: naming ``name``.
    """
    if value is None:
        return
    if isinstance(value, Mapping):
        string_map(value, name)
        return
    string_list(value, name)


def schema(value: Any, name: str = "schema") -> pa.Schema | None:
    """``None`` or a ``pyarrow.Schema``.

    Raises:
        InvalidInputError: naming ``name``.
    """
    if value is not None and not isinstance(value, pa.Schema):
        raise InvalidInputError(f"{name} must be a pyarrow.Schema, got {type(value).__name__} {_show(value)}")
    return value


def write_options(*, schema_arg: Any = None, max_rows_per_file: Any = 1, max_rows_per_group: Any = 1,
                  max_bytes_per_file: Any = 1, data_storage_version: Any = None, commit_message: Any = None,
                  transaction_properties: Any = None) -> None:
    """Check ``write_dataset``'s keyword arguments as pylance converts them (nothing is written yet).

    Counts are ``u64`` (positive here: a zero row or byte budget cannot write a file),
    ``data_storage_version`` and ``commit_message`` strings, ``transaction_properties`` a
    ``dict[str, str]`` and ``schema`` a ``pyarrow.Schema``. The URI and ``storage_options``
    are checked by :func:`lance_format.storage.open_store`.

    Raises:
        InvalidInputError: naming the argument.
    """
    schema(schema_arg, "write_dataset(): schema")
    for name, value in (("max_rows_per_file", max_rows_per_file), ("max_rows_per_group", max_rows_per_group),
                        ("max_bytes_per_file", max_bytes_per_file)):
        integer(value, f"write_dataset(): {name}", minimum=1, maximum=U64_MAX)
    if data_storage_version is not None:
        string(data_storage_version, "write_dataset(): data_storage_version")
    if commit_message is not None:
        string(commit_message, "write_dataset(): commit_message")
    if transaction_properties is not None:
        string_map(transaction_properties, "write_dataset(): transaction_properties")


def as_text(metadata: Mapping[str, bytes]) -> dict[str, str]:
    """Schema or field metadata with text values (what pylance returns)."""
    return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in metadata.items()}


__all__ = [
    "as_text",
    "I64_MAX",
    "U32_MAX",
    "U64_MAX",
    "columns",
    "flag",
    "integer",
    "optional_integer",
    "real",
    "schema",
    "string",
    "string_list",
    "string_map",
    "write_options",
]
