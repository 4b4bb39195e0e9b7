"""LanceResource: direct dataset access and single-commit writes from ops and assets."""

from pathlib import Path

import lance
import pandas as pd
import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    DagsterInstance,
    MaterializeResult,
    OpExecutionContext,
    asset,
    job,
    op,
)
from dg_helpers import materialization, meta, requires_table_layer

import lance_format
from lance_dagster import LanceResource, materialize_result
from lance_dagster.lineage import ASSET_KEY, RUN_ID

pytestmark = requires_table_layer


def test_write_open_and_history(lance_resource: LanceResource, root: str) -> None:
    assert not lance_resource.exists("people")
    first = lance_resource.write("people", pa.table({"id": [1, 2]}))
    second = lance_resource.write("people", pd.DataFrame({"id": [3]}), mode="append",
                                  properties={"source": "crm"})
    assert (first.version, second.version) == (1, 2)
    assert second.commit.operation == "Append"
    assert second.commit.rows_added == 1
    assert lance_resource.exists("people")
    assert lance_resource.uri("people") == f"{root}/people.lance"
    assert lance_resource.dataset("people").count_rows() == 3
    assert lance_resource.dataset("people", version=1).count_rows() == 2
    history = lance_resource.history("people")
    assert [h.version for h in history] == [2, 1]
    assert history[0].properties["source"] == "crm"
    with pytest.raises(ValueError, match="write mode"):
        lance_resource.write("people", pa.table({"id": [4]}), mode="upsert")
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_resource.dataset("nobody")


def test_asset_writes_through_resource(lance_resource: LanceResource, instance: DagsterInstance,
                                       root: str) -> None:
    from dagster import materialize

    @asset(code_version="2")
    def scores(context: AssetExecutionContext, lance: LanceResource) -> MaterializeResult:
        return materialize_result(lance.write("scores", pa.table({"s": [0.1, 0.2]}), context=context))

    result = materialize([scores], resources={"lance": lance_resource}, instance=instance)
    mat = materialization(result, "scores")
    assert meta(mat)["lance/version"] == "1"
    assert mat.tags["dagster/data_version"] == "1"
    props = lance_resource.history("scores")[0].properties
    assert props[RUN_ID] == result.run_id and props[ASSET_KEY] == "scores"


def test_op_reads_and_writes(lance_resource: LanceResource, instance: DagsterInstance) -> None:
    lance_resource.write(["raw", "numbers"], pa.table({"n": [1, 2, 3]}))

    @op
    def double(context: OpExecutionContext, lance: LanceResource) -> int:
        table = lance.dataset(["raw", "numbers"]).to_table()
        doubled = table.set_column(0, "n", pa.compute.multiply(table["n"], 2))
        return lance.write("raw/doubled", doubled, context=context).version

    @job(resource_defs={"lance": lance_resource})
    def doubling() -> None:
        double()

    result = doubling.execute_in_process(instance=instance)
    assert result.output_for_node("double") == 1
    assert lance_resource.dataset("raw/doubled").to_table().column("n").to_pylist() == [2, 4, 6]
    assert lance_resource.history("raw/doubled")[0].run_id == result.run_id


def test_partitioned_resource_write_replaces_only_its_partition(lance_resource: LanceResource,
                                                                instance: DagsterInstance) -> None:
    from dagster import StaticPartitionsDefinition, materialize

    @asset(partitions_def=StaticPartitionsDefinition(["a", "b"]))
    def by_key(context: AssetExecutionContext, lance: LanceResource) -> MaterializeResult:
        rows = pa.table({"k": [context.partition_key] * 2, "v": [1, 2]})
        return materialize_result(lance.write("by_key", rows, context=context, partition_expr="k"))

    @asset(name="by_key", partitions_def=StaticPartitionsDefinition(["a", "b"]))
    def careless(context: AssetExecutionContext, lance: LanceResource) -> MaterializeResult:
        return materialize_result(lance.write("by_key", pa.table({"k": ["a"], "v": [0]}), context=context))

    resources = {"lance": lance_resource}
    for key in ("a", "b", "a"):
        assert materialize([by_key], partition_key=key, resources=resources, instance=instance).success
    ds = lance_resource.dataset("by_key")
    assert ds.version == 3 and sorted(ds.to_table().column("k").to_pylist()) == ["a", "a", "b", "b"]
    failed = materialize([careless], partition_key="a", resources=resources, instance=instance, raise_on_error=False)
    assert not failed.success
    assert "refusing to overwrite the whole dataset" in str(failed.get_step_failure_events()[0].event_specific_data.error)
    assert lance_resource.dataset("by_key").version == 3


def _t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [float(i) for i in range(n)]})


def test_resource_write_and_dataset(tmp_path: Path) -> None:
    res = LanceResource(root_uri=str(tmp_path))
    res.write("events", _t(0, 3))
    res.write("events", _t(3, 2), mode="append")
    ds = res.dataset("events")
    assert ds.version == 2
    assert lance.dataset(ds.uri).to_table().equals(pa.concat_tables([_t(0, 3), _t(3, 2)]))
    assert res.dataset("events", version=1).to_table().equals(_t(0, 3))
