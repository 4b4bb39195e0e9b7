"""Many small reads (a take) return the same bytes whether read one by one or concurrently."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError
from lance_format.file.container import ByteSource
from lance_format.file.v2_1.blocks import Chunk, Var
from lance_format.file.v2_1.compression import decode_miniblock
from lance_format.storage import open_store


@pytest.mark.parametrize("count", [10, 300])  # below and above the concurrent-read threshold
def test_gather_returns_the_bytes_of_every_range(tmp_path: Path, count: int) -> None:
    payload = os.urandom(count * 9000 + 100)
    (tmp_path / "f.bin").write_bytes(payload)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    rng = np.random.default_rng(3)
    starts = np.sort(rng.choice(len(payload) // 9000, count, replace=False)) * 9000 + rng.integers(0, 50, count)
    lengths = rng.integers(0, 200, count)
    blob, pos = source.gather(starts, lengths)
    for s, n, p in zip(starts.tolist(), lengths.tolist(), pos.tolist(), strict=True):
        assert bytes(blob[p : p + n]) == payload[s : s + n]
    source.close()


def _zstd_chunk(values: list[bytes], size_prefix: int | None = None) -> Chunk:
    offsets = np.cumsum([0, *map(len, values)]).astype(np.uint32) + 4 * (len(values) + 1)
    raw = offsets.tobytes() + b"".join(values)
    framed = (len(raw) if size_prefix is None else size_prefix).to_bytes(8, "little") + \
        pa.compress(raw, codec="zstd", asbytes=True)
    return Chunk([np.frombuffer(framed, np.uint8)], len(values))


def _zstd_variable() -> pb.CompressiveEncoding:
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = pb.COMPRESSION_ALGORITHM_ZSTD
    enc.general.values.variable.offsets.flat.bits_per_value = 32
    return enc


def test_zstd_chunks_of_a_page_decode_to_their_values() -> None:
    groups = [[f"v{i}-{j}".encode() * (j % 5 + 1) for j in range(40)] for i in range(50)]
    block = decode_miniblock(_zstd_variable(), [_zstd_chunk(g) for g in groups])
    assert isinstance(block, Var)
    flat = [v for g in groups for v in g]
    data = bytes(block.data)
    assert [data[a:b] for a, b in zip(block.offsets[:-1], block.offsets[1:], strict=True)] == flat


def test_zstd_chunk_with_a_wrong_size_prefix_is_reported() -> None:
    chunks = [_zstd_chunk([b"abc", b"defg"]) for _ in range(5)]
    chunks[2] = _zstd_chunk([b"abc", b"defg"], size_prefix=3)
    with pytest.raises(CorruptFileError):
        decode_miniblock(_zstd_variable(), chunks)


def test_zstd_chunks_whose_size_prefixes_disagree_are_reported() -> None:
    # the page total still adds up: only per-chunk sizes are wrong
    real = len(_zstd_chunk([b"abc", b"defg"]).buffers[0])  # noqa: F841 - documents the layout
    size = 4 * 3 + 7
    chunks = [_zstd_chunk([b"abc", b"defg"]) for _ in range(4)]
    chunks[1] = _zstd_chunk([b"abc", b"defg"], size_prefix=size + 1)
    chunks[2] = _zstd_chunk([b"abc", b"defg"], size_prefix=size - 1)
    with pytest.raises(CorruptFileError):
        decode_miniblock(_zstd_variable(), chunks)
