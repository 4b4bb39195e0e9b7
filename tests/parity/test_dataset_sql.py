"""``LanceDataset.sql()``: SELECT statements give pylance 14.0.2's rows and column names; the rest is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, NotSupportedError

lance = pytest.importorskip("lance")

N = 3000


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    a = rng.permutation(N).astype(np.int64)  # distinct, so ORDER BY a has no ties
    f = rng.random(N)
    return pa.table({
        "a": pa.array(a, mask=a % 17 == 0),
        "b": pa.array([f"k{i % 5}" for i in range(N)]),
        "f": pa.array(f, mask=a % 13 == 0),
        "i": pa.array(np.arange(N, dtype=np.int32)),
    })


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    tmp = tmp_path_factory.mktemp("sql")
    out = []
    for lib, name in ((lance, "theirs"), (lance_format, "ours")):
        ds = lib.write_dataset(_table(), str(tmp / name), max_rows_per_file=1000)
        ds.delete("i % 97 = 3")
        out.append(lib.dataset(str(tmp / name)))
    return out[0], out[1]


def _result(ds: Any, statement: str, **options: Any) -> pa.Table:
    builder = ds.sql(statement)
    for name, value in options.items():
        builder = getattr(builder, name)(value)
    batches = builder.build().to_batch_records()
    assert isinstance(batches, list)
    return pa.Table.from_batches(batches)


STATEMENTS = [
    "SELECT * FROM dataset ORDER BY i",
    "SELECT a, b FROM dataset WHERE a > 2500 ORDER BY a",
    "SELECT a + 1, b FROM dataset ORDER BY i LIMIT 20",
    "SELECT a * 2 + f FROM dataset ORDER BY i LIMIT 50",
    "SELECT a AS x, f AS y FROM dataset WHERE b = 'k3' ORDER BY x DESC",
    "SELECT upper(b) FROM dataset ORDER BY i LIMIT 10 OFFSET 5",
    "SELECT b = 'k1' FROM dataset ORDER BY i LIMIT 30",
    "SELECT a > 100 AND f < 0.5 FROM dataset ORDER BY i LIMIT 40",
    "SELECT count(*) FROM dataset",
    "SELECT COUNT(*) FROM dataset WHERE a IS NOT NULL",
    "SELECT sum(a), avg(a), min(b), max(a), count(a) FROM dataset",
    "SELECT b, count(*) FROM dataset GROUP BY b ORDER BY b",
    "SELECT b, sum(a) AS s, avg(f) AS m FROM dataset GROUP BY b ORDER BY s DESC",
    "SELECT min(f), b FROM dataset WHERE i < 2000 GROUP BY b ORDER BY b",
    "SELECT a FROM dataset ORDER BY a LIMIT 25",
    "SELECT a FROM dataset ORDER BY a DESC LIMIT 25",
    "SELECT a, f FROM dataset ORDER BY f NULLS FIRST, a LIMIT 30",
    "SELECT DISTINCT b FROM dataset ORDER BY b",
    "SELECT d.a FROM dataset d WHERE d.i BETWEEN 10 AND 20 ORDER BY d.i",
    "SELECT dataset.a, i FROM dataset WHERE b LIKE 'k2%' ORDER BY i LIMIT 7 OFFSET 3",
    "SELECT i FROM dataset WHERE a IN (1, 2, 3, 4, 5, 6) ORDER BY i",
    "SELECT (a + 1) * 2, a IS NULL, f IS NOT NULL, NOT (a > 5), -a FROM dataset ORDER BY i LIMIT 60",
    "SELECT a BETWEEN 1 AND 200, a IN (1, 2), coalesce(a, 0), lower(b) || '!' FROM dataset ORDER BY i LIMIT 60",
    "SELECT b NOT LIKE 'k1%' FROM dataset ORDER BY i LIMIT 20",
    "SELECT A AS X, b FROM dataset ORDER BY 2, 1 LIMIT 40",
    "SELECT b, sum(a) * 2 AS s, max(f) - min(f) FROM dataset GROUP BY b ORDER BY b",
    "SELECT count(DISTINCT b), sum(a) + 1 FROM dataset",
    "SELECT a % 3, count(*) FROM dataset GROUP BY a % 3 ORDER BY a % 3",
]


@pytest.mark.parametrize("statement", STATEMENTS)
def test_statement_gives_pylance_rows_and_names(pair: tuple[Any, Any], statement: str) -> None:
    theirs, ours = (_result(ds, statement) for ds in pair)
    assert ours.column_names == theirs.column_names
    assert [f.type for f in ours.schema] == [f.type for f in theirs.schema]
    got, want = ours.to_pydict(), theirs.to_pydict()
    for name in want:
        if pa.types.is_floating(theirs.schema.field(name).type):
            assert np.allclose(np.array(got[name], dtype=float), np.array(want[name], dtype=float), equal_nan=True)
        else:
            assert got[name] == want[name], name


def test_table_name_and_row_columns_follow_pylance(pair: tuple[Any, Any]) -> None:
    statement = "SELECT a FROM t WHERE i < 50 ORDER BY i"
    theirs, ours = (_result(ds, statement, table_name="t", with_row_id=True, with_row_addr=True) for ds in pair)
    assert ours.column_names == theirs.column_names == ["a", "_rowid", "_rowaddr"]
    assert ours.equals(theirs)


def test_empty_result_is_no_batches_in_both(pair: tuple[Any, Any]) -> None:
    for ds in pair:
        assert ds.sql("SELECT a FROM dataset WHERE a > 100000").build().to_batch_records() == []


def test_column_outside_group_by_is_a_value_error_in_both(pair: tuple[Any, Any]) -> None:
    for ds in pair:
        with pytest.raises(ValueError):
            ds.sql("SELECT b, a FROM dataset GROUP BY b").build().to_batch_records()


def test_unknown_table_is_a_value_error_in_both(pair: tuple[Any, Any]) -> None:
    for ds in pair:
        with pytest.raises(ValueError):
            ds.sql("SELECT * FROM t").build().to_batch_records()
    with pytest.raises(InvalidInputError, match="table 't' not found"):
        pair[1].sql("SELECT * FROM t").build()


def test_stream_reader_and_batch_size(pair: tuple[Any, Any]) -> None:
    reader = pair[1].sql("SELECT a FROM dataset ORDER BY i").batch_size(500).build().to_stream_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    batches = list(reader)
    assert max(b.num_rows for b in batches) <= 500
    assert pa.Table.from_batches(batches).equals(_result(pair[0], "SELECT a FROM dataset ORDER BY i"))


@pytest.mark.parametrize(("statement", "construct"), [
    ("SELECT * FROM dataset JOIN dataset AS o ON dataset.i = o.i", "JOIN"),
    ("SELECT * FROM dataset WHERE a IN (SELECT a FROM dataset)", "subquery"),
    ("SELECT a, row_number() OVER (ORDER BY a) FROM dataset", "window function"),
    ("WITH c AS (SELECT a FROM dataset) SELECT * FROM c", "WITH"),
    ("SELECT a FROM dataset UNION SELECT a FROM dataset", "UNION"),
    ("SELECT b, count(*) FROM dataset GROUP BY b HAVING count(*) > 1", "HAVING"),
    ("SELECT median(a) FROM dataset", "MEDIAN"),
    ("DELETE FROM dataset WHERE a = 1", "DELETE"),
])
def test_constructs_outside_the_subset_are_refused_by_name(pair: tuple[Any, Any], statement: str,
                                                          construct: str) -> None:
    with pytest.raises(NotSupportedError, match=construct):
        pair[1].sql(statement).build()


def test_explain_plan_names_the_pushed_filter(pair: tuple[Any, Any]) -> None:
    text = pair[1].sql("SELECT b, count(*) FROM dataset WHERE a > 5 GROUP BY b").build().explain_plan()
    assert "a > 5" in text and "Aggregate" in text
