"""pandas handler: converts ``pandas.DataFrame`` to and from Arrow (needs the ``pandas`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .base import FrameHandler, import_extra, is_class_named

if TYPE_CHECKING:
    from ..reader import ArrowSource

class PandasHandler(FrameHandler):
    """Stores and loads ``pandas.DataFrame`` via Arrow.

    The index is not stored (Lance tables have no index); pandas' own schema annotation is
    dropped so the table reads the same from any Lance client.
    """

    name = "pandas"
    output_types = input_types = ("pandas.DataFrame",)

    def handles_type(self, tp: Any) -> bool:
        """``pandas.DataFrame`` and subclasses (matched without importing pandas)."""
        return is_class_named(tp, "pandas", "DataFrame")

    def handles_value(self, obj: Any) -> bool:
        """Instances of ``pandas.DataFrame``."""
        return is_class_named(type(obj), "pandas", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        """DataFrame -> Arrow table, without the index and without pandas schema metadata."""
        import_extra("pandas", "pandas")
        table = pa.Table.from_pandas(obj, preserve_index=False)
        meta = {k: v for k, v in (table.schema.metadata or {}).items() if k != b"pandas"}
        return table.replace_schema_metadata(meta or None)

    def from_arrow(self, source: ArrowSource, tp: Any) -> Any:
        """Arrow table -> DataFrame."""
        import_extra("pandas", "pandas")
        return source.to_table().to_pandas()
