"""Compaction of many small fragments that pylance wrote (read together, deletions applied with
one mask per group): pylance reads exactly the live rows, in order, with nulls, strings,
dictionaries, fixed-size lists and lists intact; fragments that cannot be read together (two
data files, big fragments) are mixed in and still come out right."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.maintenance import compaction_exec


def _table(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": pa.array(ids),
        "x": pa.array(rng.standard_normal(n), mask=rng.random(n) < 0.1),
        "category": pa.array([f"category_{i:02d}" for i in rng.integers(0, 20, n)]),
        "text": pa.array([None if i % 11 == 0 else f"w{i % 50} w{i % 7} w{i % 301}" for i in ids]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
        "tags": pa.array([[int(i % 5)] * int(i % 3) for i in ids], pa.list_(pa.int64())),
    })


def _write(uri: str, version: str, sizes: list[int]) -> None:
    start = 0
    for k, n in enumerate(sizes):
        lance.write_dataset(_table(start, n), uri, mode="create" if k == 0 else "append",
                            data_storage_version=version)
        start += n


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_many_small_fragments_with_deletions_compact_to_the_live_rows(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "d.lance")
    _write(uri, version, [1500, 900, 2000, 1200, 700, 1800, 1000, 1600])
    ds = lance.dataset(uri)
    ds.delete("id % 10 = 0 OR (id >= 2400 AND id < 2450)")
    ds.delete("id = 4400")  # deleted twice over: two deletion files' worth of history
    expected = lance.dataset(uri).to_table()
    lf.dataset(uri).optimize.compact_files()
    after = lance.dataset(uri)
    assert len(after.get_fragments()) == 1
    assert after.to_table().equals(expected)
    assert lf.dataset(uri).to_table().equals(expected)


def test_groups_are_bounded_and_mixed_with_scanned_fragments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "d.lance")
    _write(uri, "2.2", [600, 800, 5000, 700, 650, 900, 300])
    # a fragment with a second data file (an added column) cannot be read with the others
    lance.dataset(uri).add_columns({"z": "id * 2"})
    lance.write_dataset(_table(100_000, 500).append_column("z", pa.array(np.arange(500, dtype=np.int64))),
                        uri, mode="append", data_storage_version="2.2")
    lance.dataset(uri).delete("id % 7 = 3")
    expected = lance.dataset(uri).to_table()
    # small groups, and the 5,000-row fragment read by the scanner
    monkeypatch.setattr(compaction_exec, "JOINT_GROUP_ROWS", 1600)
    monkeypatch.setattr(compaction_exec, "JOINT_MAX_ROWS", 1000)
    lf.dataset(uri).optimize.compact_files()
    assert lance.dataset(uri).to_table().equals(expected)


def test_joint_groups_really_read_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "d.lance")
    _write(uri, "2.2", [400] * 6)
    lance.dataset(uri).delete("id % 3 = 0")
    expected = lance.dataset(uri).to_table()
    groups: list[int] = []
    real = compaction_exec._joint_batches

    def spy(ctx, frags, deletions, names):  # type: ignore[no-untyped-def]
        out = real(ctx, frags, deletions, names)
        groups.append(len(frags) if out is not None else 0)
        return out

    monkeypatch.setattr(compaction_exec, "_joint_batches", spy)
    lf.dataset(uri).optimize.compact_files()
    assert groups == [6]
    assert lance.dataset(uri).to_table().equals(expected)
