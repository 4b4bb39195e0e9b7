"""merge_insert: pylance's semantics, counts, transaction shape and conflict behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, RetryableCommitConflictError
from lance_format.evolution.merge_insert import MergeInsertResult

from ._util import assert_no_orphans, same_everywhere

BASE = pa.table({"id": [*range(10), None], "v": [f"x{i}" for i in range(11)]})

#: (when_matched condition or False, insert?, delete-by-source expr / True / False, source)
STEPS: list[tuple[Any, bool, Any, pa.Table]] = [
    (None, True, False, pa.table({"id": [3, 4, 20, None], "v": ["u3", "u4", "n20", "nn"]})),
    ("source.v > target.v", False, "id > 6", pa.table({"id": [1, 2], "v": ["0", "zz"]})),
    (False, True, True, pa.table({"id": [2, 30], "v": ["k", "l"]})),
    (None, False, False, pa.table({"id": [30]})),  # partial source: v keeps the target's value
    (None, True, False, pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.string())})),
]


def _build(ds: Any, cond: Any, insert: bool, delete: Any) -> Any:
    b = ds.merge_insert("id")
    if cond is not False:
        b = b.when_matched_update_all(cond) if cond else b.when_matched_update_all()
    if insert:
        b = b.when_not_matched_insert_all()
    if delete is True:
        b = b.when_not_matched_by_source_delete()
    elif delete:
        b = b.when_not_matched_by_source_delete(delete)
    return b


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_merge_insert_matches_pylance_step_by_step(tmp_path: Path, stable: bool, version: str) -> None:
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    for uri in (ours_uri, theirs_uri):
        lance.write_dataset(BASE, uri, max_rows_per_file=4, enable_stable_row_ids=stable,
                            data_storage_version=version)
    for cond, insert, delete, source in STEPS:
        ours = _build(lance_format.dataset(ours_uri), cond, insert, delete).execute(source)
        theirs = _build(lance.dataset(theirs_uri), cond, insert, delete).execute(source)
        assert isinstance(ours, MergeInsertResult)
        assert ours == theirs and dict(ours) == theirs
        assert same_everywhere(ours_uri).equals(same_everywhere(theirs_uri))
        assert lance.dataset(ours_uri).version == lance.dataset(theirs_uri).version
    txn = lance_format.dataset(ours_uri).read_transaction()
    assert txn is not None and txn.operation.kind == "update"
    assert txn.operation.update_mode == "rewrite_rows"
    assert_no_orphans(ours_uri)


def test_pylance_merges_into_our_merge_results(tmp_path: Path) -> None:
    uri = str(tmp_path / "mixed")
    lance_format.write_dataset(BASE, uri, max_rows_per_file=4, enable_stable_row_ids=True)
    lance_format.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(pa.table({"id": [1, 50], "v": ["a", "b"]}))
    lance.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(pa.table({"id": [1, 50, 51], "v": ["c", "d", "e"]}))
    lance_format.dataset(uri).merge_insert("id").when_matched_update_all().execute(pa.table({"id": [51], "v": ["f"]}))
    got = same_everywhere(uri)
    rows = dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))
    assert rows[1] == "c" and rows[50] == "d" and rows[51] == "f" and got.num_rows == 13


def test_merge_insert_defaults_to_the_unenforced_primary_key(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False,
                                 metadata={"lance-schema:unenforced-primary-key": "true"}),
                        pa.field("v", pa.string())])
    uri = str(tmp_path / "pk")
    lance_format.write_dataset(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=schema), uri)
    ds = lance_format.dataset(uri)
    result = ds.merge_insert().when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"k": [2, 3], "v": ["B", "C"]}, schema=schema))
    assert dict(result) == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0}
    assert ds.version == 2  # the handle moved to the new version
    assert sorted(lance.dataset(uri).to_table().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "a"}, {"k": 2, "v": "B"}, {"k": 3, "v": "C"}]


def test_merge_insert_without_keys_is_refused(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(BASE, tmp_path / "nokey")
    with pytest.raises(InvalidInputError, match="join keys"):
        ds.merge_insert()
    with pytest.raises(InvalidInputError, match="nope"):
        ds.merge_insert("nope")


def test_ambiguous_merge_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "amb")
    ds = lance_format.write_dataset(BASE, uri)
    with pytest.raises(InvalidInputError, match="ambiguous"):
        ds.merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1, 1], "v": ["a", "b"]}))
    assert lance_format.dataset(uri).version == 1
    assert_no_orphans(uri)
    # Duplicate keys are fine when matched rows are not updated (pylance inserts them all).
    ds.merge_insert("id").when_not_matched_insert_all().execute(pa.table({"id": [70, 70], "v": ["a", "b"]}))
    assert lance.dataset(uri).count_rows("id = 70") == 2


def test_source_with_unknown_column_is_refused(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(BASE, tmp_path / "extra")
    with pytest.raises(InvalidInputError, match="zz"):
        ds.merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1], "zz": [1]}))


def test_merge_insert_commits_over_a_concurrent_append(tmp_path: Path) -> None:
    uri = str(tmp_path / "append")
    stale = lance_format.write_dataset(BASE, uri, max_rows_per_file=4)
    lance.write_dataset(pa.table({"id": [100], "v": ["p"]}), uri, mode="append")
    stale.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [1, 200], "v": ["u", "n"]}))
    got = same_everywhere(uri)
    assert stale.version == 3
    assert sorted(i for i in got.column("id").to_pylist() if i is not None and i >= 100) == [100, 200]
    assert got.filter(pa.compute.equal(got.column("id"), 1)).column("v").to_pylist() == ["u"]


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_concurrent_update_of_the_same_row_reruns_the_merge(tmp_path: Path, stable: bool) -> None:
    uri = str(tmp_path / "conflict")
    stale = lance_format.write_dataset(BASE, uri, max_rows_per_file=4, enable_stable_row_ids=stable)
    lance.dataset(uri).update({"v": "'theirs'"}, where="id = 1")
    stale.merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1, 5], "v": ["ours", "o5"]}))
    got = same_everywhere(uri)
    assert got.filter(pa.compute.equal(got.column("id"), 1)).column("v").to_pylist() == ["ours"]
    assert got.num_rows == BASE.num_rows
    assert_no_orphans(uri)


def test_concurrent_delete_of_other_rows_is_merged(tmp_path: Path) -> None:
    uri = str(tmp_path / "rebase")
    stale = lance_format.write_dataset(BASE, uri)  # one fragment: both writers touch it
    lance.dataset(uri).delete("id = 7")
    stale.merge_insert("id").when_matched_update_all().execute(pa.table({"id": [1], "v": ["ours"]}))
    got = same_everywhere(uri)
    assert 7 not in got.column("id").to_pylist() and got.num_rows == BASE.num_rows - 1


def test_without_retries_a_conflict_raises_and_leaves_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "noretry")
    stale = lance_format.write_dataset(BASE, uri)
    lance.dataset(uri).update({"v": "'theirs'"}, where="id = 1")
    with pytest.raises(RetryableCommitConflictError):
        stale.merge_insert("id").when_matched_update_all().conflict_retries(0).execute(
            pa.table({"id": [1], "v": ["ours"]}))
    assert lance_format.dataset(uri).version == 2
    assert_no_orphans(uri)


def test_concurrent_merges_from_threads_all_land(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    uri = str(tmp_path / "threads")
    lance_format.write_dataset(BASE, uri, max_rows_per_file=4)

    def upsert(i: int) -> dict[str, int]:
        source = pa.table({"id": [i, 100 + i], "v": [f"t{i}", f"n{i}"]})
        return dict(lance_format.dataset(uri).merge_insert("id").when_matched_update_all()
                    .when_not_matched_insert_all().execute(source))

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(upsert, range(6)))
    assert all(r == {"num_inserted_rows": 1, "num_updated_rows": 1, "num_deleted_rows": 0} for r in results)
    got = same_everywhere(uri)
    rows = dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))
    assert all(rows[i] == f"t{i}" and rows[100 + i] == f"n{i}" for i in range(6))
    assert got.num_rows == BASE.num_rows + 6
    assert_no_orphans(uri)


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_stale_pylance_writer_commits_over_our_merge(tmp_path: Path, stable: bool) -> None:
    uri = str(tmp_path / "stale_pylance")
    lance_format.write_dataset(BASE, uri, max_rows_per_file=4, enable_stable_row_ids=stable)
    stale = lance.dataset(uri)
    lance_format.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [1, 50], "v": ["u", "n"]}))
    stale.delete("id = 9")  # pylance reads our Update transaction to check for conflicts
    got = same_everywhere(uri)
    assert 9 not in got.column("id").to_pylist() and 50 in got.column("id").to_pylist()
    assert lance.dataset(uri).version == 3


def test_when_matched_delete_and_fail_match_pylance(tmp_path: Path) -> None:
    results = {}
    for name, mod in (("ours", lance_format), ("pylance", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(BASE, uri, max_rows_per_file=4)
        deleted = mod.dataset(uri).merge_insert("id").when_matched_delete().when_not_matched_insert_all() \
            .execute(pa.table({"id": [1, 90], "v": ["x", "y"]}))
        last_wins = mod.dataset(uri).merge_insert("id").when_matched_delete().when_matched_update_all() \
            .execute(pa.table({"id": [2], "v": ["q"]}))
        with pytest.raises((InvalidInputError, OSError), match="match"):
            mod.dataset(uri).merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
                pa.table({"id": [3, 91], "v": ["x", "y"]}))
        ok = mod.dataset(uri).merge_insert("id").when_matched_fail().when_not_matched_insert_all().execute(
            pa.table({"id": [92], "v": ["z"]}))
        results[name] = (dict(deleted), dict(last_wins), dict(ok), same_everywhere(uri), lance.dataset(uri).version)
    assert results["ours"][:3] == results["pylance"][:3]
    assert results["ours"][3].equals(results["pylance"][3]) and results["ours"][4] == results["pylance"][4]
    assert_no_orphans(str(tmp_path / "ours"))


def test_file_limits_cut_the_new_files_and_bad_limits_are_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": list(range(6)), "v": [0] * 6}), uri)
    with pytest.raises(InvalidInputError, match="file_limits"):
        ds.merge_insert("id").when_not_matched_insert_all().execute(pa.table({"id": [9], "v": [1]}),
                                                                    file_limits={"rows_per_file": 2})
    with pytest.raises(InvalidInputError, match="positive integer"):
        ds.merge_insert("id").when_not_matched_insert_all().execute(pa.table({"id": [9], "v": [1]}),
                                                                    file_limits={"max_rows_per_file": 0})
    assert ds.version == 1  # nothing committed
    src = pa.table({"id": list(range(3, 12)), "v": [1] * 9})
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        src, file_limits={"max_rows_per_file": 3})
    new = [f.physical_rows for f in ds.manifest.fragments if f.id > 0]
    assert new == [3, 3, 3] and ds.count_rows() == 12
