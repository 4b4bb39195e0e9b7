"""Row-address sets as Lance index files store them.

Bitmap indices serialize each key's rows as Lance's ``RowIdTreeMap`` encoding
(``RowIdTreeMap::serialize_into``, ``rust/lance-core/src/utils/mask.rs``): a ``u32``
count of fragments, then per fragment in ascending id a ``u32`` fragment id, a
``u32`` byte length (0 means "every row of the fragment") and a portable 32-bit
roaring bitmap of row offsets. The fragment-reuse index uses a standard 64-bit
roaring treemap instead (``changed_row_addrs``), which pyroaring's ``BitMap64`` reads.

Row addresses are ``fragment_id << 32 | row_offset`` (``uint64``) throughout.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap, BitMap64

from lance_format.errors import CorruptFileError

U64 = npt.NDArray[np.uint64]
_HEAD = struct.Struct("<I")
_ENTRY = struct.Struct("<II")


def fragment_of(addrs: U64) -> npt.NDArray[np.uint64]:
    """Fragment id of each row address."""
    return addrs >> np.uint64(32)


def offset_of(addrs: U64) -> npt.NDArray[np.uint32]:
    """Row offset (inside its fragment) of each row address."""
    return (addrs & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def split_by_fragment(addrs: U64) -> list[tuple[int, npt.NDArray[np.uint32]]]:
    """``[(fragment id, offsets)]`` of sorted ``addrs``, fragments ascending."""
    if addrs.size == 0:
        return []
    frags = fragment_of(addrs)
    cuts = np.flatnonzero(frags[1:] != frags[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    stops = np.concatenate((cuts, [addrs.size]))
    offs = offset_of(addrs)
    return [(int(frags[a]), offs[a:b]) for a, b in zip(starts, stops, strict=True)]


def encode_row_set(addrs: U64) -> bytes:
    """Serialize sorted, unique row addresses as a ``RowIdTreeMap``."""
    parts = split_by_fragment(addrs)
    out = [_HEAD.pack(len(parts))]
    for frag, offs in parts:
        body = BitMap(offs, optimize=False).serialize()  # pylance writes no run containers here
        out.append(_ENTRY.pack(frag, len(body)))
        out.append(body)
    return b"".join(out)


def decode_row_set(data: bytes, fragment_rows: Callable[[int], int | None], *, where: str) -> U64:
    """Row addresses of a serialized ``RowIdTreeMap`` (sorted).

    Args:
        data: The serialized bytes.
        fragment_rows: Physical row count of a fragment, or ``None`` if it no longer
            exists; used for whole-fragment entries (which are then skipped if gone).
        where: What is being decoded, for error messages.

    Raises:
        CorruptFileError: the bytes are not a valid encoding.
    """
    try:
        (count,) = _HEAD.unpack_from(data, 0)
        pos = _HEAD.size
        pieces: list[U64] = []
        for _ in range(count):
            frag, length = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            if length == 0:
                rows = fragment_rows(frag)
                offs = np.arange(rows or 0, dtype=np.uint64)
            else:
                offs = np.frombuffer(BitMap.deserialize(data[pos:pos + length]).to_array(),
                                     dtype=np.uint32).astype(np.uint64)
                pos += length
            pieces.append((np.uint64(frag) << np.uint64(32)) | offs)
    except (struct.error, ValueError, OverflowError) as exc:
        raise CorruptFileError(f"{where}: malformed row set: {exc}") from exc
    if pos != len(data):
        raise CorruptFileError(f"{where}: {len(data) - pos} trailing bytes after the row set")
    return np.concatenate(pieces) if pieces else np.empty(0, np.uint64)


def encode_treemap(addrs: U64) -> bytes:
    """Serialize row addresses as a standard 64-bit roaring treemap."""
    return bytes(BitMap64(addrs).serialize())


def decode_treemap(data: bytes, *, where: str) -> U64:
    """Sorted row addresses of a standard 64-bit roaring treemap."""
    try:
        bm = BitMap64.deserialize(data)
    except (ValueError, OverflowError) as exc:
        raise CorruptFileError(f"{where}: malformed roaring treemap: {exc}") from exc
    return np.fromiter(bm, dtype=np.uint64, count=len(bm))
