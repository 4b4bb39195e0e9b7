"""Row-id and row-version sequences: segment choice, corrupt input, pylance 14.0.2 both ways."""

from __future__ import annotations

import glob
import struct
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lance_format._pb import rowids_pb2, table_pb2
from lance_format.errors import CorruptFileError, InvalidInputError
from lance_format.table.rowids import (
    decode_row_ids,
    decode_version_runs,
    decode_versions,
    encode_row_id_range,
    encode_row_ids,
    encode_uniform_versions,
    encode_version_runs,
    row_id_segments,
)


def kinds(ids: np.ndarray) -> list[str]:
    return [str(s.WhichOneof("segment")) for s in row_id_segments(ids)]


def roundtrip(ids: np.ndarray) -> None:
    got = decode_row_ids(encode_row_ids(ids), expected_len=len(ids))
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, np.asarray(ids, dtype=np.uint64))


def test_segment_choice() -> None:
    u = np.uint64
    assert kinds(np.arange(10, 20, dtype=u)) == ["range"]
    # one hole in 1000: holes (28) beats bitmap (24+125) and sorted array (24+2*999)
    ids = np.delete(np.arange(1000, dtype=u), 500)
    assert kinds(ids) == ["range_with_holes"]
    seg = row_id_segments(ids)[0].range_with_holes
    assert (seg.start, seg.end, seg.holes.u16_array.base, seg.holes.u16_array.offsets) == (
        0,
        1000,
        500,
        b"\0\0",
    )
    # every other value: bitmap (24+125) beats holes (24+4*500) and sorted (24+2*500)
    assert kinds(np.arange(0, 1000, 2, dtype=u)) == ["range_with_bitmap"]
    # sparse: sorted array
    assert kinds(np.arange(0, 10_000, 100, dtype=u)) == ["sorted_array"]
    # unsorted with many descents: one array
    rng = np.random.default_rng(1)
    shuffled = rng.permutation(np.arange(1000, dtype=u))
    assert kinds(shuffled) == ["array"]
    # a few contiguous runs (appends + compaction): one Range per run
    runs = np.concatenate([np.arange(0, 100), np.arange(10_000, 10_100), np.arange(50_000, 60_000)]).astype(u)
    assert kinds(runs) == ["range", "range", "range"]
    # two increasing pieces
    assert kinds(np.concatenate([np.arange(100, 200), np.arange(0, 50)]).astype(u)) == ["range", "range"]
    assert kinds(np.zeros(0, dtype=u)) == ["range"]


def test_bitmap_bit_order_is_lsb_first() -> None:
    ids = np.array([0, 2, 3, 8, 9, 15, 16, 17, 18, 19, 20, 21, 22, 23], dtype=np.uint64)
    seg = row_id_segments(ids)[0]
    assert seg.WhichOneof("segment") == "range_with_bitmap"
    assert seg.range_with_bitmap.bitmap == bytes([0b00001101, 0b10000011, 0b11111111])


def test_encoded_array_widths() -> None:
    u = np.uint64
    base = 2**40
    for spread, kind in [
        (65_534, "u16_array"),
        (65_535, "u32_array"),
        (2**32 - 2, "u32_array"),
        (2**32 - 1, "u64_array"),
    ]:
        # strictly decreasing: > MAX_RUN_SEGMENTS descents -> one Array segment
        ids = np.array([base + spread, *range(base + 100, base - 1, -1)], dtype=u)
        segs = row_id_segments(ids)
        arrays = [s.array if s.HasField("array") else s.sorted_array for s in segs]
        assert {a.WhichOneof("array") for a in arrays} == {kind}, (spread, segs)
        roundtrip(ids)
    roundtrip(np.array([2**64 - 1, 0, 5], dtype=u))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=300),
    st.booleans(),
    st.integers(min_value=0, max_value=2**63),
)
def test_roundtrip_property(values: list[int], dense: bool, offset: int) -> None:
    if dense:  # exercise the range/holes/bitmap paths
        values = sorted({offset + (v % 400) for v in values})
    roundtrip(np.array(values, dtype=np.uint64))


def test_bad_input() -> None:
    with pytest.raises(InvalidInputError):
        encode_row_ids(np.array([-1, 2]))
    with pytest.raises(InvalidInputError):
        encode_row_ids(np.array([1.5]))
    with pytest.raises(InvalidInputError):
        encode_row_ids(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(InvalidInputError):
        encode_row_id_range(5, 3)


def _seq(*segments: rowids_pb2.U64Segment) -> bytes:
    return rowids_pb2.RowIdSequence(segments=list(segments)).SerializeToString()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\xff\xff\xff", "invalid RowIdSequence"),
        (_seq(rowids_pb2.U64Segment()), "no segment variant"),
        (_seq(rowids_pb2.U64Segment(range=rowids_pb2.U64Segment.Range(start=5, end=2))), "before start"),
        (_seq(rowids_pb2.U64Segment(range=rowids_pb2.U64Segment.Range(start=0, end=2**62))), "more than"),
        (
            _seq(
                rowids_pb2.U64Segment(
                    range_with_bitmap=rowids_pb2.U64Segment.RangeWithBitmap(start=0, end=100, bitmap=b"\xff")
                )
            ),
            "too short",
        ),
        (
            _seq(
                rowids_pb2.U64Segment(
                    array=rowids_pb2.EncodedU64Array(
                        u32_array=rowids_pb2.EncodedU64Array.U32Array(base=0, offsets=b"\0\0\0")
                    )
                )
            ),
            "whole number",
        ),
        (_seq(rowids_pb2.U64Segment(array=rowids_pb2.EncodedU64Array())), "no array variant"),
        (
            _seq(
                rowids_pb2.U64Segment(
                    array=rowids_pb2.EncodedU64Array(
                        u16_array=rowids_pb2.EncodedU64Array.U16Array(base=2**64 - 1, offsets=b"\x01\x00")
                    )
                )
            ),
            "overflows",
        ),
        (
            _seq(
                rowids_pb2.U64Segment(
                    range_with_holes=rowids_pb2.U64Segment.RangeWithHoles(
                        start=10,
                        end=20,
                        holes=rowids_pb2.EncodedU64Array(
                            u16_array=rowids_pb2.EncodedU64Array.U16Array(base=30, offsets=b"\0\0")
                        ),
                    )
                )
            ),
            "outside",
        ),
        (
            _seq(
                rowids_pb2.U64Segment(
                    range_with_holes=rowids_pb2.U64Segment.RangeWithHoles(
                        start=10,
                        end=20,
                        holes=rowids_pb2.EncodedU64Array(
                            u16_array=rowids_pb2.EncodedU64Array.U16Array(base=12, offsets=b"\0\0\0\0")
                        ),
                    )
                )
            ),
            "claim",
        ),
        (encode_row_id_range(0, 10), "expected 11"),
    ],
)
def test_corrupt(data: bytes, match: str) -> None:
    with pytest.raises(CorruptFileError, match=match) as info:
        decode_row_ids(
            data, where="fragment 3 inline_row_ids", expected_len=11 if "expected" in match else None
        )
    assert "fragment 3" in str(info.value)


def test_version_sequences() -> None:
    data = encode_uniform_versions(1000, 7)
    seq = rowids_pb2.RowDatasetVersionSequence.FromString(data)
    assert len(seq.runs) == 1 and seq.runs[0].version == 7
    assert (seq.runs[0].span.range.start, seq.runs[0].span.range.end) == (0, 1000)
    assert decode_version_runs(data) == [(1000, 7)]
    np.testing.assert_array_equal(decode_versions(data, expected_len=1000), np.full(1000, 7, np.uint64))
    multi = encode_version_runs([(3, 1), (0, 9), (2, 4)])
    assert decode_version_runs(multi) == [(3, 1), (2, 4)]
    np.testing.assert_array_equal(decode_versions(multi), [1, 1, 1, 4, 4])
    assert decode_version_runs(encode_uniform_versions(0, 3)) == []
    with pytest.raises(CorruptFileError, match="expected 4"):
        decode_versions(multi, expected_len=4)
    no_span = rowids_pb2.RowDatasetVersionSequence(runs=[rowids_pb2.RowDatasetVersionRun(version=1)])
    with pytest.raises(CorruptFileError, match="no span"):
        decode_version_runs(no_span.SerializeToString())


# -- interop with pylance 14.0.2 ------------------------------------------------

lance = pytest.importorskip("lance")


def _manifest_paths(uri: str) -> list[str]:
    return sorted(glob.glob(f"{uri}/_versions/*.manifest"), reverse=True)  # V2 names: oldest first


def _read_manifest(path: str) -> tuple[bytes, int, table_pb2.Manifest]:
    raw = Path(path).read_bytes()
    (offset,) = struct.unpack_from("<q", raw, len(raw) - 16)
    (length,) = struct.unpack_from("<I", raw, offset)
    return raw, offset, table_pb2.Manifest.FromString(raw[offset + 4 : offset + 4 + length])


def _write_manifest(path: str, raw: bytes, offset: int, manifest: table_pb2.Manifest) -> None:
    body = manifest.SerializeToString()
    footer = raw[-16:]  # offset is unchanged: only the Manifest message is replaced
    Path(path).write_bytes(raw[:offset] + struct.pack("<I", len(body)) + body + footer)


@pytest.fixture
def stable_ds(tmp_path: Path) -> str:
    uri = str(tmp_path / "ds")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lance.write_dataset(
            pa.table({"a": pa.array(range(3000), pa.int64())}),
            uri,
            enable_stable_row_ids=True,
            max_rows_per_file=1000,
        )
        lance.write_dataset(pa.table({"a": pa.array(range(3000, 3500), pa.int64())}), uri, mode="append")
        ds = lance.dataset(uri)
        ds.delete("a % 7 = 0 or (a >= 1500 and a < 1600)")
        lance.dataset(uri).update({"a": "a + 100000"}, where="a < 20")
        lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=100_000)
    return uri


def test_decode_pylance_sequences(stable_ds: str) -> None:
    seen: set[str] = set()
    for path in _manifest_paths(stable_ds):
        _raw, _off, manifest = _read_manifest(path)
        assert manifest.reader_feature_flags & 2
        expected_next = 0
        for frag in manifest.fragments:
            where = f"{path} fragment {frag.id}"
            ids = decode_row_ids(frag.inline_row_ids, where=where, expected_len=frag.physical_rows)
            seen.update(
                s.WhichOneof("segment")
                for s in rowids_pb2.RowIdSequence.FromString(frag.inline_row_ids).segments
            )
            created = decode_versions(frag.inline_created_at_versions, expected_len=frag.physical_rows)
            updated = decode_versions(frag.inline_last_updated_at_versions, expected_len=frag.physical_rows)
            assert (created <= manifest.version).all() and (updated >= created).all()
            assert ids.size == len(np.unique(ids))
            expected_next = max(expected_next, int(ids.max()) + 1)
            # Single-segment sequences: our encoder picks exactly what lance picked.
            if len(rowids_pb2.RowIdSequence.FromString(frag.inline_row_ids).segments) == 1:
                assert encode_row_ids(ids) == frag.inline_row_ids
                if len(decode_version_runs(frag.inline_created_at_versions)) == 1:
                    ((n, v),) = decode_version_runs(frag.inline_created_at_versions)
                    assert encode_uniform_versions(n, v) == frag.inline_created_at_versions
        assert manifest.next_row_id >= expected_next
    assert {"range", "range_with_bitmap"} <= seen
    # The compacted fragment's _rowid column, as pylance reports it, matches our decode.
    ds = lance.dataset(stable_ds)
    _raw, _off, manifest = _read_manifest(_manifest_paths(stable_ds)[-1])
    ours = np.concatenate([decode_row_ids(f.inline_row_ids) for f in manifest.fragments])
    theirs = ds.to_table(with_row_id=True).column("_rowid").to_numpy()
    np.testing.assert_array_equal(np.sort(theirs), np.sort(ours))


@pytest.mark.parametrize(
    "make_ids",
    [
        lambda n: np.arange(n, dtype=np.uint64) + np.uint64(7),  # range
        lambda n: np.delete(np.arange(n + 1, dtype=np.uint64), n // 2),  # holes
        lambda n: np.arange(0, 2 * n, 2, dtype=np.uint64),  # bitmap
        lambda n: np.arange(0, 1000 * n, 1000, dtype=np.uint64),  # sorted array (u32 offsets)
        lambda n: np.random.default_rng(0).permutation(n).astype(np.uint64) * np.uint64(3),  # array
        lambda n: np.concatenate([np.arange(n // 2) + 5000, np.arange(n - n // 2)]).astype(
            np.uint64
        ),  # 2 ranges
        lambda n: np.arange(n, dtype=np.uint64) * np.uint64(2**40),  # u64 values
    ],
)
def test_pylance_reads_our_sequences(tmp_path: Path, make_ids: object) -> None:
    uri = str(tmp_path / "ds")
    n = 600
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lance.write_dataset(pa.table({"a": pa.array(range(n), pa.int64())}), uri, enable_stable_row_ids=True)
    ids = make_ids(n)  # type: ignore[operator]
    path = _manifest_paths(uri)[-1]
    raw, offset, manifest = _read_manifest(path)
    (frag,) = manifest.fragments
    frag.inline_row_ids = encode_row_ids(ids)
    frag.inline_created_at_versions = encode_uniform_versions(n, 1)
    manifest.next_row_id = int(ids.max()) + 1
    _write_manifest(path, raw, offset, manifest)
    table = lance.dataset(uri).to_table(with_row_id=True)
    np.testing.assert_array_equal(table.column("_rowid").to_numpy(), ids)
    np.testing.assert_array_equal(table.column("a").to_numpy(), np.arange(n))
