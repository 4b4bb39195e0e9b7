"""LABEL_LIST indices in pylance 14.0.2's format: built by us, used by pylance, remapped both ways.

Our SQL has no ``array_has_*``, so the queries here are pylance's; what we check on our
side is that we write, rewrite and rebuild the index so pylance answers from it exactly
what a full scan returns.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.reader import LanceFileReader
from lance_format.index._compat import manifest_indices
from lance_format.index.bitmap import LABEL_LIST_NULLS

FILTERS = ["array_has_any(tags, ['a'])", "array_has_all(tags, ['a', 'c'])", "array_contains(tags, 'b')",
           "array_has_any(tags, ['d', 'e'])"]


def _table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    labels = np.array(["a", "b", "c", "d", "e"], dtype=object)
    tags: list[list[str | None] | None] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            tags.append(None)  # a null list: kept in the file's second global buffer
        elif r < 0.12:
            tags.append([])
        else:
            row: list[str | None] = list(rng.choice(labels, int(rng.integers(1, 4))))
            if r > 0.97:
                row.append(None)  # a null element: the null key
            tags.append(row)
    return pa.table({"id": pa.array(np.arange(n) + seed * 10_000, pa.int64()),
                     "tags": pa.array(tags, pa.list_(pa.string()))})


def _pylance_answers_from_the_index(path: str) -> None:
    theirs = lance.dataset(path)
    theirs.validate()
    assert lance_format.dataset(path).to_table().sort_by("id").equals(theirs.to_table().sort_by("id"))
    for flt in FILTERS:
        full = sorted(theirs.to_table(filter=flt, use_scalar_index=False)["id"].to_pylist())
        assert sorted(theirs.to_table(filter=flt)["id"].to_pylist()) == full, flt
        assert "ScalarIndexQuery" in theirs.scanner(filter=flt).explain_plan(), flt


@pytest.mark.parametrize("version", ["2.0", "2.2"])
@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_pylance_queries_a_label_list_we_built(make_path: Callable[[str], str], version: str,
                                               stable: bool) -> None:
    path = make_path("ours")
    ds = lance_format.write_dataset(_table(300), path, mode="create", max_rows_per_file=100,
                                    data_storage_version=version, enable_stable_row_ids=stable)  # type: ignore[arg-type]
    ds.create_scalar_index("tags", "LABEL_LIST")
    ds.delete("id % 11 = 0")
    (meta,) = manifest_indices(lance_format.dataset(path).manifest)
    assert meta.index_version == 1 and meta.index_details is not None
    assert meta.index_details.type_url.endswith("LabelListIndexDetails")
    info = lance.dataset(path).list_indices()[0]
    assert info["type"] == "LabelList" and set(info["fragment_ids"]) == {0, 1, 2}
    reader = LanceFileReader(str(next(Path(path).glob("_indices/*/*"))))
    assert reader.schema.metadata[LABEL_LIST_NULLS.encode()] == b"1"  # the null lists' buffer
    assert reader.read_global_buffer(1)
    _pylance_answers_from_the_index(path)
    assert lance_format.dataset(path).stats.index_stats("tags_idx").index_type == "LabelList"


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_our_compaction_remaps_a_pylance_label_list(make_path: Callable[[str], str], stable: bool) -> None:
    path = make_path("theirs")
    lance.write_dataset(_table(300), path, max_rows_per_file=100, enable_stable_row_ids=stable)
    theirs = lance.dataset(path)
    theirs.create_scalar_index("tags", "LABEL_LIST")
    theirs.delete("id % 7 = 0")
    old_uuid = theirs.list_indices()[0]["uuid"]
    ds = lance_format.dataset(path)
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    txn = ds.read_transaction()
    assert txn is not None and txn.operation.kind == "rewrite"
    # Without stable row ids the segment is rewritten; with them it keeps its (stable) ids.
    assert [r.old_id for r in txn.operation.rewritten_indices] == ([] if stable else [old_uuid])
    info = lance.dataset(path).list_indices()[0]
    assert set(info["fragment_ids"]) == {f.id for f in ds.manifest.fragments}
    _pylance_answers_from_the_index(path)


def test_pylance_compaction_remaps_our_label_list_and_optimize_indices_rebuilds_it(
        make_path: Callable[[str], str]) -> None:
    path = make_path("both")
    ds = lance_format.write_dataset(_table(300), path, mode="create", max_rows_per_file=100)
    ds.create_scalar_index("tags", "LABEL_LIST")
    ds.delete("id % 5 = 0")
    lance.dataset(path).optimize.compact_files(target_rows_per_fragment=1000)
    _pylance_answers_from_the_index(path)
    lance_format.write_dataset(_table(50, seed=1), path, mode="append")
    ds = lance_format.dataset(path)
    assert ds.stats.index_stats("tags_idx").num_unindexed_rows == 50
    ds.optimize.optimize_indices()
    assert lance.dataset(path).stats.index_stats("tags_idx")["num_unindexed_rows"] == 0
    _pylance_answers_from_the_index(path)


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_global_buffers_we_add_are_read_by_pylance(make_path: Callable[[str], str], version: str) -> None:
    from lance_format.file.writer import LanceFileWriter

    path = make_path("gb") + ".lance"
    writer = LanceFileWriter(path, pa.schema([("a", pa.int64())]), version=version)
    assert writer.add_global_buffer(b"first") == 1
    writer.write_batch(pa.table({"a": [1, 2, 3]}))
    assert writer.add_global_buffer(b"second") == 2
    writer.close()
    theirs = lance.file.LanceFileReader(path)
    assert (theirs.read_global_buffer(1), theirs.read_global_buffer(2)) == (b"first", b"second")
    assert theirs.read_all().to_table()["a"].to_pylist() == [1, 2, 3]
    assert LanceFileReader(path).read_global_buffer(2) == b"second"
