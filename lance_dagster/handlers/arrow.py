"""PyArrow handler: ``pa.Table`` and ``pa.RecordBatchReader`` (streamed, never fully materialized)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .base import FrameHandler

if TYPE_CHECKING:
    from ..reader import ArrowSource


class ArrowHandler(FrameHandler):
    """Stores and loads Arrow tables and record batch readers unchanged."""

    name = "pyarrow"
    output_types = ("pyarrow.Table", "pyarrow.RecordBatchReader", "pyarrow.RecordBatch")
    input_types = ("pyarrow.Table (also for untyped inputs)", "pyarrow.RecordBatchReader")

    def handles_type(self, tp: Any) -> bool:
        """Arrow tables and readers; also the default for untyped (``Any``) inputs."""
        return tp in (pa.Table, pa.RecordBatchReader, Any, None, object)

    def handles_value(self, obj: Any) -> bool:
        """Arrow tables, record batch readers and single record batches."""
        return isinstance(obj, (pa.Table, pa.RecordBatchReader, pa.RecordBatch))

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """Return the object itself (a single batch is wrapped in a table)."""
        if isinstance(obj, pa.RecordBatch):
            return pa.Table.from_batches([obj])
        if isinstance(obj, (pa.Table, pa.RecordBatchReader)):
            return obj
        raise TypeError(f"ArrowHandler cannot store {type(obj).__name__}")

    def from_arrow(self, source: ArrowSource, tp: Any) -> Any:
        """A ``RecordBatchReader`` when asked for one, else the whole selection as a ``pa.Table``."""
        if tp is pa.RecordBatchReader:
            return source.to_reader()
        return source.to_table()
