"""The rows a ``nearest=`` search returns, fetched by row address.

A search returns a handful of rows spread over many fragments. Decoding one row of a column
through the file decoder costs a whole mini-block chunk and the Python around it, about the
same as decoding the fragment's column once. So fixed-width columns small enough
(:data:`COLUMN_LIMIT` per fragment) are decoded whole and kept once a second take touches them,
keyed by data file: data files never change, so the copy serves every later query and version;
numbers and vectors of numbers without nulls are then gathered with numpy across fragments. The
first take of such a column larger than :data:`WHOLE_ON_FIRST_TAKE` in a fragment takes its rows
only: a process that runs one query reads no more of it than it returns (decoding whole columns
cost a first query 10-15 ms at 100k rows, ten times more with 100k-row fragments); a smaller one
is decoded whole at once, which costs no more than the row take (~1 ms per fragment either way,
measured with 10k-row int64 fragments). Other columns (strings, lists, large vectors) are always
taken through the fragment's open readers, which are kept per dataset version.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import arrow_array, distinct, matrix, numbers
from lance_format.errors import InvalidInputError
from lance_format.table.read import FragmentScan, ReadContext

U64 = npt.NDArray[np.uint64]
#: Decoded bytes of one fragment's column above which the column is taken row by row instead.
COLUMN_LIMIT = 16 << 20
#: Decoded bytes of all kept columns (least recently used dropped first).
COLUMN_BUDGET = 256 << 20


@dataclass
class _Columns:
    arrays: OrderedDict[tuple[str, int, str, str], pa.Array] = field(default_factory=OrderedDict)
    nbytes: int = 0


_KEPT = _Columns()
#: Zero-copy numpy views of kept columns that are numbers or vectors of numbers without nulls
#: (``None``: the column has another type or nulls), keyed like ``_KEPT``; dropped with it.
_VIEWS: dict[tuple[str, int, str, str], npt.NDArray[Any] | None] = {}
#: Per dataset version: the key of each (fragment, column) in ``_KEPT`` (``None``: not kept).
_KEYS: weakref.WeakKeyDictionary[ReadContext, dict[tuple[int, str], tuple[str, int, str, str] | None]] = \
    weakref.WeakKeyDictionary()
#: Decoded bytes of one fragment's column up to which its first take decodes it whole.
WHOLE_ON_FIRST_TAKE = 256 << 10
#: Keys of ``_KEPT`` whose rows one take has read already: the next take keeps the column whole.
_TOUCHED: set[tuple[str, int, str, str]] = set()
#: Bound of ``_TOUCHED`` (cleared when reached: those columns then wait for one more take).
_TOUCHED_LIMIT = 1 << 14
#: Per dataset version: open fragment readers for the columns that are not kept whole.
_SCANS: weakref.WeakKeyDictionary[ReadContext, dict[tuple[int, tuple[str, ...]], FragmentScan]] = \
    weakref.WeakKeyDictionary()


def _row_bytes(typ: pa.DataType) -> int | None:
    """Bytes per row of a fixed-width type (vectors included), ``None`` for the others."""
    if pa.types.is_fixed_size_list(typ):
        inner = _row_bytes(typ.value_type)
        return None if inner is None else inner * typ.list_size
    if pa.types.is_boolean(typ):
        return 1
    if isinstance(typ, pa.ExtensionType) or pa.types.is_dictionary(typ) or pa.types.is_null(typ):
        return None
    try:
        bits = int(typ.bit_width)
    except ValueError:  # variable width
        return None
    return max(1, bits // 8)


def _key_of(ctx: ReadContext, frag: Any, column: str) -> tuple[str, int, str, str] | None:
    keys = _KEYS.setdefault(ctx, {})
    memo = (int(frag.id), column)
    if memo not in keys:  # which data file holds the column: once per version
        keys[memo] = _column_key(ctx, frag, column)
    return keys[memo]


def kept_column(ctx: ReadContext, frag: Any, column: str) -> pa.Array | None:
    """The whole decoded column of a fragment (decoded on first use), or ``None`` when it does
    not qualify (variable width, too large, or not stored in any data file of the fragment)."""
    key = _key_of(ctx, frag, column)
    if key is None:
        return None
    kept = _KEPT.arrays.get(key)
    if kept is not None:
        _KEPT.arrays.move_to_end(key)
        return kept
    arr = FragmentScan(ctx, frag, [column]).read(0, frag.physical_rows).column(0)
    _KEPT.arrays[key] = arr
    _KEPT.nbytes += arr.nbytes
    while _KEPT.nbytes > COLUMN_BUDGET and len(_KEPT.arrays) > 1:
        gone, old = _KEPT.arrays.popitem(last=False)
        _KEPT.nbytes -= old.nbytes
        _VIEWS.pop(gone, None)
    return arr


def _warm(ctx: ReadContext, frag: Any, column: str) -> bool:
    """Whether a take should use the fragment's whole kept column: it is kept, small
    (:data:`WHOLE_ON_FIRST_TAKE`) or a take read its rows before (then it is decoded and kept now).
    The first take of a larger column returns ``False`` and marks it, so that take reads only its rows."""
    key = _key_of(ctx, frag, column)
    if key is None:
        return False
    if key in _KEPT.arrays or key in _TOUCHED:
        return True
    width = _row_bytes(ctx.arrow_schema.field(column).type)
    if width is not None and frag.physical_rows * width <= WHOLE_ON_FIRST_TAKE:
        return True
    if len(_TOUCHED) >= _TOUCHED_LIMIT:
        _TOUCHED.clear()
    _TOUCHED.add(key)
    return False


def _numeric(typ: pa.DataType) -> bool:
    return bool(pa.types.is_integer(typ) or pa.types.is_floating(typ))


def _view(ctx: ReadContext, frag: Any, column: str) -> npt.NDArray[Any] | None:
    """The kept column as a numpy array (``[rows]`` or ``[rows, dim]`` for vectors), when it
    converts without a copy (numbers without nulls); ``None`` otherwise."""
    arr = kept_column(ctx, frag, column)
    if arr is None:
        return None
    key = _KEYS[ctx][(int(frag.id), column)]
    assert key is not None
    if key in _VIEWS:
        return _VIEWS[key]
    out: npt.NDArray[Any] | None = None
    typ = arr.type
    # views of the buffers (lance_format/arrays.py): Array.to_numpy would import pandas on a first query
    if arr.null_count == 0 and _numeric(typ):
        out = numbers(arr)
    elif arr.null_count == 0 and pa.types.is_fixed_size_list(typ) and _numeric(typ.value_type):
        out = matrix(arr)
    _VIEWS[key] = out
    return out


def _gathered(ctx: ReadContext, addrs: U64, column: str, typ: pa.DataType) -> pa.Array | None:
    """The column at ``addrs`` gathered with numpy from the kept views (one small take per
    fragment instead of an Arrow take and a table per fragment), or ``None`` when a fragment's
    column has no view."""
    frag_of = addrs >> np.uint64(32)
    offsets = (addrs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    out: npt.NDArray[Any] | None = None
    for fid in distinct(frag_of).tolist():
        frag = ctx.manifest.fragment(int(fid))
        assert frag is not None  # candidates only come from live fragments
        view = _view(ctx, frag, column)
        if view is None:
            return None
        if out is None:
            out = np.empty((addrs.size, *view.shape[1:]), view.dtype)
        hit = frag_of == fid
        out[hit] = view[offsets[hit]]
    assert out is not None
    if out.ndim == 2:
        return pa.FixedSizeListArray.from_arrays(arrow_array(out.reshape(-1), typ.value_type), type=typ)
    return arrow_array(out, typ)


def _column_key(ctx: ReadContext, frag: Any, column: str) -> tuple[str, int, str, str] | None:
    width = _row_bytes(ctx.arrow_schema.field(column).type)
    if width is None or frag.physical_rows * width > COLUMN_LIMIT:
        return None
    try:
        path = FragmentScan(ctx, frag, [column]).data_file_of(column).path
    except InvalidInputError:  # absent from this fragment: read as nulls by the take path
        return None
    return (ctx.store.uri(""), int(frag.id), path, column)


def _fragment_rows(ctx: ReadContext, fid: int, offsets: U64, columns: list[str], schema: pa.Schema,
                   warm: dict[tuple[int, str], bool]) -> pa.Table:
    frag = ctx.manifest.fragment(fid)
    assert frag is not None  # candidates only come from live fragments
    arrays: dict[str, pa.Array] = {}
    idx = arrow_array(offsets.astype(np.int64))
    for c in columns:
        whole = kept_column(ctx, frag, c) if warm[(fid, c)] else None
        if whole is not None:
            arrays[c] = whole.take(idx)
    rest = [c for c in columns if c not in arrays]
    if rest:
        scans = _SCANS.setdefault(ctx, {})
        scan = scans.get((fid, tuple(rest)))
        if scan is None:  # kept per version: its open readers serve the next query's take too
            scan = scans[(fid, tuple(rest))] = FragmentScan(ctx, frag, rest)
        batch = scan.take(offsets)
        arrays.update(zip(rest, batch.columns, strict=True))
    return pa.Table.from_arrays([arrays[c] for c in columns], schema=schema)


def empty_rows(n: int) -> pa.Table:
    """A table of ``n`` rows and no columns (a search asked only for ``_distance`` / row ids)."""
    return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])


def take_addresses(ctx: ReadContext, addrs: U64, columns: Sequence[str]) -> pa.Table:
    """Rows at row addresses ``addrs`` (any order, kept), with ``columns``."""
    cols = list(columns)
    if not cols:
        return empty_rows(int(addrs.size))
    schema = pa.schema([ctx.arrow_schema.field(c) for c in cols])
    if addrs.size == 0:
        return schema.empty_table()
    fids = distinct(addrs >> np.uint64(32)).tolist()
    warm = {}
    for fid in fids:
        frag = ctx.manifest.fragment(int(fid))
        assert frag is not None  # candidates only come from live fragments
        warm.update({(int(fid), c): _warm(ctx, frag, c) for c in cols})
    if all(warm.values()):
        fast = [_gathered(ctx, addrs, c, schema.field(c).type) for c in cols]
        if all(a is not None for a in fast):
            return pa.Table.from_arrays(fast, schema=schema)
    order = np.argsort(addrs, kind="stable")
    sorted_addrs = addrs[order]
    frag_of = sorted_addrs >> np.uint64(32)
    parts = [_fragment_rows(ctx, int(fid), sorted_addrs[frag_of == fid] & np.uint64(0xFFFFFFFF), cols, schema,
                            warm) for fid in fids]
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return table.take(arrow_array(np.argsort(order, kind="stable")))
