"""``starts_with`` and ``LIKE 'prefix%'`` reach BTREE, BITMAP and NGRAM indices and give pylance's rows.

A literal prefix is the value range ``[prefix, successor)``: an ordered index answers it exactly,
so the fetched rows are still checked against the values the index returned for them. Without
an ordered index, an NGRAM index answers the pattern's literal parts as substrings. Indices are
built by pylance 14.0.2 and by us; pylance answers from ours as from its own.
"""

from __future__ import annotations

from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import scan
from lance_format.index.predicates import Prefix, _successor

WORDS = ["apple", "apricot", "ap", "a", "", "APPLE", "banana", "band", "a%b", "a_b", "a\\b", "ab\\", "zz\u00e9",
         "\u00e9t\u00e9", "ab\uffff", "ab\uffffz", "ab\U00010000x", "ab\U0010ffff", "ab\U0010ffffq", "\U0010ffff",
         "ac", "abc", "ab"]

#: (filter, which columns' index pylance plans it through)
FILTERS = [
    "starts_with({c}, 'ap')", "{c} LIKE 'ap%'", "{c} LIKE 'a_%'", "{c} LIKE 'ap'", "{c} LIKE 'a\\%%'",
    "{c} LIKE 'a\\\\%'", "{c} LIKE 'ab%c'", "starts_with({c}, 'ab\uffff')", "starts_with({c}, 'ab\U0010ffff')",
    "starts_with({c}, '\U0010ffff')", "starts_with({c}, 'zz')", "starts_with({c}, 'é')", "{c} LIKE 'app%'",
    "{c} LIKE '%ppl%'", "{c} LIKE 'ban%a'",
    # no index: pylance scans, so do we
    "{c} NOT LIKE 'ap%'", "NOT starts_with({c}, 'ap')", "{c} ILIKE 'ap%'", "starts_with({c}, '')", "{c} LIKE '%'",
    # combined
    "starts_with({c}, 'ap') AND id > 100", "starts_with({c}, 'ap') OR {c} LIKE 'ban%'",
]


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = [WORDS[i] for i in rng.integers(0, len(WORDS), n)]
    for i in range(seed, n, 9):
        words[i] = None  # type: ignore[call-overload]
    col = pa.array(words, pa.string())
    return pa.table({"id": pa.array(np.arange(n) + seed * 1000, pa.int64()), "bt": col, "bm": col, "ng": col,
                     "lbt": col.cast(pa.large_string())})


KINDS = {"bt": "BTREE", "bm": "BITMAP", "ng": "NGRAM", "lbt": "BTREE"}


def _dataset(path: str, builder: str, stable: bool) -> None:
    """400 indexed rows in 4 fragments, some deleted, then 50 unindexed rows appended."""
    if builder == "pylance":
        lance.write_dataset(_table(400, 0), path, max_rows_per_file=100, enable_stable_row_ids=stable)
        for col, kind in KINDS.items():
            lance.dataset(path).create_scalar_index(col, kind)
        lance.dataset(path).delete("id % 17 = 0")
        lance.write_dataset(_table(50, 1), path, mode="append")
    else:
        ds = lance_format.write_dataset(_table(400, 0), path, mode="create", max_rows_per_file=100,
                                        enable_stable_row_ids=stable)
        for col, kind in KINDS.items():
            ds.create_scalar_index(col, kind)
        ds.delete("id % 17 = 0")
        lance_format.write_dataset(_table(50, 1), path, mode="append")


def _ids(ds: lance.LanceDataset | lance_format.LanceDataset, flt: str, **kw: bool) -> list[int]:
    return sorted(ds.to_table(filter=flt, columns=["id"], **kw).column("id").to_pylist())


def _uses_index(plan: str, col: str) -> bool:
    return f"@{col}_idx(" in plan


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("builder", ["pylance", "ours"])
def test_prefix_filters_give_pylances_rows(make_path: Callable[[str], str], builder: str, stable: bool) -> None:
    path = make_path(builder)
    _dataset(path, builder, stable)
    theirs, ours = lance.dataset(path), lance_format.dataset(path)
    for template in FILTERS:
        for col in KINDS:
            flt = template.format(c=col)
            expected = _ids(theirs, flt, use_scalar_index=False)
            assert _ids(theirs, flt) == expected, flt  # pylance answers the same from the index
            assert _ids(ours, flt) == expected, flt


@pytest.mark.parametrize(("flt", "col", "query"), [
    ("starts_with(bt, 'ap')", "bt", "[bt LIKE 'ap%']@bt_idx(BTree)"),
    ("bt LIKE 'ap%'", "bt", "[bt LIKE 'ap%']@bt_idx(BTree)"),
    ("bt LIKE 'a_%'", "bt", "[bt LIKE 'a%']@bt_idx(BTree)"),
    ("bt LIKE 'ap'", "bt", "[bt = ap]@bt_idx(BTree)"),
    ("lbt LIKE 'ap%'", "lbt", "[lbt LIKE 'ap%']@lbt_idx(BTree)"),
    ("starts_with(ng, 'app')", "ng", None),
    ("ng LIKE '%ppl%'", "ng", None),
])
def test_explain_plan_names_the_index_pylance_uses(make_path: Callable[[str], str], flt: str, col: str,
                                                   query: str | None) -> None:
    path = make_path("explain")
    _dataset(path, "ours", False)
    ours, theirs = lance_format.dataset(path).scanner(filter=flt).explain_plan(), \
        lance.dataset(path).scanner(filter=flt).explain_plan()
    assert _uses_index(ours, col) and _uses_index(theirs, col), (ours, theirs)
    if query is not None:  # pylance describes NGRAM leaves as regexp_like, we as contains
        assert f"ScalarIndexQuery: query={query}" in ours and f"ScalarIndexQuery: query={query}" in theirs


@pytest.mark.parametrize("flt", ["bt NOT LIKE 'ap%'", "bt ILIKE 'ap%'", "starts_with(bt, '')", "bt LIKE '%pp%'",
                                 "ends_with(bt, 'le')"])
def test_patterns_without_a_range_scan_as_pylance_does(make_path: Callable[[str], str], flt: str) -> None:
    path = make_path("noindex")
    _dataset(path, "ours", False)
    assert "ScalarIndexQuery" not in lance_format.dataset(path).scanner(filter=flt).explain_plan()
    assert "ScalarIndexQuery" not in lance.dataset(path).scanner(filter=flt).explain_plan()


def test_rows_a_prefix_range_returns_are_checked_against_their_values(make_path: Callable[[str], str]) -> None:
    # A BTREE answers the prefix exactly: every row it returns comes with its value, which starts
    # with the prefix and is what the scan compares the fetched row with.
    path = make_path("claims")
    _dataset(path, "pylance", False)
    ds = lance_format.dataset(path)
    ctx = ds.scanner(filter="starts_with(bt, 'ab')")._ctx
    plan = scan.index_plan(ctx, "starts_with(bt, 'ab')")
    assert plan is not None and plan.claims
    values = pa.concat_arrays([c.values.cast(pa.string()) for c in plan.claims]).to_pylist()
    # the index still holds the deleted rows (the scan drops them): every indexed row starting with 'ab'
    indexed = [v for v in _table(400, 0).column("bt").to_pylist() if v is not None and v.startswith("ab")]
    assert sorted(values) == sorted(indexed)


@pytest.mark.parametrize(("prefix", "upper"), [
    ("ap", "aq"), ("a\uffff", "a\U00010000"), ("a\U0010ffff", "b"), ("\U0010ffff\U0010ffff", None),
    ("a\ud7ff", "a\ue000"), ("z", "{"),
])
def test_a_prefix_is_the_range_up_to_its_successor(prefix: str, upper: str | None) -> None:
    assert _successor(prefix) == upper
    q = Prefix.of(prefix, pa.large_string())
    assert q.lo == pa.scalar(prefix, pa.large_string()) and q.lo_inclusive and not q.hi_inclusive
    assert (q.hi is None) == (upper is None)
    assert q.describe("s") == f"s LIKE '{prefix}%'"
