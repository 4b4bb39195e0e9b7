"""Rust's pretty ``Debug`` layout (``{:#?}``), which pylance uses for its debug text.

Values are built from :class:`S` (structs), :class:`T` (tuple structs and enum variants with
data), :class:`U` (unit variants), dicts (maps, printed sorted), sequences, strings, ints and
bools; :func:`text` lays them out as Rust does: four spaces per level, a trailing comma after every
item, ``[]`` / ``{}`` when empty.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NONE", "S", "T", "U", "some", "text"]


@dataclasses.dataclass
class S:
    """A struct: ``Name { field: value, ... }``."""

    name: str
    fields: list[tuple[str, Any]]


@dataclasses.dataclass
class T:
    """A tuple struct or enum variant with data: ``Name(value, ...)``."""

    name: str
    items: list[Any]


@dataclasses.dataclass
class U:
    """A unit variant or a value printed as is: ``None``, ``Plain``, ``V2_2``."""

    text: str


NONE = U("None")


def some(value: Any) -> Any:
    """``Some(value)``, or ``None`` for Python's None."""
    return NONE if value is None else T("Some", [value])


def text(value: Any, indent: int = 0) -> str:
    """``value`` in Rust's pretty Debug layout, its first line unindented, nested lines from ``indent``."""
    pad, inner = " " * indent, " " * (indent + 4)
    if isinstance(value, U):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (str, bytes)):
        string = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return json.dumps(string, ensure_ascii=False)
    if isinstance(value, S):
        if not value.fields:
            return value.name
        body = "".join(f"{inner}{k}: {text(v, indent + 4)},\n" for k, v in value.fields)
        return f"{value.name} {{\n{body}{pad}}}"
    if isinstance(value, T):
        body = "".join(f"{inner}{text(v, indent + 4)},\n" for v in value.items)
        return f"{value.name}(\n{body}{pad})"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        body = "".join(f"{inner}{text(k, indent + 4)}: {text(v, indent + 4)},\n" for k, v in sorted(value.items()))
        return f"{{\n{body}{pad}}}"
    if isinstance(value, Iterable):
        items = list(value)
        if not items:
            return "[]"
        body = "".join(f"{inner}{text(v, indent + 4)},\n" for v in items)
        return f"[\n{body}{pad}]"
    return repr(value)
