"""Op outputs live at a stable dataset path (issue 26 item 4): ``<root>/<op>/<output>.lance``, or the
output's ``metadata={"table": ...}`` under its ``key_prefix``, so append, merge and ignore act across runs
(as dagster-deltalake and dagster-iceberg store one table per output)."""

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import DagsterInstance, In, Out, graph, job, op

import lance_format
from lance_dagster import LanceIOManager, version_history

SEEN: list[int] = []
COUNTER = {"n": 0}


def _rows() -> pa.Table:
    COUNTER["n"] += 1
    start = COUNTER["n"] * 10
    return pa.table({"id": pa.array(range(start, start + 3), pa.int64())})


@op(out=Out(metadata={"mode": "append"}))
def produce() -> pa.Table:
    return _rows()


@op(ins={"rows": In()})
def consume(rows: pa.Table) -> None:
    SEEN.append(rows.num_rows)


@op(out=Out(metadata={"table": "shared/events", "key_prefix": ["team_a"], "mode": "merge", "merge_on": "id"}))
def upsert() -> pa.Table:
    return pa.table({"id": [1, 2], "v": [f"run{COUNTER['n']}"] * 2})


@op(out=Out(metadata={"mode": "ignore"}))
def once() -> pa.Table:
    return _rows()


@graph
def nested() -> None:
    consume(produce())


def _execute(job_def: Any, instance: DagsterInstance) -> Any:
    result = job_def.execute_in_process(instance=instance)
    assert result.success
    return result


def test_append_op_output_accumulates_across_runs_in_one_dataset(root: str, instance: DagsterInstance) -> None:
    @job(resource_defs={"io_manager": LanceIOManager(root_uri=root)})
    def pipeline() -> None:
        consume(produce())

    SEEN.clear()
    first = _execute(pipeline, instance)
    second = _execute(pipeline, instance)
    uri = f"{root}/produce/result.lance"
    ds = lance_format.dataset(uri)
    assert ds.count_rows() == 6 and ds.version == 2
    assert [r.run_id for r in version_history(ds)] == [second.run_id, first.run_id]
    assert SEEN == [3, 6]  # the consumer reads the one table, not a run-scoped copy
    assert not any(p.name in (first.run_id, second.run_id) for p in Path(root).iterdir())
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).count_rows() == 6


def test_table_and_key_prefix_metadata_name_the_dataset(root: str, instance: DagsterInstance) -> None:
    @job(resource_defs={"io_manager": LanceIOManager(root_uri=root)})
    def upserts() -> None:
        consume(upsert())

    _execute(upserts, instance)
    COUNTER["n"] += 1
    _execute(upserts, instance)
    ds = lance_format.dataset(f"{root}/team_a/shared/events.lance")
    assert ds.version == 2
    assert sorted(ds.to_table().column("v").to_pylist()) == [f"run{COUNTER['n']}"] * 2  # merged, not doubled


def test_ignore_mode_skips_the_second_run(root: str, instance: DagsterInstance) -> None:
    @job(resource_defs={"io_manager": LanceIOManager(root_uri=root)})
    def seed() -> None:
        consume(once())

    _execute(seed, instance)
    result = _execute(seed, instance)
    assert lance_format.dataset(f"{root}/once/result.lance").version == 1
    outputs = [e for e in result.all_events if e.event_type_value == "HANDLED_OUTPUT"]
    assert outputs and outputs[0].event_specific_data.metadata["lance/skipped"].value is True


def test_ops_inside_graphs_use_their_node_path(root: str, instance: DagsterInstance) -> None:
    @job(resource_defs={"io_manager": LanceIOManager(root_uri=root)})
    def wrapped() -> None:
        nested()

    SEEN.clear()
    _execute(wrapped, instance)
    _execute(wrapped, instance)
    assert lance_format.dataset(f"{root}/nested/produce/result.lance").count_rows() == 6
    assert SEEN == [3, 6]
