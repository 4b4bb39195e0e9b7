"""Deterministic Arrow tables with the variety of column shapes pylance 14.0.2 encodes differently."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa


def _nullify(arr: pa.Array, every: int, phase: int = 3) -> pa.Array:
    mask = (np.arange(len(arr)) % every) == phase
    return pa.array(arr.to_pylist(), type=arr.type, mask=mask) if len(arr) < 50 else _mask(arr, mask)


def _mask(arr: pa.Array, mask: np.ndarray) -> pa.Array:
    return pa.compute.if_else(pa.array(mask), pa.nulls(len(arr), arr.type), arr)


def variety_table(n: int, seed: int = 42) -> pa.Table:
    """A table with one column per interesting type / value distribution (pylance 14.0.2 encodes each differently)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    words = np.array(["alpha", "beta", "gamma", "delta", "eps"])
    nw = rng.integers(1, 6, n)
    w_parts = rng.choice(words, (n, 5))
    str_words = [" ".join(w_parts[i, : nw[i]]) for i in range(n)]
    list_lens = rng.integers(0, 5, n)
    list_vals = rng.integers(0, 100, int(list_lens.sum())).astype(np.int32)
    list_offs = np.concatenate([[0], np.cumsum(list_lens)]).astype(np.int32)
    ln_lens = idx % 4
    ln_offs = np.concatenate([[0], np.cumsum(ln_lens)]).astype(np.int32)
    ln_vals = np.concatenate([np.arange(k) for k in ln_lens]).astype(np.int64) if n else np.zeros(0, np.int64)
    ln_mask = (idx % 9) == 3
    lstr_lens = idx % 3
    lstr_offs = np.concatenate([[0], np.cumsum(lstr_lens)]).astype(np.int32)
    lstr_vals = [f"t{j}" for k in lstr_lens for j in range(k)]
    cols: dict[str, pa.Array] = {
        "i32_seq": pa.array(idx.astype(np.int32)),
        "i32_small": pa.array(rng.integers(0, 100, n).astype(np.int32)),
        "i64_rand": pa.array(rng.integers(-(2**62), 2**62, n, dtype=np.int64)),
        "i64_nulls": _mask(pa.array(rng.integers(0, 1000, n)), (idx % 7) == 3),
        "u8_runs": pa.array(((idx // 1000) % 256).astype(np.uint8)),
        "i32_const": pa.array(np.full(n, 5, np.int32)),
        "i32_allnull": pa.nulls(n, pa.int32()),
        "i8_neg": pa.array((rng.integers(-128, 128, n)).astype(np.int8)),
        "u64_big": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64) * 2),
        "f16": pa.array(rng.random(n).astype(np.float16)),
        "f32_rand": pa.array(rng.random(n).astype(np.float32)),
        "f64_rand": pa.array(rng.random(n)),
        "f64_nulls": _mask(pa.array(rng.random(n)), (idx % 5) == 3),
        "bool_rand": pa.array(rng.random(n) < 0.5),
        "bool_nulls": _mask(pa.array(rng.random(n) < 0.5), (idx % 4) == 3),
        "str_short": pa.array([f"row{i}" for i in range(n)]),
        "str_words": pa.array(str_words),
        "str_lowcard": pa.array(rng.choice(np.array(["red", "green", "blue"]), n)),
        "str_nulls": _mask(pa.array([f"v{v}" for v in rng.integers(0, 10**6, n)]), (idx % 6) == 3),
        "str_long": pa.array(["x" * 300 + str(i) for i in range(n)]),
        "str_empty": pa.array(["" if i % 3 else "e" for i in range(n)]),
        "lstr": pa.array([f"large{i}" for i in range(n)], pa.large_string()),
        "bin": pa.array([bytes([i % 256, (i * 7) % 256, 1, 2]) for i in range(n)], pa.binary()),
        "lbin": pa.array([bytes([i % 256]) * (i % 7) for i in range(n)], pa.large_binary()),
        "fsb": pa.array([bytes([i % 256, 1, 2]) for i in range(n)], pa.binary(3)),
        "list_i32": pa.ListArray.from_arrays(pa.array(list_offs), pa.array(list_vals)),
        "list_nulls": pa.ListArray.from_arrays(pa.array(ln_offs), pa.array(ln_vals), mask=pa.array(ln_mask)),
        "list_str": pa.ListArray.from_arrays(pa.array(lstr_offs), pa.array(lstr_vals, pa.string())),
        "llist_f32": pa.LargeListArray.from_arrays(
            pa.array(list_offs.astype(np.int64)), pa.array(list_vals.astype(np.float32))
        ),
        "struct": pa.StructArray.from_arrays(
            [pa.array(idx.astype(np.int32)), pa.array([f"s{i}" for i in range(n)])], ["a", "b"]
        ),
        "struct_nulls": pa.StructArray.from_arrays(
            [pa.array(idx.astype(np.float64)), pa.array(idx % 3)],
            ["x", "y"],
            mask=pa.array((idx % 8) == 3),
        ),
        "fsl_f32": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8).astype(np.float32)), 8),
        "fsl_i16": pa.FixedSizeListArray.from_arrays(pa.array((np.arange(n * 4) % 50).astype(np.int16)), 4),
        "ts_us": pa.array(1_700_000_000_000_000 + idx * 1000, pa.timestamp("us")),
        "ts_tz": pa.array(1_700_000_000 + idx, pa.timestamp("s", tz="UTC")),
        "date32": pa.array((19000 + idx % 365).astype(np.int32), pa.date32()),
        "dec": pa.array([decimal.Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
        "dict_str": pa.array(rng.choice(np.array(["x", "yy", "zzz"]), n)).dictionary_encode(),
    }
    return pa.table(cols)


def nested_table(n: int, seed: int = 7) -> pa.Table:
    """Deeper nesting: list<struct>, struct<list>, list<list>, list with empty and null lists."""
    rng = np.random.default_rng(seed)
    rows_ls = []
    rows_sl = []
    rows_ll = []
    for i in range(n):
        k = int(rng.integers(0, 4))
        rows_ls.append(
            None if i % 11 == 5 else [{"p": int(i + j), "q": None if j == 1 else f"q{j}"} for j in range(k)]
        )
        rows_sl.append(None if i % 13 == 2 else {"v": None if i % 7 == 1 else list(range(i % 3)), "w": i})
        rows_ll.append([[j] * (j % 3) for j in range(i % 4)] if i % 5 else None)
    t_ls = pa.list_(pa.struct([("p", pa.int64()), ("q", pa.string())]))
    t_sl = pa.struct([("v", pa.list_(pa.int32())), ("w", pa.int64())])
    t_ll = pa.list_(pa.list_(pa.int16()))
    return pa.table(
        {
            "ls": pa.array(rows_ls, t_ls),
            "sl": pa.array(rows_sl, t_sl),
            "ll": pa.array(rows_ll, t_ll),
            "id": pa.array(np.arange(n)),
        }
    )
