"""lance_format.debug prints schemas, manifests, fragments and transactions as pylance 14.0.2's lance.debug."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
import lance_format.debug as ours

lance = pytest.importorskip("lance")
theirs = pytest.importorskip("lance.debug")


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [f"n{i}" for i in ids],
        "point": pa.array([{"x": float(i), "y": None} for i in ids],
                          pa.struct([("x", pa.float64()), ("y", pa.float32())])),
        "tags": pa.array([[str(i)] * (i % 3) for i in ids], pa.list_(pa.string())),
        "vec": pa.array([[float(i)] * 4 for i in ids], pa.list_(pa.float32(), 4)),
    })


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("debug") / "t.lance")
    lance.write_dataset(_table(500), path, max_rows_per_file=200)
    lance.write_dataset(_table(100, 500), path, mode="append", data_storage_version="2.0")
    lance.dataset(path).delete("id % 7 = 0")
    return path


def test_format_schema_matches(uri: str) -> None:
    assert ours.format_schema(lance_format.dataset(uri)) == theirs.format_schema(lance.dataset(uri))


def test_format_manifest_matches(uri: str) -> None:
    for version in (1, 2, 3):
        t_ds, o_ds = lance.dataset(uri, version=version), lance_format.dataset(uri, version=version)
        assert ours.format_manifest(o_ds) == theirs.format_manifest(t_ds)


def test_format_fragment_matches(uri: str) -> None:
    t_ds, o_ds = lance.dataset(uri), lance_format.dataset(uri)
    for t_frag, o_frag in zip(t_ds.get_fragments(), o_ds.get_fragments(), strict=True):
        assert ours.format_fragment(o_frag.metadata, o_ds) == theirs.format_fragment(t_frag.metadata, t_ds)


def test_list_transactions_matches(uri: str) -> None:
    t_ds, o_ds = lance.dataset(uri), lance_format.dataset(uri)
    assert ours.list_transactions(o_ds) == theirs.list_transactions(t_ds)
    assert ours.list_transactions(o_ds, 1) == theirs.list_transactions(t_ds, 1)
    assert len(ours.list_transactions(o_ds, 2)) == 2


def test_schema_of_a_dataset_we_wrote(tmp_path: Path) -> None:
    lance_format.write_dataset(_table(50), str(tmp_path / "o"))
    expected = theirs.format_schema(lance.dataset(str(tmp_path / "o")))
    assert ours.format_schema(lance_format.dataset(str(tmp_path / "o"))) == expected
