"""Filtered counts (``lance_format.table.count``) agree with pylance 14.0.2 and with a full scan."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
import lance_format.table.count as count_module
from lance_format.errors import InvalidInputError
from lance_format.table.count import counts_directly

ROWS = 300
FILTERS = [
    "x > 0.5", "x <= 0", "x = 0", "x != 0", "x IS NULL", "x IS NOT NULL", "NOT (x > 0.5)",
    "i IN (1, 2, 3, NULL)", "i NOT IN (4)", "i > 10 AND s = 'k3'", "s IN ('k1', 'k2') OR x < -1",
    "b", "b IS NOT TRUE", "TRUE", "FALSE", "1 = 1", "i + 1 > 20", "s LIKE 'k1%'", "c = 'red'",
]


def _table(version: str = "2.0") -> pa.Table:
    rng = np.random.default_rng(11)
    x = rng.standard_normal(ROWS)
    x[::17] = np.nan
    x[5::23] = 0.0
    x[6::29] = -0.0
    xs = pa.array(x, mask=np.arange(ROWS) % 13 == 0)
    colors = pa.array(["red", "green", "blue"] * (ROWS // 3))
    return pa.table({
        "id": pa.array(np.arange(ROWS, dtype=np.int64)),
        "x": xs,
        "i": pa.array(rng.integers(0, 30, ROWS), mask=np.arange(ROWS) % 11 == 0),
        "s": pa.array([f"k{v}" for v in rng.integers(0, 40, ROWS)]),
        "b": pa.array(rng.integers(0, 2, ROWS).astype(bool), mask=np.arange(ROWS) % 7 == 0),
        "c": colors if version == "legacy" else colors.dictionary_encode(),  # legacy: no dictionaries
    })


@pytest.fixture(scope="module", params=["legacy", "2.0", "2.2"])
def datasets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The same rows written by us and by pylance, 4 fragments each, with deletions in two."""
    version = request.param
    root = tmp_path_factory.mktemp(f"count-{version}")
    ours, theirs = str(root / "ours.lance"), str(root / "theirs.lance")
    lance_format.write_dataset(_table(version), ours, max_rows_per_file=80, data_storage_version=version)
    lance.write_dataset(_table(version), theirs, max_rows_per_file=80, data_storage_version=version)
    for uri in (ours, theirs):
        lance.dataset(uri).delete("id % 9 = 4 OR (id >= 100 AND id < 130)")
    return ours, theirs


@pytest.mark.parametrize("sql", FILTERS)
def test_filtered_count_matches_pylance(datasets: tuple[str, str], sql: str) -> None:
    for uri in datasets:
        expected = lance.dataset(uri).count_rows(filter=sql)
        assert lance_format.dataset(uri).count_rows(filter=sql) == expected, (uri, sql)
        assert lance_format.dataset(uri).to_table(filter=sql).num_rows == expected, (uri, sql)


def test_counts_across_window_boundaries(datasets: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows of 7 rows: deleted rows fall on both sides of every boundary.
    monkeypatch.setattr(count_module, "COUNT_WINDOW_ROWS", 7)
    for uri in datasets:
        ds = lance_format.dataset(uri)
        for sql in ("x > 0", "i IN (1, 2, 3)", "TRUE", "s LIKE 'k2%'"):
            assert ds.count_rows(filter=sql) == ds.to_table(filter=sql).num_rows == \
                lance.dataset(uri).count_rows(filter=sql)


def test_count_of_an_expression_and_of_fragments(datasets: tuple[str, str]) -> None:
    ours, _ = datasets
    ds = lance_format.dataset(ours)
    expr = (pc.field("x") > 0.5) | pc.field("x").is_null()
    assert ds.count_rows(filter=expr) == ds.to_table(filter=expr).num_rows
    frags = ds.get_fragments()[1:3]
    scanned = ds.scanner(filter="i > 5", fragments=frags)
    assert scanned.count_rows() == scanned.to_table().num_rows
    assert frags[0].count_rows("i > 5") == frags[0].to_table(filter="i > 5").num_rows


def test_filter_that_cannot_run_on_the_data_is_invalid_input(datasets: tuple[str, str]) -> None:
    ours, _ = datasets
    with pytest.raises(InvalidInputError):
        lance_format.dataset(ours).count_rows(filter=pc.field("s") > 1)


def test_indexed_column_is_counted_through_the_index(tmp_path: Path) -> None:
    uri = str(tmp_path / "indexed.lance")
    lance_format.write_dataset(_table(), uri, max_rows_per_file=100)
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("i", "BTREE")
    ds = lance_format.dataset(uri)
    assert not counts_directly(ds._ctx, pc.field("i") > 3, ["i"])
    assert counts_directly(ds._ctx, pc.field("x") > 3, ["x"])
    assert "ScalarIndexQuery" in ds.scanner(filter="i = 3").explain_plan()
    for sql in ("i = 3", "i > 20 AND x > 0", "x > 0"):
        assert ds.count_rows(filter=sql) == lance.dataset(uri).count_rows(filter=sql), sql


def test_row_id_filters_are_counted_by_the_scan(tmp_path: Path) -> None:
    uri = str(tmp_path / "rowid.lance")
    lance_format.write_dataset(_table(), uri, max_rows_per_file=100)
    ds = lance_format.dataset(uri)
    assert not counts_directly(ds._ctx, pc.field("_rowid") > 3, [])
    assert ds.count_rows(filter="_rowid >= 150") == lance.dataset(uri).count_rows(filter="_rowid >= 150")
