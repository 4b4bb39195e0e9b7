"""``contains_tokens(column, 'words')`` filters as pylance 14.0.2 answers them.

Flat: case-sensitive tokens split at non-alphanumeric characters, every query token present,
NULL text gives NULL, a query without tokens keeps every non-NULL row. With an INVERTED index
whose analyzer suits it (simple tokenizer, no max_token_length, English, no stemming) the index
gives the candidates (and ``explain_plan`` says so): a query with no index token left keeps no
row of the indexed fragments. Compared with pylance on its datasets and indices and on ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import DocumentGranularity

import lance_format
from lance_format.errors import InvalidInputError, NotSupportedError

TEXTS: list[str | None] = [
    "Hello World", "hello there world", "Running dogs", "the cat", "foo-bar baz", None, "HELLO", "héllo wörld",
    "runs and running", "x 12 y_z", "a cat catch a fish", "cat catchup fish", "The end.", "", "--", "naïve résumé",
    # non-ASCII neighbours: a letter joins the token, a symbol or space splits it
    "éw17 x", "w17é", "w17·x", "日本語 テスト", "a１b", "Ωmega cat", "x²", "cat—fish", "привет мир cat",
]
APPENDED = ["hello you", "the end", "--", None, "cat fish catch"]

QUERIES = [
    "hello", "Hello world", "world hello", "HELLO", "the", "the cat", "The", "", "--", "héllo", "hello world",
    "running", "run", "cat catch fish", "foo bar", "12", "y", "naïve", "resume", "a", "end",
    "w17", "x", "テスト", "日本語", "a１b", "b", "mega", "x²", "fish", "мир cat",
]

SUITABLE: dict[str, Any] = {"max_token_length": None, "stem": False}
INDEX_PARAMS: list[dict[str, Any]] = [
    {},  # pylance's defaults stem and cap token length: never used for contains_tokens
    SUITABLE,
    {**SUITABLE, "remove_stop_words": False},
    {**SUITABLE, "lower_case": False, "ascii_folding": False},
    {**SUITABLE, "with_position": True},
    {"max_token_length": None, "stem": True},
    {"stem": False},  # max_token_length=40 (the default) makes it unsuitable too
]


def _table(n_random: int = 2000) -> pa.Table:
    rng = np.random.default_rng(3)
    words = np.array(["cat", "Cat", "fish", "the", "a", "catch", "dog", "Dogs", "run", "running", "x1", "é"],
                     dtype=object)
    random = [" ".join(rng.choice(words, 4)) for _ in range(n_random)]
    texts = TEXTS + random
    return pa.table({"id": pa.array(np.arange(len(texts)), pa.int64()), "t": pa.array(texts, pa.string())})


def _ids(ds: Any, flt: str) -> list[int]:
    return sorted(ds.to_table(filter=flt, columns=["id"]).column("id").to_pylist())


def _uses_index(ds: Any, flt: str) -> bool:
    return "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan()


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> tuple[lance.LanceDataset, Any]:
    uri = str(tmp_path_factory.mktemp("ct") / "flat.lance")
    lance.write_dataset(_table(), uri, max_rows_per_file=700)
    return lance.dataset(uri), lance_format.dataset(uri)


def _indexed(uri: str, params: dict[str, Any], *, ours_build: bool) -> tuple[lance.LanceDataset, Any]:
    """Index, delete a row, append unindexed rows: pylance's and our handle on the result."""
    lance.write_dataset(_table(), uri, max_rows_per_file=700)
    if ours_build:
        lance_format.dataset(uri).create_scalar_index("t", "INVERTED", **params)
    else:
        lance.dataset(uri).create_scalar_index("t", "INVERTED", **params)
    lance.dataset(uri).delete("id = 1 OR id = 10")
    extra = pa.table({"id": pa.array(np.arange(len(APPENDED)) + 10_000, pa.int64()), "t": pa.array(APPENDED)})
    lance.write_dataset(extra, uri, mode="append")
    return lance.dataset(uri), lance_format.dataset(uri)


@pytest.mark.parametrize("query", QUERIES)
def test_flat_contains_tokens_keeps_the_rows_pylance_keeps(flat: tuple[Any, Any], query: str) -> None:
    theirs, ours = flat
    flt = f"contains_tokens(t, '{query}')"
    assert _ids(ours, flt) == _ids(theirs, flt)
    assert not _uses_index(ours, flt)


@pytest.mark.parametrize("flt", [
    "NOT contains_tokens(t, 'hello')", "contains_tokens(t, 'hello') IS NULL", "contains_tokens(t, 'cat') = false",
    "contains_tokens(t, NULL)", "contains_tokens(t, 12)", "contains_tokens(t, 'cat') AND id < 100",
    "contains_tokens(t, 'x1') OR id = 3", "contains_tokens(T, 'fish')", "NOT contains_tokens(t, '')",
])
def test_flat_contains_tokens_follows_null_and_logic_rules(flat: tuple[Any, Any], flt: str) -> None:
    theirs, ours = flat
    if flt == "contains_tokens(T, 'fish')":  # pylance is case-sensitive about names here; we resolve them
        assert _ids(ours, flt) == _ids(theirs, "contains_tokens(t, 'fish')")
        return
    assert _ids(ours, flt) == _ids(theirs, flt)


def test_contains_tokens_on_a_number_column_compares_its_text(make_path: Callable[[str], str]) -> None:
    uri = make_path("num")
    lance.write_dataset(pa.table({"id": [0, 1, 2], "n": [1, 12, 21]}), uri)
    for flt in ["contains_tokens(n, '1')", "contains_tokens(n, '12')"]:
        assert _ids(lance_format.dataset(uri), flt) == _ids(lance.dataset(uri), flt)


@pytest.mark.parametrize("flt", ["contains_tokens(t)", "contains_tokens(t, 'a', 'b')", "contains_tokens(t, t)"])
def test_contains_tokens_refuses_bad_arguments(flat: tuple[Any, Any], flt: str) -> None:
    # pylance refuses the arity errors; with a column as query it uses the first row's text for
    # every row, which we refuse rather than imitate
    with pytest.raises(InvalidInputError, match="contains_tokens"):
        flat[1].to_table(filter=flt)


@pytest.mark.parametrize("ours_build", [False, True], ids=["pylance_index", "our_index"])
@pytest.mark.parametrize("params", INDEX_PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "defaults")
def test_indexed_contains_tokens_matches_pylance_rows_and_plan(make_path: Callable[[str], str],
                                                               params: dict[str, Any], ours_build: bool) -> None:
    theirs, ours = _indexed(make_path("idx"), params, ours_build=ours_build)
    for query in QUERIES:
        flt = f"contains_tokens(t, '{query}')"
        assert _ids(ours, flt) == _ids(theirs, flt), flt
        assert _uses_index(ours, flt) == _uses_index(theirs, flt), flt
    for flt in ["contains_tokens(t, 'cat') AND id > 5", "contains_tokens(t, 'cat') OR contains_tokens(t, 'end')",
                "NOT contains_tokens(t, 'the')", "NOT contains_tokens(t, '')"]:
        assert _ids(ours, flt) == _ids(theirs, flt), flt


def test_suitable_index_names_itself_in_the_plan(make_path: Callable[[str], str]) -> None:
    theirs, ours = _indexed(make_path("plan"), SUITABLE, ours_build=False)
    plan = ours.scanner(filter="contains_tokens(t, 'hello')").explain_plan()
    assert 'ScalarIndexQuery: query=[contains_tokens(t, Utf8("hello"))]@t_idx(Inverted)' in plan
    assert "unindexed_fragments_scanned=1" in plan


def test_stop_word_query_keeps_no_indexed_row(make_path: Callable[[str], str]) -> None:
    # 'the' is a stop word of the index: no index token, so only the appended (flat) rows can match
    theirs, ours = _indexed(make_path("stop"), SUITABLE, ours_build=True)
    got = _ids(ours, "contains_tokens(t, 'the')")
    assert got == _ids(theirs, "contains_tokens(t, 'the')")
    assert got and all(i >= 10_000 for i in got)


# -- INVERTED segments we cannot read (index version 3) ----------------------------------------------

@pytest.mark.parametrize(("column", "params", "option"), [
    ("t", {"analyzer": "code"}, "analyzer='code'"),
    ("t", {"block_size": 256}, "block_size=256"),
    ("l", {"document_granularity": "LIST_ELEMENT"}, "document_granularity=LIST_ELEMENT"),
])
def test_full_text_on_an_unreadable_inverted_index_names_its_option(make_path: Callable[[str], str], column: str,
                                                                    params: dict[str, Any], option: str) -> None:
    uri = make_path("v3")
    lance.write_dataset(pa.table({"t": ["cat fish", "dog"], "l": [["cat fish"], ["dog"]]}), uri)
    if "document_granularity" in params:
        params = {"document_granularity": DocumentGranularity.LIST_ELEMENT}
    lance.dataset(uri).create_scalar_index(column, "INVERTED", **params)
    ours = lance_format.dataset(uri)
    with pytest.raises(NotSupportedError, match="exists but uses " + option.replace("(", r"\(")):
        ours.to_table(full_text_query="cat")
    with pytest.raises(NotSupportedError, match=f"column '{column}'.*exists but uses"):
        ours.to_table(full_text_query={"match": {"column": column, "terms": "cat"}})


LIST_QUERIES = ["null", "a", "", "y z", "x y", "the", "cat fish", "q"]


@pytest.mark.parametrize("indexed", [False, True], ids=["flat", "inverted_on_list"])
def test_list_columns_count_their_items_text(make_path: Callable[[str], str], indexed: bool) -> None:
    # DataFusion casts a list to Utf8 ("[a, b]"): items' tokens, NULL items add none, NULL lists give NULL;
    # pylance never hands a list column's INVERTED index a contains_tokens
    uri = make_path("lists")
    items = [["a", None], [], None, ["x y", "z"], [None], ["the cat", "fish"]]
    lance.write_dataset(pa.table({"id": np.arange(6), "l": pa.array(items, pa.list_(pa.string())),
                                  "ll": pa.array([*items[:5], ["q"]], pa.large_list(pa.large_string()))}), uri)
    if indexed:
        lance.dataset(uri).create_scalar_index("l", "INVERTED", **SUITABLE)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for col in ("l", "ll"):
        for query in LIST_QUERIES:
            flt = f"contains_tokens({col}, '{query}')"
            assert _ids(ours, flt) == _ids(theirs, flt), flt
            assert not _uses_index(ours, flt)


def test_large_string_column_is_filtered_flat_even_with_an_index(make_path: Callable[[str], str]) -> None:
    uri = make_path("large")
    texts = pa.array(["the cat", "a dog", None, "the end", "cat fish"], pa.large_string())
    lance.write_dataset(pa.table({"id": np.arange(5), "t": texts}), uri)
    lance.dataset(uri).create_scalar_index("t", "INVERTED", **SUITABLE)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for query in ("the", "cat", "", "dog the"):
        flt = f"contains_tokens(t, '{query}')"
        assert _ids(ours, flt) == _ids(theirs, flt), flt
        assert _uses_index(ours, flt) == _uses_index(theirs, flt) is False


@pytest.mark.parametrize(("stable", "defer"), [(False, False), (False, True), (True, False)],
                         ids=["remapped", "deferred_remap", "stable_row_ids"])  # stable ids have nothing to remap
def test_indexed_contains_tokens_survives_our_compaction(make_path: Callable[[str], str], stable: bool,
                                                         defer: bool) -> None:
    uri = make_path("compact")
    lance.write_dataset(_table(1500), uri, max_rows_per_file=400, enable_stable_row_ids=stable)
    lance.dataset(uri).create_scalar_index("t", "INVERTED", **SUITABLE)
    lance.dataset(uri).delete("id % 7 = 0")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000, defer_index_remap=defer)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for query in ("cat fish", "the", "Cat", "x1 dog", "é"):
        flt = f"contains_tokens(t, '{query}')"
        assert _ids(ours, flt) == _ids(theirs, flt), flt
        assert _uses_index(ours, flt) == _uses_index(theirs, flt), flt
