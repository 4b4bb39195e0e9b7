"""The IO manager on non-local roots: S3 (moto) with storage options; memory:// roots are refused."""

import uuid
from typing import Any

import pyarrow as pa
import pytest
from dagster import DagsterInstance, asset, materialize
from dg_helpers import materialization, meta, requires_table_layer

from lance_dagster import LanceIOManager, LanceResource
from lance_format.errors import InvalidInputError

pytestmark = requires_table_layer


@asset(metadata={"mode": "append"})
def ticks() -> pa.Table:
    return pa.table({"t": pa.array([1, 2, 3], pa.int32())})


@asset
def tick_total(ticks: pa.Table) -> pa.Table:
    return pa.table({"total": [pa.compute.sum(ticks["t"]).as_py()]})


def _twice(io: LanceIOManager, instance: DagsterInstance) -> Any:
    materialize([ticks, tick_total], resources={"io_manager": io}, instance=instance)
    return materialize([ticks, tick_total], resources={"io_manager": io}, instance=instance)


def test_memory_root_is_refused(instance: DagsterInstance) -> None:
    """Each open of a memory:// URI is an empty store (as in pylance): steps could not read each other's data."""
    root = f"memory://lake-{uuid.uuid4().hex}"
    with pytest.raises(Exception, match="io_manager") as info:
        _twice(LanceIOManager(root_uri=root), instance)
    assert isinstance(info.value.__cause__, InvalidInputError) and "memory://" in str(info.value.__cause__)


def test_s3_root_with_storage_options(s3_server: Any, s3_uri: str, instance: DagsterInstance) -> None:
    _endpoint, _bucket, options = s3_server
    io = LanceIOManager(root_uri=s3_uri, storage_options=options)
    result = _twice(io, instance)
    md = meta(materialization(result, "ticks"))
    assert md["dagster/uri"] == f"{s3_uri}/ticks.lance"
    assert (md["lance/version"], md["dagster/row_count"], md["lance/operation"]) == ("2", 6, "Append")
    resource = LanceResource(root_uri=s3_uri, storage_options=options)
    assert resource.dataset("tick_total").to_table().column("total").to_pylist() == [12]
    assert [h.run_id for h in resource.history("ticks")][0] == result.run_id
