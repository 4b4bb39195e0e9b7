"""All posting lists of an INVERTED partition decoded at once (the remap's read) match the per-token decode."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError
from lance_format.index.inverted.blocks import decode_lists
from lance_format.index.inverted.postings import BLOCK, decode_posting, encode_posting


def _lists(lengths: list[int], seed: int = 0) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[list[bytes]]]:
    rng = np.random.default_rng(seed)
    want, blocks = [], []
    for n in lengths:
        ids = np.sort(rng.choice(200_000, size=n, replace=False)).astype(np.uint32)
        freqs = rng.integers(1, 300, n).astype(np.uint32)  # wide enough for multi-byte varints
        want.append((ids, freqs))
        blocks.append(encode_posting(ids, freqs, [1.0] * ((n + BLOCK - 1) // BLOCK)))
    return want, blocks


def _fixed32_tail(blocks: list[bytes], ids: np.ndarray, freqs: np.ndarray) -> list[bytes]:
    tail = len(ids) % BLOCK
    if not tail:
        return blocks
    body = struct.pack("<f", 1.0) + ids[-tail:].astype("<u4").tobytes() + freqs[-tail:].astype("<u4").tobytes()
    return blocks[:-1] + [body]


@pytest.mark.parametrize("codec", ["varint_delta_v1", "fixed32_v1"])
def test_every_list_decodes_as_the_per_token_decode(codec: str) -> None:
    lengths = [1, 127, 128, 129, 300, 256, 5, 1000]
    want, blocks = _lists(lengths)
    if codec == "fixed32_v1":
        blocks = [_fixed32_tail(b, i, f) for b, (i, f) in zip(blocks, want, strict=True)]
    postings = pa.array(blocks, pa.list_(pa.large_binary()))
    tok, doc, freq = decode_lists(postings, np.array(lengths, np.uint32), codec, "test")
    for t, (ids, freqs) in enumerate(want):
        sel = tok == t
        ref = decode_posting(blocks[t], lengths[t], codec)
        assert np.array_equal(doc[sel], ids) and np.array_equal(doc[sel], ref[0])
        assert np.array_equal(freq[sel], freqs) and np.array_equal(freq[sel], ref[1])
    assert np.all(np.diff(tok) >= 0)


def test_a_sliced_column_decodes_its_own_lists() -> None:
    lengths = [130, 3, 400]
    want, blocks = _lists(lengths, seed=1)
    postings = pa.array(blocks, pa.list_(pa.binary())).slice(1, 2)
    tok, doc, _ = decode_lists(postings, np.array(lengths[1:], np.uint32), "varint_delta_v1", "test")
    assert np.array_equal(doc[tok == 0], want[1][0]) and np.array_equal(doc[tok == 1], want[2][0])


def test_a_truncated_tail_block_is_reported_as_corrupt() -> None:
    lengths = [200]
    _, blocks = _lists(lengths)
    blocks[0][-1] = blocks[0][-1][:-3]
    with pytest.raises(CorruptFileError, match="damaged posting block"):
        decode_lists(pa.array(blocks, pa.list_(pa.large_binary())), np.array(lengths, np.uint32),
                     "varint_delta_v1", "test")


def test_a_block_count_that_does_not_fit_the_length_is_reported() -> None:
    _, blocks = _lists([200])
    with pytest.raises(CorruptFileError, match="block counts"):
        decode_lists(pa.array(blocks, pa.list_(pa.large_binary())), np.array([300], np.uint32),
                     "varint_delta_v1", "test")
