"""Which compression a written page uses: the writer's choices (after lance's defaults)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import UnsupportedTypeError
from lance_format.file.v2_1.miniblock import ValueChunks
from lance_format.file.v2_1.shred import Shredded
from lance_format.file.v2_1.types21 import fixed_bits, fsl_item, fsl_values, is_large, is_var, var_parts
from lance_format.file.v2_1.valuesenc import (
    bss_chunks,
    compressed_variable_chunks,
    fixed_bytes,
    flat_chunks,
    fsl_chunks,
    general_wrap,
    inline_bitpack_chunks,
    rle_chunks,
    run_count,
    variable_chunks,
)

NARROW_MAX_BYTES = 256
COMPRESSED_NARROW_MAX_BYTES = 4096
META_COMPRESSION = "lance-encoding:compression"
META_DICT_RATIO = "lance-encoding:dict-size-ratio"
META_LEVEL = "lance-encoding:compression-level"
META_RLE = "lance-encoding:rle-threshold"
META_BSS = "lance-encoding:bss"
AUTO_ZSTD_MIN_BYTES = 32 * 1024
#: Level of that automatic zstd: on 4-8 KiB string chunks level 1 compresses about as well as the
#: default 3 (Huffman-coded literals do most of the work) in two thirds of the time.
AUTO_ZSTD_LEVEL = 1
#: Largest compressed / plain size at which that automatic zstd is kept. A zstd chunk is inflated
#: whole for every row read from it (~10 us per 6 KiB chunk, against a slice of plain bytes), so
#: it must buy more than lance's FSST typically does. Measured with level 1 on ~6 KiB chunks:
#: random 15-25 letter strings (the benchmark's ``text``) 0.68 and pylance's FSST 0.80 of plain,
#: so they stay plain; markdown lines ~0.4, UUIDs ~0.55, URLs ~0.1 keep zstd.
AUTO_ZSTD_MAX_RATIO = 0.6
MAX_CHUNK_LEVELS = 32768


def is_wide(values: pa.Array, t: pa.DataType, no_compression: bool) -> bool:
    """Whether values are large enough for a full-zip page rather than mini-blocks."""
    if is_var(t):
        if len(values) == 0:
            return False
        lens = pc.binary_length(values)
        mx = pc.max(lens).as_py()
        # Compressed mini-blocks beat uncompressed full-zip for values of a few KiB
        limit = NARROW_MAX_BYTES if no_compression else COMPRESSED_NARROW_MAX_BYTES
        return mx is not None and mx >= limit
    if pa.types.is_fixed_size_list(t):
        bits = fixed_bits(fsl_item(t)[0]) * fsl_item(t)[1]
        return bits // 8 >= NARROW_MAX_BYTES
    return False


def variable_block(values: pa.Array) -> bytes:
    """lance's variable block: offset width, data start, ``n + 1`` offsets, bytes."""
    offs, data = var_parts(values)
    if is_large(values.type):
        head = (64).to_bytes(8, "little") + (16 + 8 * len(offs)).to_bytes(8, "little")
        return head + offs.astype(np.uint64).tobytes() + data.tobytes()
    head = (32).to_bytes(4, "little") + (8 + 4 * len(offs)).to_bytes(4, "little")
    return head + offs.astype(np.uint32).tobytes() + data.tobytes()


def dictionary_parts(values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Indices (nulls as 0) and dictionary of an Arrow dictionary array."""
    indices = values.indices
    dictionary = values.dictionary
    idx = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    return idx, dictionary


def maybe_dictionary(values: pa.Array, meta: dict[str, str]) -> tuple[np.ndarray, pa.Array] | None:
    """Dictionary-encode low-cardinality values when that shrinks them (lance's 0.8 size ratio)."""
    n = len(values)
    if n < 100:
        return None
    ratio = float(meta.get(META_DICT_RATIO, "0.8"))
    sample = values if n <= 4096 else values.slice(0, 4096)
    est = len(pc.unique(sample))
    if est > len(sample) // 2:
        return None
    enc = pc.dictionary_encode(values)
    dictionary = enc.dictionary
    # offsets plus the bytes this array spans (a slice shares its parent's whole data buffer)
    width = 8 if is_large(values.type) else 4
    offsets = np.frombuffer(values.buffers()[1], np.int64 if width == 8 else np.int32)
    raw = width * (n + 1) + int(offsets[values.offset + n]) - int(offsets[values.offset])
    dict_size = sum(b.size for b in dictionary.buffers()[1:] if b is not None) + 4 * n
    if raw == 0 or dict_size / raw >= ratio:
        return None
    idx = np.asarray(enc.indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    return idx, dictionary


def general_scheme(meta: dict[str, str]) -> tuple[str | None, int | None]:
    """The general compression (``lz4`` / ``zstd`` or None) and level the field metadata asks for."""
    scheme = meta.get(META_COMPRESSION, "").lower()
    level = int(meta[META_LEVEL]) if meta.get(META_LEVEL, "").lstrip("-").isdigit() else None
    return (scheme if scheme in ("lz4", "zstd") else None), level


def index_chunks(
    indices: np.ndarray, bits: int, no_compression: bool, meta: dict[str, str], cap: int = 4096
) -> ValueChunks:
    """Mini-block chunks of a dictionary page's indices (``bits`` wide), following the field metadata.

    Like pylance 14.0.2: with lz4/zstd requested, 32/64-bit indices are byte-stream split and every
    chunk is compressed; narrower indices are bit-packed and then compressed.
    """
    idx = indices.astype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])
    general, level = general_scheme(meta)
    if general is not None and bits in (32, 64):
        return general_wrap(bss_chunks(idx, bits, cap), general, level)
    chunks = None
    if not no_compression and cap >= 1024:
        chunks = inline_bitpack_chunks(idx, bits)
    if chunks is None:
        chunks = flat_chunks(idx.view(np.uint8), bits, len(idx), cap)
    return general_wrap(chunks, general, level) if general is not None else chunks


def value_chunks(
    values: pa.Array, t: pa.DataType, no_compression: bool, meta: dict[str, str], cap: int = 4096
) -> ValueChunks:
    """Compressed value chunks for a mini-block page, following the field metadata."""
    n = len(values)
    scheme = meta.get(META_COMPRESSION, "").lower()
    general, level = general_scheme(meta)
    if is_var(t):
        offs, data = var_parts(values)
        spanned = int(offs[-1] - offs[0])  # not len(data): a slice shares its parent's buffer
        if general is None and not no_compression and scheme != "fsst" and spanned >= AUTO_ZSTD_MIN_BYTES:
            # stands in for lance's FSST, which this writer does not implement, where it pays
            return compressed_variable_chunks(
                offs, data, is_large(t), cap, "zstd", AUTO_ZSTD_LEVEL, max_ratio=AUTO_ZSTD_MAX_RATIO
            )
        if general:
            return compressed_variable_chunks(offs, data, is_large(t), cap, general, level)
        return variable_chunks(offs, data, is_large(t), cap)
    if pa.types.is_fixed_size_list(t):
        item_t, dim = fsl_item(t)
        if pa.types.is_fixed_size_list(t.value_type):
            raise UnsupportedTypeError("nested fixed-size lists are not supported by this writer")
        flat = fsl_values(values)
        bits = fixed_bits(item_t)
        items = fixed_bytes(flat, bits)
        validity = None
        if flat.null_count:
            validity = np.asarray(flat.is_valid().to_numpy(zero_copy_only=False), bool)
        return fsl_chunks(items, bits, dim, validity, n, cap)
    bits = fixed_bits(t)
    data = fixed_bytes(values, bits)
    if no_compression or bits not in (8, 16, 32, 64):
        return flat_chunks(data, bits, n, cap)
    words = data.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])
    bss = meta.get(META_BSS, "auto").lower()
    if general and bits in (32, 64) and (bss == "on" or (bss == "auto" and pa.types.is_floating(t))):
        return general_wrap(bss_chunks(words, bits, cap), general, level)
    threshold = float(meta.get(META_RLE, "0.5"))
    if run_count(words) < n * threshold:
        chunks = rle_chunks(words, bits, cap)
    else:
        packed = inline_bitpack_chunks(words, bits) if cap >= 1024 else None
        chunks = packed or flat_chunks(data, bits, n, cap)
    return general_wrap(chunks, general, level) if general else chunks


def chunk_cap(sh: Shredded, n_values: int) -> int:
    """Largest power-of-two values per chunk keeping every chunk under MAX_CHUNK_LEVELS levels.

    Only pages with lists can have more levels than values (empty and null lists)."""
    if sh.rep is None or sh.defs is None or n_values == 0:
        return 4096
    first_list = next(i for i, layer in enumerate(sh.layers) if layer.is_list)
    vis_pos = np.flatnonzero(sh.defs <= sum(layer.num_def_levels for layer in sh.layers[:first_list]))
    n_levels = len(sh.defs)
    k = 4096
    while True:
        starts = np.arange(0, n_values, k)
        a = np.concatenate([[0], vis_pos[starts[1:] - 1] + 1])
        b = np.concatenate([a[1:], [n_levels]])
        if k == 1 or int((b - a).max()) <= MAX_CHUNK_LEVELS:
            return k
        k //= 2


def constant_value(values: pa.Array, t: pa.DataType) -> bytes | None:
    """The value's bytes when every value is equal and non-null (fixed-width types only)."""
    if len(values) < 2 or values.null_count or is_var(t) or pa.types.is_boolean(t):
        return None
    if pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t):
        return None
    bits = fixed_bits(t)
    if bits % 8:
        return None
    raw = fixed_bytes(values, bits).reshape(len(values), bits // 8)
    if not (raw[:64] == raw[0]).all():  # most pages differ early: skip the full comparison
        return None
    if (raw == raw[0]).all():
        return bytes(raw[0].tobytes())
    return None
