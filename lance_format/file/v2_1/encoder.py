"""Writing 2.1 / 2.2 files: one column per leaf, mini-block / full-zip / constant pages."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import InvalidInputError, UnsupportedTypeError
from lance_format.file.container import DEFAULT_PAGE_BYTES, make_column_metadata
from lance_format.file.v2_1.fullzip_enc import encode_fullzip, encode_packed_fullzip
from lance_format.file.v2_1.miniblock import ValueChunks, serialize
from lance_format.file.v2_1.pagequeue import PageQueue
from lance_format.file.v2_1.policy import (
    META_COMPRESSION,
    chunk_cap,
    constant_value,
    dictionary_parts,
    index_chunks,
    is_wide,
    maybe_dictionary,
    value_chunks,
    variable_block,
)
from lance_format.file.v2_1.repdef import Layer, layer_values
from lance_format.file.v2_1.shred import Shredded, shred
from lance_format.file.v2_1.types21 import fixed_bits, is_large, is_var, leaf_paths, var_parts
from lance_format.file.v2_1.valuesenc import (
    compress_buffer,
    fixed_bytes,
    flat_chunks,
)
from lance_format.schema import is_truthy_flag

PAGE_LAYOUT_URL = "/lance.encodings21.PageLayout"
META_STRUCTURAL = "lance-encoding:structural-encoding"
META_BLOB = "lance-encoding:blob"


def _path_kinds(path: list[pa.Field]) -> list[str]:
    kinds = []
    for i, f in enumerate(path):
        if i == len(path) - 1:
            kinds.append("leaf")
        elif pa.types.is_struct(f.type):
            kinds.append(f"struct:{f.type.get_field_index(path[i + 1].name)}")
        else:
            kinds.append("list")
    return kinds


def _refuse_unwritable(field: pa.Field, path: str, version: tuple[int, ...]) -> None:
    """Refuse maps before 2.2 (as pylance 14.0.2) and blob-v2 descriptor structs (not implemented).

    A descriptor (what scans of a blob-v2 column return) points into the file it was read from;
    copying it into another file would produce dangling blob references.
    """
    t = field.type
    if pa.types.is_struct(t) and is_truthy_flag((field.metadata or {}).get(META_BLOB.encode())):
        raise UnsupportedTypeError(
            f"field {path!r}: writing blob v2 columns (struct with {META_BLOB}=true, e.g. the blob "
            f"descriptors a scan returns) is not supported (file version {version[0]}.{version[1]})"
        )
    if pa.types.is_map(t) and version < (2, 2):
        raise UnsupportedTypeError(
            f"field {path!r}: map columns need data storage version 2.2 "
            f"(file version {version[0]}.{version[1]} cannot store {t})"
        )
    if pa.types.is_fixed_size_list(t):
        item = t.value_type
        while pa.types.is_fixed_size_list(item):
            item = item.value_type
        if is_var(item) or pa.types.is_list(item) or pa.types.is_large_list(item) or pa.types.is_map(item) \
                or pa.types.is_dictionary(item):
            # pylance 14.0.2 cannot write these either (its encoder panics); files we wrote
            # would be unreadable there, so refuse and name the version that was asked for.
            raise UnsupportedTypeError(
                f"field {path!r}: fixed-size lists of {item} are not supported "
                f"(file version {version[0]}.{version[1]})"
            )
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            _refuse_unwritable(t.field(i), f"{path}.{t.field(i).name}", version)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        _refuse_unwritable(t.value_field, f"{path}.{t.value_field.name}", version)
    elif pa.types.is_map(t):
        _refuse_unwritable(t.field(0), f"{path}.{t.field(0).name}", version)


class _Column:
    def __init__(self, index: int, path: list[pa.Field], meta: dict[str, str]) -> None:
        self.index = index
        self.path = path
        self.kinds = _path_kinds(path)
        self.meta = meta
        # blob pages write their bytes while encoding, so they must run on the writing thread
        self.inline = meta.get(META_BLOB, "").lower() == "true"
        self.pages: list[tuple[list[tuple[int, int]], int, int, str, bytes]] = []


#: An encoded page: serialized PageLayout, buffers, rows.
_Encoded = tuple[bytes, list[Any], int]


class Encoder21:
    """Encoder for 2.1 / 2.2 files.

    Args:
        schema: Arrow schema of the batches (field metadata ``lance-encoding:*`` is honoured).
        version: ``(2, 1)`` or ``(2, 2)``.
        writer: ``lance_format.file.container.ContainerWriter`` receiving the page buffers.
        max_page_bytes: Buffered bytes per top-level field before a page is written.
    """

    def __init__(
        self, schema: pa.Schema, version: tuple[int, int], writer: Any, max_page_bytes: int | None = None
    ) -> None:
        self.schema = schema
        self.version = tuple(version)
        self.large = self.version >= (2, 2)
        self.writer = writer
        self.page_bytes = int(max_page_bytes or DEFAULT_PAGE_BYTES)
        self.columns: list[_Column] = []
        self.field_columns: list[list[_Column]] = []
        for f in schema:
            _refuse_unwritable(f, f.name, self.version)
        for f in schema:
            meta = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
            cols = []
            for p in leaf_paths(f):
                leaf_meta = dict(meta)
                leaf_meta.update({k.decode(): v.decode() for k, v in (p[-1].metadata or {}).items()})
                col = _Column(len(self.columns), p, leaf_meta)
                self.columns.append(col)
                cols.append(col)
            self.field_columns.append(cols)
        self.pending: list[list[pa.Array]] = [[] for _ in schema]
        self.pending_bytes = [0] * len(schema)
        self.rows_written = [0] * len(schema)
        self.num_rows = 0
        self.queue: PageQueue[tuple[_Column, int], _Encoded] = PageQueue()

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Buffer a batch; full pages are encoded and written as they fill up.

        A batch larger than a page is cut into page-sized slices (by its average row size), so
        pages come out the same size whatever the batch size and big batches are not copied.
        """
        if batch.num_columns != len(self.schema):
            raise InvalidInputError("batch does not match the writer's schema")
        try:
            for i in range(batch.num_columns):
                self._add(i, batch.column(i))
        except BaseException:
            self.abort()
            raise
        self.num_rows += batch.num_rows

    def _add(self, fi: int, arr: pa.Array) -> None:
        n = len(arr)
        nbytes = arr.nbytes
        start = 0
        while start < n:
            room = self.page_bytes - self.pending_bytes[fi]
            rows = n - start
            if nbytes and rows * nbytes > room * n:
                rows = max(1, -(-room * n // nbytes))
            piece = arr if rows == n else arr.slice(start, rows)
            self.pending[fi].append(piece)
            self.pending_bytes[fi] += nbytes if rows == n else piece.nbytes
            start += rows
            if self.pending_bytes[fi] >= self.page_bytes:
                self._flush(fi)

    def _flush(self, fi: int) -> None:
        arrays = self.pending[fi]
        if not arrays:
            return
        arr = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        self.pending[fi] = []
        self.pending_bytes[fi] = 0
        if len(arr) == 0:
            return
        first_row = self.rows_written[fi]
        for col in self.field_columns[fi]:
            self._write_page(col, arr, first_row)
        self.rows_written[fi] += len(arr)

    def finish(self) -> list[Any]:
        """Flush everything; returns the ColumnMetadata protobufs by column index."""

        try:
            for fi in range(len(self.schema)):
                self._flush(fi)
            self._write_encoded(self.queue.drain())
        except BaseException:
            self.abort()
            raise
        return [make_column_metadata(col.pages) for col in self.columns]

    def abort(self) -> None:
        """Drop pages still being encoded (the file is being discarded)."""
        self.queue.cancel()

    # ----------------------------------------------------------------- pages

    def _write_page(self, col: _Column, arr: pa.Array, first_row: int) -> None:
        if col.inline:
            self._write_encoded(self.queue.drain())
            self._write_encoded([((col, first_row), self._encode_page(col, arr))])
            return
        self._write_encoded(self.queue.put((col, first_row), functools.partial(self._encode_page, col, arr)))

    def _encode_page(self, col: _Column, arr: pa.Array) -> _Encoded:
        # runs on a pool thread: reads only the encoder's settings, writes nothing shared
        sh = shred([arr], col.kinds)
        layout, buffers = self._encode(col, sh)
        return layout.SerializeToString(), buffers, sh.num_rows

    def _write_encoded(self, done: list[tuple[tuple[_Column, int], _Encoded]]) -> None:
        for (col, first_row), (layout, buffers, num_rows) in done:
            positions = [self.writer.write_buffer(b) for b in buffers]
            col.pages.append((positions, num_rows, first_row, PAGE_LAYOUT_URL, layout))

    def _encode(self, col: _Column, sh: Shredded) -> tuple[pb.PageLayout, list[bytes]]:
        values = sh.values
        leaf_t = col.path[-1].type
        layout = pb.PageLayout()
        if pa.types.is_struct(leaf_t) and leaf_t.num_fields == 0:
            # lance writes empty structs as a simple all-null page and reads them back as valid
            if len(col.path) > 1 or values.null_count:
                raise UnsupportedTypeError("empty structs must be top-level and non-null")
            layout.constant_layout.layers.extend(layer_values([Layer.NULLABLE_ITEM]))
            return layout, []
        if len(values) == 0 or (sh.defs is not None and bool((sh.defs > 0).all())):
            # nothing valid at the leaf: an all-null (constant without value) page
            layout.constant_layout.layers.extend(x for x in layer_values(sh.layers))
            if len(sh.layers) == 1:
                return layout, []
            rep = sh.rep.astype(np.uint16).tobytes() if sh.rep is not None else b""
            defs = sh.defs.astype(np.uint16).tobytes() if sh.defs is not None else b""
            return layout, [rep, defs]
        if self.large and len(sh.layers) == 1 and sh.layers[0] == Layer.ALL_VALID_ITEM:
            const = constant_value(values, leaf_t)
            if const is not None:
                layout.constant_layout.layers.extend(layer_values([Layer.ALL_VALID_ITEM]))
                layout.constant_layout.inline_value = const
                return layout, []
        if pa.types.is_struct(leaf_t) and leaf_t.num_fields:
            return self._packed_struct(sh, values, leaf_t)
        if (
            col.meta.get(META_BLOB, "").lower() == "true"
            and len(sh.layers) == 1
            and (pa.types.is_binary(leaf_t) or pa.types.is_large_binary(leaf_t))
        ):
            return self._blob(sh, values)
        structural = col.meta.get(META_STRUCTURAL, "").lower()
        no_compression = col.meta.get(META_COMPRESSION, "") == "none"
        dict_page = None
        if pa.types.is_dictionary(leaf_t):
            dict_page = dictionary_parts(values)
        elif is_var(leaf_t) and not no_compression and structural != "fullzip":
            dict_page = maybe_dictionary(values, col.meta)
        if (
            dict_page is None
            and structural != "miniblock"
            and (structural == "fullzip" or is_wide(values, leaf_t, no_compression))
        ):
            return encode_fullzip(sh, values, leaf_t)
        return self._miniblock(sh, values, leaf_t, dict_page, col.meta)

    def _packed_struct(
        self, sh: Shredded, values: pa.Array, t: pa.DataType
    ) -> tuple[pb.PageLayout, list[bytes]]:
        """Packed struct: fixed-width children row-major in a mini-block, else (2.2) full-zip rows."""
        n = len(values)
        kids = [values.field(i) for i in range(t.num_fields)]
        if any(is_var(c.type) for c in kids):
            if not self.large:
                raise UnsupportedTypeError("packed structs with variable-width fields need file version 2.2")
            return encode_packed_fullzip(sh, values, t)
        if any(pa.types.is_fixed_size_list(c.type) or pa.types.is_nested(c.type) for c in kids):
            raise UnsupportedTypeError(
                "packed struct fields must be primitive (lance cannot read others back)"
            )
        bits = [fixed_bits(c.type) for c in kids]
        if any(b % 8 for b in bits):
            raise UnsupportedTypeError("packed struct fields must be whole bytes wide")
        cols = []
        for c, b in zip(kids, bits, strict=True):
            cols.append(fixed_bytes(c, b)[: n * b // 8].reshape(n, b // 8))
        rows = np.concatenate(cols, axis=1).reshape(-1) if cols else np.zeros(0, np.uint8)
        chunks = flat_chunks(rows, sum(bits), n, chunk_cap(sh, n))
        enc = pb.CompressiveEncoding()
        enc.packed_struct.bits_per_value.extend(bits)
        enc.packed_struct.values.flat.bits_per_value = sum(bits)
        chunks.encoding = enc
        return self._frame(sh, chunks, n)

    def _blob(self, sh: Shredded, values: pa.Array) -> tuple[pb.PageLayout, list[bytes]]:
        """Blob column: the bytes go to one buffer of their own; the page holds (position, size)."""
        offs, data = var_parts(values)
        # a page cut from a bigger batch shares its data buffer: keep only this page's bytes
        data = data[int(offs[0]) : int(offs[-1])]
        offs = offs - offs[0]
        lens = np.diff(offs)
        position, _ = self.writer.write_buffer(data.tobytes()) if len(data) else (0, 0)
        desc = np.zeros((len(values), 2), np.uint64)
        desc[:, 0] = np.where(lens > 0, position + offs[:-1], 0)
        desc[:, 1] = lens
        if sh.defs is not None:  # nulls: size 0 and (def << 16) in the position
            null = sh.defs > 0
            desc[null, 0] = sh.defs[null].astype(np.uint64) << np.uint64(16)
            desc[null, 1] = 0
        n = len(values)
        chunks = flat_chunks(desc.reshape(-1).view(np.uint8), 128, n)
        enc = pb.CompressiveEncoding()
        enc.packed_struct.bits_per_value.extend([64, 64])
        enc.packed_struct.values.flat.bits_per_value = 128
        chunks.encoding = enc
        inner = Shredded(None, None, [Layer.ALL_VALID_ITEM], values, sh.num_rows)
        inner_layout, buffers = self._frame(inner, chunks, n)
        layout = pb.PageLayout()
        layout.blob_layout.inner_layout.CopyFrom(inner_layout)
        layout.blob_layout.layers.extend(layer_values(sh.layers))
        return layout, buffers

    def _frame(
        self,
        sh: Shredded,
        chunks: ValueChunks,
        n_values: int,
        layout: pb.PageLayout | None = None,
        dict_buf: bytes | None = None,
    ) -> tuple[pb.PageLayout, list[bytes]]:
        """Frame ``chunks`` with the levels of ``sh`` into a mini-block page.

        Buffers: chunk metadata, chunk data, then the dictionary (if any) and the repetition index.
        """
        layout = layout if layout is not None else pb.PageLayout()
        m = layout.mini_block_layout
        visible = None
        max_rep = sum(1 for layer in sh.layers if layer.is_list)
        if sh.rep is not None and sh.defs is not None:
            first_list = next(i for i, layer in enumerate(sh.layers) if layer.is_list)
            visible = sh.defs <= sum(layer.num_def_levels for layer in sh.layers[:first_list])
        meta_buf, data_buf, rep_enc, def_enc, rep_idx = serialize(
            chunks, sh.rep, sh.defs, visible, self.large, max_rep
        )
        if rep_enc is not None:
            m.rep_compression.CopyFrom(rep_enc)
        if def_enc is not None:
            m.def_compression.CopyFrom(def_enc)
        m.value_compression.CopyFrom(chunks.encoding)
        m.layers.extend(layer_values(sh.layers))
        m.num_buffers = chunks.num_buffers
        m.num_items = n_values
        if rep_idx is not None:
            m.repetition_index_depth = 1
        if self.large:
            m.has_large_chunk = True
        buffers = [meta_buf, data_buf]
        if dict_buf is not None:
            buffers.append(dict_buf)
        if rep_idx is not None:
            buffers.append(rep_idx)
        return layout, buffers

    def _miniblock(
        self,
        sh: Shredded,
        values: pa.Array,
        t: pa.DataType,
        dict_page: tuple[np.ndarray, pa.Array] | None,
        meta: dict[str, str],
    ) -> tuple[pb.PageLayout, list[bytes]]:
        """Mini-block page: values (or dictionary indices) in chunks, levels alongside."""
        no_compression = meta.get(META_COMPRESSION, "") == "none"
        layout = pb.PageLayout()
        m = layout.mini_block_layout
        dict_buf = None
        cap = chunk_cap(sh, len(values))
        if dict_page is not None:
            indices, dictionary = dict_page
            # Arrow dictionary columns keep their key width; lance's own dictionaries use u32
            ibits = t.index_type.bit_width if pa.types.is_dictionary(t) else 32
            chunks = index_chunks(indices, ibits, no_compression, meta, cap)
            dict_buf = (
                variable_block(dictionary)
                if is_var(dictionary.type)
                else fixed_bytes(dictionary, fixed_bits(dictionary.type)).tobytes()
            )
            inner = m.dictionary.general.values if self.large else m.dictionary
            if is_var(dictionary.type):
                inner.variable.offsets.flat.bits_per_value = 64 if is_large(dictionary.type) else 32
            else:
                inner.flat.bits_per_value = fixed_bits(dictionary.type)
            if self.large:  # 2.2 wraps dictionaries in LZ4, as lance does
                m.dictionary.general.compression.scheme = pb.COMPRESSION_ALGORITHM_LZ4
                dict_buf = compress_buffer("lz4", dict_buf, None)
            m.num_dictionary_items = len(dictionary)
        else:
            chunks = value_chunks(values, t, no_compression, meta, cap)
        return self._frame(sh, chunks, len(values), layout, dict_buf)
