"""Test helpers: open a 2.1/2.2 file with our container parser and the 2.1 decoder directly."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from lance_format.file.container import ByteSource, read_file_metadata
from lance_format.file.v2_1.decoder import Decoder21
from lance_format.schema_codec import schema_from_pb
from lance_format.storage import open_store


def open_decoder(path: str, columns: list[str] | None = None) -> Decoder21:
    store = open_store(os.path.dirname(path))
    source = ByteSource(store, os.path.basename(path))
    meta = read_file_metadata(source)
    schema = schema_from_pb(meta.schema_fields, meta.schema_metadata).to_arrow()
    names = schema.names
    proj = list(range(len(names))) if columns is None else [names.index(c) for c in columns]
    return Decoder21(meta, source, schema, proj)


def read_table(path: str, columns: list[str] | None = None) -> pa.Table:
    dec = open_decoder(path, columns)
    return pa.Table.from_batches([dec.read_range(0, dec.num_rows)])


def take_table(path: str, idx: np.ndarray, columns: list[str] | None = None) -> pa.Table:
    dec = open_decoder(path, columns)
    return pa.Table.from_batches([dec.take(idx)])


def write_file(path: str, table: pa.Table, version: str = "2.2", max_page_bytes: int | None = None) -> int:
    """Write ``table`` as a 2.1/2.2 Lance file with our encoder (bypassing FILE20's writer)."""
    from lance_format.file.container import ContainerWriter
    from lance_format.file.v2_1.encoder import Encoder21
    from lance_format.schema import LanceSchema
    from lance_format.schema_codec import schema_to_pb

    ver = (2, 1) if version == "2.1" else (2, 2)
    with open(path, "wb") as fh:
        cw = ContainerWriter(fh, path)
        enc = Encoder21(table.schema, ver, cw, max_page_bytes)
        for b in table.to_batches():
            enc.write_batch(b)
        cols = enc.finish()
        fields, meta = schema_to_pb(LanceSchema.from_arrow(table.schema))
        size = cw.finish(fields, meta, table.num_rows, cols, ver)
    return size
