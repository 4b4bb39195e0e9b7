"""replace_where: delete-matching plus insert as one Update commit (partition overwrites)."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution.replace import checked_batches, replace_where

from ._util import assert_no_orphans, same_everywhere

BASE = pa.table({"day": ["a", "a", "b", "b", "c"], "n": [1, 2, 3, 4, 5]})


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_partition_is_replaced_in_one_version(tmp_path: Path, stable: bool, version: str) -> None:
    uri = str(tmp_path / "p")
    ds = lance_format.write_dataset(BASE, uri, max_rows_per_file=2, enable_stable_row_ids=stable,
                                    data_storage_version=version)  # type: ignore[arg-type]
    result = replace_where(ds, "day = 'b'", pa.table({"n": [30, 40, 50], "day": ["b", "b", "b"]}),
                           commit_message="replace b")
    assert (result.version, result.rows_deleted, result.rows_written) == (2, 2, 3)
    assert ds.version == 2 and result.dataset.version == 2
    got = same_everywhere(uri)
    assert sorted(zip(got.column("day").to_pylist(), got.column("n").to_pylist(), strict=True)) == [
        ("a", 1), ("a", 2), ("b", 30), ("b", 40), ("b", 50), ("c", 5)]
    ours_txn = lance_format.dataset(uri).read_transaction()
    assert ours_txn is not None and ours_txn.operation.kind == "update"
    assert ours_txn.transaction_properties.get("__lance_commit_message") == "replace b"
    # The fragment holding only 'b' rows is dropped, not kept with a full deletion vector.
    assert all(f.num_rows > 0 for f in lance_format.dataset(uri).manifest.fragments)
    assert lance.dataset(uri, version=1).count_rows() == 5


def test_replace_of_an_empty_slice_just_adds_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "e")
    ds = lance_format.write_dataset(BASE, uri)
    result = replace_where(ds, pc.field("day") == "z", pa.table({"day": ["z"], "n": [9]}))
    assert result.rows_deleted == 0 and lance.dataset(uri).count_rows() == 6


def test_rows_outside_the_predicate_are_refused_before_anything_is_committed(tmp_path: Path) -> None:
    uri = str(tmp_path / "x")
    ds = lance_format.write_dataset(BASE, uri)
    with pytest.raises(InvalidInputError, match="do not satisfy"):
        replace_where(ds, "day = 'b'", pa.table({"day": ["b", "q"], "n": [1, 2]}))
    assert lance_format.dataset(uri).version == 1
    assert_no_orphans(uri)


def test_data_with_other_columns_is_refused(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(BASE, tmp_path / "s")
    with pytest.raises(SchemaError, match="missing"):
        replace_where(ds, "day = 'b'", pa.table({"day": ["b"]}))


def test_concurrent_delete_of_the_same_rows_is_retried_on_the_new_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "c")
    stale = lance_format.write_dataset(BASE, uri)
    lance.dataset(uri).delete("n = 3")
    lance.write_dataset(pa.table({"day": ["b"], "n": [99]}), uri, mode="append")
    result = replace_where(stale, "day = 'b'", pa.table({"day": ["b"], "n": [7]}))
    got = same_everywhere(uri)
    assert sorted(got.filter(pc.field("day") == "b").column("n").to_pylist()) == [7]
    assert result.version == 4
    assert_no_orphans(uri)


def test_checked_batches_passes_good_rows_through() -> None:
    batch = pa.record_batch({"day": ["b", "b"]})
    assert list(checked_batches([batch], pc.field("day") == "b", where="t")) == [batch]
    with pytest.raises(InvalidInputError, match="t: 1 row"):
        list(checked_batches([pa.record_batch({"day": ["b", None]})], pc.field("day") == "b", where="t"))
