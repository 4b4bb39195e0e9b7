"""ds.stats.data_stats() / dataset_stats() as pylance 14.0.2's (bytes on disk per field, small files)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")


def _table(n: int) -> pa.Table:
    return pa.table({
        "id": list(range(n)), "s": [f"v{i}" for i in range(n)],
        "st": pa.array([{"a": i, "b": str(i)} for i in range(n)]), "l": [[i] * 3 for i in range(n)],
    })


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("stats") / "t.lance")
    lance.write_dataset(_table(3000), path, max_rows_per_file=1000)
    lance.write_dataset(_table(10), path, mode="append", data_storage_version="2.0")
    lance.dataset(path).delete("id < 7")
    return path


def test_data_stats_equal_pylances(uri: str) -> None:
    theirs = lance.dataset(uri).stats.data_stats()
    ours = lance_format.dataset(uri).stats.data_stats()
    assert [(f.id, f.bytes_on_disk) for f in ours.fields] == [(f.id, f.bytes_on_disk) for f in theirs.fields]
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("max_rows_per_group", [None, 500, 2000])
def test_dataset_stats_equal_pylances(uri: str, max_rows_per_group: int | None) -> None:
    args = () if max_rows_per_group is None else (max_rows_per_group,)
    assert lance_format.dataset(uri).stats.dataset_stats(*args) == lance.dataset(uri).stats.dataset_stats(*args)


def test_data_stats_of_a_dataset_we_wrote(tmp_path: Path) -> None:
    lance_format.write_dataset(_table(2000), str(tmp_path / "o"), max_rows_per_file=700)
    theirs = lance.dataset(str(tmp_path / "o")).stats.data_stats()
    ours = lance_format.dataset(str(tmp_path / "o")).stats.data_stats()
    assert [(f.id, f.bytes_on_disk) for f in ours.fields] == [(f.id, f.bytes_on_disk) for f in theirs.fields]
