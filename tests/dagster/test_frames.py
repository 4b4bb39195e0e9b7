"""Frame types: polars DataFrame / LazyFrame, pyarrow RecordBatchReader, and LanceDataset inputs."""

import sys

import polars as pl
import pyarrow as pa
import pytest
from dagster import AssetIn, DagsterInstance, asset, materialize
from dg_helpers import materialization, meta

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.handlers import PolarsHandler
from lance_format.dataset import LanceDataset


@asset(metadata={"mode": "append"})
def points() -> pl.DataFrame:
    return pl.DataFrame({"k": [1, 2, 3], "label": ["x", "y", "z"], "w": [0.5, 1.5, 2.5]})


def test_polars_frames_round_trip(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    @asset
    def lazy_out(points: pl.LazyFrame) -> pl.LazyFrame:
        return points.filter(pl.col("k") > 1).select(["k", "label"])

    @asset
    def eager_in(lazy_out: pl.DataFrame) -> pl.DataFrame:
        return lazy_out.with_columns(pl.col("k") * 10)

    result = materialize([points, lazy_out, eager_in], resources={"io_manager": io_manager}, instance=instance)
    assert result.success
    assert lance_format.dataset(f"{root}/lazy_out.lance").to_table().to_pydict() == {"k": [2, 3],
                                                                                      "label": ["y", "z"]}
    assert lance_format.dataset(f"{root}/eager_in.lance").to_table().column("k").to_pylist() == [20, 30]
    # polars writes large strings; an append of pyarrow strings is cast to the table's type
    materialize([points], resources={"io_manager": io_manager}, instance=instance)
    assert lance_format.dataset(f"{root}/points.lance").count_rows() == 6


def test_lazy_frame_projection_reaches_the_scan(root: str, io_manager: LanceIOManager,
                                                instance: DagsterInstance) -> None:
    materialize([points], resources={"io_manager": io_manager}, instance=instance)
    source_uri = f"{root}/points.lance"
    from lance_dagster.reader import ArrowSource, ReadSpec

    source = ArrowSource(lance_format.dataset(source_uri), ReadSpec())
    asked: list[object] = []
    original = source.batches

    def spy(columns: object = None) -> object:
        asked.append(columns)
        return original(columns)  # type: ignore[arg-type]

    source.batches = spy  # type: ignore[method-assign]
    frame = PolarsHandler().from_arrow(source, pl.LazyFrame)
    assert frame.select("label").collect()["label"].to_list() == ["x", "y", "z"]
    assert asked == [["label"]]


def test_lance_dataset_input_is_pinned_to_the_version_read(root: str, io_manager: LanceIOManager,
                                                           instance: DagsterInstance) -> None:
    handles: list[LanceDataset] = []

    @asset(ins={"points": AssetIn(metadata={"version": 1})})
    def summary(points: LanceDataset) -> pa.Table:
        handles.append(points)
        return pa.table({"rows": [points.count_rows()]})

    resources = {"io_manager": io_manager}
    materialize([points], resources=resources, instance=instance)
    materialize([points], resources=resources, instance=instance)
    result = materialize([points, summary], selection=[summary], resources=resources, instance=instance)
    assert isinstance(handles[0], LanceDataset) and handles[0].version == 1
    assert lance_format.dataset(f"{root}/summary.lance").to_table().column("rows").to_pylist() == [3]
    assert meta(materialization(result, "summary"))["lance/input_version/points"] == "1"


def test_record_batch_reader_streams_in_and_out(root: str, io_manager: LanceIOManager,
                                                instance: DagsterInstance) -> None:
    @asset
    def streamed() -> pa.RecordBatchReader:
        table = pa.table({"n": list(range(10))})
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=3))

    @asset(ins={"streamed": AssetIn(metadata={"filter": "n >= 7"})})
    def tail(streamed: pa.RecordBatchReader) -> pa.RecordBatchReader:
        assert isinstance(streamed, pa.RecordBatchReader)
        return streamed

    assert materialize([streamed, tail], resources={"io_manager": io_manager}, instance=instance).success
    assert lance_format.dataset(f"{root}/tail.lance").to_table().column("n").to_pylist() == [7, 8, 9]


def test_frame_type_without_handler_is_refused_before_writing(root: str, io_manager: LanceIOManager,
                                                              instance: DagsterInstance) -> None:
    @asset
    def odd() -> set[int]:
        return {1, 2}

    result = materialize([odd], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False)
    assert not result.success
    error = result.get_step_failure_events()[0].event_specific_data.error
    while error.cause is not None:
        error = error.cause
    assert error.cls_name == "UnsupportedFrameTypeError"  # a lance_format LanceError
    # issue 26 item 8: the error names every type the IO manager stores
    assert ("asset 'odd': LanceIOManager cannot store a set; return one of pyarrow.Table, pyarrow.RecordBatchReader, "
            "pyarrow.RecordBatch, pandas.DataFrame, polars.DataFrame, polars.LazyFrame, pyspark.sql.DataFrame"
            ) in error.message
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(f"{root}/odd.lance")


def test_missing_polars_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = pl.DataFrame({"a": [1]})
    monkeypatch.setitem(sys.modules, "polars", None)  # makes `import polars` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'lance-dagster\[polars\]'"):
        PolarsHandler().to_arrow(frame)
