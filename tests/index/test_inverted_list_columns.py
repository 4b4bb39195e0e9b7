"""INVERTED indices on ``list<string>`` / ``large_list<string>`` columns, against pylance 14.0.2 both ways.

pylance indexes a list row as one document: the elements' tokens in order, positions running on
from one element into the next, null elements skipped. Ours builds the same index (pylance answers
from it with its own scores) and answers from pylance's with pylance's ids and ``_score`` (1e-5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import FullTextOperator as LOp
from lance.query import MatchQuery as LMatch
from lance.query import PhraseQuery as LPhrase

import lance_format as lf
from lance_format.index.inverted.tokenizer import document_texts
from lance_format.search.fts_query import FullTextOperator, MatchQuery, PhraseQuery

WORDS = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
                  "running", "runs", "the", "of"])
TYPES = {"list": pa.list_(pa.string()), "large_list": pa.large_list(pa.string()),
         "list_large_string": pa.list_(pa.large_string())}
# (pylance's query, ours)
QUERIES: list[tuple[Any, Any]] = [
    *((q, q) for q in ["alpha", "gamma theta", "running", "kappa lambda zeta"]),
    (LPhrase("beta gamma", "tags"), PhraseQuery("beta gamma", "tags")),
    (LPhrase("zeta eta", "tags"), PhraseQuery("zeta eta", "tags")),
    (LMatch("delta iota", "tags", operator=LOp.AND), MatchQuery("delta iota", "tags", operator=FullTextOperator.AND)),
]


def _rows(n: int, seed: int) -> list[list[str | None] | None]:
    rng = np.random.default_rng(seed)
    out: list[list[str | None] | None] = []
    for i in range(n):
        if i % 53 == 0:
            out.append(None)
        elif i % 59 == 0:
            out.append([])
        elif i % 61 == 0:
            out.append([None])
        else:
            elems: list[str | None] = [" ".join(rng.choice(WORDS, rng.integers(1, 5)))
                                       for _ in range(rng.integers(1, 4))]
            if i % 7 == 0:
                elems.insert(1, None)
            if i % 11 == 0:
                elems.append("")
            out.append(elems)
    return out


def _table(typ: pa.DataType, n: int = 2000, seed: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(n)), "tags": pa.array(_rows(n, seed), typ)})


def _result(ds: Any, query: Any, **kw: Any) -> tuple[list[int], np.ndarray]:
    t = ds.to_table(full_text_query=query, columns=["id"], **kw)
    order = np.lexsort((t.column("id").to_numpy(), -t.column("_score").to_numpy()))
    return t.column("id").to_numpy()[order].tolist(), t.column("_score").to_numpy()[order]


def _same_answers(uri: str, *, limit: int | None = None) -> None:
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    for lquery, query in QUERIES:
        kw = {"limit": limit} if limit else {}
        want_ids, want = _result(theirs, lquery, **kw)
        got_ids, got = _result(ours, query, **kw)
        assert want_ids, query
        np.testing.assert_allclose(got, want, rtol=1e-5)
        if limit:  # rows tied with the last one may be cut either way
            above = want > want[-1] * (1 + 1e-5)
            assert np.array(got_ids)[above].tolist() == np.array(want_ids)[above].tolist(), query
        else:
            assert got_ids == want_ids, query


@pytest.mark.parametrize("typ", list(TYPES))
def test_ours_answers_from_pylances_list_index(tmp_path: Path, typ: str) -> None:
    uri = str(tmp_path / "t.lance")
    theirs = lance.write_dataset(_table(TYPES[typ]), uri, max_rows_per_file=700)
    theirs.delete("id % 13 = 0")
    theirs.create_scalar_index("tags", "INVERTED", with_position=True)
    _same_answers(uri)
    _same_answers(uri, limit=10)


@pytest.mark.parametrize("typ", list(TYPES))
def test_pylance_answers_from_our_list_index(tmp_path: Path, typ: str) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lf.write_dataset(_table(TYPES[typ]), uri, max_rows_per_file=700)
    ds.delete("id % 13 = 0")
    ds.create_scalar_index("tags", "INVERTED", with_position=True)
    assert [i["type"] for i in lance.dataset(uri).list_indices()] == ["Inverted"]
    _same_answers(uri)


def test_unindexed_list_rows_are_searched_flat_and_merged(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    theirs = lance.write_dataset(_table(TYPES["list"]), uri, max_rows_per_file=700)
    theirs.create_scalar_index("tags", "INVERTED", with_position=True)
    lance.write_dataset(_table(TYPES["list"], 500, seed=3), uri, mode="append")
    _same_answers(uri)
    lf.dataset(uri).optimize.optimize_indices()
    assert lance.dataset(uri).stats.index_stats("tags_idx")["num_unindexed_rows"] == 0
    _same_answers(uri)


def test_ngram_tokenizer_sees_the_space_between_elements(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    table = pa.table({"id": pa.array([0, 1, 2, 3]), "tags": pa.array(
        [["ab", None, "cd"], ["ab", "", "cd"], ["abcd"], ["xy"]], pa.list_(pa.string()))})
    lf.write_dataset(table, uri).create_scalar_index(
        "tags", "INVERTED", base_tokenizer="ngram", min_ngram_length=3, max_ngram_length=4)
    theirs = lance.dataset(uri)
    for query in ["b c", "b  c", "bcd", "ab c"]:
        want_ids, want = _result(theirs, query)
        got_ids, got = _result(lf.dataset(uri), query)
        assert got_ids == want_ids and want_ids, query
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert _result(theirs, "b c")[0] == [0]


def test_document_texts_joins_non_null_elements() -> None:
    arr = pa.array([["a b", None, "c"], None, [], [None], ["x", ""]], pa.large_list(pa.string())).slice(0)
    assert document_texts(arr).to_pylist() == ["a b c", None, "", "", "x "]
    assert document_texts(pa.array(["t"])).to_pylist() == ["t"]
