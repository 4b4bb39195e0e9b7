"""Writing full-zip pages (values of 256 bytes and more, or on request)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import UnsupportedTypeError
from lance_format.file.v2_1.repdef import layer_values
from lance_format.file.v2_1.shred import Shredded
from lance_format.file.v2_1.types21 import fixed_bits, fsl_item, fsl_values, is_large, is_var, var_parts
from lance_format.file.v2_1.valuesenc import fixed_bytes


def _cw_bytes(bits: int) -> int:
    return 0 if bits == 0 else 1 if bits <= 8 else 2 if bits <= 16 else 4


def _put_le(out: np.ndarray, starts: np.ndarray, values: np.ndarray, width: int) -> None:
    v = values.astype(np.uint64)
    for k in range(width):
        out[starts + k] = ((v >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)


def _bytepack(values: np.ndarray) -> bytes:
    mx = int(values.max()) if len(values) else 0
    dt = np.uint8 if mx < 1 << 8 else np.uint16 if mx < 1 << 16 else np.uint32 if mx < 1 << 32 else np.uint64
    return values.astype(dt).tobytes()


def encode_fullzip(sh: Shredded, values: pa.Array, t: pa.DataType) -> tuple[pb.PageLayout, list[bytes]]:
    """Zip control words, lengths and values of one page into buffer 0 (+ row index in buffer 1)."""
    rep, defs = sh.rep, sh.defs
    n_items = len(rep) if rep is not None else len(values)
    max_rep = int(rep.max()) if rep is not None and len(rep) else 0
    max_def = int(defs.max()) if defs is not None and len(defs) else 0
    bits_rep = max_rep.bit_length()
    bits_def = max_def.bit_length()
    cw = _cw_bytes(bits_rep + bits_def)
    d = defs.astype(np.int64) if defs is not None else np.zeros(n_items, np.int64)
    first_list = next((i for i, layer in enumerate(sh.layers) if layer.is_list), None)
    if first_list is None:
        visible = np.ones(n_items, bool)
    else:
        max_vis = sum(layer.num_def_levels for layer in sh.layers[:first_list])
        visible = d <= max_vis
    cwv = np.zeros(n_items, np.int64)
    if rep is not None:
        cwv |= rep.astype(np.int64) << bits_def
    if defs is not None:
        cwv |= d
    layout = pb.PageLayout()
    fz = layout.full_zip_layout
    fz.bits_rep = bits_rep
    fz.bits_def = bits_def
    fz.num_items = n_items
    fz.num_visible_items = int(visible.sum())
    fz.layers.extend(layer_values(sh.layers))
    vis_item = np.flatnonzero(visible)
    if is_var(t):
        large = is_large(t)
        width = 8 if large else 4
        offs, data = var_parts(values)
        vlen = np.diff(offs)
        valid = visible & (d == 0)
        item_len = np.zeros(n_items, np.int64)
        item_len[vis_item] = vlen
        sizes = cw + np.where(valid, width + item_len, 0)
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        out = np.zeros(int(starts[-1]), np.uint8)
        if cw:
            _put_le(out, starts[:-1], cwv, cw)
        vstarts = starts[:-1][valid] + cw
        _put_le(out, vstarts, item_len[valid], width)
        lens = item_len[valid]
        src_start = np.zeros(n_items, np.int64)
        src_start[vis_item] = offs[:-1]
        if lens.size * 256 <= int(lens.sum()):  # large values (bloom filters…): one slice copy each
            for d0, s0, n in zip((vstarts + width).tolist(), src_start[valid].tolist(), lens.tolist(), strict=True):
                out[d0:d0 + n] = data[s0:s0 + n]
        else:  # small values: one gather of every byte beats a Python step per value
            src = np.repeat(src_start[valid], lens)
            dst = np.repeat(vstarts + width, lens)
            within = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
            out[dst + within] = data[src + within]
        fz.bits_per_offset = 64 if large else 32
        fz.value_compression.variable.offsets.flat.bits_per_value = 64 if large else 32
        rows = np.flatnonzero(rep == max_rep) if rep is not None else np.arange(n_items)
        index = np.concatenate([starts[rows], [starts[-1]]])
        return layout, [out.tobytes(), _bytepack(index)]
    # fixed width: every visible item carries its value bytes
    if pa.types.is_fixed_size_list(t):
        item_t, dim = fsl_item(t)
        flat = fsl_values(values)
        if flat.null_count and not _nulls_only_under_null_lists(values, flat, dim):
            raise UnsupportedTypeError("full-zip of fixed-size lists with null items is not supported")
        bits = fixed_bits(item_t)
        raw = fixed_bytes(flat, bits)
        fz.value_compression.fixed_size_list.items_per_value = dim
        fz.value_compression.fixed_size_list.values.flat.bits_per_value = bits
        vbytes = bits * dim // 8
    else:
        bits = fixed_bits(t)
        raw = fixed_bytes(values, bits)
        if bits == 1:
            raw = np.unpackbits(raw, bitorder="little", count=len(values)).astype(np.uint8)
            bits = 8
        fz.value_compression.flat.bits_per_value = bits
        vbytes = bits // 8
    if vbytes * 8 != (bits * (dim if pa.types.is_fixed_size_list(t) else 1)):
        raise UnsupportedTypeError("full-zip values must be whole bytes")
    fz.bits_per_value = vbytes * 8
    if cw == 0:
        return layout, [raw[: len(values) * vbytes].tobytes()]
    sizes = cw + np.where(visible, vbytes, 0)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    out = np.zeros(int(starts[-1]), np.uint8)
    _put_le(out, starts[:-1], cwv, cw)
    dst = (starts[vis_item] + cw)[:, None] + np.arange(vbytes)[None, :]
    out[dst.reshape(-1)] = raw[: len(vis_item) * vbytes]
    bufs = [out.tobytes()]
    if rep is not None:
        rows = np.flatnonzero(rep == max_rep)
        bufs.append(_bytepack(np.concatenate([starts[rows], [starts[-1]]])))
    return layout, bufs


def _nulls_only_under_null_lists(lists: pa.Array, flat: pa.Array, dim: int) -> bool:
    """Whether every null item of ``flat`` sits under a null list of ``lists``.

    pyarrow builds a null vector (``pa.array([None, [...]], fixed_size_list)``) with ``dim``
    null items under it. Such a vector is a null at the list level, and its value bytes are
    never read, so those item nulls need no validity of their own; a null inside a non-null
    vector does."""
    if lists.null_count == 0:
        return False
    items_valid = np.asarray(flat.is_valid(), dtype=bool).reshape(-1, dim)
    lists_valid = np.asarray(lists.is_valid(), dtype=bool)
    return bool(items_valid[lists_valid].all())


def encode_packed_fullzip(
    sh: Shredded, values: pa.Array, t: pa.DataType
) -> tuple[pb.PageLayout, list[bytes]]:
    """2.2 packed struct with variable-width fields: each row's fields zipped as one value.

    Fixed fields contribute their bytes, variable fields a ``u32`` length then their bytes.
    """

    n = len(values)
    row_len = np.zeros(n, np.int64)
    pieces: list[tuple[str, np.ndarray, np.ndarray]] = []
    widths: list[int] = []
    enc = pb.CompressiveEncoding()
    vps = enc.variable_packed_struct
    for i in range(t.num_fields):
        child = values.field(i)
        f = vps.fields.add()
        if is_var(child.type):
            offs, data = var_parts(child)
            lens = np.diff(offs)
            lw = 8 if is_large(child.type) else 4
            pieces.append(("var", offs, data))
            widths.append(lw)
            row_len += lw + lens
            f.value.variable.offsets.flat.bits_per_value = lw * 8
            f.bits_per_length = lw * 8
        else:
            bits = fixed_bits(child.type)
            if bits % 8:
                raise UnsupportedTypeError("packed struct fields must be whole bytes wide")
            raw = fixed_bytes(child, bits)[: n * bits // 8]
            pieces.append(("fixed", raw.reshape(n, bits // 8), np.zeros(0)))
            widths.append(0)
            row_len += bits // 8
            f.value.flat.bits_per_value = bits
            f.bits_per_value = bits
    row_start = np.concatenate([[0], np.cumsum(row_len)]).astype(np.int64)
    rows = np.zeros(int(row_start[-1]), np.uint8)
    cur = row_start[:-1].copy()
    for (kind, a, b), lw in zip(pieces, widths, strict=True):
        if kind == "fixed":
            w = a.shape[1]
            rows[(cur[:, None] + np.arange(w)[None, :]).reshape(-1)] = a.reshape(-1)
            cur += w
        else:
            lens = np.diff(a)
            _put_le(rows, cur, lens, lw)
            cur += lw
            total = int(lens.sum())
            within = np.arange(total, dtype=np.int64) - np.repeat(a[:-1] - a[0], lens)
            rows[np.repeat(cur, lens) + within] = b[np.repeat(a[:-1], lens) + within]
            cur += lens
    if len(rows) >= 1 << 31:
        raise UnsupportedTypeError("packed struct page exceeds 2 GiB")
    row_values = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(row_start.astype(np.int32)), pa.py_buffer(rows)]
    )
    layout, bufs = encode_fullzip(sh, row_values, pa.binary())
    layout.full_zip_layout.value_compression.CopyFrom(enc)
    layout.full_zip_layout.bits_per_offset = 32
    return layout, bufs
