"""UTF-8 validation of decoded string columns.

Lance files store string data as raw bytes; a damaged page (or a file from a buggy writer)
can hold bytes that are not UTF-8. pylance rejects such pages while decoding ("invalid
utf-8 sequence", ``rust/lance-encoding`` builds its ``StringArray`` with validation), so a
reader that passes the bytes on would return rows pylance refuses. Arrow's full validation
of a string array checks offsets and UTF-8 in one vectorised pass (several GB/s), which is
cheap next to decoding; non-string columns are never touched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import CorruptFileError


def has_strings(t: pa.DataType) -> bool:
    """Whether values of type ``t`` contain UTF-8 strings anywhere (nested types included)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return True
    if pa.types.is_dictionary(t):
        return has_strings(t.value_type)
    return any(has_strings(t.field(i).type) for i in range(t.num_fields))


def string_columns(schema: pa.Schema) -> tuple[int, ...]:
    """Positions of the top-level columns of ``schema`` that hold strings."""
    return tuple(i for i, f in enumerate(schema) if has_strings(f.type))


def check_utf8(batch: pa.RecordBatch, columns: tuple[int, ...], where: str) -> None:
    """Raise if a string value of ``batch`` (in ``columns``) is not valid UTF-8.

    Raises:
        CorruptFileError: naming ``where`` and the column.
    """
    for i in columns:
        if i >= batch.num_columns:
            continue
        column = batch.column(i)
        try:
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                problem = string_problem(column)
                if problem is not None:
                    raise pa.ArrowInvalid(problem)
            else:
                column.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise CorruptFileError(f"{where}: column {batch.schema.field(i).name!r} holds invalid data "
                                   f"({exc})") from None


def string_problem(array: pa.Array) -> str | None:
    """What is wrong with a plain string array's offsets or UTF-8, ``None`` when nothing.

    Same verdict as ``array.validate(full=True)``, which checks each value separately (~10 ns
    a value): when the bytes between the first and last offset are all ASCII, every value is
    valid UTF-8 whatever the boundaries, and one vectorised ``max`` over them says so.
    """
    if len(array) == 0:
        return None
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets_buf, data_buf = array.buffers()[1], array.buffers()[2]
    if offsets_buf is None:
        return "string array without offsets"
    # compared in their stored width: no int64 copy of the offsets
    offsets: npt.NDArray[Any] = np.frombuffer(offsets_buf, dtype=width)[
        array.offset: array.offset + len(array) + 1]
    size = 0 if data_buf is None else data_buf.size
    if len(offsets) != len(array) + 1:
        return "string offsets point outside the data buffer"
    first, last = int(offsets[0]), int(offsets[-1])
    if first < 0 or last > size:
        return "string offsets point outside the data buffer"
    if np.any(offsets[1:] < offsets[:-1]):
        return "string offsets are not monotonic"
    if data_buf is None or last == first:
        return None
    data = np.frombuffer(data_buf, dtype=np.uint8)[first:last]
    if int(data.max()) < 0x80:  # all ASCII (the common case): valid whatever the boundaries
        return None
    try:  # Arrow's per-value check is the fastest available for non-ASCII text
        array.validate(full=True)
    except pa.ArrowInvalid as exc:
        return str(exc)
    return None


__all__ = ["check_utf8", "has_strings", "string_columns", "string_problem"]
