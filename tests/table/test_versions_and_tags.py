"""versions(), restore(), tags, head and row addresses, as pylance reports them."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format as lf

T = pa.table({"a": pa.array(range(10), pa.int64()), "s": [f"r{i}" for i in range(10)]})


def test_versions_fields_match_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri, commit_message="first", max_rows_per_file=4)
    lf.write_dataset(T, uri, mode="append", transaction_properties={"run": "r1"})
    lf.dataset(uri).delete("a < 3")
    lance.write_dataset(T, uri, mode="append")
    lance.dataset(uri).delete("a = 9")
    lf.dataset(uri).checkout_version(2).restore()
    lf.write_dataset(T.slice(0, 2), uri, mode="overwrite")
    ours, theirs = lf.dataset(uri).versions(), lance.dataset(uri).versions()
    assert [v["version"] for v in ours] == [v["version"] for v in theirs] == list(range(1, 8))
    for o, t in zip(ours, theirs, strict=True):
        assert o["timestamp"] == t["timestamp"]
        assert o["metadata"] == t["metadata"]
    ops = [type(lance.dataset(uri).read_transaction(v).operation).__name__.lower() for v in range(1, 8)]
    assert [v["operation"] for v in ours] == ops
    assert ops == ["overwrite", "append", "delete", "append", "delete", "restore", "overwrite"]
    props = lance.dataset(uri).read_transaction(2).transaction_properties
    assert props["run"] == "r1"


def test_restore_both_ways_and_tags_by_name(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    lf.write_dataset(T, uri, mode="append")
    lf.dataset(uri).delete("a >= 5")
    # pylance restores our dataset, we read it
    theirs = lance.dataset(uri, version=2)
    theirs.restore()
    assert lf.dataset(uri).version == 4
    assert lf.dataset(uri).to_table().equals(lance.dataset(uri, version=2).to_table())
    # we restore, pylance reads
    ours = lf.dataset(uri, version=3)
    ours.restore()
    assert lance.dataset(uri).version == 5
    assert lance.dataset(uri).to_table().equals(lf.dataset(uri, version=3).to_table())
    assert lance.dataset(uri).to_table().num_rows == 10
    # tags: pylance's tag read by name by us, ours by pylance
    lance.dataset(uri).tags.create("from_pylance", 2)
    lf.dataset(uri).tags.create("from_us", 3)
    assert lf.dataset(uri, version="from_pylance").to_table().equals(lance.dataset(uri, version=2).to_table())
    assert lance.dataset(uri, version="from_us").to_table().equals(lf.dataset(uri, version=3).to_table())
    assert lf.dataset(uri).checkout_version("from_us").version == 3
    assert set(lf.dataset(uri).tags.list()) == set(lance.dataset(uri).tags.list()) == {"from_pylance", "from_us"}


def test_head_and_row_address_after_deletes(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri, max_rows_per_file=4)
    lf.dataset(uri).delete("a in (1, 4, 5, 6, 7)")  # fragment 1 fully deleted, dropped
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    assert ours.head(3).equals(theirs.head(3))
    a = ours.to_table(with_row_address=True)
    b = theirs.to_table(with_row_address=True)
    assert a.equals(b)
    assert a.column("_rowaddr").to_pylist() == [0, 2, 3, (2 << 32) + 0, (2 << 32) + 1]
    assert ours.to_table(columns=["a"], with_row_id=True, with_row_address=True, filter="a > 2", offset=1,
                         limit=2).equals(
        theirs.to_table(columns=["a"], with_row_id=True, with_row_address=True, filter="a > 2", offset=1, limit=2))
