"""A projection of few narrow columns decodes a large fragment in two read-ahead windows, not many.

Read-ahead windows are sized by the stored bytes of the columns read (2.1 / 2.2 files), so
projecting ``x`` and ``category`` out of a wide table no longer cuts each fragment into the
windows a full scan needs (issue 28 item 1: each window costs a round of per-call work). Rows
and batches stay exactly pylance's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file import LanceFileReader
from lance_format.table import read as read_mod

lance = pytest.importorskip("lance")

ROWS = 150_000  # above read.SPLIT_FRAGMENT_ROWS: a fragment this size is split in two windows


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(11)
    cats = pa.array([f"category_{i:03d}" for i in range(40)])
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "category": cats.take(pa.array(rng.integers(0, 40, n))),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
    })


@pytest.fixture(scope="module")
def uris(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("windows")
    table = _table(ROWS)
    out = {}
    for name, lib, extra in (("pylance", lance, {}), ("ours", lance_format, {}),
                             # small pages: windows start and end inside pages and across them
                             ("ours-small-pages", lance_format, {"max_page_bytes": 256 * 1024})):
        uri = str(root / f"{name}.lance")
        lib.write_dataset(table, uri, data_storage_version="2.2", **extra)
        out[name] = uri
    return out


def _windows(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Record every window (start, stop) a FragmentScan decodes."""
    seen: list[tuple[int, int]] = []
    real = read_mod.FragmentScan._read

    def spy(self: Any, start: int, stop: int) -> pa.RecordBatch:
        seen.append((start, stop))
        return real(self, start, stop)

    monkeypatch.setattr(read_mod.FragmentScan, "_read", spy)
    return seen


@pytest.mark.parametrize("files", ["pylance", "ours", "ours-small-pages"])
def test_a_narrow_projection_decodes_a_large_fragment_in_two_windows_and_returns_pylances_rows(
        uris: dict[str, str], files: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _windows(monkeypatch)
    batches = list(lance_format.dataset(uris[files]).to_batches(columns=["x", "category"], batch_size=4096))
    theirs = lance.dataset(uris[files]).to_table(columns=["x", "category"])
    assert pa.Table.from_batches(batches).equals(theirs)
    assert [b.num_rows for b in batches[:-1]] == [4096] * (len(batches) - 1)
    half = -(-ROWS // 2)
    assert seen == [(0, half + (-half) % 4096), (half + (-half) % 4096, ROWS)]


def test_a_full_scan_keeps_windows_sized_by_the_whole_file(
        uris: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_mod, "READAHEAD_BYTES", 1 << 20)  # ~13,000 rows of the whole table
    seen = _windows(monkeypatch)
    got = lance_format.dataset(uris["ours-small-pages"]).to_table(batch_size=1000)
    assert got.equals(lance.dataset(uris["ours-small-pages"]).to_table())
    assert len(seen) > 8 and all(stop - start <= 16_000 for start, stop in seen)


def test_a_narrow_projection_with_deletions_and_a_filter_returns_pylances_rows(
        uris: dict[str, str], tmp_path: Path) -> None:
    uri = str(tmp_path / "deleted.lance")
    lance_format.write_dataset(_table(ROWS), uri, data_storage_version="2.2", max_page_bytes=256 * 1024)
    lance.dataset(uri).delete("id % 9 = 2")
    ours = lance_format.dataset(uri).to_table(columns=["x", "category"], filter="x > 0.5")
    assert ours.equals(lance.dataset(uri).to_table(columns=["x", "category"], filter="x > 0.5"))


def test_projected_bytes_per_row_counts_the_projected_columns_only(uris: dict[str, str]) -> None:
    path = next(Path(uris["pylance"], "data").glob("*.lance"))
    whole = LanceFileReader(str(path))
    x_only = LanceFileReader(str(path), columns=["x"])
    assert x_only.projected_bytes_per_row == 8  # one flat float64 page per column
    assert whole.projected_bytes_per_row == whole.data_bytes_per_row or \
        abs(whole.projected_bytes_per_row - whole.data_bytes_per_row) <= 1


def test_a_2_0_file_sizes_windows_by_the_whole_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "v20.lance")
    lance.write_dataset(_table(2000), uri, data_storage_version="2.0")
    path = next(Path(uri, "data").glob("*.lance"))
    reader = LanceFileReader(str(path), columns=["x"])
    assert reader.projected_bytes_per_row == reader.data_bytes_per_row
    assert lance_format.dataset(uri).to_table(columns=["x"]).equals(lance.dataset(uri).to_table(columns=["x"]))
