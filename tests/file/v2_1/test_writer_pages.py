"""How the 2.1/2.2 writer cuts and encodes pages: big batches, the encode pool, checked with pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from lance_format import write_dataset
from lance_format.errors import LanceError
from lance_format.file import LanceFileWriter
from lance_format.file.v2_1.pagequeue import PageQueue

VERSIONS = ["2.1", "2.2"]


def _edge_table(n: int) -> pa.Table:
    """Nulls, empty strings, all-null columns, huge strings and fixed-size lists with nulls."""
    rng = np.random.default_rng(7)
    idx = np.arange(n)
    words = [f"w{i % 97}" * (1 + i % 5) for i in range(n)]
    strs = pa.array([None if i % 11 == 4 else "" if i % 7 == 1 else w for i, w in enumerate(words)])
    huge = pa.array([("h" * 5000 + str(i)) if i % 500 == 3 else None if i % 13 == 0 else f"s{i}" for i in range(n)])
    items = rng.random(n * 4, dtype=np.float32)
    item_mask = (np.arange(n * 4) % 17) == 5
    fsl_items = pa.array(items, mask=item_mask)
    fsl = pa.FixedSizeListArray.from_arrays(fsl_items, 4, mask=pa.array(idx % 19 == 2))
    text = pa.array(["".join(chr(97 + int(c)) for c in rng.integers(0, 26, 20)) for _ in range(n)])
    return pa.table(
        {
            "id": pa.array(idx.astype(np.int64)),
            "i32_nulls": pa.array(rng.integers(0, 1000, n).astype(np.int32), mask=idx % 5 == 0),
            "f64": pa.array(rng.standard_normal(n)),
            "strs": strs,
            "huge": huge,
            "all_null": pa.nulls(n, pa.string()),
            "all_null_i64": pa.nulls(n, pa.int64()),
            "empty_strs": pa.array([""] * n),
            "category": pa.array([f"cat_{i % 7}" for i in range(n)]),
            "text": text,
            "fsl": fsl,
        }
    )


def _write(path: str, table: pa.Table, version: str, page_bytes: int, batch_rows: int | None = None) -> None:
    with LanceFileWriter(path, table.schema, version=version, max_page_bytes=page_bytes) as w:
        for b in table.to_batches(max_chunksize=batch_rows) if batch_rows else [table]:
            w.write_batch(b)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_big_batch_is_cut_into_pages_pylance_reads(tmp_path: Path, version: str) -> None:
    table = _edge_table(12000)
    path = str(tmp_path / "big.lance")
    _write(path, table, version, page_bytes=32 * 1024)
    reader = lf.LanceFileReader(path)
    assert reader.read_all().to_table().equals(table)
    # the batch was split: the text column (~250 KiB) needs several 32 KiB pages
    text_col = reader.metadata().columns[table.schema.get_field_index("text")]
    assert len(text_col.pages) >= 4


@pytest.mark.parametrize("version", VERSIONS)
def test_batch_size_does_not_change_rows(tmp_path: Path, version: str) -> None:
    table = _edge_table(5000)
    for rows in (1, 333, 4096):
        path = str(tmp_path / f"b{rows}.lance")
        _write(path, table.slice(0, 2000) if rows == 1 else table, version, 16 * 1024, rows)
        expect = table.slice(0, 2000) if rows == 1 else table
        assert lf.LanceFileReader(path).read_all().to_table().equals(expect)


def test_pool_and_inline_encoding_write_identical_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _edge_table(6000)
    sizes = {}
    for threads in ("1", "3"):
        monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", threads)
        path = tmp_path / f"t{threads}.lance"
        _write(str(path), table, "2.2", 16 * 1024, 700)
        sizes[threads] = path.read_bytes()
    assert sizes["1"] == sizes["3"]


def _string_page_encodings(uri: str) -> list[str]:
    files = lance.dataset(uri).get_fragments()[0].data_files()
    reader = lf.LanceFileReader(f"{uri}/data/{files[0].path}")
    return [str(col.pages[0].encoding) for col in reader.metadata().columns]


def test_compressed_strings_read_by_pylance(tmp_path: Path) -> None:
    # enough string bytes, and repetitive enough, for the writer to compress the chunks (zstd)
    rng = np.random.default_rng(3)
    n = 20000
    vocab = [f"word{i}" for i in range(300)]
    text = pa.array([" ".join(vocab[int(j)] for j in rng.integers(0, 300, int(k))) for k in rng.integers(0, 8, n)])
    table = pa.table({"text": text, "large": text.cast(pa.large_string())})
    uri = str(tmp_path / "ds")
    write_dataset(table, uri, data_storage_version="2.2")
    got = lance.dataset(uri).to_table()
    assert got.equals(table)
    raw = sum(len(s) for s in text.to_pylist())
    files = list((tmp_path / "ds" / "data").iterdir())
    assert sum(f.stat().st_size for f in files) < raw  # two columns, each compressed below half the raw size
    assert all("General" in enc for enc in _string_page_encodings(uri))


def test_strings_zstd_barely_shrinks_are_written_plain_for_pylance(tmp_path: Path) -> None:
    # random letters with 32-bit offsets: zstd saves only about a third, not worth inflating whole
    # chunks per row read; with 64-bit offsets (mostly zero bytes) it saves half and is kept
    rng = np.random.default_rng(4)
    n = 20000
    text = pa.array(["".join(chr(97 + int(c)) for c in rng.integers(0, 26, int(k))) for k in rng.integers(15, 26, n)])
    table = pa.table({"text": text, "large": text.cast(pa.large_string())})
    uri = str(tmp_path / "ds")
    write_dataset(table, uri, data_storage_version="2.2")
    assert lance.dataset(uri).to_table().equals(table)
    assert lance.dataset(uri).take([0, 777, 19999]).equals(table.take([0, 777, 19999]))
    plain, large = _string_page_encodings(uri)
    assert "General" not in plain and "General" in large


def test_encode_error_on_pool_leaves_no_file(tmp_path: Path) -> None:
    packed = pa.field(
        "p", pa.struct([pa.field("a", pa.int32()), pa.field("flag", pa.bool_())]), metadata={"packed": "true"}
    )
    n = 3000
    table = pa.table(
        {
            "x": pa.array(np.arange(n, dtype=np.int64)),
            "p": pa.StructArray.from_arrays(
                [pa.array(np.arange(n, dtype=np.int32)), pa.array(np.arange(n) % 2 == 0)], fields=list(packed.type)
            ),
        },
        schema=pa.schema([pa.field("x", pa.int64()), packed]),
    )
    uri = tmp_path / "bad"
    with pytest.raises(LanceError, match="whole bytes"):
        write_dataset(table, str(uri), data_storage_version="2.2")
    data = uri / "data"
    assert not data.exists() or not list(data.iterdir())


def test_page_queue_returns_results_in_submission_order() -> None:
    import threading
    import time

    gate = threading.Event()

    def slow() -> int:
        gate.wait(5)
        return 1

    def fast() -> int:
        time.sleep(0)
        return 2

    q: PageQueue[str, int] = PageQueue(threads=2, max_in_flight=8)
    assert q.put("a", slow) == []
    done = q.put("b", fast)
    assert done == []  # "b" may be finished, but "a" comes first
    gate.set()
    assert q.drain() == [("a", 1), ("b", 2)]


def test_page_queue_reports_a_failed_job_and_drops_the_rest() -> None:
    def boom() -> int:
        raise ValueError("bad page")

    q: PageQueue[str, int] = PageQueue(threads=2, max_in_flight=8)
    q.put("a", boom)
    q.put("b", lambda: 2)
    with pytest.raises(ValueError, match="bad page"):
        q.drain()
    assert q.drain() == []


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_pages_cut_from_one_batch_store_only_their_bytes(tmp_path: Path, version: str) -> None:
    # every page is a slice of one batch sharing its data buffer; each must write its own bytes only
    n = 600
    arr = pa.array([bytes([i % 251]) * (1000 + i) if i % 7 else None for i in range(n)], pa.large_binary())
    schema = pa.schema([pa.field("b", arr.type, metadata={"lance-encoding:blob": "true"})])
    table = pa.table([arr], schema=schema)
    path = tmp_path / "blob.lance"
    _write(str(path), table, version, page_bytes=64 * 1024)
    reader = lf.LanceFileReader(str(path))
    assert len(reader.metadata().columns[0].pages) >= 8
    assert reader.read_all().to_table().equals(table)
    assert reader.take_rows([0, 1, 598, 599]).to_table().equals(table.take([0, 1, 598, 599]))
    payload = sum(len(v) for v in arr.to_pylist() if v is not None)
    assert path.stat().st_size < payload + 64 * 1024


@pytest.mark.parametrize("version", VERSIONS)
def test_small_string_pages_cut_from_a_big_batch_read_back(tmp_path: Path, version: str) -> None:
    # the pages of a big batch are slices: compression and dictionary choices must look at the
    # bytes each page spans, not the parent's whole buffer (small pages stay uncompressed)
    n = 40000
    words = pa.array([f"v{i % 50}" if i % 3 else f"unique-{i}" for i in range(n)])
    table = pa.table({"w": words, "lw": words.cast(pa.large_string())})
    path = str(tmp_path / "s.lance")
    _write(path, table, version, page_bytes=8 * 1024)
    assert lf.LanceFileReader(path).read_all().to_table().equals(table)
    enc = str(lf.LanceFileReader(path).metadata().columns[0].pages[0].encoding)
    assert "General" not in enc  # ~8 KiB pages are below the automatic zstd threshold


def _write_in_child(path: str) -> None:
    table = _edge_table(3000)
    _write(path, table, "2.2", 16 * 1024, 500)


@pytest.mark.filterwarnings("ignore:lance is not fork-safe")  # pylance's at-fork notice; it is not used here
def test_forked_child_writes_with_its_own_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    _write(str(tmp_path / "parent.lance"), _edge_table(3000), "2.2", 16 * 1024, 500)  # parent's pool exists
    child = multiprocessing.get_context("fork").Process(target=_write_in_child, args=(str(tmp_path / "c.lance"),))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert lf.LanceFileReader(str(tmp_path / "c.lance")).read_all().to_table().equals(_edge_table(3000))
