"""The indices a query may use are kept per (dataset, version) for every handle a process opens
(a long-lived process opens one per request): each version still sees exactly its own indices
(before a build, after it, after a drop, on another dataset with the same version numbers), and
counts equal pylance 14.0.2's."""

from __future__ import annotations

import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

FLT = "v >= 1000 AND v < 1300"


def _table(seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"v": pa.array(np.arange(4000) + int(rng.integers(0, 50))), "w": pa.array(rng.random(4000))})


def _indexed(uri: str) -> bool:
    return "ScalarIndexQuery" in lance_format.dataset(uri).scanner(filter=FLT).explain_plan()


@pytest.mark.parametrize("kind", ["ZONEMAP", "BTREE"])
def test_each_version_sees_its_own_indices(tmp_path: object, kind: str) -> None:
    uri = f"{tmp_path}/a.lance"
    lance.write_dataset(_table(1), uri, max_rows_per_file=1000)
    want = lance.dataset(uri).count_rows(filter=FLT)
    assert lance_format.dataset(uri).count_rows(filter=FLT) == want
    assert not _indexed(uri)  # version 1: no index (and now known as such for version 1)
    lance_format.dataset(uri).create_scalar_index("v", kind, name="v_idx")
    assert _indexed(uri)
    assert lance_format.dataset(uri).count_rows(filter=FLT) == want
    old = lance_format.dataset(uri, version=1)
    assert "ScalarIndexQuery" not in old.scanner(filter=FLT).explain_plan()
    assert old.count_rows(filter=FLT) == want
    lance_format.dataset(uri).drop_index("v_idx")
    assert not _indexed(uri)
    assert lance_format.dataset(uri).count_rows(filter=FLT) == want


def test_datasets_with_the_same_versions_keep_their_own_indices(tmp_path: object) -> None:
    a, b = f"{tmp_path}/a.lance", f"{tmp_path}/b.lance"
    for uri, seed in ((a, 2), (b, 3)):
        lance.write_dataset(_table(seed), uri, max_rows_per_file=1000)
        lance.dataset(uri).add_columns({"x": "v * 2"})  # version 2 on both
    lance_format.dataset(a).create_scalar_index("v", "ZONEMAP")  # a: version 3 with an index
    lance.dataset(b).delete("v < 10")  # b: version 3 without one
    assert _indexed(a)
    assert not _indexed(b)
    for uri in (a, b):
        assert lance_format.dataset(uri).count_rows(filter=FLT) == lance.dataset(uri).count_rows(filter=FLT)


def test_a_dataset_recreated_in_place_sees_its_own_indices(tmp_path: object) -> None:
    uri = f"{tmp_path}/a.lance"
    lance.write_dataset(_table(4), uri, max_rows_per_file=1000)
    lance_format.dataset(uri).create_scalar_index("v", "ZONEMAP")  # version 2, indexed
    assert _indexed(uri)
    shutil.rmtree(uri)
    lance.write_dataset(_table(5), uri, max_rows_per_file=1000)
    lance.dataset(uri).create_scalar_index("w", "BTREE")  # version 2 again, indexed on another column
    assert not _indexed(uri)
    assert lance_format.dataset(uri).count_rows(filter=FLT) == lance.dataset(uri).count_rows(filter=FLT)
