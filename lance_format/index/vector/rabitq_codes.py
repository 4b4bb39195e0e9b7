"""RaBitQ extended codes: the rescale search that picks each row's magnitude codes, and their blocked layout.

For ``num_bits > 1`` pylance stores ``num_bits - 1`` more bits per dimension: the magnitude code
``c = min(floor(t·|r|/‖r‖ + ε), 2^ex_bits − 1)`` whose rescale factor ``t`` maximizes the cosine
between the row and the grid point ``c + ½``, searched exactly over ``[t_start, t_end)``
(upstream ``rust/lance-index/src/vector/bq/``: ``t_end = (top + 10) / max|a|``, ``t_start`` a fixed
fraction of it per bit width). The objective only changes where some dimension's code steps up
(an *event*, at threshold ``k / a``); the best ``t`` is the threshold of the event after which
the objective is largest (the first such; none better than ``t_start``: ``t_start``).

:func:`ex_values` finds that event for all rows at once without sorting every event of a row:

1. every live event of a chunk of rows is enumerated (packed, no padding) and its sums
   (``Σ a`` and ``Σ 2k``) are added into one of a few dozen equal bins of the row's ``t`` range,
   which gives the objective exactly at every bin's end (an attained value, so a lower bound
   ``L`` of the maximum);
2. inside a bin starting at ``t_lo`` every event adds ``a`` to the numerator and ``2k = 2ta ≥
   2·t_lo·a`` to the squared denominator, so the objective within the bin is at most
   ``max(f(start), N_end / sqrt(D_start + 2·t_lo·(N_end − N_start)))`` (the bound is
   quasi-convex in the added ``Σ a``, so its maximum is at an end); a bin whose bound is below
   ``L`` cannot hold the maximum. Bins are narrow, so the bound is tight to second order and
   only a few bins per row survive;
3. the events of the surviving bins (~26 of a 128-dim row's ~330 at 4 extended bits) are
   sorted by (row, bin, threshold, dimension, code) and their prefix sums from each bin's start
   give the objective after each of them; the row's first maximum is its event.

Before that the range is cut where clipping alone caps the objective below the start's
(:func:`_clip_cut`), which drops ~35% of the events at 4 extended bits. With one extended bit a
dimension has at most one event, and each row's are sorted directly (:func:`_ex_one_bit`).

The sums are accumulated in float64 (upstream's running sums are float32, whose rounding picks
a neighbouring event of the same objective to ~1e-7 in about 2% of 128-dim rows: there the codes
differ and this search's objective is the larger or equal one).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.errors import NotSupportedError

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]
IP = npt.NDArray[np.intp]
#: Extended codes are interleaved per block of this many dimensions.
EX_BLOCK = 64
EPS = np.float32(1.0e-5)
#: Where the rescale search starts, as a fraction of its end, per extended bit width.
TIGHT_START = (0.0, 0.15, 0.20, 0.52, 0.59, 0.71, 0.75, 0.77, 0.81)
#: Events per bin aimed at: more bins leave fewer events to sort (64 bins keep ~26 of ~330 events
#: of a 128-dim row at 4 extended bits) for more per-row work on the bins.
EVENTS_PER_BIN = 5
#: Events enumerated at once (~4 MB per float64 array; 2^18 and 2^20 were ~10% slower).
CHUNK_EVENTS = 1 << 19
#: Relative slack of the bin bounds against float64 rounding of the sums.
_SLACK = 1e-9


def ex_values(rot: F32, ex_bits: int) -> U8:
    """Per dimension, the ``ex_bits`` magnitude code of each rotated residual (upstream's choice).

    Negative values store the complement (``~c & top``). Rows of zero or non-finite norm get 0.

    Raises:
        NotSupportedError: a dimension too large to key its events in 64 bits (over 2^20 at 8 extended bits).
    """
    n, dim = rot.shape
    out = np.zeros((n, dim), np.uint8)
    norm_sq = np.einsum("ij,ij->i", rot, rot).astype(np.float32)
    ok = np.isfinite(norm_sq) & (norm_sq > np.finfo(np.float32).eps)
    top = (1 << ex_bits) - 1
    # live events per dimension: the range spans (1 - start)·(top + 10)/max|a| in t, where a
    # dimension steps once per 1/|a| (a quarter of max|a| is typical of a rotated residual)
    per_dim = min(float(top), 0.25 * (1 - TIGHT_START[ex_bits]) * (top + 10))
    bins = int(np.clip(1 << max(0, int(dim * per_dim / EVENTS_PER_BIN).bit_length() - 1), 8, 512))
    low = max(1, (dim - 1).bit_length()) + ex_bits  # key bits of (dimension, code - 1)
    bins = min(bins, (1 << max(0, 32 - low)) - 2)  # a row's slots fit above them (huge dims: fewer bins)
    max_rows = (1 << max(0, 32 - low)) // (bins + 2)  # rows whose (row, slot) fits above them
    if bins < 8:
        raise NotSupportedError(f"IVF_RQ: extended codes of {dim}-dimensional vectors are not supported")
    step = max(1, min(max_rows, int(CHUNK_EVENTS // (dim * per_dim))))
    if ex_bits == 1:  # at most one event per dimension: a plain sort of each row's events is cheaper
        step = max(1, CHUNK_EVENTS // dim)
    for lo in range(0, n, step):
        idx = np.flatnonzero(ok[lo:lo + step]) + lo
        if idx.size:
            chunk = _ex_one_bit if ex_bits == 1 else functools.partial(_ex_chunk, ex_bits=ex_bits, low=low, bins=bins)
            out[idx] = chunk(rot[idx], norm_sq[idx])
    return out


def _ex_one_bit(r: F32, norm_sq: F32) -> U8:
    """:func:`ex_values` of one extended bit: a dimension's only event (code 0 → 1 at ``1 / a``) when it
    starts at 0; each row's events sorted by (threshold, dimension) as one key, float64 prefix sums."""
    m, dim = r.shape
    a = np.divide(np.abs(r), np.sqrt(norm_sq)[:, None])
    t_end = ((1 + 10) / a.max(axis=1)).astype(np.float32)
    t_start = (t_end * np.float32(TIGHT_START[1])).astype(np.float32)
    cur = np.floor(t_start[:, None] * a + EPS)
    np.minimum(cur, np.float32(1), out=cur)
    n0 = np.einsum("ij,ij->i", cur + np.float32(0.5), a, dtype=np.float64)
    d0 = dim * 0.25 + np.einsum("ij,ij->i", cur, cur + 1, dtype=np.float64)
    f0 = n0 / np.sqrt(d0)
    with np.errstate(divide="ignore"):
        th = np.float32(1) / a
    live = (cur == 0) & (th < t_end[:, None])
    u64 = np.uint64
    none = np.iinfo(np.uint64).max
    keys = (th.view(np.uint32).astype(u64) << u64(32)) | np.arange(dim, dtype=u64)[None, :]
    keys[~live] = none
    keys.sort(axis=1)
    valid = keys != none
    dims = np.where(valid, keys & u64(0xFFFFFFFF), 0).astype(np.intp)
    num = n0[:, None] + np.cumsum(np.where(valid, np.take_along_axis(a, dims, axis=1), 0), axis=1, dtype=np.float64)
    den = d0[:, None] + 2.0 * np.arange(1, dim + 1)[None, :]
    obj = np.where(valid, num / np.sqrt(den), -np.inf)
    best = np.argmax(obj, axis=1)
    rows = np.arange(m)
    t_best = (keys[rows, best] >> u64(32)).astype(np.uint32).view(np.float32)
    t = np.where(obj[rows, best] > f0, t_best, t_start).astype(np.float32)
    code = np.floor(t[:, None] * a + EPS)
    np.minimum(code, np.float32(1), out=code)
    out: U8 = np.bitwise_xor(code.astype(np.uint8), np.signbit(r).view(np.uint8))
    return out


def _ex_chunk(r: F32, norm_sq: F32, ex_bits: int, low: int, bins: int) -> U8:
    """:func:`ex_values` of rows with a positive finite norm (``low``: key bits of dimension and code)."""
    m, dim = r.shape
    top = (1 << ex_bits) - 1
    a = np.divide(np.abs(r), np.sqrt(norm_sq)[:, None])  # finite: the norm is
    t_end = ((top + 10) / a.max(axis=1)).astype(np.float32)
    t_start = (t_end * np.float32(TIGHT_START[ex_bits])).astype(np.float32)
    cur = np.floor(t_start[:, None] * a + EPS)  # >= 0: a >= 0
    np.minimum(cur, np.float32(top), out=cur)
    af = a.astype(np.float64).reshape(-1)
    n0 = np.einsum("ij,ij->i", cur + np.float32(0.5), a, dtype=np.float64)
    d0 = dim * 0.25 + np.einsum("ij,ij->i", cur, cur + 1, dtype=np.float64)
    f0 = n0 / np.sqrt(d0)
    t_end = np.minimum(t_end, _clip_cut(a, f0, top))
    # live events of a dimension: codes cur + 1 .. last, each threshold (float32 k / a, as the
    # objective's steps are ordered) below t_end; the thresholds grow with k, so ceil(t_end·a)
    # is at most two steps past the last live one (and if it is live, so is the one before)
    with np.errstate(divide="ignore", invalid="ignore"):
        last = np.minimum(np.float32(top), np.ceil(t_end[:, None] * a))
        stop = t_end[:, None]
        last -= (last / a >= stop) + ((last - 1) / a >= stop).astype(np.float32)
    cnt = np.maximum(last - cur, 0).astype(np.intp).reshape(-1)
    stride = bins + 2  # per row: an underflow slot, the bins, an overflow slot (float rounding)
    scale = bins / (t_end - t_start).astype(np.float64)
    with np.errstate(divide="ignore"):
        per_k = (scale[:, None] / a).reshape(-1)  # bins per code step of each dimension
    offset = np.repeat(1.0 - t_start * scale + np.arange(m) * stride, dim)
    total = int(cnt.sum())
    owner = np.repeat(np.arange(m * dim), cnt)
    first = (cur.reshape(-1) + 1) - (np.cumsum(cnt) - cnt)  # k of a run's first event, minus its start
    k = np.arange(total, dtype=np.float64)
    k += first[owner]
    slot = k * per_k[owner]
    slot += offset[owner]
    slot_i = slot.astype(np.intp)  # >= 0: truncation is floor
    del slot
    sum_a = _bins(np.bincount(slot_i, weights=af[owner], minlength=m * stride), m, bins)
    sum_k = _bins(np.bincount(slot_i, weights=k, minlength=m * stride), m, bins)
    n_end = n0[:, None] + np.cumsum(sum_a, axis=1)
    d_end = d0[:, None] + 2.0 * np.cumsum(sum_k, axis=1)
    n_start = np.concatenate([n0[:, None], n_end[:, :-1]], axis=1)
    d_start = np.concatenate([d0[:, None], d_end[:, :-1]], axis=1)
    best = np.maximum(f0, (n_end / np.sqrt(d_end)).max(axis=1))
    t_lo = t_start[:, None] + (np.arange(bins) - 0.01)[None, :] / scale[:, None]  # a little early: rounding
    bound = np.maximum(n_start / np.sqrt(d_start), n_end / np.sqrt(d_start + 2.0 * t_lo * (n_end - n_start)))
    keep = (bound >= best[:, None] * (1 - _SLACK)) & (sum_a > 0)
    keep_slot = np.zeros((m, stride), bool)
    keep_slot[:, 1:bins + 1] = keep
    keep_slot[:, 0] = keep[:, 0]
    keep_slot[:, bins + 1] = keep[:, bins - 1]
    sel = np.flatnonzero(keep_slot.reshape(-1)[slot_i])
    t = t_start.copy()
    if sel.size:
        t_best, f_best, rows = _search_bins(sel, owner, k, slot_i, a, n_start, d_start, ex_bits, low, bins)
        better = f_best > f0[rows]
        t[rows[better]] = t_best[better]
    code = np.clip(np.floor(t[:, None] * a + EPS), 0, top).astype(np.uint8)
    # a negative value stores the complement, ``code ^ top``
    out: U8 = np.bitwise_xor(code, np.signbit(r).view(np.uint8) * np.uint8(top), out=code)
    return out


def _clip_cut(a: F32, f0: F64, top: int) -> F32:
    """Per row, a threshold from which no event can beat the start (``+inf``: none found).

    Once the ``j`` largest magnitudes all sit at the top code ``top`` (from the threshold
    ``top / a_(j)`` of the smallest of them on), the grid point's cosine with ``a`` is at most
    that of the best real vector equal on those ``j`` dimensions, ``sqrt(1 − SS_j / Σa²)`` with
    ``SS_j`` their squared deviations from their mean (the other dimensions free, by
    Cauchy–Schwarz). ``SS_j`` only grows with ``j``; the first ``j`` (of the 16 largest) whose
    bound is below the start's objective cuts the search there: ~35% of a 128-dim row's events
    at 4 extended bits, few at 8 (the top code is rarely reached).
    """
    m, dim = a.shape
    j = min(dim, 16)
    big = np.sort(a, axis=1)[:, :-j - 1:-1].astype(np.float64)  # the j largest, descending (a SIMD sort)
    count = np.arange(1, j + 1)
    dev = np.cumsum(big * big, axis=1) - np.cumsum(big, axis=1) ** 2 / count
    total = np.einsum("ij,ij->i", a, a, dtype=np.float64)
    beaten = np.sqrt(np.maximum(1.0 - dev / total[:, None], 0.0)) < f0[:, None] * (1 - _SLACK)
    first = np.argmax(beaten, axis=1)
    with np.errstate(divide="ignore"):
        cut = np.float32(top) / big[np.arange(m), first].astype(np.float32)  # the clip step's own threshold
    out: F32 = np.where(beaten.any(axis=1), cut, np.float32(np.inf)).astype(np.float32)
    return out


def _bins(counts: npt.NDArray[Any], m: int, bins: int) -> F64:
    """Per-row bin sums ``[m, bins]`` of slot sums, the under- and overflow slots folded into the end bins."""
    c = counts.reshape(m, bins + 2)
    out: F64 = c[:, 1:bins + 1].astype(np.float64)
    out[:, 0] += c[:, 0]
    out[:, -1] += c[:, bins + 1]
    return out


def _by_slot(per_bin: F64) -> F64:
    """``[m, bins]`` values laid out by slot (``row · (bins + 2) + 1 + bin``)."""
    m, bins = per_bin.shape
    out = np.zeros((m, bins + 2))
    out[:, 1:bins + 1] = per_bin
    flat: F64 = out.reshape(-1)
    return flat


def _search_bins(sel: IP, owner: IP, k: F64, slot_i: IP, a: F32, n_start: F64, d_start: F64, ex_bits: int,
                 low: int, bins: int) -> tuple[F32, F64, IP]:
    """The exact search over the events ``sel`` of the kept bins: per row with such events, the
    threshold of its best event, the objective there and the row."""
    m, dim = a.shape
    stride = bins + 2
    top = (1 << ex_bits) - 1
    own = owner[sel]
    kk = k[sel].astype(np.int64)
    sl = slot_i[sel]
    local = sl % stride  # the end slots' events belong to the end bins
    sl += (local == 0).astype(np.intp)
    sl -= local == bins + 1
    th = kk.astype(np.float32) / a.reshape(-1)[own]
    u64 = np.uint64
    keys = (sl.astype(u64) << u64(32 + low)) | (th.view(np.uint32).astype(u64) << u64(low)) \
        | ((own % dim).astype(u64) << u64(ex_bits)) | (kk - 1).astype(u64)
    keys.sort()
    sl = (keys >> u64(32 + low)).astype(np.intp)
    th = ((keys >> u64(low)) & u64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    ident = (keys & u64((1 << low) - 1)).astype(np.intp)
    row = sl // stride
    step_a = a.reshape(-1)[row * dim + (ident >> ex_bits)].astype(np.float64)
    step_k = (ident & top) + 1
    # prefix sums restarted at every (row, bin): the bin's start sums plus the events so far
    new_bin = np.ones(sl.size, bool)
    np.not_equal(sl[1:], sl[:-1], out=new_bin[1:])
    starts = np.flatnonzero(new_bin)
    seg = np.cumsum(new_bin) - 1
    ca = np.cumsum(step_a)
    ck = np.cumsum(step_k)
    ca_before = np.concatenate([[0.0], ca])[starts]
    ck_before = np.concatenate([[0], ck])[starts]
    num = _by_slot(n_start)[sl] + (ca - ca_before[seg])
    den = _by_slot(d_start)[sl] + 2.0 * (ck - ck_before[seg])
    obj = num / np.sqrt(den)
    new_row = np.ones(row.size, bool)
    np.not_equal(row[1:], row[:-1], out=new_row[1:])
    row_starts = np.flatnonzero(new_row)
    row_max = np.maximum.reduceat(obj, row_starts)
    rid = np.cumsum(new_row) - 1
    hit = np.flatnonzero(obj >= row_max[rid])
    firsts = hit[np.concatenate([[True], rid[hit][1:] != rid[hit][:-1]])]
    return th[firsts], row_max, row[row_starts]


# -- the blocked layout ---------------------------------------------------------------------------

def _top_plane(v: U8, bit: int) -> U8:
    """8 bytes per 64-dim block: the ``bit`` of dim ``16k + b`` at bit ``8(b % 8) + 2k + b // 8``."""
    plane = np.zeros(v.shape[:-1], np.uint64)
    for k in range(4):
        for b in range(16):
            plane |= ((v[..., 16 * k + b] >> bit) & 1).astype(np.uint64) << np.uint64(8 * (b % 8) + 2 * k + b // 8)
    out: U8 = plane.astype("<u8").view(np.uint8).reshape(*v.shape[:-1], 8)
    return out


def pack_blocked(values: U8, ex_bits: int) -> U8:
    """``[n, dim]`` codes in upstream's blocked layout (``rust/lance-index/src/vector/bq/ex_dot.rs``)."""
    n, dim = values.shape
    blocks = -(-dim // EX_BLOCK)
    v = np.zeros((n, blocks, EX_BLOCK), np.uint8)
    v.reshape(n, -1)[:, :dim] = values
    out: npt.NDArray[Any]
    parts: list[npt.NDArray[Any]]
    if ex_bits == 1:
        out = np.packbits(v & 1, axis=2, bitorder="little")
    elif ex_bits in (2, 3):
        out = (v[..., 0:16] & 3) | ((v[..., 16:32] & 3) << 2) | ((v[..., 32:48] & 3) << 4) | ((v[..., 48:64] & 3) << 6)
        if ex_bits == 3:
            out = np.concatenate([out, _top_plane(v, 2)], axis=2)
    elif ex_bits == 4:
        u = v.reshape(n, blocks, 4, 16)
        out = ((u[..., 0:8] & 15) | ((u[..., 8:16] & 15) << 4)).reshape(n, blocks, 32)
    elif ex_bits == 5:
        out = np.concatenate([(v[..., 0:16] & 15) | ((v[..., 16:32] & 15) << 4),
                              (v[..., 32:48] & 15) | ((v[..., 48:64] & 15) << 4), _top_plane(v, 4)], axis=2)
    elif ex_bits in (6, 7):
        parts = [(v[..., 16 * k:16 * k + 16] & 63) | (((v[..., 48:64] >> (2 * k)) & 3) << 6) for k in range(3)]
        if ex_bits == 7:
            parts.append(_top_plane(v, 6))
        out = np.concatenate(parts, axis=2)
    else:
        out = v
    packed: U8 = np.ascontiguousarray(out, np.uint8).reshape(n, -1)
    return packed


@functools.lru_cache(maxsize=64)
def _ex_bit_positions(dim: int, ex_bits: int) -> npt.NDArray[np.int64]:
    """``[dim, ex_bits]``: where bit ``b`` of dimension ``d``'s extended code lands in a blocked row
    (found by packing one-hot rows, so unpacking is a gather for every width)."""
    pos = np.empty((dim, ex_bits), np.int64)
    for b in range(ex_bits):
        eye = (np.eye(dim, dtype=np.uint8) << b).astype(np.uint8)
        bits = np.unpackbits(pack_blocked(eye, ex_bits), axis=1, bitorder="little")
        pos[:, b] = np.argmax(bits, axis=1)
    pos.flags.writeable = False
    return pos


def ex_values_of(blocked: U8, dim: int, ex_bits: int) -> U8:
    """``[n, dim]`` extended codes of blocked rows (inverse of :func:`pack_blocked`)."""
    bits = np.unpackbits(blocked, axis=1, bitorder="little")
    pos = _ex_bit_positions(dim, ex_bits)
    out = np.zeros((blocked.shape[0], dim), np.uint8)
    for b in range(ex_bits):
        out |= (bits[:, pos[:, b]] << b).astype(np.uint8)
    return out
