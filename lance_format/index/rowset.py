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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class RowDomain:
    """The ids one index segment may hold, to refuse damaged ones instead of answering wrong rows.

    Without stable row ids an index holds row addresses of the fragments it covers (its
    ``fragment_bitmap``), each below its fragment's physical row count; with stable row ids it
    holds stable row ids below the manifest's ``next_row_id``. Checked on the ids a query reads
    (never a pass over the whole index).

    Attributes:
        fragments: Fragment ids the segment covers (``None`` when the manifest does not say).
        fragment_rows: Physical rows of a fragment of the dataset version, ``None`` if it is gone.
        next_row_id: ``None`` when ids are row addresses, else the first stable row id not handed out.
    """

    fragments: frozenset[int] | None
    fragment_rows: Callable[[int], int | None]
    next_row_id: int | None = None

    @property
    def addresses(self) -> bool:
        """Whether the ids are row addresses (else stable row ids)."""
        return self.next_row_id is None

    def check_fragment(self, frag: int, where: str) -> int | None:
        """Physical rows of ``frag`` (``None`` if unknown); refuses a fragment the segment does not cover."""
        if self.fragments is not None and frag not in self.fragments:
            raise CorruptFileError(f"{where}: row addresses of fragment {frag}, which the index does not cover "
                                   f"(it covers {_few(self.fragments)})")
        return self.fragment_rows(frag)

    def check(self, ids: U64, where: str) -> None:
        """Refuse ``ids`` that cannot be rows of this segment."""
        if ids.size == 0:
            return
        if not self.addresses:
            top = int(ids.max())
            if top >= int(self.next_row_id or 0):
                raise CorruptFileError(f"{where}: stable row id {top} was never handed out "
                                       f"(next row id is {self.next_row_id})")
            return
        frags = fragment_of(ids)
        offs = offset_of(ids)
        order = np.argsort(frags, kind="stable") if bool((frags[1:] < frags[:-1]).any()) else None
        if order is not None:
            frags, offs = frags[order], offs[order]
        cuts = np.flatnonzero(frags[1:] != frags[:-1]) + 1
        for a, b in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [frags.size])), strict=True):
            frag = int(frags[a])
            rows = self.check_fragment(frag, where)
            top = int(offs[a:b].max())
            if rows is not None and top >= rows:
                raise CorruptFileError(f"{where}: row offset {top} of fragment {frag}, which has {rows} rows")


def _few(ids: frozenset[int]) -> str:
    shown = sorted(ids)[:8]
    return "fragments " + ", ".join(map(str, shown)) + (", …" if len(ids) > len(shown) else "") if ids \
        else "no fragments"


def decode_row_set(data: bytes, fragment_rows: Callable[[int], int | None], *, where: str,
                   domain: RowDomain | None = None) -> U64:
    """Row addresses of a serialized ``RowIdTreeMap`` (sorted).

    Args:
        data: The serialized bytes.
        fragment_rows: Physical row count of a fragment, or ``None`` if it no longer
            exists; used for whole-fragment entries (which are then skipped if gone).
        where: What is being decoded, for error messages.
        domain: When given, every id must be a row of the segment (see :class:`RowDomain`).

    Raises:
        CorruptFileError: the bytes are not a valid encoding, fragments are not in ascending
            order, or (with ``domain``) an id is not a row the segment can hold.
    """
    try:
        (count,) = _HEAD.unpack_from(data, 0)
        pos = _HEAD.size
        if count > (len(data) - pos) // _ENTRY.size:
            raise CorruptFileError(f"{where}: row set of {count} fragments in {len(data)} bytes")
        pieces: list[U64] = []
        last = -1
        for _ in range(count):
            frag, length = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            if frag <= last:
                raise CorruptFileError(f"{where}: fragment {frag} follows fragment {last} in a row set")
            last = frag
            if domain is not None and domain.addresses:
                domain.check_fragment(frag, where)
            if length == 0:
                rows = fragment_rows(frag)
                offs = np.arange(rows or 0, dtype=np.uint64)
            else:
                if pos + length > len(data):
                    raise CorruptFileError(f"{where}: a {length}-byte bitmap runs past the row set's "
                                           f"{len(data)} bytes")
                chunk = data[pos:pos + length]
                bitmap = BitMap.deserialize(chunk)
                size, cardinality = _portable_layout(chunk)
                if size != length or cardinality != len(bitmap):
                    raise CorruptFileError(
                        f"{where}: fragment {frag}'s bitmap says {cardinality} rows in {size} bytes, but it "
                        f"holds {len(bitmap)} rows in {length} bytes")
                offs = np.frombuffer(bitmap.to_array(), dtype=np.uint32).astype(np.uint64)
                pos += length
            pieces.append((np.uint64(frag) << np.uint64(32)) | offs)
    except (struct.error, ValueError, OverflowError) as exc:
        raise CorruptFileError(f"{where}: malformed row set: {exc}") from exc
    if pos != len(data):
        raise CorruptFileError(f"{where}: {len(data) - pos} trailing bytes after the row set")
    out = np.concatenate(pieces) if pieces else np.empty(0, np.uint64)
    if domain is not None:
        domain.check(out, where)
    return out


_NO_RUN_COOKIE, _RUN_COOKIE, _NO_OFFSETS_BELOW, _ARRAY_MAX = 12346, 12347, 4, 4096


def _portable_layout(data: bytes) -> tuple[int, int]:
    """``(bytes, rows)`` the container headers of a portable roaring bitmap say it has.

    Every writer (CRoaring, roaring-rs) records each container's cardinality in the header, and
    the row set records the bitmap's byte length: a damaged cardinality can leave a valid
    bitmap that stops early (an array container read short), which only these disagree on.
    Layout (the portable format of roaring's ``serialization.md``): a ``u32`` cookie (12346, then
    a ``u32`` count; or 12347 with ``count - 1`` in its high half, then one run flag per
    container), a ``(u16 key, u16 cardinality - 1)`` per container, ``u32`` offsets (with runs
    only from 4 containers on), then the containers: runs ``u16`` count + 4 bytes a run, more
    than 4,096 rows a 8 KiB bitset, else ``u16`` values.
    """
    (cookie,) = _HEAD.unpack_from(data, 0)
    if cookie & 0xFFFF == _RUN_COOKIE:
        n = (cookie >> 16) + 1
        runs = data[4 : 4 + (n + 7) // 8]
        pos = 4 + (n + 7) // 8
        offsets = n >= _NO_OFFSETS_BELOW
    elif cookie == _NO_RUN_COOKIE:
        (n,) = _HEAD.unpack_from(data, 4)
        runs, pos, offsets = b"", 8, True
    else:
        raise ValueError(f"not a portable roaring bitmap (cookie {cookie})")
    if pos + 4 * n > len(data):
        raise ValueError(f"{n} containers do not fit in {len(data)} bytes")
    cards = np.frombuffer(data, dtype="<u2", count=2 * n, offset=pos)[1::2].astype(np.int64) + 1
    pos += 4 * n * (2 if offsets else 1)
    for i, card in enumerate(cards.tolist()):
        if runs and runs[i // 8] >> (i % 8) & 1:
            (count,) = struct.unpack_from("<H", data, pos)
            pos += 2 + 4 * count
        else:
            pos += 8192 if card > _ARRAY_MAX else 2 * card
    return pos, int(cards.sum())


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
