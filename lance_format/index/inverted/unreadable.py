"""Why an INVERTED index on a column cannot be read, for errors that say so.

pylance 14.0.2 writes index version 3 when an option changes the on-disk layout: one
document per list element (``document_granularity=LIST_ELEMENT``), the source-code analyzer
(``analyzer='code'``) or 256-document posting blocks (``block_size=256``). We read version 2,
so such a segment is skipped by queries; a full-text search on its column then reports the
index and the option instead of "no index". The option comes from the segment's
``InvertedIndexDetails``: besides the fields of ``protos/index_old.proto`` pylance records the
posting block size (field 12), the code analyzer's settings (field 13), the document
granularity (field 14, 1 = list element) and the posting format version (field 15).
"""

from __future__ import annotations

from lance_format.index import registry
from lance_format.index._compat import manifest_indices
from lance_format.index.codec import wire
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.read import ReadContext

__all__ = ["unreadable_inverted"]


def unreadable_inverted(ctx: ReadContext, column: str) -> str | None:
    """A sentence naming the INVERTED index on ``column`` we cannot read and why, if there is one.

    Args:
        ctx: The version's read context.
        column: A top-level column name.

    Returns:
        ``None`` when no unreadable INVERTED segment covers ``column``.
    """
    field = next((f for f in ctx.schema.fields if f.name == column), None)
    if field is None:
        return None
    for meta in manifest_indices(ctx.manifest):
        kind = registry.for_segment(meta)
        if kind is None or kind.family != "text" or tuple(meta.fields) != (field.id,) or kind.understands(meta):
            continue
        option = _option(meta)
        what = f"uses {option}, which" if option else f"has index version {meta.index_version}, which"
        return (f"the INVERTED index {meta.name!r} on column {column!r} exists but {what} is not supported "
                f"(index version {meta.index_version}; we read version {kind.supported_version}); rebuild "
                "it with the default options to search it here")
    return None


def _option(meta: IndexMetadata) -> str | None:
    """The build option behind a newer segment's layout, from its details (``None`` if unknown)."""
    raw = meta.index_details.value if meta.index_details is not None else b""
    found = wire.field_map(raw, f"index {meta.name!r} details")
    if found is None:
        return None
    options = []
    if found.get(14) == 1:
        options.append("document_granularity=LIST_ELEMENT")
    if found.get(1) == b"code" or 13 in found:
        options.append("analyzer='code'")
    block = found.get(12)
    if isinstance(block, int) and block != 128:
        options.append(f"block_size={block}")
    version = found.get(15)
    if not options and isinstance(version, int) and version != 2:
        options.append(f"format_version={version}")
    return ", ".join(options) or None
