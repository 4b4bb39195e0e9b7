"""The ``nearest`` read option: a vector search as a Spark DataFrame, equal to ``to_table(nearest=...)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import InvalidInputError

DIM = 16


def _dataset(path: Path, *, index: bool) -> tuple[str, np.ndarray]:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((3000, DIM)).astype(np.float32)
    table = pa.table({"id": pa.array(np.arange(3000)), "cat": pa.array([i % 5 for i in range(3000)]),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM)})
    uri = str(path / "vecs.lance")
    theirs = lance.write_dataset(table, uri, max_rows_per_file=1000)
    if index:
        theirs.create_index("vec", "IVF_PQ", num_partitions=8, num_sub_vectors=4)
    return uri, vecs


@pytest.mark.parametrize("index", [False, True])
def test_nearest_option_equals_to_table(spark: Any, tmp_path: Path, index: bool) -> None:
    uri, vecs = _dataset(tmp_path, index=index)
    q = vecs[11] + 0.01
    query = {"column": "vec", "q": q.tolist(), "k": 7, "nprobes": 8}
    df = spark.read.format("lance").option("columns", "id,cat").option("nearest", json.dumps(query)).load(uri)
    assert df.columns == ["id", "cat", "_distance"]
    assert df.schema["_distance"].dataType.simpleString() == "float"
    got = [(r.id, r.cat) for r in df.orderBy("_distance").collect()]
    want = lf.dataset(uri).to_table(columns=["id", "cat"], nearest={**query, "q": q})
    assert got == list(zip(want.column("id").to_pylist(), want.column("cat").to_pylist(), strict=True))
    assert got[0][0] == 11
    # pylance's neighbours: every row it ranks strictly inside its k-th distance (a tie at the cut may go either way)
    theirs = lance.dataset(uri).to_table(columns=["id"], nearest={**query, "q": q})
    dist = theirs.column("_distance").to_numpy()
    assert {i for i, d in zip(theirs.column("id").to_pylist(), dist, strict=True) if d < dist[-1] - 1e-5} \
        <= {i for i, _ in got}
    np.testing.assert_allclose(sorted(r._distance for r in df.collect()), np.sort(dist), rtol=1e-5, atol=1e-5)


def test_nearest_with_filter_and_prefilter(spark: Any, tmp_path: Path) -> None:
    uri, vecs = _dataset(tmp_path, index=True)
    query = {"column": "vec", "q": vecs[12].tolist(), "k": 5, "prefilter": True}
    df = (spark.read.format("lance").option("columns", "id,cat").option("filter", "cat = 2")
          .option("nearest", json.dumps(query)).load(uri))
    rows = df.collect()
    assert len(rows) == 5 and {r.cat for r in rows} == {2} and rows[0].id == 12
    want = lf.dataset(uri).to_table(columns=["id"], filter="cat = 2", prefilter=True,
                                    nearest={"column": "vec", "q": vecs[12], "k": 5})
    assert sorted(r.id for r in rows) == sorted(want.column("id").to_pylist())


def test_a_bad_nearest_option_fails_the_query_with_a_lance_error(spark: Any, tmp_path: Path) -> None:
    uri, _ = _dataset(tmp_path, index=False)
    with pytest.raises(Exception, match="nearest"):
        spark.read.format("lance").option("nearest", "{not json").load(uri).collect()
    with pytest.raises(InvalidInputError, match="'column' and 'q'"):
        lf.spark.options.ReadOptions.parse({"path": uri, "nearest": json.dumps({"k": 3})})
