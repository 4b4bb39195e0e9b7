"""Small 2.1 / 2.2 files written by pylance, read together (``joint.read_whole_files``): every
column equals what pylance reads from each file, in file order, whether its pages were decoded
as one (same encoding in every file) or file by file (dictionaries, lists, differing encodings)."""

from __future__ import annotations

from pathlib import Path

import lance
import lance.file as plf
import numpy as np
import pyarrow as pa
import pytest

from lance_format.file import LanceFileReader
from lance_format.file.v2_1 import joint


def _part(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ints = rng.integers(0, 1000, n)
    nullable = pa.array(ints, mask=rng.random(n) < 0.2)
    words = np.array([f"w{i}" for i in range(300)], dtype=object)
    return pa.table({
        "id": pa.array(np.arange(seed * n, seed * n + n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "y": pa.array(rng.random(n, dtype=np.float32)),
        "maybe": nullable,
        "flag": pa.array(rng.random(n) < 0.5),
        "cat": pa.array([f"category_{i:02d}" for i in rng.integers(0, 20, n)]),
        "text": pa.array([" ".join(words[rng.integers(0, 300, 3)]) for _ in range(n)]),
        "opt_text": pa.array([None if i % 7 == 0 else f"t{i}" for i in range(n)]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
        "tags": pa.array([[int(v) for v in range(i % 3)] for i in range(n)], pa.list_(pa.int32())),
    })


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_columns_of_many_files_equal_pylance_reads(tmp_path: Path, version: str) -> None:
    paths = []
    for k in range(6):
        path = str(tmp_path / f"f{k}.lance")
        with plf.LanceFileWriter(path, version=version) as w:
            w.write_batch(_part(k, 3000 + 500 * k))
        paths.append(path)
    expected = pa.concat_tables([plf.LanceFileReader(p).read_all().to_table() for p in paths])
    decoders = [LanceFileReader(p)._decoder for p in paths]
    # the fixed-width columns really take the joint path (not only the file-by-file fallback)
    assert joint._joint_layouts(decoders, 0) is not None
    assert joint._joint_layouts(decoders, 8) is not None
    got = joint.read_whole_files(decoders)
    assert got is not None
    for i, name in enumerate(expected.column_names):
        assert got[i].equals(expected.column(name).combine_chunks()), name


def test_files_whose_pages_differ_are_read_file_by_file(tmp_path: Path) -> None:
    # one file's ids are constant (a constant page), the other's are not: not one encoding
    paths = []
    for k, ids in enumerate([np.zeros(2000, np.int64), np.arange(2000, dtype=np.int64)]):
        path = str(tmp_path / f"f{k}.lance")
        with plf.LanceFileWriter(path, version="2.2") as w:
            w.write_batch(pa.table({"id": ids, "s": pa.array([f"s{i}" for i in range(2000)])}))
        paths.append(path)
    decoders = [LanceFileReader(p)._decoder for p in paths]
    got = joint.read_whole_files(decoders)
    assert got is not None
    expected = pa.concat_tables([plf.LanceFileReader(p).read_all().to_table() for p in paths])
    assert got[0].equals(expected.column("id").combine_chunks())
    assert got[1].equals(expected.column("s").combine_chunks())


def test_files_of_other_versions_are_left_to_the_caller(tmp_path: Path) -> None:
    uri = str(tmp_path / "d.lance")
    lance.write_dataset(pa.table({"id": np.arange(100, dtype=np.int64)}), uri, max_rows_per_file=50,
                        data_storage_version="2.0")
    files = [f.data_files()[0].path for f in lance.dataset(uri).get_fragments()]
    decoders = [LanceFileReader(str(tmp_path / "d.lance" / "data" / f))._decoder for f in files]
    assert joint.read_whole_files(decoders) is None
