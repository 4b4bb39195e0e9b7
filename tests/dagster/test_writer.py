"""The write plumbing without Dagster: commit_arrow and commit_fragments (files written elsewhere)."""

from pathlib import Path

import pyarrow as pa
import pytest
from dg_helpers import requires_table_layer

import lance_format
from lance_dagster.config import make_settings
from lance_dagster.lineage import RUN_ID
from lance_dagster.writer import commit_arrow, commit_fragments

pytestmark = requires_table_layer


def test_commit_fragments_is_one_commit_with_lineage(tmp_path: Path) -> None:
    settings = make_settings(str(tmp_path), None, "overwrite", None)
    uri = settings.uri_for("spark_out")
    table = pa.table({"k": pa.array(range(10), pa.int64()), "v": [float(i) for i in range(10)]})
    frags = lance_format.write_fragments(table, uri, mode="create", max_rows_per_file=4)
    first = commit_fragments(settings, uri, frags, mode="overwrite", schema=table.schema,
                             properties={RUN_ID: "r1"})
    assert (first.version, first.commit.operation, first.commit.rows_added) == (1, "Overwrite", 10)
    assert first.commit.fragments_added == 3
    more = lance_format.write_fragments(table.slice(0, 5), uri, mode="append")
    second = commit_fragments(settings, uri, more, mode="append", schema=table.schema,
                              properties={RUN_ID: "r2"}, commit_message="from executors")
    assert (second.version, second.commit.operation, second.commit.rows_added) == (2, "Append", 5)
    assert second.commit.read_version == 1
    assert second.commit.properties[RUN_ID] == "r2"
    assert second.dataset.count_rows() == 15
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).to_table().equals(lance_format.dataset(uri).to_table())


def test_commit_arrow_append_casts_to_table_types(tmp_path: Path) -> None:
    settings = make_settings(str(tmp_path), None, "overwrite", None)
    uri = settings.uri_for("vectors")
    typed = pa.table({"v": pa.array([[1.0, 2.0]], pa.list_(pa.float32(), 2))})
    commit_arrow(settings, uri, typed, mode="append", properties={})
    loose = pa.table({"v": pa.array([[3.0, 4.0]], pa.list_(pa.float32()))})  # as pandas hands it back
    result = commit_arrow(settings, uri, loose, mode="append", properties={})
    assert result.dataset.schema == typed.schema
    assert result.dataset.to_table().column("v").to_pylist() == [[1.0, 2.0], [3.0, 4.0]]
    # another element type is a type change, which strict refuses (issue 26 item 1) instead of casting
    wider = pa.table({"v": pa.array([[5.0, 6.0]], pa.list_(pa.float64()))})
    with pytest.raises(lance_format.errors.SchemaError, match="column 'v' has type list<item: double>"):
        commit_arrow(settings, uri, wider, mode="append", properties={})
    with pytest.raises(lance_format.errors.LanceError):
        commit_arrow(settings, uri, pa.table({"other": [1]}), mode="append", properties={})
    assert lance_format.dataset(uri).version == 2
