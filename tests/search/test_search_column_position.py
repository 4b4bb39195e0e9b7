"""``_distance`` / ``_score`` named in ``columns=`` come back where they were named, as pylance 14.0.2 returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

RNG = np.random.default_rng(3)
VECS = RNG.random((200, 8), dtype=np.float32)
WORDS = ["apple pie", "banana split", "apple tart", "cherry pie", "plum"]


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("placement") / "t.lance")
    tbl = pa.table({"id": np.arange(200), "text": [WORDS[i % 5] for i in range(200)],
                    "vec": pa.FixedSizeListArray.from_arrays(pa.array(VECS.ravel()), 8)})
    lance.write_dataset(tbl, path)
    lance.dataset(path).create_scalar_index("text", "INVERTED")
    return path


def _both(uri: str, **kwargs: Any) -> tuple[pa.Table, pa.Table]:
    return lance_format.dataset(uri).to_table(**kwargs), lance.dataset(uri).to_table(**kwargs)


@pytest.mark.parametrize("columns", [["_distance", "id"], ["id", "_distance", "text"], ["id", "_distance"],
                                     ["id"], ["_distance"]])
def test_distance_goes_where_columns_names_it(uri: str, columns: list[str]) -> None:
    ours, theirs = _both(uri, nearest={"column": "vec", "q": VECS[5], "k": 5}, columns=columns)
    assert ours.schema.names == theirs.schema.names
    assert np.allclose(ours.column("_distance").to_numpy(), theirs.column("_distance").to_numpy())


def test_distance_before_the_row_id_when_named(uri: str) -> None:
    ours, theirs = _both(uri, nearest={"column": "vec", "q": VECS[5], "k": 5}, columns=["_distance", "id"],
                         with_row_id=True)
    assert ours.schema.names == theirs.schema.names


@pytest.mark.parametrize("columns", [["_score", "id"], ["id", "_score", "text"], ["id", "_score"], ["id"]])
def test_score_goes_where_columns_names_it(uri: str, columns: list[str]) -> None:
    ours, theirs = _both(uri, full_text_query="apple", columns=columns)
    assert ours.schema.names == theirs.schema.names
    assert sorted(ours.column("id").to_pylist()) == sorted(theirs.column("id").to_pylist())
    if "_score" in columns:
        assert np.allclose(sorted(ours.column("_score").to_pylist()), sorted(theirs.column("_score").to_pylist()))


def test_scanner_schema_follows_the_same_order(tmp_path: Path, uri: str) -> None:
    sc = lance_format.dataset(uri).scanner(full_text_query="pie", columns=["_score", "id"])
    assert sc.to_table().schema.names == ["_score", "id"]
    assert [b.schema.names for b in sc.to_batches()][0] == ["_score", "id"]
