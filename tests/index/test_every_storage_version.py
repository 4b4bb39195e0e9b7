"""Every index kind round-trips on every storage version, legacy included.

Built by us: we read it back and pylance answers from it. Built by pylance: we read it. Index
files follow the dataset's storage version; a legacy (0.1) dataset gets 2.0 files (footer 0.3)
as pylance 14.0.2 writes them (the v1 format keeps no schema metadata like BTREE's
``batch_size`` and no global buffer like LABEL_LIST's null lists).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import store
from lance_format.index._compat import manifest_indices
from lance_format.index.bitmap import BitmapIndex, read_label_list_nulls
from lance_format.index.btree import BTreeIndex
from lance_format.index.scan import row_domain
from lance_format.index.store import IndexDir

VERSIONS = ["legacy", "2.0", "2.1", "2.2"]
KINDS = {"BTREE": "a", "BITMAP": "s", "LABEL_LIST": "tags"}
FILTERS = {
    "BTREE": ["a = 3", "a < 5", "a BETWEEN 10 AND 12", "a IN (1, 39)", "a IS NULL", "a > 30 AND id < 200"],
    "BITMAP": ["s = 'x'", "s IN ('y', 'w')", "s IS NULL", "s > 'x'"],
    "LABEL_LIST": ["array_has_any(tags, ['a'])", "array_has_all(tags, ['a', 'c'])", "array_contains(tags, 'b')"],
}
#: Footer version of index files by dataset storage version.
FOOTERS = {"legacy": (0, 3), "2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}


def _table(n: int = 300) -> pa.Table:
    rng = np.random.default_rng(5)
    labels = np.array(["a", "b", "c", "d"], dtype=object)
    tags: list[list[str] | None] = [None if rng.random() < 0.08 else list(rng.choice(labels, int(rng.integers(0, 3))))
                                    for _ in range(n)]
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(rng.integers(0, 40, n), pa.int64(), mask=rng.random(n) < 0.05),
        "s": pa.array(rng.choice(np.array(["x", "y", "z", "w"], dtype=object), n), pa.string(),
                      mask=rng.random(n) < 0.05),
        "tags": pa.array(tags, pa.list_(pa.string())),
    })


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _build(path: str, builder: str, version: str, kind: str) -> None:
    lib = lance if builder == "pylance" else lance_format
    lib.write_dataset(_table(), path, data_storage_version=version, max_rows_per_file=100)
    lib.dataset(path).delete("id % 13 = 0")
    lib.dataset(path).create_scalar_index(KINDS[kind], kind)


def _index_files(path: str) -> list[Path]:
    return sorted(Path(path).glob("_indices/*/*.lance"))


def _footer(file: Path) -> tuple[int, int]:
    major, minor = struct.unpack("<HH", file.read_bytes()[-8:-4])
    return major, minor


def _we_read_it(path: str, kind: str) -> None:
    """Our reads of the index agree with the data: queries, and every entry of the files."""
    ds = lance_format.dataset(path)
    (meta,) = manifest_indices(ds.manifest)
    data = ds.to_table(with_row_address=True)
    addr = data.column("_rowaddr").to_numpy()
    index_dir = IndexDir(ds._store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()})
    domain = row_domain(ds.manifest, meta)
    column = KINDS[kind]
    if kind == "BTREE":
        values, ids = BTreeIndex(index_dir, domain).read_all()
        got = sorted(zip(ids.tolist(), values.to_pylist(), strict=True))
        assert got == sorted(zip(addr.tolist(), data.column(column).to_pylist(), strict=True))
    else:
        keys, rows = BitmapIndex(index_dir, domain.fragment_rows, domain).read_all()
        by_row: dict[int, set[object]] = {}
        for key, ids in zip(keys.to_pylist(), rows, strict=True):
            for i in ids.tolist():
                by_row.setdefault(i, set()).add(key)
        if kind == "BITMAP":
            assert by_row == {a: {v} for a, v in zip(addr.tolist(), data.column(column).to_pylist(), strict=True)}
        else:
            want = {a: set(v) for a, v in zip(addr.tolist(), data.column(column).to_pylist(), strict=True) if v}
            assert by_row == want
            nulls = read_label_list_nulls(index_dir, domain.fragment_rows, domain)
            lists = data.column(column).to_pylist()
            assert sorted(nulls.tolist()) == sorted(a for a, v in zip(addr.tolist(), lists, strict=True) if v is None)
    stats = ds.stats.index_stats(f"{column}_idx")
    assert stats.num_indexed_rows == ds.count_rows() and stats.num_unindexed_rows == 0
    if kind == "LABEL_LIST":
        return  # our SQL has no array_has_*: pylance's queries below cover the answers
    for flt in FILTERS[kind]:
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan(), flt
        want = _ids(lance.dataset(path).to_table(filter=flt, use_scalar_index=False))
        assert _ids(ds.to_table(filter=flt)) == want, flt


def _pylance_reads_it(path: str, kind: str) -> None:
    theirs = lance.dataset(path)
    theirs.validate()
    for flt in FILTERS[kind]:
        # ScalarIndexQuery (2.x) or MaterializeIndex (legacy fragments): either way, from the index
        assert f"@{KINDS[kind]}_idx(" in theirs.scanner(filter=flt).explain_plan(), flt
        assert _ids(theirs.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False)), flt
    stats = theirs.stats.index_stats(f"{KINDS[kind]}_idx")
    assert stats["num_indexed_rows"] == theirs.count_rows() and stats["num_unindexed_rows"] == 0


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("version", VERSIONS)
def test_index_we_build_is_read_by_us_and_pylance(make_path: Callable[[str], str], version: str, kind: str) -> None:
    path = make_path("ours")
    _build(path, "ours", version, kind)
    files = _index_files(path)
    assert files and all(_footer(f) == FOOTERS[version] for f in files)
    _we_read_it(path, kind)
    _pylance_reads_it(path, kind)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("version", VERSIONS)
def test_index_pylance_builds_is_read_by_us(make_path: Callable[[str], str], version: str, kind: str) -> None:
    path = make_path("theirs")
    _build(path, "pylance", version, kind)
    assert all(_footer(f) == FOOTERS[version] for f in _index_files(path))
    _we_read_it(path, kind)


@pytest.mark.parametrize("kind", ["BTREE", "BITMAP"])
def test_legacy_index_files_we_wrote_before_still_read(make_path: Callable[[str], str], kind: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Earlier builds wrote legacy (0.2) index files, without the schema metadata: both libraries read them.

    pylance reads a lookup without ``batch_size`` with the default page size, and so do we.
    """
    path = make_path("old")
    lance_format.write_dataset(_table(), path, data_storage_version="legacy", max_rows_per_file=100)
    lance_format.dataset(path).delete("id % 13 = 0")
    monkeypatch.setattr(store, "index_file_version", lambda version: version)  # what earlier builds did
    lance_format.dataset(path).create_scalar_index(KINDS[kind], kind)
    monkeypatch.undo()
    files = _index_files(path)
    assert files and all(_footer(f) == (0, 2) for f in files)
    _we_read_it(path, kind)
    _pylance_reads_it(path, kind)
