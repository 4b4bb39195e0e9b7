"""LanceIOManager under real Dagster execution: modes, metadata, lineage, failures."""

from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    AssetKey,
    DagsterInstance,
    Output,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from dg_helpers import materialization, meta, requires_table_layer

import lance_format
from lance_dagster import LanceIOManager, version_history
from lance_dagster.lineage import ASSET_KEY, CODE_VERSION, PARTITION_KEY, RUN_ID

pytestmark = requires_table_layer


def _table(start: int, n: int = 3) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "name": [f"n{i}" for i in range(n)]})


@asset(code_version="v7")
def snapshot() -> pa.Table:
    return _table(0)


@asset(metadata={"mode": "append"})
def log() -> pa.Table:
    return _table(10, 2)


def _run(assets: list[Any], io: LanceIOManager, instance: DagsterInstance, **kw: Any) -> Any:
    result = materialize(assets, resources={"io_manager": io}, instance=instance, **kw)
    assert result.success
    return result


def test_overwrite_twice_makes_two_versions(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    first = _run([snapshot], io_manager, instance)
    second = _run([snapshot], io_manager, instance)
    ds = lance_format.dataset(f"{root}/snapshot.lance")
    assert ds.version == 2
    assert ds.count_rows() == 3
    assert ds.to_table().equals(_table(0))
    md = meta(materialization(second, "snapshot"))
    assert md["lance/version"] == "2"
    assert md["lance/read_version"] == "1"
    assert md["lance/operation"] == "Overwrite"
    assert md["lance/mode"] == "overwrite"
    assert md["dagster/row_count"] == 3
    assert md["lance/rows_added"] == 3
    runs = [r.run_id for r in version_history(ds)]
    assert runs == [second.run_id, first.run_id]


def test_append_mode_from_definition_metadata(root: str, io_manager: LanceIOManager,
                                              instance: DagsterInstance) -> None:
    _run([log], io_manager, instance)
    second = _run([log], io_manager, instance)
    ds = lance_format.dataset(f"{root}/log.lance")
    assert (ds.version, ds.count_rows()) == (2, 4)
    md = meta(materialization(second, "log"))
    assert md["lance/operation"] == "Append"
    assert md["lance/mode"] == "append"
    assert md["lance/rows_added"] == 2
    assert md["dagster/row_count"] == 4
    assert md["lance/fragment_count"] == 2
    assert [r.operation for r in version_history(ds)] == ["Append", "Overwrite"]


def test_output_metadata_overrides_mode(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    @asset(name="events", metadata={"mode": "overwrite"})
    def events_output() -> Output[pa.Table]:
        return Output(_table(0), metadata={"mode": "append"})

    @asset(name="events", metadata={"mode": "overwrite"})
    def events_context(context: AssetExecutionContext) -> pa.Table:
        context.add_output_metadata({"mode": "append"})
        return _table(5)

    _run([events_output], io_manager, instance)
    _run([events_output], io_manager, instance)
    _run([events_context], io_manager, instance)
    ds = lance_format.dataset(f"{root}/events.lance")
    assert (ds.version, ds.count_rows()) == (3, 9)


def test_default_mode_from_config(root: str, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=root, write_mode="append")
    _run([snapshot], io, instance)
    _run([snapshot], io, instance)
    assert lance_format.dataset(f"{root}/snapshot.lance").count_rows() == 6


def test_bad_mode_is_rejected_and_writes_nothing(root: str, io_manager: LanceIOManager,
                                                 instance: DagsterInstance) -> None:
    @asset(metadata={"mode": "upsert"})
    def weird() -> pa.Table:
        return _table(0)

    result = materialize([weird], resources={"io_manager": io_manager}, instance=instance,
                         raise_on_error=False)
    assert not result.success
    assert "write mode must be one of" in str(result.get_step_failure_events()[0].event_specific_data.error)
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(f"{root}/weird.lance")


def test_failing_asset_writes_no_version(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    should_fail = {"now": False}

    @asset(name="flaky", metadata={"mode": "append"})
    def flaky() -> pa.Table:
        if should_fail["now"]:
            raise RuntimeError("upstream API down")
        return _table(0)

    @asset(name="flaky")
    def flaky_bad_type() -> Any:
        return {"not": "a table"}

    @asset(name="flaky")
    def flaky_midstream() -> pa.RecordBatchReader:
        def batches() -> Any:
            yield _table(100).to_batches()[0]
            raise RuntimeError("source connection reset")

        return pa.RecordBatchReader.from_batches(_table(0).schema, batches())

    _run([flaky], io_manager, instance)
    assert not materialize([flaky_midstream], resources={"io_manager": io_manager}, instance=instance,
                           raise_on_error=False).success
    should_fail["now"] = True
    assert not materialize([flaky], resources={"io_manager": io_manager}, instance=instance,
                           raise_on_error=False).success
    assert not materialize([flaky_bad_type], resources={"io_manager": io_manager}, instance=instance,
                           raise_on_error=False).success
    ds = lance_format.dataset(f"{root}/flaky.lance")
    assert ds.version == 1 and ds.latest_version == 1
    assert len(ds.versions()) == 1


def test_metadata_keys_types_and_data_version(root: str, io_manager: LanceIOManager,
                                              instance: DagsterInstance) -> None:
    result = _run([snapshot], io_manager, instance)
    mat = materialization(result, "snapshot")
    md = mat.metadata
    for key in ("dagster/row_count", "lance/rows_added", "lance/fragment_count", "lance/bytes_written"):
        assert type(md[key]).__name__ == "IntMetadataValue", key
    for key in ("lance/version", "lance/read_version"):  # identifiers, not quantities to plot
        assert type(md[key]).__name__ == "TextMetadataValue", key
    assert md["dagster/uri"].value == f"{root}/snapshot.lance"
    assert md["dagster/table_name"].value == "snapshot"
    cols = md["dagster/column_schema"].value.columns
    assert [(c.name, c.type) for c in cols] == [("id", "int64"), ("name", "string")]
    assert md["lance/bytes_written"].value > 0
    assert md["lance/fragment_count"].value == 1
    history = md["lance/version_history"].value  # markdown, newest version first
    assert "| v1 |" in history and "Overwrite" in history and result.run_id[:8] in history
    assert mat.tags["dagster/data_version"] == "1"


def test_data_version_is_lance_version(io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    @asset
    def downstream(snapshot: pa.Table) -> pa.Table:
        return snapshot

    _run([snapshot], io_manager, instance)
    result = _run([snapshot, downstream], io_manager, instance)
    up = materialization(result, "snapshot")
    down = materialization(result, "downstream")
    assert up.tags["dagster/data_version"] == "2"
    assert up.tags["dagster/data_version_is_user_provided"] == "true"
    # Dagster's staleness check compares this provenance with the upstream's current data version.
    assert down.tags["dagster/input_data_version/snapshot"] == "2"
    assert down.tags["dagster/data_version"] == "1"
    latest = instance.get_latest_materialization_event(AssetKey("snapshot"))
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.tags["dagster/data_version"] == "2"


def test_transaction_properties_carry_lineage(root: str, io_manager: LanceIOManager,
                                              instance: DagsterInstance) -> None:
    @asset(key_prefix=["sales"], partitions_def=StaticPartitionsDefinition(["eu", "us"]), code_version="3",
           metadata={"mode": "append", "partition_expr": "region"})
    def orders(context: AssetExecutionContext) -> pa.Table:
        return _table(0).append_column("region", pa.array([context.partition_key] * 3))

    result = _run([orders], io_manager, instance, partition_key="us")
    ds = lance_format.dataset(f"{root}/sales/orders.lance")
    props = version_history(ds)[0].properties
    assert props[RUN_ID] == result.run_id
    assert props[ASSET_KEY] == "sales/orders"
    assert props[PARTITION_KEY] == "us"
    assert props[CODE_VERSION] == "3"
    unpartitioned = _run([snapshot], io_manager, instance)
    props = version_history(lance_format.dataset(f"{root}/snapshot.lance"))[0].properties
    assert props[RUN_ID] == unpartitioned.run_id and props[CODE_VERSION] == "v7"
    assert PARTITION_KEY not in props


def test_pandas_and_reader_round_trip(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    @asset
    def frame() -> pd.DataFrame:
        return pd.DataFrame({"x": [1.5, 2.5], "label": ["a", "b"]})

    @asset
    def streamed() -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(_table(0).schema, _table(0).to_batches(max_chunksize=1))

    @asset
    def both(frame: pa.Table, streamed: pa.RecordBatchReader) -> pd.DataFrame:
        assert isinstance(streamed, pa.RecordBatchReader)
        names = streamed.read_all().column("name").to_pylist()
        return frame.to_pandas().assign(names=",".join(names))

    _run([frame, streamed, both], io_manager, instance)
    out = lance_format.dataset(f"{root}/both.lance").to_table().to_pandas()
    assert out["x"].tolist() == [1.5, 2.5]
    assert out["names"].tolist() == ["n0,n1,n2"] * 2
    assert lance_format.dataset(f"{root}/streamed.lance").count_rows() == 3


def test_data_storage_version_config(root: str, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=root, data_storage_version="2.0")
    _run([snapshot], io, instance)
    assert lance_format.dataset(f"{root}/snapshot.lance").data_storage_version == "2.0"
    lance = pytest.importorskip("lance")
    assert lance.dataset(f"{root}/snapshot.lance").data_storage_version == "2.0"
