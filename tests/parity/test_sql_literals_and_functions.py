"""SQL filter pieces pylance 14.0.2 (DataFusion) accepts: X'..' binary literals, list[i], arrow_cast,
current_date(), CAST(.. AS DATETIME(n)), list_col = [..]."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("sql") / "t.lance")
    table = pa.table({
        "id": [1, 2, 3, 4],
        "b": [b"\x01\x02", b"\xff", None, b""],
        "l": [[1, 2], [3], [], None],
        "f": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], None], pa.list_(pa.float32(), 2)),
        "ts": pa.array([0, 10**6, 2 * 10**6, None], pa.timestamp("us")),
        "s": ["a", "b", "c", None],
    })
    lance.write_dataset(table, path)
    return path


@pytest.mark.parametrize("predicate", [
    "b = X'0102'", "b = x'ff'", "b <> X'0102'", "b = X''",
    "l[1] = 1", "l[1] = 3", "l[2] = 2", "l[5] IS NULL", "l[1] IS NULL", "f[2] > 3",
    "arrow_cast(id, 'Int8') = 1", "arrow_cast(id, 'Float64') > 2.5", "arrow_cast(s, 'LargeUtf8') = 'b'",
    "ts < arrow_cast('1970-01-01T00:00:01', 'Timestamp(Microsecond, None)')",
    "ts < current_date()", "ts IS NULL OR ts < current_date()",
    "ts < CAST('1970-01-01 00:00:01' AS DATETIME(6))", "ts >= CAST('1970-01-01 00:00:01' AS DATETIME(3))",
    "ts >= CAST('1970-01-01 00:00:02' AS DATETIME(9))",
    "l = [1, 2]", "l != [1, 2]", "[3] = l", "NOT (l = [3])", "l <> [1, 2] AND id > 1", "f = [3.0, 4.0]",
])
def test_filters_select_pylances_rows(uri: str, predicate: str) -> None:
    theirs = lance.dataset(uri).to_table(filter=predicate).column("id").to_pylist()
    ours = lance_format.dataset(uri).to_table(filter=predicate).column("id").to_pylist()
    assert ours == theirs


def test_counts_use_the_same_filters(uri: str, tmp_path: Path) -> None:
    for predicate in ("l[1] = 1", "b = X'0102'", "arrow_cast(id, 'Int8') > 1"):
        assert lance_format.dataset(uri).count_rows(predicate) == lance.dataset(uri).count_rows(predicate)
