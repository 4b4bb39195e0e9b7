"""Bit-flipped index and data files: the right rows or a LanceError, never other rows.

The fuzz tests flip one bit at a time in a BTREE and a BITMAP index file (built by us and by
pylance) and in a 2.0 and a legacy data file, at every Nth byte (denser over the metadata at the
end of the file, a seeded bit per byte), read the dataset as a fresh process would (session
cleared) and compare with the answer computed from the table in memory.

* Index files: a query answers exactly the right rows or raises a LanceError. The one exception
  is a flip no reader can see, in a file whose format leaves it open: a BITMAP built by pylance
  need not list its keys in order, so a flip that turns two keys into two other unique keys
  misfiles their rows. Such a flip must give exactly the rows pylance gives for the same bytes.
* Data files carry no checksums: a flipped value is read as that value by every reader. Other
  rows than written are allowed only where pylance, reading the same bytes, returns exactly the
  same rows; a flip pylance refuses (or dies on) must be refused here too.

pylance runs in a separate process (a damaged file can abort it), one process for all flips of a
file, restarted after one that kills it.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format as lf
from lance_format.errors import CorruptFileError, LanceError
from lance_format.session import default_session

DATA = Path(__file__).resolve().parents[1] / "data"
SEED = 21


# --- helpers ---------------------------------------------------------------------------------
def _flips(size: int, every: int, tail: int, tail_every: int, seed: int) -> list[tuple[int, int]]:
    """``(byte, bit)`` to flip: every ``every``-th byte, and every ``tail_every``-th of the last ``tail``."""
    rng = random.Random(seed)
    at = set(range(rng.randrange(every), size, every)) | set(range(max(0, size - tail), size, tail_every))
    return [(pos, rng.randrange(8)) for pos in sorted(at)]


def _flipped(path: Path, original: bytes, pos: int, bit: int) -> None:
    data = bytearray(original)
    data[pos] ^= 1 << bit
    path.write_bytes(bytes(data))


#: What a read answers, the same in both processes: per query the sorted ids, or for ``*`` a digest
#: of every row (names and values) of the whole table.
_ANSWER = textwrap.dedent("""
    import hashlib
    import pyarrow as pa

    def plain(col):
        # a flipped date or time may lie outside Python's range: compare their integers
        t = col.type
        if not pa.types.is_temporal(t):
            return col
        as_int = pa.int64() if t.bit_width == 64 else pa.int32()
        return pa.chunked_array([c.view(as_int) for c in col.chunks], as_int)

    def answer(ds, queries):
        out = []
        for q in queries:
            if q == "*":
                t = ds.to_table()
                rows = pa.table([plain(c) for c in t.columns], names=t.schema.names).to_pylist()
                out.append(hashlib.sha1(repr((t.schema.names, rows)).encode()).hexdigest())
            else:
                out.append(sorted(ds.to_table(filter=q or None, columns=["id"]).column("id").to_pylist()))
        return out
""")
_answer_ns: dict[str, Any] = {}
exec(_ANSWER, _answer_ns)  # noqa: S102 - the same source runs in the pylance worker

_PYLANCE_WORKER = _ANSWER + textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import lance
    uri, path, queries = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    original = path.read_bytes()
    for line in sys.stdin:
        pos, bit = map(int, line.split())
        data = bytearray(original)
        data[pos] ^= 1 << bit
        path.write_bytes(bytes(data))
        print(json.dumps([pos, bit, "start"]), flush=True)
        try:
            print(json.dumps([pos, bit, "rows", answer(lance.dataset(uri), queries)]), flush=True)
        except BaseException as exc:
            print(json.dumps([pos, bit, "error", type(exc).__name__]), flush=True)
        path.write_bytes(original)
""")


def _pylance_answers(uri: str, path: Path, flips: list[tuple[int, int]], queries: list[str]) -> dict[
        tuple[int, int], list[Any] | None]:
    """pylance's answer for each flip (``None``: it refused the bytes or died on them)."""
    out: dict[tuple[int, int], list[list[int]] | None] = {}
    original = path.read_bytes()
    todo = list(flips)
    try:
        while todo:
            proc = subprocess.run([sys.executable, "-c", _PYLANCE_WORKER, uri, str(path), json.dumps(queries)],
                                  input="".join(f"{p} {b}\n" for p, b in todo), capture_output=True, text=True,
                                  timeout=600)
            started = None
            for line in proc.stdout.splitlines():
                pos, bit, what, *rest = json.loads(line)
                if what == "start":
                    started = (pos, bit)
                    continue
                out[(pos, bit)] = rest[0] if what == "rows" else None
                started = None
            if started is not None:  # the flip killed the process
                out[started] = None
            if not proc.stdout.strip() and todo:
                pytest.fail(f"the pylance worker printed nothing: {proc.stderr[-2000:]}")
            todo = [f for f in todo if f not in out]
    finally:
        path.write_bytes(original)
    return out


def _ours(uri: str, queries: list[str]) -> list[Any]:
    default_session().clear()  # as a fresh process: nothing decoded from the intact file may answer
    result: list[Any] = _answer_ns["answer"](lf.dataset(uri), queries)
    return result


def _fuzz(uri: str, path: Path, queries: list[str], truth: list[Any], flips: list[tuple[int, int]],
          *, strict: bool, compared: int | None = None,
          consistent: Callable[[list[Any]], bool] | None = None) -> dict[str, int]:
    """Flip each bit in turn; ours answers the truth or raises, else pylance must answer the same rows.

    Args:
        strict: No other rows at all (our own index files).
        compared: Compare only this answer with pylance's (default: all of them).
        consistent: Our answers to one flip must agree with each other (e.g. a filter with the rows read).
    """
    original = path.read_bytes()
    counts = {"flips": 0, "right rows": 0, "LanceError": 0, "CorruptFileError": 0, "rows pylance reads too": 0}
    other: dict[tuple[int, int], list[Any]] = {}
    started = time.monotonic()
    try:
        for pos, bit in flips:
            _flipped(path, original, pos, bit)
            counts["flips"] += 1
            try:
                got = _ours(uri, queries)
            except LanceError as exc:
                counts["CorruptFileError" if isinstance(exc, CorruptFileError) else "LanceError"] += 1
                if isinstance(exc, CorruptFileError):
                    assert path.name in str(exc) or path.parent.name in str(exc), f"flip {pos}:{bit}: {exc}"
                continue
            except Exception as exc:  # noqa: BLE001 - the point of the test
                pytest.fail(f"flip of bit {bit} at byte {pos} of {path.name}: {type(exc).__name__}: {exc}")
            if got == truth:
                counts["right rows"] += 1
            else:
                assert consistent is None or consistent(got), f"flip {pos}:{bit} of {path.name}: {got}"
                other[(pos, bit)] = got
    finally:
        path.write_bytes(original)
    if other:
        assert not strict, f"{path.name}: other rows than written for flips {sorted(other)[:10]}"
        theirs = _pylance_answers(uri, path, list(other), queries)
        pick = (lambda a: a) if compared is None else (lambda a: None if a is None else a[compared])
        differ = {f: (pick(other[f]), pick(theirs[f])) for f in other if pick(theirs[f]) != pick(other[f])}
        assert not differ, (f"{path.name}: {len(differ)} flips give other rows than written where pylance "
                            f"refuses the bytes or answers otherwise, e.g. {sorted(differ)[:5]}")
        counts["rows pylance reads too"] = len(other)
    counts["seconds"] = round(time.monotonic() - started)
    print(f"{path.name}: {counts}")
    return counts


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(rng.integers(0, 40, n), pa.int64(), mask=rng.random(n) < 0.03),
        "s": pa.array(rng.choice(np.array([f"k{i}" for i in range(12)], dtype=object), n), pa.string(),
                      mask=rng.random(n) < 0.02),
    })


def _truth(table: pa.Table, predicates: list[Callable[[pa.Table], pa.Array]]) -> list[list[int]]:
    return [sorted(table.filter(pc.fill_null(p(table), False)).column("id").to_pylist()) for p in predicates]


BTREE_QUERIES = ["a = 7", "a BETWEEN 10 AND 12", "a IS NULL"]
BTREE_TRUTH = [lambda t: pc.equal(t["a"], 7), lambda t: pc.and_(pc.greater_equal(t["a"], 10), pc.less_equal(t["a"], 12)),
               lambda t: pc.is_null(t["a"])]
BITMAP_QUERIES = ["s IN ('k1', 'k10')", "s > 'k7'", "s IS NULL"]
BITMAP_TRUTH = [lambda t: pc.is_in(t["s"], pa.array(["k1", "k10"])), lambda t: pc.greater(t["s"], "k7"),
                lambda t: pc.is_null(t["s"])]


def _indexed_dataset(root: Path, builder: str, version: str, kind: str) -> tuple[str, pa.Table]:
    uri = str(root / f"{builder}-{kind}")
    table = _table(9000)
    lib = lance if builder == "pylance" else lf
    lib.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=3000)
    lib.dataset(uri).delete("id % 97 = 0")
    lib.dataset(uri).create_scalar_index("a" if kind == "BTREE" else "s", kind)
    kept = table.filter(pc.not_equal(pc.subtract(table["id"], pc.multiply(pc.divide(table["id"], 97), 97)), 0))
    return uri, kept


# --- fuzz: index files -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(("builder", "version"), [("ours", "2.0"), ("pylance", "2.2")])
def test_bit_flips_in_btree_index_files_never_give_other_rows(tmp_path: Path, builder: str, version: str) -> None:
    uri, table = _indexed_dataset(tmp_path, builder, version, "BTREE")
    truth = _truth(table, BTREE_TRUTH)
    assert _ours(uri, BTREE_QUERIES) == truth and all(truth)
    assert "ScalarIndexQuery" in lf.dataset(uri).scanner(filter=BTREE_QUERIES[0]).explain_plan()
    total = 0
    for path in sorted(Path(uri).glob("_indices/*/*.lance")):
        # page_data: ids and values sampled, the metadata at its end densely; the small lookup throughout
        flips = _flips(path.stat().st_size, every=2999 if "data" in path.name else 13, tail=1024, tail_every=23,
                       seed=SEED)
        counts = _fuzz(uri, path, BTREE_QUERIES, truth, flips, strict=True)
        total += counts["flips"]
    assert total >= 150


@pytest.mark.slow
@pytest.mark.parametrize(("builder", "version"), [("ours", "2.0"), ("pylance", "2.2")])
def test_bit_flips_in_bitmap_index_files_never_give_other_rows(tmp_path: Path, builder: str, version: str) -> None:
    uri, table = _indexed_dataset(tmp_path, builder, version, "BITMAP")
    truth = _truth(table, BITMAP_TRUTH)
    assert _ours(uri, BITMAP_QUERIES) == truth and all(truth)
    (path,) = Path(uri).glob("_indices/*/*.lance")
    flips = _flips(path.stat().st_size, every=113, tail=1024, tail_every=23, seed=SEED)
    # our files say their keys are sorted; pylance's need not (see the module docstring)
    counts = _fuzz(uri, path, BITMAP_QUERIES, truth, flips, strict=builder == "ours")
    assert counts["flips"] >= 150


# --- fuzz: data files --------------------------------------------------------------------------
def _data_dataset(root: Path, name: str) -> tuple[str, Path, pa.Table]:
    """A copy of a dataset an old pylance wrote (tests/data), its largest data file, and its rows."""
    uri = str(root / name)
    shutil.copytree(DATA / name / "dataset.lance", uri)
    ds = lf.dataset(uri)
    frag = max(ds.manifest.fragments, key=lambda f: f.physical_rows)
    (df,) = frag.files
    return uri, Path(uri) / "data" / df.path, ds.to_table()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "every", "tail_every"), [("pylance_0_14_1_v2_0_noformat", 229, 13),
                                                         ("legacy_0_10_18", 4, 4)])
def test_bit_flips_in_old_data_files_never_give_rows_pylance_refuses(tmp_path: Path, name: str, every: int,
                                                                   tail_every: int) -> None:
    """A flipped value reads as that value in both libraries; anything pylance refuses, we refuse.

    Only the rows themselves are compared with pylance: it prunes filters with page statistics,
    so with a damaged value it can return a row its filter excludes. Our filtered ids must agree
    with the rows we read.
    """
    uri, path, _ = _data_dataset(tmp_path, name)
    queries = ["*", "", "id >= 0"]  # every row of every column; every id; the ids through a filter
    truth = _answer_ns["answer"](lance.dataset(uri), queries)
    assert _ours(uri, queries) == truth
    flips = _flips(path.stat().st_size, every=every, tail=1536, tail_every=tail_every, seed=SEED)
    counts = _fuzz(uri, path, queries, truth, flips, strict=False, compared=0,
                   consistent=lambda got: got[2] == [i for i in got[1] if i is not None and i >= 0])
    assert counts["flips"] >= 150


# --- targeted damage: each kind of check ---------------------------------------------------------
def _flat(enc: Any, bits: int) -> Any:
    """The ``Flat`` encoding of ``bits`` per value inside a 2.0 page encoding tree."""
    if enc.DESCRIPTOR.name == "Flat" and enc.bits_per_value == bits:
        return enc
    for fd, value in enc.ListFields():
        if fd.message_type is not None and hasattr(value, "DESCRIPTOR"):  # one message, not a repeated field
            found = _flat(value, bits)
            if found is not None:
                return found
    return None


def _poke(path: Path, column: int, row: int, value: int, fmt: str = "<q") -> None:
    """Overwrite row ``row`` of a plain fixed-width column of a 2.0 file in place (the size stays)."""
    from lance_format._pb import encodings_v2_0_pb2
    from lance_format.file import LanceFileReader

    meta = LanceFileReader(str(path)).metadata()
    start = 0
    for page in meta.columns[column].pages:
        if row < start + page.length:
            break
        start += page.length
    enc = encodings_v2_0_pb2.ArrayEncoding()
    enc.ParseFromString(page.encoding_bytes)
    width = struct.calcsize(fmt)
    flat = _flat(enc, width * 8)
    at = page.buffer_offsets[flat.buffer.buffer_index] + (row - start) * width
    data = bytearray(path.read_bytes())
    data[at : at + width] = struct.pack(fmt, value)
    path.write_bytes(bytes(data))


def _replace(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1, (old, data.count(old))
    path.write_bytes(data.replace(old, new))


def _refused(uri: str, query: str, match: str, path: Path) -> None:
    default_session().clear()
    with pytest.raises(CorruptFileError, match=match) as info:
        lf.dataset(uri).to_table(filter=query)
    assert str(path) in str(info.value) or path.name in str(info.value)


@pytest.fixture
def btree(tmp_path: Path) -> tuple[str, pa.Table, Path, Path]:
    uri, table = _indexed_dataset(tmp_path, "ours", "2.0", "BTREE")
    (seg,) = Path(uri).glob("_indices/*")
    return uri, table, seg / "page_data.lance", seg / "page_lookup.lance"


def _index_rows(path: Path) -> tuple[list[Any], list[int]]:
    from lance_format.file import LanceFileReader

    t = LanceFileReader(str(path)).read_all().to_table()
    return t.column("values").to_pylist(), t.column("ids").to_pylist()


def test_btree_id_of_another_row_is_refused(btree: tuple[str, pa.Table, Path, Path]) -> None:
    uri, _, data, _ = btree
    values, ids = _index_rows(data)
    i = values.index(7)
    j = values.index(30)  # a live row that holds 30, not 7
    _poke(data, 1, i, ids[j])
    _refused(uri, "a = 7", r"returned row .* as holding 7, but the row holds 30", data)


@pytest.mark.parametrize(("addr", "match"), [((9 << 32) | 5, "fragment 9, which the index does not cover"),
                                             ((1 << 32) | 3005, "row offset 3005 of fragment 1, which has 3000 rows")])
def test_btree_id_outside_the_covered_rows_is_refused(btree: tuple[str, pa.Table, Path, Path], addr: int,
                                                      match: str) -> None:
    uri, _, data, _ = btree
    values, _ = _index_rows(data)
    _poke(data, 1, values.index(7), addr)
    _refused(uri, "a = 7", match, data)


def test_btree_values_out_of_order_are_refused(btree: tuple[str, pa.Table, Path, Path]) -> None:
    uri, _, data, _ = btree
    values, _ = _index_rows(data)
    _poke(data, 0, values.index(7) + 3, 1 << 40)
    _refused(uri, "a = 7", "values of page 0 are out of order", data)


def test_btree_value_that_keeps_the_order_but_misstates_a_row_is_refused(
        btree: tuple[str, pa.Table, Path, Path]) -> None:
    uri, _, data, _ = btree
    values, _ = _index_rows(data)
    _poke(data, 0, values.index(8), 7)  # the first 8 now says 7: still sorted
    _refused(uri, "a = 7", "as holding 7, but the row holds 8", data)


def test_btree_lookup_that_disagrees_with_the_pages_is_refused(btree: tuple[str, pa.Table, Path, Path]) -> None:
    uri, _, data, lookup = btree
    values, _ = _index_rows(data)
    _poke(lookup, 1, 0, values[4095] + 1)  # page 0's max: the next page's first value (39 after 38)
    _refused(uri, "a = 38", "disagree with|out of order", lookup)


def test_btree_page_size_that_does_not_fit_the_pages_is_refused(btree: tuple[str, pa.Table, Path, Path]) -> None:
    uri, _, _, lookup = btree
    _replace(lookup, b"batch_size\x12\x044096", b"batch_size\x12\x040096")  # one bit: '4' -> '0'
    _refused(uri, "a = 7", r"3 pages, but .* holds 8907 rows in pages of 96 \(93 pages\)", lookup)


@pytest.fixture
def bitmap(tmp_path: Path) -> tuple[str, Path]:
    uri, _ = _indexed_dataset(tmp_path, "ours", "2.0", "BITMAP")
    (path,) = Path(uri).glob("_indices/*/*.lance")
    return uri, path


def test_bitmap_keys_out_of_order_are_refused_when_the_file_says_sorted(bitmap: tuple[str, Path]) -> None:
    uri, path = bitmap
    _replace(path, b"k1k10k11k2", b"k1k10k11kZ")  # unique, but no longer in order
    _refused(uri, "s = 'k3'", "keys are not in order", path)


def test_bitmap_duplicate_key_is_refused(bitmap: tuple[str, Path]) -> None:
    uri, path = bitmap
    _replace(path, b"k1k10k11k2", b"k1k10k11k3")
    _refused(uri, "s = 'k3'", "the same key appears twice", path)


def test_bitmap_row_of_an_uncovered_fragment_is_refused(bitmap: tuple[str, Path]) -> None:
    from lance_format.index.rowset import encode_row_set

    uri, path = bitmap
    ds = lf.dataset(uri)
    ids = ds.to_table(filter="s = 'k3'", with_row_address=True).column("_rowaddr").to_numpy()
    # the bitmap's first fragment entry: u32 count, u32 fragment id (0 -> 7), u32 byte length
    encoded = encode_row_set(ids.astype(np.uint64))
    _replace(path, encoded[:12], struct.pack("<II", 3, 7) + encoded[8:12])
    _refused(uri, "s = 'k3'", "fragment 7, which the index does not cover", path)


def test_bitmap_whose_container_header_undercounts_is_refused(bitmap: tuple[str, Path]) -> None:
    # A flipped cardinality in a roaring container header: the array container is read short,
    # a valid bitmap of fewer rows (pylance answers with those). The row set's byte length and
    # the headers no longer agree.
    from lance_format.index.rowset import encode_row_set

    uri, path = bitmap
    ids = lf.dataset(uri).to_table(filter="s = 'k3'", with_row_address=True).column("_rowaddr").to_numpy()
    encoded = encode_row_set(ids.astype(np.uint64))
    # RowIdTreeMap: u32 count, then u32 fragment, u32 length, roaring: u32 cookie, u32 containers,
    # then (u16 key, u16 cardinality - 1) per container
    at = 12 + 8 + 2
    (card,) = struct.unpack_from("<H", encoded, at)
    _replace(path, encoded[:40], encoded[:at] + struct.pack("<H", card - 8) + encoded[at + 2 : 40])
    _refused(uri, "s = 'k3'", r"fragment 0's bitmap says \d+ rows in \d+ bytes, but it holds", path)


# --- targeted damage: data files (what pylance refuses) ----------------------------------------
def test_legacy_batch_offsets_that_claim_more_rows_are_refused(tmp_path: Path) -> None:
    # One bit lengthens the packed batch_offsets list (0, 50) to (0, 50, 400): the page table is
    # then read as two batches of garbage pages. pylance refuses the file; so do we.
    uri, path, _ = _data_dataset(tmp_path, "legacy_0_10_18")
    path = Path(uri) / "data" / "0152624a-fb20-4c53-a5ad-1c2a5f40958f.lance"
    _flipped(path, path.read_bytes(), 567, 3)
    with pytest.raises(Exception, match="out of range"):
        lance.dataset(uri).to_table()
    default_session().clear()
    with pytest.raises(CorruptFileError, match=f"{path.name}: field 'id' .* page of 51 values, but the batch"):
        lf.dataset(uri).to_table()


@pytest.mark.parametrize(("bit", "match"), [(1, "field 'buffer' .* has wire type varint"),
                                            (5, "Flat encoding without a buffer reference")])
def test_2_0_page_encoding_that_loses_its_buffer_is_refused(tmp_path: Path, bit: int, match: str) -> None:
    # The bool column's values ``Flat.buffer``: a wire type prost refuses, or an unknown field
    # number (the buffer absent, which pylance's decoder fails on). Read as buffer 0 they would
    # be the column's validity bits.
    uri, _, _ = _data_dataset(tmp_path, "pylance_0_14_1_v2_0_noformat")
    path = Path(uri) / "data" / "10ef9a86-f9d7-4ca6-8414-a55f1d2b17e9.lance"
    _flipped(path, path.read_bytes(), 18807, bit)
    with pytest.raises(Exception):  # noqa: B017 - pylance raises OSError or ArrowInvalid
        lance.dataset(uri).to_table()
    default_session().clear()
    with pytest.raises(CorruptFileError, match=f"{path.name}: column 3 \\(field 'flag'\\) page 0: .*{match}"):
        lf.dataset(uri).to_table()


def test_bitmap_keys_in_another_order_still_read_and_are_not_claimed_sorted(tmp_path: Path) -> None:
    # A remap keeps the keys in the order another writer left them (hash order, for some Lance
    # versions): such a file must not claim sorted keys, and reads like any other.
    from lance_format.file import LanceFileReader
    from lance_format.index.bitmap import LOOKUP, SORTED_KEYS, BitmapIndex, write_bitmap
    from lance_format.index.predicates import In, IsNull
    from lance_format.index.store import IndexDir
    from lance_format.storage import open_store

    store = open_store(str(tmp_path))
    rows = [np.array([1], np.uint64), np.array([0, 3], np.uint64), np.array([2], np.uint64)]
    for name, keys in [("hash", pa.array(["b", None, "a"])), ("sorted", pa.array([None, "a", "b"]))]:
        write_bitmap(IndexDir(store, name), keys, rows)
        metadata = LanceFileReader(str(tmp_path / "_indices" / name / LOOKUP)).schema.metadata
        assert (SORTED_KEYS.encode() in metadata) == (name == "sorted")
        index = BitmapIndex(IndexDir(store, name), lambda _frag: 10)
        assert index.search(In((pa.scalar("a"),))).tolist() == ([2] if name == "hash" else [0, 3])
        assert index.search(IsNull()).tolist() == ([0, 3] if name == "hash" else [1])
