"""Full-zip pages: per item ``[control word][value]`` zipped into one buffer (large values).

The control word holds ``rep << bits_def | def`` in 0, 1, 2 or 4 bytes.  Fixed-width values are
stored for every visible item; variable-width values (``u32``/``u64`` length + bytes) only for
valid items.  Buffer 1, when present, holds ``rows + 1`` byte-packed offsets of each row's start.
"""

from __future__ import annotations

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import Block, Fixed, Fsl, Var, VarPackedStruct
from lance_format.file.v2_1.fsst import SymbolTable
from lance_format.file.v2_1.fsst import decode as fsst_decode
from lance_format.file.v2_1.repdef import PageData, layers_from_pb


def control_word_bytes(bits: int) -> int:
    """Bytes of a full-zip control word holding ``bits`` rep + def bits."""
    return _cw_bytes(bits)


def rep_index(buffers: list[np.ndarray], num_rows: int, data_len: int) -> np.ndarray:
    """The validated ``num_rows + 1`` row start offsets of a full-zip page (buffer 1)."""
    return _rep_index(buffers, num_rows, data_len)


def _cw_bytes(bits: int) -> int:
    if bits == 0:
        return 0
    return 1 if bits <= 8 else 2 if bits <= 16 else 4


def _read_le(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros(len(starts), np.int64)
    if width and len(starts) and int(starts.max()) + width > len(buf):
        raise CorruptFileError("full-zip item header runs past the data buffer")
    for k in range(width):
        out |= buf[starts + k].astype(np.int64) << (8 * k)
    return out


def decode_fullzip(
    fz: pb.FullZipLayout, buffers: list[np.ndarray], num_rows: int, *, exact_items: bool = True
) -> PageData:
    """Decode a whole full-zip page.

    ``exact_items=False``: the buffers hold some rows of a page with repetition (a take), whose
    item count the layout does not state; the rows' own bytes then bound the walk."""
    layers = layers_from_pb(fz.layers)
    if not buffers:
        raise CorruptFileError("full-zip page has no data buffer")
    data = buffers[0]
    bits_rep, bits_def = int(fz.bits_rep), int(fz.bits_def)
    if bits_rep > 16 or bits_def > 16:
        raise CorruptFileError("full-zip control word is too wide")
    cw = _cw_bytes(bits_rep + bits_def)
    num_items = int(fz.num_items)
    detail = fz.WhichOneof("details")
    if detail is None:
        raise CorruptFileError("full-zip layout lacks bits_per_value / bits_per_offset")
    first_list = next((i for i, layer in enumerate(layers) if layer.is_list), None)
    max_visible = (
        sum(layer.num_def_levels for layer in layers[:first_list]) if first_list is not None else 1 << 30
    )
    def_mask = (1 << bits_def) - 1
    variable = detail == "bits_per_offset"
    width = int(fz.bits_per_offset) // 8 if variable else 0
    if variable and width not in (4, 8):
        raise CorruptFileError(f"full-zip offsets of {fz.bits_per_offset} bits")
    vbytes = 0
    if not variable:
        if fz.bits_per_value % 8:
            raise UnsupportedEncodingError("full-zip values must be byte aligned")
        vbytes = int(fz.bits_per_value) // 8

    def item_size(cwv: np.ndarray, at: np.ndarray) -> np.ndarray:
        d = cwv & def_mask if bits_def else np.zeros_like(cwv)
        if variable:
            valid = d == 0
            lens = np.zeros(len(at), np.int64)
            if valid.any():
                lens[valid] = width + _read_le(data, at[valid] + cw, width)
            return cw + lens
        return cw + np.where(d <= max_visible, vbytes, 0)

    if bits_rep == 0:
        if not variable:
            stride = cw + vbytes
            if num_items * stride > len(data):
                raise CorruptFileError("full-zip fixed-width data is truncated")
            starts = np.arange(num_items, dtype=np.int64) * stride
        else:
            starts = _rep_index(buffers, num_rows, len(data))[:-1]
            if len(starts) != num_items:
                raise CorruptFileError("full-zip repetition index does not match num_items")
        cwv = _read_le(data, starts, cw)
    else:
        rows = _rep_index(buffers, num_rows, len(data))
        starts, cwv = _walk(data, rows, cw, item_size, num_items if exact_items else len(data), exact_items)
        num_items = len(starts)
    rep = (cwv >> bits_def).astype(np.uint16) if bits_rep else None
    defs = (cwv & def_mask).astype(np.uint16) if bits_def else None
    d = defs.astype(np.int64) if defs is not None else np.zeros(num_items, np.int64)
    if variable:
        valid = d == 0
        vis = d <= max_visible
        lens = np.zeros(num_items, np.int64)
        lens[valid] = _read_le(data, starts[valid] + cw, width)
        dstart = starts + cw + width
        if valid.any() and int((dstart[valid] + lens[valid]).max()) > len(data):
            raise CorruptFileError("full-zip value runs past the data buffer")
        sel_start = dstart[vis]
        sel_len = np.where(valid, lens, 0)[vis]
        values = _gather_var(data, sel_start, sel_len)
        block = _per_value_var(fz.value_compression, values)
    else:
        vis = d <= max_visible
        if bits_rep == 0:
            raw = _fixed_rows(data, num_items, cw, vbytes, vis)
        else:
            vstart = starts[vis] + cw
            if len(vstart) and int(vstart.max()) + vbytes > len(data):
                raise CorruptFileError("full-zip value runs past the data buffer")
            idx = (vstart[:, None] + np.arange(vbytes)[None, :]).reshape(-1)
            raw = data[idx]
        block = _per_value_fixed(fz.value_compression, raw, int(vis.sum()))
    return PageData(block, rep, defs, layers, num_rows)


def _fixed_rows(data: np.ndarray, num_items: int, cw: int, vbytes: int, vis: np.ndarray) -> np.ndarray:
    """The value bytes of a fixed-width page without repetition, whose items sit at a constant
    stride (control word, then value). The items are rows of a 2-D view, so the values come out
    as one strided copy (a plain view when there is no control word) instead of a per-byte
    gather: a page of 10,000 128-float vectors is 5 MB, and indexing it byte by byte built a
    40 MB index first."""
    grid = data[: num_items * (cw + vbytes)].reshape(num_items, cw + vbytes)
    rows = grid[:, cw:] if bool(vis.all()) else grid[vis, cw:]
    return np.ascontiguousarray(rows).reshape(-1)


def _rep_index(buffers: list[np.ndarray], num_rows: int, data_len: int) -> np.ndarray:
    if len(buffers) < 2:
        raise CorruptFileError("full-zip page lacks its repetition index")
    buf = buffers[1]
    n = num_rows + 1
    if len(buf) % n:
        raise CorruptFileError("full-zip repetition index size is not a multiple of rows + 1")
    width = len(buf) // n
    if width not in (1, 2, 4, 8):
        raise CorruptFileError(f"full-zip repetition index uses {width}-byte entries")
    dt = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    idx = np.ascontiguousarray(buf).view(dt).astype(np.int64)
    if len(idx) and (idx[-1] > data_len or (np.diff(idx) < 0).any()):
        raise CorruptFileError("full-zip repetition index is out of range")
    return idx


def _walk(
    data: np.ndarray, rows: np.ndarray, cw: int, item_size: object, num_items: int, exact: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Find every item start by stepping all rows in parallel (one step per item position)."""
    cursor = rows[:-1].copy()
    ends = rows[1:]
    row_ids = np.arange(len(cursor))
    found_pos = []
    found_cw = []
    found_row = []
    found_k = []
    k = 0
    active = cursor < ends
    while active.any():
        at = cursor[active]
        cwv = _read_le(data, at, cw)
        size = item_size(cwv, at)  # type: ignore[operator]
        if (size <= 0).any():
            raise CorruptFileError("full-zip item has no control word")
        found_pos.append(at)
        found_cw.append(cwv)
        found_row.append(row_ids[active])
        found_k.append(np.full(len(at), k))
        cursor[active] = at + size
        active = cursor < ends
        k += 1
        if k > num_items + 1:
            raise CorruptFileError("full-zip rows do not end on item boundaries")
    if not found_pos:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos = np.concatenate(found_pos)
    order = np.lexsort((np.concatenate(found_k), np.concatenate(found_row)))
    if exact and len(pos) != num_items:
        raise CorruptFileError("full-zip item count does not match num_items")
    return pos[order], np.concatenate(found_cw)[order]


def _gather_var(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> Var:
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    total = int(offsets[-1])
    if len(lens) * 256 <= total:  # large values (bloom filters…): one slice per value, no byte index
        pieces = [data[a:a + n] for a, n in zip(np.asarray(starts).tolist(), np.asarray(lens).tolist(), strict=True)]
        return Var(offsets, np.concatenate(pieces) if pieces else data[:0])
    idx = np.repeat(starts - offsets[:-1], lens) + np.arange(total, dtype=np.int64)
    return Var(offsets, data[idx])


def _per_value_var(enc: pb.CompressiveEncoding, values: Var) -> Block:
    kind = enc.WhichOneof("compression")
    if kind == "variable":
        return values
    if kind == "fsst":
        table = SymbolTable(enc.fsst.symbol_table)
        inner = _per_value_var(enc.fsst.values, values)
        assert isinstance(inner, Var)
        data, offsets = fsst_decode(table, inner.data, inner.offsets)
        return Var(offsets, data)
    if kind == "variable_packed_struct":
        return _unzip_packed_struct(enc.variable_packed_struct, values)
    if kind == "general":
        scheme = enc.general.compression.scheme
        parts = [
            comp.general_decompress(scheme, values.data[int(a) : int(b)])
            for a, b in zip(values.offsets[:-1], values.offsets[1:], strict=False)
        ]
        lens = np.array([len(p) for p in parts], np.int64)
        offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        return Var(offs, np.concatenate(parts) if parts else np.zeros(0, np.uint8))
    raise UnsupportedEncodingError(f"full-zip variable values use unsupported encoding {kind!r}")


def _per_value_fixed(enc: pb.CompressiveEncoding, raw: np.ndarray, n: int) -> Block:
    kind = enc.WhichOneof("compression")
    if kind == "flat":
        return Fixed(int(enc.flat.bits_per_value), raw, n)
    if kind == "fixed_size_list":
        dims: list[int] = []
        has_val: list[bool] = []
        cur = enc.fixed_size_list
        while True:
            dims.append(int(cur.items_per_value))
            has_val.append(cur.has_validity)
            if cur.values.WhichOneof("compression") != "fixed_size_list":
                break
            cur = cur.values.fixed_size_list
        if cur.values.WhichOneof("compression") != "flat":
            raise UnsupportedEncodingError("full-zip fixed-size-list items must be flat")
        item_bits = int(cur.values.flat.bits_per_value)
        dim = int(np.prod(dims))
        if not any(has_val):
            return Fsl(dims, [None] * len(dims), Fixed(item_bits, raw, n * dim), n)
        # Each row: per validity layer ceil(cum_dim / 8) bitmap bytes, then the item bytes.
        row = len(raw) // n if n else 0
        mat = raw.reshape(n, row) if n else raw.reshape(0, 0)
        pos = 0
        cum = 1
        validity: list[np.ndarray | None] = []
        for li, d in enumerate(dims):
            cum *= d
            if has_val[li]:
                nb = (cum + 7) // 8
                bits = np.unpackbits(np.ascontiguousarray(mat[:, pos : pos + nb]), axis=1, bitorder="little")
                validity.append(bits[:, :cum].astype(bool).reshape(-1))
                pos += nb
            else:
                validity.append(None)
        items = np.ascontiguousarray(mat[:, pos:]).reshape(-1)
        return Fsl(dims, validity, Fixed(item_bits, items, n * dim), n)
    raise UnsupportedEncodingError(f"full-zip fixed values use unsupported encoding {kind!r}")


def _unzip_packed_struct(vps: pb.VariablePackedStruct, values: Var) -> Block:
    """Split row-major packed rows (fixed fields, or u<bits> length + bytes) into child blocks.

    Null rows carry no bytes; their children get zeroed / empty values."""
    n = values.n
    present = np.flatnonzero(values.offsets[1:] > values.offsets[:-1])
    starts = values.offsets[:-1][present].copy()
    ends = values.offsets[1:][present]
    data = values.data
    m = len(present)
    children: list[Block] = []
    for f in vps.fields:
        layout = f.WhichOneof("layout")
        if layout == "bits_per_value":
            if f.bits_per_value % 8:
                raise UnsupportedEncodingError("packed struct fields must be byte aligned")
            width = int(f.bits_per_value) // 8
            if m and int((starts + width - ends).max()) > 0:
                raise CorruptFileError("packed struct field runs past its row")
            raw = np.zeros((n, width), np.uint8)
            raw[present] = data[starts[:, None] + np.arange(width)[None, :]]
            children.append(_per_value_fixed(f.value, raw.reshape(-1), n))
            starts = starts + width
        elif layout == "bits_per_length":
            lw = int(f.bits_per_length) // 8
            if lw not in (1, 2, 4, 8):
                raise CorruptFileError(f"packed struct length of {f.bits_per_length} bits")
            lens = _read_le(data, starts, lw)
            if m and int((starts + lw + lens - ends).max()) > 0:
                raise CorruptFileError("packed struct field runs past its row")
            all_lens = np.zeros(n, np.int64)
            all_lens[present] = lens
            all_starts = np.zeros(n, np.int64)
            all_starts[present] = starts + lw
            children.append(_per_value_var(f.value, _gather_var(data, all_starts, all_lens)))
            starts = starts + lw + lens
        else:
            raise CorruptFileError("packed struct field lacks a layout")
    return VarPackedStruct(children, n)
