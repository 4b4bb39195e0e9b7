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

from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader
from lance_format.file.v2_1 import fsst, joint


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
    kinds = {name: getattr(joint._joint_layouts(decoders, i), "kind", None)
             for i, name in enumerate(expected.column_names)}
    assert kinds["id"] == kinds["x"] == "plain"
    assert kinds["cat"] == "dictionary"
    assert kinds["text"] == "fsst"  # each file its own symbol table
    assert kinds["tags"] is None  # lists: file by file
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


def test_fsst_strings_of_several_tables_decode_like_each_page_alone() -> None:
    rng = np.random.default_rng(3)
    tables, datas, offs = [], [], []
    for _ in range(4):
        n = int(rng.integers(1, 40))
        raw = bytearray((0x46535354 << 32 | 1 << 24 | n).to_bytes(8, "little"))
        lens = rng.integers(1, 9, n)
        raw += rng.integers(0, 256, 8 * n, dtype=np.uint8).tobytes() + lens.astype(np.uint8).tobytes()
        tables.append(fsst.SymbolTable(bytes(raw)))
        codes = []
        for _ in range(int(rng.integers(0, 50))):  # strings of symbols and escaped literals (255 too)
            s = []
            for _ in range(int(rng.integers(0, 6))):
                s += [255, int(rng.integers(0, 256))] if rng.random() < 0.3 else [int(rng.integers(0, n))]
            codes.append(bytes(s))
        datas.append(np.frombuffer(b"".join(codes), np.uint8))
        offs.append(np.concatenate([[0], np.cumsum([len(c) for c in codes])]).astype(np.int64))
    data = np.concatenate(datas)
    bounds = np.concatenate([[0], np.cumsum([len(o) - 1 for o in offs])]).astype(np.int64)
    offsets = np.concatenate([offs[0]] + [o[1:] + sum(len(d) for d in datas[:k]) for k, o in enumerate(offs) if k])
    got = fsst.decode_many(tables, data, offsets, bounds)
    assert got is not None
    out, out_offs = got
    strings = [out[a:b].tobytes() for a, b in zip(out_offs[:-1], out_offs[1:], strict=True)]
    want = []
    for t, d, o in zip(tables, datas, offs, strict=True):
        dec, dec_offs = fsst._decode(t, d, o)
        want += [dec[a:b].tobytes() for a, b in zip(dec_offs[:-1], dec_offs[1:], strict=True)]
    assert strings == want


def test_fsst_page_ending_in_an_escape_is_refused_even_mid_stream() -> None:
    raw = (0x46535354 << 32 | 1 << 24 | 1).to_bytes(8, "little") + b"abcdefgh" + bytes([3])
    table = fsst.SymbolTable(raw)
    data = np.array([0, 255, 0, 0], np.uint8)  # page 0 ends with an escape; page 1 is [0, 0]
    with pytest.raises(CorruptFileError):
        fsst.decode_many([table, table], data, np.array([0, 2, 4], np.int64), np.array([0, 1, 2], np.int64))
