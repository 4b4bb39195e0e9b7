"""Writer inputs as pylance 14.0.2 reads them (``python/python/lance/dataset.py``, ``_coerce_reader``).

``write_dataset(data_obj, ...)`` and ``ds.insert(data)`` take Python dicts (one column per key),
lists of dicts (one row each), pandas and polars data frames, and the Arrow shapes the table
layer streams (tables, batches, readers, datasets, scanners, iterables of batches). This module
turns the Python and data-frame shapes into Arrow with pylance's conversion rules, so the same
input gives the same schema (pandas' index columns and ``pandas`` metadata included); the rest
passes through unchanged to :func:`lance_format.table.writing.to_batch_stream`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.errors import SchemaError


def _is_data_frame(data: Any, package: str) -> bool:
    # By module name, so neither pandas nor polars is imported when absent or unused.
    return type(data).__module__.split(".")[0] == package and type(data).__name__ == "DataFrame"


def coerce_write_input(data: Any, schema: pa.Schema | None) -> Any:
    """``data`` as an Arrow value the table layer streams, converted as pylance converts it.

    Args:
        data: What the user passed as ``data_obj``.
        schema: The ``schema=`` argument (dict, list-of-dict and pandas inputs are built with it,
            as pylance builds them).

    Returns:
        A ``pyarrow.Table`` for dicts, lists of dicts and data frames; ``data`` itself otherwise.

    Raises:
        SchemaError: if the values do not fit ``schema``.
    """
    try:
        if isinstance(data, dict):
            return pa.Table.from_pydict(data, schema=schema)
        if isinstance(data, list) and data and isinstance(data[0], dict):
            return pa.Table.from_pylist(data, schema=schema)
        if _is_data_frame(data, "pandas"):
            # pylance keeps pyarrow's default index handling: a RangeIndex becomes metadata, any
            # other index a ``__index_level_0__`` column.
            return pa.Table.from_pandas(data, schema=schema)
        if _is_data_frame(data, "polars"):
            return data.to_arrow()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError) as exc:
        raise SchemaError(f"write_dataset(): cannot convert the {type(data).__name__} input to Arrow"
                          f"{'' if schema is None else f' with schema {schema}'}: {exc}") from exc
    return data


__all__ = ["coerce_write_input"]
