"""Our scans answer ``array_has_any`` / ``array_has_all`` / ``array_has`` from LABEL_LIST indices.

On datasets of several fragments (one appended after the index, rows deleted, null lists, null
elements, empty lists), with the index built by pylance 14.0.2 and by us, with and without
stable row ids: our rows equal pylance's, our ``explain_plan`` names the index where pylance's
does, and pylance answers from the index we built as from its own.
"""

from __future__ import annotations

from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import scan
from lance_format.index.predicates import HasAll, HasAny

LABELS = np.array(["a", "b", "c", "d", "e", "f"], dtype=object)

#: (filter, whether pylance and we plan it through the LABEL_LIST index; None: only we do)
FILTERS = [
    ("array_has_any(tags, ['a'])", True),
    ("array_has_any(tags, ['d', 'e'])", True),
    ("array_has_any(tags, make_array('b', 'f'))", True),
    ("array_has_all(tags, ['a', 'c'])", True),
    ("array_has_all(tags, ['a', 'a'])", True),
    ("array_has_all(tags, ['a', 'zzz'])", True),
    ("array_contains(tags, 'b')", True),
    ("array_has(tags, 'c')", True),
    ("list_has_any(tags, ['e'])", True),
    ("arrays_overlap(tags, ['c', 'zzz'])", True),
    ("array_has_any(tags, ['zzz', NULL])", True),
    ("array_has_all(tags, ['b', NULL])", True),
    ("array_has_any(tags, [NULL])", True),
    ("array_has_any(tags, ['a']) AND id > 150", True),
    ("array_has_all(tags, ['a', 'b']) AND array_has_any(tags, ['c'])", True),
    ("array_has_any(tags, ['a']) OR array_has(tags, 'f')", True),
    # not planned through the index (by pylance, nor by us): same rows all the same
    ("array_has_any(tags, [])", False),
    ("array_has_all(tags, [])", False),
    ("array_has(tags, NULL)", False),
    ("array_has_any(tags, ['a']) OR id = 5", False),
    # pylance scans this one; we plan it (array_has_any is symmetric): same rows
    ("array_has_any(['a', 'b'], tags)", None),
]


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    tags: list[list[str | None] | None] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.08:
            tags.append(None)
        elif r < 0.12:
            tags.append([])
        else:
            row: list[str | None] = list(rng.choice(LABELS, int(rng.integers(1, 4))))
            if r > 0.95:
                row.append(None)
            tags.append(row)
    return pa.table({"id": pa.array(np.arange(n) + seed * 1000, pa.int64()),
                     "tags": pa.array(tags, pa.list_(pa.string()))})


def _dataset(path: str, builder: str, stable: bool) -> None:
    """300 indexed rows in 3 fragments, some deleted, then 60 unindexed rows appended."""
    if builder == "pylance":
        lance.write_dataset(_table(300, 0), path, max_rows_per_file=100, enable_stable_row_ids=stable)
        lance.dataset(path).create_scalar_index("tags", "LABEL_LIST")
        lance.dataset(path).delete("id % 13 = 0")
        lance.write_dataset(_table(60, 1), path, mode="append")
    else:
        ds = lance_format.write_dataset(_table(300, 0), path, mode="create", max_rows_per_file=100,
                                        enable_stable_row_ids=stable)
        ds.create_scalar_index("tags", "LABEL_LIST")
        ds.delete("id % 13 = 0")
        lance_format.write_dataset(_table(60, 1), path, mode="append")


def _ids(ds: lance.LanceDataset | lance_format.LanceDataset, flt: str, **kw: bool) -> list[int]:
    return sorted(ds.to_table(filter=flt, columns=["id"], **kw).column("id").to_pylist())


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("builder", ["pylance", "ours"])
def test_list_filters_on_a_label_list_give_pylances_rows(make_path: Callable[[str], str], builder: str,
                                                         stable: bool) -> None:
    path = make_path(builder)
    _dataset(path, builder, stable)
    theirs, ours = lance.dataset(path), lance_format.dataset(path)
    for flt, indexed in FILTERS:
        expected = _ids(theirs, flt, use_scalar_index=False)
        assert _ids(theirs, flt) == expected, flt  # pylance answers the same from the index
        assert _ids(ours, flt) == expected, flt
        plan = ours.scanner(filter=flt, columns=["id"]).explain_plan()
        assert ("@tags_idx(LabelList)" in plan) == (indexed is not False), (flt, plan)
        assert ("ScalarIndexQuery" in theirs.scanner(filter=flt).explain_plan()) == bool(indexed), flt
        if indexed:
            assert "unindexed_fragments_scanned=1" in plan, plan  # the appended fragment


def test_explain_plan_reads_like_pylances(make_path: Callable[[str], str]) -> None:
    path = make_path("explain")
    _dataset(path, "pylance", False)
    ours = lance_format.dataset(path)
    for flt, query in [("array_has_any(tags, ['a', 'b'])", "[array_has_any(tags, List([a, b]))]@tags_idx(LabelList)"),
                       ("array_contains(tags, 'a')", "[array_has_any(tags, List([a]))]@tags_idx(LabelList)"),
                       ("array_has_all(tags, ['a', NULL])", "[array_has_all(tags, List([a, ]))]@tags_idx(LabelList)")]:
        assert f"ScalarIndexQuery: query={query}" in ours.scanner(filter=flt).explain_plan()
        assert f"ScalarIndexQuery: query={query}" in lance.dataset(path).scanner(filter=flt).explain_plan()


def test_the_index_narrows_the_rows_read(make_path: Callable[[str], str]) -> None:
    # HasAny is the union of the values' bitmaps, HasAll their intersection; a null value is the
    # null key (rows holding a null element); values not in the index add nothing.
    path = make_path("narrow")
    lance_format.write_dataset(pa.table({
        "id": pa.array(range(6), pa.int64()),
        "tags": pa.array([["a", "b"], ["b"], None, [], ["a", None], ["c", "a", "a"]], pa.list_(pa.string())),
    }), path, mode="create").create_scalar_index("tags", "LABEL_LIST")
    ds = lance_format.dataset(path)
    ctx = ds.scanner(filter="array_has(tags, 'a')")._ctx  # the scan's read context

    def rows(query: HasAny | HasAll) -> list[int]:
        reader = scan._open(ctx, next(iter(scan.usable_indices(ctx)["tags"])).segments[0])
        return [int(r) for r in reader.search_values(query)[0]]

    s = pa.scalar
    assert rows(HasAny((s("a"),))) == [0, 4, 5]
    assert rows(HasAny((s("b"), s("zzz")))) == [0, 1]
    assert rows(HasAny((s(None, pa.string()),))) == [4]
    assert rows(HasAll((s("a"), s("b")))) == [0]
    assert rows(HasAll((s("a"), s(None, pa.string())))) == [4]
    assert rows(HasAll((s("a"), s("zzz")))) == []
    assert rows(HasAll((s("a"), s("a")))) == [0, 4, 5]


@pytest.mark.parametrize("builder", ["pylance", "ours"])
def test_integer_lists_cast_the_literals_to_the_element_type(make_path: Callable[[str], str], builder: str) -> None:
    rng = np.random.default_rng(1)
    nums = [None if i % 23 == 0 else [int(v) for v in rng.integers(0, 8, rng.integers(0, 4))] for i in range(400)]
    nums[5] = [None, 3]
    table = pa.table({"id": pa.array(range(400), pa.int64()), "n": pa.array(nums, pa.list_(pa.int64())),
                      "fixed": pa.array([[1, 2], [3, 4]] * 200, pa.list_(pa.int32(), 2))})
    path = make_path(builder)
    if builder == "pylance":
        lance.write_dataset(table, path).create_scalar_index("n", "LABEL_LIST")
    else:
        lance_format.write_dataset(table, path, mode="create").create_scalar_index("n", "LABEL_LIST")
    theirs, ours = lance.dataset(path), lance_format.dataset(path)
    for flt, indexed in [("array_has(n, 3)", True), ("array_has_any(n, [1, 7])", True),
                         ("array_has_all(n, [1, 2])", True), ("array_has(n, 2.0)", True),
                         ("array_has(n, 2.5)", False), ("array_has_any(n, [NULL, 1])", True),
                         ("array_has_all(n, [1, -1])", True), ("array_has(fixed, 3)", False),
                         ("array_has_any(fixed, [1, 4])", False), ("array_has_all(fixed, [1, 2])", False)]:
        assert _ids(ours, flt) == _ids(theirs, flt, use_scalar_index=False), flt
        assert ("@n_idx(LabelList)" in ours.scanner(filter=flt).explain_plan()) == indexed, flt
