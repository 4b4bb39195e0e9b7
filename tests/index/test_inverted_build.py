"""INVERTED indices we build are pylance 14.0.2's format: pylance lists them, plans with them and scores alike."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance.query import MatchQuery as LMatch
from lance.query import PhraseQuery as LPhrase

import lance_format
from lance_format.errors import NotSupportedError, UnsupportedIndexTypeError
from lance_format.maintenance.runner import LocalRunner

pytestmark = pytest.mark.filterwarnings("ignore")
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "running", "runner", "runs", "cats",
         "cat", "café", "apple", "banana", "cherry", "data", "lance", "index", "search"]
QUERIES = ["quick fox", "lazy dog runs", "cafe", LMatch("cherry banana", "text")]


def _table(n: int, seed: int, start: int = 0) -> pa.Table:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) for _ in range(n)]
    texts[3] = None  # type: ignore[call-overload]
    return pa.table({"id": range(start, start + n), "text": pa.array(texts, pa.string())})


def _pair(tmp_path: Path, n: int = 2000) -> tuple[str, str]:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        lance.write_dataset(_table(n, 5), uri, max_rows_per_file=700)
    return ours, theirs


def _answers(uri: str, query: Any, **kw: Any) -> dict[int, float]:
    t = lance.dataset(uri).to_table(full_text_query=query, columns=["id"], **kw)
    return dict(zip(t["id"].to_pylist(), t["_score"].to_pylist(), strict=True))


def _same(a: dict[int, float], b: dict[int, float]) -> None:
    assert set(a) == set(b)
    for k, v in b.items():
        assert a[k] == pytest.approx(v, rel=1e-5)


@pytest.mark.parametrize("params", [
    {},
    {"with_position": True},
    {"base_tokenizer": "ngram"},
    {"base_tokenizer": "whitespace", "stem": False, "remove_stop_words": False, "lower_case": False},
    {"max_token_length": 6, "ascii_folding": False},
], ids=["default", "positions", "ngram", "whitespace", "short-tokens"])
def test_pylance_answers_on_our_index_as_on_its_own(tmp_path: Path, params: dict[str, Any]) -> None:
    ours, theirs = _pair(tmp_path)
    lance_format.dataset(ours).create_scalar_index("text", "INVERTED", runner=LocalRunner(), **params)
    lance.dataset(theirs).create_scalar_index("text", "INVERTED", **params)
    info = lance.dataset(ours).list_indices()[0]
    assert info["type"] == "Inverted" and info["fields"] == ["text"] and set(info["fragment_ids"]) == {0, 1, 2}
    plan = lance.dataset(ours).scanner(full_text_query="quick fox").explain_plan()
    assert "MatchQuery" in plan and "FlatMatchQuery" not in plan
    queries = QUERIES + ([LPhrase("quick fox", "text", slop=1)] if params.get("with_position") else [])
    for q in queries:
        _same(_answers(ours, q), _answers(theirs, q))
    # and we read our own index as pylance reads it
    mine = lance_format.dataset(ours).to_table(full_text_query="quick fox", columns=["id"])
    _same(dict(zip(mine["id"].to_pylist(), mine["_score"].to_pylist(), strict=True)), _answers(theirs, "quick fox"))


def test_index_details_and_params_are_pylance_bytes(tmp_path: Path) -> None:
    ours, theirs = _pair(tmp_path, 300)
    lance_format.dataset(ours).create_scalar_index("text", "INVERTED", with_position=True)
    lance.dataset(theirs).create_scalar_index("text", "INVERTED", with_position=True)
    a, b = (lance_format.dataset(u).manifest.indices[0] for u in (ours, theirs))
    assert a.index_details == b.index_details
    assert a.index_version == b.index_version
    assert sorted(f.path for f in a.files or ()) == sorted(f.path for f in b.files or ())


def test_unsupported_builds_are_refused(tmp_path: Path) -> None:
    ours, _ = _pair(tmp_path, 50)
    ds = lance_format.dataset(ours)
    with pytest.raises(NotSupportedError, match="jieba"):
        ds.create_scalar_index("text", "INVERTED", base_tokenizer="jieba/default")
    with pytest.raises(UnsupportedIndexTypeError, match="string column"):
        ds.create_scalar_index("id", "INVERTED")


def _compacted_pair(tmp_path: Path, delete: str | None) -> tuple[str, str, dict[int, float]]:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        lance.write_dataset(_table(1200, 7), uri, max_rows_per_file=150)
        lance.dataset(uri).create_scalar_index("text", "INVERTED", with_position=True)
        if delete:
            lance.dataset(uri).delete(delete)
    return ours, theirs, _answers(ours, "quick fox")


@pytest.mark.parametrize("defer", [False, True], ids=["immediate", "deferred"])
def test_compaction_keeps_pylance_answers_on_its_inverted_index(tmp_path: Path, defer: bool) -> None:
    ours, _, before = _compacted_pair(tmp_path, None)
    lance_format.dataset(ours).optimize.compact_files(target_rows_per_fragment=600, defer_index_remap=defer)
    ds = lance.dataset(ours)
    live = {f.fragment_id for f in ds.get_fragments()}
    text_idx = next(i for i in ds.list_indices() if i["name"] == "text_idx")
    assert live <= set(text_idx["fragment_ids"])
    assert "FlatMatchQuery" not in ds.scanner(full_text_query="quick fox").explain_plan()
    for q in ("quick fox", LPhrase("quick fox", "text")):
        want = before if q == "quick fox" else _answers(str(tmp_path / "theirs.lance"), q)
        _same(_answers(ours, q), want)
    mine = lance_format.dataset(ours).to_table(full_text_query="quick fox", columns=["id"])
    _same(dict(zip(mine["id"].to_pylist(), mine["_score"].to_pylist(), strict=True)), before)
    if defer:  # our optimize_indices folds the deferred remap: the index is rebuilt over the new fragments
        lance_format.dataset(ours).optimize.optimize_indices()
        _same(_answers(ours, "quick fox"), before)


def test_compaction_after_deletes_remaps_as_pylance_does(tmp_path: Path) -> None:
    ours, theirs, _ = _compacted_pair(tmp_path, "id % 7 = 1")
    lance_format.dataset(ours).optimize.compact_files(target_rows_per_fragment=600)
    lance.dataset(theirs).optimize.compact_files(target_rows_per_fragment=600)
    for q in QUERIES:
        _same(_answers(ours, q), _answers(theirs, q))


def test_optimize_after_append_adds_a_partition_as_pylance(tmp_path: Path) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    for uri in (ours, theirs):
        lance.write_dataset(_table(600, 9), uri, max_rows_per_file=300)
        lance.dataset(uri).create_scalar_index("text", "INVERTED", with_position=True)
        lance.write_dataset(_table(200, 10, start=600), uri, mode="append")
    lance_format.dataset(ours).optimize.optimize_indices()
    lance.dataset(theirs).optimize.optimize_indices()
    mine = lance_format.dataset(ours).manifest.indices
    assert len(mine) == 1 and mine[0].fragment_bitmap == {0, 1, 2}
    assert sorted(f.path for f in mine[0].files or ()) == sorted(
        f.path for f in lance_format.dataset(theirs).manifest.indices[0].files or ())
    assert "FlatMatchQuery" not in lance.dataset(ours).scanner(full_text_query="quick fox").explain_plan()
    for q in [*QUERIES, LPhrase("quick fox", "text")]:
        _same(_answers(ours, q), _answers(theirs, q))


def test_stable_row_ids_both_directions(tmp_path: Path) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    extra = _table(100, 12, start=900)
    for uri in (ours, theirs):
        lance.write_dataset(_table(900, 11), uri, max_rows_per_file=300, enable_stable_row_ids=True)
        lance.dataset(uri).delete("id < 10")
    lance_format.dataset(ours).create_scalar_index("text", "INVERTED")
    lance.dataset(theirs).create_scalar_index("text", "INVERTED")
    for uri in (ours, theirs):
        lance.write_dataset(extra, uri, mode="append")
    want = _answers(theirs, "quick fox")
    _same(_answers(ours, "quick fox"), want)
    for uri in (ours, theirs):
        t = lance_format.dataset(uri).to_table(full_text_query="quick fox", columns=["id"])
        _same(dict(zip(t["id"].to_pylist(), t["_score"].to_pylist(), strict=True)), want)
