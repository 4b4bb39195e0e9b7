"""Write modes (overwrite/append/merge/error/ignore) and schema modes (strict/merge/overwrite)."""

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dagster import AssetExecutionContext, DagsterInstance, Output, asset, materialize

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.lineage import RUN_ID

STATE: dict[str, Any] = {}


@asset(metadata={"mode": "merge", "merge_on": "id"})
def customers() -> pa.Table:
    return STATE["customers"]


def _run(assets: list[Any], io: LanceIOManager, instance: DagsterInstance, ok: bool = True) -> Any:
    result = materialize(assets, resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert result.success is ok, result.get_step_failure_events()
    return result


def _error(result: Any) -> str:
    return str(result.get_step_failure_events()[0].event_specific_data.error)


def _files(uri: str) -> list[str]:
    data = Path(uri) / "data"
    return sorted(p.name for p in data.iterdir()) if data.exists() else []


def _pylance_same(uri: str) -> None:
    lance = pytest.importorskip("lance")
    for version in range(1, lance_format.dataset(uri).version + 1):
        a = lance_format.dataset(uri, version=version).to_table()
        b = lance.dataset(uri, version=version).to_table()
        keys = [(n, "ascending") for n in a.schema.names]
        assert a.sort_by(keys).equals(b.sort_by(keys)), f"version {version}"


def test_merge_upserts_on_keys(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    STATE["customers"] = pa.table({"id": [1, 2, 3], "name": ["ann", "bob", "cid"]})
    _run([customers], io_manager, instance)
    STATE["customers"] = pa.table({"id": [2, 4], "name": ["BOB", "dan"]})
    result = _run([customers], io_manager, instance)
    uri = f"{root}/customers.lance"
    rows = sorted(lance_format.dataset(uri).to_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["name"]) for r in rows] == [(1, "ann"), (2, "BOB"), (3, "cid"), (4, "dan")]
    mat = result.get_asset_materialization_events()[0].materialization
    assert mat.metadata["lance/mode"].value == "merge"
    assert mat.metadata["lance/rows_deleted"].value == 1  # the old row of id 2
    # the merge commit carries the Dagster lineage like any other materialization
    props = lance_format.dataset(uri).read_transaction().transaction_properties
    assert props[RUN_ID] == result.run_id
    _pylance_same(uri)


def test_merge_can_delete_rows_absent_from_the_source(root: str, io_manager: LanceIOManager,
                                                      instance: DagsterInstance) -> None:
    @asset(name="customers", metadata={"mode": "merge", "merge_on": ["id"],
                                       "when_not_matched_by_source_delete": True, "when_matched_update": False})
    def mirror() -> pa.Table:
        return STATE["customers"]

    STATE["customers"] = pa.table({"id": [1, 2, 3], "name": ["ann", "bob", "cid"]})
    _run([mirror], io_manager, instance)
    STATE["customers"] = pa.table({"id": [2, 5], "name": ["BOB", "eve"]})
    _run([mirror], io_manager, instance)
    rows = sorted(lance_format.dataset(f"{root}/customers.lance").to_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["name"]) for r in rows] == [(2, "bob"), (5, "eve")]


def test_merge_keys_absent_from_the_data_write_nothing(root: str, io_manager: LanceIOManager,
                                                       instance: DagsterInstance) -> None:
    STATE["customers"] = pa.table({"id": [1], "name": ["ann"]})
    _run([customers], io_manager, instance)
    before = _files(f"{root}/customers.lance")
    STATE["customers"] = pa.table({"key": [1], "name": ["ann"]})
    result = _run([customers], io_manager, instance, ok=False)
    assert "merge_on column(s) ['id'] are not in the data's columns" in _error(result)
    assert lance_format.dataset(f"{root}/customers.lance").version == 1
    assert _files(f"{root}/customers.lance") == before


def test_error_and_ignore_when_the_table_exists(root: str, io_manager: LanceIOManager,
                                                instance: DagsterInstance) -> None:
    @asset(name="ref", metadata={"mode": "error"})
    def ref_error() -> pa.Table:
        return pa.table({"x": [1]})

    @asset(name="ref", metadata={"mode": "ignore"})
    def ref_ignore() -> pa.Table:
        return pa.table({"x": [2]})

    _run([ref_ignore], io_manager, instance)  # creates: nothing there yet
    assert "already has 1 rows" in _error(_run([ref_error], io_manager, instance, ok=False))
    kept = _run([ref_ignore], io_manager, instance)
    mat = kept.get_asset_materialization_events()[0].materialization
    assert mat.metadata["lance/skipped"].value is True and mat.tags["dagster/data_version"] == "1"
    assert lance_format.dataset(f"{root}/ref.lance").version == 1


def test_output_metadata_overrides_definition_mode(root: str, io_manager: LanceIOManager,
                                                   instance: DagsterInstance) -> None:
    @asset(name="events", metadata={"mode": "error"})
    def events() -> Output[pa.Table]:
        return Output(pa.table({"x": [1]}), metadata={"mode": "append"})

    _run([events], io_manager, instance)
    _run([events], io_manager, instance)
    assert lance_format.dataset(f"{root}/events.lance").count_rows() == 2


def test_unknown_modes_are_refused_before_writing(root: str, io_manager: LanceIOManager,
                                                  instance: DagsterInstance) -> None:
    @asset(name="bad", metadata={"schema_mode": "loose"})
    def bad_schema_mode() -> pa.Table:
        return pa.table({"x": [1]})

    @asset(name="bad", metadata={"mode": "append", "schema_mode": "overwrite"})
    def overwrite_schema_on_append() -> pa.Table:
        return pa.table({"x": [1]})

    assert "schema mode must be one of" in _error(_run([bad_schema_mode], io_manager, instance, ok=False))
    assert "needs write mode 'overwrite'" in _error(_run([overwrite_schema_on_append], io_manager, instance,
                                                         ok=False))
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(f"{root}/bad.lance")
    with pytest.raises(Exception, match="Input should be"):
        LanceIOManager(root_uri=root, write_mode="upsert")  # type: ignore[arg-type]


@asset(name="people", metadata={"mode": "append"})
def people(context: AssetExecutionContext) -> pa.Table:
    return STATE["people"]


def test_strict_schema_names_the_columns_and_writes_nothing(root: str, io_manager: LanceIOManager,
                                                            instance: DagsterInstance) -> None:
    STATE["people"] = pa.table({"id": [1], "name": ["ann"]})
    _run([people], io_manager, instance)
    before = _files(f"{root}/people.lance")
    STATE["people"] = pa.table({"id": [2], "email": ["b@x"]})
    message = _error(_run([people], io_manager, instance, ok=False))
    assert "new column(s) ['email'], missing column(s) ['name']" in message
    assert "schema_mode='merge'" in message
    assert lance_format.dataset(f"{root}/people.lance").version == 1
    assert _files(f"{root}/people.lance") == before
    STATE["people"] = pa.table({"name": ["cy"], "id": [3]})  # same columns, other order: fine
    _run([people], io_manager, instance)
    assert lance_format.dataset(f"{root}/people.lance").count_rows() == 2


def test_schema_merge_adds_columns_without_rewriting_old_rows(root: str, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=root, schema_mode="merge")
    STATE["people"] = pa.table({"id": [1], "name": ["ann"]})
    _run([people], io, instance)
    old_files = _files(f"{root}/people.lance")
    STATE["people"] = pa.table({"id": [2], "email": ["b@x"]})
    result = _run([people], io, instance)
    uri = f"{root}/people.lance"
    ds = lance_format.dataset(uri)
    assert ds.schema.names == ["id", "name", "email"]
    rows = sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "ann", "email": None}, {"id": 2, "name": None, "email": "b@x"}]
    assert set(old_files) <= set(_files(uri))  # the first data file is still there, unchanged
    assert lance_format.dataset(uri).read_transaction(ds.version).transaction_properties[RUN_ID] == result.run_id
    _pylance_same(uri)


def test_schema_overwrite_replaces_the_table(root: str, io_manager: LanceIOManager,
                                             instance: DagsterInstance) -> None:
    @asset(name="people", metadata={"schema_mode": "overwrite"})
    def reshaped() -> pa.Table:
        return pa.table({"person": ["ann"], "age": [30]})

    STATE["people"] = pa.table({"id": [1], "name": ["ann"]})
    _run([people], io_manager, instance)
    _run([reshaped], io_manager, instance)
    ds = lance_format.dataset(f"{root}/people.lance")
    assert ds.schema.names == ["person", "age"] and ds.count_rows() == 1
