"""LanceResource: direct dataset access and single-commit writes from ops and assets."""

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
        lance_resource.write("people", pa.table({"id": [4]}), mode="merge")
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
    assert meta(mat)["lance/version"] == 1
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
