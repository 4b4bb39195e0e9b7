"""Bad input through the public API is a LanceError naming what and where, never a bare Python error."""

from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import InvalidInputError, LanceError, VersionNotFoundError

T = pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": ["x", "y", "z"]})


@pytest.fixture
def ds(tmp_path: Path) -> lf.LanceDataset:
    return lf.write_dataset(T, str(tmp_path / "ds"))


def test_empty_uri_is_refused_and_nothing_written_to_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir("/"))
    for uri in ("", "   "):
        with pytest.raises(InvalidInputError, match="URI must not be empty"):
            lf.write_dataset(T, uri)
        with pytest.raises(InvalidInputError):
            lf.dataset(uri)
    assert set(os.listdir("/")) == before


@pytest.mark.parametrize("version", [10**30, -1, 0, 2**64])
def test_out_of_range_versions_are_not_found(ds: lf.LanceDataset, version: int) -> None:
    with pytest.raises(VersionNotFoundError, match=f"version {version} does not exist"):
        lf.dataset(ds.uri, version=version)
    with pytest.raises(VersionNotFoundError):
        ds.checkout_version(version)


@pytest.mark.parametrize("version", [1.5, 1.0, b"1", True])
def test_non_integer_versions_are_invalid(ds: lf.LanceDataset, version: object) -> None:
    with pytest.raises(InvalidInputError, match=f"version must be an integer.*{type(version).__name__}"):
        lf.dataset(ds.uri, version=version)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        ds.checkout_version(version)  # type: ignore[arg-type]


# None is not here: as in pylance 14.0.2, it tags the checked-out version (tests/parity/test_api_small.py).
@pytest.mark.parametrize("version", [1.0, "1", b"1", -1, 10**30])
def test_tag_versions_of_wrong_type_or_range(ds: lf.LanceDataset, version: object) -> None:
    with pytest.raises(LanceError):
        ds.tags.create("t", version)  # type: ignore[arg-type]
    assert ds.tags.list() == {}


@pytest.mark.parametrize("hint", [b"garbage", b'{"version": 99999999999999999999}', b'{"version": -5}',
                                  b'{"version": 1e300}', b'{"version": 1000000}', b"[" * 100_000,
                                  b'{"version": true}', b"{" + b" " * 10_000 + b"}"])
def test_corrupt_or_absurd_hint_falls_back_to_listing(ds: lf.LanceDataset, hint: bytes) -> None:
    lf.write_dataset(T, ds.uri, mode="append")
    Path(ds.uri, "_versions", "latest_version_hint.json").write_bytes(hint)
    assert lf.dataset(ds.uri).version == 2
    assert lf.dataset(ds.uri).count_rows() == 6


@pytest.mark.parametrize("text", ["(" * 5000 + "a > 1" + ")" * 5000, "NOT " * 5000 + "a > 1",
                                  " OR ".join(f"(a = {i} AND b = 'x')" for i in range(5000))])
def test_deep_or_huge_filters_are_invalid_input(ds: lf.LanceDataset, text: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        ds.to_table(filter=text)
    assert len(str(info.value)) < 1000  # the message shows the filter shortened


@pytest.mark.parametrize("terms", [3000, 20_000])
def test_long_flat_filter_chains_work(ds: lf.LanceDataset, terms: int) -> None:
    # pylance takes generated OR chains of 20,000 equalities (issue 21); they become one is_in.
    text = " OR ".join(f"a = {i}" for i in range(terms))
    assert ds.to_table(filter=text).num_rows == lance.dataset(ds.uri).to_table(filter=text).num_rows == 3


@pytest.mark.parametrize("indices", [[1.5], [None], ["a"], [3], [-1], [2**70], [[0]]])
def test_take_with_bad_indices(ds: lf.LanceDataset, indices: list[object]) -> None:
    with pytest.raises(InvalidInputError, match="take"):
        ds.take(indices)  # type: ignore[arg-type]


@pytest.mark.parametrize("columns", [["a", "a"], ["zz"], "a", [1]])
def test_bad_columns_in_take_and_to_table(ds: lf.LanceDataset, columns: object) -> None:
    with pytest.raises(InvalidInputError):
        ds.take([0], columns=columns)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        ds.to_table(columns=columns)  # type: ignore[arg-type]


@pytest.mark.parametrize("endpoint", ["not a url", "http//x", "ftp://x", "http://[::1", "http://127.0.0.1:99999"])
def test_malformed_endpoint_is_invalid_input(tmp_path: Path, endpoint: str) -> None:
    opts = {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": "a",
            "aws_secret_access_key": "s", "aws_region": "us-east-1"}
    with pytest.raises(InvalidInputError, match="endpoint"):
        lf.write_dataset(T, "s3://bucket/x", storage_options=opts)


def test_append_with_other_storage_version_matches_pylance(tmp_path: Path) -> None:
    # pylance 14.0.2 keeps the dataset's data_storage_version and writes the new files in the
    # version the append asked for; a default append follows the dataset's version.
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lf.write_dataset(T, ours, data_storage_version="2.0")
    lance.write_dataset(T, theirs, data_storage_version="2.0")
    for uri, write in ((ours, lf.write_dataset), (theirs, lance.write_dataset)):
        write(T, uri, mode="append", data_storage_version="2.1")
        write(T, uri, mode="append")
    got = [(f.files[0].file_major_version, f.files[0].file_minor_version) for f in lf.dataset(ours).manifest.fragments]
    want = [(f.data_files()[0].file_major_version, f.data_files()[0].file_minor_version)
            for f in lance.dataset(theirs).get_fragments()]
    assert got == want == [(2, 0), (2, 1), (2, 0)]
    assert lf.dataset(ours).data_storage_version == lance.dataset(theirs).data_storage_version == "2.0"
    assert lance.dataset(ours).to_table().num_rows == 9
