"""Scans decode in read-ahead windows yet yield exactly the rows and batch sizes asked for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.table import read as read_mod


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.random(n)),
        "s": pa.array([f"row-{i % 97}-{'z' * (i % 13)}" for i in range(n)]),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
    })


@pytest.fixture(params=["2.0", "2.2", "legacy"])
def dataset_uri(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # small windows (~1,000 rows): a fragment spans several, none aligned with its end
    monkeypatch.setattr(read_mod, "READAHEAD_BYTES", 64 * 1024)
    uri = str(tmp_path / "ds.lance")
    lance_format.write_dataset(_table(5000), uri, data_storage_version=request.param, max_rows_per_file=2000)
    return uri


def test_scan_yields_every_row_in_batches_of_the_requested_size(dataset_uri: str) -> None:
    ds = lance_format.dataset(dataset_uri)
    batches = list(ds.to_batches(batch_size=300))
    assert all(b.num_rows <= 300 for b in batches)
    assert pa.Table.from_batches(batches).equals(_table(5000))


def test_scan_with_deletions_filter_and_projection_matches_table(dataset_uri: str) -> None:
    ds = lance_format.dataset(dataset_uri)
    ds.delete("id % 7 = 0")
    ds = lance_format.dataset(dataset_uri)
    want = _table(5000).to_pandas()
    want = want[(want.id % 7 != 0) & (want.x > 0.5)][["x", "s"]].reset_index(drop=True)
    got = ds.to_table(columns=["x", "s"], filter="x > 0.5", batch_size=256).to_pandas()
    assert got.equals(want)
    assert ds.count_rows(filter="x > 0.5") == len(want)


def test_limit_and_offset_read_only_what_they_return(dataset_uri: str) -> None:
    ds = lance_format.dataset(dataset_uri)
    got = ds.to_table(columns=["id"], offset=1990, limit=25)
    assert got.column("id").to_pylist() == list(range(1990, 2015))


def test_plain_scan_never_imports_sqlglot(tmp_path: Path) -> None:
    uri = str(tmp_path / "plain.lance")
    lance_format.write_dataset(_table(100), uri)
    code = textwrap.dedent(f"""
        import sys
        import lance_format
        ds = lance_format.dataset({uri!r})
        assert sum(b.num_rows for b in ds.to_batches()) == 100
        assert ds.count_rows() == 100
        assert ds.take([1, 5]).num_rows == 2
        assert "sqlglot" not in sys.modules, "a scan without a filter imported sqlglot"
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
