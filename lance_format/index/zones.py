"""Zones: runs of ``rows_per_zone`` live rows of one fragment, as ZONEMAP and BLOOMFILTER cut them.

Both kinds keep a row per zone (``ZoneMapIndexBuilder`` / ``BloomFilterIndexBuilder`` in
``rust/lance-index/src/scalar/``): a zone is ``rows_per_zone`` consecutive live rows of one
fragment in row-address order (a fragment's last zone may be shorter); ``zone_start`` is the
row offset of its first row and ``zone_length`` the offsets it spans, deleted rows included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import distinct
from lance_format.file.reader import _guarded
from lance_format.index.rowset import fragment_of, offset_of
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import FragmentScan, ReadContext

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Zones:
    """Zone boundaries over rows sorted by address: zone ``k`` is rows ``[first[k], stop[k])``.

    Attributes:
        first: Index (into the rows) of each zone's first row.
        stop: One past each zone's last row.
        fragment_id: Each zone's fragment.
        zone_start: Row offset of each zone's first row.
        zone_length: Offsets each zone spans (last offset - first offset + 1).
    """

    first: I64
    stop: I64
    fragment_id: U64
    zone_start: U64
    zone_length: U64


def fragment_starts(addrs: U64) -> I64:
    """Index of the first row of each fragment in sorted row addresses ``addrs`` (not empty)."""
    f0, f1 = int(addrs[0]) >> 32, int(addrs[-1]) >> 32
    if f1 - f0 < 1 << 16:  # binary search per fragment id: no pass over every row
        ids = np.arange(f0, f1 + 1, dtype=np.uint64)
        at = np.searchsorted(addrs, ids << np.uint64(32))
        present = at < addrs.size
        present[present] = fragment_of(addrs[at[present]]) == ids[present]
        out: I64 = at[present].astype(np.int64)
        return out
    frags = fragment_of(addrs)
    starts: I64 = np.concatenate(([0], np.flatnonzero(frags[1:] != frags[:-1]) + 1)).astype(np.int64)
    return starts


def cut_zones(addrs: U64, rows_per_zone: int) -> Zones:
    """Cut rows (sorted by row address) into zones of ``rows_per_zone`` rows of one fragment."""
    n = addrs.size
    if n == 0:
        e = np.empty(0, np.int64)
        u = np.empty(0, np.uint64)
        return Zones(e, e, u, u, u)
    frag_first = fragment_starts(addrs)
    counts = np.diff(np.append(frag_first, n))
    per_frag = -(-counts // rows_per_zone)  # zones of each fragment (its last may be short)
    k = np.arange(int(per_frag.sum()), dtype=np.int64) - np.repeat(np.cumsum(per_frag) - per_frag, per_frag)
    first = (np.repeat(frag_first, per_frag) + k * rows_per_zone).astype(np.int64)
    stop = np.append(first[1:], n).astype(np.int64)
    head, tail = addrs[first], addrs[stop - 1]
    start = offset_of(head).astype(np.uint64)
    length = offset_of(tail).astype(np.uint64) - start + np.uint64(1)
    return Zones(first, stop, fragment_of(head), start, length)


def whole_zones(batches: Iterable[tuple[pa.Array, U64]], rows_per_zone: int) -> Iterator[tuple[pa.Array, U64]]:
    """A scan's ``(values, row addresses)`` batches regrouped into runs of whole zones.

    A fragment's rows may span batches: the rows past its last whole zone in a batch wait for
    the next batch, and go out on their own once another fragment starts (or the scan ends).
    Every run starts on a zone boundary, so :func:`cut_zones` of each run cuts the zones a cut
    of the whole column would, and a build never holds the whole column. Rows must come
    fragment after fragment, ascending within each (as a scan reads them).
    """
    held: tuple[pa.Array, U64] | None = None
    for values, addrs in batches:
        if addrs.size == 0:
            continue
        values, addrs = sort_by_address(values, addrs)
        if held is not None:
            if int(held[1][-1]) >> 32 != int(addrs[0]) >> 32:
                yield held  # its fragment ended: the last, shorter zone
            else:
                values, addrs = pa.concat_arrays([held[0], values]), np.concatenate([held[1], addrs])
            held = None
        last = int(fragment_starts(addrs)[-1])
        keep = last + (addrs.size - last) // rows_per_zone * rows_per_zone
        if keep:
            yield values.slice(0, keep), addrs[:keep]
        if keep < addrs.size:
            held = values.slice(keep), addrs[keep:]
    if held is not None:
        yield held


def file_columns(ctx: ReadContext, frags: Sequence[FragmentMetadata], column: str) -> WholeFragments | None:
    """Each fragment's live ``column`` values, decoded in one call per data file.

    A build reads every row of its fragments in address order: decoding each file whole skips
    the scanner's batching and per-batch layers (a third of a ZONEMAP build's read). ``None``
    when some fragment's column is not one plain column of one data file (the caller scans).
    """
    scans = [FragmentScan(ctx, f, [column]) for f in frags]
    decoders = [s.whole_file_decoder() for s in scans]
    if any(d is None for d in decoders):
        return None
    return WholeFragments(_file_columns(ctx, frags, scans, decoders))


@dataclass(frozen=True)
class FragmentColumn:
    """Every live row of one fragment's column, in offset order, and where those rows are.

    Attributes:
        values: The live rows' values.
        fragment_id: The fragment.
        live: Offsets of the live rows (sorted); ``None`` when none is deleted (offsets ``0..n-1``),
            so a build of an undeleted fragment never holds a row address per row.
    """

    values: pa.Array
    fragment_id: int
    live: I64 | None

    def addresses(self, which: npt.NDArray[np.bool_] | None = None) -> U64:
        """Row addresses of the rows (of those ``which`` picks)."""
        offsets = np.arange(len(self.values), dtype=np.int64) if self.live is None else self.live
        if which is not None:
            offsets = offsets[which]
        return offsets.astype(np.uint64) + np.uint64(self.fragment_id << 32)

    def zones(self, rows_per_zone: int) -> Zones:
        """The rows cut into zones of ``rows_per_zone`` (as :func:`cut_zones` of their addresses)."""
        n = len(self.values)
        first = np.arange(0, n, rows_per_zone, dtype=np.int64)
        stop = np.append(first[1:], n).astype(np.int64)
        head, tail = (first, stop - 1) if self.live is None else (self.live[first], self.live[stop - 1])
        start = head.astype(np.uint64)
        return Zones(first, stop, np.full(first.size, self.fragment_id, np.uint64), start,
                     tail.astype(np.uint64) - start + np.uint64(1))


class WholeFragments(Iterable[tuple[pa.Array, U64]]):
    """A build task's fragments, each whole: iterated, ``(values, row addresses)`` per fragment, as a
    scan's batches; :meth:`columns` gives them as :class:`FragmentColumn` (each already a run of
    whole zones: no regrouping by :func:`whole_zones`, no address per row)."""

    def __init__(self, items: Iterator[FragmentColumn]):
        self._items = items

    def __iter__(self) -> Iterator[tuple[pa.Array, U64]]:
        return ((fc.values, fc.addresses()) for fc in self._items)

    def columns(self) -> Iterator[FragmentColumn]:
        """The fragments (once: the files are decoded as this is iterated)."""
        return self._items


def _file_columns(ctx: ReadContext, frags: Sequence[FragmentMetadata], scans: list[FragmentScan],
                  decoders: list[Any]) -> Iterator[FragmentColumn]:
    for frag, scan, dec in zip(frags, scans, decoders, strict=True):
        n = frag.physical_rows
        if n == 0:
            continue
        path = frag.files[0].path
        read_fields = getattr(dec, "read_fields", None)
        if read_fields is not None:
            arr = _guarded(path, read_fields, [0])[0]
        else:  # 2.0 files: one range of every row
            arr = _guarded(path, dec.read_range, 0, n).column(0)
        values = arr if isinstance(arr, pa.Array) and arr.type == scan.target.field(0).type else \
            scan.batch_of([arr]).column(0)
        deleted = ctx.deleted_offsets(frag)
        live = None
        if deleted.size:
            keep = np.ones(n, dtype=bool)
            keep[deleted[deleted < n].astype(np.int64)] = False
            values = values.filter(pa.array(keep))
            live = np.flatnonzero(keep).astype(np.int64)
        if len(values):
            yield FragmentColumn(values, frag.id, live)


#: Up to this many picked zones, :func:`zone_rows` makes one range per zone.
_FEW_ZONES = 8


def zone_rows(fragment_id: U64, zone_start: U64, zone_length: U64, which: npt.NDArray[np.bool_]) -> U64:
    """Every row address of the zones picked by ``which`` (sorted when the zones are)."""
    lens = zone_length[which].astype(np.int64)
    if lens.size == 0 or int(lens.sum()) == 0:
        return np.empty(0, np.uint64)
    base = (fragment_id[which] << np.uint64(32)) + zone_start[which]
    if lens.size <= _FEW_ZONES:  # a point or narrow query: a range per zone, no repeat / cumsum passes
        rows = np.concatenate([np.arange(b, b + n, dtype=np.uint64)
                               for b, n in zip(base.tolist(), lens.tolist(), strict=True)])
    else:  # row k of the picked zones is k + (its zone's base - the rows of the zones before it)
        shift = base - (np.cumsum(lens) - lens).astype(np.uint64)  # may wrap: the sum wraps back
        rows = np.arange(int(lens.sum()), dtype=np.uint64) + np.repeat(shift, lens)
    # Zones as written (and remapped) follow each other without overlap: their rows are then
    # already sorted and unique, and sorting them again would cost more than the rest of the query.
    ends = base + lens.astype(np.uint64)
    if bool(np.all(ends[:-1] <= base[1:])):
        return rows
    out: U64 = distinct(rows)
    return out


def sort_by_address(values: pa.Array, addrs: U64) -> tuple[pa.Array, U64]:
    """Rows in address order (a build reads them so; tasks may come back in any order)."""
    if addrs.size > 1 and not bool(np.all(addrs[1:] > addrs[:-1])):
        order = np.argsort(addrs, kind="stable")
        return values.take(pa.array(order)), addrs[order]
    return values, addrs
