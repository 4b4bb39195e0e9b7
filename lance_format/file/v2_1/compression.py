"""Decoders for the 2.1/2.2 compressive encodings (``encodings21.CompressiveEncoding`` trees).

Two contexts matter for reading: *block* decoding (a whole buffer: rep/def levels of one
mini-block chunk, dictionaries) and *mini-block* decoding (the value buffers of many chunks,
decoded together so that numpy sees large arrays).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import (
    Block,
    Chunk,
    Constant,
    Fixed,
    Fsl,
    PackedStruct,
    Var,
    fixed_to_uint,
)
from lance_format.file.v2_1.fsst import SymbolTable
from lance_format.file.v2_1.fsst import decode as fsst_decode

LZ4 = pb.COMPRESSION_ALGORITHM_LZ4
ZSTD = pb.COMPRESSION_ALGORITHM_ZSTD
# Refuse to inflate anything past this (a corrupt size prefix must not allocate gigabytes).
MAX_DECOMPRESSED = 1 << 31


def kind_of(enc: pb.CompressiveEncoding) -> str:
    """Which ``CompressiveEncoding`` variant ``enc`` holds."""
    kind = enc.WhichOneof("compression")
    if kind is None:
        raise UnsupportedEncodingError("compressive encoding is empty")
    return str(kind)


def general_decompress(scheme: int, buf: np.ndarray | bytes) -> np.ndarray:
    """Undo lance's buffer compression (LZ4 block with u32 size prefix, or zstd)."""
    raw = bytes(buf) if not isinstance(buf, bytes) else buf
    if scheme == LZ4:
        if len(raw) < 4:
            raise CorruptFileError("LZ4 buffer shorter than its size prefix")
        size = int.from_bytes(raw[:4], "little")
        if size > MAX_DECOMPRESSED or size > 255 * len(raw) + 64:
            raise CorruptFileError(f"LZ4 size prefix {size} is implausible")
        if size == 0:
            return np.zeros(0, np.uint8)
        try:
            out = pa.decompress(raw[4:], decompressed_size=size, codec="lz4_raw")
        except Exception as exc:  # pyarrow raises OSError/ArrowException variants
            raise CorruptFileError(f"LZ4 decompression failed: {exc}") from exc
        return np.frombuffer(out, np.uint8)
    if scheme == ZSTD:
        if not raw:
            return np.zeros(0, np.uint8)
        if raw[:4] == b"\x28\xb5\x2f\xfd" and not (len(raw) > 4 and raw[4] & 0x10):
            try:
                stream = pa.input_stream(pa.py_buffer(raw), compression="zstd")
                return np.frombuffer(stream.read(), np.uint8)
            except Exception as exc:
                raise CorruptFileError(f"zstd decompression failed: {exc}") from exc
        if len(raw) < 8:
            raise CorruptFileError("zstd buffer shorter than its size prefix")
        size = int.from_bytes(raw[:8], "little")
        if size > MAX_DECOMPRESSED:
            raise CorruptFileError(f"zstd size prefix {size} is implausible")
        if size == 0:
            return np.zeros(0, np.uint8)
        try:
            out = pa.decompress(raw[8:], decompressed_size=size, codec="zstd")
        except Exception as exc:
            raise CorruptFileError(f"zstd decompression failed: {exc}") from exc
        return np.frombuffer(out, np.uint8)
    raise UnsupportedEncodingError(f"unknown general compression scheme {scheme}")


def _need(buf: np.ndarray, nbytes: int, what: str) -> None:
    if nbytes > len(buf) or nbytes < 0:
        raise CorruptFileError(f"{what}: needs {nbytes} bytes but the buffer has {len(buf)}")


def _u(buf: np.ndarray, off: int, width: int) -> int:
    _need(buf, off + width, "header")
    return int.from_bytes(buf[off : off + width].tobytes(), "little")


# --------------------------------------------------------------------------- block context


def decode_block(enc: pb.CompressiveEncoding, buf: np.ndarray, n: int) -> Block:
    """Decode one opaque block (levels, dictionary items) holding ``n`` values."""
    kind = kind_of(enc)
    if kind == "flat":
        bits = enc.flat.bits_per_value
        data = buf
        if enc.flat.HasField("data"):
            data = general_decompress(enc.flat.data.scheme, buf)
        nbytes = (n * bits + 7) // 8
        _need(data, nbytes, "flat block")
        return Fixed(bits, data[:nbytes], n)
    if kind == "fixed_size_list":
        dims, inner = fsl_chain(enc.fixed_size_list)
        dim = int(np.prod(dims))
        items = decode_block(inner, buf, n * dim)
        if not isinstance(items, Fixed):
            raise UnsupportedEncodingError("fixed-size-list block must hold flat items")
        return Fsl(dims, [None] * len(dims), items, n)
    if kind == "variable":
        return _variable_block(buf, n)
    if kind == "inline_bitpacking":
        return _inline_bitpacked_block(buf, n, enc.inline_bitpacking.uncompressed_bits_per_value)
    if kind == "out_of_line_bitpacking":
        ool = enc.out_of_line_bitpacking
        if kind_of(ool.values) != "flat":
            raise UnsupportedEncodingError("out-of-line bit-packing must wrap flat values")
        return _ool_block(buf, n, ool.uncompressed_bits_per_value, ool.values.flat.bits_per_value)
    if kind == "rle":
        return _rle_block(enc.rle, buf, n)
    if kind == "constant":
        value = enc.constant.value if enc.constant.HasField("value") else None
        return Constant(value, n)
    if kind == "general":
        raw = general_decompress(enc.general.compression.scheme, buf)
        return decode_block(enc.general.values, raw, n)
    raise UnsupportedEncodingError(f"encoding {kind!r} is not supported for a block")


def _variable_block(buf: np.ndarray, n: int) -> Var:
    _need(buf, 8, "variable block header")
    old_scheme = bool(buf[1] or buf[2] or buf[3])
    if old_scheme:
        bits = int(buf[0])
        if bits == 32:
            start, off0 = _u(buf, 5, 4), 9
        elif bits == 64:
            start, off0 = _u(buf, 9, 8), 17
        else:
            raise CorruptFileError(f"variable block has {bits}-bit offsets")
    else:
        bits = _u(buf, 0, 4)
        if bits == 32:
            start, off0 = _u(buf, 4, 4), 8
        elif bits == 64:
            start, off0 = _u(buf, 8, 8), 16
        else:
            raise CorruptFileError(f"variable block has {bits}-bit offsets")
    width = bits // 8
    _need(buf, off0 + (n + 1) * width, "variable block offsets")
    if start > len(buf) or start < off0:
        raise CorruptFileError("variable block data start is out of range")
    dt = np.uint32 if bits == 32 else np.uint64
    offsets = np.ascontiguousarray(buf[off0 : off0 + (n + 1) * width]).view(dt).astype(np.int64)
    data = buf[start:]
    _check_offsets(offsets, len(data), "variable block")
    return Var(offsets, data)


def _check_offsets(offsets: np.ndarray, size: int, what: str) -> None:
    if len(offsets) and (offsets[0] < 0 or offsets[-1] > size or (np.diff(offsets) < 0).any()):
        raise CorruptFileError(f"{what}: offsets are not increasing within the data")


def _inline_bitpacked_block(buf: np.ndarray, n: int, t: int) -> Fixed:
    """Blocks of ``[width word][packed 1024 values]``, one per 1024 values."""
    dtype = bitpack.uint_dtype(t)
    w = dtype.itemsize
    if n > (len(buf) // w) * 1024:
        raise CorruptFileError(f"inline bit-packed block of {len(buf)} bytes cannot hold {n} values")
    pos = 0
    parts = []
    remaining = n
    while remaining > 0:
        width = _u(buf, pos, w)
        if width > t:
            raise CorruptFileError(f"inline bit width {width} exceeds {t}")
        nbytes = 1024 * width // 8
        _need(buf, pos + w + nbytes, "inline bit-packed block")
        words = np.ascontiguousarray(buf[pos + w : pos + w + nbytes]).view(dtype)
        parts.append(bitpack.unpack_blocks(words, width, t) if width else np.zeros(1024, dtype))
        pos += w + nbytes
        remaining -= 1024
    vals = np.concatenate(parts)[:n] if parts else np.zeros(0, dtype)
    return Fixed(t, vals.view(np.uint8), n)


def _ool_block(buf: np.ndarray, n: int, t: int, width: int) -> Fixed:
    dtype = bitpack.uint_dtype(t)
    if width == 0:
        return Fixed(t, np.zeros(n * dtype.itemsize, np.uint8), n)
    if not 0 < width <= t:
        raise CorruptFileError(f"out-of-line bit width {width} out of range for {t} bits")
    words = np.ascontiguousarray(buf[: len(buf) // dtype.itemsize * dtype.itemsize]).view(dtype)
    per_block = 1024 * width // t
    whole = n // 1024
    tail = n % 1024
    need = whole * per_block
    if len(words) < need:
        raise CorruptFileError("out-of-line bit-packed buffer is truncated")
    parts = [bitpack.unpack_blocks(words[:need], width, t)] if whole else []
    if tail:
        if len(words) == need + tail:
            parts.append(words[need : need + tail])
        else:
            if len(words) < need + per_block:
                raise CorruptFileError("out-of-line bit-packed tail is truncated")
            parts.append(bitpack.unpack_blocks(words[need : need + per_block], width, t)[:tail])
    vals = np.concatenate(parts) if parts else np.zeros(0, dtype)
    return Fixed(t, vals.view(np.uint8), n)


def _rle_block(rle: pb.Rle, buf: np.ndarray, n: int) -> Fixed:
    bits = _rle_value_bits(rle)
    vbytes = _u(buf, 0, 8)
    _need(buf, 8 + vbytes, "RLE block values")
    values = buf[8 : 8 + vbytes]
    lengths = buf[8 + vbytes :]
    return _rle_expand([values], [lengths], [n], bits)


def _rle_value_bits(rle: pb.Rle) -> int:
    if kind_of(rle.values) != "flat" or kind_of(rle.run_lengths) != "flat":
        raise UnsupportedEncodingError("RLE must use flat values and run lengths")
    if rle.run_lengths.flat.bits_per_value != 8:
        raise UnsupportedEncodingError("RLE run lengths must be 8-bit")
    bits = int(rle.values.flat.bits_per_value)
    bitpack.uint_dtype(bits)
    return bits


def _rle_expand(values: list[np.ndarray], lengths: list[np.ndarray], counts: list[int], bits: int) -> Fixed:
    dtype = bitpack.uint_dtype(bits)
    size = dtype.itemsize
    vals = np.concatenate([np.ascontiguousarray(v[: len(v) // size * size]).view(dtype) for v in values])
    lens = np.concatenate(lengths).astype(np.int64)
    if len(vals) != len(lens):
        raise CorruptFileError("RLE buffers disagree on the number of runs")
    total = sum(counts)
    if int(lens.sum()) == total:
        out = np.repeat(vals, lens)
    else:  # runs may overshoot a chunk's count: expand chunk by chunk and truncate
        parts = []
        vpos = 0
        for v, c in zip(values, counts, strict=False):
            k = len(v) // size
            part = np.repeat(vals[vpos : vpos + k], lens[vpos : vpos + k])
            if len(part) < c:
                raise CorruptFileError("RLE runs cover fewer values than the chunk holds")
            parts.append(part[:c])
            vpos += k
        out = np.concatenate(parts) if parts else np.zeros(0, dtype)
    return Fixed(bits, out.view(np.uint8), total)


def levels_from_block(block: Block, n: int) -> np.ndarray:
    """Rep/def levels (uint16) from a decoded block."""
    if isinstance(block, Constant):
        val = int.from_bytes(block.value[:2], "little") if block.value else 0
        return np.full(n, val, np.uint16)
    if not isinstance(block, Fixed) or block.bits != 16:
        raise CorruptFileError("rep/def levels must decode to 16-bit values")
    return fixed_to_uint(block).astype(np.uint16, copy=False)


# ----------------------------------------------------------------------- mini-block context


def fsl_chain(fsl: pb.FixedSizeList) -> tuple[list[int], pb.CompressiveEncoding]:
    """Dimensions of nested fixed-size-list encodings and the innermost items encoding."""
    dims = []
    has_val = []
    cur = fsl
    while True:
        dims.append(int(cur.items_per_value))
        has_val.append(cur.has_validity)
        inner = cur.values
        if kind_of(inner) == "fixed_size_list":
            cur = inner.fixed_size_list
            continue
        return dims, inner


def miniblock_num_buffers_hint(enc: pb.CompressiveEncoding) -> int:
    """Number of value buffers an encoding puts in each chunk (used only for validation)."""
    kind = kind_of(enc)
    if kind == "rle":
        return 2
    if kind == "fixed_size_list":
        cur = enc.fixed_size_list
        count = 1
        while True:
            count += int(cur.has_validity)
            if kind_of(cur.values) != "fixed_size_list":
                return count
            cur = cur.values.fixed_size_list
    return 1


def decode_miniblock(enc: pb.CompressiveEncoding, chunks: list[Chunk]) -> Block:
    """Decode the value buffers of many chunks and concatenate the values."""
    kind = kind_of(enc)
    total = sum(c.n for c in chunks)
    if kind == "flat":
        bits = int(enc.flat.bits_per_value)
        if bits == 0 or bits > 1 << 16:
            raise CorruptFileError(f"flat bits_per_value {bits} out of range")
        parts = []
        bit_aligned = bits % 8 != 0
        for c in chunks:
            nbytes = (c.n * bits + 7) // 8
            _need(c.buffers[0], nbytes, "flat mini-block")
            parts.append(c.buffers[0][:nbytes])
        if bit_aligned and any((c.n * bits) % 8 for c in chunks[:-1]):
            bools = np.concatenate(
                [
                    np.unpackbits(p, bitorder="little")[: c.n * bits]
                    for p, c in zip(parts, chunks, strict=False)
                ]
            )
            return Fixed(bits, np.packbits(bools, bitorder="little"), total)
        data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        return Fixed(bits, data, total)
    if kind == "inline_bitpacking":
        return _inline_bitpacked_chunks(chunks, int(enc.inline_bitpacking.uncompressed_bits_per_value))
    if kind == "variable":
        bits = var_offset_bits(enc.variable)
        return variable_chunks(chunks, bits)
    if kind == "fsst":
        table = SymbolTable(enc.fsst.symbol_table)
        inner = decode_miniblock(enc.fsst.values, chunks)
        if not isinstance(inner, Var):
            raise UnsupportedEncodingError("FSST must wrap variable-width data")
        data, offsets = fsst_decode(table, inner.data, inner.offsets)
        return Var(offsets, data)
    if kind == "rle":
        bits = _rle_value_bits(enc.rle)
        for c in chunks:
            if len(c.buffers) < 2:
                raise CorruptFileError("RLE chunk needs two buffers")
        return _rle_expand(
            [c.buffers[0] for c in chunks], [c.buffers[1] for c in chunks], [c.n for c in chunks], bits
        )
    if kind == "byte_stream_split":
        inner_enc = enc.byte_stream_split.values
        if kind_of(inner_enc) != "flat" or inner_enc.flat.bits_per_value not in (32, 64):
            raise UnsupportedEncodingError("byte-stream-split must wrap 32/64-bit flat values")
        width = int(inner_enc.flat.bits_per_value) // 8
        parts = []
        for c in chunks:
            nbytes = c.n * width
            _need(c.buffers[0], nbytes, "byte-stream-split chunk")
            parts.append(c.buffers[0][:nbytes].reshape(width, c.n).T.reshape(-1))
        return Fixed(width * 8, np.concatenate(parts) if parts else np.zeros(0, np.uint8), total)
    if kind == "general":
        scheme = enc.general.compression.scheme
        firsts = _zstd_batch(chunks) if scheme == ZSTD and len(chunks) > 1 else None
        if firsts is None:
            firsts = [general_decompress(scheme, c.buffers[0]) for c in chunks]
        new_chunks = [Chunk([first, *c.buffers[1:]], c.n) for first, c in zip(firsts, chunks, strict=True)]
        return decode_miniblock(enc.general.values, new_chunks)
    if kind == "fixed_size_list":
        return _fsl_chunks(enc.fixed_size_list, chunks)
    if kind == "packed_struct":
        bits_list = [int(b) for b in enc.packed_struct.bits_per_value]
        row_bits = sum(bits_list)
        inner = decode_miniblock(flat_encoding(row_bits), chunks)
        assert isinstance(inner, Fixed)
        return PackedStruct(bits_list, inner.data, total)
    raise UnsupportedEncodingError(f"encoding {kind!r} is not supported in a mini-block")


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_content_size(header: bytes) -> int | None:
    """Frame_Content_Size of a zstd frame header (bytes after the magic), ``None`` if absent.

    Layout from the zstd format spec (RFC 8878, section 3.1.1.1): a descriptor byte, then an
    optional window byte, dictionary id and content size.
    """
    desc = header[0]
    fcs_flag, single, dict_flag = desc >> 6, (desc >> 5) & 1, desc & 3
    fcs_len = (1 if single else 0) if fcs_flag == 0 else (2, 4, 8)[fcs_flag - 1]
    if fcs_len == 0:
        return None
    pos = 1 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    field = header[pos : pos + fcs_len]
    if len(field) != fcs_len:
        return None
    return int.from_bytes(field, "little") + (256 if fcs_len == 2 else 0)


def _zstd_batch(chunks: list[Chunk]) -> list[np.ndarray] | None:
    """First buffers of size-prefixed zstd chunks, decompressed with one call (``None``: not possible).

    Every chunk holds a u64 size and one zstd frame (``compress`` in
    rust/lance-encoding/src/encodings/physical/block.rs). zstd decodes concatenated frames in
    one call, so the frames are joined and inflated at once: per-chunk calls (thousands per page
    of text) cost ~20x more. Anything unusual returns ``None``; the per-chunk path then decodes
    (or reports) it chunk by chunk.
    """
    sizes = []
    frames = []
    for c in chunks:
        buf = c.buffers[0]
        head = bytes(buf[:26])  # size prefix + the longest frame header
        if len(head) < 14 or head[8:12] != _ZSTD_MAGIC:
            return None
        size = int.from_bytes(head[:8], "little")
        if _zstd_content_size(head[12:]) != size:  # each frame must say it inflates to its prefix
            return None
        sizes.append(size)
        frames.append(buf[8:])
    total = sum(sizes)
    if total == 0 or total > MAX_DECOMPRESSED or any(n == 0 for n in sizes):
        return None
    try:
        out = np.frombuffer(pa.decompress(np.concatenate(frames), decompressed_size=total, codec="zstd"), np.uint8)
    except Exception:  # noqa: BLE001 - sizes or frames disagree: let the per-chunk path say where
        return None
    bounds = np.cumsum([0, *sizes]).tolist()
    return [out[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]


def flat_encoding(bits: int) -> pb.CompressiveEncoding:
    """A ``Flat`` description of ``bits`` bits per value."""
    enc = pb.CompressiveEncoding()
    enc.flat.bits_per_value = bits
    return enc


def var_offset_bits(var: pb.Variable) -> int:
    """Offset width (32 or 64) of a ``Variable`` encoding."""
    if kind_of(var.offsets) != "flat" or var.offsets.flat.bits_per_value not in (32, 64):
        raise UnsupportedEncodingError("variable encoding needs flat 32/64-bit offsets")
    return int(var.offsets.flat.bits_per_value)


def _inline_bitpacked_chunks(chunks: list[Chunk], t: int) -> Fixed:
    dtype = bitpack.uint_dtype(t)
    w = dtype.itemsize
    widths = np.zeros(len(chunks), np.int64)
    for i, c in enumerate(chunks):
        if c.n > 1024:
            raise CorruptFileError("inline bit-packed chunk holds more than 1024 values")
        widths[i] = _u(c.buffers[0], 0, w)
    if (widths > t).any():
        raise CorruptFileError(f"inline bit width exceeds {t}")
    out = np.zeros((len(chunks), 1024), dtype)
    for w_np in distinct(widths):
        width = int(w_np)
        sel = np.flatnonzero(widths == width)
        if width == 0:
            continue
        nbytes = 1024 * width // 8
        for j in sel:
            _need(chunks[j].buffers[0], w + nbytes, "inline bit-packed chunk")
        words = np.concatenate([chunks[j].buffers[0][w : w + nbytes] for j in sel]).view(dtype)
        out[sel] = bitpack.unpack_blocks(words, int(width), t).reshape(len(sel), 1024)
    counts = np.array([c.n for c in chunks], np.int64)
    if (counts == 1024).all():
        vals = out.reshape(-1)
    else:
        vals = out[np.arange(1024)[None, :] < counts[:, None]]
    return Fixed(t, vals.view(np.uint8), int(counts.sum()))


def variable_chunks(chunks: list[Chunk], bits: int) -> Var:
    """Per-chunk variable-width values (``n + 1`` chunk-relative offsets, then bytes)."""
    dt = np.uint32 if bits == 32 else np.uint64
    width = bits // 8
    offs_parts = []
    data_parts = []
    base = 0
    for c in chunks:
        buf = c.buffers[0]
        _need(buf, (c.n + 1) * width, "variable chunk offsets")
        offs = np.ascontiguousarray(buf[: (c.n + 1) * width]).view(dt).astype(np.int64)
        start, end = int(offs[0]), int(offs[-1])
        if start < (c.n + 1) * width or end > len(buf) or (c.n and (np.diff(offs) < 0).any()):
            raise CorruptFileError("variable chunk offsets are out of range")
        data_parts.append(buf[start:end])
        offs_parts.append(offs[:-1] - start + base)
        base += end - start
    offs_parts.append(np.array([base], np.int64))
    data = np.concatenate(data_parts) if data_parts else np.zeros(0, np.uint8)
    return Var(np.concatenate(offs_parts), data)


def _fsl_chunks(fsl: pb.FixedSizeList, chunks: list[Chunk]) -> Fsl:
    dims: list[int] = []
    has_val: list[bool] = []
    cur = fsl
    while True:
        dims.append(int(cur.items_per_value))
        has_val.append(cur.has_validity)
        if kind_of(cur.values) == "fixed_size_list":
            cur = cur.values.fixed_size_list
            continue
        inner = cur.values
        break
    if kind_of(inner) != "flat":
        raise UnsupportedEncodingError("fixed-size-list items must be flat")
    item_bits = int(inner.flat.bits_per_value)
    nval = sum(has_val)
    validity: list[list[np.ndarray]] = [[] for _ in dims]
    data_chunks = []
    for c in chunks:
        if len(c.buffers) < nval + 1:
            raise CorruptFileError("fixed-size-list chunk is missing buffers")
        bi = 0
        cum = 1
        for li, d in enumerate(dims):
            cum *= d
            if has_val[li]:
                nbits = c.n * cum
                _need(c.buffers[bi], (nbits + 7) // 8, "fixed-size-list validity")
                validity[li].append(np.unpackbits(c.buffers[bi], bitorder="little", count=nbits).astype(bool))
                bi += 1
        data_chunks.append(Chunk([c.buffers[nval]], c.n * cum))
    items = decode_miniblock(flat_encoding(item_bits), data_chunks)
    assert isinstance(items, Fixed)
    vals: list[np.ndarray | None] = [
        np.concatenate(v) if has_val[i] else None for i, v in enumerate(validity)
    ]
    return Fsl(dims, vals, items, sum(c.n for c in chunks))
