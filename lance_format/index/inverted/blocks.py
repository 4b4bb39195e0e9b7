"""One token's posting list held as its undecoded 128-document blocks.

Every block starts with the best BM25 weight among its documents (f32, written with the
partition's statistics); a full block then holds its first doc id (u32), the tail block (the
last, partial one) starts its doc ids at the first varint (``varint_delta_v1``) or u32
(``fixed32_v1``). Those heads give every block's doc-id range and score bound without
decoding it, so a top-k search decodes only the blocks that can still reach the top
(``rust/lance-index/src/scalar/inverted/wand.rs`` skips blocks by the same bounds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import CorruptFileError
from lance_format.index.inverted import encode
from lance_format.index.inverted.postings import BLOCK, decode_posting

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]


@dataclass
class PostingBlocks:
    """A token's posting blocks in one partition, with each block's first doc id and max score.

    Attributes:
        data: The blocks' bytes, back to back; ``starts``: ``n + 1`` offsets into it.
        length: Documents in the list; ``tail_codec``: how the partial last block is coded.
        first_doc: Each block's first doc id; ``max_score``: each block's stored max weight.
    """

    data: npt.NDArray[np.uint8]
    starts: I64
    length: int
    tail_codec: str
    where: str
    first_doc: U32
    max_score: F32

    @classmethod
    def read(cls, blocks: pa.Array, length: int, tail_codec: str, where: str) -> PostingBlocks:
        """Index the ``_posting`` values of one token (``length`` documents).

        Raises:
            CorruptFileError: the block count or a block's size does not fit ``length``.
        """
        n = len(blocks)
        if n != (length + BLOCK - 1) // BLOCK:
            raise CorruptFileError(f"{where}: {n} posting blocks for {length} documents")
        if not pa.types.is_large_binary(blocks.type):
            blocks = blocks.cast(pa.large_binary())
        bufs = blocks.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=blocks.offset * 8).astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        full = length // BLOCK
        sizes = np.diff(offs)
        if n and (int(sizes.min()) < 4 or (full and int(sizes[:full].min()) < 10) or int(offs[-1]) > data.size):
            raise CorruptFileError(f"{where}: damaged posting block: block too short")
        head = offs[:-1, None] + np.arange(4)
        max_score = data[head].copy().view("<f4").reshape(-1) if n else np.zeros(0, np.float32)
        first = np.zeros(n, np.uint32)
        if full:
            first[:full] = data[offs[:full, None] + np.arange(4, 8)].copy().view("<u4").reshape(-1)
        if full < n:  # the tail block: its first doc id is its first value
            at = int(offs[full]) + 4
            if tail_codec == "fixed32_v1":
                first[full] = int.from_bytes(bytes(data[at:at + 4]), "little")
            else:
                value = shift = 0
                while True:
                    if at >= int(offs[full + 1]):
                        raise CorruptFileError(f"{where}: damaged posting block: truncated varint")
                    b = int(data[at])
                    at += 1
                    value |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                first[full] = value
        return cls(data, offs, length, tail_codec, where, first, max_score.astype(np.float32))

    @property
    def num_blocks(self) -> int:
        """Blocks in the list."""
        return int(self.first_doc.size)

    def decode(self, sel: I64) -> tuple[U32, U32, I64]:
        """Doc ids, frequencies and block number of every document of blocks ``sel`` (ascending).

        Raises:
            CorruptFileError: a block is damaged.
        """
        full = self.length // BLOCK
        sel = np.asarray(sel, np.int64)
        fsel = sel[sel < full]
        try:
            ids, freqs = encode.decode_full_at(self.data, self.starts[fsel])
        except (IndexError, ValueError) as exc:
            raise CorruptFileError(f"{self.where}: damaged posting block: {exc}") from exc
        owner = np.repeat(fsel, BLOCK)
        if fsel.size == sel.size:
            return ids, freqs, owner
        a, b = int(self.starts[full]), int(self.starts[full + 1])
        t_ids, t_freqs = decode_posting([self.data[a:b].tobytes()], self.length - full * BLOCK,
                                        self.tail_codec, self.where)
        return (np.concatenate([ids, t_ids]), np.concatenate([freqs, t_freqs]),
                np.concatenate([owner, np.full(t_ids.size, full, np.int64)]))

    def decode_all(self) -> tuple[U32, U32]:
        """Doc ids and frequencies of the whole list."""
        ids, freqs, _ = self.decode(np.arange(self.num_blocks, dtype=np.int64))
        return ids, freqs
