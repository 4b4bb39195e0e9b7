"""Float comparisons skip their NaN terms on batches without NaN, and still answer as pylance.

The float order's NaN terms (``is_nan(x) AND ...``) are evaluated with Kleene short-circuits: a
batch whose ``is_nan`` is all false skips the -NaN kernel. Batches differ within one scan (NaN in
some, nulls in others), so every filter is checked against pylance over such a mix.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format

FILTERS = ["x > 0.5", "x < 0.5", "x >= 0.5", "x <= 0.5", "x = 0.5", "x != 0.5", "x = y", "x != y", "x < y",
           "x >= y", "NOT (x > 0.5)", "x > 0.5 OR y < 0.2", "x > 0.5 AND y > 0.5", "x IS NULL OR x > 2",
           "x > -1e308", "x < -0.0", "y > 0.9 AND x != x"]


def _table() -> pa.Table:
    rng = np.random.default_rng(5)
    n = 40_000
    x = np.round(rng.random(n), 1)  # repeats, so x = 0.5 and x = y both hit
    y = np.round(rng.random(n), 1)
    x[20_000 + 17::331] = np.nan  # NaN and -NaN only in the second half's batches
    x[20_000 + 29::557] = -np.nan
    y[35_000::101] = np.nan
    x_null = np.zeros(n, bool)
    x_null[10_000:12_000:7] = True  # nulls in a batch without NaN
    x_null[30_000::211] = True
    return pa.table({"id": np.arange(n, dtype=np.int64), "x": pa.array(x, mask=x_null), "y": y})


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    lance = pytest.importorskip("lance")
    path = str(tmp_path_factory.mktemp("nanterms") / "t.lance")
    lance.write_dataset(_table(), path, max_rows_per_file=15_000)
    return path


@pytest.mark.parametrize("text", FILTERS)
def test_float_filters_over_batches_with_and_without_nan_match_pylance(uri: str, text: str) -> None:
    lance = pytest.importorskip("lance")
    ours = lance_format.dataset(uri).to_table(filter=text, columns=["id"], batch_size=4096)
    theirs = lance.dataset(uri).to_table(filter=text, columns=["id"])
    assert sorted(ours.column("id").to_pylist()) == sorted(theirs.column("id").to_pylist())
    assert lance_format.dataset(uri).count_rows(filter=text) == theirs.num_rows


def test_a_batch_without_nan_gives_the_same_mask_as_the_full_evaluation(tmp_path: Path) -> None:
    # the short-circuit only drops terms that cannot change the answer: compare with pylance on a
    # table with no NaN at all (every batch short-circuits) and nulls in it
    lance = pytest.importorskip("lance")
    t = pa.table({"id": np.arange(1000, dtype=np.int64),
                  "x": pa.array(np.linspace(0, 1, 1000), mask=np.arange(1000) % 9 == 0)})
    path = str(tmp_path / "plain.lance")
    lance.write_dataset(t, path)
    for text in ("x > 0.3", "NOT (x > 0.3)", "x != 0.5", "x <= 0.25 OR x IS NULL"):
        assert lance_format.dataset(path).count_rows(filter=text) == lance.dataset(path).count_rows(filter=text)
