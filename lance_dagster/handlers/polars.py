"""polars handler: ``polars.DataFrame`` and ``polars.LazyFrame`` (needs the ``polars`` extra).

A ``LazyFrame`` input is a lazy scan of the pinned Lance version: polars pushes its column
projection down into the Lance scan (``polars.io.plugins.register_io_source``, which polars documents
as unstable; it is the only public way to back a LazyFrame by a custom source), and the partition
filter is always applied by Lance.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .base import FrameHandler, import_extra, is_class_named

if TYPE_CHECKING:
    from ..reader import ArrowSource

class PolarsHandler(FrameHandler):
    """Stores ``polars.DataFrame`` / ``LazyFrame`` (collected) and loads either, via Arrow."""

    name = "polars"
    output_types = input_types = ("polars.DataFrame", "polars.LazyFrame")

    def handles_type(self, tp: Any) -> bool:
        """``polars.DataFrame`` and ``polars.LazyFrame`` (matched without importing polars)."""
        return is_class_named(tp, "polars", "DataFrame") or is_class_named(tp, "polars", "LazyFrame")

    def handles_value(self, obj: Any) -> bool:
        """Instances of ``polars.DataFrame`` and ``polars.LazyFrame``."""
        return self.handles_type(type(obj))

    def to_arrow(self, obj: Any) -> pa.Table:
        """DataFrame -> Arrow table; a LazyFrame is collected first."""
        import_extra("polars", "polars")
        if is_class_named(type(obj), "polars", "LazyFrame"):
            obj = obj.collect()
        table: pa.Table = obj.to_arrow()
        return table

    def from_arrow(self, source: ArrowSource, tp: Any) -> Any:
        """A DataFrame of the selection, or a LazyFrame scanning it on demand."""
        pl = import_extra("polars", "polars")
        if is_class_named(tp, "polars", "LazyFrame"):
            return _lazy_scan(pl, source)
        return pl.from_arrow(source.to_table())


def _lazy_scan(pl: Any, source: ArrowSource) -> Any:
    from polars.io.plugins import register_io_source

    schema = pl.from_arrow(source.schema.empty_table()).schema

    def scan(with_columns: list[str] | None, predicate: Any, n_rows: int | None,
             batch_size: int | None) -> Iterator[Any]:
        left = n_rows
        for batch in source.batches(with_columns):
            frame = pl.from_arrow(batch)
            if predicate is not None:
                frame = frame.filter(predicate)
            if left is not None:
                frame = frame.head(left)
                left -= frame.height
            yield frame
            if left is not None and left <= 0:
                return

    return register_io_source(scan, schema=schema, explain_name="lance",
                              explain_detail=f"{source.uri} version {source.version}")
