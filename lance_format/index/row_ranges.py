"""Row ranges: an index answer made of runs of consecutive rows.

ZONEMAP and BLOOMFILTER answer a query with whole zones (``rows_per_zone`` rows each, 8,192 by
default), as upstream's ``SearchResult::AtMost`` of zone row ranges. Handing the scan one pair of
bounds per zone instead of one row address per row spares making, sorting and cutting back
thousands of addresses per zone (:mod:`lance_format.index.range_scan` reads the ranges directly).

A range is ``[lo, hi)`` in row-address space (``fragment_id << 32 | row_offset``); ``hi`` may be
``(fragment_id + 1) << 32`` for a range ending at the last possible offset, so a range never
crosses into another fragment as long as ``lo`` and ``hi - 1`` share their fragment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.index.rowset import fragment_of

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
_LOW = np.uint64(0xFFFFFFFF)
_EMPTY = np.empty(0, np.uint64)


@dataclass(frozen=True)
class RowRanges:
    """Sorted, disjoint, non-adjacent row-address ranges ``[lo[k], hi[k])``.

    Attributes:
        lo: First row address of each range (ascending).
        hi: One past the last row address of each range.
    """

    lo: U64
    hi: U64

    @staticmethod
    def empty() -> RowRanges:
        """No rows."""
        return RowRanges(_EMPTY, _EMPTY)

    @staticmethod
    def of(lo: U64, hi: U64) -> RowRanges:
        """Ranges ``[lo, hi)`` in any order, possibly overlapping or touching, merged into normal form."""
        lo, hi = lo.astype(np.uint64, copy=False), hi.astype(np.uint64, copy=False)
        some = hi > lo
        if not bool(some.all()):
            lo, hi = lo[some], hi[some]
        if lo.size <= 1:
            return RowRanges(lo, hi)
        if bool((lo[1:] > hi[:-1]).all()):  # as zones are written: sorted, apart (the common case)
            return RowRanges(lo, hi)
        if not bool((lo[1:] >= lo[:-1]).all()):
            order = np.argsort(lo, kind="stable")
            lo, hi = lo[order], hi[order]
        reach = np.maximum.accumulate(hi)
        # a range starts a new run unless it begins at or before the furthest end so far
        starts = np.concatenate(([True], lo[1:] > reach[:-1]))
        first = np.flatnonzero(starts)
        last = np.append(first[1:], lo.size) - 1
        return RowRanges(lo[first], reach[last])

    @property
    def size(self) -> int:
        """Number of ranges."""
        return int(self.lo.size)

    def rows(self) -> int:
        """Number of rows the ranges hold."""
        return int((self.hi - self.lo).sum()) if self.lo.size else 0

    def fragments(self) -> list[int]:
        """Fragment ids holding at least one range (ascending)."""
        if self.lo.size <= 8:  # a point or narrow query: Python ints beat three array passes
            return sorted({x >> 32 for x in self.lo.tolist()})
        frags = fragment_of(self.lo)
        return frags[np.concatenate(([True], frags[1:] != frags[:-1]))].tolist()  # type: ignore[no-any-return]

    def within(self, fragments: frozenset[int]) -> RowRanges:
        """Only the ranges of ``fragments``."""
        present = self.fragments()
        if all(f in fragments for f in present):  # the usual answer: a few fragments, all covered
            return self
        keep = np.isin(fragment_of(self.lo), np.fromiter(fragments, np.uint64, len(fragments)))
        return RowRanges(self.lo[keep], self.hi[keep])

    def of_fragment(self, frag_id: int) -> tuple[I64, I64]:
        """Row offsets ``(starts, stops)`` of the ranges of fragment ``frag_id``."""
        key = np.uint64(frag_id) << np.uint64(32)
        a, b = np.searchsorted(self.lo, np.array([key, key + np.uint64(1 << 32)], np.uint64))
        lo, hi = self.lo[a:b], self.hi[a:b]
        return (lo & _LOW).astype(np.int64), (hi - key).astype(np.int64)

    def addresses(self) -> U64:
        """Every row address of the ranges (sorted)."""
        lens = (self.hi - self.lo).astype(np.int64)
        if lens.size == 0:
            return _EMPTY
        shift = self.lo - (np.cumsum(lens) - lens).astype(np.uint64)
        return np.arange(int(lens.sum()), dtype=np.uint64) + np.repeat(shift, lens)

    def contains(self, addrs: U64) -> npt.NDArray[np.bool_]:
        """Which of ``addrs`` fall in a range."""
        if self.lo.size == 0:
            return np.zeros(addrs.size, bool)
        pos = np.searchsorted(self.lo, addrs, side="right") - 1
        ok = pos >= 0
        pos_c = np.maximum(pos, 0)
        return ok & (addrs < self.hi[pos_c])


def combine(parts: Sequence[RowRanges], all_of: bool) -> RowRanges:
    """The rows in every one of ``parts`` (``all_of``) or in any of them.

    Each part is disjoint, so a row lies in ``n`` parts exactly where ``n`` ranges are open: the
    bounds are swept once as +1 / -1 events (an end before a start at the same row, as ranges
    are half-open).
    """
    if not parts:
        return RowRanges.empty()
    if len(parts) == 1:
        return parts[0]
    need = len(parts) if all_of else 1
    lo = np.concatenate([p.lo for p in parts])
    hi = np.concatenate([p.hi for p in parts])
    if lo.size == 0:
        return RowRanges.empty()
    if not all_of:
        return RowRanges.of(lo, hi)
    at = np.concatenate((hi, lo))
    step = np.concatenate((np.full(hi.size, -1, np.int64), np.ones(lo.size, np.int64)))
    order = np.lexsort((step, at))  # by row, ends (-1) first
    at, depth = at[order], np.cumsum(step[order])
    inside = depth >= need
    opens = np.flatnonzero(inside & np.concatenate(([True], ~inside[:-1])))
    closes = np.flatnonzero(~inside & np.concatenate(([False], inside[:-1])))
    return RowRanges.of(at[opens], at[closes])


@dataclass(frozen=True)
class ZoneSpans:
    """A segment's zones as ranges, kept with its opened file (they depend on no query).

    Attributes:
        lo: Each zone's first row address (file order).
        hi: One past each zone's last row address.
        ordered: Zones sorted and apart, as written: picked zones need no sort, only merging.
    """

    lo: U64
    hi: U64
    ordered: bool

    @staticmethod
    def of(fragment_id: U64, zone_start: U64, zone_length: U64) -> ZoneSpans:
        """Zones of a file's ``fragment_id`` / ``zone_start`` / ``zone_length`` columns."""
        lo = (fragment_id << np.uint64(32)) + zone_start
        hi = lo + zone_length
        ordered = bool((lo[1:] >= hi[:-1]).all()) if lo.size > 1 else True
        return ZoneSpans(lo, hi, ordered)

    def pick(self, which: npt.NDArray[np.bool_]) -> RowRanges:
        """The zones ``which`` marks, as ranges (touching zones merged)."""
        lo, hi = self.lo[which], self.hi[which]
        if not self.ordered:
            return RowRanges.of(lo, hi)
        if lo.size > 1:  # sorted and apart: merge the zones that touch
            starts = np.concatenate(([True], lo[1:] != hi[:-1]))
            if not bool(starts.all()):
                first = np.flatnonzero(starts)
                last = np.append(first[1:], lo.size) - 1
                lo, hi = lo[first], hi[last]
        some = hi > lo
        return RowRanges(lo, hi) if bool(some.all()) else RowRanges(lo[some], hi[some])

