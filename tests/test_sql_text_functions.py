"""String and list functions of SQL filters give pylance 14.0.2's rows.

``contains``, ``starts_with``, ``ends_with``, ``[NOT] LIKE`` / ``ILIKE`` (escapes included) and
the list-membership functions ``array_has`` / ``array_has_any`` / ``array_has_all`` (with their
DataFusion aliases and the ``[..]`` / ``make_array(..)`` literals) on tables holding null
strings, null lists, null elements and empty lists: every filter runs through our scanner and
through pylance on the same dataset, and the ids must agree.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.sql import parse_filter

WORDS = ["apple", "apricot", "banana", "band", "Apple", "APRICOT", "a%b", "a_b", "a\\b", "ab\\", "xa_y",
         "zz\u00e9", "\u00e9t\u00e9", "", "ppl", "a"]


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    n = 600
    strings = [WORDS[i] for i in rng.integers(0, len(WORDS), n)]
    labels = [[WORDS[j] for j in rng.integers(0, 6, rng.integers(0, 4))] for _ in range(n)]
    nums = [[int(v) for v in rng.integers(0, 6, rng.integers(0, 4))] for _ in range(n)]
    for i in range(0, n, 11):
        strings[i] = None
    for i in range(0, n, 13):
        labels[i] = None
        nums[i] = None
    for i in range(5, n, 17):
        labels[i] = [*(labels[i] or []), None]
        nums[i] = [None, *(nums[i] or [])]
    labels[1], labels[2] = [], [None]
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "s": pa.array(strings, pa.string()),
        "l": pa.array(labels, pa.list_(pa.string())),
        "ll": pa.array(labels, pa.large_list(pa.string())),
        "n": pa.array(nums, pa.list_(pa.int32())),
    })


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance.LanceDataset, lance_format.LanceDataset]:
    path = str(tmp_path_factory.mktemp("text_functions") / "ds")
    table = _table()
    lance.write_dataset(table.slice(0, 300), path)
    theirs = lance.write_dataset(table.slice(300), path, mode="append")  # two fragments
    return theirs, lance_format.dataset(path)


def _ids(ds: lance.LanceDataset | lance_format.LanceDataset, flt: str) -> list[int]:
    return sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist())


TEXT_FILTERS = [
    "contains(s, 'pp')", "contains(s, '')", "NOT contains(s, 'a')", "contains(s, '%')", "contains(s, 'é')",
    "starts_with(s, 'ap')", "starts_with(s, 'a')", "starts_with(s, '')", "NOT starts_with(s, 'ap')",
    "starts_with(s, 'zz')", "ends_with(s, 'a')", "ends_with(s, 'b')", "NOT ends_with(s, 'a')",
    "s LIKE 'ap%'", "s LIKE 'a%'", "s LIKE 'a_b'", "s LIKE 'a\\_b'", "s LIKE 'a\\%%'", "s LIKE 'a\\\\%'",
    "s LIKE '%an%'", "s LIKE 'ap'", "s LIKE 'a'", "s LIKE '%'", "s LIKE '_'", "s LIKE '%\\\\'",
    "s NOT LIKE 'ap%'", "s NOT LIKE '%a%'", "s ILIKE 'ap%'", "s ILIKE 'APRICOT'", "s NOT ILIKE 'a%'",
    "s LIKE 'ét%'", "s LIKE '%\\\\%'", "s ILIKE '%\\\\'", "s LIKE 'a\\b'", "s LIKE '%.%'", "s LIKE '(%'",
    "starts_with(s, 'ap') AND id > 100", "s LIKE 'ap%' OR ends_with(s, 'na')",
]


@pytest.mark.parametrize("flt", TEXT_FILTERS)
def test_text_functions_keep_pylances_rows(both: tuple[lance.LanceDataset, lance_format.LanceDataset],
                                           flt: str) -> None:
    theirs, ours = both
    assert _ids(ours, flt) == _ids(theirs, flt)


LIST_FILTERS = [
    # array_has and its aliases
    "array_has(l, 'apple')", "array_contains(l, 'apple')", "list_has(l, 'band')", "list_contains(l, 'band')",
    "NOT array_has(l, 'apple')", "array_has(l, NULL)", "NOT array_has(l, NULL)", "array_has(l, 'apple') IS NULL",
    "array_has(l, s)", "NOT array_has(l, s)",
    # array_has_any: lists, make_array, nulls in and out of the list, empty lists, aliases
    "array_has_any(l, ['apple', 'band'])", "array_has_any(l, make_array('apple', 'band'))",
    "NOT array_has_any(l, ['apple', 'band'])", "array_has_any(l, ['apple', NULL])", "array_has_any(l, [NULL])",
    "NOT array_has_any(l, [NULL])", "array_has_any(l, [])", "NOT array_has_any(l, [])",
    "array_has_any(l, make_array())", "array_has_any(l, ['zzz'])", "array_has_any(l, ['zzz']) IS NULL",
    "array_has_any(l, ['apple', 'apple'])", "list_has_any(l, ['banana'])", "arrays_overlap(l, ['banana'])",
    "array_has_any(['apple', 'band'], l)", "ARRAY_HAS_ANY(l, ['apple'])",
    # array_has_all
    "array_has_all(l, ['apple', 'apricot'])", "array_has_all(l, ['apple'])", "NOT array_has_all(l, ['apple'])",
    "array_has_all(l, ['apple', NULL])", "array_has_all(l, [NULL])", "NOT array_has_all(l, [NULL])",
    "array_has_all(l, [])", "NOT array_has_all(l, [])", "array_has_all(l, ['apple', 'apple'])",
    "list_has_all(l, ['banana', 'band'])", "array_has_all(l, ['apple']) IS NULL",
    # large lists
    "array_has(ll, 'apple')", "array_has_any(ll, ['apple', NULL])", "array_has_all(ll, ['apple', 'banana'])",
    # integer lists: literals are compared as numbers
    "array_has(n, 2)", "array_has(n, 2.0)", "array_has(n, 2.5)", "NOT array_has(n, 2.5)",
    "array_has(n, 3000000000)", "array_has_any(n, [1, 3])", "array_has_any(n, [1.0, 3])",
    "array_has_any(n, [2.5, 3])", "array_has_all(n, [1, 2])", "array_has_all(n, [2, 2.5])",
    "NOT array_has_all(n, [2, 2.5])", "array_has_any(n, [NULL, 4])", "array_has(n, -1) OR id = 2",
    # combined with other predicates
    "array_has_any(l, ['apple']) AND starts_with(s, 'b')", "array_has_all(l, ['band']) OR s LIKE 'ap%'",
]


@pytest.mark.parametrize("flt", LIST_FILTERS)
def test_list_functions_keep_pylances_rows(both: tuple[lance.LanceDataset, lance_format.LanceDataset],
                                           flt: str) -> None:
    theirs, ours = both
    assert _ids(ours, flt) == _ids(theirs, flt)


def test_list_filter_is_a_plain_pyarrow_expression() -> None:
    # The expression we hand back works wherever pyarrow evaluates expressions (Table.filter
    # runs it through an Acero plan, on chunked columns).
    table = pa.table({"l": pa.chunked_array([pa.array([["a"], None, ["b", None]]), pa.array([[None], ["a", "b"]])]),
                      "x": [1, 2, 3, 4, 5]})
    assert table.filter(parse_filter("array_has_any(l, ['a', NULL])", table.schema))["x"].to_pylist() == [1, 3, 4, 5]
    assert table.filter(parse_filter("array_has_all(l, ['a', 'b'])", table.schema))["x"].to_pylist() == [5]
    assert table.filter(parse_filter("array_has(l, 'b')", table.schema))["x"].to_pylist() == [3, 5]


@pytest.mark.parametrize(("flt", "words"), [
    ("array_has_any(l, l)", "literal list"),
    ("array_has_any(l, make_array(s, 'a'))", "literal values"),
    ("array_has_all(['a'], l)", "literal list"),
    ("array_has(s, 'a')", "list column"),
    ("array_has_any(l)", "2 arguments"),
    ("array_has(n, 'x')", "cannot interpret"),
])
def test_list_functions_refuse_what_they_cannot_evaluate(flt: str, words: str) -> None:
    schema = _table().schema
    with pytest.raises(InvalidInputError, match=words):
        parse_filter(flt, schema)
