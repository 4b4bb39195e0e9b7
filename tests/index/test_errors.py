"""Bad input to the index API: a clear LanceError, no new version, no orphan index files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import (
    CorruptFileError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidInputError,
    LanceError,
    UnsupportedIndexTypeError,
)
from lance_format.index._compat import manifest_indices
from lance_format.index.remap import RowAddressMap, remap_indices


def _dataset(path: str) -> lance_format.LanceDataset:
    table = pa.table({"a": pa.array(np.arange(50) % 7, pa.int64()),
                      "v": pa.array([[1.0, 2.0]] * 50, pa.list_(pa.float64())),
                      "st": pa.array([{"x": 1}] * 50, pa.struct([("x", pa.int64())]))})
    return lance_format.write_dataset(table, path, mode="create", max_rows_per_file=25)


def _index_dirs(path: str) -> set[str]:
    root = Path(path) / "_indices"
    return {p.name for p in root.iterdir()} if root.exists() else set()


@pytest.mark.parametrize(("column", "kind", "error", "words"), [
    ("v", "BTREE", UnsupportedIndexTypeError, "'v'"),
    ("st", "BITMAP", UnsupportedIndexTypeError, "'st'"),
    ("nope", "BTREE", InvalidInputError, "no such column"),
    ("a", "IVF_PQ", UnsupportedIndexTypeError, "'a' must be FixedSizeListArray"),  # pylance's words
    ("a", "IVF_NOPE", UnsupportedIndexTypeError, "IVF_NOPE"),
    ("a", "LABEL_LIST", UnsupportedIndexTypeError, "list column"),
])
def test_bad_index_request_is_refused_before_anything_is_written(
        make_path: Callable[[str], str], column: str, kind: str, error: type[LanceError], words: str) -> None:
    path = make_path("bad")
    ds = _dataset(path)
    before = ds.version
    with pytest.raises(error, match=words):
        ds.create_scalar_index(column, kind)  # type: ignore[arg-type]
    assert lance_format.dataset(path).version == before
    assert _index_dirs(path) == set()


def test_duplicate_name_without_replace(make_path: Callable[[str], str]) -> None:
    path = make_path("dup")
    ds = _dataset(path)
    ds.create_scalar_index("a", "BTREE")
    version, dirs = ds.version, _index_dirs(path)
    with pytest.raises(IndexExistsError, match="a_idx"):
        ds.create_scalar_index("a", "BITMAP", name="a_idx", replace=False)
    assert lance_format.dataset(path).version == version and _index_dirs(path) == dirs


def test_drop_missing_index(make_path: Callable[[str], str]) -> None:
    ds = _dataset(make_path("drop"))
    with pytest.raises(IndexNotFoundError, match="missing"):
        ds.drop_index("missing")
    with pytest.raises(IndexNotFoundError):
        ds.stats.index_stats("missing")


@pytest.mark.parametrize("damage", ["truncate", "delete", "garbage"])
def test_corrupt_index_file_is_a_clear_error(make_path: Callable[[str], str], damage: str) -> None:
    path = make_path("corrupt")
    ds = _dataset(path)
    ds.create_scalar_index("a", "BTREE")
    meta = manifest_indices(ds.manifest)[0]
    file = Path(path) / "_indices" / meta.uuid / "page_lookup.lance"
    if damage == "truncate":
        file.write_bytes(file.read_bytes()[:-20])
    elif damage == "delete":
        file.unlink()
    else:
        file.write_bytes(b"\x00" * file.stat().st_size)
    fresh = lance_format.dataset(path)
    with pytest.raises(CorruptFileError, match=meta.uuid):
        fresh.to_table(filter="a = 3")
    # Remapping through the damaged index fails cleanly too: no new version, no new files.
    dirs = _index_dirs(path)
    mapping = RowAddressMap.from_arrays(np.arange(25, dtype=np.uint64), np.arange(25, dtype=np.uint64) + (5 << 32))
    with pytest.raises(CorruptFileError):
        remap_indices(fresh, mapping)
    assert _index_dirs(path) == dirs
    assert lance_format.dataset(path).version == ds.version
