"""pylance 14.0.2's INVERTED build options: the ones we reproduce exactly, and clear refusals of the rest.

Reproduced (pylance answers from our index, ours from pylance's, same ``_score`` to 1e-5):
``custom_stop_words`` (matched against the stemmed token, as tantivy's filter chain runs),
any ``language`` once stemming and built-in stop words are off, and the build-only
``memory_limit`` / ``num_workers`` / ``block_size=128`` / ``format_version=2`` /
``analyzer="text"`` / ``document_granularity=ROW``. Refused with ``NotSupportedError`` naming the
option, before anything is written: other languages' stemmers and stop-word lists, ICU
tokenizers, the code analyzer, 256-document posting blocks, other format versions and
list-element documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.query import DocumentGranularity

import lance_format as lf
from lance_format.errors import InvalidInputError, LanceError, NotSupportedError

TEXTS = ["The running dogs run faster than the cats", "der Hund läuft schnell und die Katze schläft",
         "foo bar baz qux", "Running runs runner ran", "café crème brûlée for the foodies",
         "parseHTTPResponse getValue2D snake_case", "a b c d e f", "ein Hund und eine Katze"]
QUERIES = ["run", "running dogs", "hund katze", "foo", "the", "cafe", "der", "runner", "brulee foodies"]

REPRODUCED: list[dict[str, Any]] = [
    {"custom_stop_words": ["foo", "run", "hund"]},
    {"custom_stop_words": ["running", "the"], "stem": False},
    {"language": "German", "stem": False, "remove_stop_words": False},
    {"language": "French", "stem": False, "custom_stop_words": ["der", "und"]},
    {"memory_limit": 64, "num_workers": 1, "block_size": 128, "format_version": 2, "analyzer": "text"},
    {"format_version": "v2", "document_granularity": DocumentGranularity.ROW},
]


def _table(n: int = 800) -> pa.Table:
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(TEXTS), (n, 2))
    return pa.table({"id": pa.array(np.arange(n)),
                     "text": [f"{TEXTS[a]} {TEXTS[b]}" if i % 17 else None for i, (a, b) in enumerate(picks)]})


def _answers(ds: Any) -> list[tuple[list[int], np.ndarray]]:
    out = []
    for query in QUERIES:
        t = ds.to_table(full_text_query=query, columns=["id"])
        order = np.lexsort((t.column("id").to_numpy(), -t.column("_score").to_numpy()))
        out.append((t.column("id").to_numpy()[order].tolist(), t.column("_score").to_numpy()[order]))
    return out


def _same(uri: str) -> None:
    want, got = _answers(lance.dataset(uri)), _answers(lf.dataset(uri))
    assert any(ids for ids, _ in want)
    for query, (w_ids, w), (g_ids, g) in zip(QUERIES, want, got, strict=True):
        assert g_ids == w_ids, query
        np.testing.assert_allclose(g, w, rtol=1e-5)


@pytest.mark.parametrize("params", REPRODUCED, ids=lambda p: ",".join(p))
def test_pylance_answers_from_our_index_with_option(tmp_path: Path, params: dict[str, Any]) -> None:
    uri = str(tmp_path / "t.lance")
    lf.write_dataset(_table(), uri).create_scalar_index("text", "INVERTED", **params)
    _same(uri)


@pytest.mark.parametrize("params", REPRODUCED, ids=lambda p: ",".join(p))
def test_ours_answers_from_pylances_index_with_option(tmp_path: Path, params: dict[str, Any]) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(), uri).create_scalar_index("text", "INVERTED", **params)
    _same(uri)


def test_custom_stop_words_match_the_stemmed_token(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lf.write_dataset(_table(), uri).create_scalar_index("text", "INVERTED", custom_stop_words=["run"])
    for ds in (lance.dataset(uri), lf.dataset(uri)):
        # "running", "runs" and "run" all stem to the stop word; "runner" and "ran" do not.
        assert ds.to_table(full_text_query="running").num_rows == 0
        assert ds.to_table(full_text_query="runner").num_rows > 0


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"language": "French"}, "stem=True with language='French'"),
    ({"language": "German", "stem": False}, "remove_stop_words=True with language='German'"),
    ({"base_tokenizer": "icu"}, "base_tokenizer='icu'"),
    ({"base_tokenizer": "icu/split"}, "base_tokenizer='icu/split'"),
    ({"analyzer": "code"}, "analyzer='code'"),
    ({"block_size": 256}, "block_size=256"),
    ({"format_version": 3}, "format_version=3"),
    ({"format_version": "v1"}, "format_version='v1'"),
    ({"document_granularity": DocumentGranularity.LIST_ELEMENT}, "document_granularity=LIST_ELEMENT"),
]


@pytest.mark.parametrize(("params", "message"), REFUSED, ids=lambda p: str(p))
def test_options_we_cannot_reproduce_are_refused_naming_the_option(tmp_path: Path, params: dict[str, Any],
                                                                   message: str) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lf.write_dataset(_table(50), uri)
    version = ds.version
    with pytest.raises(NotSupportedError) as err:
        ds.create_scalar_index("text", "INVERTED", **params)
    assert message in str(err.value)
    assert lf.dataset(uri).version == version and not (tmp_path / "t.lance" / "_indices").exists()


@pytest.mark.parametrize("params", [{"language": "Klingon", "stem": False, "remove_stop_words": False},
                                    {"block_size": 64}, {"analyzer": "json"}, {"split_identifiers": True},
                                    {"memory_limit": 0}])
def test_values_pylance_refuses_too_are_invalid_input(tmp_path: Path, params: dict[str, Any]) -> None:
    ds = lf.write_dataset(_table(50), str(tmp_path / "t.lance"))
    with pytest.raises(InvalidInputError, match=next(iter(params))):
        ds.create_scalar_index("text", "INVERTED", **params)


def test_searching_a_pylance_index_we_cannot_reproduce_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(50), uri).create_scalar_index("text", "INVERTED", language="French")
    with pytest.raises(NotSupportedError, match="language='French'"):
        lf.dataset(uri).to_table(full_text_query="dogs")


def test_searching_a_pylance_code_analyzer_index_raises(tmp_path: Path) -> None:
    """pylance writes the code analyzer's index in format 3 (index version 3), which we do not read."""
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(50), uri).create_scalar_index("text", "INVERTED", analyzer="code")
    with pytest.raises(LanceError):
        lf.dataset(uri).to_table(full_text_query="dogs")
