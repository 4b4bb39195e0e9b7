"""Row-id sequences and row version sequences (stable row ids).

``DataFragment.inline_row_ids`` holds a serialized ``lance.table.RowIdSequence``:
the fragment's row ids, in row order, as a list of ``U64Segment`` s. Segment
choice follows lance (``U64Segment::from_stats_and_sequence``):

* sorted and contiguous -> ``Range{start, end}``
* sorted with gaps -> the smallest of ``RangeWithHoles`` (24 + 4 * holes bytes),
  ``RangeWithBitmap`` (24 + ceil(span / 8)) and ``SortedArray`` (24 + 2 * count),
  ties resolved in that order
* unsorted -> ``Array``

On top of that a sequence is cut where it stops increasing, and a sorted piece
made of a few contiguous runs (what appends and compaction produce) is written
as one ``Range`` per run, which is how lance's own ``RowIdSequence::extend``
keeps such sequences small.

Encoded arrays store ``base = min`` and little-endian ``u16`` offsets when
``max - min < 65535``, ``u32`` when ``< 2**32 - 1``, else raw ``u64`` values.
``RangeWithBitmap`` bits are LSB-first and a set bit means "present" (the proto
comment says MSB-first; lance's code, which wins, is LSB-first).

``inline_created_at_versions`` / ``inline_last_updated_at_versions`` hold a
``RowDatasetVersionSequence``: runs of row *positions* (a ``U64Segment`` over
``0..n``) sharing one dataset version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError

from lance_format._pb import rowids_pb2
from lance_format.errors import CorruptFileError, InvalidInputError

U64Array = npt.NDArray[np.uint64]

#: Upper bound on the rows one sequence may describe (a fragment's row offsets are u32).
MAX_SEQUENCE_ROWS = 2**32
#: Most segments a sorted piece may be split into before a single segment is used.
MAX_RUN_SEGMENTS = 64

_U64_MAX = 2**64 - 1


# -- encoding ---------------------------------------------------------------------


def _encoded_array(values: U64Array) -> rowids_pb2.EncodedU64Array:
    msg = rowids_pb2.EncodedU64Array()
    if values.size == 0:
        msg.u16_array.base = 0
        msg.u16_array.offsets = b""
        return msg
    lo = int(values.min())
    spread = int(values.max()) - lo
    if spread < 0xFFFF:
        msg.u16_array.base = lo
        msg.u16_array.offsets = (values - np.uint64(lo)).astype("<u2").tobytes()
    elif spread < 0xFFFFFFFF:
        msg.u32_array.base = lo
        msg.u32_array.offsets = (values - np.uint64(lo)).astype("<u4").tobytes()
    else:
        msg.u64_array.values = values.astype("<u8").tobytes()
    return msg


def _range_segment(start: int, end: int) -> rowids_pb2.U64Segment:
    seg = rowids_pb2.U64Segment()
    seg.range.start = start
    seg.range.end = end
    return seg


def _sorted_segment(values: U64Array) -> rowids_pb2.U64Segment:
    """One segment for strictly increasing ``values`` (lance's size rule)."""
    count = int(values.size)
    if count == 0:
        return _range_segment(0, 0)
    lo, hi = int(values[0]), int(values[-1])
    if hi == _U64_MAX:  # a range's exclusive end would not fit in u64
        seg = rowids_pb2.U64Segment()
        seg.sorted_array.CopyFrom(_encoded_array(values))
        return seg
    span = hi - lo + 1
    holes = span - count
    if holes == 0:
        return _range_segment(lo, hi + 1)
    sizes = (24 + 4 * holes, 24 + (span + 7) // 8, 24 + 2 * count)
    best = sizes.index(min(sizes))
    seg = rowids_pb2.U64Segment()
    if best == 2:
        seg.sorted_array.CopyFrom(_encoded_array(values))
        return seg
    # Holes/bitmap only win when span <= ~16 * count, so this mask stays small.
    present = np.zeros(span, dtype=bool)
    present[(values - np.uint64(lo)).astype(np.int64)] = True
    if best == 0:
        seg.range_with_holes.start = lo
        seg.range_with_holes.end = hi + 1
        hole_values = np.flatnonzero(~present).astype(np.uint64) + np.uint64(lo)
        seg.range_with_holes.holes.CopyFrom(_encoded_array(hole_values))
    else:
        seg.range_with_bitmap.start = lo
        seg.range_with_bitmap.end = hi + 1
        seg.range_with_bitmap.bitmap = np.packbits(present, bitorder="little").tobytes()
    return seg


def _increasing_piece(values: U64Array) -> list[rowids_pb2.U64Segment]:
    """Segments for one strictly increasing piece: a few Ranges, or one segment."""
    if values.size == 0:
        return [_range_segment(0, 0)]
    cuts = np.flatnonzero(values[1:] - values[:-1] != 1) + 1
    if 0 < cuts.size < MAX_RUN_SEGMENTS and int(values[-1]) < _U64_MAX:
        single = _sorted_segment(values)
        if not single.HasField("range") and 16 * (cuts.size + 1) < single.ByteSize():
            starts = np.concatenate(([0], cuts))
            ends = np.concatenate((cuts, [values.size]))
            return [
                _range_segment(int(values[s]), int(values[e - 1]) + 1)
                for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
            ]
        return [single]
    return [_sorted_segment(values)]


def _as_u64(ids: npt.ArrayLike, what: str) -> U64Array:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InvalidInputError(f"{what} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.dtype.kind == "i":
        if int(arr.min()) < 0:
            raise InvalidInputError(f"{what} must be non-negative")
    elif arr.dtype.kind != "u":
        raise InvalidInputError(f"{what} must be integers, got dtype {arr.dtype}")
    return arr.astype(np.uint64, copy=False)


def row_id_segments(ids: npt.ArrayLike) -> list[rowids_pb2.U64Segment]:
    """Return the ``U64Segment`` messages :func:`encode_row_ids` would write."""
    values = _as_u64(ids, "row ids")
    if values.size == 0:
        return [_range_segment(0, 0)]
    breaks = np.flatnonzero(values[1:] <= values[:-1]) + 1
    if breaks.size == 0:
        return _increasing_piece(values)
    if breaks.size >= MAX_RUN_SEGMENTS:
        seg = rowids_pb2.U64Segment()
        seg.array.CopyFrom(_encoded_array(values))
        return [seg]
    segments: list[rowids_pb2.U64Segment] = []
    for piece in np.split(values, breaks):
        segments.extend(_increasing_piece(piece))
    return segments


def encode_row_ids(ids: npt.ArrayLike) -> bytes:
    """Serialize row ids (in row order) as ``lance.table.RowIdSequence`` bytes.

    Raises:
        InvalidInputError: if ``ids`` is not a 1-D array of non-negative integers.
    """
    msg = rowids_pb2.RowIdSequence()
    msg.segments.extend(row_id_segments(ids))
    return msg.SerializeToString()


def encode_row_id_range(start: int, end: int) -> bytes:
    """Serialize the contiguous row ids ``start..end`` (what new fragments get)."""
    if not 0 <= start <= end <= _U64_MAX:
        raise InvalidInputError(f"invalid row id range {start}..{end}")
    msg = rowids_pb2.RowIdSequence()
    msg.segments.append(_range_segment(start, end))
    return msg.SerializeToString()


# -- decoding ---------------------------------------------------------------------


def _parse(
    message: type[rowids_pb2.RowIdSequence] | type[rowids_pb2.RowDatasetVersionSequence],
    data: bytes,
    where: str,
) -> object:
    try:
        return message.FromString(bytes(data))
    except (DecodeError, RecursionError, ValueError) as exc:
        raise CorruptFileError(f"{where}: invalid {message.__name__} protobuf: {exc}") from exc


def _array_parts(arr: rowids_pb2.EncodedU64Array, where: str) -> tuple[int, bytes, str]:
    kind = arr.WhichOneof("array")
    if kind == "u16_array":
        return arr.u16_array.base, arr.u16_array.offsets, "<u2"
    if kind == "u32_array":
        return arr.u32_array.base, arr.u32_array.offsets, "<u4"
    if kind == "u64_array":
        return 0, arr.u64_array.values, "<u8"
    raise CorruptFileError(f"{where}: EncodedU64Array has no array variant")


def _array_len(arr: rowids_pb2.EncodedU64Array, where: str) -> int:
    _base, raw, dtype = _array_parts(arr, where)
    width = np.dtype(dtype).itemsize
    if len(raw) % width:
        raise CorruptFileError(f"{where}: {len(raw)} bytes is not a whole number of {width}-byte values")
    return len(raw) // width


def _array_values(arr: rowids_pb2.EncodedU64Array, where: str) -> U64Array:
    base, raw, dtype = _array_parts(arr, where)
    offsets = np.frombuffer(raw, dtype=dtype).astype(np.uint64)
    if base and offsets.size and base + int(offsets.max()) > _U64_MAX:
        raise CorruptFileError(f"{where}: base {base} plus offsets overflows u64")
    return offsets + np.uint64(base)


def _bits(bitmap: bytes, span: int) -> npt.NDArray[np.uint8]:
    """Unpack an LSB-first presence bitmap into ``span`` 0/1 bytes."""
    packed: npt.NDArray[np.uint8] = np.frombuffer(bitmap, dtype=np.uint8)
    return np.unpackbits(packed, count=span, bitorder="little")


def _check_range(start: int, end: int, where: str) -> int:
    if end < start:
        raise CorruptFileError(f"{where}: range end {end} is before start {start}")
    return end - start


def _segment_len(seg: rowids_pb2.U64Segment, where: str) -> int:
    """Number of values in ``seg``, computed without materializing them."""
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return _check_range(seg.range.start, seg.range.end, where)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        span = _check_range(r.start, r.end, where)
        holes = _array_len(r.holes, f"{where} holes")
        if holes > span:
            raise CorruptFileError(f"{where}: {holes} holes in a range of {span} values")
        return span - holes
    if kind == "range_with_bitmap":
        rb = seg.range_with_bitmap
        span = _check_range(rb.start, rb.end, where)
        if len(rb.bitmap) * 8 < span:
            raise CorruptFileError(
                f"{where}: bitmap of {len(rb.bitmap)} bytes is too short for {span} values"
            )
        return int(np.count_nonzero(_bits(rb.bitmap, span)))
    if kind in ("sorted_array", "array"):
        return _array_len(getattr(seg, kind), where)
    raise CorruptFileError(f"{where}: U64Segment has no segment variant")


def _segment_values(seg: rowids_pb2.U64Segment, where: str) -> U64Array:
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return np.arange(seg.range.start, seg.range.end, dtype=np.uint64)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        holes = _array_values(r.holes, f"{where} holes")
        if holes.size and (int(holes.min()) < r.start or int(holes.max()) >= r.end):
            raise CorruptFileError(f"{where}: hole outside range {r.start}..{r.end}")
        present = np.ones(r.end - r.start, dtype=bool)
        present[(holes - np.uint64(r.start)).astype(np.int64)] = False
        return np.flatnonzero(present).astype(np.uint64) + np.uint64(r.start)
    if kind == "range_with_bitmap":
        rb = seg.range_with_bitmap
        bits = _bits(rb.bitmap, rb.end - rb.start)
        return np.flatnonzero(bits).astype(np.uint64) + np.uint64(rb.start)
    return _array_values(getattr(seg, str(kind)), where)


def _segments_len(segments: Sequence[rowids_pb2.U64Segment], where: str) -> list[int]:
    lengths = [_segment_len(seg, f"{where} segment {i}") for i, seg in enumerate(segments)]
    total = sum(lengths)
    if total > MAX_SEQUENCE_ROWS:
        raise CorruptFileError(f"{where}: describes {total} rows, more than a fragment can hold")
    return lengths


def decode_row_ids(
    data: bytes, *, where: str = "row id sequence", expected_len: int | None = None
) -> U64Array:
    """Decode ``RowIdSequence`` bytes into the row ids in row order.

    Args:
        data: Serialized ``lance.table.RowIdSequence``.
        where: Names the source (file, fragment) in error messages.
        expected_len: If given, the sequence must hold exactly this many ids.

    Raises:
        CorruptFileError: on malformed bytes, impossible segments, or a length mismatch.
    """
    msg = cast(rowids_pb2.RowIdSequence, _parse(rowids_pb2.RowIdSequence, data, where))
    segments = list(msg.segments)
    total = sum(_segments_len(segments, where))
    if expected_len is not None and total != expected_len:
        raise CorruptFileError(f"{where}: holds {total} row ids, expected {expected_len}")
    if not segments:
        return np.zeros(0, dtype=np.uint64)
    parts = [_segment_values(seg, f"{where} segment {i}") for i, seg in enumerate(segments)]
    ids = np.concatenate(parts).astype(np.uint64, copy=False)
    if ids.size != total:  # e.g. duplicate holes
        raise CorruptFileError(f"{where}: segments decode to {ids.size} ids but claim {total}")
    return ids


# -- row version sequences ------------------------------------------------------


def encode_version_runs(runs: Sequence[tuple[int, int]]) -> bytes:
    """Serialize ``(row_count, version)`` runs as ``RowDatasetVersionSequence`` bytes.

    Consecutive runs cover consecutive row positions; each span is written as a
    ``Range`` over positions, as lance does. Empty runs are dropped.
    """
    msg = rowids_pb2.RowDatasetVersionSequence()
    pos = 0
    for count, version in runs:
        if count < 0 or not 0 <= version <= _U64_MAX:
            raise InvalidInputError(f"invalid version run ({count}, {version})")
        if count == 0:
            continue
        run = msg.runs.add()
        run.span.range.start = pos
        run.span.range.end = pos + count
        run.version = version
        pos += count
    return msg.SerializeToString()


def encode_versions(versions: npt.NDArray[np.uint64]) -> bytes:
    """Serialize per-row versions (one per row position) as runs of equal versions."""
    if versions.size == 0:
        return encode_version_runs([])
    cuts = np.flatnonzero(versions[1:] != versions[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [versions.size]))
    return encode_version_runs([(int(e - s), int(versions[s])) for s, e in zip(starts, ends, strict=True)])


def encode_uniform_versions(row_count: int, version: int) -> bytes:
    """Serialize the single run every row of a new fragment gets (``0..row_count`` at ``version``)."""
    return encode_version_runs([(row_count, version)])


def decode_version_runs(data: bytes, *, where: str = "row version sequence") -> list[tuple[int, int]]:
    """Decode ``RowDatasetVersionSequence`` bytes into ``(row_count, version)`` runs.

    Raises:
        CorruptFileError: on malformed bytes or a run without a span.
    """
    msg = cast(
        rowids_pb2.RowDatasetVersionSequence, _parse(rowids_pb2.RowDatasetVersionSequence, data, where)
    )
    for i, run in enumerate(msg.runs):
        if not run.HasField("span"):
            raise CorruptFileError(f"{where}: run {i} has no span")
    lengths = _segments_len([run.span for run in msg.runs], where)
    return [(n, int(run.version)) for n, run in zip(lengths, msg.runs, strict=True)]


def decode_versions(
    data: bytes, *, where: str = "row version sequence", expected_len: int | None = None
) -> U64Array:
    """Decode a ``RowDatasetVersionSequence`` into one version per row position.

    Raises:
        CorruptFileError: on malformed bytes or a length mismatch.
    """
    runs = decode_version_runs(data, where=where)
    total = sum(n for n, _ in runs)
    if expected_len is not None and total != expected_len:
        raise CorruptFileError(f"{where}: covers {total} rows, expected {expected_len}")
    if not runs:
        return np.zeros(0, dtype=np.uint64)
    counts = np.array([n for n, _ in runs], dtype=np.int64)
    versions = np.array([v for _, v in runs], dtype=np.uint64)
    return np.repeat(versions, counts)


__all__ = [
    "MAX_RUN_SEGMENTS",
    "MAX_SEQUENCE_ROWS",
    "decode_row_ids",
    "decode_version_runs",
    "decode_versions",
    "encode_row_id_range",
    "encode_row_ids",
    "encode_uniform_versions",
    "encode_versions",
    "encode_version_runs",
    "row_id_segments",
]
