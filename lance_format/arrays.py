"""numpy ⇄ Arrow for plain numbers, and numpy helpers, without the modules their usual calls load.

pyarrow imports pandas (~0.3 s of CPU on a cold process) the first time ``pa.array`` converts
a numpy array or ``Array.to_numpy`` runs, and numpy 2's ``np.unique`` imports ``numpy.ma``. A
first ``nearest=`` query would pay for both while reading a segment and building its result,
so the search path converts through Arrow buffers instead: :func:`numbers` views an array's
value buffer, :func:`arrow_array` wraps an ndarray's memory (the same values, zero-copy both
ways where the layout allows), :func:`distinct` sorts out repeats.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa


def _plain(typ: pa.DataType) -> bool:
    return bool(pa.types.is_integer(typ) or pa.types.is_floating(typ))


def numbers(col: pa.Array | pa.ChunkedArray) -> npt.NDArray[Any]:
    """The values of an integer or float column without nulls as an ndarray (a read-only view of
    its buffer when it has one chunk); other columns go through ``to_numpy``."""
    arr = col if isinstance(col, pa.Array) else (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks())
    typ = arr.type
    if not _plain(typ) or arr.null_count:
        return np.asarray(arr.to_numpy(zero_copy_only=False))
    dtype = np.dtype(typ.to_pandas_dtype())  # numpy's dtype for numbers (no pandas involved)
    buf = arr.buffers()[1]
    if buf is None or len(arr) == 0:
        return np.empty(0, dtype)
    return np.frombuffer(buf, dtype, len(arr), arr.offset * dtype.itemsize)


def matrix(col: pa.Array | pa.ChunkedArray) -> npt.NDArray[Any] | None:
    """A fixed-size-list column of numbers as ``[rows, width]`` (``None``: null lists or values)."""
    arr = col if isinstance(col, pa.Array) else (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks())
    width = int(arr.type.list_size)
    if arr.null_count:
        return None
    values = arr.values
    if values.null_count:
        return None
    out: npt.NDArray[Any] = numbers(values.slice(arr.offset * width, len(arr) * width)).reshape(len(arr), width)
    return out


def arrow_array(x: npt.NDArray[Any], typ: pa.DataType | None = None) -> pa.Array:
    """An Arrow array over the numbers of a 1-D ndarray (no nulls); ``typ`` converts first when the
    dtypes differ."""
    t = pa.from_numpy_dtype(x.dtype) if typ is None else typ
    want = np.dtype(t.to_pandas_dtype()) if _plain(t) else None
    if want is None:
        return pa.array(x, type=t)
    data = np.ascontiguousarray(x, dtype=want)
    return pa.Array.from_buffers(t, int(data.size), [None, pa.py_buffer(data)])


def arrow_mask(x: npt.NDArray[np.bool_]) -> pa.BooleanArray:
    """An Arrow boolean array (no nulls) over a 1-D bool ndarray, bits packed without pandas."""
    bits = np.packbits(np.ascontiguousarray(x, dtype=np.bool_), bitorder="little")
    out: pa.BooleanArray = pa.Array.from_buffers(pa.bool_(), int(x.size), [None, pa.py_buffer(bits)])
    return out


def fixed_size_list(x: npt.NDArray[Any], typ: pa.DataType | None = None) -> pa.FixedSizeListArray:
    """An Arrow fixed-size-list array over a 2-D ndarray of numbers (``typ``: the value type)."""
    return pa.FixedSizeListArray.from_arrays(arrow_array(np.ascontiguousarray(x).reshape(-1), typ), int(x.shape[1]))


def _bits(buf: pa.Buffer, offset: int, n: int) -> npt.NDArray[np.bool_]:
    raw = np.frombuffer(buf, np.uint8, (offset + n + 7) // 8)
    return np.unpackbits(raw, count=offset + n, bitorder="little")[offset:].view(np.bool_)


def true_mask(col: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """Where a boolean column is true (null counts as false), from its bitmaps."""
    chunks = [col] if isinstance(col, pa.Array) else col.chunks
    parts = []
    for arr in chunks:
        n = len(arr)
        if n == 0:
            continue
        bufs = arr.buffers()
        out = _bits(bufs[1], arr.offset, n)
        if arr.null_count and bufs[0] is not None:
            out = out & _bits(bufs[0], arr.offset, n)
        parts.append(out)
    if not parts:
        return np.zeros(0, np.bool_)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` sorted without repeats (1-D): ``np.unique``'s answer without its first call's
    import of ``numpy.ma`` (~17 ms of a cold process)."""
    ordered = np.sort(values, kind="stable")
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    out: npt.NDArray[Any] = ordered[keep]
    return out


def number_scalar(value: float, typ: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the integer or float type ``typ`` (``pa.scalar`` imports pandas)."""
    data = np.array([value], typ.to_pandas_dtype())
    return pa.Array.from_buffers(typ, 1, [None, pa.py_buffer(data)])[0]


def literal_scalar(value: object) -> pa.Scalar:
    """``pa.scalar(value)``, without importing pandas for str, float and int64 values.

    The item of a one-value array built from buffers; rarer values (bool, Decimal, ints beyond
    int64) still go through ``pa.scalar``.
    """
    if isinstance(value, str):
        data = value.encode()
        offsets = struct.pack("<ii", 0, len(data))
        return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]
    if type(value) is float:
        return pa.Array.from_buffers(pa.float64(), 1, [None, pa.py_buffer(struct.pack("<d", value))])[0]
    if type(value) is int and -(1 << 63) <= value < 1 << 63:  # int64, as pa.scalar infers
        return pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(struct.pack("<q", value))])[0]
    return pa.scalar(value)


#: ``False`` for compute calls (a Python ``False`` becomes ``pa.scalar(False)``: a pandas import).
FALSE_SCALAR: pa.Scalar = pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(b"\x00")])[0]


def pool_empty(n: int, dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised writable array of ``n`` values backed by Arrow's memory pool.

    A large numpy temporary is fresh memory from the OS each time, so each first touch makes the
    kernel zero its pages again (2 MiB at a time where numpy advises huge pages and transparent
    huge pages are set to ``madvise``): a first scan paid much of its system time there. Arrow's
    pool keeps and reuses freed memory, so a process zeroes it about once. Flipping numpy's
    process-wide huge-page setting instead would change the user's own arrays.
    """
    dt = np.dtype(dtype)
    if n <= 0:
        return np.empty(0, dt)
    return np.frombuffer(pa.allocate_buffer(n * dt.itemsize), dt, n)
